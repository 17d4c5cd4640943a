"""Parts of the partitioned job on one GPU, timed alone: the pinned ring's
host-to-device copy of 1.5 GB (one lane against four), the device split of
a 125M-point block into two boxes, and on a 250M-point box with one shared
face the engine, the strict edge order and the certificate.

    python benchmarks/phase1_parts.py      # writes $OUT/prof.json (or /tmp)
    python benchmarks/phase1_parts.py --box 500000000 --only box

``--box`` sets the box's points (its int64 arrays pass 2 GiB beyond 268M
points, where CuPy compiles its 64-bit-index kernels: the engine and the
certificate are timed twice, the first run's compiles apart).

(The run recorded in ``results/phase1-parts-h200-250M.json`` also timed
the certificate as it was before its later rounds were renumbered, from
the previous commit's ``certificate.py``: the ``*_old_*`` entries.  Since
the certificate takes no order, it is timed whole and by parts: round 1's
choices, its hook, the later rounds; then once more with each of its
helpers timed alone, synchronised, and counted: ``certificate_steps``.)
"""
import argparse, json, os, sys, time
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

ap = argparse.ArgumentParser()
ap.add_argument("--box", type=int, default=250_000_000)
ap.add_argument("--only", default="ring,split,box")
opts = ap.parse_args()
parts = set(opts.only.split(","))
xp = np
out = {"box_points": opts.box}
K = get_kernels("cuda")
be = K._be
def sync(): cupy.cuda.Device().synchronize()

# 1. the ring
rng = np.random.default_rng(0)
a = rng.random((125_000_000, 3), dtype=np.float32) if parts & {"ring", "split"} else None
ref = cupy.asarray(a) if "ring" in parts else None; sync()
for lanes in ((4, 1, 4) if "ring" in parts else ()):
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
if "split" in parts:
    part = choose_partitioning(a[::100], 2)
    blk = Block(0, a)
ts = []
for _ in range(3 if "split" in parts else 0):
    t = time.perf_counter(); pieces = ex_mod.split_block_xp(cupy, be.to_device, blk, part, "float32", 0); sync()
    ts.append(time.perf_counter() - t); del pieces
if ts:
    out["dsplit_125M_s"] = ts; print("dsplit", ts, flush=True)
del a
cupy.get_default_memory_pool().free_all_blocks()
# 3. phase 1's certificate on a box with one shared face
if "box" not in parts:
    json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "prof.json"), "w"), indent=1)
    sys.exit(0)
n = opts.box
pts = cupy.random.default_rng(1).random((n, 3), dtype=cupy.float32)
pts[:, 0] *= 0.5
face = (0.5 - pts[:, 0].astype(cupy.float64))
for name in ("first", "second"):
    sync(); t = time.perf_counter()
    res = boruvka(K, pts, 1)
    sync(); out[f"engine_{name}_s"] = time.perf_counter() - t
    print("engine", name, out[f"engine_{name}_s"], flush=True)
    if name == "first":
        del res
out["engine_s"] = out["engine_second_s"]
s, tt, w2s = res.source, res.target, res.weight2
del pts
from emst_dask.partitioned.certificate import _hook, _point_choices
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
# the later rounds on round 1's components throughout (renumbered once, as
# before they were renumbered as they thin out): the same edges and roots
import emst_dask.partitioned.certificate as cert_mod
c, l = boruvka_certificate(cupy, s, tt, w2s, safe2, n)
cert_mod.RENUMBER_AT, at = 1 << 62, cert_mod.RENUMBER_AT
for name in ("first", "second"):
    sync(); t = time.perf_counter()
    c1, l1 = boruvka_certificate(cupy, s, tt, w2s, safe2, n)
    sync(); out[f"certificate_renumbered_once_{name}_s"] = time.perf_counter() - t
assert bool((c1 == c).all()) and bool((l1 == l).all())
print("renumbered once", out["certificate_renumbered_once_second_s"], "same edges and roots",
      flush=True)
cert_mod.RENUMBER_AT = at
# round 1 as the later rounds choose (a component's word (weight, min),
# its ties by max: four scatter-mins) against a point's word (weight,
# other end): the same edges and roots
point_choices = cert_mod._point_choices
cert_mod._point_choices = lambda xp, s_, t_, w, wk, fk, m: cert_mod._choices(
    xp, s_, t_, cert_mod._order_keys(xp, s_, t_, w, True), wk, fk, m)
for name in ("first", "second"):
    sync(); t = time.perf_counter()
    c1, l1 = boruvka_certificate(cupy, s, tt, w2s, safe2, n)
    sync(); out[f"certificate_round1_by_components_{name}_s"] = time.perf_counter() - t
assert bool((c1 == c).all()) and bool((l1 == l).all())
cert_mod._point_choices = point_choices
print("round 1 as a component's", out["certificate_round1_by_components_second_s"],
      "same edges and roots", flush=True)
del c, l, c1, l1
# its round 1 by parts (float32 weights: the packed word), then the rest
face_key = safe2.view(cupy.int64); wkey = w2s.astype(cupy.float64).view(cupy.int64)
sync(); t = time.perf_counter()
by_u, by_v = _point_choices(cupy, s, tt, w2s, wkey, face_key, n)
sync(); out["round1_choices_s"] = time.perf_counter() - t; t = time.perf_counter()
c, l = _hook(cupy, s, tt, by_u, by_v, n, None)
sync(); out["round1_hook_s"] = time.perf_counter() - t
out["later_rounds_s"] = out["certificate_second_s"] - out["round1_choices_s"] - out["round1_hook_s"]
print({k: v for k, v in out.items() if k.startswith(("round1", "later"))}, flush=True)
del c, l, by_u, by_v
# the whole certificate once more, each helper timed (synchronised) and its
# calls counted: where the later rounds' time goes (nested: the scatter-mins
# inside _choices count in both)
steps = {}
def timed(name, fn):
    def run(*a, **k):
        sync(); t0 = time.perf_counter()
        r = fn(*a, **k)
        sync(); e = steps.setdefault(name, [0, 0.0]); e[0] += 1; e[1] += time.perf_counter() - t0
        return r
    return run
saved = {k: getattr(cert_mod, k) for k in ("_point_choices", "_choices", "_hook", "_renumber",
                                            "_order_keys", "scatter_min", "jump_to_roots")}
for k, fn in saved.items():
    setattr(cert_mod, k, timed(k, fn))
sync(); t = time.perf_counter()
c, l = boruvka_certificate(cupy, s, tt, w2s, safe2, n)
sync(); out["certificate_traced_s"] = time.perf_counter() - t
for k, fn in saved.items():
    setattr(cert_mod, k, fn)
out["certificate_steps"] = {k: {"calls": v[0], "s": v[1]} for k, v in steps.items()}
print("traced", out["certificate_traced_s"], out["certificate_steps"], flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "prof.json"), "w"), indent=1)
