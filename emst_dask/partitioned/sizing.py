"""How many boxes: footprints per point, ``partitions="auto"``, and bounds."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError

#: peak device memory of the single-GPU path per point, input excluded,
#: measured on the H100 (3-D float32, 100M points); other dtypes scale with
#: the element size
DEVICE_BYTES_PER_POINT_F32 = 77
#: the same for phase 1 of a partitioned job (Borůvka, then the certificate's
#: sort and rounds), as the CuPy pool holds it: 116.4 B/pt with the input
#: at 50M and 100M-point boxes on the H100 (3-D float32); 105 + 12
BOX_DEVICE_BYTES_PER_POINT_F32 = 105
#: fraction of a worker's memory a box may fill ("auto" partitions)
MEMORY_FRACTION = 0.8
#: at most this many boxes per worker: more only multiplies the phase-2
#: traffic (every box's shell) without letting a larger cloud fit
MAX_BOXES_PER_WORKER = 64


def footprint_bytes_per_point(d: int, dtype) -> float:
    """Peak memory of the single-device path per point (input included)."""
    item = np.dtype(dtype).itemsize
    return d * item + DEVICE_BYTES_PER_POINT_F32 * item / 4


def box_footprint_bytes_per_point(d: int, dtype) -> float:
    """Peak memory of phase 1 on one box per point (input included)."""
    item = np.dtype(dtype).itemsize
    return d * item + BOX_DEVICE_BYTES_PER_POINT_F32 * item / 4


def check_partitions(partitions) -> int | str:
    """``partitions`` if it is "auto" or an integer >= 1."""
    if partitions == "auto":
        return "auto"
    if isinstance(partitions, bool) or not isinstance(partitions, (int, np.integer)) \
            or partitions < 1:
        raise InputError(f"partitions must be 'auto' or an integer >= 1, got {partitions!r}")
    return int(partitions)


def bound_partitions(P: int, n: int, workers: int | None) -> int:
    """Refuse more boxes than points, or than ``MAX_BOXES_PER_WORKER`` per
    worker (``workers`` = 0: in this process, counted as one; None: not
    known yet, only the bound by n)."""
    if P > max(2, n):
        raise InputError(f"partitions={P} is more than the {n} points of the cloud: every "
                         "box needs points; use at most n boxes (or 'auto')")
    if workers is None:
        return P
    cap = MAX_BOXES_PER_WORKER * max(1, workers)
    if P > cap:
        where = f"{workers} worker(s)" if workers else "this process"
        raise InputError(f"partitions={P} is more than {cap} boxes ({MAX_BOXES_PER_WORKER} "
                         f"per worker) for {where}; more boxes only add phase-2 work. Use "
                         "'auto', or at most that many")
    return P


def auto_partitions(n: int, d: int, dtype, memory: int | None) -> int:
    """P for ``partitions="auto"``: one box while the single-device path
    fits ``MEMORY_FRACTION`` of the smallest worker's ``memory`` (bytes;
    None: unknown, one box), else boxes of the measured phase-1 footprint."""
    if not memory:
        return 1
    cap = MEMORY_FRACTION * memory
    if n * footprint_bytes_per_point(d, dtype) <= cap:
        return 1
    return max(2, math.ceil(n * box_footprint_bytes_per_point(d, dtype) / cap))
