"""The partitioned EMST on a Dask cluster: one cloud, P boxes, many workers.

The algorithm is ``emst_dask.partitioned.algorithm``; this module is its
Dask driver: the source's row blocks read on the workers (never through
the client), an executor that runs every step as a task on the worker that
owns the box (``DaskExecutor``), and the output: the certified edges
written by every box's worker straight into one edge store, or gathered.
The client only ever holds a sample, per-box summaries and (without
``out=``) the final edge list.

Every step is a task computed from its inputs, never scattered data, so a
worker lost at any moment costs the recomputation of what it held (Dask
reruns it from the read tasks); in-memory points scattered from the client
are sent again.  One fault Dask does not recover from: when every worker
the job started on is gone (all died at once, say, and came back under new
addresses), tasks restricted to them are never offered to the newcomers
(``dispatch``).  The executor's waits watch for that, and the job then runs
again from its input on the workers there are, at most
``distributed.scheduler.allowed-failures`` times.
"""
from __future__ import annotations

import logging
import operator
import time
import uuid

import dask.config
import numpy as np

from ..arrays import is_device_array
from ..engine.scaling import float32_holds
from ..errors import InputError
from ..io import resolve_output, resolve_source
from ..io.checks import check_backend, check_min_samples, source_box_size
from ..io.edge_store import check_edge_output
from ..io.source import ArrayPoints, DaskPoints, merge_chunks
from ..partitioned import steps
from ..partitioned.algorithm import Partitioned, compute
from ..partitioned.assemble import assemble_tree
from ..partitioned.edges import Edges
from ..partitioned.report import PartitionReport
from ..partitioned.sizing import auto_partitions, bound_partitions, check_partitions
from .device_exchange import read_on_device
from .dispatch import WATCH_S, WorkerGone, allowed_failures, submit_to, wait_for_a_worker
from .nccl import EXCHANGE_KEY, ExchangeFailed
from .paused import PauseWatch, scatter
from .faults import (Refused, input_lost, leave_temporaries, lost_error, refusing, unwrap,
                     unwrap_all, workers_died)
from .partitioned_output import (BoxWrites, early_writes_wanted, gather_output,
                                 stage_writes_mode, write_output)
from .worker import apply_settings

log = logging.getLogger(__name__)

#: the source's rows are read in about this many blocks per box (or worker)
BLOCKS_PER_BOX = 2
#: resubmissions of a job whose scattered points died with their worker
RESUBMIT_LOST_INPUT = 3


def _task(fn):
    """A step as a task: the worker's settings applied, the user's errors
    carried as ``Refused``."""
    def task(*args):
        apply_settings()
        return fn(*args)

    task.__name__ = fn.__name__
    return refusing(task)


class DaskExecutor:
    """Runs the algorithm's steps as tasks; box k lives on worker k mod W.

    Each box's tasks prefer its worker but may run elsewhere (if it dies,
    Dask recomputes what it held elsewhere).  ``staged_writes``: a box whose
    worker solves another after it has its certified edges moved to host
    memory before that one (the job's writes, ``stage_writes_mode``), so a
    GPU does not hold them through the next box's phase 1."""

    def __init__(self, client, workers: list, token: str, backend: str = "auto",
                 staged_writes: bool = False):
        self.client = client
        self.places = list(workers)
        self.workers = len(workers)
        self.token = token
        self.backend = backend
        self.staged_writes = bool(staged_writes)
        self._n = 0
        self._pause = PauseWatch(self.places, "partitioned job")

    def owner(self, box):
        """See ``Executor.owner``: worker ``box mod W`` of the worker list."""
        return self.places[box % len(self.places)]

    def _key(self, name, box):
        self._n += 1
        tail = "" if box is None else f"-{box}"
        return f"emst-part-{self.token}-{name or 'step'}{tail}-{self._n}"

    def submit(self, fn, *args, box=None, name="", urgent=False):
        """See ``Executor.submit``: a task, on box ``box``'s worker when given
        (others allowed); an urgent one with a higher priority."""
        kw = dict(pure=False, key=self._key(name, box), priority=1 if urgent else 0)
        if box is not None:
            kw.update(workers=[self.owner(box)], allow_other_workers=True)
        return self.client.submit(_task(fn), *args, **kw)

    def item(self, handle, key, box=None):
        """See ``Executor.item``: ``handle[key]`` as a task, on box ``box``'s worker when given."""
        kw = dict(pure=False, key=self._key(f"item{key}", box))
        if box is not None:
            kw.update(workers=[self.owner(box)], allow_other_workers=True)
        return self.client.submit(refusing(operator.getitem), handle, key, **kw)

    def gather(self, handles):
        """See ``Executor.gather``: the values, raising the first user's error carried."""
        handles = list(handles)
        self._settle(handles)
        return unwrap_all(self.client.gather(handles))

    def wait(self, handles):
        """See ``Executor.wait``: also raises a user's error that one of them carries."""
        self._settle(list(handles))
        # a read error surfaces here, before the next phase is submitted
        self.gather([self.client.submit(_refusal_of, h, pure=False) for h in handles])

    def _settle(self, handles):
        """Wait until ``handles`` are done; ``WorkerGone`` once none of the
        job's workers is left (their tasks would wait forever)."""
        from distributed import wait
        from distributed.utils import CancelledError

        from .client import scheduler_workers

        while True:
            try:
                with self.client.as_current():
                    wait(handles, timeout=WATCH_S)
                return
            except TimeoutError:
                pass
            except CancelledError:  # the cancelled future's own error, with its reason
                for h in handles:
                    if h.cancelled():
                        h.result()
                raise
            info = scheduler_workers(self.client)
            if not set(info) & set(self.places):
                raise WorkerGone(", ".join(self.places))
            try:
                self._pause.check(self.client, info)
            except Exception:
                self.client.cancel(handles)
                raise

    def exchange(self, blocks, partitioning, frame, exponent, min_samples):
        """See ``Executor.exchange``: NCCL between the workers' GPUs
        (``device_exchange``) where they all have it, else None."""
        from .device_exchange import device_exchange

        return device_exchange(self, blocks, partitioning, frame, exponent, min_samples)

    def shuffle_bytes(self, split, boxes):
        """See ``Executor.shuffle_bytes``: pieces whose block and box no worker holds both of."""
        where = self.client.who_has(list(split) + list(boxes))
        sizes = self.gather([self.submit(steps.piece_sizes, s) for s in split])
        moved = 0
        for s, size in zip(split, sizes):
            made = set(where.get(s.key, ()))
            for b, nbytes in size.items():
                if not made & set(where.get(boxes[b].key, ())):
                    moved += nbytes
        return int(moved)


def _refusal_of(value):
    """The ``Refused`` a task returned, else None (nothing else moves)."""
    return value if isinstance(value, Refused) else None


# --------------------------------------------------------------------------
# read
# --------------------------------------------------------------------------
def read_blocks(client, src, workers: list, P: int, token: str) -> list:
    """Futures of the source's row blocks, spread over the workers."""
    nb = max(1, BLOCKS_PER_BOX * max(P, len(workers)))
    if isinstance(src, ArrayPoints):
        cuts = np.linspace(0, src.n, max(1, min(src.n, nb)) + 1).astype(np.int64)
        futs = []
        for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
            w = workers[i % len(workers)]
            # a worker killed as its rows are sent: WorkerGone, the job runs again
            data = submit_to(client, lambda w: scatter(client, np.asarray(src.data[a:b]), [w],
                                                       "partitioned job", hash=False), w)
            futs.append(client.submit(_task(steps.array_block), data, int(a), src.where,
                                      src.compute_dtype, key=f"emst-part-{token}-block-{i}",
                                      workers=[w], pure=False))
        return futs
    if isinstance(src, DaskPoints):
        held = persisted_chunks(client, src.array)
        rows = max(1, src.n // nb)
        if held is None:
            groups = None
        elif chunks_on_device(src.array):
            # a worker's chunks as one block though others lie between them:
            # the assembled boxes then take one sort by id on the device,
            # where a task a chunk (Dask spreads neighbouring chunks over the
            # workers) cost seconds of scheduling at a hundred chunks
            groups = held_groups(client, held, src.chunks, rows)
        else:  # host chunks: each worker's runs of neighbours (no sort on the host)
            runs = held_runs(client, held, src.chunks, rows)
            groups = None if runs is None else [(list(range(i, j)), w) for i, j, w in runs]
        if groups is not None:
            return [client.submit(_task(steps.array_blocks), [int(src.chunks[i][0]) for i in idx],
                                  src.where, src.compute_dtype, *[held[i] for i in idx],
                                  key=f"emst-part-{token}-read-{k}", workers=[w], pure=False)
                    for k, (idx, w) in enumerate(groups)]
        delayed = client.compute(src.delayed_blocks())
        return [client.submit(_task(steps.array_block), blk, a, src.where, src.compute_dtype,
                              key=f"emst-part-{token}-read-{i}", pure=False)
                for i, (blk, (a, _)) in enumerate(zip(delayed, src.chunks))]
    blocks = [(a, b) for a, b in merge_chunks(src.chunks, max(1, src.n // nb)) if b > a]
    return [client.submit(_task(steps.read_block), src, a, b, key=f"emst-part-{token}-read-{i}",
                          workers=[workers[i % len(workers)]], allow_other_workers=True,
                          pure=False)
            for i, (a, b) in enumerate(blocks)]


def persisted_chunks(client, arr):
    """The futures of a persisted (n, d) dask array's row chunks, in row
    order, once they are in memory; None when the array is not simply a
    persisted one (a graph on top of it, say)."""
    from distributed import futures_of, wait

    by_key = {f.key: f for f in futures_of(arr)}
    keys = [row[0] for row in arr.__dask_keys__()]
    if not keys or any(k not in by_key for k in keys):
        return None
    futs = [by_key[k] for k in keys]
    with client.as_current():
        wait(futs)  # what computing them would wait for
    return futs


def held_runs(client, futures, chunks, rows: int):
    """Runs of neighbouring chunks held by one worker, each of at most
    ``rows`` rows unless one chunk is larger: [(first, stop, worker)] over
    the chunk indices; None unless the scheduler has every chunk in memory
    already (a persisted array: a task a chunk costs more than the chunk's
    own work when the chunks are small, and the chunks are where they are).
    """
    holders = _holders(client, futures)
    if holders is None:
        return None
    runs, first = [], 0
    for i in range(1, len(futures) + 1):
        if (i == len(futures) or holders[i] != holders[first]
                or chunks[i][1] - chunks[first][0] > rows):
            runs.append((first, i, holders[first]))
            first = i
    return runs


def held_groups(client, futures, chunks, rows: int):
    """Each worker's held chunks in row order, cut into groups of at most
    ``rows`` rows unless one chunk is larger: [(chunk indices, worker)],
    the groups ordered by their first chunk; None unless the scheduler has
    every chunk in memory already (as ``held_runs``, without asking the
    chunks of a group to be neighbours)."""
    holders = _holders(client, futures)
    if holders is None:
        return None
    groups = []
    for w in sorted(set(holders)):
        group, size = [], 0
        for i in (i for i, h in enumerate(holders) if h == w):
            m = chunks[i][1] - chunks[i][0]
            if group and size + m > rows:
                groups.append((group, w))
                group, size = [], 0
            group.append(i)
            size += m
        if group:
            groups.append((group, w))
    return sorted(groups, key=lambda g: g[0][0])


def _holders(client, futures):
    """The worker holding each future (the first by address where several
    do), or None when there are none or one is not in memory."""
    if not futures:
        return None
    where = client.who_has(futures)
    holders = [min(where.get(f.key) or [None]) for f in futures]
    return None if None in holders else holders


def chunks_on_device(arr) -> bool:
    """Whether a dask array's chunks are device (CuPy) arrays, by its meta."""
    return is_device_array(getattr(arr, "_meta", None))


def worker_memory(client, backend) -> dict:
    """What "auto" sizes from: ``memory``, the smallest memory per worker
    that a job may fill (GPU memory on CUDA workers, ``device`` True; else
    the worker's memory limit; None when unknown), ``baseline``, the most
    memory a worker process holds already, ``workers`` and ``threads``
    (the most per worker)."""
    from ..kernels import device_memory

    try:
        dev = client.run(device_memory, backend)
    except Exception:
        dev = {}
    info = client.scheduler_info(n_workers=-1)["workers"]
    device = any(dev.get(w) for w in info)
    mems = [int((dev.get(w) if device else wi.get("memory_limit")) or 0)
            for w, wi in info.items()]
    mems = [m for m in mems if m]
    base = [int((wi.get("metrics") or {}).get("memory") or 0) for wi in info.values()]
    return dict(memory=min(mems) if mems else None, device=device,
                baseline=0 if device else max(base, default=0), workers=len(info),
                threads=max((int(wi.get("nthreads") or 1) for wi in info.values()),
                            default=1))


def choose_partitions(partitions, n: int, d: int, dtype, client, backend,
                      min_samples=1) -> int:
    """P from ``partitions`` ("auto" or an int), bounded by n and the workers."""
    partitions = check_partitions(partitions)
    workers = len(client.scheduler_info(n_workers=-1)["workers"])
    if partitions == "auto":
        return auto_partitions(n, d, dtype, min_samples=min_samples,
                               **worker_memory(client, backend))
    return bound_partitions(partitions, n, workers)


# --------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------
def emst_partitioned(source, *, client, partitions, min_samples=1, backend="auto",
                     sort_by_weight=False, output=None, max_rounds=8, seed=0,
                     box_size=None, name=None):
    """Exact EMST of a resolved ``source`` split into P boxes over the
    workers of ``client``.

    Parameters
    ----------
    source : PointSource
    client : distributed.Client
    partitions : int or "auto"
    min_samples : int
    backend : {"auto", "cpu", "cuda"}
    sort_by_weight : bool
    output : Output, optional
        Checked; the workers write the edge store there.
    max_rounds, seed : int
    name : str, optional
        The job's name in its errors (default "partitioned").
    box_size : (d,) float64 or None
        A periodic box, checked (``check_box_size``).

    Returns
    -------
    SpanningTree (host arrays) with ``.report``, or EdgeStore with
    ``attrs["partitioned"]``.
    """
    from ..distributed.client import workers_of

    name = "partitioned" if name is None else str(name)
    settings = {}
    attempt = 0
    reruns = 0
    ended = None
    try:
        while True:
            workers = workers_of(client)
            if not workers:
                if not reruns:
                    raise InputError("the cluster has no workers")
                wait_for_a_worker(client, [name], output)
                continue
            try:
                with client.as_current(), dask.config.set(settings):
                    return _run(source, client, workers, partitions, min_samples, backend,
                                sort_by_weight, output, max_rounds, seed, box_size)
            except InputError:
                raise
            except ExchangeFailed as exc:
                # boxes assembled by the device exchange were lost after it (a
                # worker gone): the job runs again, shuffling through Dask
                if settings:
                    raise
                log.warning("partitioned job: %s; running it again with the shuffle through "
                            "Dask", exc)
                settings = {EXCHANGE_KEY: "dask"}
                continue
            except WorkerGone as gone:
                reruns += 1
                allowed = allowed_failures()
                if reruns > allowed:
                    raise workers_died(name, reruns, allowed, str(gone), output) from None
                log.warning("partitioned job: its worker(s) %s left the cluster; "
                            "running it again (%d)", gone, reruns)
                continue
            except Exception as exc:
                scattered = isinstance(source, ArrayPoints)
                if input_lost(exc, scattered) and attempt < RESUBMIT_LOST_INPUT \
                        and workers_of(client):
                    attempt += 1
                    log.warning("partitioned job: its in-memory points died with a worker; "
                                "running it again (%d)", attempt)
                    continue
                ended = exc
                lost = lost_error(name, output, exc, client)
                if lost is not None:
                    raise lost from exc
                raise
    finally:
        if output is not None and output.local is not None \
                and not leave_temporaries(name, ended, client):
            output.cleanup()


def _run(src, client, workers, partitions, min_samples, backend, sort_by_weight, output,
         max_rounds, seed, period=None):
    token = uuid.uuid4().hex[:8]
    n, d, dtype = src.n, src.d, src.compute_dtype
    k = check_min_samples(min_samples, n)
    # float32 points in a box float32 cannot hold are computed in float64
    # (``engine.scaling.periodic_frame``): "auto" sizes the boxes for that
    wide = period is not None and np.dtype(dtype) == np.float32 and not float32_holds(period)
    P = choose_partitions(partitions, n, d, np.float64 if wide else dtype, client, backend, k)
    report = PartitionReport(partitions=P, workers=len(workers))
    t0 = time.perf_counter()
    if n < 2:
        tree = assemble_tree([], Edges.empty(dtype), n, d, dtype, k, _backend_name(backend),
                             [], sort_by_weight, {}, period)
        tree.report = report
        return tree if output is None else write_output_small(client, output, tree, report,
                                                              src.describe())
    # the settings of the writes, checked before any work
    to_store = output is not None and output.kind == "zarr" and not sort_by_weight
    early = to_store and early_writes_wanted(_on_gpus(client, workers, backend))
    stage = stage_writes_mode() if early else "off"
    ex = DaskExecutor(client, workers, token, backend, staged_writes=stage in ("auto", "all"))
    blocks = (read_on_device(client, src, workers, P, k, backend, token, ex.staged_writes)
              or read_blocks(client, src, workers, P, token))
    ex.wait(blocks)
    report.seconds["read"] = time.perf_counter() - t0
    log.info("partitioned job (P=%d): read took %.2f s", P, report.seconds["read"])
    started = []  # the box writes begun as phase 1 goes, if any

    def after_solve(b, solved, before, more, exponent):
        if not started:
            started.append(BoxWrites(ex, output, n, dtype, exponent))
        return started[0].add(b, solved, before,
                              staged=stage == "all" or (stage == "auto" and more))

    try:
        res: Partitioned = compute(ex, blocks, n, d, dtype, P, k, backend, report, seed=seed,
                                   max_rounds=max_rounds, period=period,
                                   after_solve=after_solve if early else None)
    except BaseException as exc:
        # writes already running go on in their workers' threads: let them
        # end before the store's temporary location is cleaned up (briefly
        # for an interrupt: the user is waiting on it)
        for writes in started:
            wait_quietly(client, writes.written,
                         30 if isinstance(exc, KeyboardInterrupt) else 600)
        raise
    del blocks
    t1 = time.perf_counter()
    try:
        if to_store:
            return write_output(ex, res, output, src.describe(), t1,
                                started[0] if started else None)
        return gather_output(ex, res, output, src.describe(), sort_by_weight, t1)
    finally:
        report.seconds["output"] = time.perf_counter() - t1
        log.info("partitioned job (P=%d): output took %.2f s", P, report.seconds["output"])


def _on_gpus(client, workers: list, backend: str) -> bool:
    """Whether every worker of the job solves its boxes on a GPU."""
    from ..kernels import device_memory

    if backend == "cpu":
        return False
    try:
        found = client.run(device_memory, backend, workers=list(workers))
    except Exception:  # a worker gone meanwhile: the writes wait for phase 2
        return False
    return bool(found) and all(found.get(w) for w in workers)


def wait_quietly(client, futures, timeout=600):
    """Wait for ``futures`` to end, however they end (a failed job's work
    still running)."""
    from distributed import wait

    try:
        with client.as_current():
            wait(futures, timeout=timeout)
    except Exception:  # a lost worker, a timeout: nothing more to wait for
        pass


def _backend_name(backend):
    from ..kernels import resolve_backend

    return resolve_backend(backend)


def write_output_small(client, output, tree, report, where):
    """The (empty) tree of n < 2 points to ``output``."""
    from ..io import write_edges

    return write_edges(output, tree, input=where,
                       extra_attrs={"partitioned": report.as_dict()})


def emst(source, *, client=None, partitions="auto", out=None, min_samples=1,
         backend="auto", sort_by_weight=False, columns=None, array=None, overwrite=False,
         storage_options=None, out_storage_options=None, zarr_format=3, chunk_rows=None,
         progress=None, name=None, threads=None, timeout=None, box_size=None):
    """``emst_dask.emst`` with ``partitions=``, on a cluster.

    ``client=False`` runs the partitioned algorithm in this process (in-memory
    points only; ``emst_dask.partitioned.emst_partitioned``).  With
    ``partitions="auto"`` deciding on one box, the job takes the ordinary
    one-worker path of ``emst_dask.distributed.service``.
    """
    from . import service
    from .client import check_outputs_reachable, client_for

    partitions = check_partitions(partitions)
    check_backend(backend)
    check_min_samples(min_samples, 0)
    if client is False:
        return _in_process(source, partitions, min_samples, backend, sort_by_weight, out,
                           box_size)
    src = resolve_source(source, array=array, columns=columns, storage_options=storage_options)
    check_min_samples(min_samples, src.n)
    box_size = source_box_size(box_size, src)
    if partitions != "auto":  # the bound by n before any cluster; by workers on it
        bound_partitions(partitions, src.n, None)
    output = resolve_output(out, overwrite=overwrite, zarr_format=zarr_format,
                            chunk_rows=chunk_rows, storage_options=out_storage_options,
                            source_location=src.location)
    check_edge_output(output, min_samples, box_size)
    n_workers = None
    if isinstance(partitions, int) and client is None:
        import os

        from ..kernels import cuda_available

        if backend == "cpu" or not cuda_available():
            n_workers = max(1, min(partitions, os.cpu_count() or 1))
    with client_for(client, backend=backend, n_workers=n_workers) as cl:
        check_outputs_reachable(cl, output)
        if partitions == "auto" and choose_partitions("auto", src.n, src.d, src.compute_dtype,
                                                      cl, backend, min_samples) == 1:
            return service.emst(source, client=cl, out=out, min_samples=min_samples,
                                backend=backend, sort_by_weight=sort_by_weight,
                                progress=progress, columns=columns, array=array,
                                overwrite=overwrite, storage_options=storage_options,
                                out_storage_options=out_storage_options,
                                zarr_format=zarr_format, chunk_rows=chunk_rows, name=name,
                                threads=threads, timeout=timeout, box_size=box_size)
        return emst_partitioned(src, client=cl, partitions=partitions,
                                min_samples=min_samples, backend=backend,
                                sort_by_weight=sort_by_weight, output=output,
                                box_size=box_size, name=name)


def _in_process(source, partitions, min_samples, backend, sort_by_weight, out, box_size=None):
    from ..io.source import is_in_memory
    from ..partitioned import emst_partitioned as local

    if out is not None:
        raise InputError("client=False with partitions= returns the tree; out= needs a cluster")
    if not is_in_memory(source):
        raise InputError("client=False with partitions= takes in-memory points")
    P = 1 if partitions == "auto" else partitions
    if isinstance(box_size, str):
        raise InputError(f"box_size={box_size!r} needs a snapshot; in-memory points take "
                         "the box's lengths")
    return local(source, P, min_samples, backend, sort_by_weight=sort_by_weight,
                 box_size=box_size)


__all__ = ["DaskExecutor", "emst", "emst_partitioned", "choose_partitions", "unwrap"]
