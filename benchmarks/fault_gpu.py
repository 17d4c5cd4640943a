"""A worker killed mid-job on GPU workers: the time the restart costs (issue 6).

Two worker processes (with nannies) on this machine, the CUDA backend on
both; ``--same-gpu`` lets both use GPU 0 (a stand-in where only one GPU is
lent).  The halos cloud (3-D, seed 0) as a Zarr v3 snapshot; first an
undisturbed job (``emst(snapshot, out=edges.zarr)``), then the same job with
the worker process that runs it killed (SIGKILL; its nanny, which lives in
this process, may start a fresh one) as soon as its
Borůvka iterations start.  The job must finish on the other worker with the
same tree (n - 1 edges, same total weight, sampled weights recomputed); the
time lost is (killed job) - (undisturbed job).  JSON to
``benchmarks/results/fault-<machine>.json``.

    python benchmarks/fault_gpu.py --n 100000000 --same-gpu --machine h100
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import emst_dask  # noqa: E402
from emst_dask import datasets  # noqa: E402
from emst_dask import submit  # noqa: E402
from emst_dask.io.edge_store import open_edges  # noqa: E402


def _kill(client, address):
    import psutil

    pid = client.run(os.getpid)[address]
    nanny = psutil.Process(pid).ppid()
    if nanny != os.getpid():  # a LocalCluster's nannies live in this process
        os.kill(nanny, signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--chunk-rows", type=int, default=1 << 21)
    ap.add_argument("--same-gpu", action="store_true")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--machine", default=socket.gethostname())
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import zarr
    from distributed import Client, LocalCluster

    tmp = tempfile.mkdtemp(prefix="emst-fault-")
    snap = os.path.join(tmp, "halos.zarr")
    pts = datasets.halos(args.n, 3, 0)
    g = zarr.open_group(snap, mode="w-", zarr_format=3)
    g.create_array("points", shape=pts.shape, chunks=(args.chunk_rows, 3),
                   dtype=pts.dtype)[...] = pts
    if args.same_gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        warm = datasets.halos(100_000, 3, 1)
        for w in client.scheduler_info()["workers"]:
            client.submit(emst_dask.emst, warm, backend=args.backend, workers=[w],
                          pure=False).result()
        t0 = time.monotonic()
        base_store = emst_dask.emst(snap, client=client, out=os.path.join(tmp, "base.zarr"),
                                    backend=args.backend)
        base = time.monotonic() - t0
        ref = open_edges(base_store).load()
        print(f"undisturbed: {base:.2f} s, total {ref.total_weight!r}", flush=True)

        out = os.path.join(tmp, "edges.zarr")
        t0 = time.monotonic()
        job = submit(snap, out=out, client=client, name="fault-gpu", backend=args.backend)
        while True:
            evs = job.events()
            if any(e["phase"] == "iteration" for e in evs):
                break
            time.sleep(0.01)
        first = [e for e in evs if e["phase"] == "start"][0]["worker"]
        _kill(client, first)
        t_kill = time.monotonic() - t0
        kill_wall = time.time()
        store = job.result(timeout=600)
        total = time.monotonic() - t0
        starts = [e for e in job.events() if e["phase"] == "start"]
        tree = open_edges(store).load()
        assert tree.n_edges == args.n - 1
        assert starts[-1]["worker"] != first
        assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-9), \
            (tree.total_weight, ref.total_weight)
        i = np.random.default_rng(0).integers(0, tree.n_edges, 100_000)
        true = np.sqrt(((pts[tree.source[i]].astype(np.float64) - pts[tree.target[i]]) ** 2)
                       .sum(1))
        err = float(np.max(np.abs(tree.weight[i] - true) / np.maximum(true, 1e-300)))
        assert err < 1e-6, err
        row = dict(undisturbed_seconds=base, killed_at_seconds=t_kill,
                   rerun_started_after_kill_seconds=starts[-1]["time"] - kill_wall,
                   killed_job_seconds=total, seconds_lost=total - base,
                   same_total_weight=True, max_rel_weight_error_sampled=err,
                   total_weight=tree.total_weight)
        print(json.dumps(row, indent=1), flush=True)
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res = dict(benchmark="fault", machine=args.machine, n=args.n, dataset="halos", d=3,
               seed=0, workers=2, same_gpu=args.same_gpu, backend=args.backend,
               date=time.strftime("%Y-%m-%dT%H:%M:%S%z"), **row)
    path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                    f"fault-{args.machine}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
