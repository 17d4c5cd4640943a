"""Peak device bytes under the emulator: CuPy's memory pool, counted on numpy.

The emulated kernel set (``cuda_emu``) and the emulated CuPy (``cupy_emu``)
keep every device array in a numpy array, so numpy's data allocations are
the device allocations.  This module installs a numpy data-memory handler
(numpy's ``PyDataMem_SetHandler``, built once with the C compiler the
emulator uses) that counts each allocation as CuPy's pool does, its size
rounded up to 512 bytes, from the allocation until the array's memory is
released, and keeps the peak and the blocks alive at it.  CuPy's argsort
holds a copy of its input, an int64 index array and the radix sort's
double buffers (thrust's temporary storage, through the same pool) while it
runs; ``cupy_argsort`` allocates the same, so the sort's peak is counted.

What it does not see: temporaries that CuPy makes and numpy does not (a
boolean mask's index scan, a reduction's partial sums) and numpy's
elision of temporaries (``a + b + c`` reusing ``a + b``), which CuPy does
not do.  The engine's peak lies in its own kernels' arrays, which are
counted exactly.

    with PoolTracker() as pool:
        engine.boruvka(K, points)
    pool.peak, pool.at_peak          # bytes; [(bytes, phase), ...]
"""
from __future__ import annotations

import ctypes
import functools
import sysconfig

import numpy as np

from cuda_emu import compiler

#: CuPy's pool hands out multiples of this many bytes
POOL_UNIT = 512

_SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>
#include <cstdlib>
#include <cstring>

// a header in front of every block: its size, whether it counts, its tag
struct Head { size_t size; size_t counted; long long tag; long long pad; Head* prev; Head* next;
              long long pad2[2]; };
static_assert(sizeof(Head) % 64 == 0, "alignment of the data after the header");
static Head live_list = {0, 0, 0, 0, &live_list, &live_list, {0, 0}};
static size_t live = 0, peak = 0;
static int on = 0;
static long long tag = 0, peak_tag = 0;
static const int MAXREC = 8192;
static size_t rec_size[MAXREC];
static long long rec_tag[MAXREC];
static int rec_count = 0;

static size_t rounded(size_t s) { return (s + 511) / 512 * 512; }

static void note_peak() {
  if (live <= peak) return;
  peak = live; peak_tag = tag;
  int k = 0;
  for (Head* h = live_list.next; h != &live_list && k < MAXREC; h = h->next, ++k) {
    rec_size[k] = rounded(h->size); rec_tag[k] = h->tag;
  }
  rec_count = k;
}

static void* place(Head* h, size_t size) {
  h->size = size; h->counted = on; h->tag = tag;
  if (on) {
    h->next = live_list.next; h->prev = &live_list;
    live_list.next->prev = h; live_list.next = h;
    live += rounded(size);
    note_peak();
  } else {
    h->next = h->prev = h;
  }
  return (void*)(h + 1);
}

static void unlink(Head* h) {
  if (h->counted) {
    h->prev->next = h->next; h->next->prev = h->prev;
    live -= rounded(h->size);
  }
}

static void* t_malloc(void*, size_t size) {
  Head* h = (Head*)std::aligned_alloc(64, (sizeof(Head) + size + 63) / 64 * 64);
  return h ? place(h, size) : nullptr;
}
static void* t_calloc(void* ctx, size_t nelem, size_t elsize) {
  size_t size = nelem * elsize;
  void* p = t_malloc(ctx, size);
  if (p) std::memset(p, 0, size);
  return p;
}
static void t_free(void*, void* p, size_t) {
  if (!p) return;
  Head* h = (Head*)p - 1;
  unlink(h);
  std::free(h);
}
static void* t_realloc(void* ctx, void* p, size_t size) {
  if (!p) return t_malloc(ctx, size);
  Head* h = (Head*)p - 1;
  void* q = t_malloc(ctx, size);
  if (!q) return nullptr;
  std::memcpy(q, p, h->size < size ? h->size : size);
  t_free(ctx, p, h->size);
  return q;
}

static PyDataMem_Handler handler = {
  "emst_pool_emu", 1, {nullptr, t_malloc, t_calloc, t_realloc, t_free}};

extern "C" {
PyObject* pool_install() {  // returns the previous handler (a capsule)
  if (PyArray_API == nullptr && _import_array() < 0) return nullptr;
  PyObject* cap = PyCapsule_New(&handler, "mem_handler", nullptr);
  if (!cap) return nullptr;
  PyObject* old = PyDataMem_SetHandler(cap);
  Py_DECREF(cap);
  return old;
}
PyObject* pool_restore(PyObject* old) {
  PyObject* cur = PyDataMem_SetHandler(old);
  Py_XDECREF(cur);
  Py_RETURN_NONE;
}
void pool_start() { on = 1; live = 0; peak = 0; peak_tag = tag; rec_count = 0;
  live_list.next = live_list.prev = &live_list; }
void pool_stop() {  // blocks still alive stop counting
  on = 0;
  for (Head* h = live_list.next; h != &live_list;) {
    Head* nx = h->next; h->counted = 0; h->next = h->prev = h; h = nx;
  }
  live_list.next = live_list.prev = &live_list;
}
void pool_tag(long long t) { tag = t; }
size_t pool_live() { return live; }
size_t pool_peak() { return peak; }
long long pool_peak_tag() { return peak_tag; }
int pool_records(size_t* sizes, long long* tags, int cap) {
  int k = rec_count < cap ? rec_count : cap;
  for (int i = 0; i < k; ++i) { sizes[i] = rec_size[i]; tags[i] = rec_tag[i]; }
  return rec_count;
}
}
"""


@functools.cache
def _library():
    import hashlib
    import os
    import subprocess

    from cuda_emu import _workdir

    inc = [sysconfig.get_paths()["include"], np.get_include()]
    h = hashlib.sha1((_SOURCE + repr(inc)).encode()).hexdigest()[:16]
    so = os.path.join(_workdir(), f"pool_{h}.so")
    if not os.path.exists(so):
        cpp = os.path.join(_workdir(), f"pool_{h}.{os.getpid()}.cpp")
        with open(cpp, "w") as f:
            f.write(_SOURCE)
        tmp = so + f".{os.getpid()}.tmp"
        cmd = [compiler(), "-O1", "-std=c++17", "-shared", "-fPIC",
               *[f"-I{d}" for d in inc], "-x", "c++", cpp, "-o", tmp]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        os.replace(tmp, so)
        os.remove(cpp)
    lib = ctypes.PyDLL(so)  # the GIL stays held: the handler calls numpy's C API
    lib.pool_install.restype = ctypes.py_object
    lib.pool_restore.argtypes = [ctypes.py_object]
    lib.pool_restore.restype = ctypes.py_object
    lib.pool_tag.argtypes = [ctypes.c_longlong]
    for name in ("pool_live", "pool_peak"):
        getattr(lib, name).restype = ctypes.c_size_t
    lib.pool_peak_tag.restype = ctypes.c_longlong
    lib.pool_records.argtypes = [ctypes.POINTER(ctypes.c_size_t),
                                 ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
    lib.pool_records.restype = ctypes.c_int
    return lib


def available() -> bool:
    """Whether the tracker can be built (a C++ compiler and numpy's headers)."""
    if compiler() is None:
        return False
    try:
        _library()
    except Exception:  # noqa: BLE001 - no headers, no tracker
        return False
    return True


class PoolTracker:
    """Counts numpy's data allocations as CuPy's pool would, meanwhile.

    Only arrays allocated inside the ``with`` block count (the input and
    anything made before are excluded, as a pool hook installed before the
    call excludes them).  ``phase(name)`` names what runs from now on (the
    engine's ``Timers.stop`` names the phase that just ended, so the
    tracker is told ``stop`` names through ``track_engine_phases``).

    Attributes, after the block
    ---------------------------
    peak : int, bytes
    at_peak : list of (bytes, phase in which the block was allocated)
    peak_phase : str, the phase that reached the peak
    """

    def __init__(self):
        self._lib = _library()
        self._names = ["start"]

    def phase(self, name: str) -> None:
        """From now on allocations (and a new peak) belong to ``name``."""
        self._names.append(name)
        self._lib.pool_tag(len(self._names) - 1)

    def __enter__(self):
        self._old = self._lib.pool_install()
        self._lib.pool_tag(0)
        self._lib.pool_start()
        return self

    def __exit__(self, *exc):
        lib = self._lib
        self.peak = int(lib.pool_peak())
        self.live_after = int(lib.pool_live())
        cap = 8192
        sizes = (ctypes.c_size_t * cap)()
        tags = (ctypes.c_longlong * cap)()
        k = min(lib.pool_records(sizes, tags, cap), cap)
        self.at_peak = sorted(((int(sizes[i]), self._names[tags[i]]) for i in range(k)),
                              reverse=True)
        self.peak_phase = self._names[lib.pool_peak_tag()]
        lib.pool_stop()
        lib.pool_restore(self._old)
        return False

    def summary(self, n: int) -> dict:
        """The peak and its blocks in bytes per point (``n`` points), the
        blocks below 0.01 byte a point summed into one entry."""
        big = [(round(b / n, 3), ph) for b, ph in self.at_peak if b >= 0.01 * n]
        small = sum(b for b, _ in self.at_peak if b < 0.01 * n)
        return {"peak_bytes_per_point": self.peak / n, "peak_phase": self.peak_phase,
                "at_peak": big, "small_blocks_bytes": small}


def cupy_argsort(a):
    """A stable argsort of 1-D ``a`` holding what CuPy's holds while it runs:
    a copy of ``a``, the int64 result, and thrust's radix-sort storage (a
    second buffer of keys and one of values, 128-byte aligned, and a little
    for the sort's own counters)."""
    n = a.shape[0]
    data = a.copy()
    idx = np.argsort(data, kind="stable")  # the (n,) intp output array
    align = lambda b: -(-b // 128) * 128  # noqa: E731
    scratch = np.empty(align(data.nbytes) + align(idx.nbytes) + 4096 + 0 * n, np.uint8)
    del scratch, data
    return idx


def track_engine_phases(tracker):
    """A context manager that tells ``tracker`` the engine's phases: each
    ``Timers.stop(name)`` starts the next phase, named "after NAME"."""
    import contextlib

    from emst_dask.engine.boruvka import Timers

    @contextlib.contextmanager
    def cm():
        stop = Timers.stop

        def marking(self, name):
            stop(self, name)
            tracker.phase(f"after {name}")

        Timers.stop = marking
        try:
            yield tracker
        finally:
            Timers.stop = stop

    return cm()
