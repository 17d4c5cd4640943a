"""The output phase of the partitioned EMST on a cluster.

``write_output``: every box's worker writes its certified edges into one
edge store (the whole chunks of its row range) while one finishing task
writes the chunks two ranges share, the phase-2 edges, the core distances
and the attributes, ``complete`` last.  Every task here can be rerun (a
worker died): the store's temporary location is the job's own, creating it
again keeps what is there, writes are idempotent, and a finisher rerun
after the store was moved into place finds it there.

``gather_output``: the edges come to the client as one tree, or (a sorted
store, an ``.npy``) to one worker, which writes them.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

from ..arrays import is_device_array, to_host
from ..engine.scaling import weights_exact, weights_from_squares
from ..io.edge_store import edge_attrs, write_edges
from ..io.output import zarr_group_attrs
from ..io.shared_store import (create_shared_store, finish_shared_store, shared_chunk_rows,
                               shared_rest_rows, write_shared_rows)
from ..partitioned import steps
from ..partitioned.algorithm import Partitioned
from ..partitioned.assemble import assemble_tree

#: dask.config key: whether the box writes begin before phase 2
EARLY_WRITES_KEY = "emst_dask.partitioned.early-writes"
#: how much a box writer beside phase 2 raises its threads' nice value:
#: its 16 threads keep every core busy encoding, and phase 2's one thread,
#: which waits on the GPU often, must get a core back as soon as it wakes
#: (beside unniced writers its connect step took 2.3 task-seconds, alone 0.3)
BESIDE_NICE = 10


def _create(output, n_edges, dtype):
    # wall clock: the finisher (usually this worker) times the output phase
    return create_shared_store(output, n_edges, np.dtype(dtype)), time.time()


def _write_box(created, solved, at, dtype, exponent):
    """A box's certified edges into rows [at, ...): the whole chunks here,
    the rest returned (on the host: the finisher may run elsewhere); and
    their weight sum (float64).  Edges a GPU worker's phase 1 kept on the
    device are written from there (the writer copies them through pinned
    buffers)."""
    store, _t0 = created
    e = solved[0].certified
    dtype = np.dtype(dtype)
    if is_device_array(e.w2):
        import cupy

        w = weights_exact(cupy, e.w2, exponent, dtype, to_host)
    else:  # a CPU worker's, or weights only the host converts exactly
        w = weights_from_squares(np.asarray(e.w2), exponent, dtype)
    if is_device_array(w):
        from ..kernels.cuda.sums import sum_float64

        total = sum_float64(w)
    else:
        total = float(w.sum(dtype=np.float64))
    if is_device_array(e.u) or is_device_array(w):
        import cupy

        cupy.cuda.get_current_stream().synchronize()  # the copy streams do not wait
    rest = write_shared_rows(store, at, e.u, e.v, w)
    return [tuple(to_host(a) for a in r) for r in rest], total


def _write_box_beside(created, solved, at, dtype, exponent):
    """``_write_box`` begun before phase 2: for edges on a GPU the task
    leaves its worker's slot (``secede``), so that phase 2's tasks run
    beside the write (the writer uses no numba kernel, whose thread pool
    takes one launch at a time)."""
    if is_device_array(solved[0].certified.u):
        try:
            from distributed import secede

            secede()
        except ValueError:  # not in a worker's task: nothing to leave
            pass
        else:  # a seceded thread ends with its task: its nice goes with it
            lower_thread_priority(BESIDE_NICE)
    return _write_box(created, solved, at, dtype, exponent)


def lower_thread_priority(increment: int) -> bool:
    """Raise the calling thread's nice value by ``increment`` (Linux: a
    thread's own; the threads it starts inherit it).  False where the
    system has no per-thread priority or refuses it (nothing changes)."""
    try:
        tid = threading.get_native_id()
        now = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, now + int(increment)))
    except (AttributeError, OSError):
        return False
    return True


def _finish(created, began, attrs, forest, at, n, dtype, exponent, cores, *written):
    """The rest of the store, its attributes and ``complete``; ``began``:
    the wall clock of the output phase's start (after phase 2), or None
    (from the store's creation)."""
    store, t_output = created
    t_output = t_output if began is None else began
    out = store.output
    if out.local is not None and not os.path.exists(store.where):
        # a rerun of this task after its first run moved the store into place
        there = zarr_group_attrs(out.local) or {}
        if there.get("job") == out.token and there.get("complete") is True:
            from ..io.edge_store import EdgeStore

            return EdgeStore(out.local, there)
        raise RuntimeError(f"{out}: the partitioned job's store vanished before it was "
                           "finished; this is a bug, please report it")
    dtype = np.dtype(dtype)
    if at + len(forest) != store.n_edges:
        raise RuntimeError(f"partitioned EMST: {at} certified + {len(forest)} phase-2 "
                           f"edges, expected {store.n_edges}; this is a bug, please report it")
    rests = [r for rest, _ in written for r in rest]
    total = sum(t for _, t in written)
    if len(forest):
        w = weights_from_squares(forest.w2, exponent, dtype)
        rests.append((at, forest.u, forest.v, w))
        total += float(w.sum(dtype=np.float64))
    core = None
    if cores:
        core = np.empty(n, dtype)
        for gids, c in cores:
            core[gids] = weights_from_squares(c, exponent, dtype)
    output = max(0.0, time.time() - t_output)
    attrs = dict(attrs, timings=dict(attrs["timings"], output=output))
    rep = dict(attrs["extra"]["partitioned"])
    rep["seconds"] = dict(rep["seconds"], output=output)
    attrs["extra"] = dict(attrs["extra"], partitioned=rep)
    return finish_shared_store(store, rests, edge_attrs(total_weight=total, dtype=dtype,
                                                        **attrs), core)


def early_writes_wanted(infos) -> bool:
    """Whether the box writes begin before phase 2: the setting
    ``emst_dask.partitioned.early-writes`` ("auto": where the boxes were
    solved on GPUs, whose writers can run beside phase 2; "on"; "off")."""
    import dask.config

    mode = str(dask.config.get(EARLY_WRITES_KEY, "auto")).lower()
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"dask config {EARLY_WRITES_KEY} must be 'auto', 'on' or 'off', "
                         f"got {mode!r}")
    return mode == "on" or (mode == "auto" and all(i["backend"] == "cuda" for i in infos))


def begin_writes(ex, solved, infos, output, n: int, dtype, exponent: int) -> tuple:
    """The store created and every box's certified edges written into it,
    submitted when phase 1 ends: (created, written, offsets) handles for
    ``write_output``.  Phase 2 leaves those rows alone (its edges go after
    all the certified ones), so nothing waits for it."""
    dtype = np.dtype(dtype)
    counts = [int(i["certified"]) for i in infos]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    created = ex.submit(_create, output, n - 1, dtype.str, box=0, name="create")
    written = [ex.submit(_write_box_beside, created, s, int(offsets[b]), dtype.str, exponent,
                         box=b, name="write") for b, s in enumerate(solved)]
    return created, written, offsets


def write_output(ex, res: Partitioned, output, where: str, t_start: float):
    """Every box's worker writes its certified edges into one edge store
    (begun already when ``res.early`` holds ``begin_writes``' handles)."""
    report = res.report
    dtype = np.dtype(res.dtype)
    counts = [int(i["certified"]) for i in res.infos]
    if res.early is not None:
        created, written, offsets = res.early
    else:
        created, written, offsets = begin_writes(ex, res.solved, res.infos, output, res.n,
                                                 dtype, res.exponent)
    C = shared_chunk_rows(res.n - 1, output.chunk_rows)
    per_edge = 16 + dtype.itemsize
    report.bytes_moved["output"] = int(sum(
        shared_rest_rows(int(offsets[b]), counts[b], C) * per_edge
        for b in range(len(counts)) if ex.owner(b) != ex.owner(0)))
    report.exchanges += 1
    report.seconds["output"] = time.perf_counter() - t_start
    attrs = dict(n=res.n, d=res.d, n_edges=res.n - 1, min_samples=res.min_samples,
                 backend=res.backend, iterations=0, timings=dict(report.seconds), input=where,
                 extra={"partitioned": report.as_dict(), "job": output.token},
                 box_size=res.period)
    began = None if res.early is None else time.time() - (time.perf_counter() - t_start)
    fut = ex.submit(_finish, created, began, attrs, res.forest, int(offsets[-1]), res.n, dtype.str,
                    res.exponent, list(res.cores or []), *written, box=0, name="finish")
    return ex.gather([fut])[0]


def _write_gathered(output, tree_args, report, where, *certified):
    tree = assemble_tree(certified, *tree_args)
    tree.report = report
    return write_edges(output, tree, input=where, extra_attrs={"partitioned": report.as_dict()})


def gather_output(ex, res: Partitioned, output, where: str, sort_by_weight: bool,
                  t_start: float):
    """The tree on the client; or, with an output, written by one worker."""
    report = res.report
    dtype = np.dtype(res.dtype)
    certified = [ex.submit(steps.certified_edges, s, box=b, name="certified")
                 for b, s in enumerate(res.solved)]
    per_edge = 16 + dtype.itemsize
    report.exchanges += 1
    if output is not None:  # sorted edges or .npy: one worker gathers and writes them
        report.bytes_moved["output"] = int(sum(
            i["certified"] * per_edge for b, i in enumerate(res.infos)
            if ex.owner(b) != ex.owner(0)))
        report.seconds["output"] = time.perf_counter() - t_start
        cores = ex.gather(res.cores) if res.cores else []
        tree_args = (ex.gather([res.forest])[0], res.n, res.d, dtype.str, res.min_samples,
                     res.backend, cores, sort_by_weight, report.seconds, res.period,
                     res.exponent)
        fut = ex.submit(_write_gathered, output, tree_args, report, where, *certified, box=0,
                        name="write")
        return ex.gather([fut])[0]
    parts = ex.gather(certified)
    cores = ex.gather(res.cores) if res.cores else []
    forest = ex.gather([res.forest])[0]
    report.bytes_moved["output"] = int(sum(i["certified"] for i in res.infos) * per_edge)
    report.seconds["output"] = time.perf_counter() - t_start
    tree = assemble_tree(parts, forest, res.n, res.d, dtype, res.min_samples, res.backend,
                         cores, sort_by_weight, report.seconds, res.period, res.exponent)
    tree.timings = dict(report.seconds)
    tree.report = report
    return tree
