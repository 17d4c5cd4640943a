"""The periodic unwrapping and the catalogue with one giant group against
many small ones, at the same n (host, and the device's whole-array
algorithm run with numpy).

Two clouds in the unit box: half the points in one slab 0.01 thick that
wraps across x and y (one group wider than the box: it percolates), or in
blobs of about 100 points; the other half uniform.  One periodic tree
each; then, as the median of ``--repeats``: ``image_shifts_host`` (what
``fof`` runs on numpy), ``image_shifts_xp`` with numpy (the device's
steps), and ``fof(tree=)`` with its phases.

    python benchmarks/unwrap_cpu.py --n 1e6 --out benchmarks/results/unwrap-cpu-1M.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np


def clouds(n, seed=0):
    rng = np.random.default_rng(seed)
    half = n // 2
    rest = rng.random((n - half, 3))
    slab = np.column_stack([rng.random(half), rng.random(half), 0.5 + 0.01 * rng.random(half)])
    k = max(1, half // 100)
    centres = rng.random((k, 3))
    blobs = centres[rng.integers(0, k, half)] + 0.0015 * rng.standard_normal((half, 3))
    out = {}
    for name, part in (("giant", slab), ("blobs", blobs)):
        pts = np.mod(np.concatenate([part, rest]), 1.0)
        pts[pts >= 1.0] = 0.0
        out[name] = pts[rng.permutation(n)]
    return out


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--b", type=float, default=0.005, help="absolute linking length")
    ap.add_argument("--min-members", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import emst_dask
    from emst_dask.products.unwrap import group_sizes, image_shifts_host, image_shifts_xp

    n, b, mm = int(args.n), args.b, args.min_members
    box = np.ones(3)
    rows = {}
    for name, pts in clouds(n).items():
        t0 = time.perf_counter()
        tree = emst_dask.emst(pts, box_size=1.0, backend="cpu")
        t_tree = time.perf_counter() - t0
        raw = tree.fof(b)
        sizes = group_sizes(raw)
        keep = (sizes >= mm)[raw]
        emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=mm, tree=tree)  # compile
        host = median_time(lambda: image_shifts_host(tree.source, tree.target, tree.weight, pts,
                                                     box, b, raw, keep), args.repeats)
        whole = median_time(lambda: image_shifts_xp(np, tree.source, tree.target, tree.weight,
                                                    pts, box, b, raw, keep), args.repeats)
        cats = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            cat = emst_dask.fof(pts, b, relative=False, box_size=1.0, min_members=mm, tree=tree)
            cats.append((time.perf_counter() - t0, cat.timings))
        cats.sort(key=lambda c: c[0])
        total, phases = cats[len(cats) // 2]
        rows[name] = dict(tree_s=t_tree, largest=int(sizes.max()),
                          groups=int((sizes >= mm).sum()), unwrap_host_s=host,
                          unwrap_whole_array_numpy_s=whole, fof_tree_given_s=total,
                          fof_phases_s={k: float(v) for k, v in phases.items()})
        print(name, json.dumps(rows[name]), flush=True)
    out = dict(n=n, b=b, min_members=mm, repeats=args.repeats, machine=platform.node(),
               cpus=os.cpu_count(), load=os.getloadavg()[0], clouds=rows)
    if args.out:
        with open(args.out, "x") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
