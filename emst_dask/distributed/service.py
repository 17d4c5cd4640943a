"""The Dask service: EMST jobs on Dask workers, Zarr snapshots to edge stores.

``emst(source, client=..., out=...)`` checks the job on the client (the
source resolved, the output checked, the parameters), submits its three
tasks (``job``) to the least-loaded worker, relays its progress and returns
the tree or the ``EdgeStore``.  The tasks are pinned to that worker, so
the staged points and the tree never move, and the client watches it: if
it dies, the job is submitted again from its input on another worker (or
the restarted one), in-memory points sent again, until more workers died
than ``distributed.scheduler.allowed-failures`` or none is left within
``distributed.scheduler.no-workers-timeout`` (``WorkerLost``).  ``submit``
publishes a job's last future on the scheduler, so the job runs on when
its client leaves; ``get_job(name, client)`` finds it later.  Nobody
watches a detached job, so its tasks carry no worker restrictions: the
scheduler places them, and a worker that joins after every worker died
takes them up.  When a job ends, success or
failure, nothing of its dead attempts is left beside its output.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError, JobCancelled, WorkerLost
from ..io import resolve_output, resolve_source
from ..io.checks import check_backend, check_box_size, check_min_samples, source_box_size
from ..io.edge_store import check_edge_output
from ..io.output import new_token
from ..io.paths import is_pathlike, local_path
from ..io.resolve import visible_here
from ..io.source import DaskPoints, is_in_memory, parse_columns
from ..progress import ProgressBar, Relay, with_notices
from .client import (check_outputs_reachable, client_for, connect, no_workers_timeout,
                     workers_may_see_other_files, workers_of)
from .dispatch import WATCH_S, run_watched
from .faults import (Refused, in_user_terms, input_lost, input_lost_error, leave_temporaries,
                     lost_error, scheduler_lost, unwrap)
from .job import (DeferredSource, JobSpec, cluster_task, read_task, run_inline, slug, tree_task,
                  write_task)
from .paused import scatter

log = logging.getLogger(__name__)

#: prefix of the published-dataset name of a detached job
DATASET_PREFIX = "emst-job-"
#: resubmissions of a job whose in-memory input died with its worker
RESUBMIT_LOST_INPUT = 3


@dataclass
class Prepared:
    """A job checked on the client: its spec, and the data that travels
    beside it (in-memory points to scatter, or a dask array's source)."""

    spec: JobSpec
    data: Any = None

    @property
    def scattered(self) -> bool:
        """True when the client scatters the job's points (in memory, not a dask array)."""
        return self.spec.from_blocks and not isinstance(self.data, DaskPoints)


def prepare(source, *, out=None, name=None, min_samples=1, backend="auto",
            sort_by_weight=False, columns=None, array=None, overwrite=False,
            storage_options=None, out_storage_options=None, zarr_format=3,
            chunk_rows=None, threads=None, remote_ok=False, clusters=None,
            clusters_out=None, box_size=None) -> Prepared:
    """Check a job on the client and describe it; nothing is read.

    ``remote_ok``: a local path the client cannot see is left to the worker
    to resolve (a cluster whose workers see other files than the client),
    and so is the output's check.  ``clusters``: HDBSCAN* parameters (the
    job clusters its tree on the worker), ``clusters_out`` where the
    worker writes them.
    """
    check_backend(backend)
    check_min_samples(min_samples, 0)
    if box_size is not None and not isinstance(box_size, str):
        check_box_size(box_size, np.size(box_size))  # the form; the count once d is known
    token = new_token()
    columns = parse_columns(columns)
    data, from_blocks = None, False
    loc = local_path(source) if is_pathlike(source) else None
    if loc is not None and remote_ok and not visible_here(loc):
        src = DeferredSource(loc, array, columns, storage_options)
        job_source, where, location = src, src.describe(), loc
    else:
        src = resolve_source(source, array=array, columns=columns,
                             storage_options=storage_options)
        check_min_samples(min_samples, src.n)
        if clusters is not None and src.n < 1:
            raise InputError(f"{src.describe()}: holds no points; HDBSCAN* needs at least one")
        box_size = source_box_size(box_size, src)
        where, location = src.describe(), src.location
        if is_in_memory(source) or isinstance(src, DaskPoints):
            data, from_blocks = src, True
            job_source = src.metadata()
            if not isinstance(src, DaskPoints):
                job_source.chunks = [(0, src.n)]  # scattered as one block
        else:
            job_source = src
    out_local = local_path(out) if is_pathlike(out) else None
    # a parent this client cannot see may be the workers': they check it
    here = not (remote_ok and out_local is not None
                and not os.path.isdir(os.path.dirname(out_local)))
    output = resolve_output(out, overwrite=overwrite, zarr_format=zarr_format,
                            chunk_rows=chunk_rows, storage_options=out_storage_options,
                            source_location=location, token=token, check=here)
    check_edge_output(output, min_samples, box_size)
    clusters_output = None
    if clusters_out is not None:
        c_local = local_path(clusters_out) if is_pathlike(clusters_out) else None
        here = not (remote_ok and c_local is not None
                    and not os.path.isdir(os.path.dirname(c_local)))
        clusters_output = resolve_output(clusters_out, overwrite=overwrite,
                                         zarr_format=zarr_format,
                                         storage_options=out_storage_options,
                                         source_location=location, token=token, check=here,
                                         contents="clusters")
        if output is not None and output.local is not None \
                and output.local == clusters_output.local:
            raise InputError("the edge store and the clusters need two outputs")
    if name is None:
        base = os.path.basename(os.fspath(source).rstrip("/")) if is_pathlike(source) \
            else "job"
        name = f"{slug(base)}-{token}"
    elif not isinstance(name, str) or not name.strip() or len(name) > 200 \
            or any(not c.isprintable() for c in name):
        raise InputError(f"a job's name must be printable text of 1 to 200 characters, "
                         f"got {name!r}")
    spec = JobSpec(name=str(name), token=token, source=job_source, input=where, output=output,
                   min_samples=int(min_samples), backend=backend,
                   sort_by_weight=bool(sort_by_weight), threads=threads,
                   from_blocks=from_blocks, clusters=clusters, clusters_output=clusters_output,
                   box_size=box_size)
    return Prepared(spec, data)


def _block_args(client, prep: Prepared, worker):
    """The read task's block arguments: scattered points, or the dask array's
    block futures (computed by the cluster, moved to the worker by Dask)."""
    if not prep.spec.from_blocks:
        return []
    src = prep.data
    if isinstance(src, DaskPoints):
        return client.compute(src.delayed_blocks())
    return [scatter(client, np.asarray(src.data), [worker] if worker else None,
                    f"job {prep.spec.name!r}", prep.spec.output, hash=False)]


def submit_chain(client, prep: Prepared, worker=None, pinned=False):
    """Submit the job's tasks; the future of its result.

    ``worker`` is where they should run.  ``pinned``: only there (work
    stealing may not move them; the caller watches for the worker's death),
    else the scheduler may run them elsewhere, as it does when it dies.
    """
    spec = prep.spec
    kw = dict(pure=False, workers=[worker], allow_other_workers=not pinned) if worker \
        else dict(pure=False)
    args = _block_args(client, prep, worker)
    staged = client.submit(read_task, spec, *args, key=spec.key("read"), priority=0, **kw)
    tree = client.submit(tree_task, spec, staged, key=spec.key("boruvka"), priority=1, **kw)
    last = tree
    if spec.output is not None:
        last = client.submit(write_task, spec, tree, key=spec.key("write"), priority=2, **kw)
    if spec.clusters is not None:
        written = [] if spec.output is None else [last]
        last = client.submit(cluster_task, spec, tree, *written, key=spec.key("clusters"),
                             priority=3, **kw)
    return last


def cleanup(client, spec: JobSpec, exc=None):
    """Remove the temporaries of all of a job's attempts (here, where the
    output is visible; else on a worker), unless the job ended in ``exc``
    while one of its tasks may still run (``faults.writer_may_live``)."""
    if leave_temporaries(spec.name, exc, client):
        return
    for out in (spec.output, spec.clusters_output):
        if out is None or out.local is None:
            continue
        if os.path.isdir(os.path.dirname(out.local)):
            out.cleanup()
        elif client is not None:
            with contextlib.suppress(Exception):
                client.submit(out.cleanup, pure=False).result(timeout=30)


def run_job(cl, prep: Prepared, timeout=None):
    """Submit the job pinned to a worker and wait for it, watching that
    worker (``dispatch.run_watched``: a job whose worker dies runs again
    elsewhere, in-memory input sent again); its result, or its error in the
    user's terms."""
    spec = prep.spec
    deadline = None if timeout is None else time.monotonic() + timeout

    def submit(worker):
        return submit_chain(cl, prep, worker, pinned=True)

    ended = None
    try:
        while True:
            with in_user_terms(spec.name, spec.output, cl):
                try:
                    return unwrap(run_watched(cl, spec, submit, deadline, spec.output))
                except BaseException as exc:
                    if input_lost(exc, prep.scattered) and spec.attempt < RESUBMIT_LOST_INPUT:
                        spec.attempt += 1  # run_watched waits for a worker first
                        log.warning("job %s: its input died with its worker; submitting it "
                                    "again (%d)", spec.name, spec.attempt)
                        continue
                    ended = exc
                    raise
    finally:
        cleanup(cl, spec, ended)


def progress_callback(progress, label):
    """(callback, bar to close) for ``progress`` = True, a callable or None."""
    if progress is None or progress is False:
        return None, None
    if progress is True:
        bar = ProgressBar(label)
        return bar, bar
    if callable(progress):
        return progress, None
    raise InputError(f"progress must be True, False, None or a callable, got {progress!r}")


def emst(source, *, client=None, out=None, min_samples=1, box_size=None, backend="auto",
         sort_by_weight=False, progress=None, columns=None, array=None,
         overwrite=False, name=None, storage_options=None, out_storage_options=None,
         zarr_format=3, chunk_rows=None, threads=None, timeout=None, clusters=None,
         clusters_out=None):
    """The EMST of a point source, computed by a Dask worker (or in this process).

    Parameters are those of ``emst_dask.emst``; ``client`` as in
    ``emst_dask.distributed.client``: in-memory points without a client run
    in this process.

    ``clusters``: HDBSCAN* parameters; the job then also clusters its tree
    on the same worker and returns ``job.Clusters`` (written to
    ``clusters_out`` when given).

    Returns
    -------
    SpanningTree (host arrays), or EdgeStore with ``out=``, or Clusters.
    """
    if client is None and is_in_memory(source):
        client = False
    options = dict(out=out, name=name, min_samples=min_samples, backend=backend,
                   sort_by_weight=sort_by_weight, columns=columns, array=array,
                   overwrite=overwrite, storage_options=storage_options,
                   out_storage_options=out_storage_options, zarr_format=zarr_format,
                   chunk_rows=chunk_rows, threads=threads, clusters=clusters,
                   clusters_out=clusters_out, box_size=box_size)
    if client is None:  # check before an embedded cluster is started for nothing
        prepare(source, **options)
    with client_for(client, inline_ok=True, backend=backend) as cl:
        prep = prepare(source, remote_ok=workers_may_see_other_files(cl), **options)
        check_outputs_reachable(cl, prep.spec.output, prep.spec.clusters_output)
        callback, bar = progress_callback(progress, prep.spec.name)
        followed = callback is not None
        callback = with_notices(callback)
        if cl is None:
            blocks = []
            if prep.scattered:
                blocks = [prep.data.data]
            elif prep.spec.from_blocks:  # a dask array, computed here
                prep.spec.source, prep.spec.from_blocks = prep.data, False
            try:
                return run_inline(prep.spec, blocks, progress=callback)
            finally:
                if bar:
                    bar.close()
        relay = Relay(cl, prep.spec.topic, callback)
        try:
            res = run_job(cl, prep, timeout)
            if followed:  # the bar's last event may come just after the result
                relay.wait_done()
            return res
        finally:
            relay.close()
            if bar:
                bar.close()


# --------------------------------------------------------------------------
# detached jobs
# --------------------------------------------------------------------------
class Job:
    """A job running on a Dask cluster.

    ``name``; ``status()``: "queued", "running", "finished", "error",
    "cancelled" or "lost"; ``phase()``: the last progress event (dict);
    ``result(timeout)``: the ``EdgeStore`` (with ``out=``) or the
    ``SpanningTree``; ``cancel()``; ``forget()`` unpublishes it.
    """

    def __init__(self, name, future, client, info=None, published=False):
        self.name = name
        self.future = future
        self.client = client
        self.info = dict(info or {})
        self.published = published

    @property
    def topic(self):
        """The Dask event topic of the job's progress (None when unknown)."""
        return self.info.get("topic")

    def events(self) -> list:
        """Every progress event so far (dicts)."""
        if not self.topic:
            return []
        return [msg for _, msg in self.client.get_events(self.topic)]

    def phase(self) -> dict | None:
        """The last progress event."""
        ev = self.events()
        return dict(ev[-1]) if ev else None

    def status(self) -> str:
        """The job's state: "queued", "running", "error" (a refused input),
        "cancelled" (``cancel``), "lost" (its tasks died with its workers,
        its in-memory points or its scheduler) or the future's status
        ("finished", ...).  A future this client has just fetched
        (``get_job``) is pending until the scheduler tells it more: the
        scheduler is asked instead.
        """
        if self.info.get("cancelled"):
            return "cancelled"
        st = self.future.status
        if st == "cancelled":  # by the scheduler, which forgot its lost input, unless by a user
            return "cancelled" if self._cancelled_elsewhere() else "lost"
        if st == "pending":
            st = _SCHEDULER_STATES.get(self._scheduler_state(), "pending")
        if st in ("pending", "queued"):
            return "running" if self.events() else "queued"
        if st == "finished" and isinstance(self.future.result(timeout=60), Refused):
            return "error"
        return st

    def _scheduler_state(self):
        """The scheduler's state of the job's last task (None if unknown)."""
        key = self.future.key
        try:
            return self.client.sync(self.client.scheduler.get_task_status, keys=[key])[key]
        except Exception:  # an older scheduler, or none: the future's status stands
            return "unknown"

    def done(self) -> bool:
        """True once the job ended, whatever the outcome."""
        if self.info.get("cancelled") or self.future.done():
            return True
        return _SCHEDULER_STATES.get(self._scheduler_state()) in ("finished", "error", "lost")

    def result(self, timeout=None):
        """The job's result; its error in the user's terms (``JobCancelled``
        after ``cancel``, ``InputLost`` when its in-memory points died with
        their worker, ``WorkerLost`` when no worker is left within
        ``distributed.scheduler.no-workers-timeout``); ``TimeoutError``
        after ``timeout`` seconds."""
        if self.info.get("cancelled"):
            raise JobCancelled(self._cancelled())
        try:
            with in_user_terms(self.name, self.info.get("out"), self.client):
                return unwrap(self._wait(timeout))
        except WorkerLost:
            if self._cancelled_elsewhere():  # its future was cancelled, no worker lost
                raise JobCancelled(self._cancelled()) from None
            raise
        finally:
            if (self.future.done() or self.info.get("lost")) \
                    and self.info.get("output") is not None:
                spec = JobSpec(self.name, self.info["token"], None, "",
                               output=self.info["output"])
                cleanup(self.client, spec)  # left alone without the scheduler

    def _wait(self, timeout=None):
        """The future's result, asking the scheduler every ``WATCH_S`` about
        what the future cannot tell: a job whose tasks the scheduler forgot
        (its in-memory points died with their worker, its submitter gone)
        has a future that never finishes, and a job without workers waits
        for one for good when the scheduler sets no no-workers timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        forgotten = 0
        no_workers_since = None
        patience = None
        while True:
            step = WATCH_S if deadline is None else \
                max(0.0, min(WATCH_S, deadline - time.monotonic()))
            try:
                return self.future.result(timeout=step)
            except TimeoutError:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.name!r} did not finish within {timeout:g} s")
            # twice in a row: a key the scheduler forgot does not come back
            forgotten = forgotten + 1 if self._scheduler_state() in (None, "forgotten") else 0
            if forgotten >= 2:
                self.info["lost"] = True  # no task of it runs any more: its temporaries go
                raise self._lost()
            if scheduler_lost(None, self.client):
                raise lost_error(self.name, self.info.get("out"), None, self.client)
            if workers_of(self.client):
                no_workers_since = None
                continue
            now = time.monotonic()
            if no_workers_since is None:
                no_workers_since = now
                patience = patience or no_workers_timeout(self.client)
            elif now - no_workers_since > patience:
                out = self.info.get("out")
                wrote = "" if out is None else f"; {out} is not written yet"
                raise WorkerLost(f"job {self.name!r}: no worker was in the cluster for "
                                 f"{patience:g} s (distributed.scheduler.no-workers-timeout)"
                                 f"{wrote}; the job stays on the scheduler and runs when a "
                                 "worker joins: ask for its result again then")

    def _lost(self) -> WorkerLost:
        """The error of a job whose tasks the scheduler no longer knows."""
        out = self.info.get("out")
        if self.info.get("in_memory"):
            return input_lost_error(self.name, out)
        wrote = "" if out is None else f"; {out} was not written"
        return WorkerLost(f"job {self.name!r}: the scheduler no longer knows its tasks (their "
                          f"workers died with data that cannot be recomputed){wrote}; submit "
                          "it again")

    def cancel(self):
        """Stop the job: its future is cancelled on the scheduler, published
        or not, and the task running stops at its next progress report,
        removing its temporaries.  An output already in place stays (it is
        complete).  Other clients see the job as "cancelled"."""
        if self.info.get("cancelled"):
            return
        self.info["cancelled"] = time.time()
        if self.published:  # the record, without the future that kept the job alive
            self.client.publish_dataset(**{DATASET_PREFIX + self.name: {
                "future": None, "info": self.info}}, override=True)
        self.client.cancel([self.future], force=True)

    def _cancelled_elsewhere(self) -> bool:
        """Whether another client cancelled this published job: its record
        on the scheduler says so (this handle's ``info`` is the record as
        it was fetched)."""
        if not self.published:
            return False
        try:
            record = self.client.get_dataset(DATASET_PREFIX + self.name, default=None)
        except Exception:  # noqa: BLE001 - no scheduler to ask: the error stands
            return False
        when = (record or {}).get("info", {}).get("cancelled")
        if when:
            self.info["cancelled"] = when
        return bool(when)

    def _cancelled(self) -> str:
        out = self.info.get("out")
        msg = f"job {self.name!r} was cancelled"
        if out is None:
            return msg
        there = os.path.lexists(out) if self.info.get("output") is not None \
            and self.info["output"].local is not None else None
        if there:
            return f"{msg}; {out} was written before the cancellation reached its worker"
        return (f"{msg}; {out} " + ("is absent" if there is not None else "was not written")
                + ": its worker stops at its next progress report and leaves nothing")

    def forget(self):
        """Unpublish the job (it is then released when no client holds it)."""
        if self.published and self.client.status == "running":  # else gone with it
            with contextlib.suppress(KeyError):
                self.client.unpublish_dataset(DATASET_PREFIX + self.name)
        self.published = False

    def __repr__(self):
        return f"Job({self.name!r}, status={self.status()!r}, out={self.info.get('out')!r})"


def submit(source, *, out=None, client=None, name=None, min_samples=1, box_size=None,
           backend="auto", sort_by_weight=False, columns=None, array=None, overwrite=False,
           storage_options=None, out_storage_options=None, zarr_format=3, chunk_rows=None,
           threads=None, progress=None) -> Job:
    """Start a detached job and return its ``Job`` at once.

    The job's result future is published on the scheduler under the job's
    name, so it runs on after this client disconnects; another client finds
    it with ``get_job(name, client)``.  Give ``out=`` so the result is an
    edge store on disk rather than a tree held in cluster memory.
    """
    from distributed import default_client

    if client is None:
        try:
            client = default_client()
        except ValueError:
            raise InputError("submit needs a Dask cluster that outlives this process: pass "
                             "client=Client(...) or a scheduler address") from None
    cl, _own = connect(client)
    if name is not None and DATASET_PREFIX + str(name) in cl.list_datasets():
        raise InputError(f"a job named {name!r} exists on this scheduler; choose another "
                         "name or forget it first")
    prep = prepare(source, out=out, name=name, min_samples=min_samples, backend=backend,
                   sort_by_weight=sort_by_weight, columns=columns, array=array,
                   overwrite=overwrite, storage_options=storage_options,
                   out_storage_options=out_storage_options, zarr_format=zarr_format,
                   chunk_rows=chunk_rows, threads=threads, box_size=box_size,
                   remote_ok=workers_may_see_other_files(cl))
    check_outputs_reachable(cl, prep.spec.output)
    spec = prep.spec
    info = {"topic": spec.topic, "out": None if spec.output is None else str(spec.output),
            "output": spec.output, "input": spec.input, "submitted": spec.submitted,
            "token": spec.token, "min_samples": spec.min_samples,
            # scattered points: one copy, on one worker, that nobody sends again
            "in_memory": prep.scattered}
    # claim the name first: of two jobs submitted with one name at once,
    # one publishes and the other is told, before anything runs
    try:
        cl.publish_dataset(**{DATASET_PREFIX + spec.name: {"future": None, "info": info}})
    except KeyError:
        raise InputError(f"a job named {spec.name!r} exists on this scheduler; choose "
                         "another name or forget it first") from None
    try:
        callback, _bar = progress_callback(progress, spec.name)
        if callback:
            Relay(cl, spec.topic, callback)
        # unrestricted: a restriction to a worker that dies with every other
        # one would park the job for good (``dispatch``), and nobody watches it
        fut = submit_chain(cl, prep, None)
    except BaseException:  # the claim would hold the name for good
        with contextlib.suppress(Exception):
            cl.unpublish_dataset(DATASET_PREFIX + spec.name)
        raise
    cl.publish_dataset(**{DATASET_PREFIX + spec.name: {"future": fut, "info": info}},
                       override=True)
    return Job(spec.name, fut, cl, info, published=True)


def get_job(name: str, client) -> Job:
    """The detached job ``name`` (from ``submit``), seen from ``client``."""
    cl, _own = connect(client)
    try:
        data = cl.get_dataset(DATASET_PREFIX + name)
    except KeyError:
        raise LookupError(f"no job named {name!r} on this scheduler; jobs: "
                          f"{', '.join(list_jobs(cl)) or 'none'}") from None
    if data["future"] is None and not data["info"].get("cancelled"):
        raise LookupError(f"job {name!r} is being submitted; ask again in a moment")
    return Job(name, data["future"], cl, data["info"], published=True)


#: the scheduler's task states (``get_task_status``) as a job's status
_SCHEDULER_STATES = {"memory": "finished", "erred": "error", "processing": "pending",
                     "waiting": "queued", "queued": "queued", "no-worker": "queued",
                     "released": "queued", "forgotten": "lost", None: "lost"}


def list_jobs(client) -> list:
    """Names of the detached jobs published on the scheduler."""
    cl, _own = connect(client)
    return sorted(str(k)[len(DATASET_PREFIX):] for k in cl.list_datasets()
                  if str(k).startswith(DATASET_PREFIX))
