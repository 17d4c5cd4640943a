"""Where a one-worker service job's wall time goes, task by task.

Generates a halos snapshot (Zarr v3), runs ``emst(snapshot, client=...,
out=...)`` on an embedded cluster a few times and prints, per job, the
client's wall time, the worker's task stream (each task's start and stop
relative to the call) and the gaps between them, and the client-side
profile of the last job (cProfile, top functions by cumulative time).

    python benchmarks/service_profile.py --n 50e6 [--backend cuda]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emst_dask import EmbeddedCluster, datasets  # noqa: E402
from emst_dask.distributed.service import emst as service_emst  # noqa: E402
from emst_dask.io.snapshot import write_points  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=50_000_000)
    p.add_argument("--chunk-rows", type=lambda s: int(float(s)), default=1_000_000)
    p.add_argument("--backend", default="auto")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="emst-profile-")
    snap, out = os.path.join(work, "snap.zarr"), os.path.join(work, "edges.zarr")
    t0 = time.perf_counter()
    write_points(snap, datasets.halos(a.n, 3, 0), chunk_rows=a.chunk_rows)
    print(f"snapshot {a.n} points: {time.perf_counter() - t0:.1f} s", flush=True)
    with EmbeddedCluster(n_workers=1, backend=a.backend) as emb:
        cl = emb.client
        service_emst(snap, client=cl, out=out, overwrite=True)  # warm-up
        for r in range(a.repeats):
            prof = cProfile.Profile() if r == a.repeats - 1 else None
            cl.get_task_stream()  # drop what came before
            t0 = time.time()
            if prof:
                prof.enable()
            st = service_emst(snap, client=cl, out=out, overwrite=True)
            if prof:
                prof.disable()
            wall = time.time() - t0
            stream = sorted(cl.get_task_stream(), key=lambda e: e["startstops"][0]["start"])
            print(f"job {r}: {wall:.2f} s; worker timings "
                  + ", ".join(f"{k} {v:.2f}" for k, v in st.attrs["timings"].items()
                              if k in ("read", "emst", "write", "write_all", "total_weight")))
            last = 0.0
            for e in stream:
                for ss in e["startstops"]:
                    s, f = ss["start"] - t0, ss["stop"] - t0
                    print(f"   {str(e['key'])[:40]:<40s} {ss['action']:<9s} {s:6.2f} -> {f:6.2f}"
                          f"  (gap {s - last:5.2f})")
                    last = f
            print(f"   after the last task: {wall - last:.2f} s", flush=True)
            if prof:
                s = io.StringIO()
                pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
                print(s.getvalue()[:6000])


if __name__ == "__main__":
    main()
