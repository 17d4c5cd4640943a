"""How many boxes: footprints per point, ``partitions="auto"``, and bounds."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError

#: peak device memory of the single-GPU path per point, input excluded,
#: measured on the H100 (3-D float32, 100M points); other dtypes scale with
#: the element size.  Kept above the 63.6 measured on an H200 since the
#: tree's two-point leaves, the label pass's far ends and the first
#: search's second candidates (``emst`` alone, 100M): "auto" trusts a
#: figure near a GPU's capacity only once a run there has held it
DEVICE_BYTES_PER_POINT_F32 = 77
#: the same for phase 1 of a partitioned job (Borůvka, then the certificate's
#: sort and rounds), as the CuPy pool holds it: 116.4 B/pt with the input
#: at 50M and 100M-point boxes on the H100 (3-D float32); 105 + 12
BOX_DEVICE_BYTES_PER_POINT_F32 = 105
#: peak memory of a CPU worker process running the one-box job, per point,
#: beyond the process's own (input, reading and staging included), by
#: element size and min_samples > 1: the worker's peak RSS (VmHWM, reset
#: after the kernels compiled) less its RSS before the job; 3-D, 2M uniform
#: points read from a snapshot, one worker, one thread (benchmarks/NOTES.md):
#: float32 198 B/pt at min_samples=1, 207 at 5; float64 274 and 291
CPU_BYTES_PER_POINT = {(4, False): 198, (4, True): 207, (8, False): 274, (8, True): 291}
#: the same for one box of a partitioned job, per point of the box: from the
#: worker's peaks with the cloud in P = 2 and in P = 4 boxes (peak = n r +
#: (n / P) b, b = 4 (peak_2 - peak_4) / n): float32 158 and 164, float64 218
#: and 359 B/pt at min_samples 1 and 5
BOX_CPU_BYTES_PER_POINT = {(4, False): 158, (4, True): 164, (8, False): 218, (8, True): 359}
#: a CPU worker process's own memory once it has compiled the kernels (the
#: RSS before the jobs above, 207 MB): the least "auto" counts a worker
#: holding, for one that has not run a job yet holds less
CPU_PROCESS_BYTES = 207_000_000
#: a box holds up to this times n / P points: the bisection splits a sample,
#: and phase 2 brings each box its shell of ghosts
BOX_SLACK = 1.25
#: fraction of a worker's memory a job may fill ("auto" partitions); Dask
#: pauses a worker at 80 % of its memory limit and kills it at 95 %
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


def cpu_bytes_per_point(d: int, dtype, min_samples: int = 1, box: bool = False) -> float:
    """Peak memory of a CPU worker per point of its job (``box``: of one box
    of a partitioned job); measured at d = 3, scaled by d / 3 above (every
    array that holds coordinates grows with d; the others do not, so this
    over-counts)."""
    table = BOX_CPU_BYTES_PER_POINT if box else CPU_BYTES_PER_POINT
    key = (8 if np.dtype(dtype).itemsize > 4 else 4, int(min_samples) > 1)
    return table[key] * max(1.0, d / 3)


def resident_bytes_per_point(d: int, dtype) -> float:
    """What a worker holds of each point of its boxes between their steps:
    the coordinates and an int64 id."""
    return d * np.dtype(dtype).itemsize + 8


def phase1_bytes(held: float, largest: float, d: int, dtype, staged: bool) -> float:
    """Peak device bytes of a GPU's phase 1 over boxes of ``held`` points
    kept on it, the largest of ``largest``: the boxes, the certified edges
    kept until they are written (two int64 ends and a weight a point) and
    the largest box's phase 1.  ``staged``: a box solved before another
    has its edges moved to host memory first (the job's staged writes), so
    only the last box's stay (counted as the largest's); else every box's.
    (One H200, uniform 1B in two boxes, staged: the pool held 79 GB, this
    says 108.)"""
    edges = 16 + np.dtype(dtype).itemsize
    return (resident_bytes_per_point(d, dtype) * held + edges * (largest if staged else held)
            + largest * box_footprint_bytes_per_point(d, dtype))


def device_boxes_fit(n: int, d: int, dtype, P: int, memory: int | None,
                     staged: bool = False) -> bool:
    """Whether one GPU of ``memory`` bytes holds a job's P boxes of ``n``
    points made on it and kept there for the whole job, within
    ``MEMORY_FRACTION`` of it, at the largest of: the cloud read there
    and split by box (its coordinates, the sort's order and scratch, the
    pieces); the cloud, the pieces and the boxes while they are
    assembled; ``phase1_bytes`` with the largest box ``BOX_SLACK`` times
    n / P points."""
    if not memory:
        return False
    coords = d * np.dtype(dtype).itemsize
    resident = resident_bytes_per_point(d, dtype)
    box = BOX_SLACK * n / max(1, P)
    peak = max((coords + 16 + resident) * n, (coords + 2 * resident) * n,
               phase1_bytes(n, box, d, dtype, staged))
    return peak <= MEMORY_FRACTION * memory


def rank_boxes_fit(read: int, held: int, largest: int, d: int, dtype,
                   memory: int | None, staged: bool = False) -> bool:
    """Whether the GPU of one rank of a multi-GPU exchange, of ``memory``
    bytes, holds its part of a job for the whole job, within
    ``MEMORY_FRACTION`` of it, at the largest of: the ``read`` points of
    its blocks split by box there (their coordinates, the sort's order and
    scratch, the pieces); its pieces, those it receives and its boxes of
    ``held`` points in all while they are assembled; ``phase1_bytes`` of
    its boxes, the largest of ``largest`` points.  The counts are exact
    (the plan's table), so no slack is added."""
    if not memory:
        return False
    coords = d * np.dtype(dtype).itemsize
    resident = resident_bytes_per_point(d, dtype)
    peak = max((coords + 16 + resident) * read, (coords + resident) * read + 2 * resident * held,
               phase1_bytes(held, largest, d, dtype, staged))
    return peak <= MEMORY_FRACTION * memory


def worker_peak(n: int, d: int, dtype, P: int, *, min_samples=1, workers=1,
                threads=1) -> float:
    """Bytes a CPU worker needs for ``P`` boxes of ``n`` points over
    ``workers`` workers of ``threads`` threads: its boxes' points held, and
    the peak of as many boxes at once as it runs (P = 1: the one-box job)."""
    if P == 1:
        return n * cpu_bytes_per_point(d, dtype, min_samples)
    mine = math.ceil(P / max(1, workers))
    box = BOX_SLACK * n / P
    at_once = min(mine, max(1, threads))
    return (mine * box * resident_bytes_per_point(d, dtype)
            + at_once * box * cpu_bytes_per_point(d, dtype, min_samples, box=True))


def auto_partitions(n: int, d: int, dtype, memory: int | None, *, min_samples=1,
                    device=False, workers=1, threads=1, baseline=0) -> int:
    """P for ``partitions="auto"``.

    Parameters
    ----------
    n, d : int
    dtype : numpy dtype the job computes in
    memory : int or None
        The smallest worker's memory (bytes): its device memory
        (``device``) or its memory limit; None: unknown, one box.
    min_samples, workers, threads : int
        The job's min_samples; the workers and threads per worker.
    baseline : int
        Bytes the worker processes hold already (the largest), taken off
        ``MEMORY_FRACTION * memory`` on CPU workers.

    Returns
    -------
    int: 1 while the one-box job fits, else the fewest boxes that fit
    (CPU workers: ``worker_peak``; GPU workers: the device footprints,
    the largest box ``BOX_SLACK`` times n / P points).
    """
    if not memory:
        return 1
    if device:
        cap = MEMORY_FRACTION * memory
        if n * footprint_bytes_per_point(d, dtype) <= cap:
            return 1
        # a box holds up to BOX_SLACK n / P points, and one GPU runs one
        # box's phase 1 at a time whatever its share of the boxes
        return max(2, math.ceil(BOX_SLACK * n * box_footprint_bytes_per_point(d, dtype)
                                / cap))
    baseline = max(baseline, CPU_PROCESS_BYTES)
    cap = MEMORY_FRACTION * memory - baseline
    most = MAX_BOXES_PER_WORKER * max(1, workers)
    need = dict(min_samples=min_samples, workers=workers, threads=threads)
    if cap > 0 and worker_peak(n, d, dtype, 1, **need) <= cap:
        return 1
    for P in range(2, max(2, min(most, n)) + 1):
        if cap > 0 and worker_peak(n, d, dtype, P, **need) <= cap:
            return P
    mb = 1e-6
    raise InputError(
        f"partitions='auto': {n} points in {d}-D ({np.dtype(dtype).name}) do not fit "
        f"{workers} worker(s) of {memory * mb:.0f} MB ({MEMORY_FRACTION:.0%} of it, less the "
        f"{baseline * mb:.0f} MB the worker processes hold already, is "
        f"{max(cap, 0) * mb:.0f} MB) even in {most} boxes (about "
        f"{worker_peak(n, d, dtype, most, **need) * mb:.0f} MB a worker); add workers or "
        "memory")
