"""Before/after figures of the collapse of exact duplicates on the CPU.

For each cloud (``datasets.TIES`` and the uniform clouds of the k-copies
clouds' m sites), ``engine.boruvka`` on the CPU kernels with the collapse
off (``emst_dask.engine.duplicates-min-fraction`` = 2) and on (the
default), the two interleaved run by run so that a loaded machine hurts
both alike; after a warm-up of each, median and minimum of ``--repeats``.

    NUMBA_NUM_THREADS=1 python benchmarks/duplicates_cpu.py --n 1000000 --repeats 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import dask.config
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emst_dask import datasets, engine  # noqa: E402
from emst_dask.engine.duplicates import MIN_FRACTION, MIN_FRACTION_KEY  # noqa: E402
from emst_dask.kernels import get_kernels  # noqa: E402

MODES = (("before", 2.0), ("after", MIN_FRACTION))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    K = get_kernels("cpu")
    clouds = {**datasets.GENERATORS, **datasets.TIES}
    n = a.n
    rows = [("lattice", n), ("tracks", n), ("copies4", n), ("uniform", n // 4),
            ("copies16", n), ("uniform", n // 16), ("uniform", n)]
    print("| cloud | n | distinct | before (s) | after (s) | duplicates phase (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, size in rows:
        x = clouds[name](size, 3, 0)
        distinct = np.unique(x, axis=0).shape[0]
        times = {mode: [] for mode, _ in MODES}
        for rep in range(a.repeats + 1):  # the first round warms up
            for mode, fraction in MODES:
                with dask.config.set({MIN_FRACTION_KEY: fraction}):
                    t = time.perf_counter()
                    engine.boruvka(K, x, 1, timers=engine.Timers(enabled=False))
                    if rep:
                        times[mode].append(time.perf_counter() - t)
        phases = engine.boruvka(K, x, 1).timings
        print(f"| {name} | {size:,} | {distinct:,} | {statistics.median(times['before']):.3f} | "
              f"{statistics.median(times['after']):.3f} | {phases.get('duplicates', 0.0):.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
