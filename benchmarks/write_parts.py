"""Where a store's write spends its time on this host, part by part.

6 GB of int32 in 16 MB pieces, 16 threads: first touch of anonymous memory;
lz4 with shuffle alone; CRC32C alone; raw bytes to new files, over existing
files and to new files right after removing a directory, on ``/tmp``, the
working directory and ``/dev/shm`` (when it has room); and the same pieces
through zarr's asynchronous ``setitem`` on the threads' own event loops
(lz4 with shuffle and CRC32C, 1M-row chunks: an edge store's array).

    python benchmarks/write_parts.py        # JSON to $OUT/write-parts.json (or /tmp)
"""
import json
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
res = {}
def T(name, fn, rep=2):
    ts = []
    for _ in range(rep):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    res[name] = ts; print(name, [round(t, 3) for t in ts], flush=True)
GB = 6.0
n = int(GB * 1e9 / 4)
# anonymous memory first touch vs re-touch
t0 = time.perf_counter(); a = np.empty(n, np.int32); a.fill(1); res["anon_first_touch"] = time.perf_counter() - t0
t0 = time.perf_counter(); a.fill(2); res["anon_retouch"] = time.perf_counter() - t0
print("anon first/re", res["anon_first_touch"], res["anon_retouch"], flush=True)
# 16 threads first touch of separate 24 MB buffers
def par_touch():
    def w(i):
        b = np.empty(6_000_000, np.int32); b.fill(i)
    with ThreadPoolExecutor(16) as p: list(p.map(w, range(250)))
T("anon_par_touch_250x24MB", par_touch)
a = np.random.default_rng(0).integers(0, 1 << 30, n, dtype=np.int32)
piece = 4 << 20  # 4M rows = 16 MB
starts = list(range(0, n, piece))
def rawwrite(d, tag):
    os.makedirs(d, exist_ok=True)
    def w(s):
        with open(os.path.join(d, f"{tag}-{s}"), "wb") as fh:
            fh.write(memoryview(a[s:s + piece]))
    with ThreadPoolExecutor(16) as p: list(p.map(w, starts))
def overwrite(d, tag):
    def w(s):
        with open(os.path.join(d, f"{tag}-{s}"), "r+b") as fh:
            fh.write(memoryview(a[s:s + piece]))
    with ThreadPoolExecutor(16) as p: list(p.map(w, starts))
from numcodecs import Blosc
bl = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)
def enc():
    def w(s): bl.encode(a[s:s + piece])
    with ThreadPoolExecutor(16) as p: list(p.map(w, starts))
T("blosc_lz4_encode_16t", enc)
import crc32c
def crc():
    def w(s): crc32c.crc32c(memoryview(a[s:s + piece]))
    with ThreadPoolExecutor(16) as p: list(p.map(w, starts))
T("crc32c_16t", crc)
dirs = {"tmp": "/tmp/write-parts", "cwd": os.path.join(os.getcwd(), ".write-parts")}
st = os.statvfs("/dev/shm")
if st.f_bavail * st.f_frsize > 8e9:
    dirs["shm"] = "/dev/shm/write-parts"
res["shm_bytes"] = st.f_bavail * st.f_frsize
for k, d in dirs.items():
    c = [0]
    def fresh():
        c[0] += 1; rawwrite(d, f"r{c[0]}")
    T(f"raw_new_files_{k}", fresh)
    T(f"raw_overwrite_{k}", lambda: overwrite(d, "r1"))
    t0 = time.perf_counter(); shutil.rmtree(d); res[f"rm_{k}"] = time.perf_counter() - t0
    T(f"raw_new_after_rm_{k}", lambda: rawwrite(d, "q"))
    shutil.rmtree(d)
# zarr own-loops write, lz4 shuffle + crc32c, 1M-row chunks, like an edge store
import zarr
from emst_dask.io import codecs as C
from emst_dask.io.zarr_threads import write_rows
for k, d in dirs.items():
    def zw(i=[0]):
        i[0] += 1
        g = zarr.open_group(os.path.join(d, f"e{i[0]}.zarr"), mode="w", zarr_format=3)
        z = C.create_array(g, "x", (n,), (1 << 20,), np.int32, 3, C.EDGE_CODEC)
        with ThreadPoolExecutor(16) as p:
            list(p.map(lambda s: write_rows(z, s, a[s:s + piece]), starts))
    T(f"zarr_lz4_crc_{k}", zw)
    shutil.rmtree(d, ignore_errors=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "write-parts.json"), "w") as fh:
    json.dump(res, fh, indent=1)
