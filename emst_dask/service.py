"""The Dask service: EMST jobs on Dask workers, from Zarr snapshots to edge stores.

A job is three tasks on one worker, named per phase so that the dashboard
shows them (``emst-read-<token>-<name>``, ``emst-boruvka-...``,
``emst-write-...``):

1. *read*: open the source on the worker and stage it: the row blocks are
   read by a thread pool into host memory (CPU workers) or, on GPU workers,
   into pinned buffers copied asynchronously to the device while the next
   blocks are read; every block is checked for NaN/inf before any kernel runs;
2. *boruvka*: ``emst_dask.emst`` on the staged array with the worker's
   backend (CUDA on dask-cuda workers, numba otherwise);
3. *write* (with ``out=``): the edge store, written by the worker (temporary
   sibling renamed into place, ``complete`` last); the client gets back a
   small ``EdgeStore`` handle, never the edges.  Without ``out=`` the
   *boruvka* task's tree (host arrays) is the result.

The three tasks are pinned (loosely) to one worker, so the staged points and
the tree never move; if that worker dies, Dask reruns the job elsewhere from
its input.  ``emst_many`` keeps at most one job per worker (one per GPU on a
dask-cuda cluster).  Progress travels as Dask events on the job's topic;
``submit`` publishes the job's last future on the scheduler, so the job runs
on when its client leaves and ``get_job(name, client)`` finds it later.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import io as _io
from .io import PointSource, open_points
from .progress import ProgressBar, Relay
from .result import SpanningTree
from .store import EdgeStore, _host_tree, check_out, is_npy, write_edges
from .validation import InputError, check_min_samples

log = logging.getLogger(__name__)

#: prefix of the published-dataset name of a detached job
DATASET_PREFIX = "emst-job-"
#: phases whose task keys the dashboard shows
PHASES = ("read", "boruvka", "write")


# --------------------------------------------------------------------------
# the job description that travels to the worker
# --------------------------------------------------------------------------
@dataclass
class DeferredSource:
    """A path the client cannot see; opened and checked on the worker."""

    path: str
    array: str | None = None
    columns: tuple | None = None
    storage_options: dict | None = None

    def open(self) -> PointSource:
        return open_points(self.path, array=self.array, columns=self.columns,
                           storage_options=self.storage_options)

    def describe(self) -> str:
        if self.columns:
            return f"{self.path}[{','.join(self.columns)}]"
        return self.path if self.array is None else f"{self.path}/{self.array}"


@dataclass
class JobSpec:
    name: str
    token: str
    source: Any                  # PointSource (metadata when blocks travel as deps) or DeferredSource
    input: str                   # what the edge store records as its input
    out: Any = None
    overwrite: bool = False
    min_samples: int = 1
    backend: str = "auto"
    sort_by_weight: bool = False
    zarr_format: int = 3
    chunk_rows: int | None = None
    threads: int | None = None
    storage_options: dict | None = None  # of ``out``
    from_blocks: bool = False    # the read task gets the row blocks as arguments
    submitted: float = field(default_factory=time.time)
    attempt: int = 0             # > 0: resubmitted after its in-memory input was lost

    @property
    def topic(self) -> str:
        return f"emst-progress-{self.token}"

    def key(self, phase: str) -> str:
        again = f"-again{self.attempt}" if self.attempt else ""
        return f"emst-{phase}-{self.token}-{_slug(self.name)}{again}"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", str(name))[:60] or "job"


def _new_token() -> str:
    return uuid.uuid4().hex[:8]


# --------------------------------------------------------------------------
# the worker side
# --------------------------------------------------------------------------
class _Reporter:
    """``report(phase, **info)``: a Dask event on a worker, and/or a call."""

    def __init__(self, spec: JobSpec, callback=None):
        self.topic = spec.topic
        self.job = spec.name
        self.callback = callback
        self.worker = None
        try:
            from distributed import get_worker

            self.worker = get_worker()
        except (ImportError, ValueError):
            pass
        self._last = 0.0

    @property
    def address(self):
        return None if self.worker is None else self.worker.address

    def __call__(self, phase, **info):
        info = {k: _plain(v) for k, v in info.items()}
        if phase in ("read", "write"):  # at most ~10 a second, the last always
            t = time.monotonic()
            if info.get("rows", 0) < info.get("total", 0) and info.get("rows", 0) > 0 \
                    and t - self._last < 0.1:
                return
            self._last = t
        if self.worker is not None:
            try:
                self.worker.log_event(self.topic, {"phase": phase, "job": self.job,
                                                   "time": time.time(), **info})
            except Exception:  # progress must never fail a job
                log.debug("could not log a progress event", exc_info=True)
        if self.callback is not None:
            self.callback(phase, **info)


def _plain(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _open_source(spec: JobSpec, blocks):
    src = spec.source
    if isinstance(src, DeferredSource):
        src = src.open()
    if spec.from_blocks:
        src = _io.BlockPoints(blocks, src)
    return src


def _do_read(spec: JobSpec, blocks, report):
    from .kernels import resolve_backend

    t0 = time.perf_counter()
    src = _open_source(spec, blocks)
    backend = resolve_backend(spec.backend)
    check_min_samples(spec.min_samples, src.n)
    report("start", n=src.n, d=src.d, backend=backend, worker=report.address or "",
           input=spec.input)
    staged = _io.stage(src, backend, threads=spec.threads, report=report)
    return staged, time.perf_counter() - t0


def _do_boruvka(spec: JobSpec, staged, read_seconds, report) -> SpanningTree:
    from .api import emst as _emst

    report("tree")
    t0 = time.perf_counter()
    tree = _emst(staged, min_samples=spec.min_samples, backend=spec.backend,
                 sort_by_weight=spec.sort_by_weight, progress=report)
    tree.timings = dict(tree.timings or {})
    tree.timings["read"] = float(read_seconds)
    tree.timings["emst"] = time.perf_counter() - t0
    return tree


def _do_write(spec: JobSpec, tree: SpanningTree, report) -> EdgeStore:
    return write_edges(spec.out, tree, input=spec.input, overwrite=spec.overwrite,
                       chunk_rows=spec.chunk_rows, zarr_format=spec.zarr_format,
                       threads=spec.threads, report=report,
                       storage_options=spec.storage_options,
                       extra_attrs={"job": spec.name, "sorted_by_weight": spec.sort_by_weight})


def _done(spec, report, tree):
    report("done", seconds=time.time() - spec.submitted, total_weight=tree.total_weight,
           n_edges=tree.n_edges)


def _guarded(report, fn, *args):
    try:
        return fn(*args)
    except BaseException as exc:
        report("error", message=f"{type(exc).__name__}: {exc}")
        raise


def _read_task(spec: JobSpec, *blocks):
    report = _Reporter(spec)
    return _guarded(report, _do_read, spec, blocks, report)


def _boruvka_task(spec: JobSpec, staged):
    report = _Reporter(spec)

    def run():
        points, seconds = staged
        tree = _do_boruvka(spec, points, seconds, report)
        if spec.out is None:
            tree = _host_tree(tree)
            _done(spec, report, tree)
        return tree

    return _guarded(report, run)


def _write_task(spec: JobSpec, tree):
    report = _Reporter(spec)

    def run():
        store = _do_write(spec, tree, report)
        _done(spec, report, tree)
        return store

    return _guarded(report, run)


def run_inline(spec: JobSpec, blocks=(), progress=None):
    """The whole job in this process (no Dask): read, Borůvka, write."""
    report = _Reporter(spec, callback=progress)
    report.worker = None

    def run():
        staged = _do_read(spec, blocks, report)
        tree = _do_boruvka(spec, staged[0], staged[1], report)
        if spec.out is None:
            tree = _host_tree(tree)
            _done(spec, report, tree)
            return tree
        store = _do_write(spec, tree, report)
        _done(spec, report, tree)
        return store

    return _guarded(report, run)


def _register_sizeof():
    try:
        from dask.sizeof import sizeof

        @sizeof.register(SpanningTree)
        def _sizeof_tree(t):
            return int(sum(getattr(a, "nbytes", 0) for a in
                           (t.source, t.target, t.weight, t.core_distances) if a is not None))
    except Exception:  # pragma: no cover
        pass


_register_sizeof()


# --------------------------------------------------------------------------
# the client side
# --------------------------------------------------------------------------
def _workers_may_see_other_files(client) -> bool:
    """True unless the scheduler runs on this machine (then a path missing
    here is missing for the workers too, and the client says so at once)."""
    import socket
    from urllib.parse import urlparse

    if client in (None, False):
        return False
    try:
        host = urlparse(client.scheduler.address).hostname
    except Exception:
        return True
    if host in ("127.0.0.1", "localhost", "::1", None):
        return False
    try:
        mine = {socket.gethostname(), socket.getfqdn()}
        mine |= {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return True
    return host not in mine


def _is_memory_array(source) -> bool:
    mod = type(source).__module__
    return isinstance(source, np.ndarray) or mod.startswith("cupy")


def _is_dask_array(source) -> bool:
    return type(source).__module__.startswith("dask.array")


@dataclass
class _Prepared:
    spec: JobSpec
    data: Any = None   # in-memory points to scatter, or a DaskPoints


def prepare(source, *, out=None, name=None, min_samples=1, backend="auto",
            sort_by_weight=False, columns=None, array=None, overwrite=False,
            storage_options=None, out_storage_options=None, zarr_format=3,
            chunk_rows=None, threads=None, remote_ok=False) -> _Prepared:
    """Check a job on the client side and describe it (no data read).

    ``remote_ok``: a local path the client cannot see is left to the worker
    to open (a cluster whose workers see other files than the client).
    """
    if backend not in ("auto", "cpu", "cuda"):
        raise InputError(f"unknown backend {backend!r}: expected 'auto', 'cpu' or 'cuda'")
    if zarr_format not in (2, 3):
        raise InputError(f"zarr_format must be 2 or 3, got {zarr_format!r}")
    check_min_samples(min_samples, 0)
    check_out(out, overwrite)
    if out is not None and _io.is_pathlike(out) and not is_npy(out):
        out = _io.local_path(out) or os.fspath(out)
    elif out is not None and is_npy(out):
        out = _io.local_path(out)
    token = _new_token()
    data = None
    from_blocks = False
    columns = _io.parse_columns(columns)
    if _is_memory_array(source) or _is_dask_array(source):
        src = open_points(source, array=array, columns=columns)
        data = src
        from_blocks = True
        meta = PointSource(n=src.n, d=src.d, dtype=src.dtype,
                           compute_dtype=src.compute_dtype, where=src.where,
                           chunks=[(0, src.n)] if not _is_dask_array(source) else src.chunks)
        if not _is_dask_array(source):
            meta.where = f"points ({src.n}, {src.d}) {src.dtype}"
            meta.kind = "block"
        check_min_samples(min_samples, src.n)
        source_desc, job_source = meta.where, meta
    elif _io.is_pathlike(source):
        loc = _io.local_path(source)
        if loc is not None and not os.path.exists(loc) and remote_ok:
            job_source = DeferredSource(loc, array, columns, storage_options)
            source_desc = job_source.describe()
        else:
            job_source = open_points(source, array=array, columns=columns,
                                     storage_options=storage_options)
            check_min_samples(min_samples, job_source.n)
            source_desc = job_source.describe()
    else:
        job_source = open_points(source, array=array, columns=columns,
                                 storage_options=storage_options)
        check_min_samples(min_samples, job_source.n)
        source_desc = job_source.describe()
    if name is None:
        base = os.path.basename(os.fspath(source).rstrip("/")) if _io.is_pathlike(source) \
            else "job"
        name = f"{_slug(base)}-{token}"
    spec = JobSpec(name=str(name), token=token, source=job_source, input=source_desc, out=out,
                   overwrite=overwrite, min_samples=int(min_samples), backend=backend,
                   sort_by_weight=bool(sort_by_weight), zarr_format=int(zarr_format),
                   chunk_rows=chunk_rows, threads=threads,
                   storage_options=out_storage_options, from_blocks=from_blocks)
    return _Prepared(spec, data)


def _block_args(client, prep: _Prepared, worker):
    """The read task's block arguments: scattered points, or the dask array's
    block futures (computed by the cluster, moved to the worker by Dask)."""
    if not prep.spec.from_blocks:
        return []
    src = prep.data
    if isinstance(src, _io.DaskPoints):
        return client.compute(src.delayed_blocks())
    data = src.data
    if type(data).__module__.startswith("cupy"):  # pragma: no cover - GPU clients
        data = data.get()
    return [client.scatter(np.asarray(data), workers=[worker] if worker else None,
                           hash=False)]


def _submit_chain(client, prep: _Prepared, worker=None):
    """Submit the job's tasks; return the future of its result."""
    spec = prep.spec
    kw = dict(pure=False, workers=[worker], allow_other_workers=True) if worker \
        else dict(pure=False)
    args = _block_args(client, prep, worker)
    staged = client.submit(_read_task, spec, *args, key=spec.key("read"), priority=0, **kw)
    tree = client.submit(_boruvka_task, spec, staged, key=spec.key("boruvka"), priority=1, **kw)
    if spec.out is None:
        return tree
    return client.submit(_write_task, spec, tree, key=spec.key("write"), priority=2, **kw)


class WorkerLost(RuntimeError):
    """A job whose worker died and that no remaining worker could take over."""


#: resubmissions of a job whose in-memory input died with its worker
RESUBMIT_LOST_INPUT = 3


def _lost_error(name, out, exc):
    """A ``WorkerLost`` explaining ``exc`` when it means the job died with its
    workers (None for any other error)."""
    try:
        from distributed.scheduler import KilledWorker, NoValidWorkerError, NoWorkerError
    except ImportError:  # pragma: no cover
        return None
    from distributed.utils import CancelledError

    wrote = "" if out is None else f"; {out} was not written"
    if isinstance(exc, NoWorkerError):
        return WorkerLost(f"job {name!r}: its worker died and no worker was left to rerun it "
                          f"within {exc.timeout:g} s (distributed.scheduler.no-workers-timeout)"
                          f"{wrote}; its input is untouched: submit it again when workers "
                          "are back")
    if isinstance(exc, NoValidWorkerError):
        return WorkerLost(f"job {name!r}: no worker can run it (none left, or none meets its "
                          f"restrictions) within {exc.args[4]:g} s{wrote}")
    if isinstance(exc, KilledWorker):
        return WorkerLost(f"job {name!r}: {exc.allowed_failures + 1} workers died while running "
                          f"it (distributed.scheduler.allowed-failures = {exc.allowed_failures}),"
                          f" the last {exc.last_worker.address}; the job may be what kills them "
                          f"(out of memory?){wrote}")
    if isinstance(exc, CancelledError) and getattr(exc, "reason", "") not in _NOT_LOST:
        return WorkerLost(f"job {name!r}: its worker died with the job's in-memory input and "
                          f"no worker was left to run it again ({exc}){wrote}")
    return None


def _input_lost(prep: _Prepared, exc) -> bool:
    """The job's scattered points died with their worker: the client, which
    still holds them, can submit the job again."""
    from distributed.utils import CancelledError

    return (isinstance(exc, CancelledError) and prep.spec.from_blocks
            and not isinstance(prep.data, _io.DaskPoints)
            and getattr(exc, "reason", "") not in _NOT_LOST)


#: reasons of a cancelled future that do not mean lost data
_NOT_LOST = ("scheduler-connection-lost", "scheduler-restart")


def _job_load(dask_scheduler=None):
    """Unfinished emst jobs per worker (run on the scheduler)."""
    load = {w: set() for w in dask_scheduler.workers}
    for key, ts in dask_scheduler.tasks.items():
        if not (isinstance(key, str) and key.startswith("emst-")):
            continue
        if ts.state in ("memory", "erred", "released", "forgotten"):
            continue
        token = key.split("-")[2] if key.count("-") >= 2 else key
        targets = set(ts.worker_restrictions or ())
        if ts.processing_on is not None:
            targets.add(ts.processing_on.address)
        for w in targets:
            if w in load:
                load[w].add(token)
    return {w: len(t) for w, t in load.items()}


def workers_of(client) -> list:
    # asked of the scheduler directly: Client.scheduler_info() returns a cache
    # that the client's periodic refresh replaces with a worker-less summary,
    # so under load it sometimes said "no workers" (seen in tests/test_load.py)
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1)
    except Exception:  # older distributed
        info = client.scheduler_info()
    return sorted(info.get("workers", {}))


def pick_worker(client):
    """The worker with the fewest unfinished emst jobs (None if none yet)."""
    workers = workers_of(client)
    if not workers:
        return None
    try:
        load = client.run_on_scheduler(_job_load)
    except Exception:
        load = {w: len(k) for w, k in client.processing().items()}
    return min(workers, key=lambda w: (load.get(w, 0), w))


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
        return self.info.get("topic")

    def events(self) -> list:
        if not self.topic:
            return []
        return [msg for _, msg in self.client.get_events(self.topic)]

    def phase(self) -> dict | None:
        ev = self.events()
        return dict(ev[-1]) if ev else None

    def status(self) -> str:
        st = self.future.status
        if st == "pending":
            return "running" if self.events() else "queued"
        return st

    def done(self) -> bool:
        return self.future.done()

    def result(self, timeout=None):
        try:
            return self.future.result(timeout=timeout)
        except Exception as exc:
            lost = _lost_error(self.name, self.info.get("out"), exc)
            if lost is not None:
                raise lost from exc
            raise

    def exception(self, timeout=None):
        return self.future.exception(timeout=timeout)

    def cancel(self):
        self.future.cancel()

    def forget(self):
        """Unpublish the job (it is then released when no client holds it)."""
        if self.published:
            with contextlib.suppress(KeyError):
                self.client.unpublish_dataset(DATASET_PREFIX + self.name)
            self.published = False

    def __repr__(self):
        return f"Job({self.name!r}, status={self.status()!r}, out={self.info.get('out')!r})"


def _connect(client):
    """A Client from an address, a scheduler file, or a Client."""
    from distributed import Client

    if isinstance(client, Client):
        return client, False
    if isinstance(client, (str, os.PathLike)):
        s = os.fspath(client)
        if s.endswith(".json") and os.path.exists(s):
            return Client(scheduler_file=s, set_as_default=False), True
        return Client(s, set_as_default=False), True
    raise InputError(f"client must be a distributed.Client, a scheduler address or a "
                     f"scheduler file, got {client!r}")


@contextlib.contextmanager
def client_for(client, *, inline_ok=False, backend="auto", n_workers=None):
    """Yield the Client a call runs on (None: run in this process).

    ``client``: a Client, an address or scheduler file (connected, then
    closed), ``False`` (in this process, no Dask), or None: the current
    default Client if there is one, else an embedded cluster for the call.
    """
    if client is False:
        if not inline_ok:
            raise InputError("this call needs a Dask cluster; client=False runs nothing")
        yield None
        return
    if client is None:
        try:
            from distributed import default_client

            yield default_client()
            return
        except ValueError:
            with EmbeddedCluster(n_workers=n_workers, backend=backend) as emb:
                yield emb.client
            return
    cl, own = _connect(client)
    try:
        yield cl
    finally:
        if own:
            cl.close()


def _progress_callback(progress, label):
    if progress is None or progress is False:
        return None, None
    if progress is True:
        bar = ProgressBar(label)
        return bar, bar
    if callable(progress):
        return progress, None
    raise InputError(f"progress must be True, False, None or a callable, got {progress!r}")


def emst(source, *, client=None, out=None, min_samples=1, backend="auto",
         sort_by_weight=False, progress=None, columns=None, array=None,
         overwrite=False, name=None, storage_options=None, out_storage_options=None,
         zarr_format=3, chunk_rows=None, threads=None, timeout=None):
    """The EMST of a point source, computed by a Dask worker (or in this process).

    ``source``: a Zarr store path/URL (v2 or v3), ``zarr.Array`` or
    ``zarr.Group`` (``array=`` names its (n, d) member, ``columns=`` its
    1-D coordinate members), a .npy path, a dask array, or a numpy/cupy
    array.  ``client``: see ``client_for``; in-memory points without a
    client run in this process.  ``out``: where the worker writes the edge
    store (Zarr, or .npy); then an ``EdgeStore`` is returned, else a
    ``SpanningTree`` (host arrays).  ``progress``: True for a progress bar,
    or ``callable(phase, **info)`` (phases in ``emst_dask.progress``).
    """
    if client is None and (_is_memory_array(source)):
        client = False
    options = dict(out=out, name=name, min_samples=min_samples, backend=backend,
                   sort_by_weight=sort_by_weight, columns=columns, array=array,
                   overwrite=overwrite, storage_options=storage_options,
                   out_storage_options=out_storage_options, zarr_format=zarr_format,
                   chunk_rows=chunk_rows, threads=threads)
    if client is None:  # check before an embedded cluster is started for nothing
        prepare(source, **options)
    with client_for(client, inline_ok=True, backend=backend) as cl:
        prep = prepare(source, remote_ok=_workers_may_see_other_files(cl), **options)
        callback, bar = _progress_callback(progress, prep.spec.name)
        if cl is None:
            blocks = [prep.data.data] if prep.spec.from_blocks and \
                not isinstance(prep.data, _io.DaskPoints) else []
            if isinstance(prep.data, _io.DaskPoints):
                prep.spec.source = prep.data
                prep.spec.from_blocks = False
            return run_inline(prep.spec, blocks, progress=callback)
        relay = Relay(cl, prep.spec.topic, callback) if callback else None
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                fut = _submit_chain(cl, prep, pick_worker(cl))
                try:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    res = fut.result(timeout=left)
                    break
                except BaseException as exc:
                    fut.cancel()
                    if _input_lost(prep, exc) and prep.spec.attempt < RESUBMIT_LOST_INPUT \
                            and workers_of(cl):
                        prep.spec.attempt += 1
                        log.warning("job %s: its input died with its worker; submitting it "
                                    "again (%d)", prep.spec.name, prep.spec.attempt)
                        continue
                    lost = _lost_error(prep.spec.name, prep.spec.out, exc)
                    if lost is not None:
                        raise lost from exc
                    raise
            if relay:
                relay.wait_done()
            return res
        finally:
            if relay:
                relay.close()
            if bar:
                bar.close()


def submit(source, *, out=None, client=None, name=None, min_samples=1, backend="auto",
           sort_by_weight=False, columns=None, array=None, overwrite=False,
           storage_options=None, out_storage_options=None, zarr_format=3, chunk_rows=None,
           threads=None, progress=None) -> Job:
    """Start a detached job and return its ``Job`` at once.

    The job's result future is published on the scheduler under the job's
    name, so it runs on after this client disconnects; another client finds
    it with ``get_job(name, client)``.  Give ``out=`` so the result is an
    edge store on disk rather than a tree held in cluster memory.
    """
    from distributed import Client, default_client

    if client is None:
        try:
            client = default_client()
        except ValueError:
            raise InputError("submit needs a Dask cluster that outlives this process: pass "
                             "client=Client(...) or a scheduler address") from None
    cl, _own = _connect(client)
    if name is not None:
        if DATASET_PREFIX + str(name) in cl.list_datasets():
            raise InputError(f"a job named {name!r} exists on this scheduler; choose another "
                             "name or forget it first")
    prep = prepare(source, out=out, name=name, min_samples=min_samples, backend=backend,
                   sort_by_weight=sort_by_weight, columns=columns, array=array,
                   overwrite=overwrite, storage_options=storage_options,
                   out_storage_options=out_storage_options, zarr_format=zarr_format,
                   chunk_rows=chunk_rows, threads=threads,
                   remote_ok=_workers_may_see_other_files(cl))
    spec = prep.spec
    callback, _bar = _progress_callback(progress, spec.name)
    if callback:
        Relay(cl, spec.topic, callback)
    fut = _submit_chain(cl, prep, pick_worker(cl))
    info = {"topic": spec.topic, "out": None if spec.out is None else str(spec.out),
            "input": spec.input, "submitted": spec.submitted, "token": spec.token,
            "min_samples": spec.min_samples}
    cl.publish_dataset(**{DATASET_PREFIX + spec.name: {"future": fut, "info": info}})
    assert isinstance(cl, Client)
    return Job(spec.name, fut, cl, info, published=True)


def get_job(name: str, client) -> Job:
    """The detached job ``name`` (from ``submit``), seen from ``client``."""
    cl, _own = _connect(client)
    try:
        data = cl.get_dataset(DATASET_PREFIX + name)
    except KeyError:
        raise LookupError(f"no job named {name!r} on this scheduler; jobs: "
                          f"{', '.join(list_jobs(cl)) or 'none'}") from None
    return Job(name, data["future"], cl, data["info"], published=True)


def list_jobs(client) -> list:
    """Names of the detached jobs published on the scheduler."""
    cl, _own = _connect(client)
    return sorted(str(k)[len(DATASET_PREFIX):] for k in cl.list_datasets()
                  if str(k).startswith(DATASET_PREFIX))


def emst_many(sources, outs=None, *, client=None, min_samples=1, backend="auto",
              sort_by_weight=False, columns=None, array=None, overwrite=False,
              storage_options=None, zarr_format=3, chunk_rows=None, threads=None,
              progress=None, errors="raise", n_workers=None, names=None) -> list:
    """The EMST of every source, one job per worker at a time.

    ``outs``: None (the trees come back) or one output per source (each
    worker writes its store; ``EdgeStore`` handles come back).  Results are
    in the order of ``sources``.  ``errors="raise"`` stops at the first
    failure (cancelling the jobs under way); ``"return"`` puts the exception
    in its place and carries on.  Without a client, an embedded cluster of
    ``n_workers`` workers (default: one per GPU, or up to 4 CPU workers)
    runs the batch.  ``progress``: True (a bar over the snapshots) or
    ``callable(phase, job=index, **info)``.
    """
    sources = list(sources)
    if errors not in ("raise", "return"):
        raise InputError(f"errors must be 'raise' or 'return', got {errors!r}")
    if outs is not None:
        outs = list(outs)
        if len(outs) != len(sources):
            raise InputError(f"{len(sources)} sources but {len(outs)} outputs")
        real = [os.path.abspath(o) for o in outs if _io.is_pathlike(o)]
        if len(set(real)) != len(real):
            raise InputError("two sources would write the same output")
    if names is not None and len(names) != len(sources):
        raise InputError(f"{len(sources)} sources but {len(names)} names")
    owned = None
    if client not in (None, False):
        client, own = _connect(client)
        owned = client if own else None
    try:
        return _emst_many(sources, outs, client, min_samples, backend, sort_by_weight, columns,
                          array, overwrite, storage_options, zarr_format, chunk_rows, threads,
                          progress, errors, n_workers, names)
    finally:
        if owned is not None:
            owned.close()


def _emst_many(sources, outs, client, min_samples, backend, sort_by_weight, columns, array,
               overwrite, storage_options, zarr_format, chunk_rows, threads, progress, errors,
               n_workers, names):
    results: list = [None] * len(sources)
    preps = {}
    remote_ok = _workers_may_see_other_files(client) if client not in (None, False) else False
    for i, src in enumerate(sources):
        try:
            preps[i] = prepare(src, out=None if outs is None else outs[i],
                               name=None if names is None else names[i],
                               min_samples=min_samples, backend=backend,
                               sort_by_weight=sort_by_weight, columns=columns, array=array,
                               overwrite=overwrite, storage_options=storage_options,
                               zarr_format=zarr_format, chunk_rows=chunk_rows,
                               threads=threads, remote_ok=remote_ok)
        except Exception as exc:
            if errors == "raise":
                raise
            results[i] = exc
    if not preps:
        return results
    if n_workers is None and client is None:
        n_workers = max(1, min(len(preps), 4, (os.cpu_count() or 1) // 2))
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(sources), desc="snapshots", unit="job", dynamic_ncols=True)
        bar.update(len(sources) - len(preps))

        def callback(phase, job=None, **info):
            if phase in ("start", "iteration", "write"):
                what = {"start": "read", "iteration": f"boruvka it {info.get('iteration')}",
                        "write": "write"}[phase]
                bar.set_postfix_str(f"job {job}: {what}", refresh=True)
    elif callable(progress):
        callback = progress
    elif progress in (None, False):
        callback = None
    else:
        raise InputError(f"progress must be True, False, None or a callable, got {progress!r}")

    with client_for(client, inline_ok=True, backend=backend, n_workers=n_workers) as cl:
        try:
            if cl is None:
                for i, prep in preps.items():
                    cb = None if callback is None else _bind(callback, i)
                    try:
                        if prep.spec.from_blocks and isinstance(prep.data, _io.DaskPoints):
                            prep.spec.source, prep.spec.from_blocks = prep.data, False
                        blocks = [prep.data.data] if prep.spec.from_blocks else []
                        results[i] = run_inline(prep.spec, blocks, progress=cb)
                    except Exception as exc:
                        if errors == "raise":
                            raise
                        results[i] = exc
                    if bar:
                        bar.update(1)
                return results
            _dispatch(cl, preps, results, callback, errors, bar)
            return results
        finally:
            if bar:
                bar.close()


def _bind(callback, i):
    def cb(phase, **info):
        callback(phase, job=i, **info)
    return cb


def _dispatch(cl, preps, results, callback, errors, bar):
    """At most one job per worker; a finished job's worker takes the next."""
    from distributed import as_completed

    pending = deque(sorted(preps))
    running = {}     # future -> (index, worker)
    relays = []
    ac = as_completed(loop=cl.loop)

    def fill():
        workers = workers_of(cl)
        busy = {w for _, w in running.values()}
        for w in workers:
            if not pending:
                return
            if w in busy:
                continue
            i = pending.popleft()
            if callback is not None and not preps[i].spec.attempt:
                relays.append(Relay(cl, preps[i].spec.topic, _bind(callback, i)))
            fut = _submit_chain(cl, preps[i], w)
            running[fut] = (i, w)
            ac.add(fut)

    try:
        while pending or running:
            if not running:
                cl.wait_for_workers(1, timeout=120)
            fill()
            if not running:
                continue
            fut = next(ac)
            i, _w = running.pop(fut)
            try:
                results[i] = fut.result()
            except Exception as exc:
                spec = preps[i].spec
                if _input_lost(preps[i], exc) and spec.attempt < RESUBMIT_LOST_INPUT \
                        and workers_of(cl):
                    spec.attempt += 1
                    pending.appendleft(i)
                    continue
                lost = _lost_error(spec.name, spec.out, exc)
                if errors == "raise":
                    for f in running:
                        f.cancel()
                    if lost is not None:
                        raise lost from exc
                    raise
                results[i] = lost or exc
            if bar:
                bar.update(1)
    finally:
        for r in relays:
            r.close()


# --------------------------------------------------------------------------
# the embedded default cluster
# --------------------------------------------------------------------------
def _visible_gpus() -> int:
    """GPUs a LocalCUDACluster would start one worker each for."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([v for v in vis.split(",") if v.strip()])
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 1


class EmbeddedCluster:
    """A cluster on this machine for as long as the ``with`` block lasts.

    GPUs visible (``emst_dask.kernels.cuda_available()``) and ``backend`` not
    "cpu": a dask-cuda ``LocalCUDACluster``, one single-threaded worker per
    GPU.  Otherwise a ``LocalCluster`` of single-threaded worker processes;
    ``n_workers`` defaults to 1, which gives one job all the cores.  Either
    way the numba kernels (the CPU backend, and the host-side steps of the
    partitioned path on GPU workers) bring their own threads: each worker
    gets ``NUMBA_NUM_THREADS = cores // n_workers`` so workers do not
    oversubscribe the cores.

    ``device_pool`` (GPU workers): reserve this fraction of each GPU's free
    memory (or bytes) in the worker's CuPy pool at start
    (``emst_dask.worker.reserve_device_pool``), so that no job pays for
    growing it; None leaves the pool to grow on demand.
    """

    def __init__(self, n_workers=None, *, backend="auto", dashboard_address=":0",
                 silence_logs=logging.WARNING, device_pool=None, **cluster_kwargs):
        from .kernels import cuda_available

        self.device_pool = device_pool
        self.backend = backend
        self.gpu = backend != "cpu" and cuda_available()
        self.n_workers = n_workers
        self.dashboard_address = dashboard_address
        self.silence_logs = silence_logs
        self.cluster_kwargs = cluster_kwargs
        self.cluster = None
        self.client = None

    def start(self):
        from distributed import Client

        import dask

        cores = os.cpu_count() or 1
        if self.gpu:
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise RuntimeError("a GPU is visible but dask-cuda is not installed: pip "
                                   "install 'emst-dask[cuda]', or pass backend='cpu'") from None
            n = self.n_workers or _visible_gpus()
            env = {"NUMBA_NUM_THREADS": str(max(1, cores // max(1, n)))}
            env.update(self.cluster_kwargs.pop("env", {}))
            kw = dict(threads_per_worker=1, dashboard_address=self.dashboard_address,
                      silence_logs=self.silence_logs, env=env)
            if self.n_workers:
                kw["n_workers"] = self.n_workers
            kw.update(self.cluster_kwargs)
            with dask.config.set({"distributed.nanny.pre-spawn-environ": {
                    **dask.config.get("distributed.nanny.pre-spawn-environ", {}), **env}}):
                self.cluster = LocalCUDACluster(**kw)
        else:
            from distributed import LocalCluster

            n = self.n_workers or 1
            env = {"NUMBA_NUM_THREADS": str(max(1, cores // n))}
            env.update(self.cluster_kwargs.pop("env", {}))
            kw = dict(n_workers=n, threads_per_worker=1, processes=True,
                      dashboard_address=self.dashboard_address,
                      silence_logs=self.silence_logs, env=env)
            kw.update(self.cluster_kwargs)
            # numba reads NUMBA_NUM_THREADS when it is imported; a nanny's
            # env= is applied only after the worker has imported the
            # client's __main__ (which may import numba), and a later JIT
            # compile then fails on the mismatch: set it before the spawn
            with dask.config.set({"distributed.nanny.pre-spawn-environ": {
                    **dask.config.get("distributed.nanny.pre-spawn-environ", {}), **env}}):
                self.cluster = LocalCluster(**kw)
        self.client = Client(self.cluster, set_as_default=False)
        if self.gpu and self.device_pool is not None:
            from .worker import reserve_device_pool

            self.client.run(reserve_device_pool, self.device_pool)
        return self

    @property
    def kind(self) -> str:
        return "LocalCUDACluster" if self.gpu else "LocalCluster"

    @property
    def dashboard_link(self):
        return None if self.client is None else self.client.dashboard_link

    def close(self):
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()
        self.client = self.cluster = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False
