"""CPU benchmark: emst_dask's numba backend against the CPU EMST tools.

    python benchmarks/cpu.py                       # the full suite (1M points)
    python benchmarks/cpu.py --n 100000 --mlpack-repeats 1
    python benchmarks/cpu.py --datasets halos3D --tools emst_dask,mlpack

In one run, on the reference clouds of ``emst_dask.datasets`` (seed 0):

* ``emst_dask``: ``emst(points, backend="cpu")``; a warm-up call on a small
  cloud first, so numba's compilation (or cache load) is not timed; median
  of ``--repeats`` runs.  With ``--warm-up full`` (the default) every tool
  also runs once, untimed, on the cloud itself ("median of 3 after a
  warm-up", as the issue's peer figures were taken).
* ``mlpack``: the ``mlpack.emst`` Python binding (dual-tree Borůvka on a
  k-d tree, one thread); input handed over as float64; median of
  ``--mlpack-repeats`` runs.
* ``fast_hdbscan``: ``fast_hdbscan.hdbscan.compute_minimum_spanning_tree``
  (parallel Borůvka on its numba k-d tree) with ``min_samples=1``, which sets
  every core distance to 0: the plain Euclidean MST.  It is slow at 1M, so it
  runs at ``--fast-hdbscan-n`` (100k), where emst_dask and mlpack are timed
  again for the comparison.

Each (tool, dataset, n) runs in a fresh process (``--no-isolate`` to turn
that off), so the peak resident memory reported is that tool's own: the
peak is reset (Linux ``/proc/self/clear_refs``) after the data and the
warm-up, and read back after the timed runs.  The tools must agree on the
total weight to ``--rtol`` (1e-6); a disagreement is printed loudly and the
script exits with status 1 after writing the results.

Results go to ``benchmarks/results/cpu-<machine>.json`` (``--machine``
defaults to the host name; runs at another n than 1M get ``-n<N>`` added)
and a markdown table is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from peak_memory import peak_rss, reset_peak_rss

DATASETS = {  # name: (generator, dimension)
    "uniform3D": ("uniform", 3),
    "normal3D": ("normal", 3),
    "halos3D": ("halos", 3),
    "uniform2D": ("uniform", 2),
}
#: clouds with ties (``emst_dask.datasets.TIES``), by ``--datasets ties``
TIES_DATASETS = {
    "lattice3D": ("lattice", 3),
    "tracks3D": ("tracks", 3),
    "copies4_3D": ("copies4", 3),
    "copies16_3D": ("copies16", 3),
}
ALL_DATASETS = {**DATASETS, **TIES_DATASETS}
TOOLS = ["emst_dask", "mlpack", "fast_hdbscan"]
DEFAULT_N = 1_000_000


# ---------------------------------------------------------------------------
# measurement helpers
# ---------------------------------------------------------------------------
def _peak_rss_bytes(reset_worked: bool) -> int:
    """VmHWM since the reset, or the process's lifetime peak where the reset
    (or VmHWM) is not available."""
    peak = peak_rss() if reset_worked else 0
    if peak:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _rss_bytes() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except ImportError:
        return 0


def make_points(dataset: str, n: int, dtype: str, seed: int = 0) -> np.ndarray:
    from emst_dask import datasets

    gen, d = ALL_DATASETS[dataset]
    clouds = {**datasets.GENERATORS, **datasets.TIES}
    return np.ascontiguousarray(clouds[gen](n, dim=d, seed=seed), dtype=dtype)


# ---------------------------------------------------------------------------
# the tools: each returns (prepare, run, total_weight_of_result)
# ---------------------------------------------------------------------------
def _tool_emst_dask(points):
    from emst_dask import emst

    emst(make_points("uniform3D", 2000, points.dtype.name)[:, : points.shape[1]],
         backend="cpu")  # warm-up: compile or load the numba cache

    def run():
        return emst(points, backend="cpu")

    def summary(tree):
        return {"total_weight": tree.total_weight, "n_edges": tree.n_edges,
                "iterations": tree.iterations,
                "phases": {k: round(v, 6) for k, v in tree.timings.items()}}

    return run, summary


def _tool_mlpack(points):
    import mlpack

    x = np.ascontiguousarray(points, dtype=np.float64)  # mlpack computes in double
    mlpack.emst(input_=x[:100])  # warm-up (no JIT; loads the library)

    def run():
        return mlpack.emst(input_=x)["output"]

    def summary(out):
        return {"total_weight": float(np.asarray(out)[:, 2].sum()),
                "n_edges": int(np.asarray(out).shape[0])}

    return run, summary


def _tool_fast_hdbscan(points):
    from fast_hdbscan.hdbscan import compute_minimum_spanning_tree

    compute_minimum_spanning_tree(points[:2000], min_samples=1)  # warm-up (numba)

    def run():
        # min_samples=1: core distances are all 0, so this is the Euclidean MST
        return compute_minimum_spanning_tree(points, min_samples=1)

    def summary(out):
        edges = np.asarray(out[0])
        return {"total_weight": float(edges[:, 2].astype(np.float64).sum()),
                "n_edges": int(edges.shape[0])}

    return run, summary


TOOL_FUNCS = {"emst_dask": _tool_emst_dask, "mlpack": _tool_mlpack,
              "fast_hdbscan": _tool_fast_hdbscan}


def measure(tool: str, dataset: str, n: int, dtype: str, repeats: int,
            warm_up: str = "full") -> dict:
    """Time one tool on one cloud (in the current process)."""
    points = make_points(dataset, n, dtype)
    run, summary = TOOL_FUNCS[tool](points)
    if warm_up == "full":  # one untimed run on the cloud itself, every tool alike
        run()
    import gc

    gc.collect()
    baseline = _rss_bytes()
    reset = reset_peak_rss()
    seconds = []
    info = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = run()
        seconds.append(time.perf_counter() - t0)
        s = summary(out)
        if info is None or seconds[-1] == min(seconds):
            info = s  # keep the phases of the fastest run
        del out
        gc.collect()
    peak = _peak_rss_bytes(reset)
    d = points.shape[1]
    med = statistics.median(seconds)
    return {
        "tool": tool, "dataset": dataset, "n": n, "d": d, "dtype": dtype,
        "repeats": repeats, "seconds": med, "all_seconds": seconds,
        "mfeatures_per_s": n * d / med / 1e6,
        "peak_rss_bytes": peak, "rss_before_bytes": baseline,
        "peak_rss_is_per_tool": reset,
        **info,
    }


def _measure_in_child(args):
    return measure(*args)


def measure_isolated(tool, dataset, n, dtype, repeats, isolate: bool,
                     warm_up: str = "full") -> dict:
    if not isolate:
        return measure(tool, dataset, n, dtype, repeats, warm_up)
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        return pool.apply(_measure_in_child, ((tool, dataset, n, dtype, repeats, warm_up),))


# ---------------------------------------------------------------------------
# machine and versions
# ---------------------------------------------------------------------------
def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = None
    try:
        import psutil

        mem = psutil.virtual_memory().total
    except ImportError:
        pass
    info = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": cpu,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "memory_bytes": mem,
        "python": platform.python_version(),
    }
    try:
        import numba

        info["numba_threads"] = numba.get_num_threads()
        info["numba_threading_layer_env"] = os.environ.get("NUMBA_THREADING_LAYER")
    except ImportError:
        pass
    return info


def _version(dist: str):
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def tool_versions() -> dict:
    v = {name: _version(dist) for name, dist in [
        ("emst_dask", "emst-dask"), ("numpy", "numpy"), ("numba", "numba"),
        ("mlpack", "mlpack"), ("fast_hdbscan", "fast_hdbscan")]}
    if v["emst_dask"] is None:
        import emst_dask

        v["emst_dask"] = emst_dask.__version__
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if commit:
            v["emst_dask_commit"] = commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return v


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------
def check_agreement(results: list[dict], rtol: float) -> list[str]:
    """Mark every result with its relative difference from the reference
    (mlpack where it ran, else emst_dask); return the failures."""
    failures = []
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["dataset"], r["n"]), []).append(r)
    for (dataset, n), rs in groups.items():
        by_tool = {r["tool"]: r for r in rs}
        ref = by_tool.get("mlpack") or by_tool.get("emst_dask") or rs[0]
        for r in rs:
            rel = abs(r["total_weight"] - ref["total_weight"]) / abs(ref["total_weight"])
            r["reference_tool"] = ref["tool"]
            r["rel_diff_total_weight"] = rel
            r["agrees"] = bool(rel <= rtol) and r["n_edges"] == n - 1
            if not r["agrees"]:
                failures.append(
                    f"{r['tool']} on {dataset} n={n}: total weight {r['total_weight']!r} "
                    f"vs {ref['tool']} {ref['total_weight']!r} (rel {rel:.2e} > {rtol:g}), "
                    f"{r['n_edges']} edges")
        mlp = by_tool.get("mlpack")
        for r in rs:
            r["speed_vs_mlpack"] = mlp["seconds"] / r["seconds"] if mlp else None
    return failures


def markdown_table(results: list[dict]) -> str:
    head = ("| dataset | n | tool | seconds | MFeatures/s | x mlpack | peak RSS (MB) "
            "| total weight | agrees |\n|---|---:|---|---:|---:|---:|---:|---:|---|")
    rows = []
    for r in results:
        ratio = "" if r.get("speed_vs_mlpack") is None else f"{r['speed_vs_mlpack']:.2f}"
        rows.append(
            f"| {r['dataset']} | {r['n']:,} | {r['tool']} | {r['seconds']:.3f} "
            f"(median of {r['repeats']}) | {r['mfeatures_per_s']:.2f} | {ratio} "
            f"| {r['peak_rss_bytes'] / 2**20:.0f} | {r['total_weight']:.10g} "
            f"| {'yes' if r.get('agrees') else '**NO**'} |")
    return head + "\n" + "\n".join(rows)


def _tag(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-") or "machine"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s.replace("_", ""))), default=DEFAULT_N,
                   help="points per cloud for emst_dask and mlpack (default 1M)")
    p.add_argument("--fast-hdbscan-n", type=lambda s: int(float(s.replace("_", ""))),
                   default=100_000, help="points per cloud for fast_hdbscan (default 100k); "
                   "emst_dask and mlpack are timed at this n too when it differs from --n")
    p.add_argument("--datasets", default=",".join(DATASETS),
                   help=f"comma-separated, from {','.join(ALL_DATASETS)}, or 'ties' "
                        "for the clouds with ties")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, from {','.join(TOOLS)}")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="precision emst_dask computes in (the clouds are float32)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of emst_dask")
    p.add_argument("--mlpack-repeats", type=int, default=3, help="timed runs of mlpack (slow)")
    p.add_argument("--fast-hdbscan-repeats", type=int, default=3)
    p.add_argument("--rtol", type=float, default=1e-6, help="total-weight agreement")
    p.add_argument("--machine", default=None, help="tag for the results file (default: host name)")
    p.add_argument("--out", default=None, help="results file (default benchmarks/results/cpu-<machine>.json)")
    p.add_argument("--warm-up", default="full", choices=["full", "small"],
                   help="full: one untimed run of every tool on the cloud itself before "
                        "the timed ones (first-touch page faults and allocator growth "
                        "not timed); small: only the tools' small warm-up calls")
    p.add_argument("--no-isolate", action="store_true",
                   help="run every tool in this process (peak RSS is then not per tool)")
    args = p.parse_args(argv)

    datasets = [s for s in args.datasets.split(",") if s]
    if datasets == ["ties"]:
        datasets = list(TIES_DATASETS)
    tools = [s for s in args.tools.split(",") if s]
    for s in datasets:
        if s not in ALL_DATASETS:
            p.error(f"unknown dataset {s!r}: choose from {', '.join(ALL_DATASETS)}")
    for s in tools:
        if s not in TOOLS:
            p.error(f"unknown tool {s!r}: choose from {', '.join(TOOLS)}")
    repeats = {"emst_dask": args.repeats, "mlpack": args.mlpack_repeats,
               "fast_hdbscan": args.fast_hdbscan_repeats}

    jobs = []  # (tool, dataset, n)
    for ds in datasets:
        for tool in tools:
            if tool != "fast_hdbscan":
                jobs.append((tool, ds, args.n))
        if "fast_hdbscan" in tools:
            if args.fast_hdbscan_n != args.n:
                for tool in tools:
                    if tool != "fast_hdbscan":
                        jobs.append((tool, ds, args.fast_hdbscan_n))
            jobs.append(("fast_hdbscan", ds, args.fast_hdbscan_n))

    machine = machine_info()
    versions = tool_versions()
    print(f"# {machine['cpu_model']} ({machine['usable_cpus']} usable CPUs), "
          f"{machine['platform']}", flush=True)
    print(f"# versions: {versions}", flush=True)
    results = []
    t_start = time.perf_counter()
    for tool, ds, n in jobs:
        print(f"... {tool:<13s} {ds:<10s} n={n:<9,d}", end="", flush=True)
        r = measure_isolated(tool, ds, n, args.dtype if tool == "emst_dask" else "float32",
                             repeats[tool], isolate=not args.no_isolate,
                             warm_up=args.warm_up)
        results.append(r)
        print(f" {r['seconds']:8.3f} s  total_weight={r['total_weight']!r}", flush=True)

    failures = check_agreement(results, args.rtol)
    tag = _tag(args.machine or machine["hostname"])
    out = Path(args.out) if args.out else (
        HERE / "results" / (f"cpu-{tag}.json" if args.n == DEFAULT_N else f"cpu-{tag}-n{args.n}.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "benchmark": "cpu",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine_tag": tag,
        "machine": machine,
        "versions": versions,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
        "wall_seconds": time.perf_counter() - t_start,
        "all_agree": not failures,
        "results": results,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")

    print()
    print(markdown_table(results))
    print(f"\nwrote {out}")
    if failures:
        bar = "!" * 78
        print(f"\n{bar}\nTOTAL WEIGHTS DISAGREE (rtol {args.rtol:g}):", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        print(bar, file=sys.stderr)
        return 1
    print(f"all tools agree on the total weight to {args.rtol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
