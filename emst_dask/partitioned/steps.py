"""The steps of the partitioned EMST that touch points: pure functions of
their arguments, so that the same step runs in this process or as a Dask
task on the worker that holds the data (``emst_dask.partitioned.algorithm``
orders them; an executor runs them).

Read (``read_block``, ``array_block``) and summarise the row blocks; split
them into boxes and assemble each box (the shuffle); core distances with
ghosts across the faces; phase 1 per box (``solve``); phase 2 per box
(``outgoing``, ``connect``) and the spanning forest over super-vertices
(``spanning_forest_on``); on GPU workers phase 2's reductions run on the
device.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from ..arrays import array_module, is_device_array, to_host
from ..engine import core_distances2
from ..io.checks import check_exact_integers, check_finite, check_in_box
from ..io.staging import default_threads, stage
from ..kernels import get_kernels, resolve_backend
from .boxes import (Partitioning, Walls, assign_boxes, box_walls, concat_rows, distance_to_box,
                    group_by_box, shell_and_ghosts, shell_radius)
from .edges import Edges, minimum_spanning_forest, minimum_spanning_forest_xp
from .phase1 import BoxResult, run_engine, run_engine_device, solve_box


@dataclass
class Block:
    """Rows of the cloud in its compute dtype: [start, start + len), or,
    with ``segments``, the runs ((global start, rows), ...) one after the
    other, ascending and apart (a worker's persisted chunks joined where
    they are, though the chunks between them are held elsewhere)."""

    start: int
    points: np.ndarray
    segments: tuple | None = None

    def global_ids(self, xp, local):
        """(m,) int64 global ids of the block's rows ``local`` ((m,) int64
        of ``xp``)."""
        local = local.astype(xp.int64, copy=False)
        if self.segments is None:
            return local + np.int64(self.start)
        starts, rows = (np.array(a, np.int64) for a in zip(*self.segments))
        firsts = np.cumsum(rows) - rows                      # each run's first local row
        run = xp.searchsorted(xp.asarray(firsts), local, side="right") - 1
        return local + xp.asarray(starts - firsts)[run]      # global id - local row, a run


@dataclass
class Box:
    """The points of one box, global ids ascending.

    points : (m, d) float; gids : (m,) int64; walls : the faces it shares
    (``boxes.Walls``); core : (m,) squared core distances (mutual
    reachability); period : (d,) float64 lengths of the periodic box, or
    None.  Arrays on the host, or all on one device.
    """

    k: int
    points: np.ndarray
    gids: np.ndarray
    walls: Walls
    core: np.ndarray | None = None
    period: np.ndarray | None = None

    @property
    def face(self):
        """(m,) float64 face distances, computed where the points are at
        each use: one parallel pass, where keeping them would hold 8 bytes
        a point beside the 12 of float32 points for the whole job."""
        return self.walls.distances(self.points)


@dataclass
class Piece:
    """Rows sent from one place to another (shuffle or ghosts)."""

    points: np.ndarray
    gids: np.ndarray
    labels: np.ndarray | None = None
    core: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the piece's arrays."""
        return int(sum(a.nbytes for a in (self.points, self.gids, self.labels, self.core)
                       if a is not None))


# --------------------------------------------------------------------------
# read
# --------------------------------------------------------------------------
def read_block(src, start: int, stop: int) -> Block:
    """Rows [start, stop) of a ``PointSource``: its storage chunks read and
    checked (NaN/inf, integers beyond 2**53) by a thread pool (zarr decodes
    in the calling thread) into one array."""
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


def stage_block(src) -> Block:
    """The whole of a ``PointSource`` read onto this process's GPU as one
    block, as the one-GPU path reads it (pinned buffers, copies
    overlapping the reads, one NaN/inf check on the device)."""
    return Block(0, stage(src, "cuda"))


def array_block(data, start: int, where: str, dtype) -> Block:
    """An in-memory block (scattered, or a dask array's computed block),
    checked and converted to the compute dtype.

    A CuPy block of floats (a dask array persisted on GPU workers) stays on
    its device: checked and converted there (a float cast rounds as the
    host's does), its rows then split by box there.  Other CuPy blocks come
    to the host."""
    label = f"{where}: block starting at row {start}"
    if is_device_array(data):
        if data.dtype.kind == "f":
            xp = array_module(data)
            pts = xp.ascontiguousarray(data, dtype=dtype)
            if not bool(xp.isfinite(pts).all()):
                check_finite(to_host(pts), row_offset=start, where=label)  # names the row
            return Block(start, pts)
        data = data.get()
    data = np.asarray(data)
    check_exact_integers(data, start, label)
    pts = np.ascontiguousarray(data, dtype=dtype)
    check_finite(pts, row_offset=start, where=label)
    return Block(start, pts)


def array_blocks(starts, where: str, dtype, *parts) -> Block:
    """``array_block`` of in-memory blocks in row order (``starts``: the
    global row of each), each checked with its own rows' names, joined
    where they are (on their device for CuPy blocks): one block, with
    ``segments`` when they are not neighbours."""
    starts = [int(a) for a in np.atleast_1d(starts)]
    if len(parts) == 1:
        return array_block(parts[0], starts[0], where, dtype)
    blocks = [array_block(p, a, where, dtype) for p, a in zip(parts, starts)]
    xp = array_module(blocks[0].points)
    if xp is not np and any(not is_device_array(b.points) for b in blocks):
        for b in blocks:
            b.points = to_host(b.points)
        xp = np
    joined = xp.concatenate([b.points for b in blocks])
    rows = [int(b.points.shape[0]) for b in blocks]
    apart = any(a + m != nxt for a, m, nxt in zip(starts, rows, starts[1:]))
    return Block(starts[0], joined, tuple(zip(starts, rows)) if apart else None)


def summarize(block: Block, n_total: int, sample_size: int, seed: int,
              period=None) -> dict:
    """Rows, per-axis bounds, the smallest nonzero magnitude and a random
    sample of a block (for the split and the frame check); with a periodic
    box, rows outside [0, period) are refused first."""
    from ..kernels.cpu.bvh import axis_bounds

    x = block.points
    on_device = is_device_array(x)
    if period is not None:
        host = to_host(x) if on_device else x
        at = 0
        for a, m in block.segments or ((block.start, x.shape[0]),):
            check_in_box(host[at:at + m], period, row_offset=a)
            at += m
    m = x.shape[0]
    rng = np.random.default_rng([seed, block.start])
    k = min(m, int(round(sample_size * m / max(n_total, 1))))
    take = np.sort(rng.choice(m, size=k, replace=False)) if k < m else np.arange(m)
    if not m:
        lo, hi, small = None, None, np.inf
    elif on_device:
        lo, hi, small = _device_axis_bounds(x)
        take = array_module(x).asarray(take)
    else:
        lo, hi, small = axis_bounds(np.ascontiguousarray(x))
    return dict(m=m, lo=lo, hi=hi, smallest=float(small),
                sample=np.asarray(to_host(x[take]), np.float64), nbytes=x.nbytes)


def _device_axis_bounds(x, rows_per_part=4096):
    """``axis_bounds`` of an (m, d) array of ``xp`` (CuPy), m >= 1: per-axis
    (min, max) float64 and the smallest nonzero magnitude (+inf when all
    are zero).

    A reduction over axis 0 of an (m, d) array has d outputs, so CuPy gives
    it d thread blocks (about 12 ms for 4M 3-D points on an H200); the rows
    are first reduced in parts of ``rows_per_part`` (one output a part and
    axis), then the parts."""
    xp = array_module(x)
    m, d = x.shape
    k = m // rows_per_part
    lows, highs = [], []
    if k:
        body = x[:k * rows_per_part].reshape(k, rows_per_part, d)
        lows.append(body.min(axis=1))
        highs.append(body.max(axis=1))
    if m > k * rows_per_part:
        tail = x[k * rows_per_part:]
        lows.append(tail.min(axis=0, keepdims=True))
        highs.append(tail.max(axis=0, keepdims=True))
    lo = to_host(xp.concatenate(lows).min(axis=0)).astype(np.float64)
    hi = to_host(xp.concatenate(highs).max(axis=0)).astype(np.float64)
    a = xp.abs(x.reshape(-1))
    small = float(xp.where(a != 0, a, xp.inf).min())
    return lo, hi, small


# --------------------------------------------------------------------------
# shuffle
# --------------------------------------------------------------------------
def split_block(block: Block, partitioning: Partitioning, frame: str, exponent: int) -> dict:
    """{box: Piece} of a block's rows, global ids ascending within each.

    The rows are taken to the job's frame first (``frame`` dtype, times
    ``2**exponent``: exact), the frame ``partitioning`` is in."""
    points = to_host(block.points).astype(frame, copy=False)
    if exponent:
        points = np.ldexp(points, exponent).astype(frame, copy=False)
    box = assign_boxes(partitioning, points)
    if block.segments is None:
        grouped, gids, starts = group_by_box(points, box, partitioning.n_boxes, block.start)
    else:
        grouped, rows, starts = group_by_box(points, box, partitioning.n_boxes, 0)
        gids = block.global_ids(np, rows)
    return {k: Piece(grouped[starts[k]:starts[k + 1]], gids[starts[k]:starts[k + 1]])
            for k in range(partitioning.n_boxes)}


def assemble_box(k: int, partitioning: Partitioning, *pieces) -> Box:
    """Box k from its pieces (one per block), global ids ascending."""
    d = partitioning.lo.shape[1]
    dtype = pieces[0].points.dtype if pieces else np.float64
    # every piece is ascending and pieces of contiguous blocks cover disjoint
    # row ranges: ordering the pieces by their first id orders the box (a
    # block of runs apart interleaves with others: then one sort)
    pieces = sorted((p for p in pieces if len(p.gids)), key=lambda p: int(p.gids[0]))
    if pieces:
        points = concat_rows([p.points for p in pieces])
        gids = concat_rows([p.gids for p in pieces])
        points, gids = ascending_ids(np, points, gids,
                                     [(int(p.gids[0]), int(p.gids[-1])) for p in pieces])
    else:
        points, gids = np.zeros((0, d), dtype), np.zeros(0, np.int64)
    return Box(k, points, gids, box_walls(partitioning, k), period=partitioning.period)


def ascending_ids(xp, points, gids, ends):
    """``points`` and ``gids`` ((m, d), (m,) int64 of ``xp``, distinct ids),
    the concatenation of pieces each ascending, ordered by id: as they are
    when each piece's last id is below the next one's first (``ends``:
    [(first id, last id)] of the pieces in order), else by one sort
    (pieces of blocks whose runs interleave)."""
    if all(last < first for (_, last), (first, _) in zip(ends, ends[1:])):
        return points, gids
    order = xp.argsort(gids)  # distinct ids: stability moot
    return points[order], gids[order]


def block_rows(block: Block) -> int:
    """Rows of a block."""
    return int(block.points.shape[0])


def piece_sizes(pieces: dict) -> dict:
    """{destination: bytes} of a step's outgoing pieces."""
    return {j: p.nbytes for j, p in pieces.items()}


def piece_rows(pieces: dict) -> dict:
    """{destination: rows} of a step's outgoing pieces."""
    return {j: int(p.gids.shape[0]) for j, p in pieces.items()}


def box_info(box: Box) -> dict:
    """Points and bytes of a box."""
    return dict(n=int(box.points.shape[0]), nbytes=int(box.points.nbytes + box.gids.nbytes))


# --------------------------------------------------------------------------
# core distances (mutual reachability)
# --------------------------------------------------------------------------
def _core2(points, min_samples, backend, period=None):
    K = get_kernels(resolve_backend(backend))
    return np.asarray(K.to_host(core_distances2(K, K.to_device(points), min_samples,
                                                box_size=period)))


def local_core(box: Box, min_samples: int, backend: str):
    """(box with local squared core distances, radius): local core distances
    are upper bounds; a point whose bound reaches past its faces may have
    neighbours in other boxes within ``radius``."""
    m = box.points.shape[0]
    if m >= min_samples:
        core = _core2(box.points, min_samples, backend, box.period)
    else:
        core = np.full(m, np.inf, box.points.dtype)
    unsure = box.face.astype(np.float64) ** 2 < core
    r = float(np.sqrt(core[unsure].max())) * (1 + 1e-6) if unsure.any() else 0.0
    return replace(box, core=core), r


def core_ghosts(box: Box, partitioning: Partitioning, radii: dict) -> dict:
    """{j: Piece}: the points of ``box`` within radii[j] of box j."""
    out = {}
    for j, r in radii.items():
        if j == box.k or r <= 0:
            continue
        near = distance_to_box(partitioning, j, box.points) <= r
        out[j] = Piece(box.points[near], box.gids[near])
    return out


def fix_core(box: Box, min_samples: int, backend: str, *ghosts) -> Box:
    """Exact squared core distances of the unsure points, with the ghosts."""
    core = box.core.copy()
    unsure = box.face.astype(np.float64) ** 2 < core
    if unsure.any() and ghosts:
        pts = np.concatenate([box.points] + [g.points for g in ghosts])
        c = _core2(pts, min_samples, backend, box.period)
        core[unsure] = c[:box.points.shape[0]][unsure]
    return replace(box, core=core)


def core_of(box: Box):
    """(gids, squared core distances) of a box."""
    return box.gids, box.core


# --------------------------------------------------------------------------
# phase 1
# --------------------------------------------------------------------------
def solve(box: Box, min_samples: int, backend: str, certificate: str = "auto", *after):
    """Phase 1 on a box: (BoxResult, seconds, backend name).  ``after``:
    what the driver has it wait for (the previous box's info on the same
    place, or that box's edges moved to host memory), unused."""
    t0 = time.perf_counter()
    name = resolve_backend(backend)
    res = solve_box(box.points, box.gids, box.walls, name, min_samples, box.core, certificate,
                    period=box.period)
    return res, time.perf_counter() - t0, name


def solve_info(solved) -> dict:
    """What the driver needs of a solved box: counts, seconds, backend."""
    res, seconds, name = solved
    return dict(certified=len(res.certified), uncertified=len(res.uncertified),
                n_super=res.n_super, max_local2=res.max_local2,
                seconds=seconds, steps=res.seconds, backend=name)


def certified_edges(solved) -> Edges:
    """A solved box's certified edges (without the super-vertex columns), on
    the host (a GPU worker's phase 1 keeps them on the device)."""
    e = solved[0].certified
    u, v, w2 = (np.asarray(to_host(a)) for a in (e.u, e.v, e.w2))
    return Edges(u, v, w2, u[:0], v[:0])


# --------------------------------------------------------------------------
# phase 2
# --------------------------------------------------------------------------
def outgoing(box: Box, solved, partitioning: Partitioning, radius: float) -> dict:
    """Box k's shell (under key k) and its ghosts for every other box,
    each point with its super-vertex."""
    res: BoxResult = solved[0]
    points, gids, face, core = box.points, box.gids, box.face, box.core
    rows = None  # box rows of the points below, when only the shell came over
    if is_device_array(points):  # a box assembled on the device: its shell comes over
        rows = device_shell(face, radius)
        at = array_module(face).asarray(rows)
        points, gids, face = to_host(points[at]), to_host(gids[at]), to_host(face[at])
    shell, out = shell_and_ghosts(partitioning, box.k, points, face, radius)
    pieces = {box.k: shell}
    pieces.update(out)
    return {j: Piece(points[idx], gids[idx],
                     res.super_labels_of(idx if rows is None else rows[idx]),
                     None if core is None else core[idx]) for j, idx in pieces.items()}


def device_shell(face, radius: float) -> np.ndarray:
    """(s,) int64 numpy rows of a device box whose face distance is at most
    R (with ``shell_and_ghosts``' slack): the shell, ascending."""
    xp = array_module(face)
    return to_host(xp.flatnonzero(face <= shell_radius(radius))).astype(np.int64, copy=False)


def connect(box: Box, solved, min_samples: int, backend: str, *pieces) -> Edges:
    """Phase 2 on one box: the MST of its shell and ghosts, the edges
    between different super-vertices, with the box's uncertified edges,
    reduced to a minimum spanning forest over super-vertices."""
    res: BoxResult = solved[0]
    pts = np.concatenate([p.points for p in pieces])
    gids = np.concatenate([p.gids for p in pieces])
    labels = np.concatenate([p.labels for p in pieces])
    core = None if box.core is None else np.concatenate([p.core for p in pieces])
    name = resolve_backend(backend)
    if name == "cuda" and gids.shape[0] > 1:
        # ordered by global id on the device: one radix sort there, where
        # the host's sort of millions of rows took a good part of a second
        K = get_kernels(name)
        arrays = [K.to_device(a) for a in (pts, gids, labels)]
        order = K.xp.argsort(arrays[1])  # ids are distinct: stability moot
        pts, gids, labels = (a[order] for a in arrays)
        core = None if core is None else K.to_device(core)[order]
        del arrays, order
        return connect_box(pts, gids, labels, res.uncertified, name, min_samples, core,
                           period=box.period)
    order = np.argsort(gids, kind="stable")
    return connect_box(np.ascontiguousarray(pts[order]), gids[order], labels[order],
                       res.uncertified, name, min_samples,
                       None if core is None else core[order], period=box.period)


def connect_box(points, gids, super_labels, uncertified: Edges, backend="cpu",
                min_samples=1, core=None, period=None) -> Edges:
    """MST(shell + ghosts) candidates with ``uncertified``, reduced to an MSF.

    ``points``/``gids``/``super_labels``/``core`` hold the box's shell and its
    ghosts together, sorted by global id (so the engine's tie order on local
    rows is the global one).

    Parameters
    ----------
    points : (m, d) float numpy array (with ``backend="cuda"`` these four
        may be arrays of the device already)
    gids : (m,) int64, ascending
    super_labels : (m,) int64 super-vertex (a global id) of each point
    uncertified : Edges
        The box's phase-1 edges that were not certified.
    backend : {"cpu", "cuda"}
    min_samples : int
    core : (m,) squared core distances, or None
    period : (d,) float64 lengths of a periodic box, or None

    Returns
    -------
    Edges
        The minimum spanning forest over super-vertices of the candidates,
        host arrays.

    On the CPU the candidates go to Kruskal (``minimum_spanning_forest``).
    With ``backend="cuda"`` the engine's edges stay on the device, the
    candidates are chosen and reduced there by Borůvka rounds
    (``minimum_spanning_forest_xp``: the same forest) and only the forest
    comes back: it is at most one edge per super-vertex of the shell, and
    the next step (``spanning_forest``) joins the forests of boxes on other
    workers, so host arrays are what it needs.
    """
    dt = uncertified.w2.dtype
    if points.shape[0] > 1 and backend == "cuda":
        return _connect_on_device(points, gids, super_labels, uncertified, backend,
                                  min_samples, core, period)
    cands = [uncertified]
    if points.shape[0] > 1:
        s, t, w2 = run_engine(points, backend, min_samples, core=core, period=period)
        keep = super_labels[s] != super_labels[t]
        s, t = s[keep], t[keep]
        cands.append(Edges(gids[s], gids[t], w2[keep].astype(dt, copy=False),
                           super_labels[s], super_labels[t]))
    return minimum_spanning_forest(Edges.concat(cands, dt))


def _connect_on_device(points, gids, super_labels, uncertified: Edges, backend, min_samples,
                       core, period) -> Edges:
    """``connect_box``'s device path: the candidates never leave the device."""
    dt = uncertified.w2.dtype
    K, s, t, w2 = run_engine_device(points, backend, min_samples, core=core, period=period)
    xp = K.xp
    labels = _on_device(K, super_labels)
    ls, lt = labels[s], labels[t]
    keep = xp.flatnonzero(ls != lt)
    del labels
    g = _on_device(K, gids)
    s, t = s[keep], t[keep]
    parts = [Edges(g[s], g[t], w2[keep].astype(dt, copy=False), ls[keep], lt[keep])]
    del s, t, w2, ls, lt, keep, g
    return _forest_on_device(K, parts + [uncertified], dt)


def _on_device(K, a):
    """(m,) int64 ``a`` on ``K``'s device (as it is when it is there)."""
    return a if is_device_array(a) else K.to_device(np.ascontiguousarray(a, np.int64))


def _forest_on_device(K, parts, dtype) -> Edges:
    """The MSF of ``parts`` (Edges of ``K.xp`` or of the host) reduced on
    ``K``'s device; host Edges back."""
    up = [p if is_device_array(p.u) else p.to(lambda a: K.to_device(np.ascontiguousarray(a)))
          for p in parts if len(p)]
    forest = minimum_spanning_forest_xp(K.xp, Edges.concat(up, dtype, K.xp))
    return forest.to(lambda a: np.asarray(K.to_host(a)))


def spanning_forest(dtype, *forests) -> Edges:
    """The minimum spanning forest of the boxes' forests over super-vertices
    (host Kruskal: on the host it is faster than Borůvka rounds)."""
    return minimum_spanning_forest(Edges.concat(forests, np.dtype(dtype)))


def spanning_forest_on(backend: str, dtype, *forests) -> Edges:
    """``spanning_forest`` on the job's backend: on a GPU worker the boxes'
    forests (host Edges) go to the device and are reduced there by Borůvka
    rounds (the same forest), host Edges back."""
    if resolve_backend(backend) != "cuda":
        return spanning_forest(dtype, *forests)
    dt = np.dtype(dtype)
    if not any(len(f) for f in forests):
        return Edges.empty(dt)
    return _forest_on_device(get_kernels("cuda"), list(forests), dt)


def forest_summary(forest: Edges) -> tuple[int, float, int]:
    """(edges, longest squared weight, bytes) of a forest."""
    longest2 = float(forest.w2.max()) if len(forest) else 0.0
    nbytes = int(sum(a.nbytes for a in (forest.u, forest.v, forest.w2, forest.su, forest.sv)))
    return len(forest), longest2, nbytes
