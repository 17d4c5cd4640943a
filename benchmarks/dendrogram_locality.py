"""Does the dendrogram gain from points named in space order? (GPU)

Times ``products.dendrogram`` on the strict-ordered Euclidean tree of a
halos cloud twice: with the points named by input row (the halos rows are
in random order) and renamed by a Morton order of the points, so that the
two ends of an edge sit close in memory.  Also times the strict edge order
against one stable argsort of a packed (weight bits, larger row) key.
Checks that both namings give the same sizes and, renamed back, the same
children.

    python benchmarks/dendrogram_locality.py N OUT.json   (written under $OUT)
"""
import json, os, statistics, sys, time
import cupy, numpy as np
from emst_dask import datasets, emst
from emst_dask.engine.boruvka import Timers
from emst_dask.products.dendrogram import dendrogram
from emst_dask.products.order import strict_order

n = int(float(sys.argv[1])) if len(sys.argv) > 1 else 100_000_000
out = sys.argv[2] if len(sys.argv) > 2 else "rounds-locality.json"
sync = cupy.cuda.Device().synchronize
X = cupy.asarray(datasets.halos(n, 3, 0))
tree = emst(X, backend="cuda"); sync()
order = strict_order(tree.source, tree.target, tree.weight)
s, t = tree.source[order], tree.target[order]
del order
# a Morton order of the points: 21 bits per axis
lo, hi = X.min(axis=0), X.max(axis=0)
q = ((X - lo) / (hi - lo) * (2**21 - 1)).astype(cupy.uint64)
def spread(v):
    v = v & 0x1fffff
    v = (v | (v << 32)) & 0x1f00000000ffff
    v = (v | (v << 16)) & 0x1f0000ff0000ff
    v = (v | (v << 8)) & 0x100f00f00f00f00f
    v = (v | (v << 4)) & 0x10c30c30c30c30c3
    v = (v | (v << 2)) & 0x1249249249249249
    return v
code = spread(q[:, 0]) | (spread(q[:, 1]) << 1) | (spread(q[:, 2]) << 2)
sync(); t0 = time.perf_counter()
perm = cupy.argsort(code)
inv = cupy.empty(n, perm.dtype); inv[perm] = cupy.arange(n, dtype=perm.dtype)
sync(); t_perm = time.perf_counter() - t0
del q, code
it = s.dtype
s2, t2 = inv[s].astype(it), inv[t].astype(it)
sync(); t_relabel = time.perf_counter() - t0 - t_perm

def run(a, b, reps=3):
    dendrogram(cupy, a, b, n); sync()
    tot, ph = [], []
    for _ in range(reps):
        timers = Timers(sync=sync)
        t0 = time.perf_counter()
        r = dendrogram(cupy, a, b, n, timers); sync()
        tot.append(time.perf_counter() - t0)
        ph.append(dict(timers.seconds))
        del r
    med = {k: statistics.median(p[k] for p in ph) for k in ph[0]}
    plain = []
    for _ in range(reps):
        t0 = time.perf_counter(); r = dendrogram(cupy, a, b, n); sync()
        plain.append(time.perf_counter() - t0); del r
    return {"untimed_median": statistics.median(plain), "timed_total_median": statistics.median(tot),
            "phases_median": med}

res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "n": n,
       "dataset": "halos", "d": 3, "dtype": "float32",
       "morton_perm_seconds": t_perm, "relabel_seconds": t_relabel}
def tmed(fn, reps=3):
    fn(); sync(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); r = fn(); sync(); ts.append(time.perf_counter() - t0); del r
    return statistics.median(ts)
res["strict_order_seconds"] = tmed(lambda: strict_order(tree.source, tree.target, tree.weight))
def one_key():
    w = tree.weight.view(cupy.uint32).astype(cupy.uint64)
    hi_row = cupy.maximum(tree.source, tree.target).astype(cupy.uint64)
    return cupy.argsort((w << 32) | hi_row)
res["one_uint64_argsort_seconds"] = tmed(one_key)
res["rows"] = run(s, t)
res["morton"] = run(s2, t2)
c1, z1 = dendrogram(cupy, s, t, n)
c2, z2 = dendrogram(cupy, s2, t2, n)
res["sizes_equal"] = bool((z1 == z2).all())
back = cupy.where(c2 < n, perm[cupy.minimum(c2, n - 1)].astype(c2.dtype), c2)
back = cupy.sort(back, axis=1)
res["children_equal_after_renaming"] = bool((back == cupy.sort(c1, axis=1)).all())
print(json.dumps(res, indent=1))
os.makedirs(os.environ.get("OUT", "."), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "."), out), "w") as fh:
    json.dump(res, fh, indent=1)
