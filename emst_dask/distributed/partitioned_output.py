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
from dataclasses import replace

import numpy as np

from ..arrays import is_device_array, to_host
from ..engine.scaling import weights_exact, weights_from_squares
from ..io.edge_store import edge_attrs, index_dtype, write_edges
from ..io.host_staging import to_host_arrays
from ..io.output import zarr_group_attrs
from ..io.shared_store import (create_shared_store, finish_shared_store, shared_chunk_rows,
                               shared_rest_rows, write_shared_rows)
from ..partitioned import steps
from ..partitioned.algorithm import Partitioned
from ..partitioned.assemble import assemble_tree
from ..partitioned.edges import Edges
from .settings import choice

#: dask.config key: whether the box writes begin before phase 2
EARLY_WRITES_KEY = "emst_dask.partitioned.early-writes"
#: dask.config key: which box writes go through host memory first
STAGE_WRITES_KEY = "emst_dask.partitioned.stage-writes"
#: how much a box writer beside phase 2 raises its threads' nice value:
#: its 16 threads keep every core busy encoding, and phase 2's one thread,
#: which waits on the GPU often, must get a core back as soon as it wakes
#: (beside unniced writers its connect step took 2.3 task-seconds, alone 0.3)
BESIDE_NICE = 10


def _create(output, n_edges, dtype):
    # wall clock: the finisher (usually this worker) times the output phase
    return create_shared_store(output, n_edges, np.dtype(dtype)), time.time()


def _weights(e, exponent: int, dtype):
    """A box's certified edges' weights in input units, where the edges are
    (numpy where only the host converts them exactly), and their sum
    (float64)."""
    if is_device_array(e.w2):
        import cupy

        from ..kernels.cuda.sums import sum_float64

        w = weights_exact(cupy, e.w2, exponent, dtype, to_host)
        if is_device_array(w):
            return w, sum_float64(w)
    else:  # a CPU worker's
        w = weights_from_squares(np.asarray(e.w2), exponent, dtype)
    return w, float(w.sum(dtype=np.float64))


def _write_box(created, solved, at, dtype, exponent):
    """A box's certified edges into rows [at, ...): the whole chunks here,
    the rest returned (on the host: the finisher may run elsewhere); and
    their weight sum (float64).  Edges a GPU worker's phase 1 kept on the
    device are written from there (the writer copies them through pinned
    buffers)."""
    store, _t0 = created
    e = solved[0].certified
    w, total = _weights(e, exponent, np.dtype(dtype))
    if is_device_array(e.u) or is_device_array(w):
        import cupy

        cupy.cuda.get_current_stream().synchronize()  # the copy streams do not wait
    rest = write_shared_rows(store, at, e.u, e.v, w)
    return [tuple(to_host(a) for a in r) for r in rest], total


def _leave_slot() -> None:
    """Leave the worker's slot (``secede``) so that its next tasks (phase 2,
    the place's next box) run beside this one, at a lower priority (this
    thread and the writer threads it starts)."""
    try:
        from distributed import secede

        secede()
    except ValueError:  # not in a worker's task: nothing to leave
        pass
    else:  # a seceded thread ends with its task: its nice goes with it
        lower_thread_priority(BESIDE_NICE)


def _write_box_beside(created, solved, dtype, exponent, *before):
    """``_write_box`` at the rows after the boxes ``before`` (their
    ``steps.solve_info``: box b's certified edges go after those of boxes
    0..b-1), begun before phase 2: for edges on a GPU the task leaves its
    worker's slot, so that phase 2's tasks run beside the write (the
    writer uses no numba kernel, whose thread pool takes one launch at a
    time)."""
    if is_device_array(solved[0].certified.u):
        _leave_slot()
    at = sum(int(i["certified"]) for i in before)
    return _write_box(created, solved, at, dtype, exponent)


def _stage_box(solved, n: int, dtype, exponent):
    """A solved box's certified edges moved to host memory as the store
    holds them (ids in its index dtype, weights in input units): (the solve
    result without them, (source, target, weight, weight sum)).

    For a place with another box to solve next: copied off the device at
    once, in the place's slot (``to_host_arrays``, about 6 GB for 500M
    edges), so that the write then runs from host memory beside the next
    box's phase 1, and the device holds the edges no longer (phase 2 takes
    the box from the result returned here).  A writer copying from the
    device beside a phase 1 waits for the busy GPU at every piece (one
    H200, 500M edges: 6.8 s beside a box's phase 1, of which 3.5 after it
    ended; 2.8 s from host memory).  Where the host has no room for them:
    (``solved`` as it is, None), and the write copies from the device as
    it goes."""
    res = solved[0]
    e = res.certified
    dtype = np.dtype(dtype)
    ids = index_dtype(n)
    try:
        w, total = _weights(e, exponent, dtype)
        u, v, w = to_host_arrays([e.u, e.v, w], [ids, ids, dtype])
    except MemoryError:
        return solved, None
    return (replace(res, certified=Edges.empty(e.w2.dtype)), *solved[1:]), (u, v, w, total)


def _write_staged(created, staged, dtype, exponent, *before):
    """A box staged on the host (``_stage_box``) into rows after the boxes
    ``before``, beside the place's next box (the task leaves its slot);
    from the device where it could not be staged."""
    _leave_slot()
    at = sum(int(i["certified"]) for i in before)
    solved, host = staged
    if host is None:
        return _write_box(created, solved, at, dtype, exponent)
    store, _t0 = created
    u, v, w, total = host
    return write_shared_rows(store, at, u, v, w), total


class BoxWrites:
    """Every box's certified edges written into one edge store, each box's
    write submitted as its box is (``add``): (``created``, ``written``)
    handles for ``write_output``.

    A box's write waits for the box and the infos of the boxes before it
    (their counts give its rows), not for the whole of phase 1, and is
    urgent.  Phase 2 leaves those rows alone (its edges go after all the
    certified ones), so nothing waits for it.

    Parameters
    ----------
    ex : DaskExecutor
    output : Output
        The edge store (a resolved output of kind "zarr").
    n : int
        Points of the cloud (the store holds n - 1 edges).
    dtype : float32 or float64
        The weights' dtype.
    exponent : int
        The frame's scaling (``Partitioned.exponent``).
    """

    def __init__(self, ex, output, n: int, dtype, exponent: int):
        self.ex, self.n, self.dtype, self.exponent = ex, int(n), np.dtype(dtype), int(exponent)
        self.created = ex.submit(_create, output, self.n - 1, self.dtype.str, box=0,
                                 name="create", urgent=True)
        self.written = []

    def add(self, b: int, solved, before: list, staged: bool = False):
        """Box ``b``'s write (``solved``: its ``steps.solve``, ``before``: the
        infos of boxes 0..b-1, handles or values).  ``staged``: its place
        solves another box next: the edges are first moved to the host in
        the place's slot (``_stage_box``), and that step's handle is
        returned (item 0 is the box's solve result without them: what
        phase 2 takes, and the place's next box waits for it); else None."""
        ex, dt = self.ex, self.dtype.str
        if not staged:
            self.written.append(ex.submit(_write_box_beside, self.created, solved, dt,
                                          self.exponent, *before, box=b, name="write",
                                          urgent=True))
            return None
        moved = ex.submit(_stage_box, solved, self.n, dt, self.exponent, box=b, name="stage",
                          urgent=True)
        self.written.append(ex.submit(_write_staged, self.created, moved, dt, self.exponent,
                                      *before, box=b, name="write", urgent=True))
        return moved


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


def early_writes_wanted(on_gpus: bool) -> bool:
    """Whether each box's write begins as soon as the box is solved, beside
    the rest of phase 1 and phase 2: the setting
    ``emst_dask.partitioned.early-writes`` ("auto": where the boxes are
    solved on GPUs, ``on_gpus``, whose writers can run beside the GPU's
    work; "on"; "off": the writes after phase 2)."""
    mode = choice(EARLY_WRITES_KEY, ("auto", "on", "off"))
    return mode == "on" or (mode == "auto" and bool(on_gpus))


def stage_writes_mode() -> str:
    """Which early box writes first move the box's certified edges to host
    memory (``_stage_box``): the setting
    ``emst_dask.partitioned.stage-writes``, checked before the job starts.
    "auto": a box whose place solves another box after it, whose phase 1 a
    writer copying from the device would wait behind; "all": every box
    (the last one's write then also runs from host memory, beside phase
    2); "off": none (every write copies from the device as it goes)."""
    return choice(STAGE_WRITES_KEY, ("auto", "all", "off"))


def write_output(ex, res: Partitioned, output, where: str, t_start: float,
                 writes: BoxWrites | None = None):
    """Every box's worker writes its certified edges into one edge store
    (begun already as phase 1 went where ``writes`` holds them)."""
    report = res.report
    dtype = np.dtype(res.dtype)
    counts = [int(i["certified"]) for i in res.infos]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    early = writes is not None
    if not early:
        writes = BoxWrites(ex, output, res.n, dtype, res.exponent)
        for b, s in enumerate(res.solved):
            writes.add(b, s, res.infos[:b])
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
    began = time.time() - (time.perf_counter() - t_start) if early else None
    fut = ex.submit(_finish, writes.created, began, attrs, res.forest, int(offsets[-1]), res.n,
                    dtype.str, res.exponent, list(res.cores or []), *writes.written, box=0,
                    name="finish")
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
