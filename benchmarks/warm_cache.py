"""Compile the numba CPU kernels for every (dtype, d) signature, one process
each, all at once (and the products' kernels, and on request the C++
emulator modules of the CUDA kernels that the tests build).

The package's ``emst-dask warm`` (``emst_dask.warm``) does the compiling;
this adds the dimensions the test suite uses and the emulator builds, so
that a fresh machine running the whole suite fills the cache in parallel
first instead of compiling the same kernels in every test process.

    python benchmarks/warm_cache.py [--jobs N] [--dims 1,2,...] [--emulator]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: the CUDA kernel modules the C++ emulator tests build: (dtype, d, part,
#: periodic) of tests/test_cuda_emu.py and tests/test_periodic.py
EMULATED = [("float32", 3, "core", False), ("float32", 3, "mrd", False),
            ("float64", 2, "core", False), ("float64", 2, "mrd", False),
            ("float64", 7, "core", False), ("float32", 2, "core", False),
            ("float64", 2, "core", True), ("float32", 3, "core", True),
            ("float32", 3, "mrd", True)]


def emulator(module):
    """Build one emulator module: (("emulator", module), seconds)."""
    import numpy as np

    t0 = time.perf_counter()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "tests"))
    from cuda_emu import EmuBackend, compiler

    dtype, d, part, periodic = module
    if compiler() is not None:
        EmuBackend().functions(np.dtype(dtype).str, d, part, periodic)
    return ("emulator", module), time.perf_counter() - t0


def main():
    from emst_dask.warm import warm

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--dims", default="1,2,3,4,5,6,7,8", help="float64 and float32 dimensions")
    p.add_argument("--float32-dims", default=None,
                   help="float32 dimensions, when not those of --dims")
    p.add_argument("--emulator", action="store_true",
                   help="also build the CUDA kernels' C++ emulator modules the tests use")
    a = p.parse_args()
    dims = [int(v) for v in a.dims.split(",")]
    dims32 = dims if a.float32_dims is None else [int(v) for v in a.float32_dims.split(",")]
    # mutual reachability runs the same compiled kernels (min_samples is a
    # run-time argument): one job per (dtype, d), or two processes would
    # compile the same signature at once
    extra = ([(emulator, m) for m in EMULATED] if a.emulator else [])
    extra += [(_float32, d) for d in dims32]
    seconds = warm(dims, ["float64"], products=True, jobs=a.jobs, extra=extra,
                   report=lambda line: print(line, flush=True))
    print(f"{len(dims) + len(extra) + 1} signatures in {seconds:.1f} s")


def _float32(d):
    from emst_dask.warm import compile_signature

    return compile_signature(("float32", d))


if __name__ == "__main__":
    main()
