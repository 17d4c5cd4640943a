"""Where the device HDBSCAN* of a plain tree spends its time: the seconds of
every step and every kernel launch, per call, a sync around each.

Halos 3-D float32 (``emst_dask.datasets.halos``) of --n points on the
device, its mutual-reachability tree (``min_samples`` 10), then
``extract(..., min_cluster_size=100)`` once to warm up and once traced: the
functions of the dendrogram rounds (``products.chains``), the dendrogram
(``products.dendrogram``), the level sets and runt pruning
(``products.hdbscan.device_levels``), the cluster tree and per-point
results (``products.hdbscan.device``), every launch of the dendrogram's
and the clusters' kernels (``kd.*``, ``kc.*``) and CuPy's scans.  The
syncs add a little to the total; nested entries overlap (a function's time
includes its kernels').  Writes ``--out`` (JSON: the device, the phases,
the milliseconds summed per entry and per call, the holders and births).
"""
from __future__ import annotations

import argparse
import collections
import json
import time

import cupy

import emst_dask.kernels.cuda.clusters as kernels_clusters
import emst_dask.kernels.cuda.dendrogram as kernels_dendrogram
import emst_dask.products.chains as chains
import emst_dask.products.dendrogram as dendrogram
import emst_dask.products.hdbscan.device as device
import emst_dask.products.hdbscan.device_levels as levels
from emst_dask import datasets, emst
from emst_dask.products.hdbscan import extract

STEPS = {
    "chains": (chains, ("_lightest", "_picks", "_take_picks", "_chain_keys", "_components",
                        "_split", "_place")),
    "dend": (dendrogram, ("stable_argsort", "_parents", "_sizes")),
    "levels": (levels, ("sorted_edges", "_level_sets", "_holders_and_births", "_highest_small",
                        "_points_leave", "jump_to_roots", "tally", "scatter_add", "_lam")),
    "device": (device, ("to_host", "host_numbers", "_stabilities", "_select", "_point_results",
                        "persistence_of_sizes", "_nearest_selected", "_subtree_max",
                        "stable_argsort", "_run_sums")),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=100_000_000)
    p.add_argument("--out", default="extract-steps.json")
    a = p.parse_args()
    ms = collections.defaultdict(list)
    sync = cupy.cuda.Device().synchronize

    def traced(f, tag):
        def g(*args, **kw):
            sync()
            t0 = time.perf_counter()
            r = f(*args, **kw)
            sync()
            ms[tag].append(round((time.perf_counter() - t0) * 1e3, 2))
            return r
        return g

    X = cupy.asarray(datasets.halos(a.n, 3, 0))
    tree = emst(X, min_samples=10, backend="cuda")
    del X
    s, t, w = tree.source, tree.target, tree.weight
    extract(s, t, w, a.n, 100)  # compiles and warms up
    for tag, (module, names) in STEPS.items():
        for name in names:
            setattr(module, name, traced(getattr(module, name), f"{tag}.{name}"))
    for module, tag in ((kernels_dendrogram, "kd"), (kernels_clusters, "kc")):
        launch = module._launch
        module._launch = lambda name, *args, _f=launch, _t=tag: traced(
            _f, f"{_t}.{name}")(name, *args)
    cupy.cumsum = traced(cupy.cumsum, "cupy.cumsum")
    level_set_clusters = device.level_set_clusters

    def counted(*args, **kw):
        r = level_set_clusters(*args, **kw)
        ms["holders"].append(int(r["holder_birth"].shape[0]))
        ms["births"].append(int(r["parent"].shape[0]))
        return r
    device.level_set_clusters = counted
    sync()
    t0 = time.perf_counter()
    got = extract(s, t, w, a.n, 100)
    sync()
    res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "dataset": "halos", "n": a.n, "d": 3, "dtype": "float32", "min_samples": 10,
           "min_cluster_size": 100, "total_traced": time.perf_counter() - t0,
           "phases": got.timings, "clusters": int(got.n_clusters),
           "sum_ms": {k: round(sum(v), 2)
                      for k, v in sorted(ms.items(), key=lambda kv: -sum(kv[1]))},
           "calls_ms": dict(ms)}
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: res[k] for k in ("device", "total_traced", "phases")}))
    print(json.dumps(res["sum_ms"]))


if __name__ == "__main__":
    main()
