"""The products of a tree on a GPU: single linkage, friends-of-friends cuts,
HDBSCAN*, against the EMST of the same cloud.

    python benchmarks/products_gpu.py --n 30e6

Points on the device (halos, 3-D float32, seed 0); each figure the median of
``--repeats`` runs after a warm-up, the device synchronised around each:

* ``emst``: the Euclidean tree, and the mutual-reachability tree of
  ``--min-samples``;
* ``linkage``: ``tree.linkage()`` of the Euclidean tree, on the device (the
  strict sort and the parallel dendrogram), with the device memory it
  takes beyond the tree; ``--check`` compares it with the host's union-find;
* ``emst_recorded``, ``linkage_recorded``: the Euclidean tree recording
  Borůvka's picks (``hierarchy=True``) and ``tree.linkage()`` from them (no
  sort, no rounds), with its cost beyond the plain tree
  (``emst_recorded - emst + linkage_recorded``); ``--check`` compares the
  matrix with the host's union-find in the tree's own edge order and the
  heights with the sorted matrix's;
* ``fof_1``, ``fof_8``: ``tree.fof(b)`` at b = 0.2 mean spacings, and at 8
  lengths at once (0.5 b to 2.25 b), on the device; ``fof_1_longest`` one
  cut at the longest of the eight (the same edges joined);
* ``hdbscan_extract``: HDBSCAN* clusters (labels, probabilities, GLOSH) from
  the mutual-reachability tree on the device, with the device memory it
  takes beyond the tree; ``--check`` compares them with the host's;
* ``emst_mrd_recorded``, ``hdbscan_extract_recorded``: the
  mutual-reachability tree recording Borůvka's picks (``hierarchy=True``)
  and the clusters from it (no dendrogram rounds); ``--check`` compares
  them with the clusters of the unrecorded tree;
* ``hdbscan`` (``--hdbscan``): ``HDBSCAN(min_cluster_size, min_samples,
  backend="cuda").fit`` end to end (points on the device, attributes on
  the host), and its part beyond the tree.

Device memory beyond the tree, per point: the pool's growth during the
operation (``*_bytes_per_point*``: blocks it could not reuse included) and
the most bytes in use (``in_use_bytes_per_point_beyond_tree``).

Writes JSON (device, every number) to ``--out`` and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from peak_memory import device_peak_beyond  # noqa: E402 (this folder)


def main():
    import cupy
    import numpy

    from emst_dask import HDBSCAN, datasets, emst

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=30_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-samples", type=int, default=10)
    p.add_argument("--min-cluster-size", type=int, default=100)
    p.add_argument("--out", default="products-gpu.json")
    p.add_argument("--check", action="store_true",
                   help="compare the device linkage with the host union-find")
    p.add_argument("--hdbscan", default=True, action=argparse.BooleanOptionalAction)
    a = p.parse_args()
    pool = cupy.get_default_memory_pool()

    in_use = {}

    def device_bytes(fn, name):
        """Device memory an operation takes beyond what is held before it:
        the pool's size after it, grown from empty (its peak, blocks the
        pool could not reuse included); the most bytes in use beyond those
        held before goes to ``in_use[name]``."""
        cupy.cuda.Device().synchronize()
        pool.free_all_blocks()
        held = pool.used_bytes()
        r, peak = device_peak_beyond(fn)
        grown = pool.total_bytes() - held
        in_use[name] = peak / a.n
        del r
        return grown

    def timed(fn):
        fn()
        cupy.cuda.Device().synchronize()
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            r = fn()
            cupy.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts), r

    t0 = time.perf_counter()
    X = cupy.asarray(datasets.halos(a.n, 3, 0))
    gen = time.perf_counter() - t0
    spacing = float((1.0 / a.n) ** (1 / 3))
    res = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "n": a.n, "d": 3, "dataset": "halos", "dtype": "float32", "repeats": a.repeats,
           "generate_seconds": gen}
    res["emst"], tree = timed(lambda: emst(X, backend="cuda"))
    res["emst_mrd"], mr_tree = timed(lambda: emst(X, min_samples=a.min_samples,
                                                  backend="cuda"))
    res["linkage"], Z = timed(lambda: tree.linkage())
    del Z
    from emst_dask.products.dendrogram import dendrogram
    from emst_dask.products.order import strict_order

    def phases():
        t_sort, order = timed(lambda: strict_order(tree.source, tree.target, tree.weight))
        s, t = tree.source[order], tree.target[order]
        del order
        t_dendrogram = timed(lambda: dendrogram(cupy, s, t, a.n))[0]
        from emst_dask.engine.boruvka import Timers

        timers = Timers(sync=cupy.cuda.Device().synchronize)
        dendrogram(cupy, s, t, a.n, timers)
        return t_sort, t_dendrogram, {k: round(v, 4) for k, v in timers.seconds.items()}

    res["linkage_sort"], res["linkage_dendrogram"], res["dendrogram_phases"] = phases()
    res["linkage_bytes_per_point_beyond_tree"] = device_bytes(tree.linkage, "linkage") / a.n
    res["linkage_output_bytes_per_point"] = (a.n - 1) * 32 / a.n
    if a.check:
        from emst_dask.products.linkage import single_linkage

        t0 = time.perf_counter()
        host = single_linkage(tree.source.get(), tree.target.get(), tree.weight.get(), a.n)
        res["linkage_host"] = time.perf_counter() - t0
        res["linkage_equals_host"] = bool((tree.linkage().get() == host).all())
        del host
    res["emst_recorded"], rec = timed(lambda: emst(X, backend="cuda", hierarchy=True))
    res["emst_recorded_phases"] = {k: round(v, 4) for k, v in rec.timings.items()}
    res["linkage_recorded"], Z = timed(lambda: rec.linkage())
    del Z
    res["linkage_recorded_bytes_per_point_beyond_tree"] = device_bytes(rec.linkage, "linkage_recorded") / a.n
    res["linkage_recorded_beyond_plain_tree"] = (res["emst_recorded"] - res["emst"]
                                                 + res["linkage_recorded"])
    if a.check:
        from emst_dask.products._uf import linkage_merges

        s, t, w = rec.source.get(), rec.target.get(), rec.weight.get()
        host, _ = linkage_merges(s, t, w, numpy.arange(a.n - 1), a.n)
        got = rec.linkage().get()
        res["linkage_recorded_equals_host_in_tree_order"] = bool((got == host).all())
        res["linkage_recorded_heights_equal_sorted"] = bool(
            (got[:, 2] == tree.linkage()[:, 2].get()).all())
        del host, got, s, t, w
    rec = None
    b = 0.2 * spacing
    res["fof_1"], one = timed(lambda: tree.fof(b))
    eight = [b * (0.5 + 0.25 * i) for i in range(8)]
    res["fof_8"], _ = timed(lambda: tree.fof(eight))
    # one cut at the longest of the eight: the same edges joined as the eight
    res["fof_1_longest"], _ = timed(lambda: tree.fof(eight[-1]))
    res["fof_8_bytes_per_point"] = device_bytes(lambda: tree.fof(eight), "fof_8") / a.n
    res["fof_1_groups"] = int(one.max()) + 1
    res["ratios"] = {"linkage/emst": res["linkage"] / res["emst"],
                     "linkage_recorded/emst": res["linkage_recorded"] / res["emst"],
                     "linkage_recorded_beyond_plain_tree/emst":
                         res["linkage_recorded_beyond_plain_tree"] / res["emst"],
                     "fof_1/emst": res["fof_1"] / res["emst"],
                     "fof_8/fof_1": res["fof_8"] / res["fof_1"],
                     "fof_8/fof_1_longest": res["fof_8"] / res["fof_1_longest"]}
    from emst_dask.products.hdbscan import extract

    def clusters():
        return extract(mr_tree.source, mr_tree.target, mr_tree.weight, a.n,
                       a.min_cluster_size)

    res["hdbscan_extract"], got = timed(clusters)
    res["hdbscan_extract_clusters"] = int(got.n_clusters)
    res["hdbscan_extract_phases"] = {k: round(v, 4) for k, v in got.timings.items()}
    del got
    res["hdbscan_extract_bytes_per_point_beyond_tree"] = device_bytes(clusters, "hdbscan_extract") / a.n
    res["ratios"]["hdbscan_extract/emst_mrd"] = res["hdbscan_extract"] / res["emst_mrd"]
    if a.check:
        t0 = time.perf_counter()
        host = extract(mr_tree.source.get(), mr_tree.target.get(), mr_tree.weight.get(), a.n,
                       a.min_cluster_size)
        res["hdbscan_extract_host"] = time.perf_counter() - t0
        dev = clusters()
        res["hdbscan_extract_equals_host"] = bool(
            (dev.labels.get() == host.labels).all()
            and (dev.probabilities.get() == host.probabilities).all()
            and (dev.outlier_scores.get() == host.outlier_scores).all())
        del host, dev
    # the same clusters from a tree whose Borůvka recorded its picks: the
    # dendrogram runs no rounds of its own (what the estimator does)
    res["emst_mrd_recorded"], rec = timed(lambda: emst(X, min_samples=a.min_samples,
                                                       backend="cuda", hierarchy=True))

    def recorded():
        return extract(rec.source, rec.target, rec.weight, a.n, a.min_cluster_size,
                       hierarchy=rec.hierarchy)

    res["hdbscan_extract_recorded"], got = timed(recorded)
    res["hdbscan_extract_recorded_phases"] = {k: round(v, 4) for k, v in got.timings.items()}
    del got
    res["hdbscan_extract_recorded_bytes_per_point_beyond_tree"] = device_bytes(recorded, "hdbscan_extract_recorded") / a.n
    res["ratios"]["hdbscan_extract_recorded/emst_mrd"] = (res["hdbscan_extract_recorded"]
                                                         / res["emst_mrd"])
    # the recording counted: what the clusters cost beyond the plain tree
    res["hdbscan_extract_recorded_beyond_plain_tree"] = (
        res["emst_mrd_recorded"] - res["emst_mrd"] + res["hdbscan_extract_recorded"])
    res["ratios"]["hdbscan_extract_recorded_beyond_plain_tree/emst_mrd"] = (
        res["hdbscan_extract_recorded_beyond_plain_tree"] / res["emst_mrd"])
    if a.check:
        dev, ref = recorded(), clusters()
        res["hdbscan_extract_recorded_equals_unrecorded"] = bool(
            (dev.labels == ref.labels).all() and (dev.probabilities == ref.probabilities).all()
            and (dev.outlier_scores == ref.outlier_scores).all())
        del dev, ref
    rec = None
    mr_tree = None  # frees the tree before the estimator computes its own
    if a.hdbscan:
        est = HDBSCAN(min_cluster_size=a.min_cluster_size, min_samples=a.min_samples,
                      backend="cuda")
        res["hdbscan"], fitted = timed(lambda: est.fit(X))
        res["hdbscan_beyond_tree"] = res["hdbscan"] - res["emst_mrd"]
        res["hdbscan_clusters"] = int(fitted.labels_.max()) + 1
        res["ratios"]["hdbscan_beyond_tree/emst_mrd"] = (res["hdbscan_beyond_tree"]
                                                        / res["emst_mrd"])
    res["in_use_bytes_per_point_beyond_tree"] = in_use
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"device {res['device']}, halos n={a.n} 3-D float32 on the device")
    for k in ("emst", "emst_mrd", "linkage", "linkage_sort", "linkage_dendrogram",
              "emst_recorded", "linkage_recorded", "linkage_recorded_beyond_plain_tree",
              "linkage_host", "fof_1", "fof_1_longest", "fof_8", "hdbscan_extract", "hdbscan_extract_host",
              "emst_mrd_recorded", "hdbscan_extract_recorded",
              "hdbscan", "hdbscan_beyond_tree"):
        if k in res:
            print(f"  {k:<22s} {res[k]:8.4f} s")
    for k, v in res["ratios"].items():
        print(f"  {k:<30s} {v:6.3f}")
    print(f"  linkage: {res['linkage_bytes_per_point_beyond_tree']:.1f} B/point beyond the "
          f"tree ({res['linkage_output_bytes_per_point']:.1f} of them the matrix); "
          f"equals host: {res.get('linkage_equals_host')}")
    print(f"  linkage from the recorded picks: "
          f"{res['linkage_recorded_bytes_per_point_beyond_tree']:.1f} B/point beyond the tree; "
          f"equals the host in the tree's order: "
          f"{res.get('linkage_recorded_equals_host_in_tree_order')}, heights equal the "
          f"sorted matrix's: {res.get('linkage_recorded_heights_equal_sorted')}; "
          f"recorded tree phases {res['emst_recorded_phases']}")
    print(f"  fof_8: {res['fof_8_bytes_per_point']:.1f} B/point on the device "
          f"(64 of them the (8, n) labels)")
    print(f"  dendrogram phases: {res['dendrogram_phases']}")
    print(f"  hdbscan extract phases: {res['hdbscan_extract_phases']}")
    print(f"  recorded extract phases: {res['hdbscan_extract_recorded_phases']}; "
          f"{res['hdbscan_extract_recorded_bytes_per_point_beyond_tree']:.1f} B/point; "
          f"equals unrecorded: {res.get('hdbscan_extract_recorded_equals_unrecorded')}")
    print(f"  hdbscan extract: "
          f"{res['hdbscan_extract_bytes_per_point_beyond_tree']:.1f} B/point beyond the tree; "
          f"{res['hdbscan_extract_clusters']} clusters; equals host: "
          f"{res.get('hdbscan_extract_equals_host')}")
    print(f"  {res.get('hdbscan_clusters')} clusters; {res['fof_1_groups']} FoF groups at b=0.2")
    print("  most bytes in use beyond the tree, per point: "
          + ", ".join(f"{k} {v:.1f}" for k, v in in_use.items()))


if __name__ == "__main__":
    main()
