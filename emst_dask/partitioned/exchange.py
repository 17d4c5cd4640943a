"""The shuffle as one exchange between the places' devices.

The blocks are split by box where they were read (``steps.split_block``);
then every place sends each other place, in one message, the rows of its
blocks that fall in that place's boxes, and assembles its own boxes from
what it received and what it kept, on its device.  The message layout is
fixed by an ``ExchangePlan`` every place computes alike (rows per block
and box, which place holds which block and which box), so only points and
global ids move: no sizes, no headers.

The communication itself is a ``comm`` with one method,
``exchange(send, recv)``: ``send`` and ``recv`` map a peer's rank to a
tuple of arrays, all sent and received at once (NCCL on GPU workers,
``emst_dask.distributed.nccl``; threads and queues in the tests).  The
boxes are those ``steps.assemble_box`` makes from the same pieces: the
same rows in the same order (global ids ascending), the same face
distances.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .boxes import Partitioning, box_walls


@dataclass(frozen=True)
class ExchangePlan:
    """Who holds what, and how many rows go where.

    ranks : int, the places.
    block_rank : (blocks,) rank holding each block's split.
    box_rank : (P,) rank assembling each box.
    rows : (blocks, P) int64, rows of block i that fall in box k.
    d : int, coordinates; dtype : str, the frame's dtype.
    """

    ranks: int
    block_rank: tuple
    box_rank: tuple
    rows: np.ndarray
    d: int
    dtype: str

    def blocks_of(self, r: int) -> list:
        """The blocks rank ``r`` holds, ascending (= by first row)."""
        return [i for i, q in enumerate(self.block_rank) if q == r]

    def boxes_of(self, r: int) -> list:
        """The boxes rank ``r`` assembles, ascending."""
        return [k for k, q in enumerate(self.box_rank) if q == r]

    def rows_between(self, src: int, dst: int) -> int:
        """Rows rank ``src`` sends rank ``dst`` (its own when equal)."""
        bl, bx = self.blocks_of(src), self.boxes_of(dst)
        return int(self.rows[np.ix_(bl, bx)].sum()) if bl and bx else 0

    @property
    def row_bytes(self) -> int:
        """Bytes a row takes in a message: its coordinates and its int64 id."""
        return self.d * np.dtype(self.dtype).itemsize + 8

    @property
    def moved_bytes(self) -> int:
        """Bytes that cross between different ranks."""
        return sum(self.rows_between(a, b) * self.row_bytes
                   for a in range(self.ranks) for b in range(self.ranks) if a != b)


def make_plan(rows, block_rank, box_rank, ranks: int, d: int, dtype) -> ExchangePlan:
    """An ``ExchangePlan``, checked: every rank in [0, ranks)."""
    rows = np.asarray(rows, np.int64).reshape(len(block_rank), len(box_rank))
    for name, ranks_of in (("block", block_rank), ("box", box_rank)):
        if any(not 0 <= int(q) < ranks for q in ranks_of):
            raise ValueError(f"a {name} placed outside ranks 0..{ranks - 1}: {list(ranks_of)}")
    return ExchangePlan(int(ranks), tuple(int(q) for q in block_rank),
                        tuple(int(q) for q in box_rank), rows, int(d), np.dtype(dtype).str)


def pack(plan: ExchangePlan, src: int, dst: int, splits: dict):
    """(points (m, d), gids (m,) int64) of what rank ``src`` sends rank
    ``dst`` (host arrays, or device arrays for pieces split there): for each of ``src``'s blocks ascending, the pieces
    of ``dst``'s boxes ascending.  ``splits``: {block: {box: Piece}}."""
    from ..arrays import is_device_array
    from .boxes import concat_rows

    parts = [splits[i][k] for i in plan.blocks_of(src) for k in plan.boxes_of(dst)]
    parts = [p for p in parts if len(p.gids)]
    if not parts:
        return np.zeros((0, plan.d), plan.dtype), np.zeros(0, np.int64)
    if is_device_array(parts[0].gids):  # pieces split on the device
        import cupy

        return (cupy.concatenate([p.points for p in parts]).astype(plan.dtype, copy=False),
                cupy.concatenate([p.gids for p in parts]))
    return (concat_rows([p.points for p in parts]).astype(plan.dtype, copy=False),
            concat_rows([p.gids for p in parts]).astype(np.int64, copy=False))


def unpack(plan: ExchangePlan, r: int, received: dict, partitioning: Partitioning, xp):
    """{box: Box} of rank ``r`` from ``received`` ({src rank: (points,
    gids)} laid out as ``pack`` lays them, ``r``'s own part included), on
    ``xp``'s device: each box's pieces in block order, so its global ids
    ascend, as ``steps.assemble_box`` orders them (blocks whose runs lie
    apart interleave: then one sort by id)."""
    mine = plan.boxes_of(r)
    slices = {k: [] for k in mine}  # box -> [(block, src, start, stop)]
    for q in range(plan.ranks):
        at = 0
        for i in plan.blocks_of(q):
            for k in mine:
                m = int(plan.rows[i, k])
                if m:
                    slices[k].append((i, q, at, at + m))
                at += m
    boxes = {}
    for k in mine:
        parts = sorted(slices[k])
        boxes[k] = box_of_parts(k, [received[q][0][a:b] for _, q, a, b in parts],
                                [received[q][1][a:b] for _, q, a, b in parts], partitioning, xp,
                                plan.d, plan.dtype)
    return boxes


def box_of_parts(k: int, points: list, gids: list, partitioning: Partitioning, xp, d: int,
                 dtype):
    """Box k from its parts in block order (each part's ids ascending), on
    ``xp``'s device: the parts joined, ordered by id where they interleave
    (blocks of runs apart: one sort), as ``steps.assemble_box`` orders them.

    points : list of (m_i, d) arrays of ``xp``; gids : list of (m_i,) int64.
    """
    from .steps import Box, ascending_ids

    keep = [i for i, g in enumerate(gids) if g.shape[0]]
    if len(keep) == 1:  # one part (a cloud read as one block): no copy
        pts, ids = points[keep[0]].astype(dtype, copy=False), gids[keep[0]]
    elif keep:
        pts = xp.concatenate([points[i] for i in keep]).astype(dtype, copy=False)
        ids = xp.concatenate([gids[i] for i in keep])
        ends = [(int(gids[i][0]), int(gids[i][-1])) for i in keep]
        pts, ids = ascending_ids(xp, pts, ids, ends)  # blocks of runs apart interleave
    else:
        pts, ids = xp.zeros((0, d), dtype), xp.zeros(0, xp.int64)
    return Box(k, pts, ids, box_walls(partitioning, k), period=partitioning.period)


def assemble_boxes(splits: list, partitioning: Partitioning, xp) -> dict:
    """{box: Box} of every box from the pieces of all the blocks, on one
    device (``xp``'s): one GPU's shuffle, where nothing crosses between
    places.  ``splits``: the blocks' ``split_block_xp`` results in block
    order ({box: Piece} each)."""
    P = partitioning.n_boxes
    d = partitioning.lo.shape[1]
    out = {}
    for k in range(P):
        pieces = [s[k] for s in splits]
        dtype = pieces[0].points.dtype if pieces else np.float64
        out[k] = box_of_parts(k, [p.points for p in pieces], [p.gids for p in pieces],
                              partitioning, xp, d, dtype)
    return out


def exchange_boxes(comm, plan: ExchangePlan, r: int, splits: dict, partitioning: Partitioning,
                   xp=np, to_device=np.asarray, synchronize=lambda: None,
                   seconds: dict | None = None) -> dict:
    """Rank ``r``'s part of the shuffle: pack, send and receive at once,
    assemble.

    Parameters
    ----------
    comm : an object with ``exchange(send, recv)`` ({rank: arrays} each)
    plan : ExchangePlan
    r : int, this rank
    splits : {block: {box: Piece}} of the blocks ``r`` holds
    partitioning : Partitioning
    xp : the array module of the device (numpy or cupy)
    to_device : copies a host array to that device
    synchronize : waits for the device (the steps' timers)
    seconds : dict, optional
        Filled with the wall seconds of the steps: pack (host), to_device,
        exchange, assemble (the boxes and their face distances).

    Returns
    -------
    {box: Box} of the boxes ``r`` assembles, their arrays of ``xp``.
    """
    t = _Clock(synchronize)
    send, recv = {}, {}
    packed = {q: pack(plan, r, q, splits) for q in range(plan.ranks)}
    t.lap("pack")
    for q in range(plan.ranks):
        if q != r and len(packed[q][1]):
            send[q] = tuple(to_device(a) for a in packed[q])
        m = plan.rows_between(q, r) if q != r else 0
        if m:
            recv[q] = (xp.empty((m, plan.d), plan.dtype), xp.empty(m, xp.int64))
    received = {r: tuple(to_device(a) for a in packed[r])}
    del packed
    t.lap("to_device")
    comm.exchange(send, recv)
    del send
    t.lap("exchange")
    received.update(recv)
    for q in range(plan.ranks):
        received.setdefault(q, (xp.zeros((0, plan.d), plan.dtype), xp.zeros(0, xp.int64)))
    boxes = unpack(plan, r, received, partitioning, xp)
    t.lap("assemble")
    if seconds is not None:
        seconds.update(t.seconds)
    return boxes


class _Clock:
    """Wall seconds per step (the device synchronised at each lap)."""

    def __init__(self, synchronize):
        import time

        self._now, self._sync = time.perf_counter, synchronize
        self._t = self._now()
        self.seconds = {}

    def lap(self, name):
        self._sync()
        t = self._now()
        self.seconds[name] = t - self._t
        self._t = t


def split_block_xp(xp, to_device, block, partitioning: Partitioning, frame: str,
                   exponent: int) -> dict:
    """``steps.split_block`` on ``xp``'s device: {box: Piece} of device
    arrays, the same rows in the same order as the host's.

    Only the block's coordinates cross to the device (the global ids are
    made there); the frame's conversion (a cast, a power-of-two scaling)
    is done on the host first when it changes anything, so that subnormal
    values keep the host's bits.

    Parameters
    ----------
    xp : the device's array module
    to_device : copies a host array to the device
    block : steps.Block (host rows)
    partitioning : Partitioning
    frame : str, the frame's dtype; exponent : int, its power of two
    """
    from ..arrays import is_device_array, stable_argsort, to_host
    from .steps import Piece

    points = block.points
    if is_device_array(points) and points.dtype == np.dtype(frame) and not exponent:
        x = xp.ascontiguousarray(points)   # a persisted block: already there
    else:
        points = to_host(points)
        if points.dtype != np.dtype(frame) or exponent:
            points = points.astype(frame, copy=False)
            if exponent:
                points = np.ldexp(points, exponent).astype(frame, copy=False)
        x = to_device(np.ascontiguousarray(points))
    box = assign_boxes_xp(xp, partitioning, x)
    P = partitioning.n_boxes
    # the narrowest key: a radix sort makes one pass per byte of it
    key = box.astype(np.min_scalar_type(max(P - 1, 0)), copy=False)
    order = stable_argsort(xp, key)
    del key
    counts = to_host(xp.bincount(box, minlength=P))
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    grouped = x[order]
    gids = block.global_ids(xp, order)
    return {k: Piece(grouped[starts[k]:starts[k + 1]], gids[starts[k]:starts[k + 1]])
            for k in range(P)}


def assign_boxes_xp(xp, part: Partitioning, points):
    """``boxes.assign_boxes`` on ``xp``'s arrays: the bisection tree walked
    level by level for all points at once, coordinates compared in float64
    (``x < split`` goes left), as the host compares them."""
    from .boxes import _split_arrays

    n = points.shape[0]
    if not part.splits or n == 0:
        return xp.zeros(n, xp.int64)
    axes, values, left, right = (xp.asarray(a) for a in _split_arrays(part))
    out = xp.zeros(n, xp.int64)
    rows = xp.arange(n, dtype=xp.int64)
    node = xp.zeros(n, xp.int64)
    for _ in range(len(part.splits) + 1):
        if rows.shape[0] == 0:
            break
        x = points[rows, axes[node]].astype(xp.float64)
        child = xp.where(x < values[node], left[node], right[node])
        leaf = child < 0
        out[rows[leaf]] = ~child[leaf]
        rows, node = rows[~leaf], child[~leaf]
    return out
