"""Compile the numba CPU kernels for every (dtype, d, mutual reachability)
signature, one process each, all at once (and the products' kernels).

numba compiles each kernel once per signature (the axis loops are unrolled
per dimension: about 16 s per signature on one core) and caches it beside
the package.  A fresh machine that runs the whole test suite on the CPU
reference would compile the 32 signatures one after another; this fills
the cache in parallel first.

    python benchmarks/warm_cache.py [--jobs N]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compile(sig):
    import numpy as np

    from emst_dask import emst

    dtype, d, k = sig
    t0 = time.perf_counter()
    if dtype == "emulator":  # the C++ build of the CUDA kernels the tests run
        return sig, _emulator(*k) or time.perf_counter() - t0
    x = np.random.default_rng(d).random((200, d))
    if dtype == "products":  # products' kernels (clusters, cuts, FoF, statistics), partitions
        from emst_dask import HDBSCAN, fof
        from emst_dask.products.hdbscan.device import extract_xp
        from emst_dask.products.order import check_edges

        HDBSCAN(min_cluster_size=5, min_samples=3, backend="cpu").fit(x)
        mr = emst(x, min_samples=3, backend="cpu")  # the device formulation, run with numpy
        extract_xp(np, *check_edges(mr.source, mr.target, mr.weight, len(x))[1:], len(x), 5,
                   "eom", False, 0.0, None)
        tree = emst(x, backend="cpu", box_size=1.0)
        tree.statistics(x)
        tree.linkage()
        fof(x, 0.5, box_size=1.0, min_members=2, tree=tree, backend="cpu")
        emst(x.astype("float32"), partitions=3, client=False, min_samples=3, backend="cpu")
        emst(x, partitions=2, client=False, backend="cpu", box_size=1.0)
    else:
        emst(x.astype(dtype), min_samples=k, backend="cpu")
    return sig, time.perf_counter() - t0


#: the CUDA kernel modules the C++ emulator tests build: (dtype, d, part,
#: periodic) of tests/test_cuda_emu.py and tests/test_periodic.py
EMULATED = [("float32", 3, "core", False), ("float32", 3, "mrd", False),
            ("float64", 2, "core", False), ("float64", 2, "mrd", False),
            ("float64", 7, "core", False), ("float32", 2, "core", False),
            ("float64", 2, "core", True), ("float32", 3, "core", True),
            ("float32", 3, "mrd", True)]


def _emulator(dtype, d, part, periodic):
    import numpy as np

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "tests"))
    from cuda_emu import EmuBackend, compiler

    if compiler() is None:
        return 0.0
    EmuBackend().functions(np.dtype(dtype).str, d, part, periodic)
    return None


def main():
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
    sigs = ([("products", 3, 1)]
            + ([("emulator", 0, m) for m in EMULATED] if a.emulator else [])
            + list(itertools.product(["float64"], dims, [1]))
            + list(itertools.product(["float32"], dims32, [1])))
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for (dtype, d, k), s in pool.map(_compile, sigs):
            print(f"{dtype} d={d} min_samples={k}: {s:.1f} s", flush=True)
    print(f"{len(sigs)} signatures in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
