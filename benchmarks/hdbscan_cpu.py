"""HDBSCAN* end to end on the CPU: emst_dask against fast_hdbscan and hdbscan.

    python benchmarks/hdbscan_cpu.py                      # halos 1M 3D, m=100, k=10
    python benchmarks/hdbscan_cpu.py --n 1e5 --tools emst_dask,hdbscan

In one run, on one reference cloud (``emst_dask.datasets``, seed 0, float64
so that the rows have no tied distances), each tool in a fresh process:
points in memory to labels, ``min_cluster_size`` and ``min_samples`` in
scikit-learn's meaning (hdbscan's and fast_hdbscan's ``min_samples`` is one
less: they do not count the point itself).  Each tool first runs on a small
cloud, untimed (numba compilation), then once, timed, on the cloud.  The
peak resident memory is the process's own, reset after the data and the
warm-up (Linux ``/proc/self/clear_refs``).  The labels are compared with
emst_dask's: adjusted Rand index, clusters, noise.  Results go to
``benchmarks/results/hdbscan-cpu-<machine>.json`` and a table is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from children import run_child  # noqa: E402
from peak_memory import peak_rss, reset_peak_rss  # noqa: E402


def _versions():
    """The installed versions of the tools and of what they run on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("emst-dask", "fast_hdbscan", "hdbscan", "scikit-learn", "numba", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _run_tool(tool, X, m, k):
    if tool == "emst_dask":
        from emst_dask import HDBSCAN

        return HDBSCAN(min_cluster_size=m, min_samples=k, backend="cpu").fit_predict(X)
    if tool == "fast_hdbscan":
        import fast_hdbscan

        return fast_hdbscan.HDBSCAN(min_cluster_size=m, min_samples=k - 1).fit_predict(X)
    if tool == "hdbscan":
        import hdbscan

        return hdbscan.HDBSCAN(min_cluster_size=m, min_samples=k - 1,
                               core_dist_n_jobs=os.cpu_count()).fit_predict(X)
    raise ValueError(tool)


def child(args):
    """One tool in this process: warm up, time, write labels and figures."""
    from emst_dask import datasets

    X = datasets.GENERATORS[args.dataset](args.n, dim=args.dim, seed=0).astype(np.float64)
    warm = datasets.GENERATORS[args.dataset](5000, dim=args.dim, seed=1).astype(np.float64)
    _run_tool(args.child, warm, min(args.min_cluster_size, 50), args.min_samples)
    reset_peak_rss()
    base = peak_rss()
    t0 = time.perf_counter()
    labels = _run_tool(args.child, X, args.min_cluster_size, args.min_samples)
    seconds = time.perf_counter() - t0
    np.save(args.labels, np.asarray(labels, np.int64))
    print(json.dumps({"seconds": seconds, "peak_rss": peak_rss(), "rss_before": base}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    p.add_argument("--dataset", default="halos")
    p.add_argument("--dim", type=int, default=3)
    p.add_argument("--min-cluster-size", type=int, default=100)
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--tools", default="emst_dask,fast_hdbscan,hdbscan")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--machine", default=socket.gethostname())
    p.add_argument("--out", default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--labels", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child(a)
    from sklearn.metrics import adjusted_rand_score

    work = tempfile.mkdtemp(prefix="hdbscan-bench-")
    rows, labels = [], {}
    for tool in a.tools.split(","):
        lab = os.path.join(work, f"{tool}.npy")
        cmd = [sys.executable, __file__, "--child", tool, "--labels", lab, "--n", str(a.n),
               "--dataset", a.dataset, "--dim", str(a.dim),
               "--min-cluster-size", str(a.min_cluster_size),
               "--min-samples", str(a.min_samples)]
        res, ok = run_child(tool, cmd, a.timeout)
        if not ok:
            rows.append(res)
            continue
        labels[tool] = np.load(lab)
        lb = labels[tool]
        res.update(clusters=int(lb.max()) + 1, noise=int((lb < 0).sum()))
        rows.append(res)
        print(f"{tool}: {res['seconds']:.2f} s, peak RSS {res['peak_rss'] / 1e6:.0f} MB, "
              f"{res['clusters']} clusters, {res['noise']} noise", flush=True)
    ours = labels.get("emst_dask")
    for row in rows:
        if ours is not None and row.get("tool") in labels:
            row["ari_vs_emst_dask"] = float(adjusted_rand_score(ours, labels[row["tool"]]))
            row["same_labels_as_emst_dask"] = bool(np.array_equal(ours, labels[row["tool"]]))
    ref = next((r["seconds"] for r in rows if r.get("tool") == "emst_dask"), None)
    print("\n| tool | seconds | × emst_dask | peak RSS | clusters | noise | ARI vs emst_dask |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['tool']} | {r['error'][:40]} | | | | | |")
            continue
        x = r["seconds"] / ref if ref else float("nan")
        print(f"| {r['tool']} | {r['seconds']:.2f} | {x:.1f} | {r['peak_rss'] / 1e6:.0f} MB | "
              f"{r['clusters']} | {r['noise']} | {r.get('ari_vs_emst_dask', float('nan')):.4f} |")
    out = a.out or str(HERE / "results" / f"hdbscan-cpu-{a.machine}.json")
    info = {"machine": a.machine, "cpus": os.cpu_count(), "python": platform.python_version(),
            "dataset": a.dataset, "n": a.n, "d": a.dim, "dtype": "float64",
            "min_cluster_size": a.min_cluster_size, "min_samples": a.min_samples,
            "versions": _versions()}
    with open(out, "w") as fh:
        json.dump({"info": info, "rows": rows}, fh, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
