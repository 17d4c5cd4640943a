"""How the CUDA kernel set reaches the GPU: the kernels' source, one CuPy
``RawModule`` per (dtype, d, part) compiled by NVRTC at first use, launches,
and host-to-device copies through a ring of pinned buffers.

``part`` is "core" (plain Euclidean) or "mrd" (mutual reachability and the
k-NN core distances), so a plain EMST never compiles the mutual-reachability
code.  The test suite's emulator replaces ``CupyBackend`` (same methods) to
run the kernels on the CPU.
"""
from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

try:  # the module imports without CuPy, so that the emulator can reuse it
    import cupy
except ImportError:  # pragma: no cover - exercised where CuPy is absent
    cupy = None

#: threads per block of every launch
THREADS = 256
#: k-NN list sizes kept in registers (unrolled); larger k use global scratch
KNN_KMAX = (8, 16, 32)
#: NVRTC options: no fused multiply-add anywhere, so that a weight computed in
#: two kernels is the same bits (the sources also round explicitly)
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false")

_SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
#: one program, in this order: the records and helpers, then each stage's kernels
_SOURCE_FILES = ("lbvh.cuh", "construction.cu", "copies.cu", "search.cu", "core_distances.cu",
                 "queries.cu")


#: the entry of a periodic module's functions that sets its box lengths
PERIOD_KEY = "__period__"


def grid_stride_blocks(count: int) -> tuple:
    """The grid of a grid-stride launch over ``count`` items, ``THREADS`` a
    block: enough blocks for one item a thread, at most 32 per SM."""
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return (max(1, min(-(-count // THREADS), 32 * sms)),)


@functools.cache
def source(periodic: bool = False) -> str:
    """The CUDA C++ source of all kernels (``periodic``: with ``EMST_PERIODIC``)."""
    parts = ["#define EMST_PERIODIC 1\n"] if periodic else []
    for name in _SOURCE_FILES:
        with open(os.path.join(_SOURCE_DIR, name), encoding="utf-8") as f:
            parts.append(f.read())
    return "\n".join(parts)


def ctype(dtype) -> str:
    """The CUDA C++ type of a float dtype: "float" or "double".

    Raises
    ------
    TypeError
        Any dtype but float32 and float64.
    """
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "float"
    if dt == np.float64:
        return "double"
    raise TypeError(f"the CUDA kernels compute in float32 or float64, not {dt}")


def expr(name: str, dtype, d: int, *extra) -> str:
    """The name expression of one kernel instantiation."""
    args = [ctype(dtype), str(int(d))]
    for e in extra:
        args.append(("true" if e else "false") if isinstance(e, (bool, np.bool_)) else str(int(e)))
    return f"{name}<{', '.join(args)}>"


_CORE = ("k_sizes", "k_minmax", "k_morton", "k_mark_copies", "k_keep_in", "k_compact_copies",
         "k_delta", "k_pairs", "k_leaves", "k_gather", "k_build", "k_change_bits", "k_node_labels",
         "k_select", "k_winner", "k_merge_next", "k_record_picks", "k_merge_roots",
         "k_merge_jump", "k_relabel", "k_record_rank", "k_record_edges", "k_record_points")


def expressions(dtype, d: int, part: str) -> list[str]:
    """Every instantiation that module ``part`` ("core", "mrd" or "query")
    holds."""
    if part == "query":  # queries of outside points (HDBSCAN*'s prediction)
        return ([expr("k_query_knn", dtype, d, km) for km in KNN_KMAX + (0,)]
                + [expr("k_query_mr", dtype, d)])
    if part == "core":
        out = [expr(k, dtype, d) for k in _CORE]
        mrd = (False,)
    elif part == "mrd":
        out = []
        mrd = (True,)
    else:
        raise ValueError(part)
    for m in mrd:
        out += [expr("k_bounds", dtype, d, m), expr("k_ties", dtype, d, m),
                expr("k_finalize", dtype, d, m),
                expr("k_search", dtype, d, m, False, False),
                expr("k_search", dtype, d, m, True, False)]
    if part == "core":  # the first Euclidean search keeps the runner-up too
        out.append(expr("k_search", dtype, d, False, True, True))
    if part == "mrd":
        out += [expr("k_knn_reg", dtype, d, km) for km in KNN_KMAX]
        out.append(expr("k_knn", dtype, d, 0))
    return out


def part_of(name: str, extra) -> str:
    """The module ("core" or "mrd") that holds kernel ``name`` with template args ``extra``.

    "mrd" for the k-NN kernels and for ``k_bounds``, ``k_ties``,
    ``k_finalize`` and ``k_search`` with MRD true (``extra[0]``), else "core".
    """
    if name in ("k_knn", "k_knn_reg"):
        return "mrd"
    if name in ("k_query_knn", "k_query_mr"):
        return "query"
    if name in ("k_bounds", "k_ties", "k_finalize", "k_search") and extra and extra[0]:
        return "mrd"
    return "core"


def record_sizes(dtype, d: int) -> tuple[int, int]:
    """Bytes of one point record and one node record (mirrors the .cu structs)."""
    it = np.dtype(dtype).itemsize
    raw = d * it + 4
    align = 8 if raw <= 8 else 16
    pt = -(-raw // align) * align
    node = -(-(2 * d * it + 8) // 16) * 16
    return pt, node


class CupyBackend:
    """How the kernel set reaches the GPU: CuPy arrays and RawModules."""

    def __init__(self):
        """CuPy is the array module (``xp``)."""
        self.xp = cupy

    @functools.cache
    def functions(self, dtype_str: str, d: int, part: str, periodic: bool = False) -> dict:
        """The kernels of one module, compiled by NVRTC once per (dtype, d, part, periodic).

        Parameters
        ----------
        dtype_str : str
            ``np.dtype(...).str`` of float32 or float64 (hashable, for the cache).
        d : int
        part : {"core", "mrd"}
        periodic : bool
            Compile with ``EMST_PERIODIC``: distances under the minimum image
            of the box whose lengths ``PERIOD_KEY`` sets.

        Returns
        -------
        dict
            Name expression (``expr``) -> the compiled ``cupy.RawKernel``;
            periodic modules also map ``PERIOD_KEY`` to a function that sets
            the box lengths ((d,) float64) in the module's constant memory.

        Raises
        ------
        RuntimeError
            For "core": the compiled record sizes (``k_sizes``) differ from
            ``record_sizes``.
        """
        exprs = expressions(np.dtype(dtype_str), d, part)
        mod = cupy.RawModule(code=source(periodic), options=NVRTC_OPTIONS,
                             name_expressions=exprs)
        fns = {e: mod.get_function(e) for e in exprs}
        if periodic:
            fns[PERIOD_KEY] = functools.partial(_set_period, mod, np.dtype(dtype_str))
        if part == "core":  # the Python record sizes must match the compiler's
            out = cupy.zeros(2, np.int32)
            fns[expr("k_sizes", dtype_str, d)]((1,), (1,), (out,))
            got = tuple(int(v) for v in out.get())
            want = record_sizes(dtype_str, d)
            if got != want:
                raise RuntimeError(f"record sizes {got} != {want} for {dtype_str} d={d}")
        return fns

    def launch(self, dtype, d, name, extra, nthreads, args, period=None):
        """Launch ``name<T, d, *extra>`` on the current stream, ``THREADS`` threads a block.

        Asynchronous; nothing when ``nthreads <= 0``.

        Parameters
        ----------
        dtype : float32 or float64 dtype
            T.
        d : int
        name : str
            The kernel template (``k_search``, ...).
        extra : tuple
            Template arguments after (T, d): bools and ints.
        nthreads : int
            Threads wanted (rounded up to whole blocks).
        args : tuple
            The kernel's arguments (cupy arrays, numpy scalars).
        period : (d,) float64 numpy array, optional
            A periodic box's lengths: the kernel of the periodic module runs,
            with these lengths in its constant memory.

        Returns
        -------
        None
        """
        if nthreads <= 0:
            return
        dt = np.dtype(dtype)
        fns = self.functions(dt.str, int(d), part_of(name, extra), period is not None)
        if period is not None:
            fns[PERIOD_KEY](period)
        fn = fns[expr(name, dt, d, *extra)]
        fn(((nthreads + THREADS - 1) // THREADS,), (THREADS,), args)

    def synchronize(self):
        """Wait for the work queued on CuPy's current stream.

        Returns
        -------
        None
        """
        cupy.cuda.get_current_stream().synchronize()

    def to_host(self, a):
        """``a`` as a numpy array (``cupy.asnumpy``: a blocking copy).

        Parameters
        ----------
        a : cupy array

        Returns
        -------
        numpy.ndarray
        """
        return cupy.asnumpy(a)

    #: host arrays at least this large go through the pinned ring
    RING_MIN_BYTES = 64 << 20
    RING_BUFFER_BYTES = 32 << 20
    #: buffers per lane, and lanes: each lane a thread filling its own
    #: pinned buffers from its own stretch of the array and its own stream
    #: copying them on (one thread's ``np.copyto`` into pinned memory, about
    #: 5 GB/s, was the ring's limit, far below the link's)
    RING_BUFFERS = 2
    RING_LANES = 4

    @functools.cached_property
    def _ring(self):
        """Per lane its pinned buffers and non-blocking copy stream; a pool of
        the lanes' threads; a lock (one copy at a time); made at first use."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        import cupyx

        lanes = [([cupyx.empty_pinned(self.RING_BUFFER_BYTES, np.uint8)
                   for _ in range(self.RING_BUFFERS)], cupy.cuda.Stream(non_blocking=True))
                 for _ in range(self.RING_LANES)]
        pool = ThreadPoolExecutor(self.RING_LANES, thread_name_prefix="emst-h2d")
        return lanes, pool, threading.Lock()

    def to_device(self, a):
        """A host array on the device, through rings of pinned buffers.

        The first copy of freshly allocated pageable memory costs the driver
        about 1 s per GB to lock its pages (3.15 s for 3 GB on an H100,
        against 0.33 s for a second copy and 0.56 s through one ring), and
        a box assembled by a Dask task is always fresh memory.  The array is
        cut in ``RING_LANES`` stretches of whole buffers, each copied by its
        own thread through its own buffers and stream.

        Parameters
        ----------
        a : numpy array
            (A cupy array comes back as it is.)

        Returns
        -------
        cupy array, same shape and dtype
        """
        if isinstance(a, cupy.ndarray):
            return a
        a = np.ascontiguousarray(a)
        if a.nbytes < self.RING_MIN_BYTES:
            return cupy.asarray(a)
        lanes, pool, lock = self._ring
        out = cupy.empty(a.shape, a.dtype)
        src = a.reshape(-1).view(np.uint8)
        dst = out.reshape(-1).view(cupy.uint8)
        step = self.RING_BUFFER_BYTES
        pieces = -(-src.size // step)
        per_lane = -(-pieces // len(lanes))
        with lock:
            cupy.cuda.get_current_stream().synchronize()  # out is allocated
            device = cupy.cuda.Device()
            jobs = [pool.submit(_ring_lane, device, lane, src, dst, step,
                                k * per_lane * step, min(src.size, (k + 1) * per_lane * step))
                    for k, lane in enumerate(lanes) if k * per_lane * step < src.size]
            for job in jobs:
                job.result()
        return out

    def argsort(self, codes):
        """Stable argsort of ``codes`` on the device (``cupy.argsort``).

        Parameters
        ----------
        codes : (n,) uint64 cupy array

        Returns
        -------
        (n,) int64 cupy array
        """
        return cupy.argsort(codes)  # stable (thrust stable_sort_by_key)


def _ring_lane(device, lane, src, dst, step, lo, hi):
    """Copy ``src[lo:hi]`` (host bytes) to ``dst[lo:hi]`` (device bytes)
    through ``lane``'s pinned buffers and stream; returns when it is there."""
    bufs, stream = lane
    events = [None] * len(bufs)
    with device:
        for k, at in enumerate(range(lo, hi, step)):
            end = min(hi, at + step)
            i = k % len(bufs)
            if events[i] is not None:
                events[i].synchronize()  # its last copy is done
            np.copyto(bufs[i][:end - at], src[at:end])
            dst[at:end].set(bufs[i][:end - at], stream=stream)
            events[i] = stream.record()
        stream.synchronize()


def _set_period(mod, dtype, period) -> None:
    """Copy a periodic box's lengths into module ``mod``'s constant memory
    (``emst_period_f`` or ``emst_period_d``, 8 entries), in the stream order
    of the launches that follow."""
    name = "emst_period_f" if dtype == np.float32 else "emst_period_d"
    values = np.zeros(8, dtype)
    values[:len(period)] = period
    ptr = mod.get_global(name)
    # pageable source: the copy has read it when the call returns
    ptr.copy_from_host_async(ctypes.c_void_p(values.ctypes.data), values.nbytes,
                             cupy.cuda.get_current_stream())
