"""MST statistics on the CPU: emst_dask against MiSTree's own functions.

    python benchmarks/stats_cpu.py                   # halos 1M 3D
    python benchmarks/stats_cpu.py --n 2e5 --tools emst_dask,mistree

In one run: one reference cloud (``emst_dask.datasets``, seed 0, float64)
and its exact tree (``emst_dask.emst``, not timed), written to a temporary
directory; then each tool in a fresh process computes, on the same edges
and points, the degree, the branches, their lengths, edge counts and
shapes.  MiSTree: ``get_graph_degree``, ``get_degree_for_edges``,
``get_branch_index``, the branch lengths as ``GetMST.get_branches`` sums
them, ``get_branch_edge_count``, ``get_branch_shape`` (mode 3D), each
timed.  emst_dask: ``tree.statistics(points)`` after an untimed warm-up on
a small tree (numba compilation), the best of ``--repeat`` runs.  The peak
resident memory is the process's own, reset after the data is loaded
(Linux ``/proc/self/clear_refs``).  The parent checks that both found the
same branches (same edges, same order) with the same lengths and shapes.
Results go to ``benchmarks/results/stats-cpu.json``.
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


def _load(work):
    e = np.load(os.path.join(work, "edges.npy"))
    pts = np.load(os.path.join(work, "points.npy"))
    return e[:, 0].astype(np.int64), e[:, 1].astype(np.int64), e[:, 2].copy(), pts


def child_emst_dask(args):
    import numba

    from emst_dask import SpanningTree

    s, t, w, pts = _load(args.work)
    n = len(pts)
    rng = np.random.default_rng(1)
    small = rng.random((2000, pts.shape[1]))
    from emst_dask import emst

    emst(small, backend="cpu").statistics(small)  # compile
    tree = SpanningTree(s, t, w, None, n, pts.shape[1])
    reset_peak_rss()
    base = peak_rss()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        st = tree.statistics(pts)
        times.append(time.perf_counter() - t0)
    peak = peak_rss()
    # the phases, once more: degrees alone
    from emst_dask.products.branches import degrees_host

    t0 = time.perf_counter()
    degrees_host(s, t, n)
    t_degree = time.perf_counter() - t0
    np.savez(os.path.join(args.work, "emst_dask.npz"), degree=st.degree,
             branch_edges=st.branch_edges, branch_offsets=st.branch_offsets,
             branch_length=st.branch_length, branch_shape=st.branch_shape)
    print(json.dumps({"seconds": min(times), "runs": times, "degree_seconds": t_degree,
                      "threads": numba.get_num_threads(), "peak_rss": peak,
                      "rss_before": base, "branches": st.n_branches}))


def child_mistree(args):
    import mistree as mist

    s, t, w, pts = _load(args.work)
    n = len(pts)
    edge_index = np.array([s, t])
    # compile MiSTree's numba degree kernel outside the timing
    mist.get_graph_degree(np.array([[0], [1]]), 2)
    reset_peak_rss()
    base = peak_rss()
    phases = {}
    t0 = time.perf_counter()
    degree = mist.get_graph_degree(edge_index, n)
    edge_degree = mist.get_degree_for_edges(edge_index, degree)
    phases["degree"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    branch_index, rejected = mist.get_branch_index(edge_index, edge_degree)
    phases["branch_index"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    length = np.array([np.sum(w[i]) for i in branch_index])  # GetMST.get_branches
    count = mist.get_branch_edge_count(branch_index)
    phases["branch_length_count"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    shape = mist.get_branch_shape(edge_index, edge_degree, branch_index, length, mode="3D",
                                  x=pts[:, 0], y=pts[:, 1], z=pts[:, 2])
    phases["branch_shape"] = time.perf_counter() - t0
    peak = peak_rss()
    offsets = np.concatenate(([0], np.cumsum(count.astype(np.int64))))
    flat = np.array([e for b in branch_index for e in b], np.int64)
    np.savez(os.path.join(args.work, "mistree.npz"), degree=degree, branch_edges=flat,
             branch_offsets=offsets, branch_length=length, branch_shape=shape)
    print(json.dumps({"seconds": sum(phases.values()), "phases": phases, "peak_rss": peak,
                      "rss_before": base, "branches": len(branch_index),
                      "rejected": len(rejected)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    p.add_argument("--dataset", default="halos")
    p.add_argument("--dim", type=int, default=3)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--tools", default="emst_dask,mistree")
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--machine", default=socket.gethostname())
    p.add_argument("--out", default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child == "emst_dask":
        return child_emst_dask(a)
    if a.child == "mistree":
        return child_mistree(a)
    if a.dim != 3:
        raise SystemExit("MiSTree's shape is timed in mode 3D: --dim 3")
    from emst_dask import datasets, emst

    work = tempfile.mkdtemp(prefix="stats-bench-")
    X = datasets.GENERATORS[a.dataset](a.n, dim=a.dim, seed=0).astype(np.float64)
    t0 = time.perf_counter()
    tree = emst(X, backend="cpu")
    tree_seconds = time.perf_counter() - t0
    np.save(os.path.join(work, "edges.npy"), tree.to_numpy())
    np.save(os.path.join(work, "points.npy"), X)
    print(f"tree of {a.dataset} n={a.n} d={a.dim}: {tree_seconds:.2f} s", flush=True)
    rows = []
    for tool in a.tools.split(","):
        cmd = [sys.executable, __file__, "--child", tool, "--work", work,
               "--repeat", str(a.repeat)]
        res, ok = run_child(tool, cmd, a.timeout)
        if not ok:
            rows.append(res)
            continue
        rows.append(res)
        print(f"{tool}: {res['seconds']:.3f} s, peak RSS {res['peak_rss'] / 1e6:.0f} MB, "
              f"{res['branches']} branches", flush=True)
    same = None
    if all(os.path.exists(os.path.join(work, f"{t}.npz")) for t in ("emst_dask", "mistree")):
        ours = np.load(os.path.join(work, "emst_dask.npz"))
        ref = np.load(os.path.join(work, "mistree.npz"))
        same = {k: bool(np.array_equal(ours[k], ref[k])) for k in
                ("degree", "branch_edges", "branch_offsets")}
        for k in ("branch_length", "branch_shape"):
            same[k + "_max_rel_diff"] = float(np.max(np.abs(ours[k] - ref[k]) / np.abs(ref[k]))
                                              if len(ref[k]) else 0.0)
        print(f"same answer: {same}")
    ref_s = next((r["seconds"] for r in rows if r.get("tool") == "emst_dask"), None)
    for r in rows:
        if "seconds" in r and ref_s:
            r["x_emst_dask"] = r["seconds"] / ref_s
    print("\n| tool | seconds | × emst_dask | peak RSS |")
    print("|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['tool']} | {r['error'][:40]} | | |")
            continue
        print(f"| {r['tool']} | {r['seconds']:.3f} | {r['x_emst_dask']:.0f} | "
              f"{r['peak_rss'] / 1e6:.0f} MB |")
    out = a.out or str(HERE / "results" / "stats-cpu.json")
    info = {"machine": a.machine, "cpus": os.cpu_count(), "python": platform.python_version(),
            "dataset": a.dataset, "n": a.n, "d": a.dim, "dtype": "float64",
            "tree_seconds": tree_seconds, "n_edges": int(tree.n_edges)}
    try:
        import mistree

        info["mistree"] = getattr(mistree, "__version__", "2.0.0")
    except ImportError:
        pass
    with open(out, "w") as fh:
        json.dump({"info": info, "rows": rows, "same_answer": same}, fh, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
