"""The friends-of-friends halo catalogue of a periodic snapshot: the tree, then
the catalogue beyond the tree.

    python benchmarks/fof_gpu.py --n 100e6                    # on the GPU (halos, 3-D)
    python benchmarks/fof_gpu.py --n 1e6 --backend cpu        # the CPU version
    python benchmarks/fof_gpu.py --n 100e6 --dataset cosmic halos --b 0.2 0.7 \
        --statistics --out fof-products.json                   # both clouds, both lengths

The cloud is ``emst_dask.datasets.halos`` (3-D float32, seed 0) in the unit
box, b = 0.2 mean separations (relative), ``min_members`` 20, with
velocities (a second (n, 3) float32 array), on the device for ``cuda``.
Each figure is the median of ``--repeats`` runs after an untimed warm-up,
the device synchronised around each:

* ``tree``: ``emst(points, box_size=1.0)``, the periodic tree;
* ``catalogue``: ``emst_dask.fof(points, 0.2, box_size=1.0, tree=tree,
  velocities=...)`` given the tree: the checks (points in the box), the
  labels, the unwrapping and the catalogue; with its phases;
* ``catalogue_8`` (``--eight``): the same at 8 linking lengths at once;
* ``fof_own_tree``: ``fof(points, b, box_size=1.0, min_members=...)``
  computing its own tree, and ``fof_own_tree_beyond_tree`` (that less the
  tree), each against the tree (``*/tree``);
* ``check``: ``check_weights_of`` alone, the given tree's check;
* ``statistics`` (``--statistics``): ``tree.statistics(points,
  box_size=1.0)``, with ``statistics_no_points`` (the tree alone);
* ``scipy``: (``--scipy``, default for n <= 2M) the groups from scipy
  instead: ``cKDTree(points, boxsize=1).query_pairs(b)`` and
  ``connected_components``, timed once, its partition compared with ours.

``--dataset`` takes ``halos`` (``emst_dask.datasets.halos``) and ``cosmic``
(``emst_dask.datasets_cosmic``, generated in chunks on ``--jobs``
processes; ``--n-cosmic`` its own size), ``--b`` one or more relative
lengths: one row per (dataset, b) under ``runs``, the first also at the top
level as before.  Writes JSON (machine, every number) to ``--out`` and
prints a table.
"""
from __future__ import annotations

import argparse
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


def cosmic_cloud(n, jobs):
    """(points, velocities) of ``datasets_cosmic``'s snapshot of n, its
    chunks made on ``jobs`` processes (spawned: no device state is shared)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from emst_dask import datasets_cosmic as dc

    dc.model(n)  # the shared part once here (the processes make their own)
    chunks = range(dc.n_chunks(n))
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
            parts = list(ex.map(dc.chunk, [n] * len(chunks), chunks))
    else:
        parts = [dc.chunk(n, c) for c in chunks]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def halos_cloud(n):
    from emst_dask import datasets

    X = datasets.halos(n, 3, 0)
    X[X >= 1] = 0  # float32 % 1.0 may round up to 1.0
    return X, np.random.default_rng(1).standard_normal(X.shape).astype(np.float32)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=100_000_000)
    p.add_argument("--n-cosmic", type=lambda s: int(float(s)), default=None,
                   help="points of the cosmic snapshot (default --n)")
    p.add_argument("--dataset", nargs="+", default=["halos"], choices=["halos", "cosmic"])
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--b", type=float, nargs="+", default=[0.2],
                   help="relative linking lengths, one run each")
    p.add_argument("--min-members", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1),
                   help="processes generating the cosmic snapshot")
    p.add_argument("--statistics", action="store_true", help="also tree.statistics(points)")
    p.add_argument("--eight", action="store_true", help="also 8 lengths at once")
    p.add_argument("--scipy", default=None, action=argparse.BooleanOptionalAction,
                   help="also time scipy's radius-graph components (default: n <= 2M)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    clouds = {}  # made before the device is touched (the processes are spawned anyway)
    for name in a.dataset:
        t0 = time.perf_counter()
        n = a.n_cosmic or a.n if name == "cosmic" else a.n
        clouds[name] = (cosmic_cloud(n, a.jobs) if name == "cosmic" else halos_cloud(n)) \
            + (time.perf_counter() - t0,)
        print(f"generated {name} n={n} in {clouds[name][2]:.1f} s", flush=True)

    import emst_dask
    from emst_dask import emst
    from emst_dask.products.tree_checks import check_weights_of

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

    warm = halos_cloud(20_000)[0]
    emst_dask.fof(warm, 0.2, box_size=1.0, backend=a.backend)  # compile, untimed
    emst(warm, backend=a.backend, box_size=1.0).statistics(warm)
    res = {"machine": machine(a.backend), "backend": a.backend, "d": 3, "dtype": "float32",
           "min_members": a.min_members, "periodic": True, "repeats": a.repeats, "runs": []}
    box = np.ones(3)
    for name, (X, V, gen) in clouds.items():
        if gpu:
            X, V = cupy.asarray(X), cupy.asarray(V)
        n = int(X.shape[0])
        base = {"dataset": name, "n": n, "generate_seconds": gen}
        base["tree"], tree = timed(lambda: emst(X, backend=a.backend, box_size=1.0))
        base["check"], _ = timed(lambda: check_weights_of(tree, X, box))
        base["check/tree"] = base["check"] / base["tree"]
        if a.statistics:
            base["statistics"], _ = timed(lambda: tree.statistics(X, box_size=1.0))
            base["statistics/tree"] = base["statistics"] / base["tree"]
            base["statistics_no_points"], _ = timed(lambda: tree.statistics())
        for b in a.b:
            run = dict(base, b_relative=b)
            kw = dict(box_size=1.0, min_members=a.min_members, velocities=V)
            run["catalogue"], cat = timed(lambda: emst_dask.fof(X, b, tree=tree, **kw))
            run["catalogue_phases"] = {k: float(v) for k, v in cat.timings.items()}
            run["catalogue/tree"] = run["catalogue"] / run["tree"]
            run["fof_own_tree"], own = timed(lambda: emst_dask.fof(X, b, backend=a.backend,
                                                                   **kw))
            run["fof_own_tree_phases"] = {k: float(v) for k, v in own.timings.items()}
            run["fof_own_tree_beyond_tree"] = run["fof_own_tree"] - run["tree"]
            run["fof_own_tree_beyond_tree/tree"] = run["fof_own_tree_beyond_tree"] / run["tree"]
            if a.eight:
                many = [b * (0.5 + 0.25 * i) for i in range(8)]
                run["catalogue_8"], _ = timed(lambda: emst_dask.fof(X, many, tree=tree, **kw))
            host = cat.to_host()
            summary = host.summary()[0]
            run.update(linking_length_absolute=float(host.linking_length[0]),
                       groups=summary["groups"], largest=summary["largest"],
                       fraction_in_groups=summary["fraction"])
            if a.scipy if a.scipy is not None else n <= 2_000_000:
                run.update(scipy_check(X.get() if gpu else X, host, a.min_members))
                run["scipy/(tree+catalogue)"] = run["scipy"] / (run["tree"] + run["catalogue"])
            res["runs"].append(run)
            show(res["machine"], run)
        del tree, X, V
    for k, v in res["runs"][0].items():  # the first run at the top level, as before
        res.setdefault(k, v)
    out = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"fof-{a.backend}-{a.n}.json")
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"wrote {out}")


def scipy_check(pts, host, min_members):
    """scipy's periodic radius-graph groups: seconds, and whether they are ours."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial import cKDTree

    pts = np.asarray(pts, np.float64)
    n = len(pts)
    b = float(host.linking_length[0])
    t0 = time.perf_counter()
    pairs = cKDTree(pts, boxsize=1.0).query_pairs(b, output_type="ndarray")
    g = coo_matrix((np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    comp = connected_components(g, directed=False)[1]
    seconds = time.perf_counter() - t0
    big = np.bincount(comp)[comp] >= min_members
    ours = host.labels
    same = np.array_equal(big, ours >= 0)
    pairs_ = set(zip(comp[big].tolist(), ours[big].tolist())) if same else set()
    agrees = bool(same and len(pairs_) == host.n_groups == len(set(comp[big].tolist())))
    return {"scipy": seconds, "scipy_pairs": int(len(pairs)), "scipy_agrees": agrees}


def show(mach, r):
    where = mach.get("device") or f"{mach['cpu_count']}-core CPU"
    print(f"{where}: {r['dataset']} n={r['n']} 3-D float32, b={r['b_relative']} relative "
          f"({r['linking_length_absolute']:.4g}), periodic unit box")
    for k in ("tree", "check", "catalogue", "fof_own_tree", "fof_own_tree_beyond_tree",
              "statistics", "statistics_no_points", "catalogue_8", "scipy"):
        if k in r:
            ratio = f"  ({r[k] / r['tree']:.3f}x the tree)" if k != "tree" else ""
            print(f"  {k:<26s} {r[k]:9.4f} s{ratio}")
    print("  catalogue phases: " + ", ".join(f"{k} {v:.4f}" for k, v in
                                             r["catalogue_phases"].items()))
    print(f"  {r['groups']} groups, largest {r['largest']}, "
          f"{100 * r['fraction_in_groups']:.1f}% of the points in groups"
          + (f"; scipy agrees: {r['scipy_agrees']}" if "scipy" in r else ""), flush=True)


if __name__ == "__main__":
    main()
