"""The friends-of-friends halo catalogue of a periodic snapshot: the tree, then
the catalogue beyond the tree.

    python benchmarks/fof_gpu.py --n 100e6                    # on the GPU (halos, 3-D)
    python benchmarks/fof_gpu.py --n 1e6 --backend cpu        # the CPU version

The cloud is ``emst_dask.datasets.halos`` (3-D float32, seed 0) in the unit
box, b = 0.2 mean separations (relative), ``min_members`` 20, with
velocities (a second (n, 3) float32 array), on the device for ``cuda``.
Each figure is the median of ``--repeats`` runs after an untimed warm-up,
the device synchronised around each:

* ``tree``: ``emst(points, box_size=1.0)``, the periodic tree (when the
  engine has it; else the open-box tree, and ``periodic`` is false);
* ``tree_open``: ``emst(points)``, the non-periodic tree, for comparison;
* ``catalogue``: ``emst_dask.fof(points, 0.2, box_size=1.0, tree=tree,
  velocities=...)`` given the tree: the checks (points in the box), the
  labels, the unwrapping and the catalogue; with its phases;
* ``catalogue_8``: the same at 8 linking lengths at once;
* ``catalogue_box_proxy``: (only without the periodic engine) the
  catalogue with ``box_size=1.0`` on the open-box tree, declared periodic:
  the groups are the open box's, but every phase (the unwrapping included)
  does the work it does on a periodic tree of the same cloud, up to the
  few edges that cross the faces;
* ``scipy``: (``--scipy``, default for n <= 2M) the groups from scipy
  instead: ``cKDTree(points, boxsize=1).query_pairs(b)`` and
  ``connected_components``, timed once, its partition compared with ours.

Writes JSON (machine, every number) to ``--out`` and prints a table.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def machine(backend):
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "cpu_count": os.cpu_count(), "numpy": np.__version__,
            "load_average": list(os.getloadavg())}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in fh
                               if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if backend == "cuda":
        import cupy

        info["device"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        info["cupy"] = cupy.__version__
    return info


def main():
    import emst_dask
    from emst_dask import datasets, emst
    from emst_dask.engine import spanning_tree

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=100_000_000)
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--b", type=float, default=0.2, help="relative linking length")
    p.add_argument("--min-members", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--scipy", default=None, action=argparse.BooleanOptionalAction,
                   help="also time scipy's radius-graph components (default: n <= 2M)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    periodic = "box_size" in inspect.signature(spanning_tree).parameters
    gpu = a.backend == "cuda"
    if gpu:
        import cupy

        def sync():
            cupy.cuda.Device().synchronize()
    else:
        def sync():
            pass

    def timed(fn, repeats=a.repeats):
        fn()
        sync()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = fn()
            sync()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts), r

    warm = datasets.halos(20_000, 3, 1)
    warm[warm >= 1] = 0
    box = 1.0 if periodic else None
    emst_dask.fof(warm, a.b, box_size=box, backend=a.backend)  # compile, untimed

    t0 = time.perf_counter()
    X = datasets.halos(a.n, 3, 0)
    X[X >= 1] = 0  # float32 % 1.0 may round up to 1.0
    V = np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)
    gen = time.perf_counter() - t0
    if gpu:
        X, V = cupy.asarray(X), cupy.asarray(V)
    res = {"machine": machine(a.backend), "backend": a.backend, "n": a.n, "d": 3,
           "dataset": "halos", "dtype": "float32", "b_relative": a.b,
           "min_members": a.min_members, "periodic": periodic, "repeats": a.repeats,
           "generate_seconds": gen}

    options = {"box_size": 1.0} if periodic else {}
    res["tree"], tree = timed(lambda: emst(X, backend=a.backend, **options))
    if periodic:
        res["tree_open"], _ = timed(lambda: emst(X, backend=a.backend))
        res["tree/tree_open"] = res["tree"] / res["tree_open"]

    def catalogue(b):
        return emst_dask.fof(X, b, box_size=box, min_members=a.min_members, velocities=V,
                             tree=tree)

    res["catalogue"], cat = timed(lambda: catalogue(a.b))
    res["catalogue_phases"] = {k: float(v) for k, v in cat.timings.items()}
    res["catalogue/tree"] = res["catalogue"] / res["tree"]
    if not periodic:
        proxy = tree.__class__(**{k: getattr(tree, k) for k in tree.__dataclass_fields__})
        proxy.box_size = np.ones(3)
        res["catalogue_box_proxy"], pc = timed(lambda: emst_dask.fof(
            X, a.b, box_size=1.0, min_members=a.min_members, velocities=V, tree=proxy))
        res["catalogue_box_proxy_phases"] = {k: float(v) for k, v in pc.timings.items()}
        res["catalogue_box_proxy/tree"] = res["catalogue_box_proxy"] / res["tree"]
    many = [a.b * (0.5 + 0.25 * i) for i in range(8)]
    res["catalogue_8"], _ = timed(lambda: catalogue(many))
    host = cat.to_host()
    summary = host.summary()[0]
    res.update(linking_length_absolute=float(host.linking_length[0]), groups=summary["groups"],
               largest=summary["largest"], fraction_in_groups=summary["fraction"])

    if a.scipy if a.scipy is not None else a.n <= 2_000_000:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components
        from scipy.spatial import cKDTree

        pts = np.asarray(X.get() if gpu else X, np.float64)
        b = float(host.linking_length[0])
        t0 = time.perf_counter()
        kd = cKDTree(pts, boxsize=1.0 if periodic else None)
        pairs = kd.query_pairs(b, output_type="ndarray")
        g = coo_matrix((np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])),
                       shape=(a.n, a.n))
        comp = connected_components(g, directed=False)[1]
        res["scipy"] = time.perf_counter() - t0
        res["scipy_pairs"] = int(len(pairs))
        sizes = np.bincount(comp)
        big = sizes[comp] >= a.min_members
        ours = host.labels
        same = np.array_equal(big, ours >= 0)
        pairs_ = set(zip(comp[big].tolist(), ours[big].tolist())) if same else set()
        res["scipy_agrees"] = bool(same and len(pairs_) == summary["groups"]
                                   == len(set(comp[big].tolist())))
        res["scipy/(tree+catalogue)"] = res["scipy"] / (res["tree"] + res["catalogue"])

    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"fof-{a.backend}-{a.n}.json")
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    where = res["machine"].get("device") or f"{res['machine']['cpu_count']}-core CPU"
    print(f"{where}: halos n={a.n} 3-D float32, b={a.b} relative "
          f"({res['linking_length_absolute']:.4g}), periodic={periodic}")
    for k in ("tree", "tree_open", "catalogue", "catalogue_box_proxy", "catalogue_8", "scipy"):
        if k in res:
            print(f"  {k:<14s} {res[k]:9.4f} s")
    print("  catalogue phases: " + ", ".join(f"{k} {v:.4f}" for k, v in
                                             res["catalogue_phases"].items()))
    if "catalogue_box_proxy_phases" in res:
        print("  box proxy phases: " + ", ".join(f"{k} {v:.4f}" for k, v in
                                                res["catalogue_box_proxy_phases"].items()))
    print(f"  catalogue/tree {res['catalogue/tree']:.3f}"
          + (f", tree/tree_open {res['tree/tree_open']:.3f}" if periodic else ""))
    print(f"  {res['groups']} groups, largest {res['largest']}, "
          f"{100 * res['fraction_in_groups']:.1f}% of the points in groups"
          + (f"; scipy agrees: {res['scipy_agrees']}" if "scipy" in res else ""))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
