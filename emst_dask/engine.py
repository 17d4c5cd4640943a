"""The single-tree Borůvka EMST, written once against a kernel set.

The control flow, the invariants and the phase names follow the paper
(Prokopenko, Sao, Lebrun-Grandié, ICPP 2022) and ArborX:

1. ``construct_bvh``: Morton codes, stable sort, radix-tree hierarchy, boxes.
2. ``compute_core_distances`` (mutual reachability only): k-NN on the tree.
3. Borůvka iterations until one component is left, each made of
   ``reduce_labels``, ``compute_upper_bounds``,
   ``find_component_outgoing_edges``, ``reduce_component_minima`` and
   ``merge_components``.

A kernel set (``emst_dask.kernels``) supplies the array module and one
function per phase; the CPU (numba) and CUDA (CuPy) sets differ in how they
compute a phase, never in what it means.  Everything is squared distance
internally; the square root is taken once on output.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

#: the largest supported dimension (64-bit Morton codes: at least 7 bits/axis)
MAX_DIM = 8


@dataclass
class Timers:
    """Named wall-clock timers per phase (seconds), ArborX style.

    ``sync`` is called before reading the clock so that asynchronous device
    work is attributed to the phase that launched it.  When ``enabled`` is
    False no synchronisation happens at all.
    """

    sync: Callable[[], None] = lambda: None
    enabled: bool = True
    seconds: dict[str, float] = field(default_factory=dict)
    _t0: float = 0.0

    def start(self) -> None:
        if self.enabled:
            self.sync()
            self._t0 = time.perf_counter()

    def stop(self, name: str) -> None:
        if self.enabled:
            self.sync()
            t = time.perf_counter()
            self.seconds[name] = self.seconds.get(name, 0.0) + t - self._t0
            self._t0 = t


@dataclass
class BoruvkaResult:
    """Raw engine output, in the kernel set's array module.

    source, target : (n-1,) int64, input rows.
    weight2 : (n-1,) float, squared weights in the *scaled* frame.
    core2 : (n,) float or None, squared core distances in input-row order.
    exponent : int, the coordinates were multiplied by ``2**exponent``.
    """

    source: Any
    target: Any
    weight2: Any
    core2: Any
    exponent: int
    iterations: int
    components: list
    timings: dict
    n_certified: int | None = None
    super_labels: Any = None


def exact_scale(lo: np.ndarray, hi: np.ndarray, dtype) -> int:
    """Exponent ``e`` such that the cloud times ``2**e`` is safe to square.

    Multiplying by a power of two is exact in binary floating point, so
    distances computed on the scaled cloud and scaled back by ``2**-e`` are
    bit-identical to unscaled ones wherever those neither overflow nor
    underflow.  Squared distances overflow float32 past about 1e19 and float64
    past about 1e154, and lose precision to subnormals at the other end; this
    brings the extent near 1 when the cloud is outside that window, never
    pushing its largest coordinate out of range.  Returns 0 when no scaling
    is needed.
    """
    finfo = np.finfo(dtype)
    if lo.size == 0:
        return 0
    ext = float(np.max(hi - lo))
    big = float(max(np.max(np.abs(lo)), np.max(np.abs(hi))))
    if ext == 0.0 or big == 0.0:
        return 0
    # room for d <= 8 squared terms below the largest finite value ...
    top = math.frexp(math.sqrt(float(finfo.max)))[1] - 3
    # ... and squared extents well inside the normal range
    bottom = math.frexp(math.sqrt(float(finfo.tiny)))[1] + 12
    e_ext = math.frexp(ext)[1]
    e_big = math.frexp(big)[1]
    if e_big <= top and e_ext >= bottom:
        return 0
    return min(-e_ext, top - e_big)


def bounds(K, points):
    """Per-axis (min, max) of the points, float64 on the host.

    The kernel set's own ``bounds`` when it has one: CuPy's axis-0 min/max
    of an (n, d) array take about 3 ms per million points each.
    """
    f = getattr(K, "bounds", None)
    if f is not None:
        return f(points)
    lo = K.to_host(points.min(axis=0)).astype(np.float64)
    hi = K.to_host(points.max(axis=0)).astype(np.float64)
    return lo, hi


def scale_exactly(K, points):
    """Bounds, ``exact_scale`` and the scaling, once per cloud.

    Returns (points * 2**exponent, exponent, (lo, hi) of the scaled points).
    Power-of-two scaling is exact, so the scaled bounds need no second pass.
    """
    lo, hi = bounds(K, points)
    exponent = exact_scale(lo, hi, points.dtype)
    if exponent:
        points = _ldexp(K, points, exponent, points.dtype)
        lo, hi = np.ldexp(lo, exponent), np.ldexp(hi, exponent)
    return points, exponent, (lo, hi)


def construct_bvh(K, points, timers: Timers, box=None):
    """Morton codes, stable sort and the radix tree with its boxes.

    ``box`` is the points' (lo, hi) when already known.  Returns the kernel
    set's BVH object, whose ``points`` are in tree order and whose ``orig``
    (int64) maps tree positions to input rows.
    """
    xp = K.xp
    n, d = points.shape
    timers.start()
    lo, hi = bounds(K, points) if box is None else box
    bits = 63 // d
    ext = hi - lo
    with np.errstate(divide="ignore"):
        scale = np.where(ext > 0, (2.0**bits) / np.where(ext > 0, ext, 1.0), 0.0)
    codes = K.morton_codes(points, lo, scale, bits)
    timers.stop("morton_codes")
    perm = K.sort_by_code(codes)
    codes = codes[perm]
    timers.stop("sort")
    bvh = K.build_bvh(points, codes, perm)
    timers.stop("build_hierarchy")
    del codes
    return bvh


def boruvka(K, points, min_samples: int = 1, *, core_distances2=None,
            face_distances=None, progress=None,
            timers: Timers | None = None) -> BoruvkaResult:
    """Exact (mutual-reachability) MST of ``points`` with kernel set ``K``.

    Parameters
    ----------
    K : kernel set (``emst_dask.kernels.get_kernels``).
    points : (n, d) float32/float64 array of ``K.xp``, validated, finite.
    min_samples : int, k_pts of HDBSCAN*, counting the point itself.
    core_distances2 : (n,) float, optional
        Squared core distances known from elsewhere (a partition's points
        need neighbours across its faces), input units and order; replace
        the local k-NN computation.  Squared, so no rounding is added.
    face_distances : (n,) float, optional
        The local certificate of DESIGN.md section 3: distance from each
        point to the nearest face its box shares with another box.  While
        set, a component only takes its shortest edge if that is shorter
        than all its points' face distances (then it is an edge of the global
        MST); when no component can, the iterations carry on uncertified and
        complete the box's own MST.  ``n_certified`` and ``super_labels``
        of the result describe the switch.
    progress : callable(phase: str, **info) or None.
    """
    xp = K.xp
    n, d = points.shape
    timers = timers or Timers(sync=K.synchronize)
    dtype = points.dtype
    if n <= 1:
        e = xp.zeros(0, np.int64)
        core2 = xp.zeros(n, dtype) if min_samples > 1 else None
        return BoruvkaResult(e, e.copy(), xp.zeros(0, dtype), core2, 0, 0, [n], {})

    points, exponent, box = scale_exactly(K, points)
    bvh = construct_bvh(K, points, timers, box)
    mrd = min_samples > 1 or core_distances2 is not None
    if core_distances2 is not None:
        core2 = _ldexp(K, core_distances2, 2 * exponent, dtype)[bvh.orig]
    elif mrd:
        timers.start()
        core2 = K.compute_core_distances(bvh, min_samples)
        timers.stop("compute_core_distances")
        if progress:
            progress("core_distances", k=min_samples)
    else:
        core2 = xp.zeros(n, dtype)

    timers.start()
    state = K.init_boruvka(bvh, core2, mrd)
    timers.stop("init_boruvka")
    certifying = face_distances is not None
    if certifying:
        face = _ldexp(K, face_distances, exponent, dtype)
        # no face (+inf or huge) must not overflow when squared
        face = xp.minimum(face, dtype.type(np.sqrt(np.finfo(dtype).max)))
        K.init_certificate(bvh, state, (face * face)[bvh.orig])
    n_certified = None
    super_labels = None
    n_edges = 0
    iterations = 0
    components = [n]
    while n_edges < n - 1:
        timers.start()
        K.reduce_labels(bvh, state)
        timers.stop("reduce_labels")
        K.compute_upper_bounds(bvh, state)
        timers.stop("compute_upper_bounds")
        K.find_component_outgoing_edges(bvh, state)
        timers.stop("find_component_outgoing_edges")
        K.reduce_component_minima(bvh, state)
        timers.stop("reduce_component_minima")
        if certifying and K.certify_component_edges(bvh, state) == 0:
            # every component is frozen: what is left are the super-vertices
            certifying = False
            n_certified = n_edges
            super_labels = K.component_labels(bvh, state)
            if progress:
                progress("frozen", components=n - n_edges)
        new_edges = K.merge_components(bvh, state)
        timers.stop("merge_components")
        if new_edges <= n_edges:
            raise RuntimeError(
                f"Boruvka made no progress at iteration {iterations} "
                f"({n - n_edges} components); this is a bug, please report it")
        n_edges = new_edges
        iterations += 1
        components.append(n - n_edges)
        if progress:
            progress("iteration", iteration=iterations, components=n - n_edges)

    if certifying:  # everything certified: one super-vertex
        n_certified = n_edges
        super_labels = K.component_labels(bvh, state)
    src, dst, w2 = K.finalize_edges(bvh, state)
    if mrd:
        core_out = xp.empty_like(core2)
        core_out[bvh.orig] = core2
    else:
        core_out = None
    return BoruvkaResult(src, dst, w2, core_out, exponent, iterations, components,
                         dict(timers.seconds), n_certified, super_labels)


def _ldexp(K, values, exponent, dtype):
    """``values * 2**exponent`` (exact) in ``dtype``, on the kernel set's device.

    Done on the host: GPU arithmetic may flush float32 subnormals to zero,
    and a subnormal float32 cloud is exactly the case that needs scaling
    (a rare one, so the round trip costs nothing in the common case).
    """
    if not exponent:
        return K.xp.asarray(values).astype(dtype, copy=False)
    v = np.ldexp(np.asarray(K.to_host(values), np.float64), exponent).astype(dtype)
    return K.xp.asarray(v)


def core_distances2(K, points, min_samples: int):
    """(n,) squared core distances (input units, input order) of ``points``."""
    n = points.shape[0]
    if min_samples <= 1 or n <= 1:
        return K.xp.zeros(n, points.dtype)
    points, exponent, box = scale_exactly(K, points)
    bvh = construct_bvh(K, points, Timers(enabled=False), box)
    core2 = K.compute_core_distances(bvh, min_samples)
    out = K.xp.empty_like(core2)
    out[bvh.orig] = core2
    return _ldexp(K, out, -2 * exponent, points.dtype)
