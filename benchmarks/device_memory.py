"""Device memory per phase: the peak bytes in use in CuPy's memory pool
during each engine and extraction phase (beyond what was held before),
with the package's source lines at each phase's peak.

    python benchmarks/device_memory.py --n 100e6 --out devmem.json

Runs ``HDBSCAN(100, 10).fit(X)`` and ``emst(X).linkage()`` on halos (3-D
float32, points on the device) after a small warm-up fit.  A phase ends
where the engine's and the products' timers end one (``Timers.stop``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    import cupy
    from cupy.cuda import memory_hook

    from emst_dask import HDBSCAN, datasets, emst
    from emst_dask.engine.boruvka import Timers

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=100_000_000)
    p.add_argument("--out", default="device-memory.json")
    a = p.parse_args()
    pool = cupy.get_default_memory_pool()

    class Peak(memory_hook.MemoryHook):
        """The pool's bytes in use at its peak within each phase."""

        name = "peak"

        def __init__(self):
            self.base, self.phases, self.cur = 0, [], {"peak": 0, "where": None}

        def malloc_postprocess(self, **kw):
            used = pool.used_bytes() - self.base
            if used > self.cur["peak"]:
                where = [f"{f.filename.split('emst_dask/')[-1]}:{f.lineno}"
                         for f in traceback.extract_stack() if "emst_dask" in f.filename]
                self.cur = {"peak": used, "where": where[-5:]}

        def mark(self, phase):
            self.cur.update(phase=phase, held_after=pool.used_bytes() - self.base)
            self.phases.append(self.cur)
            self.cur = {"peak": 0, "where": None}

    hook = Peak()
    stop = Timers.stop

    def marking_stop(self, name):
        stop(self, name)
        hook.mark(name)

    Timers.stop = marking_stop
    X = cupy.asarray(datasets.halos(a.n, 3, 0))
    HDBSCAN(min_cluster_size=100, min_samples=10, backend="cuda").fit(
        cupy.asarray(datasets.halos(100_000, 3, 1)))
    res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "n": a.n,
           "dataset": "halos", "d": 3, "dtype": "float32"}
    runs = {"hdbscan_fit": lambda: HDBSCAN(min_cluster_size=100, min_samples=10,
                                           backend="cuda").fit(X),
            "emst_then_linkage": lambda: emst(X, backend="cuda").linkage()}
    for label, fn in runs.items():
        pool.free_all_blocks()
        hook.base, hook.phases, hook.cur = pool.used_bytes(), [], {"peak": 0, "where": None}
        t0 = time.perf_counter()
        with hook:
            out = fn()
            cupy.cuda.Device().synchronize()
        hook.mark("end")
        res[label] = {"seconds": time.perf_counter() - t0, "phases": hook.phases,
                      "pool_total_bytes_per_point": (pool.total_bytes() - hook.base) / a.n}
        del out
        print(label, f"{res[label]['seconds']:.3f} s")
        worst = {}
        for ph in hook.phases:  # a phase repeated (Borůvka's iterations): its worst
            if ph["peak"] >= worst.get(ph["phase"], {"peak": -1})["peak"]:
                worst[ph["phase"]] = ph
        for name, ph in worst.items():
            where = " <- ".join(list(reversed(ph["where"] or []))[:3])
            print(f"  {name:30s} peak {ph['peak'] / a.n:7.1f} B/point  {where}")
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
