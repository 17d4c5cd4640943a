"""Run the CUDA kernel set on the CPU: a development and CI aid, not a backend.

The Borůvka kernels of ``emst_dask/kernels/cuda`` (``backend.source()``)
are compiled as plain C++ (g++) against a tiny shim of the CUDA built-ins they use, and every
launch runs its threads one after another.  The Python side is the real
``emst_dask.kernels.cuda.kernel_set`` with numpy as the array module, so the whole orchestration
(phases, buffers, record layouts, the tie passes, the merge) is exercised
without a GPU.  Sequential threads cannot show races; the GPU tests
(``test_cuda.py``) cover those.

    from cuda_emu import emulated_kernels
    K = emulated_kernels()          # None when no C++ compiler is found
    engine.boruvka(K, points)
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from emst_dask.kernels.cuda import kernel_set as cuda_set

SHIM = r"""
#include <cstdint>
#include <cstring>
#include <cstddef>
#include <utility>
#include <type_traits>
typedef unsigned int u32;
typedef unsigned long long u64;
#define EMST_EMULATE 1
struct emu_dim3 { unsigned x, y, z; };
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)
inline void __threadfence() {}
template <class T> inline T __ldcg(const T* p) { return *p; }
inline int atomicCAS(int* a, int c, int v) { int o = *a; if (o == c) *a = v; return o; }
inline u32 atomicMin(u32* a, u32 v) { u32 o = *a; if (v < o) *a = v; return o; }
inline u64 atomicMin(u64* a, u64 v) { u64 o = *a; if (v < o) *a = v; return o; }
inline int atomicAdd(int* a, int v) { int o = *a; *a = o + v; return o; }
inline u32 atomicMax(u32* a, u32 v) { u32 o = *a; if (v > o) *a = v; return o; }
inline u64 atomicMax(u64* a, u64 v) { u64 o = *a; if (v > o) *a = v; return o; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __fsqrt_rn(float x) { return __builtin_sqrtf(x); }
inline double __dsqrt_rn(double x) { return __builtin_sqrt(x); }
inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline float __uint_as_float(u32 x) { float f; std::memcpy(&f, &x, 4); return f; }
inline u32 __float_as_uint(float f) { u32 x; std::memcpy(&x, &f, 4); return x; }
inline long long __double_as_longlong(double d) { long long x; std::memcpy(&x, &d, 8); return x; }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline u64 atomicOr(u64* a, u64 v) { u64 o = *a; *a = o | v; return o; }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
"""

LAUNCHER = r"""
namespace emu {
template <typename T> using Dc = typename std::decay<T>::type;
template <typename... A, std::size_t... I>
void call(void (*f)(A...), void** args, std::index_sequence<I...>) {
  f(*static_cast<Dc<A>*>(args[I])...);
}
template <typename... A>
void launch(void (*f)(A...), long long nthreads, int block, void** args) {
  long long grid = (nthreads + block - 1) / block;
  blockDim.x = block; gridDim.x = (unsigned)grid;
  for (long long b = 0; b < grid; ++b) {
    blockIdx.x = (unsigned)b;
    for (int t = 0; t < block; ++t) {
      threadIdx.x = t;
      call(f, args, std::index_sequence_for<A...>{});
    }
  }
}
}  // namespace emu
"""


def compiler():
    return shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")


_CTYPES = {np.dtype(np.bool_): ctypes.c_bool, np.dtype(np.int8): ctypes.c_int8,
           np.dtype(np.uint8): ctypes.c_uint8, np.dtype(np.int16): ctypes.c_int16,
           np.dtype(np.uint16): ctypes.c_uint16, np.dtype(np.int32): ctypes.c_int32,
           np.dtype(np.uint32): ctypes.c_uint32, np.dtype(np.int64): ctypes.c_int64,
           np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float,
           np.dtype(np.float64): ctypes.c_double}


def _workdir():
    d = os.path.join(tempfile.gettempdir(), "emst_cuda_emu")
    os.makedirs(d, exist_ok=True)
    return d


def build(code, optimise="-O2"):
    """The shared library of the C++ ``code``, built with g++ once (kept on
    disk by the code's hash; concurrent test processes each build to a
    file of their own and rename it into place)."""
    h = hashlib.sha1((optimise + code).encode()).hexdigest()[:16]
    so = os.path.join(_workdir(), f"k_{h}.so")
    if not os.path.exists(so):
        cpp = os.path.join(_workdir(), f"k_{h}.{os.getpid()}.cpp")
        with open(cpp, "w") as f:
            f.write(code)
        tmp = so + f".{os.getpid()}.tmp"
        cmd = [compiler(), optimise, "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off",
               "-Wno-unknown-pragmas", "-x", "c++", cpp, "-o", tmp]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        os.replace(tmp, so)
        os.replace(cpp, os.path.join(_workdir(), f"k_{h}.cpp"))  # one source kept beside it
    return ctypes.CDLL(so)


def kernel_args(name, args):
    """A launch's arguments as a ``void*[]`` of pointers to each one's value
    (an array's data pointer, a numpy scalar), and what must stay alive
    meanwhile."""
    keep = []
    for a in args:
        if isinstance(a, np.ndarray):
            if not a.flags.c_contiguous:
                raise ValueError(f"{name}: a kernel argument is not C-contiguous")
            keep.append(ctypes.c_void_p(a.ctypes.data))
        elif isinstance(a, np.generic):
            keep.append(_CTYPES[a.dtype](a.item()))
        else:
            raise TypeError(f"{name}: argument of type {type(a)}")
    argv = (ctypes.c_void_p * len(keep))(
        *[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in keep])
    return argv, keep


class EmuBackend:
    """cuda_set's backend interface, on numpy arrays and g++-built kernels."""

    def __init__(self):
        self.xp = np

    @functools.cache
    def functions(self, dtype_str, d, part, periodic=False):
        exprs = cuda_set.expressions(np.dtype(dtype_str), d, part)
        src = [SHIM, cuda_set.source(periodic), LAUNCHER]
        for k, e in enumerate(exprs):
            src.append(f'extern "C" void emu_{k}(long long n, int b, void** a) '
                       f'{{ emu::launch(&{e}, n, b, a); }}')
        lib = build("\n".join(src))
        fns = {}
        for k, e in enumerate(exprs):
            f = getattr(lib, f"emu_{k}")
            f.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
            f.restype = None
            fns[e] = f
        if periodic:
            ctype = ctypes.c_float if np.dtype(dtype_str) == np.float32 else ctypes.c_double
            name = "emst_period_f" if ctype is ctypes.c_float else "emst_period_d"
            table = (ctype * 8).in_dll(lib, name)

            def set_period(period):
                for q, v in enumerate(np.asarray(period, np.dtype(dtype_str))):
                    table[q] = v.item()

            fns[cuda_set.PERIOD_KEY] = set_period
        return fns

    def launch(self, dtype, d, name, extra, nthreads, args, period=None):
        if nthreads <= 0:
            return
        dt = np.dtype(dtype)
        fns = self.functions(dt.str, int(d), cuda_set.part_of(name, extra), period is not None)
        if period is not None:
            fns[cuda_set.PERIOD_KEY](period)
        fn = fns[cuda_set.expr(name, dt, d, *extra)]
        argv, keep = kernel_args(name, args)
        fn(nthreads, cuda_set.THREADS, argv)
        del keep

    def synchronize(self):
        pass

    def to_host(self, a):
        return np.asarray(a)

    def to_device(self, a):
        return np.ascontiguousarray(a)

    def argsort(self, codes):
        from pool_emu import cupy_argsort  # what CuPy's argsort holds, for the pool's count

        return cupy_argsort(codes)


@functools.cache
def emulated_kernels():
    """The CUDA kernel set running on the CPU, or None without a C++ compiler."""
    if compiler() is None:
        return None
    return cuda_set.make_kernel_set(EmuBackend(), "EmulatedCudaKernels")
