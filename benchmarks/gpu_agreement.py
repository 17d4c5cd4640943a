"""The GPU against the CPU on adversarial clouds, drawn at random until a
time budget is spent.

    python benchmarks/gpu_agreement.py OUT.json [SEED] [SECONDS]

Families: coordinates far from the origin, quantised coordinates (many
duplicates and ties), extreme density contrast (a 1e-7 blob beside a cloud
of side 100), lattices, pools of duplicates, halos, collinear points,
uniform; float32 and float64, 2 to 8 dimensions, 2 to 300k points,
min_samples 1 to 16, some in a periodic box.  Per cloud: the tree's edges
in the strict order (weight, smaller row, larger row) equal bit for bit;
friends-of-friends labels at three lengths equal; the linkage matrix equal
(up to 60k points); with min_samples > 1, HDBSCAN* labels equal and
probabilities within 1e-6.  The CPU backend is the reference (its own tests
check it against scipy, brute force and the peers).  Writes the cases run
and every disagreement or exception, with its parameters, to OUT.json.
"""
import json
import sys
import time
import traceback

import numpy as np

from emst_dask import HDBSCAN, emst

rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
out_path = sys.argv[1]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 200.0


def cloud(kind, n, d, dtype):
    r = rng.random
    if kind == "far":
        off = rng.choice([1e4, 1e6, -1e8, 1e12]) if dtype == np.float64 else rng.choice([1e3, 1e4, -3e4])
        x = off + r((n, d)) * rng.choice([1.0, 1e-2])
    elif kind == "quantised":
        q = rng.choice([1e-3, 1 / 64, 1.0])
        x = np.round(r((n, d)) * rng.choice([1, 10, 50]) / q) * q
    elif kind == "contrast":
        k = max(1, n // 10)
        x = np.concatenate([r((n - k, d)) * 1e-7 + 0.5, r((k, d)) * 100.0])
    elif kind == "lattice":
        side = max(2, int(round(n ** (1 / d))))
        g = np.stack(np.meshgrid(*[np.arange(side)] * d, indexing="ij"), -1).reshape(-1, d)
        x = g[:n].astype(float) * rng.choice([1.0, 0.1, 3.0])
    elif kind == "duplicates":
        pool = r((max(1, n // 20), d))
        x = pool[rng.integers(0, pool.shape[0], n)]
    elif kind == "halos":
        c = r((max(1, n // 500), d))
        x = c[rng.integers(0, c.shape[0], n)] + rng.normal(0, 0.01, (n, d)) * rng.random((n, 1))
    elif kind == "collinear":
        x = np.outer(r(n), rng.normal(size=d)) + rng.normal(size=d)
    else:
        x = r((n, d))
    return np.ascontiguousarray(x.astype(dtype))


def key(t):
    import cupy
    s = cupy.asnumpy(t.source) if not isinstance(t.source, np.ndarray) else t.source
    tt = cupy.asnumpy(t.target) if not isinstance(t.target, np.ndarray) else t.target
    w = cupy.asnumpy(t.weight) if not isinstance(t.weight, np.ndarray) else t.weight
    a, b = np.minimum(s, tt), np.maximum(s, tt)
    o = np.lexsort((b, a, w))
    return a[o], b[o], w[o]


def host(a):
    import cupy
    return cupy.asnumpy(a) if not isinstance(a, np.ndarray) else a


def same_partition(a, b):
    return np.array_equal(host(a), host(b))


def device_name():
    import cupy
    return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()


results = {"device": device_name(), "seed": int(sys.argv[2]) if len(sys.argv) > 2 else 0,
           "seconds": budget, "cases": 0, "failures": [], "by_kind": {}}
t_end = time.time() + budget
kinds = ["far", "quantised", "contrast", "lattice", "duplicates", "halos", "collinear", "uniform"]
while time.time() < t_end:
    kind = kinds[rng.integers(len(kinds))]
    dtype = [np.float32, np.float64][rng.integers(2)]
    d = int(rng.choice([2, 3, 3, 3, 5, 8])) if dtype == np.float64 else int(rng.choice([2, 3, 3, 8]))
    n = int(rng.choice([2, 3, 17, 500, 5000, 60000, 300000]))
    ms = int(rng.choice([1, 1, 2, 5, 16]))
    periodic = kind in ("uniform", "halos", "quantised") and d <= 3 and rng.random() < 0.3
    x = cloud(kind, n, d, dtype)
    box = None
    if periodic:
        box = 1.0 if kind != "quantised" else float(np.ceil(x.max()) + 1)
        x = np.mod(x, box).astype(dtype)
    case = dict(kind=kind, dtype=np.dtype(dtype).name, n=n, d=d, min_samples=ms, box=box)
    try:
        ms_eff = min(ms, n)
        ref = emst(x, min_samples=ms_eff, box_size=box, backend="cpu")
        import cupy
        gpu = emst(cupy.asarray(x), min_samples=ms_eff, box_size=box, backend="cuda")
        a1, b1, w1 = key(ref)
        a2, b2, w2 = key(gpu)
        ok = (a1.size == a2.size and np.array_equal(w1, w2) and np.array_equal(a1, a2)
              and np.array_equal(b1, b2))
        if not ok:
            case["why"] = ("edges differ: totals cpu %.17g gpu %.17g"
                           % (w1.astype(np.float64).sum(), w2.astype(np.float64).sum()))
            results["failures"].append(case)
        elif n > 2:
            ws = np.sort(w1.astype(np.float64))
            bs = [float(ws[len(ws) // 4]), float(ws[len(ws) // 2]), float(ws[-1])]
            f1, f2 = ref.fof(bs), gpu.fof(bs)
            if not same_partition(f1, f2):
                case["why"] = "fof differs"
                results["failures"].append(case)
            if n <= 60000:
                z1, z2 = ref.linkage(), gpu.linkage()
                if not np.array_equal(host(z1), host(z2)):
                    case["why"] = "linkage differs"
                    results["failures"].append(case)
            if n >= 17 and ms > 1:
                mcs = int(rng.choice([5, 10, 50]))
                h1 = HDBSCAN(min_cluster_size=mcs, min_samples=ms_eff, backend="cpu").fit(x)
                h2 = HDBSCAN(min_cluster_size=mcs, min_samples=ms_eff, backend="cuda").fit(x)
                if not (np.array_equal(h1.labels_, h2.labels_)
                        and np.allclose(h1.probabilities_, h2.probabilities_, atol=1e-6)):
                    case["why"] = "hdbscan differs (mcs %d): labels equal %s" % (
                        mcs, np.array_equal(h1.labels_, h2.labels_))
                    results["failures"].append(case)
    except Exception as e:  # noqa: BLE001
        case["why"] = "raised " + type(e).__name__ + ": " + str(e)[:300]
        case["tb"] = traceback.format_exc()[-1500:]
        results["failures"].append(case)
    results["cases"] += 1
    results["by_kind"][kind] = results["by_kind"].get(kind, 0) + 1
    json.dump(results, open(out_path, "w"), indent=1)
print(json.dumps({k: v for k, v in results.items() if k != "failures"}), len(results["failures"]),
      "failures")
for f in results["failures"][:20]:
    print({k: v for k, v in f.items() if k != "tb"})
