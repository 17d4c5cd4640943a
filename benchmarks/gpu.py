"""The CUDA backend against the paper's reference implementation (issue 3).

For every row of the issue's table: the EMST of the shared dataset (seed 0),
points already on the device to edges on the device, median of ``--repeats``
timed runs after warm-up runs of at least ``WARM_SECONDS`` (device
synchronised around each run; the peer's driver warms the same way); our own
floor on the same data (LBVH build plus one nearest-other-point query for
every point); the peak device memory the call allocates (CuPy memory pool,
allocations minus frees, the input excluded); per-phase times of one run
with the engine's synchronising timers; per-iteration times of one traced
run.  Writes JSON (device, driver, CuPy version, every number) and prints a
markdown table.

    python benchmarks/gpu.py                       # the whole table
    python benchmarks/gpu.py --rows 0,1 --scale 0.01 --repeats 3   # smoke test
    python benchmarks/gpu.py --rows ties --kernels cpu --scale 0.1  # the ties rows, numba
    python benchmarks/gpu.py --reference build/driver/arborx_emst --out h200.json

``--reference`` names the peer's driver (``benchmarks/peers/``, built by
``build-arborx.sh``): every row then also times the peer on the same cloud
and the same GPU, right after ours, and checks its total weight against
ours; without it the rows carry the peer's H100 figures of issue 3 (ROWS
only).

The ties rows (``TIES_ROWS``, ``--rows ties``) are clouds of
``emst_dask.datasets.TIES``: an integer lattice with about two points per
site, GPS-like tracks quantised to 1e-5, and m uniform sites with k = 4
and k = 16 copies each beside the uniform cloud of their m sites (the
collapse of duplicates should make them cost about what m points cost plus
a pass over n).  ``--no-collapse`` runs the engine on the whole cloud (the
engine before the collapse, for before/after figures).  ``--rows kinds``:
a clustered plane (2-D halos) and the cosmic-web snapshot at min_samples
1 and 16 (``KINDS_ROWS``); ``--rows contrast``: clumps a billion times
denser than their surroundings and narrower than a code cell
(``CONTRAST_ROWS``).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emst_dask import engine  # noqa: E402

from emst_dask import datasets  # noqa: E402
from emst_dask.engine.duplicates import MIN_FRACTION_KEY  # noqa: E402

#: (dataset, n, d, min_samples, reference seconds, reference floor seconds);
#: the reference: ArborX 2.1.99 + Kokkos 4.6.1 on the same H100 (issue 3)
ROWS = [
    ("uniform", 10_000_000, 3, 1, 0.0688, 0.0132),
    ("halos", 10_000_000, 3, 1, 0.0568, 0.0131),
    ("halos", 37_000_000, 3, 1, 0.2085, 0.0439),
    ("uniform", 100_000_000, 3, 1, 0.7396, 0.1166),
    ("normal", 100_000_000, 3, 1, 0.6325, 0.1195),
    ("uniform", 100_000_000, 2, 1, 0.4673, 0.0878),
    ("uniform", 10_000_000, 3, 16, 0.1672, None),
    ("halos", 10_000_000, 3, 16, 0.1354, None),
]
#: clouds with ties (``datasets.TIES``), no reference figure yet; the
#: uniform rows are the k-copies rows' m sites alone
TIES_ROWS = [
    ("lattice", 10_000_000, 3, 1, None, None),
    ("tracks", 10_000_000, 3, 1, None, None),
    ("copies4", 10_000_000, 3, 1, None, None),
    ("uniform", 2_500_000, 3, 1, None, None),
    ("copies16", 10_000_000, 3, 1, None, None),
    ("uniform", 625_000, 3, 1, None, None),
]
#: clouds of the other kinds users bring (``--rows kinds``): a clustered
#: plane, and the cosmic-web snapshot at min_samples 1 and 16; no
#: reference figure on these generators yet
KINDS_ROWS = [
    ("halos", 10_000_000, 2, 1, None, None),
    ("cosmic", 10_000_000, 3, 1, None, None),
    ("cosmic", 10_000_000, 3, 16, None, None),
]
#: density contrast (``--rows contrast``): half the points uniform in the
#: unit cube, half in a Gaussian clump of width 1e-3 (about a billion times
#: denser) or 1e-7 (inside one cell of the Morton codes, a few float32
#: ulps wide: crowded cells and many duplicates)
CONTRAST_ROWS = [
    ("clump1e-3", 10_000_000, 3, 1, None, None),
    ("clump1e-7", 10_000_000, 3, 1, None, None),
]
ALL_ROWS = ROWS + TIES_ROWS + KINDS_ROWS + CONTRAST_ROWS
#: the CUDA kernels emulated on the CPU (``--kernels emulated``): the peak
#: is the emulated pool's (``tests/pool_emu.py``), labelled as emulated
_EMULATED = False


def clump(width):
    """A generator: half uniform in the unit cube, half a Gaussian clump of
    ``width`` at its centre, float32, rows shuffled."""
    def make(n, dim=3, seed=0):
        rng = np.random.default_rng(seed)
        half = n // 2
        x = np.concatenate([rng.random((half, dim)),
                            0.5 + width * rng.standard_normal((n - half, dim))])
        return x[rng.permutation(n)].astype(np.float32)
    return make


CLOUDS = {**datasets.GENERATORS, **datasets.TIES,
          "clump1e-3": clump(1e-3), "clump1e-7": clump(1e-7)}


def _generate(name, n, d, path):
    x = CLOUDS[name](n, dim=d, seed=0)
    np.save(path, x)
    return path


class PeakHook:
    """CuPy memory hook: bytes handed out by the pool minus bytes returned."""

    def __new__(cls):
        import cupy

        class _Peak(cupy.cuda.MemoryHook):
            name = "PeakHook"

            def __init__(self):
                self.cur = 0
                self.peak = 0

            def malloc_postprocess(self, **kw):
                self.cur += kw["mem_size"]
                if self.cur > self.peak:
                    self.peak = self.cur

            def free_postprocess(self, **kw):
                self.cur -= kw["mem_size"]

        return _Peak()


#: seconds of warm-up calls before a row is timed: a small cloud's call is
#: shorter than the clocks' ramp from idle (the peer's driver does the same)
WARM_SECONDS = 0.25


def _warm(fn, sync):
    """Call ``fn`` until ``WARM_SECONDS`` have passed (at least once)."""
    sync()
    start = time.perf_counter()
    while True:
        fn()
        sync()
        if time.perf_counter() - start >= WARM_SECONDS:
            return


def _timed(fn, sync, repeats):
    out = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return out


def traced_run(K, pts, min_samples):
    """The engine's loop with a synchronised timer per phase and iteration."""
    sync = K.synchronize
    n = pts.shape[0]
    per_iter = []
    sync()
    t0 = time.perf_counter()
    bvh = engine.construct_bvh(K, pts, engine.Timers(enabled=False))
    sync()
    t_build = time.perf_counter() - t0
    mrd = min_samples > 1
    t0 = time.perf_counter()
    core2 = K.compute_core_distances(bvh, min_samples) if mrd else K.xp.zeros(n, pts.dtype)
    s = K.init_boruvka(bvh, core2, mrd)
    sync()
    t_core = time.perf_counter() - t0
    edges = 0
    while edges < n - 1:
        row = {}
        for ph in ("reduce_labels", "compute_upper_bounds", "find_component_outgoing_edges",
                   "reduce_component_minima"):
            t = time.perf_counter()
            getattr(K, ph)(bvh, s)
            sync()
            row[ph] = time.perf_counter() - t
        t = time.perf_counter()
        new = K.merge_components(bvh, s)
        row["merge_components"] = time.perf_counter() - t
        row["components_after"] = n - new
        if hasattr(s, "cl"):  # a certified candidate j is held as ~j
            row["certified"] = int((s.cl < 0).sum()) if s.cl is not None else None
        edges = new
        per_iter.append(row)
    K.finalize_edges(bvh, s)
    return {"build": t_build, "core_or_init": t_core, "iterations": per_iter}


def bench_row(K, row, path, repeats, do_floor=True, do_trace=True):
    xp = K.xp
    on_gpu = xp.__name__ == "cupy"

    name, n, d, ms, ref, ref_floor = row
    sync = K.synchronize
    host = np.load(path)
    n = host.shape[0]
    pts = xp.asarray(host)
    del host
    pool = xp.get_default_memory_pool() if on_gpu else None
    out = {"dataset": name, "n": n, "d": d, "min_samples": ms,
           "reference_seconds": ref, "reference_floor_seconds": ref_floor}

    def run():
        return engine.boruvka(K, pts, ms, timers=engine.Timers(enabled=False))

    res = run()  # warm-up (compiles on the first row of a kind)
    w = xp.sqrt(res.weight2.astype(np.float64))
    out["total_weight_scaled"] = float(w.sum())
    out["total_weight"] = float(np.ldexp(out["total_weight_scaled"], -res.exponent))
    out["n_edges"] = int(res.source.shape[0])
    assert out["n_edges"] == n - 1
    out["iterations"] = res.iterations
    out["components"] = res.components
    del res, w

    _warm(run, sync)
    times = _timed(run, sync, repeats)
    out["seconds_all"] = times
    out["seconds"] = statistics.median(times)
    out["mfeatures_per_s"] = n * d / out["seconds"] / 1e6

    # per phase (synchronising timers: one extra sync per phase)
    res = engine.boruvka(K, pts, ms, timers=engine.Timers(sync=sync))
    out["phases"] = res.timings
    del res

    # the engine's own host round trips before the tree: min/max of the points
    def bounds():
        K.to_host(pts.min(axis=0))
        K.to_host(pts.max(axis=0))
    out["bounds_seconds"] = statistics.median(_timed(bounds, sync, 3))

    if do_floor and hasattr(K, "nearest_other_point"):  # the CPU set has no such query
        def floor():
            bvh = engine.construct_bvh(K, pts, engine.Timers(enabled=False))
            K.nearest_other_point(bvh)
        _warm(floor, sync)
        ft = _timed(floor, sync, repeats)
        out["floor_seconds_all"] = ft
        out["floor_seconds"] = statistics.median(ft)
        out["over_floor"] = out["seconds"] / out["floor_seconds"]

    # peak device memory of one call, the input excluded
    if on_gpu:
        pool.free_all_blocks()
        hook = PeakHook()
        with hook:
            res = run()
            del res
        out["peak_bytes"] = hook.peak
        out["peak_bytes_per_point"] = hook.peak / n
        out["pool_total_bytes_after"] = pool.total_bytes()
    elif _EMULATED:  # the emulated kernels' arrays, counted as CuPy's pool would
        from pool_emu import PoolTracker, track_engine_phases

        with PoolTracker() as tracker, track_engine_phases(tracker):
            res = run()
            del res
        out["peak_bytes"] = tracker.peak
        out["peak_bytes_per_point"] = tracker.peak / n
        out["peak_emulated"] = tracker.summary(n)
    else:  # numpy's allocations (tracemalloc sees them; numba's own do not count)
        import tracemalloc

        tracemalloc.start()
        res = run()
        del res
        out["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        out["peak_bytes_per_point"] = out["peak_bytes"] / n
        tracemalloc.stop()
    out["input_bytes_per_point"] = pts.nbytes / n

    # one traced run: per-iteration phase times (of the whole cloud: the
    # trace does not collapse duplicates)
    try:
        if do_trace:
            out["trace"] = traced_run(K, pts, ms)
    except Exception as e:  # the trace is diagnostics only
        out["trace_error"] = repr(e)

    out["speedup_vs_reference"] = ref / out["seconds"] if ref else None
    del pts
    if on_gpu:
        pool.free_all_blocks()
    return out


def reference_row(driver, path, min_samples, repeats, ours, timeout=240.0):
    """The peer's driver on the row's cloud: its time, floor and total weight.

    Parameters
    ----------
    driver : str, path of ``arborx_emst``.
    path : str, the row's ``.npy`` cloud.
    min_samples, repeats : int
    ours : dict, our row (``total_weight`` read).
    timeout : float, seconds before the peer is stopped (an error).

    Returns
    -------
    dict of ``reference_*`` fields; ``reference_total_relative_difference``
    is |theirs - ours| / ours (the peer's weights are float32 distances).
    """
    done = subprocess.run([driver, path, str(min_samples), str(repeats)],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{driver} exited {done.returncode}: {done.stderr[-2000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    r = json.loads(lines[-1])
    n = r["n"]
    return {"reference_library": r["library"], "reference_measured": True,
            "reference_seconds": r["seconds"], "reference_seconds_all": r["seconds_all"],
            "reference_floor_seconds": r["floor_seconds"],
            "reference_total_weight": r["total_weight"],
            "reference_total_relative_difference":
                abs(r["total_weight"] - ours["total_weight"]) / ours["total_weight"],
            "reference_edges": r["n_edges"],
            "reference_peak_bytes_per_point_kokkos": r["peak_bytes_kokkos"] / n}


def device_info():
    try:
        import cupy
    except ImportError:
        return {"device": "none (emulated)", "cupy": None}
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else name
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except Exception:
        smi = None
    return {"device": name, "nvidia_smi": smi,
            "driver_version": cupy.cuda.runtime.driverGetVersion(),
            "runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
            "cupy": cupy.__version__, "numpy": np.__version__,
            "python": platform.python_version(),
            "multiprocessors": props["multiProcessorCount"],
            "l2_bytes": props["l2CacheSize"]}


def markdown(results, info):
    lines = [f"Device: {info['device']} ({info.get('nvidia_smi')}), CuPy {info['cupy']}", "",
             "| dataset | n | d | min_samples | ours (s) | our floor (s) | ours/floor | "
             "reference (s) | ref floor (s) | speed-up vs ref | MFeatures/s | peak B/pt | iterations |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['dataset']} | {r['n']} | {r['d']} | {r['min_samples']} | "
                         f"error: {r['error'][:60]} |||||||||")
            continue
        def fmt(v, spec):
            return "" if v is None else format(v, spec)
        lines.append(
            f"| {r['dataset']} | {r['n'] / 1e6:g}M | {r['d']} | {r['min_samples']} | "
            f"{r['seconds']:.4f} | {fmt(r.get('floor_seconds'), '.4f')} | "
            f"{fmt(r.get('over_floor'), '.2f')} | {fmt(r['reference_seconds'], '.4f')} | "
            f"{fmt(r['reference_floor_seconds'], '.4f')} | "
            f"{fmt(r['speedup_vs_reference'], '.2f')}{'x' if r['speedup_vs_reference'] else ''} | "
            f"{r['mfeatures_per_s']:.0f} | "
            f"{fmt(r.get('peak_bytes_per_point'), '.1f')} | {r['iterations']} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default=None,
                   help="comma-separated row indices of ALL_ROWS, or 'ties', 'kinds' or "
                        "'contrast' (default: all)")
    p.add_argument("--kernels", default="cuda", choices=["cuda", "cpu", "emulated"],
                   help="the CUDA kernel set, the CPU (numba) one, or the CUDA kernels "
                        "emulated on the CPU (EMST_BENCH_EMULATE=1 too)")
    p.add_argument("--no-collapse", action="store_true",
                   help="do not collapse exact duplicates (the engine on the whole cloud)")
    p.add_argument("--no-floor", action="store_true", help="skip our floor")
    p.add_argument("--no-trace", action="store_true", help="skip the per-iteration trace")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every n (smoke tests)")
    p.add_argument("--out", default=None,
                   help="results file (default results/h100.json; results/ties-KERNELS.json "
                        "for --kernels cpu or emulated)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--reference", default=None,
                   help="the peer's driver (benchmarks/peers/build-arborx.sh): time it on "
                        "every row's cloud on the same GPU")
    p.add_argument("--reference-timeout", type=float, default=240.0,
                   help="seconds the peer gets a row before it is recorded as not finished")
    a = p.parse_args()

    if a.kernels == "emulated" or os.environ.get("EMST_BENCH_EMULATE"):
        # smoke test of this script without a GPU
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
        from cuda_emu import emulated_kernels
        K = emulated_kernels()
        global _EMULATED
        _EMULATED = True
    elif a.kernels == "cpu":
        from emst_dask.kernels import get_kernels
        K = get_kernels("cpu")
    else:
        from emst_dask.kernels.cuda.kernel_set import CudaKernels as K
    if a.no_collapse:
        import dask.config
        dask.config.set({MIN_FRACTION_KEY: 2.0})

    if a.rows == "ties":
        rows = list(TIES_ROWS)
    elif a.rows == "kinds":
        rows = list(KINDS_ROWS)
    elif a.rows == "contrast":
        rows = list(CONTRAST_ROWS)
    else:
        rows = [ALL_ROWS[int(i)] for i in a.rows.split(",")] if a.rows else list(ALL_ROWS)
    rows = [(nm, max(2, int(n * a.scale)), d, ms, ref, rf) for nm, n, d, ms, ref, rf in rows]
    data_dir = a.data_dir or tempfile.mkdtemp(prefix="emst_bench_")
    # generate every distinct dataset once, in parallel processes, while the
    # first rows already run
    keys = []
    for nm, n, d, *_ in rows:
        if (nm, n, d) not in keys:
            keys.append((nm, n, d))
    pool = cf.ProcessPoolExecutor(max_workers=min(a.workers, len(keys)))
    futures = {k: pool.submit(_generate, k[0], k[1], k[2],
                              os.path.join(data_dir, f"{k[0]}_{k[1]}_{k[2]}.npy")) for k in keys}
    info = device_info() if a.kernels != "cpu" else {
        "device": f"CPU ({platform.processor() or platform.machine()}, "
                  f"{os.cpu_count()} cores), numba kernels", "cupy": None}
    results = []
    for row in rows:
        path = futures[(row[0], row[1], row[2])].result()
        t = time.perf_counter()
        try:
            r = bench_row(K, row, path, a.repeats, do_floor=not a.no_floor,
                          do_trace=not a.no_trace)
            r["collapse_duplicates"] = not a.no_collapse
            r["kernels"] = a.kernels
            if a.reference:
                if r["reference_seconds"] is not None:  # issue 3's H100 figures
                    r["reference_seconds_h100_issue"] = r["reference_seconds"]
                    r["reference_floor_seconds_h100_issue"] = r["reference_floor_seconds"]
                try:
                    r.update(reference_row(a.reference, path, row[3], a.repeats, r,
                                           a.reference_timeout))
                    r["speedup_vs_reference"] = r["reference_seconds"] / r["seconds"]
                except Exception as e:  # keep our row
                    r["reference_error"] = repr(e)
                    r["reference_seconds"] = r["reference_floor_seconds"] = None
                    r["speedup_vs_reference"] = None
        except Exception as e:  # keep the other rows
            import traceback
            traceback.print_exc()
            r = {"dataset": row[0], "n": row[1], "d": row[2], "min_samples": row[3],
                 "error": repr(e)}
        r["wall_seconds_for_row"] = time.perf_counter() - t
        results.append(r)
        print(json.dumps({k: v for k, v in r.items() if k not in ("trace", "phases")}),
              flush=True)
    pool.shutdown()
    if a.out is None:
        a.out = os.path.join(os.path.dirname(__file__), "results",
                             "h100.json" if a.kernels == "cuda" else f"ties-{a.kernels}.json")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"info": info, "repeats": a.repeats, "scale": a.scale,
                   "kernels": a.kernels, "collapse_duplicates": not a.no_collapse,
                   "rows": results},
                  f, indent=1)
    print()
    print(markdown(results, info))


if __name__ == "__main__":
    main()
