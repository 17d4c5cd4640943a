"""Partitioned EMST study (issues 5 and 7): P boxes on W workers.

One run, one cloud (``emst_dask.datasets``, seed 0) written once as a Zarr
snapshot that the workers read (the client never scatters the points):

* the one-worker job (``emst(snapshot, client=...)``, the ordinary service
  path) as the reference time and tree;
* for every P in ``--partitions``: ``emst(snapshot, client=..., partitions=P)``
  timed from the call to the returned tree, with the job's report (rounds,
  bytes moved between workers, seconds per phase, per-box counts);
* exactness: a spanning tree (n - 1 edges, union-find finds no cycle), an
  order-free hash of the edge set equal to the first run's, total weight
  equal, a sample of edge weights recomputed from the points in float64.

``--runs 1:single,1:1,2:2`` runs on clusters of 1 and 2 workers in one
invocation (one GPU against two); ``--out-store`` has the workers write the
edges to an edge store instead of gathering them to the client.

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

import dask.config
import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import emst_dask  # noqa: E402
from emst_dask import datasets  # noqa: E402
from emst_dask import EmbeddedCluster  # noqa: E402
from emst_dask.distributed.nccl import EXCHANGE_KEY  # noqa: E402
from emst_dask.io.store_checks import first_cycle_edge  # noqa: E402


def edge_hash(u, v) -> int:
    """Order-free 64-bit hash of an undirected edge set: the sum mod 2**64
    of splitmix64 of each (min, max) pair, on every core (a billion edges:
    seconds, where numpy's passes took minutes of the device's time)."""
    u, v = np.asarray(u), np.asarray(v)
    return int(_edge_hash(u, v))


@numba.njit(parallel=True, cache=True)
def _edge_hash(u, v):
    c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0x632BE59BD9B4E019)
    c3, c4 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s27, s30, s31 = np.uint64(27), np.uint64(30), np.uint64(31)
    total = np.uint64(0)
    for i in numba.prange(u.shape[0]):
        x, y = np.uint64(u[i]), np.uint64(v[i])
        a, b = (x, y) if u[i] <= v[i] else (y, x)
        z = (a * c1) ^ (b + c2)
        z = (z ^ (z >> s30)) * c3
        z = (z ^ (z >> s27)) * c4
        total += z ^ (z >> s31)
    return total


def sampled_weight_error(tree, pts, m=100_000, seed=1) -> float:
    rng = np.random.default_rng(seed)
    i = rng.integers(0, tree.n_edges, min(m, tree.n_edges))
    s, t = tree.source[i], tree.target[i]
    ends = pts[np.concatenate([s, t])].astype(np.float64)  # one pass over a snapshot's chunks
    true = np.sqrt(((ends[:len(i)] - ends[len(i):]) ** 2).sum(1))
    return float(np.max(np.abs(tree.weight[i] - true) / np.maximum(true, 1e-300)))


def _spans(n, u, v) -> bool:
    """Whether the edges (u, v) join n vertices into one tree: n - 1 of them,
    ids in [0, n), no cycle."""
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    if u.shape[0] != n - 1:
        return False
    if u.shape[0] and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        return False
    return first_cycle_edge(u, v, n) < 0


def check_tree(tree, pts, min_samples, ref, n) -> dict:
    """Exactness figures of one run: spanning tree, edge-set hash, sampled
    weights recomputed in float64 (Euclidean runs).  An edge set equal to
    the first run's (which was checked to span) spans: not checked again."""
    h = edge_hash(tree.source, tree.target)
    same = None if ref is None else h == ref["hash"]
    spans = ref["spans"] if same else bool(_spans(n, tree.source, tree.target))
    return dict(spanning_tree=spans, edge_hash=h, same_edge_set_as_first=same,
                max_rel_weight_error_sampled=sampled_weight_error(tree, pts)
                if min_samples == 1 else None)


class SnapshotRows:
    """The rows of a snapshot's ``points`` read on demand (``pts[idx]``):
    what the checks need of a cloud too big to hold twice."""

    def __init__(self, path, seconds=0.0):
        import zarr

        self.z = zarr.open_group(path, mode="r")["points"]
        self.seconds = seconds
        self.shape, self.dtype = self.z.shape, self.z.dtype

    def __getitem__(self, idx):
        idx = np.asarray(idx)
        order = np.argsort(idx, kind="stable")
        rows = np.empty((idx.shape[0], self.shape[1]), self.dtype)
        rows[order] = self.z.get_orthogonal_selection((idx[order], slice(None)))
        return rows


def make_chunked(snap, args) -> SnapshotRows:
    """The chunked variant written straight into ``snap`` by every core."""
    from emst_dask.io.snapshot import write_chunked

    t0 = time.perf_counter()
    write_chunked(snap, args.dataset, args.n, dim=args.dim, seed=0,
                  chunk_rows=args.chunk_rows, overwrite=True)
    return SnapshotRows(snap, time.perf_counter() - t0)


def parse_runs(spec, partitions):
    """[(workers or None, "single" | P, shuffle, settings)]: ``--runs
    1:single,2:2,2:2@dask,1:2+stage-writes=all`` (``@dask`` or ``@nccl``:
    how the shuffle moves points; default the library's choice;
    ``+name=value``: the dask.config setting ``emst_dask.partitioned.name``
    for that run, several ``+`` allowed); without it the one-worker job and
    every P of ``--partitions`` on one cluster."""
    if not spec:
        return ([(None, "single", None, {})]
                + [(None, int(p), None, {}) for p in partitions.split(",")])
    out = []
    for item in spec.split(","):
        item, *extra = item.split("+")
        settings = {}
        for kv in extra:
            name, _, value = kv.partition("=")
            settings[f"emst_dask.partitioned.{name}"] = value
        w, mode = item.split(":")
        mode, _, how = mode.partition("@")
        out.append((int(w), mode if mode in ("single", "auto") else int(mode), how or None,
                    settings))
    return out


def task_name(key) -> str:
    """What a task does, from its key: ``emst-part-<token>-split-3`` ->
    ``split``, ``connect1-0`` -> ``connect``, other keys by Dask's key_split."""
    import re

    from distributed.utils import key_split

    k = key if isinstance(key, str) else str(key[0] if isinstance(key, tuple) else key)
    m = re.match(r"emst-part-[0-9a-f]{8}-([a-z]+)", k)
    return m.group(1) if m else key_split(key)


def summarize_task_stream(records) -> dict:
    """Per task kind: count, compute seconds (sum, max) and seconds spent
    receiving its inputs from other workers, from Dask's task stream."""
    out = {}
    for r in records:
        s = out.setdefault(task_name(r["key"]), dict(n=0, compute_s=0.0, max_compute_s=0.0,
                                                    transfer_s=0.0))
        s["n"] += 1
        for ss in r.get("startstops", ()):
            dt = ss["stop"] - ss["start"]
            if ss["action"] == "compute":
                s["compute_s"] += dt
                s["max_compute_s"] = max(s["max_compute_s"], dt)
            elif ss["action"] == "transfer":
                s["transfer_s"] += dt
    return {k: {f: round(v, 4) if isinstance(v, float) else v for f, v in d.items()}
            for k, d in sorted(out.items(), key=lambda kv: -kv[1]["compute_s"])}


def profile_tree(prof, min_share=0.01, depth=40) -> list:
    """Dask's statistical profile of the workers' threads (``Client.profile``)
    as indented lines: each frame holding at least ``min_share`` of the
    samples, with its share, down to ``depth`` frames."""
    total = max(1, prof.get("count", 0))
    lines = []

    def walk(node, level):
        for child in sorted(node.get("children", {}).values(), key=lambda c: -c["count"]):
            if child["count"] < min_share * total or level >= depth:
                continue
            d = child.get("description", {})
            where = f"{os.path.basename(d.get('filename', '?'))}:{d.get('line_number', '?')}"
            lines.append(f"{'  ' * level}{100 * child['count'] / total:5.1f}% "
                         f"{d.get('name', '?')} ({where})")
            walk(child, level + 1)

    walk(prof, 0)
    return lines


def _worker_memory():
    """This worker's peak and current RSS (bytes), the bytes Dask holds in
    its memory and on its disk (spilled), and its CuPy pools' held bytes
    (device, and pinned host memory, which the OS cannot reclaim)."""
    import resource

    import psutil
    from distributed import get_worker

    out = dict(peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
               rss=psutil.Process().memory_info().rss)
    try:
        data = get_worker().data  # a SpillBuffer unless spilling is off
        if hasattr(data, "fast"):
            out["dask_memory_bytes"] = int(data.fast.total_weight)
            out["dask_spilled_bytes"] = int(data.spilled_total.disk)
    except Exception:
        pass
    try:
        import cupy

        out["device_pool_bytes"] = int(cupy.get_default_memory_pool().total_bytes())
        out["pinned_pool_bytes"] = int(cupy.get_default_pinned_memory_pool().total_bytes())
    except Exception:
        pass
    return out


def device_name() -> str:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:
        return platform.processor() or platform.machine()


def warm_up(client, tmp, args, partitions, to_store):
    """One small job of each kind the timed runs make (a snapshot read by
    the workers, the one-worker path and the partitioned one, to an edge
    store when they write one), so that no timed run compiles kernels."""
    import zarr

    warm = datasets.GENERATORS[args.dataset](200_000, args.dim, 1)
    path = os.path.join(tmp, "warm.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=3)
    g.create_array("points", shape=warm.shape, chunks=(50_000, args.dim),
                   dtype=warm.dtype)[...] = warm
    source = persist(client, path, args.backend) if args.persisted else path
    for parts in (None, partitions):
        out = os.path.join(tmp, f"warm-edges-{parts}.zarr") if to_store else None
        emst_dask.emst(source, client=client, partitions=parts, out=out,
                       min_samples=args.min_samples, backend=args.backend)
        if out:
            shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(path, ignore_errors=True)


def persist(client, snap, backend):
    """The snapshot's points as a dask array persisted on the workers (CuPy
    blocks on GPU workers), its blocks spread over them by Dask."""
    import dask.array as da
    from distributed import wait

    x = da.from_zarr(snap, component="points")
    if backend == "cuda" or (backend == "auto" and emst_dask.kernels.cuda_available()):
        import cupy

        x = x.map_blocks(cupy.asarray, dtype=x.dtype)
    x = client.persist(x)
    with client.as_current():
        wait(x)
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="halos")
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--partitions", default="1,2,3,4,8")
    ap.add_argument("--runs", default=None,
                    help="WORKERS:MODE,... e.g. 1:single,1:1,2:2 (MODE single or P); each "
                         "worker count gets its own cluster, in one run")
    ap.add_argument("--out-store", action="store_true",
                    help="workers write the edges to an edge store (timed to the complete "
                         "store); else they are gathered to the client")
    ap.add_argument("--workers", type=int, default=None,
                    help="workers of the embedded cluster (default: one per GPU, else 2)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--device-pool", default=None,
                    help="GPU workers reserve this fraction of free device memory in their "
                         "CuPy pool at start (default: the pool grows on demand)")
    ap.add_argument("--min-samples", type=int, default=1)
    ap.add_argument("--chunk-rows", type=int, default=1 << 21)
    ap.add_argument("--persisted", action="store_true",
                    help="the points as a dask array persisted on the workers (CuPy blocks "
                         "on GPU workers), read from the snapshot before each timed run")
    ap.add_argument("--chunked", action="store_true",
                    help="the chunked variant of the cloud (emst-dask generate --chunked), "
                         "made by all cores straight into the snapshot; the checks read "
                         "the points they need from it")
    ap.add_argument("--memory-limit", default=None,
                    help="each worker's memory limit (Dask's memory_limit, e.g. 120GB): on "
                         "hosts whose memory grows as it is used, Dask's 'auto' sees too little")
    ap.add_argument("--dir", default=None, help="where the snapshot goes (default: a temp dir)")
    ap.add_argument("--machine", default=socket.gethostname())
    ap.add_argument("--out", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="write each run's statistical profile of the workers' threads "
                         "(Dask's) next to --out, as an indented call tree")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="the workers' sys.setswitchinterval in seconds (Python's default "
                         "0.005): how long a thread waiting for the interpreter may wait "
                         "while others run Python, as phase 2 beside the box writers")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="with --out-store: after removing the last repeat's store, sync "
                         "and wait this many seconds before the next job (on a disk mounted "
                         "with discard, files written right after removing many GB were "
                         "seen to write ten times slower)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="run each job this many times on its cluster and record the last "
                         "(the others' seconds as earlier_seconds): the first job at a size "
                         "whose arrays pass 2 GiB compiles CuPy's 64-bit-index kernels, "
                         "which the small warm-up does not")
    ap.add_argument("--expect-hash", type=int, default=None,
                    help="the edge-set hash of an earlier invocation's checked spanning tree: "
                         "every run must have it (and so spans: no union-find here)")
    ap.add_argument("--expect-total", type=float, default=None,
                    help="with --expect-hash: that tree's total weight")
    ap.add_argument("--log-phases", action="store_true",
                    help="print each phase of a partitioned job as it ends (long runs)")
    args = ap.parse_args(argv)
    if args.log_phases:
        import logging

        logging.basicConfig(format="%(asctime)s %(name)s %(message)s")
        for name in ("emst_dask.partitioned", "emst_dask.distributed.partitioned",
                     "emst_dask.distributed.device_exchange"):
            logging.getLogger(name).setLevel(logging.INFO)

    import zarr

    tmp = args.dir or tempfile.mkdtemp(prefix="emst-part-")
    os.makedirs(tmp, exist_ok=True)
    snap = os.path.join(tmp, f"{args.dataset}{args.dim}d-{args.n}.zarr")
    if args.chunked:
        pts = make_chunked(snap, args)
        t_gen = pts.seconds
    else:
        t0 = time.perf_counter()
        pts = datasets.GENERATORS[args.dataset](args.n, args.dim, 0)
        t_gen = time.perf_counter() - t0
    if os.path.exists(snap) and not args.chunked:
        shutil.rmtree(snap)
    t0 = time.perf_counter()
    C = min(args.chunk_rows, args.n)
    if not args.chunked:
        g = zarr.open_group(snap, mode="w-", zarr_format=3)
        arr = g.create_array("points", shape=pts.shape, chunks=(C, args.dim), dtype=pts.dtype)
    # whole chunks from a thread pool (the codecs release the GIL)
    from concurrent.futures import ThreadPoolExecutor

    def put(a):
        arr[a:a + C] = pts[a:a + C]

    if not args.chunked:
        with ThreadPoolExecutor(os.cpu_count() or 1) as ex:
            list(ex.map(put, range(0, args.n, C)))
    print(f"generated {args.dataset} {args.n} x {args.dim} in {t_gen:.1f} s, written in "
          f"{time.perf_counter() - t0:.1f} s; snapshot {snap}", flush=True)

    runs = parse_runs(args.runs, args.partitions)
    path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                    f"partitions-{args.machine}.json")

    def dump():
        """Write what has been measured so far (a run cut short keeps its rows)."""
        if not n_workers_seen:
            return
        single = [r for r in rows if r["mode"] == "single" and r["workers"] == 1]
        if single:
            for r in rows:
                r["speedup_vs_single_one_worker"] = single[0]["seconds"] / r["seconds"]
        out = dict(benchmark="partitions", date=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   machine=args.machine, device=device_name(), host=platform.node(),
                   cpus=os.cpu_count(), dataset=args.dataset, d=args.dim, n=args.n, seed=0,
                   dtype=str(pts.dtype), min_samples=args.min_samples,
                   workers=max(v[0] for v in n_workers_seen.values()),
                   cluster=next(iter(n_workers_seen.values()))[1], chunk_rows=args.chunk_rows,
                   generation_seconds=t_gen, chunked_variant=bool(args.chunked),
                   device_pool=args.device_pool, switch_interval=args.switch_interval,
                   settle=args.settle, rows=rows,
                   version=emst_dask.__version__)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=1, default=float)
        print("wrote", path, flush=True)

    rows = []
    ref = None
    if args.expect_hash is not None:
        # the edge set of an earlier invocation, which its first run checked
        # to span: a run with this hash spans too (a billion-edge union-find
        # is minutes of the device's time)
        ref = dict(hash=int(args.expect_hash), total=args.expect_total, spans=True)
    n_workers_seen = {}
    store = os.path.join(tmp, "edges.zarr") if args.out_store else None
    # every run writes a new store: removing the last run's gigabytes is
    # not part of a job (overwrite=True would time it)
    for W in sorted({w for w, _, _, _ in runs}, key=lambda w: (w is not None, w or 0)):
        cl_kw = {}
        if W:
            cl_kw["n_workers"] = W
        elif args.workers:
            cl_kw["n_workers"] = args.workers
        elif args.backend == "cpu" or not emst_dask.kernels.cuda_available():
            cl_kw["n_workers"] = 2
        if args.device_pool:
            cl_kw["device_pool"] = float(args.device_pool)
        if args.memory_limit:
            cl_kw["memory_limit"] = args.memory_limit
        with EmbeddedCluster(backend=args.backend, **cl_kw) as emb:
            cl = emb.client
            n_workers = len(cl.scheduler_info(n_workers=-1)["workers"])
            n_workers_seen[W] = (n_workers, emb.kind)
            if args.switch_interval is not None:
                cl.run(sys.setswitchinterval, args.switch_interval)
            # warm-up: JIT / kernel compilation on every worker, not timed; the
            # same kinds of job as the timed ones (a snapshot, an edge store:
            # the write path has kernels of its own)
            warm_up(cl, tmp, args, max(2, n_workers), store is not None)
            for w, mode, how, settings in runs:
                if w != W:
                    continue
                kw = dict(client=cl, min_samples=args.min_samples, backend=args.backend)
                if mode != "single":
                    kw["partitions"] = mode
                if store:
                    kw.update(out=store)  # removed before each repeat, below
                from distributed import get_task_stream

                earlier = []  # the seconds of the repeats before the recorded one
                between = []  # the workers' memory after each of those
                for rep_i in range(args.repeats):
                    if store:
                        shutil.rmtree(store, ignore_errors=True)
                        if args.settle:
                            # the removal's discards reach the disk before
                            # the job writes (not a cost a user's job pays)
                            os.sync()
                            time.sleep(args.settle)
                    source = persist(cl, snap, args.backend) if args.persisted else snap
                    with get_task_stream(client=cl) as stream, \
                            dask.config.set({EXCHANGE_KEY: how or "auto", **settings}):
                        t0, wall0 = time.perf_counter(), time.time()
                        res = emst_dask.emst(source, **kw)
                        secs = time.perf_counter() - t0
                        wall1 = time.time()
                    if rep_i < args.repeats - 1:
                        earlier.append(secs)
                        del res, source
                        # what the workers still hold once a job is over (the
                        # next one needs the room: Dask spills past 70%)
                        between.append(cl.run(_worker_memory))
                        print(f"W={n_workers} {mode}: repeat {rep_i + 1} of {args.repeats}: "
                              f"{secs:.2f} s (not checked); workers after it: {between[-1]}",
                              flush=True)
                if args.profile and args.out:
                    tree_lines = profile_tree(cl.profile(start=wall0, stop=wall1))
                    name = f"{os.path.splitext(args.out)[0]}.profile-W{w}-{mode}-{how or 'auto'}.txt"
                    with open(name, "w") as f:
                        f.write("\n".join(tree_lines) + "\n")
                del source
                tasks = summarize_task_stream(stream.data)
                memory = cl.run(_worker_memory)
                tree = res.load() if store else res
                rep = None if mode == "single" else (
                    res.attrs.get("partitioned") if store else getattr(tree, "report", None))
                rep = rep.as_dict() if hasattr(rep, "as_dict") else rep
                row = dict(mode="single" if mode == "single" or rep is None else "partitioned",
                           asked=mode, shuffle_asked=how or "auto", settings=settings,
                           shuffle_by=None if rep is None else rep.get("shuffle_by"),
                           source="persisted dask array" if args.persisted
                           else "zarr snapshot",
                           partitions=1 if rep is None else rep["partitions"], workers=n_workers,
                           seconds=secs, earlier_seconds=earlier,
                           output="edge store" if store else "client",
                           total_weight=tree.total_weight, n_edges=tree.n_edges)
                check = check_tree(tree, pts, args.min_samples, ref, args.n)
                row.update(check)
                row["tasks"] = tasks
                row["worker_memory"] = memory  # peak RSS: process lifetime so far
                row["worker_memory_after_earlier"] = between
                if rep is None:
                    row["timings"] = tree.timings if not store else res.attrs.get("timings")
                else:
                    row["report"] = rep
                rows.append(row)
                dump()
                print(f"W={n_workers} {mode}{'@' + how if how else ''}"
                      f"{''.join(f'+{k.rsplit(chr(46), 1)[-1]}={v}' for k, v in settings.items())}"
                      f": {secs:.2f} s, "
                      f"shuffle by {row['shuffle_by']}, {check}"
                      + (f", rounds {rep['rounds']}, moved "
                         f"{rep['total_bytes_moved'] / 1e6:.1f} MB {rep['bytes_moved']}, "
                         f"super-vertices {rep['n_super_vertices']}, seconds "
                         f"{ {k: round(v, 3) for k, v in rep['seconds'].items()} }"
                         if rep is not None else f", timings {row['timings']}"), flush=True)
                print("  tasks:", {k: (v["n"], v["compute_s"], v["transfer_s"])
                                   for k, v in tasks.items()}, flush=True)
                print("  memory:", memory, flush=True)
                if ref is None:
                    ref = dict(hash=check["edge_hash"], total=tree.total_weight,
                               spans=check["spanning_tree"])
                assert tree.n_edges == args.n - 1
                assert check["spanning_tree"], f"{mode}: not a spanning tree"
                assert check["edge_hash"] == ref["hash"], \
                    f"W={W} {mode}: edge set differs from the first run's"
                if ref["total"] is not None:
                    assert np.isclose(tree.total_weight, ref["total"], rtol=1e-9)
                del tree, res
    dump()
    if not args.dir:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
