"""The CUDA kernel set: CuPy arrays, CUDA C++ kernels compiled by NVRTC.

The kernels live in ``construction.cu``, ``copies.cu``, ``search.cu`` and
``core_distances.cu`` after ``lbvh.cuh`` (read its header for the data
layout and the invariants).  They are templates over the float type and
the dimension, compiled per (dtype, d, part) at first use and launched by
``backend.CupyBackend``.

The engine's phases map to launches as follows (n threads each, tree order):

=============================  ==================================================
duplicates (engine's)          k_mark_copies; two cumsums and k_compact_copies
                               when the copies are collapsed
construct_bvh                  k_morton, argsort (CuPy's, stable), k_gather,
                               k_delta, k_pairs, k_leaves (a node of two
                               points is one leaf), k_build (bottom-up, CAS
                               flags; each node's far end)
compute_core_distances         k_knn (k-th other neighbour, value only)
reduce_labels                  k_change_bits, a cumsum of n/32 counts,
                               k_node_labels (a thread a node); nothing in the
                               first iteration (all nodes are mixed)
compute_upper_bounds           k_bounds: Morton neighbours + still-foreign
                               certified candidates, 64-bit atomicMin
find_component_outgoing_edges  k_search (the first iteration is a plain
                               nearest-other-point query; Euclidean, it keeps
                               the second-nearest too, which the second
                               iteration's k_bounds reads)
reduce_component_minima        k_ties, k_winner (the strict order's tie-break)
merge_components               k_merge_next, k_merge_roots, k_merge_jump,
                               k_relabel; one 4-byte device-to-host read
finalize_edges                 k_finalize
=============================  ==================================================

Device memory per point, 3-D float32, min_samples = 1: points with labels 16,
nodes 20.5 (32 bytes, L - 1 of them for L = 0.64 n leaves: a node of two
points of the points' tree is one leaf), each node's far end 2.56, the
leaf table 0.16, orig 4, aux 4, a certified candidate or a lower bound 4,
best 8 (which also holds the finished edges): 59.2 bytes, plus what the
engine holds (delta lives through the construction only), the label
pass's 0.25 a point, and from the first search to the second iteration's
bounds each point's second-nearest candidate, 4 (Euclidean only): 63.6
measured.
"""
from __future__ import annotations

from .backend import (  # noqa: F401
    KNN_KMAX,
    PERIOD_KEY,
    THREADS,
    CupyBackend,
    cupy,
    expr,
    expressions,
    part_of,
    record_sizes,
    source,
)
from .boruvka_phases import BoruvkaPhases
from .construction import ConstructionPhases
from .copies import CopiesPhases
from .queries import QueryPhases
from .records import BOUNDS_THREADS, JUMP_STEPS, KEY_INIT, CudaBoruvkaState, CudaBVH  # noqa: F401


class _CudaKernelsBase(ConstructionPhases, CopiesPhases, BoruvkaPhases, QueryPhases):
    """Kernel set of the CUDA backend (see ``emst_dask.engine``)."""

    name = "cuda"
    _be = None
    xp = None

    # -- plumbing ----------------------------------------------------------
    @classmethod
    def synchronize(cls) -> None:
        """Wait for the device's queued work (the backend's current stream).

        Returns
        -------
        None
        """
        cls._be.synchronize()

    @classmethod
    def to_host(cls, a):
        """``a`` as a numpy array (``backend.to_host``: with CuPy a blocking copy).

        Parameters
        ----------
        a : array of ``xp``

        Returns
        -------
        numpy.ndarray
        """
        return cls._be.to_host(a)

    @classmethod
    def to_device(cls, a):
        """A host array on the device (the backend's fast path when it has one).

        Parameters
        ----------
        a : numpy array
            (An array of ``xp`` comes back as it is.)

        Returns
        -------
        array of ``xp`` (cupy), same shape and dtype
        """
        return cls._be.to_device(a)

    @classmethod
    def _launch(cls, bvh_or_dtype, d, name, nthreads, args, *extra):
        """Launch kernel ``name<T, d, *extra>`` with ``nthreads`` threads (``backend.launch``).

        ``bvh_or_dtype`` is the float dtype T, or a ``CudaBVH`` (its dtype,
        and its periodic box if it has one); ``args`` the kernel's arguments.
        """
        if isinstance(bvh_or_dtype, CudaBVH):
            cls._be.launch(bvh_or_dtype.dtype, d, name, extra, nthreads, args,
                           period=bvh_or_dtype.period)
        else:
            cls._be.launch(bvh_or_dtype, d, name, extra, nthreads, args)


def make_kernel_set(backend, name: str = "CudaKernels"):
    """A kernel-set class bound to ``backend`` (CuPy, or the test emulator)."""
    return type(name, (_CudaKernelsBase,), {"_be": backend, "xp": backend.xp,
                                            "__doc__": _CudaKernelsBase.__doc__})


CudaKernels = make_kernel_set(CupyBackend()) if cupy is not None else None
