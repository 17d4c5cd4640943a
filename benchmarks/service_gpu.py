"""End to end through the Dask service, against the floor of the same work.

One run:

1. the halos cloud (``emst_dask.datasets.halos``, 3-D, seed 0) as a Zarr v3
   snapshot (a group with one (n, 3) float32 array ``points``, ``--chunk-rows``
   rows per chunk, zarr's default codec), written once (``--reuse`` keeps it);
2. the embedded cluster: a LocalCUDACluster (one worker, one GPU) or, with
   ``--backend cpu``, a LocalCluster of one worker with every core;
3. a warm-up job on a small snapshot (compiles the kernels on the worker; not
   timed);
4. ``--repeats`` times, alternating:
   * the job: ``emst(snapshot, client=..., out=edges.zarr)``, timed in the
     client from the call to the returned store (the worker reads the chunks,
     stages them, runs Borůvka and writes the edge store);
   * the floor, on the same worker: read the snapshot into host memory
     with raw zarr (its own ``[:]`` and a thread pool over the chunks; the
     faster counts), plus the in-process tree of the points already on the
     device (``emst(array)`` as a user calls it), plus writing the job's own
     edges with raw zarr (loaded beforehand; same arrays, dtypes, chunks and
     codecs; again the faster of two writers);
   * the job's seconds accounted for: the worker's phases (queue, read with
     its decode/copy/check, tree, total weight, write with its copy back and
     encode, commit) and what is left (the client's checks and the reply);
5. with ``--persisted``, the same points as a dask array of CuPy (or numpy)
   blocks persisted on the worker, run through the service to an edge store,
   against the in-process tree plus the job's own write;
6. a sanity check of the result (n - 1 edges; sampled weights recomputed from
   the points), and JSON with every number to
   ``benchmarks/results/service-<device>-<n>.json``.

    python benchmarks/service_gpu.py                          # GPU: 100M points
    python benchmarks/service_gpu.py --n 200000 --backend cpu # smoke test on CPU
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import emst_dask  # noqa: E402
from emst_dask import datasets  # noqa: E402
from emst_dask import EmbeddedCluster
from emst_dask.distributed.service import emst as service_emst  # noqa: E402
from emst_dask.io.edge_store import EDGE_CHUNK_ROWS, open_edges  # noqa: E402

TARGET, AIM = 1.2, 1.0


def write_snapshot(path, n, chunk_rows, seed=0):
    import zarr

    t0 = time.perf_counter()
    pts = datasets.halos(n, dim=3, seed=seed)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    if os.path.exists(path):
        shutil.rmtree(path)
    g = zarr.open_group(path, mode="w-", zarr_format=3)
    a = g.create_array("points", shape=pts.shape, chunks=(min(chunk_rows, max(n, 1)), 3),
                       dtype=pts.dtype)
    a[...] = pts
    g.attrs.update({"generator": "halos", "n": int(n), "d": 3, "seed": int(seed),
                    "chunk_rows": int(chunk_rows)})
    t_write = time.perf_counter() - t0
    return pts, t_gen, t_write


def snapshot_matches(path, n, chunk_rows):
    import zarr

    try:
        g = zarr.open_group(path, mode="r")
        return (g.attrs.get("n") == n and g.attrs.get("chunk_rows") == chunk_rows
                and g.attrs.get("generator") == "halos" and g.attrs.get("seed") == 0)
    except Exception:
        return False


def du(path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


# --------------------------------------------------------------------------
# the floor, run on the worker
# --------------------------------------------------------------------------
def inprocess_tree(snapshot, backend):
    """Seconds of ``emst(points)`` in this process, the points already in
    memory where the backend computes (the device for CUDA): the median of
    two runs after one that compiles."""
    import zarr

    x = zarr.open_group(snapshot, mode="r")["points"][:]
    if backend == "cuda":
        import cupy

        x = cupy.asarray(x)
    times = []
    for _ in range(3):
        if backend == "cuda":
            cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        t = emst_dask.emst(x, backend=backend)  # in this process, as a user calls it
        t.total_weight  # noqa: B018 - what a job records
        times.append(time.perf_counter() - t0)
        del t
    return statistics.median(times[1:])


def floor_task(snapshot, edges, scratch, threads, backend="cuda", tree_seconds=None):
    """Seconds to read the snapshot into memory with raw zarr, to compute
    the tree in this process (``tree_seconds`` when measured already), and
    to write an edge store like ``edges`` (same arrays, dtypes, chunks,
    codecs) with raw zarr."""
    from concurrent.futures import ThreadPoolExecutor

    import zarr

    out = {"tree": tree_seconds if tree_seconds is not None
           else inprocess_tree(snapshot, backend)}
    # -- read: zarr's own concurrency
    t0 = time.perf_counter()
    z = zarr.open_group(snapshot, mode="r")["points"]
    x = z[:]
    out["read_zarr"] = time.perf_counter() - t0
    del x
    # -- read: a thread pool over the chunks into one array
    t0 = time.perf_counter()
    z = zarr.open_group(snapshot, mode="r")["points"]
    n, d = z.shape
    rows = z.chunks[0]
    buf = np.empty((n, d), z.dtype)

    def rd(a):
        buf[a:a + rows] = z[a:a + rows]

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(rd, range(0, n, rows)))
    out["read_threads"] = time.perf_counter() - t0
    del buf
    # -- the edges, loaded beforehand (not timed)
    src = zarr.open_group(edges, mode="r")
    arrays = {k: (src[k][:], src[k]) for k in ("source", "target", "weight")}

    def create(path):
        if os.path.exists(path):
            shutil.rmtree(path)
        g = zarr.open_group(path, mode="w-", zarr_format=src.metadata.zarr_format)
        made = {}
        for k, (data, like) in arrays.items():
            made[k] = g.create_array(k, shape=like.shape, chunks=like.chunks, dtype=like.dtype,
                                     compressors=like.compressors, filters=like.filters,
                                     serializer=like.serializer, fill_value=0)
        return g, made

    # -- write: zarr's own concurrency, one call per array
    t0 = time.perf_counter()
    g, made = create(scratch + ".a")
    for k, (data, _) in arrays.items():
        made[k][:] = data
    g.attrs["complete"] = True
    out["write_zarr"] = time.perf_counter() - t0
    # -- write: a thread pool over chunk groups
    t0 = time.perf_counter()
    g, made = create(scratch + ".b")
    pieces = []
    for k, (data, like) in arrays.items():
        step = like.chunks[0] * 4
        pieces += [(made[k], data, a, min(a + step, len(data))) for a in range(0, len(data), step)]

    def wr(p):
        arr, data, a, b = p
        arr[a:b] = data[a:b]

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(wr, pieces))
    g.attrs["complete"] = True
    out["write_threads"] = time.perf_counter() - t0
    out["edge_bytes_on_disk"] = du(scratch + ".b")
    for s in (scratch + ".a", scratch + ".b"):
        shutil.rmtree(s, ignore_errors=True)
    out["read"] = min(out["read_zarr"], out["read_threads"])
    out["write"] = min(out["write_zarr"], out["write_threads"])
    out["floor"] = out["read"] + out["tree"] + out["write"]
    return out


#: the worker's phases, in the order they run (job.py, staging, edge_store)
PHASES = ("queue", "read", "emst", "total_weight", "write_all", "commit")
#: what runs inside them (overlapped: summed over threads)
INSIDE = ("decode", "copy_in", "check", "copy_back", "encode_write")


def accounted(seconds, timings):
    """The job's seconds per phase, and what the phases leave over."""
    parts = {k: float(timings.get(k, 0.0)) for k in PHASES}
    parts["client_and_reply"] = seconds - sum(parts.values())
    inside = {k: float(timings[k]) for k in INSIDE if k in timings}
    return {"phases": parts, "inside": inside}


def persisted_job(client, snap, edges, backend, worker):
    """The service job on the snapshot's points persisted on the worker as a
    dask array (CuPy blocks on a GPU worker): seconds."""
    import dask.array as da

    x = da.from_zarr(snap, component="points")
    if backend == "cuda":
        import cupy

        x = x.map_blocks(cupy.asarray, dtype=x.dtype)
    x = client.persist(x, workers=[worker])
    from distributed import wait

    with client.as_current():
        wait(x)
    shutil.rmtree(edges, ignore_errors=True)
    t0 = time.perf_counter()
    st = service_emst(x, client=client, out=edges, backend=backend)
    seconds = time.perf_counter() - t0
    del x
    return seconds, st


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------
def device_name(backend):
    if backend == "cuda":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    else:
        name = "cpu-" + (platform.processor() or platform.machine())
    return name, re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def versions():
    out = {"python": platform.python_version(), "emst_dask": emst_dask.__version__}
    for mod in ("numpy", "numba", "dask", "distributed", "zarr", "numcodecs", "cupy",
                "dask_cuda"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            pass
    return out


def sample_check(points, store, k=2000, seed=1):
    """n - 1 edges; k sampled weights equal the recomputed distances."""
    tree = open_edges(store)
    n = len(points)
    assert tree.n_edges == n - 1, (tree.n_edges, n)
    rng = np.random.default_rng(seed)
    idx = np.sort(rng.choice(tree.n_edges, size=min(k, tree.n_edges), replace=False))
    s = tree.source.get_orthogonal_selection((idx,))
    t = tree.target.get_orthogonal_selection((idx,))
    w = tree.weight.get_orthogonal_selection((idx,)).astype(np.float64)
    want = np.linalg.norm(points[s].astype(np.float64) - points[t].astype(np.float64), axis=1)
    err = float(np.max(np.abs(w - want) / np.maximum(want, 1e-30))) if len(idx) else 0.0
    assert err < 1e-5, f"sampled weights differ from the distances (max rel err {err})"
    assert np.isfinite(tree.total_weight)
    return {"sampled_edges": int(len(idx)), "max_rel_err": err}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s.replace("_", ""))), default=100_000_000)
    p.add_argument("--chunk-rows", type=lambda s: int(float(s.replace("_", ""))),
                   default=1_000_000)
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reuse", action="store_true", help="keep a matching snapshot in --dir")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--cold", action="store_true",
                   help="drop the page cache before every timed read (needs root)")
    p.add_argument("--persisted", action="store_true",
                   help="also run the points persisted on the worker as a dask array")
    p.add_argument("--out", default=None, help="JSON path (default: "
                   "benchmarks/results/service-<device>-<n>.json)")
    a = p.parse_args(argv)

    from emst_dask.kernels import cuda_available

    backend = a.backend if a.backend != "auto" else ("cuda" if cuda_available() else "cpu")
    device, slug = device_name(backend)
    work = a.dir or tempfile.mkdtemp(prefix="emst-service-bench-")
    os.makedirs(work, exist_ok=True)
    snap = os.path.join(work, f"halos{a.n}.zarr")
    edges = os.path.join(work, "edges.zarr")
    res = {"benchmark": "service end to end vs the floor (raw zarr read + in-process tree "
                        "+ raw zarr write of the same edges)", "device": device,
           "host": socket.gethostname(), "backend": backend, "versions": versions(),
           "dataset": {"name": "halos", "n": a.n, "d": 3, "seed": 0, "dtype": "float32",
                       "zarr_format": 3, "chunk_rows": a.chunk_rows},
           "repeats": a.repeats, "cold_cache": bool(a.cold)}
    print(f"device: {device} ({backend}); work dir {work}", flush=True)

    if a.reuse and snapshot_matches(snap, a.n, a.chunk_rows):
        import zarr

        pts = zarr.open_group(snap, mode="r")["points"][:]
        res["snapshot"] = {"reused": True}
    else:
        pts, t_gen, t_wr = write_snapshot(snap, a.n, a.chunk_rows)
        res["snapshot"] = {"generate_seconds": t_gen, "write_seconds": t_wr}
        print(f"snapshot: generated in {t_gen:.1f} s, written in {t_wr:.1f} s", flush=True)
    import zarr

    za = zarr.open_group(snap, mode="r")["points"]
    res["snapshot"].update({"path": snap, "bytes_on_disk": du(snap),
                            "codec": repr(za.compressors), "chunks": list(za.chunks)})
    warm = os.path.join(work, "warm.zarr")
    nw = min(a.n, 1_000_000)
    write_snapshot(warm, nw, min(a.chunk_rows, nw), seed=1)

    t0 = time.perf_counter()
    kw = {} if backend == "cuda" else {"env": {"NUMBA_NUM_THREADS": str(os.cpu_count() or 1)}}
    with EmbeddedCluster(n_workers=1, backend=backend, **kw) as emb:
        res["cluster"] = {"kind": emb.kind, "start_seconds": time.perf_counter() - t0}
        worker = list(emb.client.scheduler_info()["workers"])[0]
        t0 = time.perf_counter()
        service_emst(warm, client=emb.client, out=os.path.join(work, "warm-edges.zarr"),
                     backend=backend, overwrite=True)
        res["warmup_seconds"] = time.perf_counter() - t0
        print(f"cluster: {emb.kind}, warm-up job {res['warmup_seconds']:.1f} s", flush=True)
        threads = max(2, min(16, os.cpu_count() or 2))
        jobs, floors = [], []
        tree_seconds = None
        for r in range(a.repeats):
            if a.cold:
                res["cold_cache"] = drop_caches()
            # a new output each time, as a user writes one (replacing an older
            # store would add its removal to the job)
            shutil.rmtree(edges, ignore_errors=True)
            t0 = time.perf_counter()
            st = service_emst(snap, client=emb.client, out=edges, backend=backend)
            t_job = time.perf_counter() - t0
            tm = st.attrs["timings"]
            jobs.append({"seconds": t_job, "worker_timings": tm,
                         "accounted": accounted(t_job, tm),
                         "iterations": st.attrs["iterations"]})
            if a.cold:
                drop_caches()
            f = emb.client.submit(floor_task, snap, edges, os.path.join(work, "floor"),
                                  threads, backend, tree_seconds, workers=[worker],
                                  pure=False).result()
            tree_seconds = f["tree"]
            floors.append(f)
            acc = jobs[-1]["accounted"]
            print(f"repeat {r}: job {t_job:.2f} s = " + ", ".join(
                f"{k} {v:.2f}" for k, v in acc["phases"].items()) + " [inside: " + ", ".join(
                f"{k} {v:.2f}" for k, v in acc["inside"].items()) + f"]; floor {f['floor']:.2f}"
                f" s (read {f['read']:.2f} + tree {f['tree']:.2f} + write {f['write']:.2f})",
                flush=True)
        if a.persisted:
            runs = []
            for r in range(a.repeats):
                sec, pst = persisted_job(emb.client, snap, os.path.join(work, "edges-p.zarr"),
                                         backend, worker)
                tm = pst.attrs["timings"]
                runs.append({"seconds": sec, "worker_timings": tm,
                             "accounted": accounted(sec, tm)})
                print(f"persisted {r}: job {sec:.2f} s = " + ", ".join(
                    f"{k} {v:.2f}" for k, v in runs[-1]["accounted"]["phases"].items()),
                    flush=True)
            med = statistics.median(j["seconds"] for j in runs)
            write_med = statistics.median(j["worker_timings"].get("write_all", 0.0)
                                          + j["worker_timings"].get("commit", 0.0)
                                          for j in runs)
            res["persisted"] = {
                "jobs": runs, "seconds_median": med, "inprocess_tree": tree_seconds,
                "job_write_median": write_med,
                "ratio_to_tree_plus_write": med / (tree_seconds + write_med),
                "ratio_to_tree_excluding_write": (med - write_med) / tree_seconds}
            print(f"persisted: {med:.2f} s; in-process tree {tree_seconds:.2f} s + the job's "
                  f"write {write_med:.2f} s: ratio "
                  f"{res['persisted']['ratio_to_tree_plus_write']:.2f}", flush=True)
    res["check"] = sample_check(pts, edges)
    st = open_edges(edges)
    res["edges"] = {"n_edges": st.n_edges, "total_weight": st.total_weight,
                    "bytes_on_disk": du(edges), "codec": repr(st.weight.compressors),
                    "index_dtype": str(st.source.dtype), "chunk_rows": EDGE_CHUNK_ROWS,
                    "format_version": st.attrs.get("format_version")}
    if a.persisted:
        pe = open_edges(os.path.join(work, "edges-p.zarr"))
        assert pe.total_weight == st.total_weight and pe.n_edges == st.n_edges
        res["persisted"]["same_total_as_snapshot_job"] = True
    job_med = statistics.median(j["seconds"] for j in jobs)
    floor_med = statistics.median(f["floor"] for f in floors)
    res["jobs"] = jobs
    res["floors"] = floors
    res["job_seconds_median"] = job_med
    res["floor_seconds_median"] = floor_med
    res["ratio"] = job_med / floor_med if floor_med > 0 else None
    res["target_ratio"], res["aim_ratio"] = TARGET, AIM
    res["meets_target"] = res["ratio"] is not None and res["ratio"] <= TARGET
    res["mfeatures_per_second_end_to_end"] = a.n * 3 / job_med / 1e6
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"service-{slug}-{a.n}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=2)
    print(f"end to end {job_med:.2f} s, floor {floor_med:.2f} s, ratio {res['ratio']:.2f} "
          f"(target <= {TARGET}, aim {AIM}); {res['mfeatures_per_second_end_to_end']:.1f} "
          f"MFeatures/s; wrote {out}")
    if not (a.keep or a.dir):
        shutil.rmtree(work, ignore_errors=True)
    return res


if __name__ == "__main__":
    main()
