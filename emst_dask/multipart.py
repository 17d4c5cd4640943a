"""Exact EMST of one cloud across several Dask workers (DESIGN.md section 3).

The driver of ``emst_dask.partition`` on a Dask cluster.  Every step is a
task on the worker that owns the data; the client only ever holds a sample,
per-box summaries, the small phase-2 candidate forests and (without ``out=``)
the final edge list:

1. *read*: the source's row blocks are read (or scattered, for in-memory
   points) onto the workers and checked for NaN/inf; each block returns its
   bounds and a random sample;
2. *partition*: recursive coordinate bisection of the sample (client, small);
3. *shuffle*: each block splits its rows by box; box k's task on worker
   ``k mod W`` concatenates its pieces (Dask moves them worker to worker),
   global ids ascending;
4. *core distances* (``min_samples > 1``): local k-NN per box; points whose
   k-th neighbour may lie across a face are recomputed with ghosts within
   that radius (one exchange);
5. *phase 1*: ``solve_box`` on every box at once (the box's own MST on its
   worker's backend, then the Kruskal certificate);
6. *phase 2*: rounds of shell + ghost exchange within the radius R,
   ``connect_box`` per box, a Kruskal over the small forests on the client,
   and the certificate check (every edge <= R); at most a couple of rounds;
7. *output*: the certified edges are gathered to the client, or written by
   one worker straight to an edge store (``out=``).

Each box's tasks prefer its worker but may run elsewhere: if a worker dies,
Dask recomputes what it held from the blocks (or, for scattered points,
fails with Dask's error that the data was lost).
"""
from __future__ import annotations

import math
import operator
import time
import uuid
from dataclasses import asdict, dataclass, field

import numpy as np

from . import engine, partition as part_mod
from .partition import (Edges, connect_box, distance_to_box,
                        face_distances, mean_spacing, minimum_spanning_forest,
                        recursive_coordinate_bisection, shell_and_ghosts, solve_box)
from .result import SpanningTree
from .validation import InputError, as_points, check_min_samples

#: peak device memory of the single-GPU path per point, input excluded,
#: measured on the H100 (3-D float32, 100M points: benchmarks/results/h100.json);
#: other dtypes scale with the element size
DEVICE_BYTES_PER_POINT_F32 = 77
#: the same for phase 1 of a partitioned job (Borůvka, then the certificate's
#: sort and rounds), as the CuPy pool holds it: 116.4 B/pt with the input
#: at 50M and 100M-point boxes on the H100 (3-D float32); 105 + 12
BOX_DEVICE_BYTES_PER_POINT_F32 = 105
#: fraction of a worker's memory a box may fill ("auto" partitions)
MEMORY_FRACTION = 0.8
#: rows sampled in all for the bisection
SAMPLE_SIZE = 200_000
#: in-memory points are scattered in about this many blocks per box
BLOCKS_PER_BOX = 2


def footprint_bytes_per_point(d: int, dtype) -> float:
    """Peak memory of the single-device path per point (input included)."""
    item = np.dtype(dtype).itemsize
    return d * item + DEVICE_BYTES_PER_POINT_F32 * item / 4


def box_footprint_bytes_per_point(d: int, dtype) -> float:
    """Peak memory of phase 1 on one box per point (input included)."""
    item = np.dtype(dtype).itemsize
    return d * item + BOX_DEVICE_BYTES_PER_POINT_F32 * item / 4


# --------------------------------------------------------------------------
# the job's report
# --------------------------------------------------------------------------
@dataclass
class PartitionReport:
    """What a partitioned job did.

    ``rounds``: phase-2 rounds (shell + ghost exchanges); ``exchanges``: all
    worker-to-worker communication rounds (shuffle, core-distance ghosts,
    phase-2 rounds, output); ``bytes_moved``: bytes sent between different
    workers per step; ``seconds``: wall time per phase on the client;
    ``boxes``: per box: points, worker, certified edges, super-vertices,
    phase-1 seconds on the worker.
    """

    partitions: int
    workers: int
    rounds: int = 0
    exchanges: int = 0
    radius: float = 0.0
    n_super_vertices: int = 0
    n_certified: int = 0
    bytes_moved: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    boxes: list = field(default_factory=list)

    @property
    def total_bytes_moved(self) -> int:
        return int(sum(self.bytes_moved.values()))

    def as_dict(self) -> dict:
        out = asdict(self)
        out["total_bytes_moved"] = self.total_bytes_moved
        return out


# --------------------------------------------------------------------------
# tasks (run on the workers; pure functions of their arguments)
# --------------------------------------------------------------------------
@dataclass
class Block:
    """Rows [start, start + len) of the cloud in its compute dtype."""

    start: int
    points: np.ndarray


@dataclass
class Box:
    """The points of one box, global ids ascending."""

    k: int
    points: np.ndarray
    gids: np.ndarray
    face: np.ndarray
    core: np.ndarray | None = None   # squared core distances (mutual reachability)


@dataclass
class Piece:
    """Rows sent from one place to another (shuffle or ghosts)."""

    points: np.ndarray
    gids: np.ndarray
    labels: np.ndarray | None = None
    core: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (self.points, self.gids, self.labels, self.core)
                       if a is not None))


def _read_block_task(src, start, stop):
    """Rows [start, stop), its storage chunks read and checked for NaN/inf by
    a thread pool (zarr decompresses in the calling thread) into one array."""
    from concurrent.futures import ThreadPoolExecutor

    from .io import default_threads

    out = np.empty((stop - start, src.d), src.compute_dtype)
    pieces = [(max(a, start), min(b, stop)) for a, b in src.chunks if a < stop and b > start]
    bad = []

    def read(ab):
        a, b = ab
        first = src.read_checked(a, b, out[a - start:b - start])
        if first is not None:
            bad.append(first)

    with ThreadPoolExecutor(max_workers=max(1, min(default_threads(), len(pieces)))) as pool:
        list(pool.map(read, pieces))
    if bad:
        src.raise_nonfinite(out, start, min(bad))
    return Block(start, out)


def _array_block_task(data, start, where, dtype):
    from .validation import check_finite

    if type(data).__module__.startswith("cupy"):
        data = data.get()
    pts = np.ascontiguousarray(data, dtype=dtype)
    check_finite(pts, row_offset=start, where=f"{where}: block starting at row {start}")
    return Block(start, pts)


def _summarize_task(block: Block, n_total, sample_size, seed):
    from .kernels.cpu import axis_bounds

    x = block.points
    m = x.shape[0]
    rng = np.random.default_rng([seed, block.start])
    k = min(m, int(round(sample_size * m / max(n_total, 1))))
    take = np.sort(rng.choice(m, size=k, replace=False)) if k < m else np.arange(m)
    lo, hi = axis_bounds(np.ascontiguousarray(x)) if m else (None, None)
    return dict(m=m, lo=lo, hi=hi, sample=np.asarray(x[take], np.float64), nbytes=x.nbytes)


def _split_task(block: Block, partitioning):
    box = part_mod.assign_boxes(partitioning, block.points)
    grouped, gids, starts = part_mod.group_by_box(block.points, box, partitioning.n_boxes,
                                                  block.start)  # ascending within every box
    return {k: Piece(grouped[starts[k]:starts[k + 1]], gids[starts[k]:starts[k + 1]])
            for k in range(partitioning.n_boxes)}


def _assemble_task(k, partitioning, *pieces):
    d = partitioning.lo.shape[1]
    dtype = pieces[0].points.dtype if pieces else np.float64
    # every piece is ascending and pieces cover disjoint row ranges: ordering
    # the pieces by their first id orders the box
    pieces = sorted((p for p in pieces if len(p.gids)), key=lambda p: int(p.gids[0]))
    if pieces:
        points = part_mod.concat_rows([p.points for p in pieces])
        gids = part_mod.concat_rows([p.gids for p in pieces])
    else:
        points, gids = np.zeros((0, d), dtype), np.zeros(0, np.int64)
    return Box(k, points, gids, face_distances(partitioning, k, points))


def _box_info_task(box: Box):
    return dict(n=int(box.points.shape[0]), nbytes=int(box.points.nbytes + box.gids.nbytes))


def _local_core_task(box: Box, min_samples, backend):
    """Local squared core distances (upper bounds) and the radius beyond the
    faces within which neighbours may be missing."""
    from .kernels import get_kernels, resolve_backend

    m = box.points.shape[0]
    if m >= min_samples:
        K = get_kernels(resolve_backend(backend))
        core = np.asarray(K.to_host(engine.core_distances2(
            K, K.xp.asarray(box.points), min_samples)))
    else:
        core = np.full(m, np.inf, box.points.dtype)
    unsure = box.face.astype(np.float64) ** 2 < core
    r = float(np.sqrt(core[unsure].max())) * (1 + 1e-6) if unsure.any() else 0.0
    return Box(box.k, box.points, box.gids, box.face, core), r


def _core_ghosts_task(box: Box, partitioning, radii):
    """The points of ``box`` within radii[j] of box j, for every j."""
    out = {}
    for j, r in radii.items():
        if j == box.k or r <= 0:
            continue
        near = distance_to_box(partitioning, j, box.points) <= r
        out[j] = Piece(box.points[near], box.gids[near])
    return out


def _fix_core_task(box: Box, min_samples, backend, *ghosts):
    from .kernels import get_kernels, resolve_backend

    core = box.core.copy()
    unsure = box.face.astype(np.float64) ** 2 < core
    if unsure.any() and ghosts:
        K = get_kernels(resolve_backend(backend))
        pts = np.concatenate([box.points] + [g.points for g in ghosts])
        c = np.asarray(K.to_host(engine.core_distances2(K, K.xp.asarray(pts), min_samples)))
        core[unsure] = c[:box.points.shape[0]][unsure]
    return Box(box.k, box.points, box.gids, box.face, core)


def _solve_task(box: Box, min_samples, backend):
    t0 = time.perf_counter()
    name = _resolved(backend)
    res = solve_box(box.points, box.gids, box.face, name, min_samples, box.core)
    return res, time.perf_counter() - t0, name


def _resolved(backend):
    from .kernels import resolve_backend

    return resolve_backend(backend)


def _solve_info_task(solved):
    res, seconds, name = solved
    return dict(certified=len(res.certified), uncertified=len(res.uncertified),
                n_super=res.n_super, max_local2=res.max_local2,
                seconds=seconds, steps=res.seconds, backend=name)


def _outgoing_task(box: Box, solved, partitioning, radius):
    """Box k's shell (under key k) and its ghosts for every other box."""
    res = solved[0]
    shell, out = shell_and_ghosts(partitioning, box.k, box.points, box.face, radius)
    pieces = {box.k: shell}
    pieces.update(out)
    core = box.core
    return {j: Piece(box.points[idx], box.gids[idx], res.super_labels_of(idx),
                     None if core is None else core[idx]) for j, idx in pieces.items()}


def _piece_sizes_task(outgoing):
    return {j: p.nbytes for j, p in outgoing.items()}


def _connect_task(box: Box, solved, min_samples, backend, *pieces):
    res = solved[0]
    pts = np.concatenate([p.points for p in pieces])
    gids = np.concatenate([p.gids for p in pieces])
    labels = np.concatenate([p.labels for p in pieces])
    core = None if box.core is None else np.concatenate([p.core for p in pieces])
    order = np.argsort(gids, kind="stable")
    return connect_box(np.ascontiguousarray(pts[order]), gids[order], labels[order],
                       res.uncertified, _resolved(backend), min_samples,
                       None if core is None else core[order])


def _certified_task(solved):
    e = solved[0].certified  # the super-vertex columns stay behind
    return Edges(e.u, e.v, e.w2, e.u[:0], e.v[:0])


def _core_of_task(box: Box):
    return box.gids, box.core


def _write_task(out, tree_args, report, store_options, *certified):
    from .store import write_edges

    tree = _assemble_tree(certified, *tree_args)
    tree.report = report
    return write_edges(out, tree, **store_options,
                       extra_attrs={"partitioned": report.as_dict()})


def _assemble_tree(certified, tree_edges, n, d, dtype, min_samples, backend, cores,
                   sort_by_weight, timings):
    parts = [e for e in list(certified) + [tree_edges] if len(e)]
    dtype = np.dtype(dtype)
    cat = (lambda f, dt: np.concatenate([getattr(e, f) for e in parts]) if parts
           else np.zeros(0, dt))
    edges = Edges(cat("u", np.int64), cat("v", np.int64), cat("w2", dtype), None, None)
    core = None
    if min_samples > 1:
        core = np.empty(n, dtype)
        for gids, c in cores:
            core[gids] = np.sqrt(c)
    w = np.sqrt(edges.w2.astype(dtype, copy=False))
    tree = SpanningTree(edges.u, edges.v, w, core, n, d, min_samples, backend, 0, [],
                        dict(timings))
    return tree.sorted_by_weight() if sort_by_weight else tree


# --------------------------------------------------------------------------
# the driver (client side)
# --------------------------------------------------------------------------
def _worker_memory(client, backend) -> int | None:
    """Smallest memory per worker that a box may fill: GPU memory on CUDA
    workers, else the worker's memory limit (None when unknown)."""
    def device_free():
        from .kernels import cuda_available, resolve_backend

        if resolve_backend(backend) == "cuda" and cuda_available():
            import cupy

            return int(cupy.cuda.Device().mem_info[1])
        return None

    try:
        dev = client.run(device_free)
    except Exception:
        dev = {}
    info = client.scheduler_info(n_workers=-1)["workers"]
    mems = []
    for w, wi in info.items():
        m = dev.get(w) or wi.get("memory_limit") or 0
        if m:
            mems.append(int(m))
    return min(mems) if mems else None


def choose_partitions(partitions, n, d, dtype, client, backend) -> int:
    """P from ``partitions`` ("auto" or an int >= 1)."""
    if partitions == "auto":
        mem = _worker_memory(client, backend)
        if not mem:
            return 1
        cap = MEMORY_FRACTION * mem
        if n * footprint_bytes_per_point(d, dtype) <= cap:
            return 1
        # boxes cost more per point than the one-box path (the certificate)
        return max(2, math.ceil(n * box_footprint_bytes_per_point(d, dtype) / cap))
    if isinstance(partitions, bool) or not isinstance(partitions, (int, np.integer)) \
            or partitions < 1:
        raise InputError(f"partitions must be 'auto' or an integer >= 1, got {partitions!r}")
    return int(partitions)


class _Timer:
    def __init__(self, report):
        self.report = report

    def __call__(self, name):
        timer = self

        class _T:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                timer.report.seconds[name] = (timer.report.seconds.get(name, 0.0)
                                              + time.perf_counter() - self.t0)
        return _T()


def _blocks(client, source, workers, P, token, array=None, columns=None,
            storage_options=None):
    """Futures of the source's row blocks spread over the workers, and
    (n, d, compute dtype, where)."""
    from . import io as _io

    kw = dict(pure=False)
    mod = type(source).__module__ or ""
    if isinstance(source, np.ndarray) or mod.startswith("cupy") or isinstance(source, list):
        pts = as_points(source)
        if not isinstance(pts, np.ndarray):
            pts = pts.get()
        n, d = pts.shape
        nb = max(1, min(n, BLOCKS_PER_BOX * max(P, len(workers))))
        bounds = np.linspace(0, n, nb + 1).astype(np.int64)
        futs = []
        for i in range(nb):
            a, b = int(bounds[i]), int(bounds[i + 1])
            w = workers[i % len(workers)]
            futs.append(client.scatter(Block(a, pts[a:b]), workers=[w], hash=False))
        return futs, (n, d, pts.dtype, f"points ({n}, {d}) {pts.dtype}")
    if mod.startswith("dask"):
        src = _io.DaskPoints(source)
        delayed = client.compute(src.delayed_blocks())
        futs = [client.submit(_array_block_task, blk, a, src.where, src.compute_dtype,
                              key=f"emst-part-{token}-read-{i}", **kw)
                for i, (blk, (a, _)) in enumerate(zip(delayed, src.chunks))]
        return futs, (src.n, src.d, src.compute_dtype, src.where)
    src = _io.open_points(source, array=array, columns=columns,
                          storage_options=storage_options)
    blocks = [(a, b) for a, b in _io.merge_chunks(
        src.chunks, max(1, src.n // max(1, BLOCKS_PER_BOX * max(P, len(workers)))))
        if b > a]
    futs = [client.submit(_read_block_task, src, a, b, key=f"emst-part-{token}-read-{i}",
                          workers=[workers[i % len(workers)]], allow_other_workers=True,
                          **kw)
            for i, (a, b) in enumerate(blocks)]
    return futs, (src.n, src.d, src.compute_dtype, src.describe())


def emst_multipart(source, *, client, **kwargs):
    """Exact EMST of ``source`` split into P boxes over the workers of ``client``
    (see ``_emst_multipart`` for the parameters)."""
    with client.as_current():
        return _emst_multipart(source, client=client, **kwargs)


def _emst_multipart(source, *, client, partitions="auto", min_samples=1, backend="auto",
                   sort_by_weight=False, out=None, overwrite=False, array=None,
                   columns=None, storage_options=None, out_storage_options=None,
                   zarr_format=3, chunk_rows=None, max_rounds=8, seed=0):
    """Exact EMST of ``source`` split into P boxes over the workers of ``client``.

    Parameters
    ----------
    source : (n, d) numpy array, dask array, or the path of a Zarr / .npy cloud.
    client : distributed.Client
    partitions : "auto" or int
        "auto": one box unless the cloud does not fit one worker's memory
        (``footprint_bytes_per_point`` x n > 0.8 x the smallest worker's GPU
        memory, or host memory limit on CPU workers), then as many as it
        needs.  An int asks for exactly that many boxes (boxes are spread
        round-robin when P exceeds the number of workers).
    out : path or store, optional
        One worker gathers the edges and writes the edge store; an
        ``EdgeStore`` is returned.

    Returns
    -------
    SpanningTree (host arrays) with ``.report`` (``PartitionReport``), or
    EdgeStore with ``attrs["partitioned"]``.
    """
    from distributed import wait

    from .store import check_out

    check_out(out, overwrite)
    token = uuid.uuid4().hex[:8]
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        raise RuntimeError("the cluster has no workers")
    report = PartitionReport(partitions=0, workers=len(workers))
    timer = _Timer(report)
    P0 = partitions if partitions != "auto" else 1
    if partitions != "auto":
        choose_partitions(partitions, 0, 1, np.float32, client, backend)  # checks the value
    kw = dict(pure=False)

    with timer("read"):
        blocks, (n, d, dtype, where) = _blocks(client, source, workers, P0, token, array,
                                               columns, storage_options)
        k = check_min_samples(min_samples, n)
        P = choose_partitions(partitions, n, d, dtype, client, backend)
        report.partitions = P
        if n < 2:
            tree = SpanningTree(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                np.zeros(0, dtype), None if k == 1 else np.zeros(n, dtype),
                                n, d, k, _resolved(backend))
            return _finish_small(tree, report, out, overwrite, out_storage_options,
                                 zarr_format, chunk_rows, where)
        sums = client.gather([client.submit(_summarize_task, b, n, SAMPLE_SIZE, seed, **kw)
                              for b in blocks])
    with timer("partition"):
        glo = np.min([s["lo"] for s in sums if s["m"]], axis=0)
        ghi = np.max([s["hi"] for s in sums if s["m"]], axis=0)
        sample = np.concatenate([s["sample"] for s in sums])
        partitioning = recursive_coordinate_bisection(sample, P, glo, ghi)
    owner = {b: workers[b % len(workers)] for b in range(P)}

    def on(b):
        return dict(workers=[owner[b]], allow_other_workers=True, **kw)

    with timer("shuffle"):
        split = [client.submit(_split_task, b, partitioning,
                               key=f"emst-part-{token}-split-{i}", **kw)
                 for i, b in enumerate(blocks)]
        pieces = [[client.submit(operator.getitem, s, b, key=f"emst-part-{token}-piece-{i}-{b}",
                                 **kw) for b in range(P)] for i, s in enumerate(split)]
        boxes = [client.submit(_assemble_task, b, partitioning, *[p[b] for p in pieces],
                               key=f"emst-part-{token}-box-{b}", **on(b)) for b in range(P)]
        wait(boxes)
        report.bytes_moved["shuffle"] = _moved_bytes(client, split, boxes)
        report.exchanges += 1
        # the blocks' rows live on in the boxes; Dask recomputes them from
        # their read tasks should a box be lost with its worker
        del split, pieces, blocks
    core_futs = None
    if k > 1:
        with timer("core_distances"):
            local = [client.submit(_local_core_task, bx, k, backend,
                                   key=f"emst-part-{token}-core-{b}", **on(b))
                     for b, bx in enumerate(boxes)]
            boxes = [client.submit(operator.getitem, f, 0, key=f"emst-part-{token}-corebox-{b}",
                                   **on(b)) for b, f in enumerate(local)]
            radii = dict(enumerate(client.gather(
                [client.submit(operator.getitem, f, 1, **on(b)) for b, f in enumerate(local)])))
            want = {b: r for b, r in radii.items() if r > 0}
            if want:
                ghosts = [client.submit(_core_ghosts_task, bx, partitioning, want,
                                        key=f"emst-part-{token}-coreghosts-{b}", **on(b))
                          for b, bx in enumerate(boxes)]
                sizes = client.gather([client.submit(_piece_sizes_task, g, **on(b))
                                       for b, g in enumerate(ghosts)])
                moved = 0
                for b in want:
                    srcs = [j for j in range(P) if b in sizes[j]]
                    moved += sum(sizes[j][b] for j in srcs if owner[j] != owner[b])
                    incoming = [client.submit(operator.getitem, ghosts[j], b, **on(j))
                                for j in srcs]
                    boxes[b] = client.submit(_fix_core_task, boxes[b], k, backend, *incoming,
                                             key=f"emst-part-{token}-corefix-{b}", **on(b))
                report.bytes_moved["core_ghosts"] = int(moved)
                report.exchanges += 1
            wait(boxes)
            core_futs = [client.submit(_core_of_task, bx, **on(b)) for b, bx in enumerate(boxes)]
    with timer("phase1"):
        solved = [client.submit(_solve_task, bx, k, backend, key=f"emst-part-{token}-solve-{b}",
                                **on(b)) for b, bx in enumerate(boxes)]
        infos = client.gather([client.submit(_solve_info_task, s, **on(b))
                               for b, s in enumerate(solved)])
        box_infos = client.gather([client.submit(_box_info_task, bx, **on(b))
                                   for b, bx in enumerate(boxes)])
    report.boxes = [dict(box=b, worker=owner[b], n=bi["n"], certified=i["certified"],
                         uncertified=i["uncertified"], super_vertices=i["n_super"],
                         phase1_seconds=i["seconds"], phase1_steps=i["steps"],
                         backend=i["backend"])
                    for b, (i, bi) in enumerate(zip(infos, box_infos))]
    report.n_certified = int(sum(i["certified"] for i in infos))
    # super-vertices are disjoint across boxes (labels are global ids)
    n_super = int(sum(i["n_super"] for i in infos))
    report.n_super_vertices = n_super
    radius2 = max([i["max_local2"] for i in infos] + [4.0 * mean_spacing(partitioning, n) ** 2])
    tree_edges = Edges.empty(np.dtype(dtype))
    with timer("phase2"):
        moved = 0
        while n_super > 1:
            report.rounds += 1
            report.exchanges += 1
            radius = float(np.sqrt(radius2))
            outgoing = [client.submit(_outgoing_task, bx, s, partitioning, radius,
                                      key=f"emst-part-{token}-out{report.rounds}-{b}", **on(b))
                        for b, (bx, s) in enumerate(zip(boxes, solved))]
            sizes = client.gather([client.submit(_piece_sizes_task, o, **on(b))
                                   for b, o in enumerate(outgoing)])
            forests = []
            for b in range(P):
                srcs = [j for j in range(P) if b in sizes[j]]
                moved += sum(sizes[j][b] for j in srcs if owner[j] != owner[b])
                incoming = [client.submit(operator.getitem, outgoing[j], b, **on(j))
                            for j in srcs]
                forests.append(client.submit(_connect_task, boxes[b], solved[b], k, backend,
                                             *incoming,
                                             key=f"emst-part-{token}-connect{report.rounds}-{b}",
                                             **on(b)))
            forests = client.gather(forests)
            moved += sum(len(f) * (3 * 8 + np.dtype(dtype).itemsize + 16) for f in forests)
            tree_edges = minimum_spanning_forest(Edges.concat(forests, np.dtype(dtype)))
            longest2 = float(tree_edges.w2.max()) if len(tree_edges) else 0.0
            if len(tree_edges) == n_super - 1 and longest2 <= radius2:
                break
            if report.rounds >= max_rounds:
                raise RuntimeError("partitioned EMST did not certify its cross-box edges "
                                   f"in {max_rounds} rounds")
            if len(tree_edges) == n_super - 1:
                radius2 = longest2
            else:
                ext2 = float(((partitioning.global_hi - partitioning.global_lo) ** 2).sum())
                radius2 = ext2 if report.rounds >= 2 else min(max(longest2, 16.0 * radius2),
                                                              ext2)
            del outgoing
        report.bytes_moved["phase2"] = int(moved)
        report.radius = float(np.sqrt(radius2))
    name = infos[0]["backend"]
    del boxes  # the output needs only the solved boxes' edges
    if out is not None and not sort_by_weight:
        with timer("output"):
            return _write_partitioned(client, out, solved, infos, owner, on, tree_edges,
                                      core_futs, report, n, d, dtype, k, name, where,
                                      overwrite, chunk_rows, zarr_format,
                                      out_storage_options, token)
    certified = [client.submit(_certified_task, s, **on(b)) for b, s in enumerate(solved)]
    cores = core_futs or []
    cert_bytes = sum(i["certified"] for i in infos) * (16 + np.dtype(dtype).itemsize)
    if out is not None:  # sorted edges: one worker gathers, sorts and writes them
        with timer("output"):
            writer = owner[0]
            report.bytes_moved["output"] = int(sum(
                i["certified"] * (16 + np.dtype(dtype).itemsize)
                for b, i in enumerate(infos) if owner[b] != writer))
            report.exchanges += 1
            opts = dict(input=where, overwrite=overwrite, chunk_rows=chunk_rows,
                        zarr_format=zarr_format, storage_options=out_storage_options)
            tree_args = (tree_edges, n, d, np.dtype(dtype).str, k, name,
                         client.gather(cores) if cores else [], sort_by_weight,
                         report.seconds)
            fut = client.submit(_write_task, out, tree_args, report, opts, *certified,
                                key=f"emst-part-{token}-write", workers=[writer],
                                allow_other_workers=True, **kw)
            return fut.result()
    with timer("output"):
        parts = client.gather(certified)
        cores = client.gather(cores) if cores else []
        report.bytes_moved["output"] = int(cert_bytes)
        report.exchanges += 1
        tree = _assemble_tree(parts, tree_edges, n, d, dtype, k, name, cores,
                              sort_by_weight, report.seconds)
    tree.timings = dict(report.seconds)
    tree.report = report
    return tree


def _create_store_task(out, n_edges, dtype, options):
    from .store import create_shared_store

    t0 = time.time()  # wall clock: the finisher (usually this worker) times the output
    return dict(create_shared_store(out, n_edges=n_edges, dtype=dtype, **options),
                t_output=t0)


def _write_box_task(spec, solved, at, dtype):
    """Box's certified edges into rows [at, ...) of the shared store: the
    whole chunks here, the rest returned; and their weight sum (float64)."""
    from .store import write_shared_rows

    e = solved[0].certified
    w = np.sqrt(e.w2.astype(dtype, copy=False))
    return write_shared_rows(spec, at, e.u, e.v, w), float(w.sum(dtype=np.float64))


def _finish_store_task(spec, attrs, tree_edges, at, n, dtype, cores, *written):
    from .store import edge_attrs, finish_shared_store

    dtype = np.dtype(dtype)
    if at + len(tree_edges) != spec["n_edges"]:
        raise RuntimeError(f"partitioned EMST: {at} certified + {len(tree_edges)} phase-2 "
                           f"edges, expected {spec['n_edges']}")
    rests = [r for rest, _ in written for r in rest]
    total = sum(t for _, t in written)
    if len(tree_edges):
        w = np.sqrt(tree_edges.w2.astype(dtype, copy=False))
        rests.append((at, tree_edges.u, tree_edges.v, w))
        total += float(w.sum(dtype=np.float64))
    core = None
    if cores:
        core = np.empty(n, dtype)
        for gids, c in cores:
            core[gids] = np.sqrt(c)
    # the output phase, store creation to here (the attributes go last)
    output = max(0.0, time.time() - spec["t_output"])
    attrs = dict(attrs, timings=dict(attrs["timings"], output=output))
    rep = dict(attrs["extra"]["partitioned"])
    rep["seconds"] = dict(rep["seconds"], output=output)
    attrs["extra"] = dict(attrs["extra"], partitioned=rep)
    return finish_shared_store(spec, rests, edge_attrs(total_weight=total, dtype=dtype, **attrs),
                               core)


def _write_partitioned(client, out, solved, infos, owner, on, tree_edges, core_futs, report,
                       n, d, dtype, k, backend, where, overwrite, chunk_rows, zarr_format,
                       storage_options, token):
    """Every box's worker writes its certified edges into one edge store (the
    whole chunks of its row range); one worker writes the chunks shared by two
    ranges, the phase-2 edges, the core distances and the attributes."""
    from .store import abort_shared_store, shared_chunk_rows, shared_rest_rows

    dtype = np.dtype(dtype)
    counts = [int(i["certified"]) for i in infos]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    live = sorted(client.scheduler_info(n_workers=-1)["workers"])
    writer = owner[0] if owner[0] in live or not live else live[0]  # box 0's may be gone
    opts = dict(overwrite=overwrite, chunk_rows=chunk_rows, zarr_format=zarr_format,
                storage_options=storage_options)
    spec = client.submit(_create_store_task, out, n - 1, dtype.str, opts,
                         key=f"emst-part-{token}-create", workers=[writer],
                         allow_other_workers=True, pure=False)
    C = shared_chunk_rows(n - 1, chunk_rows)
    per_edge = 16 + dtype.itemsize
    report.bytes_moved["output"] = int(sum(
        shared_rest_rows(int(offsets[b]), counts[b], C) * per_edge
        for b in range(len(counts)) if owner[b] != writer))
    report.exchanges += 1
    try:
        written = [client.submit(_write_box_task, spec, s, int(offsets[b]), dtype.str,
                                 key=f"emst-part-{token}-write-{b}", **on(b))
                   for b, s in enumerate(solved)]
        attrs = dict(n=n, d=d, n_edges=n - 1, min_samples=k, backend=backend, iterations=0,
                     timings=dict(report.seconds), input=where,
                     extra={"partitioned": report.as_dict()})
        # phase-2 edges (up to a few MB): data, not part of the task graph
        tree_fut = client.scatter(tree_edges, workers=[writer], hash=False)
        fut = client.submit(_finish_store_task, spec, attrs, tree_fut, int(offsets[-1]), n,
                            dtype.str, list(core_futs or []), *written,
                            key=f"emst-part-{token}-finish",
                            workers=[writer], allow_other_workers=True, pure=False)
        return fut.result()
    except BaseException:
        try:
            client.submit(abort_shared_store, spec, pure=False).result(timeout=60)
        except Exception:
            pass
        raise


def _moved_bytes(client, split, boxes):
    """Bytes of shuffle pieces made on another worker than their box's."""
    where = client.who_has(list(split) + list(boxes))
    sizes = client.gather([client.submit(_piece_sizes_task, s, pure=False) for s in split])
    moved = 0
    for s, size in zip(split, sizes):
        made = set(where.get(s.key, ()))
        for b, nbytes in size.items():
            if not made & set(where.get(boxes[b].key, ())):
                moved += nbytes
    return int(moved)


def _finish_small(tree, report, out, overwrite, out_storage_options, zarr_format,
                  chunk_rows, where):
    tree.report = report
    if out is None:
        return tree
    from .store import write_edges

    return write_edges(out, tree, input=where, overwrite=overwrite, chunk_rows=chunk_rows,
                       zarr_format=zarr_format, storage_options=out_storage_options,
                       extra_attrs={"partitioned": report.as_dict()})


# --------------------------------------------------------------------------
# entry point (``emst_dask.emst(..., partitions=)``)
# --------------------------------------------------------------------------
def _source_meta(source, array=None, columns=None, storage_options=None):
    """(n, d, compute dtype) of a source, without reading its rows."""
    from . import io as _io
    from .validation import check_shape_dtype

    mod = type(source).__module__ or ""
    if isinstance(source, np.ndarray) or mod.startswith("cupy") or mod.startswith("dask"):
        dt = check_shape_dtype(source.shape, source.dtype)
        return int(source.shape[0]), int(source.shape[1]), dt
    if isinstance(source, list):
        a = as_points(source)
        return a.shape[0], a.shape[1], a.dtype
    src = _io.open_points(source, array=array, columns=_io.parse_columns(columns),
                          storage_options=storage_options)
    return src.n, src.d, src.compute_dtype


def emst(source, *, client=None, partitions="auto", out=None, min_samples=1,
         backend="auto", sort_by_weight=False, columns=None, array=None, overwrite=False,
         storage_options=None, out_storage_options=None, zarr_format=3, chunk_rows=None,
         progress=None, **unused):
    """``emst_dask.emst`` with ``partitions=``: see ``emst_multipart``.

    ``client=False`` runs the partitioned algorithm in this process (in-memory
    points only; the reference the tests hold the Dask driver to).  With
    ``partitions="auto"`` deciding on one box, the job takes the ordinary
    one-worker path of ``emst_dask.service``.
    """
    from . import service

    extra = set(unused) - {"name", "threads", "timeout"}
    if extra:
        raise TypeError(f"emst() got unexpected keyword argument(s) {sorted(extra)}")
    if partitions != "auto":
        choose_partitions(partitions, 0, 1, np.float32, None, backend)
    if backend not in ("auto", "cpu", "cuda"):
        raise InputError(f"unknown backend {backend!r}: expected 'auto', 'cpu' or 'cuda'")
    if client is False:
        return _emst_in_process(source, partitions, min_samples, backend, sort_by_weight,
                                out)
    n_workers = None
    if isinstance(partitions, (int, np.integer)) and client is None:
        import os

        from .kernels import cuda_available

        if backend == "cpu" or not cuda_available():
            n_workers = max(1, min(int(partitions), os.cpu_count() or 1))
    with service.client_for(client, backend=backend, n_workers=n_workers) as cl:
        P = partitions
        if partitions == "auto":
            n, d, dt = _source_meta(source, array, columns, storage_options)
            P = choose_partitions("auto", n, d, dt, cl, backend)
            if P == 1:
                return service.emst(source, client=cl, out=out, min_samples=min_samples,
                                    backend=backend, sort_by_weight=sort_by_weight,
                                    progress=progress, columns=columns, array=array,
                                    overwrite=overwrite, storage_options=storage_options,
                                    out_storage_options=out_storage_options,
                                    zarr_format=zarr_format, chunk_rows=chunk_rows)
        return emst_multipart(source, client=cl, partitions=P, min_samples=min_samples,
                              backend=backend, sort_by_weight=sort_by_weight, out=out,
                              overwrite=overwrite, array=array,
                              columns=None if columns is None else list(columns),
                              storage_options=storage_options,
                              out_storage_options=out_storage_options,
                              zarr_format=zarr_format, chunk_rows=chunk_rows)


def _emst_in_process(source, partitions, min_samples, backend, sort_by_weight, out):
    from .kernels import resolve_backend
    from .partition import emst_partitioned

    if out is not None:
        raise InputError("client=False with partitions= returns the tree; out= needs a cluster")
    pts = as_points(source)
    if not isinstance(pts, np.ndarray):
        pts = pts.get()
    n, d = pts.shape
    k = check_min_samples(min_samples, n)
    P = 1 if partitions == "auto" else int(partitions)
    name = resolve_backend(backend)
    t0 = time.perf_counter()
    res = emst_partitioned(pts, P, min_samples=k, backend=name)
    report = PartitionReport(partitions=P, workers=0, rounds=res.rounds,
                             exchanges=res.rounds, radius=res.radius,
                             n_super_vertices=res.n_super_vertices,
                             n_certified=res.n_certified,
                             bytes_moved={"phase2": int(res.bytes_moved)},
                             seconds={"emst": time.perf_counter() - t0})
    edges = Edges(res.source, res.target, res.weight2, res.source, res.target)
    cores = []
    if k > 1:
        from .partition import assign_boxes, choose_partitioning, partitioned_core_distances

        part = choose_partitioning(pts, P)
        cores = [(np.arange(n), partitioned_core_distances(part, pts, assign_boxes(part, pts),
                                                          k, name))]
    tree = _assemble_tree([edges], Edges.empty(pts.dtype), n, d, pts.dtype, k, name, cores,
                          sort_by_weight, report.seconds)
    tree.report = report
    return tree
