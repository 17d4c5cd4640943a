"""The largest HDBSCAN* this GPU holds: ``HDBSCAN(min_cluster_size,
min_samples, backend="cuda").fit`` of halos clouds of growing size, points
on the device, until one does not fit.

    python benchmarks/hdbscan_largest.py --n 100e6 200e6 --out result.json

``--on-device`` draws the clouds on the GPU (the same model as
``emst_dask.datasets.halos``, from CuPy's generator, so other points than
the host's: at a billion points the host's generator takes minutes).

Records per size: seconds end to end (tree and clusters) of each fit (the
first one at a size also grows the device memory pool, which the driver
clears as it hands it out; the later ones reuse it, as a long-lived worker
does), the clusters, and the device memory pool's size afterwards (its
peak), or the error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def halos_on_device(n, dim=3, seed=0):
    """``datasets.halos``'s model drawn on the device: (n, dim) float32 cupy."""
    import cupy
    import numpy as np

    from emst_dask.datasets import halo_catalogue

    counts, centres, radii = halo_catalogue(n, dim, np.random.default_rng(seed))
    n_cl = int(counts.sum())
    centres, radii = cupy.asarray(centres), cupy.asarray(radii)
    which = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    g = cupy.random.RandomState(seed)
    pts = cupy.empty((n, dim), dtype=cupy.float32)
    step = 1 << 26  # in slices: the float64 temporaries stay small
    for lo in range(0, n_cl, step):
        w = cupy.asarray(which[lo:lo + step])
        part = centres[w] + g.standard_normal((w.shape[0], dim)) * radii[w, None]
        pts[lo:lo + w.shape[0]] = part % 1.0
    del which
    for lo in range(n_cl, n, step):
        hi = min(lo + step, n)
        pts[lo:hi] = g.random_sample((hi - lo, dim), dtype=cupy.float32)
    return pts[g.permutation(n)]


def main():
    import cupy

    from emst_dask import HDBSCAN, datasets

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, nargs="+", default=[100e6, 200e6])
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--min-cluster-size", type=int, default=100)
    p.add_argument("--fits", type=int, default=2, help="fits per size")
    p.add_argument("--on-device", action="store_true",
                   help="draw the clouds on the GPU (CuPy's generator)")
    p.add_argument("--out", default="hdbscan-largest.json")
    a = p.parse_args()
    pool = cupy.get_default_memory_pool()
    res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "dataset": "halos (drawn on the device)" if a.on_device else "halos", "d": 3, "dtype": "float32", "min_samples": a.min_samples,
           "min_cluster_size": a.min_cluster_size, "runs": []}
    est = HDBSCAN(min_cluster_size=a.min_cluster_size, min_samples=a.min_samples,
                  backend="cuda")
    est.fit(cupy.asarray(datasets.halos(100_000, 3, 1)))  # compile, untimed
    for n in (int(v) for v in a.n):
        row = {"n": n}
        try:
            X = halos_on_device(n) if a.on_device else cupy.asarray(datasets.halos(n, 3, 0))
            pool.free_all_blocks()
            held = pool.used_bytes()
            row["seconds"] = []
            for _ in range(a.fits):
                cupy.cuda.Device().synchronize()  # a refit drops the former results
                t0 = time.perf_counter()
                est.fit(X)
                cupy.cuda.Device().synchronize()
                row["seconds"].append(time.perf_counter() - t0)
            row["clusters"] = int(est.labels_.max()) + 1
            row["noise_fraction"] = float((est.labels_ < 0).mean())
            row["device_bytes_per_point_beyond_points"] = (pool.total_bytes() - held) / n
        except Exception as e:  # noqa: BLE001 - the limit is what we record
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        X = None
        est = HDBSCAN(**est.get_params())  # the results go with the former estimator
        pool.free_all_blocks()
        res["runs"].append(row)
        print(row, flush=True)
        if "error" in row:
            break
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
