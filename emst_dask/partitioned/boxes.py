"""The boxes of a partitioned EMST: recursive coordinate bisection, which box
a point is in, rows grouped by box, and distances to faces and boxes.

P axis-aligned boxes tile the cloud's bounding box.  A point's *face
distance* is its distance to the nearest face its box shares with another
box (faces on the global boundary do not count): no point of another box
is closer to it than that.  Distances are computed in float64.

In a periodic box of lengths L the boxes tile [0, L) and a face on the
global boundary is shared with the box at the opposite end of its axis
(unless the box spans the whole axis: then it wraps onto itself, which its
own minimum-image tree takes care of); distances to boxes are minimum-image.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from ..arrays import array_module


@dataclass
class Partitioning:
    """P axis-aligned boxes tiling the global bounding box.

    lo, hi : (P, d) float64 corners.  ``splits`` is the bisection tree as
    rows (axis, value, left, right) with children < 0 meaning box ``~child``.
    period : (d,) float64 lengths of a periodic box (the boxes tile
    [0, period)), or None.
    """

    lo: np.ndarray
    hi: np.ndarray
    global_lo: np.ndarray
    global_hi: np.ndarray
    splits: list
    period: np.ndarray | None = None

    @property
    def n_boxes(self) -> int:
        """P, the number of boxes."""
        return self.lo.shape[0]


def recursive_coordinate_bisection(sample: np.ndarray, n_boxes: int,
                                   global_lo, global_hi, period=None) -> Partitioning:
    """Split the bounding box into ``n_boxes`` boxes of about equal counts.

    Each split halves the box's longest side at the sample quantile that
    divides the box's share of boxes (so P need not be a power of two).
    With ``period`` (d,) the boxes tile the periodic box [0, period) instead.
    """
    d = sample.shape[1]
    if period is not None:
        period = np.asarray(period, np.float64)
        global_lo, global_hi = np.zeros(d), period
    glo = np.asarray(global_lo, np.float64)
    ghi = np.asarray(global_hi, np.float64)
    los, his, splits = [], [], []

    def split(s, p, lo, hi):
        if p == 1:
            los.append(lo)
            his.append(hi)
            return ~(len(los) - 1)
        axis = int(np.argmax(hi - lo))
        pl = p // 2
        if s.shape[0] >= 2:
            v = float(np.quantile(s[:, axis], pl / p))
        else:
            v = 0.5 * (lo[axis] + hi[axis])
        if not lo[axis] < v < hi[axis]:
            v = 0.5 * (lo[axis] + hi[axis])
        row = len(splits)
        splits.append([axis, v, 0, 0])
        left_hi = hi.copy()
        left_hi[axis] = v
        right_lo = lo.copy()
        right_lo[axis] = v
        on_left = s[:, axis] < v
        splits[row][2] = split(s[on_left], pl, lo, left_hi)
        splits[row][3] = split(s[~on_left], p - pl, right_lo, hi)
        return row

    split(np.asarray(sample, np.float64), n_boxes, glo.copy(), ghi.copy())
    return Partitioning(np.array(los).reshape(-1, d), np.array(his).reshape(-1, d),
                        glo, ghi, splits, period)


def _split_arrays(part: Partitioning):
    rows = part.splits or [[0, 0.0, -1, -1]]
    return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64),
            np.array([r[2] for r in rows], np.int64), np.array([r[3] for r in rows], np.int64))


@njit(parallel=True, cache=True)
def _box_of(points, axes, values, left, right):
    n = points.shape[0]
    out = np.empty(n, np.int64)
    for i in prange(n):
        node = 0
        while True:
            # compared in float64, like the face distances: a float32
            # coordinate and a split value that float32 cannot hold must not
            # round onto the same side
            if np.float64(points[i, axes[node]]) < values[node]:
                child = left[node]
            else:
                child = right[node]
            if child < 0:
                out[i] = ~child
                break
            node = child
    return out


def assign_boxes(part: Partitioning, points) -> np.ndarray:
    """(n,) int64 box of each point (``x < split`` goes left, in float64)."""
    n = points.shape[0]
    if not part.splits or n == 0:
        return np.zeros(n, np.int64)
    return _box_of(np.ascontiguousarray(points), *_split_arrays(part))


@njit(parallel=True, cache=True)
def _group_rows(points, box, n_boxes, n_chunks, row_offset):
    n, d = points.shape
    step = (n + n_chunks - 1) // n_chunks
    counts = np.zeros((n_chunks, n_boxes), np.int64)
    for c in prange(n_chunks):
        for i in range(c * step, min(n, (c + 1) * step)):
            counts[c, box[i]] += 1
    # box-major, chunk-minor offsets: each chunk scatters its rows of box b
    # after the rows of b from earlier chunks, so the grouping is stable
    offsets = np.empty((n_chunks, n_boxes), np.int64)
    starts = np.zeros(n_boxes + 1, np.int64)
    acc = 0
    for b in range(n_boxes):
        starts[b] = acc
        for c in range(n_chunks):
            offsets[c, b] = acc
            acc += counts[c, b]
    starts[n_boxes] = acc
    grouped = np.empty_like(points)
    rows = np.empty(n, np.int64)
    for c in prange(n_chunks):
        pos = offsets[c].copy()
        for i in range(c * step, min(n, (c + 1) * step)):
            b = box[i]
            p = pos[b]
            pos[b] = p + 1
            for a in range(d):
                grouped[p, a] = points[i, a]
            rows[p] = i + row_offset
    return grouped, rows, starts


def group_by_box(points, box, n_boxes, row_offset=0):
    """The rows of ``points`` grouped by box, stably, in one parallel pass.

    points : (n, d) float; box : (n,) int64 in [0, n_boxes).  Returns
    ``grouped`` (n, d) (box k's rows are ``grouped[starts[k]:starts[k+1]]``,
    in their input order), ``rows`` (n,) int64 (input row of each grouped
    row plus ``row_offset``) and ``starts`` (n_boxes + 1,) int64.
    """
    pts = np.ascontiguousarray(points)
    return _group_rows(pts, np.ascontiguousarray(box, np.int64), n_boxes,
                       _n_chunks(pts.shape[0]), np.int64(row_offset))


def _n_chunks(n: int) -> int:
    """Stretches of rows the two-pass (count, then place) kernels split n
    rows into: at least 64K rows each, at most 256."""
    return max(1, min(256, n // 65536))


@njit(parallel=True, cache=True)
def _copy_rows(dst, src, at):
    # in blocks of rows: one thread per block, few page faults contended
    n = src.shape[0]
    step = 1 << 16
    for c in prange((n + step - 1) // step):
        for i in range(c * step, min(n, (c + 1) * step)):
            for a in range(src.shape[1]):
                dst[at + i, a] = src[i, a]


def concat_rows(arrays):
    """``np.concatenate(arrays)`` along axis 0, copied in parallel.

    arrays : sequence of (m_i, ...) arrays of one dtype and equal trailing
    shapes.  The output is allocated once and filled by numba threads, so
    its pages are faulted in by all cores rather than one (the
    single-threaded concatenate of a box's gigabytes was most of the
    shuffle).
    """
    arrays = [np.ascontiguousarray(a) for a in arrays]
    total = sum(a.shape[0] for a in arrays)
    out = np.empty((total,) + arrays[0].shape[1:], arrays[0].dtype)
    flat = out.reshape(total, -1)
    at = 0
    for a in arrays:
        if a.shape[0]:
            _copy_rows(flat, a.reshape(a.shape[0], -1), at)
        at += a.shape[0]
    return out


@njit(parallel=True, cache=True)
def _face_distances(points, lo, hi, use_lo, use_hi):
    n, d = points.shape
    out = np.empty(n)
    for i in prange(n):
        b = np.inf
        for a in range(d):
            x = np.float64(points[i, a])
            if use_lo[a]:
                b = min(b, x - lo[a])
            if use_hi[a]:
                b = min(b, hi[a] - x)
        out[i] = max(b, 0.0)
    return out


@dataclass(frozen=True)
class Walls:
    """The faces box k shares with another box: what its points' face
    distances are computed from, where and when they are needed (a box
    keeps these few numbers, not 8 bytes a point).

    lo, hi : (d,) float64 corners; use_lo, use_hi : (d,) bool, which low
    and high faces are shared (``shared_faces``).
    """

    lo: np.ndarray
    hi: np.ndarray
    use_lo: np.ndarray
    use_hi: np.ndarray

    @property
    def any(self) -> bool:
        """Whether the box shares a face at all (else every distance is +inf)."""
        return bool(self.use_lo.any() or self.use_hi.any())

    def distances(self, points, xp=None):
        """(n,) float64 face distances of ``points`` ((n, d) of ``xp``,
        by default their own array module; the result on the same
        device): numba's parallel pass on the host, the same float64
        operations elementwise elsewhere, so the same bits."""
        xp = array_module(points) if xp is None else xp
        if xp is np:
            return _face_distances(np.ascontiguousarray(points), self.lo, self.hi,
                                   self.use_lo, self.use_hi)
        out = xp.full(points.shape[0], np.inf, xp.float64)
        for a in range(points.shape[1]):
            if self.use_lo[a] or self.use_hi[a]:
                x = points[:, a].astype(xp.float64)
                if self.use_lo[a]:
                    xp.minimum(out, x - float(self.lo[a]), out=out)
                if self.use_hi[a]:
                    xp.minimum(out, float(self.hi[a]) - x, out=out)
        return xp.maximum(out, 0.0)


def box_walls(part: Partitioning, k: int) -> Walls:
    """Box k's ``Walls``."""
    use_lo, use_hi = shared_faces(part, k)
    return Walls(np.asarray(part.lo[k], np.float64), np.asarray(part.hi[k], np.float64),
                 np.asarray(use_lo, bool), np.asarray(use_hi, bool))


def face_distances(part: Partitioning, k: int, points) -> np.ndarray:
    """(n,) float64 distance from each point of box k to its nearest face
    shared with another box (+inf when the box shares none); one parallel
    pass, in float64 (``points`` of numpy; cupy's stay on their device)."""
    return box_walls(part, k).distances(points)


def shared_faces(part: Partitioning, k: int):
    """((d,) bool, (d,) bool): which of box k's low and high faces it
    shares with another box."""
    lo, hi = part.lo[k], part.hi[k]
    use_lo, use_hi = lo > part.global_lo, hi < part.global_hi
    if part.period is not None:  # a global face is shared with the opposite end's box
        use_lo, use_hi = use_lo | use_hi, use_lo | use_hi
    return use_lo, use_hi


def certificate_distances(b: np.ndarray, dtype, d: int) -> np.ndarray:
    """Face distances shrunk so the certificate survives rounding.

    A squared distance in ``dtype`` is within (2d + 4) ulps of the truth, so
    comparing against ``b * (1 - (2d + 4) eps)`` (rounded down) keeps the
    proof valid in finite precision.
    """
    eps = float(np.finfo(dtype).eps)
    safe = (b * (1.0 - (2 * d + 4) * eps)).astype(dtype)
    return np.nextafter(safe, dtype.type(0)) if np.issubdtype(dtype, np.floating) else safe


def distance_to_box(part: Partitioning, k: int, points) -> np.ndarray:
    """(n,) float64 Euclidean distance from points to box k (0 inside);
    minimum-image in a periodic box."""
    x = np.asarray(points, np.float64)
    lo, hi = part.lo[k], part.hi[k]
    below, above = lo - x, x - hi
    if part.period is not None:  # or the way round, through the global faces
        L = part.period
        below, above = np.minimum(below, x + (L - hi)), np.minimum(above, (L - x) + lo)
    gap = np.maximum(np.maximum(below, above), 0.0)
    return np.sqrt((gap * gap).sum(axis=1))


@njit(parallel=True, cache=True)
def _indices_at_most(values, bound, n_chunks):
    n = values.shape[0]
    step = (n + n_chunks - 1) // n_chunks
    counts = np.zeros(n_chunks + 1, np.int64)
    for c in prange(n_chunks):
        k = 0
        for i in range(c * step, min(n, (c + 1) * step)):
            if values[i] <= bound:
                k += 1
        counts[c + 1] = k
    for c in range(n_chunks):
        counts[c + 1] += counts[c]
    out = np.empty(counts[n_chunks], np.int64)
    for c in prange(n_chunks):
        k = counts[c]
        for i in range(c * step, min(n, (c + 1) * step)):
            if values[i] <= bound:
                out[k] = i
                k += 1
    return out


def indices_at_most(values, bound: float) -> np.ndarray:
    """``np.flatnonzero(values <= bound)`` (ascending int64) in one parallel
    pass: the shell of a box of hundreds of millions of points is a small
    fraction of it."""
    v = np.ascontiguousarray(values)
    return _indices_at_most(v, float(bound), _n_chunks(v.shape[0]))


def shell_radius(radius: float) -> float:
    """R with a little slack: it only adds candidates, never costs exactness."""
    return radius * (1 + 1e-6) + 1e-300


def shell_and_ghosts(part: Partitioning, k: int, points, face, radius: float):
    """For the points of box k: which go to which other box as ghosts.

    The shell is the points with face distance <= R; a shell point goes to
    every other box within R of it.  A little slack on R only adds
    candidates; it never costs exactness.

    Parameters
    ----------
    part : Partitioning
    k : int
        The box.
    points : (m, d) float array
        Box k's points.
    face : (m,) float64 array
        Their face distances (``face_distances``).
    radius : float
        R.

    Returns
    -------
    shell : (s,) int64 array
        Indices into ``points`` of the shell, ascending.
    ghosts : dict
        {other box: int64 index array into ``points``}, boxes with none left
        out.
    """
    r = shell_radius(radius)
    shell = indices_at_most(face, r)
    out = {}
    if shell.size == 0:
        return shell, out
    x = points[shell]
    for j in range(part.n_boxes):
        if j != k:
            near = shell[distance_to_box(part, j, x) <= r]
            if near.size:
                out[j] = near
    return shell, out


def mean_spacing(part: Partitioning, n: int) -> float:
    """(volume / n) ** (1/d) over the axes of nonzero extent."""
    ext = part.global_hi - part.global_lo
    ext = ext[ext > 0]
    if ext.size == 0 or n == 0:
        return 0.0
    return float(np.exp(np.log(ext).sum() / ext.size) / n ** (1.0 / ext.size))


def choose_partitioning(points, n_boxes, sample_size=100_000, seed=0) -> Partitioning:
    """Recursive coordinate bisection of in-memory ``points``, split at a random sample.

    Parameters
    ----------
    points : (n, d) float array
    n_boxes : int
    sample_size : int
        Rows sampled (without replacement) for the split values.
    seed : int

    Returns
    -------
    Partitioning
        Boxes tiling the points' bounding box.
    """
    n = points.shape[0]
    rng = np.random.default_rng(seed)
    take = rng.choice(n, size=min(n, sample_size), replace=False) if n else np.zeros(0, int)
    sample = np.asarray(points[np.sort(take)], np.float64)
    lo = np.asarray(points.min(axis=0), np.float64) if n else np.zeros(points.shape[1])
    hi = np.asarray(points.max(axis=0), np.float64) if n else np.zeros(points.shape[1])
    return recursive_coordinate_bisection(sample, n_boxes, lo, hi)
