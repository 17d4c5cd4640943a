"""The CUDA kernel set's records: the tree and the Borůvka state on the
device, and the constants their launches share (``kernel_set`` says how the
phases map to kernels)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: best[] initial value per dtype: an infinite radius (float: and the largest key)
KEY_INIT = {np.dtype(np.float32): np.uint64(0x7F800000FFFFFFFF),
            np.dtype(np.float64): np.uint64(0x7FF0000000000000)}
_NO_KEY = np.uint64(0xFFFFFFFFFFFFFFFF)
#: the word of cl[] (a candidate or a lower bound) per dtype: the float's width
CL_WORD = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _i32(v):
    return np.int32(v)


#: EMST_INT_MAX of the kernels: the recorded pick of an edge of the last
#: iteration (the root chain)
INT_MAX = np.int32(0x7FFFFFFF)
#: pointer-jumping steps of one k_merge_jump launch (each step doubles a
#: jump while the threads run together; unfinished chains get another launch)
JUMP_STEPS = 64
#: threads of the grid-stride bounding-box kernel (about two waves on an H100)
BOUNDS_THREADS = 1 << 19


def _ordered_to_float(u: np.ndarray, dtype) -> np.ndarray:
    """Invert the kernels' order-preserving float -> unsigned map."""
    dt = np.dtype(dtype)
    ut = np.uint32 if dt == np.float32 else np.uint64
    u = u.astype(ut)
    top = ut(1) << ut(8 * dt.itemsize - 1)
    b = np.where(u & top, u ^ top, ~u).astype(ut)
    return b.view(dt)


@dataclass(eq=False)
class CudaBVH:
    """The LBVH on the device (tree order; see ``lbvh.cuh`` for the records).

    P : (n * pt_bytes,) uint8 point records (coordinates and component
    label).  A leaf of the tree holds one point or two (a node of two
    points of the points' tree): ``n_leaves`` = L of them.  tab :
    (ceil(L/32),) uint64, per 32 leaves the first point of the first (low
    word) and a bit a leaf set when it holds two (high word).  nodes :
    ((L-1) * node_bytes,) uint8 node records (box, split, label).  delta :
    (L-1,) uint8 common-prefix lengths of the codes where neighbouring
    leaves meet (construction only: ``init_boruvka`` drops it).  far :
    (L-1,) int32, the other end of each node's leaf range (node k covers
    [k, far[k]] or [far[k], k]; the label pass reads both).  orig : (n,)
    int32 input row of each position.  aux :
    (n,) int32 scratch (construction flags, then the Borůvka work lists).  period : (d,)
    float64 box lengths of a periodic box (scaled with the points; the
    kernels of the periodic modules run), or None.
    """

    P: Any
    nodes: Any
    delta: Any
    far: Any
    orig: Any
    aux: Any
    n: int
    d: int
    dtype: np.dtype
    pt_bytes: int
    node_bytes: int
    period: Any = None
    tab: Any = None
    n_leaves: int = 1


@dataclass(eq=False)
class CudaBoruvkaState:
    """Borůvka iteration state on the device (arrays (n,)).

    core2 : squared core distances (tree order; ``cl`` when not mrd).
    cl : per point, its certified nearest foreign point j as ``~j`` (< 0),
    else the bits of a lower bound on its distance to anything foreign
    (``CL_WORD``: int32 for float32, int64 for float64; a candidate's lower
    bound is its weight, see ``lbvh.cuh``).  best : uint64 packed (weight,
    position) keys per component, which also hold the finished edges for
    float32; key2 : the same for float64 ties (``best`` itself for float32).
    counter : int32 [edges so far, unfinished root searches]; count : int32
    the work list's length.  it : iteration; n_edges : edges so far.  rec :
    (rec_point, rec_edge, rec_round) of ``k_record_picks``, or None.
    second : int32 each point's certified second-nearest other point (tree
    position, -1: none) from the first Euclidean search, until the second
    iteration's bounds have read it; else None.
    """

    mrd: bool
    core2: Any
    cl: Any
    best: Any
    key2: Any
    edges: Any
    counter: Any
    count: Any
    it: int = 0
    n_edges: int = 0
    rec: Any = None
    second: Any = None
