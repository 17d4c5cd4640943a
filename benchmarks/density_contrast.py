"""The tree of a cloud with a clump far smaller than a Morton code cell.

    python benchmarks/density_contrast.py --n 10e6 --backend cuda
    python benchmarks/density_contrast.py --n 1e6 --backend cpu

Half the points uniform in the unit cube, half in a Gaussian clump of width
``s`` at its centre (3-D, seed 11), for s = 1e-4 (resolved by the 21 bits
per axis of the codes), 1e-7 and 1e-9 (inside one or a few code cells: the
crowded cells that get finer codes) and 1e-12 (beyond the finer codes too),
against a uniform cloud of the same n.  ``min_samples`` 1 and 10; each
figure the fastest of ``--repeats`` after a warm-up on 100k points, points
on the device for CUDA.  Writes JSON (machine, every figure and the
engine's phase timers) to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emst_dask import emst  # noqa: E402

CLOUDS = [("uniform", None, "float32"), ("clump 1e-4", 1e-4, "float32"),
          ("clump 1e-7", 1e-7, "float32"), ("clump 1e-7", 1e-7, "float64"),
          ("clump 1e-9", 1e-9, "float64"), ("clump 1e-12", 1e-12, "float64")]


def cloud(n, scale, dtype, rng):
    """(n, 3) numpy array: uniform, or half uniform and half a clump."""
    if scale is None:
        return rng.random((n, 3)).astype(dtype)
    half = n // 2
    x = np.concatenate([rng.random((half, 3)), 0.5 + scale * rng.standard_normal((n - half, 3))])
    return x[rng.permutation(n)].astype(dtype)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e6)
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", default=None)
    a = p.parse_args()
    n = int(a.n)
    if a.backend == "cuda":
        import cupy as cp

        machine = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        to_device, sync = cp.asarray, cp.cuda.Device().synchronize
    else:
        machine = f"{platform.node()} ({os.cpu_count()} cores)"
        to_device, sync = (lambda x: x), (lambda: None)
    rng = np.random.default_rng(11)
    out = {"machine": machine, "backend": a.backend, "n": n, "d": 3, "runs": []}
    for name, scale, dtype in CLOUDS:
        x = to_device(cloud(n, scale, dtype, rng))
        for ms in (1, 10):
            emst(x[:100_000], min_samples=ms, backend=a.backend)
            times = []
            for _ in range(a.repeats):
                sync()
                t0 = time.perf_counter()
                tree = emst(x, min_samples=ms, backend=a.backend)
                sync()
                times.append(time.perf_counter() - t0)
            phases = {k: round(v, 4) for k, v in tree.timings.items()}
            out["runs"].append({"cloud": name, "dtype": dtype, "min_samples": ms,
                                "seconds": min(times), "total_weight": float(tree.total_weight),
                                "phases": phases})
            print(f"{name:12s} {dtype} min_samples={ms:2d}: {min(times):8.3f} s "
                  f"(crowded cells {phases.get('crowded_cells', 0):.4f} s, searches "
                  f"{phases.get('find_component_outgoing_edges', 0):.3f} s)", flush=True)
        del x
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
