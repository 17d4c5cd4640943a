"""Zarr read and write paths on this machine, side by side (no tree).

Measures, on one (n, 3) float32 snapshot and one edge list of n - 1
edges, in one process:

* reads of the snapshot: zarr's ``[:]``; a thread pool of per-chunk
  ``z[a:b]`` (zarr's synchronous API); a thread pool of per-chunk reads on
  the threads' own event loops (``emst_dask.io.zarr_threads``), into pinned
  host memory when CuPy is there, then to the device;
* writes of the edges (int32 source/target and float32 weight, the compact
  store, or int64 indices as before) with several codecs, each chunk with
  CRC32C: zstd level 3 (before), zstd level 1, blosc lz4 with byte shuffle,
  none; by zarr's ``[:] =`` and by the thread pools above;
* host-to-device and device-to-host copies from pinned and pageable memory.

    python benchmarks/io_paths.py --n 200_000_000 --out $OUT/io.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emst_dask.io.zarr_threads import read_rows, write_rows  # noqa: E402


def codecs_of(name):
    from zarr.codecs import BloscCodec, ZstdCodec

    import emst_dask.io.codecs  # noqa: F401 - the package's crc32c (GIL released)
    from zarr.registry import get_codec_class

    Crc32cCodec = get_codec_class("crc32c")

    return {"zstd3": [ZstdCodec(level=3), Crc32cCodec()],
            "zstd1": [ZstdCodec(level=1), Crc32cCodec()],
            "lz4shuffle": [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"), Crc32cCodec()],
            "zstd1shuffle": [BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"),
                             Crc32cCodec()],
            "none": [Crc32cCodec()]}[name]


def timed(fn, repeats=2):
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def du(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=lambda s: int(float(s.replace("_", ""))), default=50_000_000)
    p.add_argument("--chunk-rows", type=int, default=2_000_000)
    p.add_argument("--edge-chunk-rows", type=int, default=1 << 20)
    p.add_argument("--threads", default="8,16")
    p.add_argument("--dir", default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    import zarr

    work = a.dir or tempfile.mkdtemp(prefix="emst-io-")
    n, C = a.n, a.chunk_rows
    res = {"n": n, "chunk_rows": C, "cpus": os.cpu_count(), "zarr": zarr.__version__,
           "read": {}, "write": {}, "copy": {}}
    try:
        import cupy
        import cupyx

        props = cupy.cuda.runtime.getDeviceProperties(0)
        res["device"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    except Exception:
        cupy = None
    rng = np.random.default_rng(0)
    x = (rng.random((n, 3), dtype=np.float32) * 1000).astype(np.float32)
    snap = os.path.join(work, "snap.zarr")
    g = zarr.open_group(snap, mode="w", zarr_format=3)
    z = g.create_array("points", shape=x.shape, chunks=(C, 3), dtype=x.dtype)  # zarr's default
    t0 = time.perf_counter()
    z[:] = x
    res["snapshot_write_zarr"] = time.perf_counter() - t0
    gb = x.nbytes / 1e9
    res["snapshot_gb"] = gb
    starts = list(range(0, n, C))
    res["read"]["zarr[:]"] = gb / timed(lambda: z[:])
    for T in [int(t) for t in a.threads.split(",")]:
        out = np.empty_like(x)

        def rz(s):
            out[s:s + C] = z[s:s + C]

        def ro(s):
            out[s:s + C] = read_rows(z, s, min(s + C, n))

        with ThreadPoolExecutor(T) as pool:
            res["read"][f"zarr-sync-threads{T}"] = gb / timed(lambda: list(pool.map(rz, starts)))
            res["read"][f"own-loops-threads{T}"] = gb / timed(lambda: list(pool.map(ro, starts)))
        assert np.array_equal(out, x)
        if cupy is not None:
            dev = cupy.empty(x.shape, x.dtype)
            bufs = [cupyx.empty_pinned((C, 3), np.float32) for _ in range(T)]
            streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(T)]

            def rd(j):
                s = starts[j]
                e = min(s + C, n)
                k = j % T
                streams[k].synchronize()
                bufs[k][:e - s] = read_rows(z, s, e)
                dev[s:e].set(bufs[k][:e - s], stream=streams[k])

            def all_dev():
                with ThreadPoolExecutor(T) as pool:  # one thread per buffer slot
                    list(pool.map(lambda k: [rd(j) for j in range(k, len(starts), T)], range(T)))
                for s in streams:
                    s.synchronize()

            res["read"][f"own-loops-threads{T}-to-device"] = gb / timed(all_dev)
            assert bool((dev[-5:] == cupy.asarray(x[-5:])).all())
            del dev
    # ---- edges
    m = n - 1
    src32 = rng.integers(0, n, m, dtype=np.int32)
    tgt32 = rng.integers(0, n, m, dtype=np.int32)
    w = rng.random(m, dtype=np.float32)
    for idx in ("int32", "int64"):
        arrays = {"source": src32.astype(idx), "target": tgt32.astype(idx), "weight": w}
        eb = sum(v.nbytes for v in arrays.values()) / 1e9
        for codec in ("zstd3", "zstd1", "lz4shuffle", "zstd1shuffle", "none"):
            if idx == "int64" and codec != "zstd3":
                continue
            path = os.path.join(work, f"e-{idx}-{codec}.zarr")
            R = a.edge_chunk_rows

            def make():
                shutil.rmtree(path, ignore_errors=True)
                gg = zarr.open_group(path, mode="w", zarr_format=3)
                return {k: gg.create_array(k, shape=v.shape, chunks=(R,), dtype=v.dtype,
                                           compressors=codecs_of(codec),
                                           config={"write_empty_chunks": True})
                        for k, v in arrays.items()}

            def wz():
                zs = make()
                for k, v in arrays.items():
                    zs[k][:] = v

            row = {"gb": eb, "zarr[:]=": eb / timed(wz)}
            row["bytes_on_disk"] = du(path)
            for T in [int(t) for t in a.threads.split(",")]:
                def wo():
                    zs = make()
                    pieces = [(k, s) for k in arrays for s in range(0, m, R * 4)]
                    with ThreadPoolExecutor(T) as pool:
                        list(pool.map(lambda ks: write_rows(zs[ks[0]], ks[1],
                                                            arrays[ks[0]][ks[1]:ks[1] + R * 4]),
                                      pieces))
                row[f"own-loops-threads{T}"] = eb / timed(wo)
            res["write"][f"{idx}-{codec}"] = row
            print(idx, codec, {k: round(v, 2) for k, v in row.items() if k != "bytes_on_disk"},
                  flush=True)
            shutil.rmtree(path, ignore_errors=True)
    if cupy is not None:
        dev = cupy.asarray(x)
        pin = cupyx.empty_pinned(x.shape, x.dtype)
        res["copy"]["d2h_pinned"] = gb / timed(lambda: dev.get(out=pin))
        res["copy"]["d2h_pageable"] = gb / timed(lambda: dev.get())
        res["copy"]["h2d_pinned"] = gb / timed(lambda: dev.set(pin))
        res["copy"]["h2d_pageable"] = gb / timed(lambda: dev.set(x))
        t0 = time.perf_counter()
        cupyx.empty_pinned(x.shape, x.dtype)
        res["copy"]["pinned_alloc_seconds"] = time.perf_counter() - t0
    print(json.dumps({k: res[k] for k in ("read", "copy")}, indent=1))
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(res, fh, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
