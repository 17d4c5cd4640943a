"""Single linkage of one plain tree on the device, and its rounds' steps.

    python benchmarks/linkage_steps.py --make --out linkage-steps.json
    PKG=/path/to/other/checkout python benchmarks/linkage_steps.py --out other.json

``--make`` computes the Euclidean tree of halos (3-D float32, seed 0, on
the device) and saves its edges to ``--tree``; every run loads them and
times ``single_linkage`` (the median of ``--repeats`` runs after a
warm-up, the device synchronised around each), records the memory pool's
peak beyond the tree during one run, then runs it once more with
a sync around each step of the dendrogram's rounds (``products.chains``),
and hashes the matrix.  Two checkouts (``PKG``) timed on one saved tree in
one session are an A/B of a change; equal hashes say the matrices are
bit for bit equal.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.environ.get("PKG") or os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

from peak_memory import device_peak_beyond  # noqa: E402 (this folder)


def main():
    import cupy
    import numpy as np

    from emst_dask import datasets, emst
    from emst_dask.products import chains
    from emst_dask.products.linkage import single_linkage

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=100_000_000)
    p.add_argument("--tree", default="/tmp/linkage-steps-tree.npz")
    p.add_argument("--make", action="store_true")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="linkage-steps.json")
    a = p.parse_args()
    sync = cupy.cuda.Device().synchronize
    res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "dataset": "halos", "d": 3, "dtype": "float32", "package": chains.__file__}
    if a.make:
        X = cupy.asarray(datasets.halos(a.n, 3, 0))
        emst(X, backend="cuda")
        sync()
        t0 = time.perf_counter()
        tree = emst(X, backend="cuda")
        sync()
        res["emst"] = time.perf_counter() - t0
        np.savez(a.tree, s=tree.source.get(), t=tree.target.get(), w=tree.weight.get())
        del X, tree
    f = np.load(a.tree)
    s, t, w = (cupy.asarray(f[k]) for k in "stw")
    n = int(s.shape[0]) + 1
    res["n"] = n

    def run():
        return single_linkage(s, t, w, n)

    Z = run()
    sync()
    res["sha1"] = hashlib.sha1(Z.get().tobytes()).hexdigest()
    del Z
    seconds = []
    for _ in range(a.repeats):
        sync()
        t0 = time.perf_counter()
        Z = run()
        sync()
        seconds.append(time.perf_counter() - t0)
        del Z
    res["linkage"] = statistics.median(seconds)
    res["linkage_runs"] = seconds
    Z, peak = device_peak_beyond(run)
    del Z
    res["peak_bytes_per_point_beyond_tree"] = peak / n

    steps = collections.defaultdict(float)

    def traced(name):
        fn = getattr(chains, name)

        def step(*args, **kw):
            sync()
            t0 = time.perf_counter()
            r = fn(*args, **kw)
            sync()
            steps[name] += time.perf_counter() - t0
            return r
        setattr(chains, name, step)

    for name in ("_lightest", "_picks", "_take_picks", "_chain_keys", "_components",
                 "_split", "_place"):
        traced(name)
    Z = run()
    sync()
    del Z
    res["round_steps_ms"] = {k: round(v * 1e3, 2)
                             for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}
    print(json.dumps(res))
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
