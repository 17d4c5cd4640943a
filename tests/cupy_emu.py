"""A stand-in for CuPy on the CPU, so that the products' device paths (the
``xp is not np`` branches: the parallel dendrogram, the single-linkage
matrix, HDBSCAN*'s extraction) run in the test suite without a GPU.

Arrays are numpy arrays.  The project's CUDA sources reach it through
``RawModule`` and ``ElementwiseKernel``, as they reach CuPy; they are
compiled with g++ against ``cuda_emu``'s shim of the CUDA built-ins, and
every launch runs its threads one after another.  A warp's lanes never run
together here, so ``__match_any_sync`` sees each lane alone (an aggregated
atomic becomes one atomic a lane: the same sums and minima) and kernels
whose lanes build one value together (``__ballot_sync``: the FoF cuts' bit
words) are not emulated.  Sequential threads show no races; the GPU tests
cover those.  Anything else of CuPy's API is numpy's, except ``argsort``,
stable as CuPy's.

    fake = emulated_cupy()     # None without a C++ compiler
    with installed(fake):      # sys.modules["cupy"] and the caches
        extract_xp(fake, s, t, w, n, ...)
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import re
import sys
import types

import numpy as np

from cuda_emu import LAUNCHER, SHIM, build, compiler, kernel_args

# what the products' kernels use beyond the engine's shim
EXTRA_SHIM = r"""
#include <cmath>
#include <type_traits>
using std::isinf; using std::isfinite; using std::isnan;
inline u32 atomicAdd(u32* a, u32 v) { u32 o = *a; *a = o + v; return o; }
inline u64 atomicAdd(u64* a, u64 v) { u64 o = *a; *a = o + v; return o; }
inline u64 atomicCAS(u64* a, u64 c, u64 v) { u64 o = *a; if (o == c) *a = v; return o; }
inline unsigned __activemask() { return 0xffffffffu; }
template <class T> inline unsigned __match_any_sync(unsigned, T) {
  return 1u << (threadIdx.x & 31);  // each lane alone
}
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
template <class A, class B> inline typename std::common_type<A, B>::type min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B> inline typename std::common_type<A, B>::type max(A a, B b) {
  return a < b ? b : a;
}
namespace emu {
template <class T> struct Raw {
  T* p;
  T& operator[](long long j) const { return p[j]; }
};
}  // namespace emu
"""

_C_TYPES = {"bool": "bool", "int8": "signed char", "uint8": "unsigned char",
            "int16": "short", "uint16": "unsigned short", "int32": "int",
            "uint32": "unsigned int", "int64": "long long", "uint64": "unsigned long long",
            "float32": "float", "float64": "double"}


class _Function:
    def __init__(self, fn, name):
        self._fn, self._name = fn, name

    def __call__(self, grid, block, args, **_):
        grid = grid if isinstance(grid, tuple) else (grid,)
        block = block if isinstance(block, tuple) else (block,)
        argv, keep = kernel_args(self._name, args)
        self._fn(int(grid[0]) * int(block[0]), int(block[0]), argv)
        del keep


class RawModule:
    """``cupy.RawModule(code=..., options=..., name_expressions=...)``: every
    name expression and every ``extern "C"`` kernel of the code."""

    def __init__(self, code, options=(), name_expressions=(), **_):
        names = list(name_expressions)
        names += re.findall(r'extern\s+"C"\s+__global__\s+void\s+(\w+)', code)
        src = [SHIM, EXTRA_SHIM, code, LAUNCHER]
        for k, e in enumerate(names):
            src.append(f'extern "C" void emu_{k}(long long n, int b, void** a) '
                       f'{{ emu::launch(&{e}, n, b, a); }}')
        lib = build("\n".join(src), "-O1")
        self._functions = {}
        for k, e in enumerate(names):
            f = getattr(lib, f"emu_{k}")
            f.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p]
            f.restype = None
            self._functions[e] = _Function(f, e)

    def get_function(self, name):
        return self._functions[name]


def _params(spec):
    """'raw float64 a, T b' -> [(raw, type, name)]."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        words = part.split()
        raw = words[0] == "raw"
        out.append((raw, words[-2], words[-1]))
    return out


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name)``: a
    loop over ``i`` of the operation, placeholder types bound from the
    arguments' dtypes, outputs allocated when not given."""

    def __init__(self, in_params, out_params, operation, name="kernel", **_):
        self._in, self._out = _params(in_params), _params(out_params)
        self._op, self._name = operation, name

    def __call__(self, *args, size=None):
        params = self._in + self._out
        if len(args) not in (len(self._in), len(params)):
            raise TypeError(f"{self._name}: {len(args)} arguments")
        bound = {}
        for (_, typ, _), a in zip(params, args):
            if typ not in _C_TYPES and isinstance(a, np.ndarray):
                bound.setdefault(typ, a.dtype)

        def dtype_of(typ):
            return np.dtype(typ) if typ in _C_TYPES else bound[typ]

        values, shape = [], None
        for (raw, typ, _), a in zip(self._in, args):
            if isinstance(a, np.ndarray):
                a = np.ascontiguousarray(a, dtype=dtype_of(typ))
                if not raw:
                    shape = a.shape
            else:
                a = dtype_of(typ).type(a)
            values.append(a)
        if size is not None:
            shape = (int(size),)
        outs = list(args[len(self._in):])
        if not outs:
            outs = [np.empty(shape, dtype_of(typ)) for _, typ, _ in self._out]
        for (raw, _, _), o in zip(self._out, outs):
            if not raw:
                shape = o.shape
        n = int(np.prod(shape)) if shape is not None else 0
        lib = self._library(tuple(np.dtype(dtype_of(t)).name for _, t, _ in params),
                            tuple(isinstance(v, np.ndarray) for v in values))
        argv, keep = kernel_args(self._name, values + outs)
        lib(n, argv)
        del keep
        return outs[0] if len(outs) == 1 else tuple(outs)

    @functools.cache
    def _library(self, dtypes, arrays):
        ctype = {t: _C_TYPES[np.dtype(d).name] for (_, t, _), d in zip(self._in + self._out,
                                                                           dtypes)}
        body = [f"typedef {c} {t};" for t, c in ctype.items() if t not in _C_TYPES]
        body.append("for (long long i = 0; i < n; ++i) {")
        for k, ((raw, typ, name), is_array) in enumerate(zip(self._in, arrays)):
            c = ctype[typ]
            if raw:  # a[k] points to the data pointer, or to a scalar's value
                body.append(f"emu::Raw<{c}> {name}{{*({c}**)a[{k}]}};")
            elif is_array:
                body.append(f"const {c} {name} = (*({c}**)a[{k}])[i];")
            else:
                body.append(f"const {c} {name} = *({c}*)a[{k}];")
        for k, (raw, typ, name) in enumerate(self._out, len(self._in)):
            c = ctype[typ]
            if raw:
                body.append(f"emu::Raw<{c}> {name}{{*({c}**)a[{k}]}};")
            else:
                body.append(f"{c}& {name} = (*({c}**)a[{k}])[i];")
        body += ["{", self._op, ";", "}", "}"]  # CuPy ends the operation itself
        code = "\n".join([SHIM, EXTRA_SHIM, 'extern "C" void emu_elementwise(long long n, '
                          "void** a) {", *body, "}"])
        f = build(code, "-O1").emu_elementwise
        f.argtypes = [ctypes.c_longlong, ctypes.c_void_p]
        f.restype = None
        return f


class _Device:
    attributes = {"MultiProcessorCount": 2}

    def __init__(self, *_):
        pass

    def synchronize(self):
        pass


def _argsort(a, axis=-1):
    if np.ndim(a) == 1 and axis in (-1, 0, None):
        from pool_emu import cupy_argsort  # what CuPy's argsort holds, for the pool's count

        return cupy_argsort(np.asarray(a))
    return np.argsort(a, axis=axis, kind="stable")  # CuPy's sort is a stable radix sort


@functools.cache
def emulated_cupy():
    """The stand-in module, or None without a C++ compiler."""
    if compiler() is None:
        return None
    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.ndarray = np.ndarray
    fake.RawModule = RawModule
    fake.ElementwiseKernel = ElementwiseKernel
    fake.argsort = _argsort
    fake.asnumpy = np.asarray
    fake.get_array_module = lambda *a: fake
    fake.cuda = types.SimpleNamespace(Device=_Device,
                                      get_current_stream=lambda: _Device())
    return fake


def _cached_kernels():
    """The products' cached CuPy modules and kernels (cleared around an
    emulated run, so that neither sees the other's)."""
    from emst_dask.kernels.cuda import (branches, clusters, dendrogram, edge_order,
                                        fof_products, input_checks, union_find)
    from emst_dask.products.hdbscan import device, device_prediction

    mods = (branches, clusters, dendrogram, edge_order, fof_products, input_checks, union_find,
            device, device_prediction)
    return [f for m in mods for f in vars(m).values()
            if callable(f) and hasattr(f, "cache_clear") and getattr(f, "__module__", "")
            == m.__name__]


@contextlib.contextmanager
def installed(fake):
    """``fake`` as ``cupy`` for the products' device paths, meanwhile."""
    from emst_dask.kernels.cuda import backend

    caches = _cached_kernels()
    saved = sys.modules.get("cupy"), backend.cupy
    for f in caches:
        f.cache_clear()
    sys.modules["cupy"], backend.cupy = fake, fake
    try:
        yield fake
    finally:
        for f in caches:
            f.cache_clear()
        if saved[0] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved[0]
        backend.cupy = saved[1]


def on_host(a):
    """A device result (CuPy's or the emulator's) as a numpy array; ``None``
    stays ``None``."""
    if a is None:
        return None
    get = getattr(a, "get", None)
    return get() if callable(get) else np.asarray(a)


class StableNumpy:
    """numpy as an array module other than numpy (so that the device
    branches run, ``xp is not np``), with CuPy's stable argsort; no
    kernels: for the code paths of whole-array operations only."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def argsort(a):
        return np.argsort(a, kind="stable")
