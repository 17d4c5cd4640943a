"""Prediction on a fitted HDBSCAN* model: emst_dask against hdbscan.

    python benchmarks/hdbscan_predict.py                       # 1M model, 100k new points
    python benchmarks/hdbscan_predict.py --n 1e7 --new 1e6 --backend cuda --tools emst_dask \
        --min-cluster-size 1000

The model is fitted on a reference cloud (``emst_dask.datasets``, halos,
3-D float64, seed 0) with ``prediction_data=True``; the new points are
another draw of the same cloud (seed 1).  Each tool runs in a fresh process,
first on a small cloud untimed (numba compilation), then timed: the fit,
``approximate_predict`` and ``membership_vector`` of the new points, and
``all_points_membership_vectors`` of the model (unless ``--no-all-points``;
emst_dask: streamed block by
block and discarded, so its (n, k) matrix need not fit, the rows done and
the seconds so far printed each minute, so that a run cut short still
gives a rate; hdbscan: only where
its few (n, k) float64 matrices fit ``--max-gib``).  hdbscan's
``membership_vector`` loops over the points in Python: it is timed on the
first ``--hdbscan-membership-rows`` new points only (the row says how many).
Peak resident memory is each process's own after the data and the warm-up.
The predicted labels are compared with emst_dask's (adjusted Rand index).
``--backend cuda`` fits on CuPy points and predicts on the device (the new
points given as CuPy; each timing ends with a device synchronisation):
``approximate_predict`` and ``membership_vector`` are timed ``--repeats``
times after a first call (which builds the model's query tree, timed on
its own) and the median kept; the row has the device's name and the CuPy
pool's peak.  A tool that is not importable (hdbscan on a GPU machine)
gives a row saying so.
Results go to ``benchmarks/results/hdbscan-predict-<machine>.json``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
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


def _fit(tool, X, m, k, backend):
    if tool == "emst_dask":
        from emst_dask import HDBSCAN

        if backend == "cuda":
            import cupy

            X = cupy.asarray(X)
        return HDBSCAN(min_cluster_size=m, min_samples=k, prediction_data=True,
                       backend=backend).fit(X)
    import hdbscan

    return hdbscan.HDBSCAN(min_cluster_size=m, min_samples=k - 1, prediction_data=True,
                           core_dist_n_jobs=os.cpu_count()).fit(X)


def _api(tool):
    if tool == "emst_dask":
        import emst_dask as api
    else:
        import hdbscan as api
    return api


def _sync(backend):
    if backend == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()


def _timed(f, backend, repeats):
    """(first call's seconds, median of ``repeats`` more, the last result)."""
    t0 = time.perf_counter()
    res = f()
    _sync(backend)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = f()
        _sync(backend)
        times.append(time.perf_counter() - t0)
    return first, (float(np.median(times)) if times else first), res


def child(a):
    from emst_dask import datasets

    X = datasets.GENERATORS[a.dataset](a.n, dim=a.dim, seed=0).astype(np.float64)
    Y = datasets.GENERATORS[a.dataset](a.new, dim=a.dim, seed=1).astype(np.float64)
    warm = datasets.GENERATORS[a.dataset](5000, dim=a.dim, seed=2).astype(np.float64)
    api = _api(a.child)
    w = _fit(a.child, warm, 50, a.min_samples, a.backend)
    api.approximate_predict(w, warm[:100])
    api.membership_vector(w, warm[:100])
    api.all_points_membership_vectors(w)
    device = a.child == "emst_dask" and a.backend == "cuda"
    out = {}
    if device:
        import cupy

        pool = cupy.get_default_memory_pool()
        pool.free_all_blocks()
        Y = cupy.asarray(Y)
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        out["device"] = props["name"].decode() if isinstance(props["name"], bytes) \
            else str(props["name"])
    reset_peak_rss()
    out["rss_before"] = peak_rss()
    t0 = time.perf_counter()
    model = _fit(a.child, X, a.min_cluster_size, a.min_samples, a.backend)
    _sync(a.backend if a.child == "emst_dask" else "cpu")
    out["fit_seconds"] = time.perf_counter() - t0
    labels = np.asarray(model.labels_ if not device else model.labels_.get())
    k = int(labels.max()) + 1
    out.update(clusters=k, noise=int((labels < 0).sum()))
    if a.child == "emst_dask":
        out["exemplars"] = int(sum(e.shape[0] for e in model.exemplars_))
    print(json.dumps(out), flush=True)  # the row so far (kept if a later phase times out)
    backend = a.backend if a.child == "emst_dask" else "cpu"
    repeats = a.repeats if a.child == "emst_dask" else 0
    first, med, (lab, prob) = _timed(lambda: api.approximate_predict(model, Y), backend,
                                      repeats)
    out["approximate_predict_first_seconds"] = first
    out["approximate_predict_seconds"] = med
    print(json.dumps(out), flush=True)
    np.save(a.labels, np.asarray(lab.get() if device else lab, np.int64))
    del lab, prob
    rows = len(Y) if a.child == "emst_dask" else min(len(Y), a.hdbscan_membership_rows)
    first, med, mv = _timed(lambda: api.membership_vector(model, Y[:rows]), backend, repeats)
    del mv
    out["membership_vector_first_seconds"] = first
    out["membership_vector_seconds"] = med
    out["membership_vector_rows"] = rows
    out["peak_rss"] = peak_rss()
    print(json.dumps(out), flush=True)
    matrix_gib = len(X) * k * 8 / 2**30
    out["all_points_matrix_gib"] = matrix_gib
    t0 = time.perf_counter()
    need = f"needs about {4 * matrix_gib:.1f} GiB (four (n, k) float64 matrices)"
    if not a.all_points:
        out["all_points_skipped"] = "left out (--no-all-points)" + (
            "" if a.child == "emst_dask" else f"; hdbscan's {need}")
    elif a.child == "emst_dask":
        from emst_dask.products.hdbscan.membership import iter_all_points_membership_vectors

        total, done, shown = 0.0, 0, t0
        for _, block in iter_all_points_membership_vectors(model):
            total = total + block.sum()  # streamed: each block dropped
            done += block.shape[0]
            if time.perf_counter() - shown > 60 and done < len(X):  # a rate if cut short
                shown = time.perf_counter()
                out.update(all_points_rows_done=done, all_points_elapsed=shown - t0)
                print(json.dumps(out), flush=True)
        out.pop("all_points_rows_done", None)
        out.pop("all_points_elapsed", None)
        out["all_points_sum"] = float(total)
        out["all_points_seconds"] = time.perf_counter() - t0
    elif 4 * matrix_gib <= a.max_gib:
        api.all_points_membership_vectors(model)
        out["all_points_seconds"] = time.perf_counter() - t0
    else:
        out["all_points_skipped"] = f"{need}, above --max-gib {a.max_gib}"
    out["peak_rss"] = peak_rss()
    if device:
        out["device_pool_peak_bytes"] = int(pool.total_bytes())
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    p.add_argument("--new", type=lambda s: int(float(s)), default=100_000)
    p.add_argument("--dataset", default="halos")
    p.add_argument("--dim", type=int, default=3)
    p.add_argument("--min-cluster-size", type=int, default=100)
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--backend", default="cpu")
    p.add_argument("--tools", default="emst_dask,hdbscan")
    p.add_argument("--hdbscan-membership-rows", type=int, default=1000)
    p.add_argument("--max-gib", type=float, default=16.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--all-points", default=True, action=argparse.BooleanOptionalAction,
                   help="also all_points_membership_vectors of the model (default)")
    p.add_argument("--machine", default=socket.gethostname())
    p.add_argument("--out", default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--labels", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        return child(a)
    from sklearn.metrics import adjusted_rand_score

    work = tempfile.mkdtemp(prefix="hdbscan-predict-")
    rows, labels = [], {}
    for tool in a.tools.split(","):
        if importlib.util.find_spec(tool) is None:
            rows.append({"tool": tool, "skipped": f"{tool} is not importable here"})
            print(tool, "skipped: not importable", flush=True)
            continue
        lab = os.path.join(work, f"{tool}.npy")
        cmd = [sys.executable, __file__, "--child", tool, "--labels", lab]
        for opt in ("n", "new", "dataset", "dim", "min_cluster_size", "min_samples",
                    "backend", "hdbscan_membership_rows", "max_gib", "repeats"):
            cmd += ["--" + opt.replace("_", "-"), str(getattr(a, opt))]
        cmd += ["--all-points" if a.all_points else "--no-all-points"]
        res, ok = run_child(tool, cmd, a.timeout)
        if not ok:
            rows.append(res)
            continue
        labels[tool] = np.load(lab)
        rows.append(res)
        print(tool, json.dumps(res), flush=True)
    ours = labels.get("emst_dask")
    for row in rows:
        if ours is not None and row.get("tool") in labels and row["tool"] != "emst_dask":
            row["predicted_ari_vs_emst_dask"] = float(adjusted_rand_score(
                ours, labels[row["tool"]]))
    result = {"n": a.n, "new": a.new, "dataset": a.dataset, "dim": a.dim,
              "min_cluster_size": a.min_cluster_size, "min_samples": a.min_samples,
              "backend": a.backend, "machine": a.machine, "cpus": os.cpu_count(),
              "rows": rows}
    out = Path(a.out) if a.out else HERE / "results" / f"hdbscan-predict-{a.machine}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
