"""Partitioned EMST study (issues 5 and 7): P boxes on W workers.

One run, one cloud (``emst_dask.datasets``, seed 0) written once as a Zarr
snapshot that the workers read (the client never scatters the points):

* the one-worker job (``emst(snapshot, client=...)``, the ordinary service
  path) as the reference time and tree;
* for every P in ``--partitions``: ``emst(snapshot, client=..., partitions=P)``
  timed from the call to the returned tree, with the job's report (rounds,
  bytes moved between workers, seconds per phase, per-box counts);
* exactness: n - 1 edges, an order-free hash of the edge set equal to the
  reference's, total weight equal, a sample of edge weights recomputed from
  the points in float64.

Writes JSON to ``benchmarks/results/partitions-<machine>.json``.

    python benchmarks/partitions.py --n 1000000 --workers 2 --backend cpu
    python benchmarks/partitions.py --n 100000000 --partitions 1,2,4,8   # GPU
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import emst_dask  # noqa: E402
from emst_dask import datasets  # noqa: E402
from emst_dask.service import EmbeddedCluster  # noqa: E402


def edge_hash(u, v) -> int:
    """Order-free 64-bit hash of an undirected edge set (splitmix64 sum)."""
    a = np.minimum(u, v).astype(np.uint64)
    b = np.maximum(u, v).astype(np.uint64)
    with np.errstate(over="ignore"):
        z = a * np.uint64(0x9E3779B97F4A7C15) ^ (b + np.uint64(0x632BE59BD9B4E019))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        return int(z.sum(dtype=np.uint64))


def sampled_weight_error(tree, pts, m=100_000, seed=1) -> float:
    rng = np.random.default_rng(seed)
    i = rng.integers(0, tree.n_edges, min(m, tree.n_edges))
    s, t = tree.source[i], tree.target[i]
    true = np.sqrt(((pts[s].astype(np.float64) - pts[t]) ** 2).sum(1))
    return float(np.max(np.abs(tree.weight[i] - true) / np.maximum(true, 1e-300)))


def device_name() -> str:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        return platform.processor() or platform.machine()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="halos")
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--partitions", default="1,2,3,4,8")
    ap.add_argument("--workers", type=int, default=None,
                    help="workers of the embedded cluster (default: one per GPU, else 2)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--min-samples", type=int, default=1)
    ap.add_argument("--chunk-rows", type=int, default=1 << 21)
    ap.add_argument("--dir", default=None, help="where the snapshot goes (default: a temp dir)")
    ap.add_argument("--machine", default=socket.gethostname())
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import zarr

    tmp = args.dir or tempfile.mkdtemp(prefix="emst-part-")
    snap = os.path.join(tmp, f"{args.dataset}{args.dim}d-{args.n}.zarr")
    t0 = time.perf_counter()
    pts = datasets.GENERATORS[args.dataset](args.n, args.dim, 0)
    t_gen = time.perf_counter() - t0
    if os.path.exists(snap):
        shutil.rmtree(snap)
    g = zarr.open_group(snap, mode="w-", zarr_format=3)
    g.create_array("points", shape=pts.shape, chunks=(min(args.chunk_rows, args.n), args.dim),
                   dtype=pts.dtype)[...] = pts
    print(f"generated {args.dataset} {args.n} x {args.dim} in {t_gen:.1f} s; snapshot {snap}",
          flush=True)

    Ps = [int(p) for p in args.partitions.split(",")]
    rows = []
    cl_kw = {}
    if args.workers:
        cl_kw["n_workers"] = args.workers
    elif args.backend == "cpu" or not emst_dask.kernels.cuda_available():
        cl_kw["n_workers"] = 2
    with EmbeddedCluster(backend=args.backend, **cl_kw) as emb:
        cl = emb.client
        n_workers = len(cl.scheduler_info(n_workers=-1)["workers"])
        # warm-up: JIT / kernel compilation on every worker, not timed
        warm = datasets.GENERATORS[args.dataset](20_000, args.dim, 1)
        emst_dask.emst(warm, client=cl, partitions=max(2, n_workers),
                       min_samples=args.min_samples, backend=args.backend)
        emst_dask.emst(warm, client=cl, min_samples=args.min_samples, backend=args.backend)

        t0 = time.perf_counter()
        ref = emst_dask.emst(snap, client=cl, min_samples=args.min_samples,
                             backend=args.backend)
        t_ref = time.perf_counter() - t0
        ref_hash = edge_hash(ref.source, ref.target)
        print(f"one worker (service path): {t_ref:.2f} s, total {ref.total_weight!r}",
              flush=True)
        rows.append(dict(mode="single", partitions=1, seconds=t_ref,
                         total_weight=ref.total_weight, n_edges=ref.n_edges,
                         timings=ref.timings))
        for P in Ps:
            t0 = time.perf_counter()
            tree = emst_dask.emst(snap, client=cl, partitions=P, min_samples=args.min_samples,
                                  backend=args.backend)
            secs = time.perf_counter() - t0
            rep = tree.report.as_dict()
            same = edge_hash(tree.source, tree.target) == ref_hash
            row = dict(mode="partitioned", partitions=P, seconds=secs,
                       total_weight=tree.total_weight, n_edges=tree.n_edges,
                       same_edge_set_as_single=same,
                       max_rel_weight_error_sampled=sampled_weight_error(tree, pts)
                       if args.min_samples == 1 else None,
                       report=rep)
            rows.append(row)
            print(f"P={P}: {secs:.2f} s, rounds {rep['rounds']}, exchanges {rep['exchanges']}, "
                  f"moved {rep['total_bytes_moved'] / 1e6:.1f} MB {rep['bytes_moved']}, "
                  f"super-vertices {rep['n_super_vertices']}, same edges {same}, "
                  f"seconds { {k: round(v, 3) for k, v in rep['seconds'].items()} }",
                  flush=True)
            assert tree.n_edges == args.n - 1
            assert same, f"P={P}: edge set differs from the one-worker tree"
            assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-9)
            del tree
    out = dict(benchmark="partitions", date=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               machine=args.machine, device=device_name(), host=platform.node(),
               cpus=os.cpu_count(), dataset=args.dataset, d=args.dim, n=args.n, seed=0,
               dtype=str(pts.dtype), min_samples=args.min_samples, workers=n_workers,
               cluster=emb.kind, generation_seconds=t_gen, rows=rows,
               version=emst_dask.__version__)
    path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                    f"partitions-{args.machine}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=float)
    print("wrote", path)
    if not args.dir:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
