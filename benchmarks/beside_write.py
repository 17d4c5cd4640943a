"""A box's phase 1 alone and beside another box's write, in one process on
one GPU: what one GPU worker with P boxes pays when box b's edges are
written while box b + 1 is solved.

    python benchmarks/beside_write.py --box 500000000   # writes $OUT/beside-write.json

Box A is solved (its certified edges kept on the device, as a GPU
worker's phase 1 keeps them); then box B is solved alone twice, and then
beside a thread that writes A's certified edges into an edge store the way
the partitioned job's box writer does (niced, from the device through
pinned buffers), and beside one that writes the same edges from host
memory (no device work in the writer: only the host's cores and the
interpreter are shared).  The two "beside" rows tell the device's share of
the slowdown from the host's.
"""
import argparse
import json
import os
import shutil
import tempfile
import threading
import time

import numpy as np

from emst_dask.arrays import to_host
from emst_dask.distributed.partitioned_output import (BESIDE_NICE, _write_box,
                                                      lower_thread_priority)
from emst_dask.io.output import resolve_output
from emst_dask.io.shared_store import create_shared_store, write_shared_rows
from emst_dask.partitioned.phase1 import solve_box

ap = argparse.ArgumentParser()
ap.add_argument("--box", type=int, default=500_000_000)
ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
ap.add_argument("--dir", default=None)
opts = ap.parse_args()
if opts.backend == "cuda":
    import cupy as xp

    def sync():
        xp.cuda.Device().synchronize()

    def pool():
        return int(xp.get_default_memory_pool().total_bytes())
else:
    xp = np

    def sync():
        pass

    def pool():
        return 0

n = opts.box
tmp = tempfile.mkdtemp(dir=opts.dir)
out = dict(benchmark="beside_write", date=time.strftime("%Y-%m-%d"), box_points=n,
           backend=opts.backend, rows=[])
if opts.backend == "cuda":
    out["device"] = xp.cuda.runtime.getDeviceProperties(0)["name"].decode()


def make_box(seed):
    pts = xp.random.default_rng(seed).random((n, 3), dtype=xp.float32)
    pts[:, 0] *= 0.5
    face = 0.5 - pts[:, 0].astype(xp.float64)   # one shared face at x = 0.5
    return pts, xp.arange(n, dtype=xp.int64), face


def solve(box):
    sync()
    t = time.perf_counter()
    res = solve_box(*box, opts.backend)
    sync()
    return res, time.perf_counter() - t


def writer(edges, on_device, times, where):
    lower_thread_priority(BESIDE_NICE)
    store = create_shared_store(resolve_output(os.path.join(where, "e.zarr")),
                                len(edges.u) + 1, np.float32)
    t = time.perf_counter()
    if on_device:
        _write_box((store, 0.0), [type("S", (), {"certified": edges})], 0, "<f4", 0)
    else:
        write_shared_rows(store, 0, edges.u, edges.v, edges.w2)
    times.append(time.perf_counter() - t)


box_a = make_box(1)
res_a, t_a = solve(box_a)
del box_a
print("box A", t_a, flush=True)
certified = res_a.certified
del res_a
box_b = make_box(2)
for name, beside in (("alone, first", None), ("alone", None), ("beside a device write", True),
                     ("beside a host write", False), ("alone, after", None)):
    edges = certified
    if beside is False:
        edges = type(certified)(*(to_host(a) if a is not None else None
                                  for a in (certified.u, certified.v, certified.w2,
                                            certified.su, certified.sv)))
    times = []
    th = None
    where = tempfile.mkdtemp(dir=tmp)
    if beside is not None:
        th = threading.Thread(target=writer, args=(edges, beside, times, where))
        th.start()
        time.sleep(0.2)   # the writer under way, as box b's write is when b + 1 begins
    res, t = solve(box_b)
    t_end = time.perf_counter()
    if th is not None:
        th.join()
    row = dict(run=name, solve_s=t, steps={k: round(v, 4) for k, v in res.seconds.items()
                                           if "." not in k},
               write_s=times[0] if times else None,
               write_left_after_solve_s=(time.perf_counter() - t_end) if th else None,
               pool_bytes=pool())
    out["rows"].append(row)
    print(row, flush=True)
    del res, edges
    shutil.rmtree(where, ignore_errors=True)   # the store, unfinished: its temporary
shutil.rmtree(tmp, ignore_errors=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "beside-write.json"), "w"),
          indent=1)
