"""Parts of the partitioned job on one GPU, timed alone: the pinned ring's
host-to-device copy of 1.5 GB (one lane against four), the device split of
a 125M-point block into two boxes, and on a 250M-point box with one shared
face the engine, the strict edge order and the certificate.

    python benchmarks/phase1_parts.py      # writes $OUT/prof.json (or /tmp)

(The run recorded in ``results/phase1-parts-h200-250M.json`` also timed
the certificate as it was before its later rounds were renumbered, from
the previous commit's ``certificate.py``: the ``*_old_*`` entries.  Since
the certificate takes no order, it is timed whole and by parts: round 1's
choices, its hook, the later rounds.)
"""
import json, os, sys, time
import numpy as np
import cupy
sys.path.insert(0, os.getcwd())
from emst_dask.kernels import get_kernels
from emst_dask.engine import boruvka
from emst_dask.engine.order import strict_edge_order
from emst_dask.partitioned.certificate import boruvka_certificate
from emst_dask.partitioned import exchange as ex_mod
from emst_dask.partitioned.boxes import choose_partitioning
from emst_dask.partitioned.steps import Block

xp = np
out = {}
K = get_kernels("cuda")
be = K._be
def sync(): cupy.cuda.Device().synchronize()

# 1. the ring
rng = np.random.default_rng(0)
a = rng.random((125_000_000, 3), dtype=np.float32)
ref = cupy.asarray(a); sync()
for lanes in (4, 1, 4):
    be.__dict__.pop("_ring", None); be.RING_LANES = lanes
    be.to_device(a[:1 << 24]); sync()
    ts = []
    for _ in range(3):
        t = time.perf_counter(); x = be.to_device(a); sync(); ts.append(time.perf_counter() - t)
        assert bool((x == ref).all()); del x
    out[f"ring_{lanes}_lanes_1.5GB_s"] = ts
    print("ring lanes", lanes, ts, flush=True)
del ref
# 2. the device split of a 125M block, P = 2
part = choose_partitioning(a[::100], 2)
blk = Block(0, a)
ts = []
for _ in range(3):
    t = time.perf_counter(); pieces = ex_mod.split_block_xp(cupy, be.to_device, blk, part, "float32", 0); sync()
    ts.append(time.perf_counter() - t); del pieces
out["dsplit_125M_s"] = ts; print("dsplit", ts, flush=True)
del a
cupy.get_default_memory_pool().free_all_blocks()
# 3. phase 1's certificate on a 250M box with one shared face
n = 250_000_000
pts = cupy.random.default_rng(1).random((n, 3), dtype=cupy.float32)
pts[:, 0] *= 0.5
face = (0.5 - pts[:, 0].astype(cupy.float64))
sync(); t = time.perf_counter()
res = boruvka(K, pts, 1)
sync(); out["engine_s"] = time.perf_counter() - t
s, tt, w2s = res.source, res.target, res.weight2
del pts
from emst_dask.partitioned.certificate import _first_choices, _hook
t = time.perf_counter()
order = strict_edge_order(cupy, s, tt, w2s); sync(); out["order_sort_s"] = time.perf_counter() - t
del order
safe = cupy.ldexp(face, res.exponent); safe2 = safe * safe; del safe, face
print("engine", out["engine_s"], "order (no longer in phase 1)", out["order_sort_s"], flush=True)
for name in ("first", "second"):
    sync(); t = time.perf_counter()
    c, l = boruvka_certificate(cupy, s, tt, w2s, safe2, n)
    sync(); out[f"certificate_{name}_s"] = time.perf_counter() - t
    print(name, out[f"certificate_{name}_s"], int(c.sum()), flush=True)
    out["uncertified"] = int((~c).sum())
    del c, l
# its round 1 by parts (float32 weights: the packed word), then the rest
face_key = safe2.view(cupy.int64); wkey = w2s.astype(cupy.float64).view(cupy.int64)
sync(); t = time.perf_counter()
by_u, by_v = _first_choices(cupy, s, tt, w2s, wkey, face_key, n)
sync(); out["round1_choices_s"] = time.perf_counter() - t; t = time.perf_counter()
c, l = _hook(cupy, s, tt, by_u, by_v, n, None)
sync(); out["round1_hook_s"] = time.perf_counter() - t
out["later_rounds_s"] = out["certificate_second_s"] - out["round1_choices_s"] - out["round1_hook_s"]
print({k: v for k, v in out.items() if k.startswith(("round1", "later"))}, flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "prof.json"), "w"), indent=1)
