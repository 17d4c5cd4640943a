"""A clustered periodic snapshot (``emst_dask.datasets_cosmic``) written as
Gadget-style HDF5 (one file, and a set of files) and as Zarr, then timed:
the halo catalogue and the MST statistics against the tree, and reading
the snapshot through the service from HDF5 against Zarr.

    python benchmarks/snapshots.py --n 1e6                    # CPU, 2 cores
    python benchmarks/snapshots.py --n 1e6 --write-only --dir /data/snap

The snapshot is written chunk by chunk (``datasets_cosmic.chunk``, one
chunk of ``CHUNK_ROWS`` rows at a time, so n is not bounded by memory):

* ``DIR/cosmic.hdf5``: one file, ``Header`` (``BoxSize`` 1,
  ``NumPart_Total``, ``NumFilesPerSnapshot`` 1) and ``PartType1`` with
  ``Coordinates`` (n, 3) float32, ``Velocities`` (n, 3) float32,
  ``ParticleIDs`` (n,) uint64;
* ``DIR/cosmic_multi.K.hdf5``: the same rows over ``--files`` files;
* ``DIR/cosmic.zarr``: the package's own snapshot writer (``io.snapshot``:
  checksummed chunks of 1M rows) with ``BoxSize`` 1, plus ``Velocities``
  and ``ParticleIDs``.

Figures (each the median of ``--repeats`` runs after an untimed warm-up
that compiles the kernels):

* the groups at b = 0.2 (relative), ``min_members`` 20: their number, the
  fraction of the points in them, the smallest and largest;
* ``tree``: ``emst(x, box_size=1.0)``;
* ``catalogue``: ``fof(x, 0.2, box_size=1.0, min_members=20, velocities=v,
  tree=tree)`` (the given tree's check, labels, unwrapping, catalogue);
  ``catalogue_ids``: the same with ``ids=`` (the members' IDs by group);
  ``fof_own_tree - tree``: ``fof`` computing its own tree, less its tree;
* ``statistics``: ``tree.statistics(x, box_size=1.0)``;
* ``read_*``: ``emst(SOURCE, box_size="snapshot")`` on an embedded cluster
  of one worker; the seconds of its read step (staging and checks; the
  files in the page cache after the warm-up), for each source.

Writes JSON to ``--out`` (default ``benchmarks/results/snapshots-cpu.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def write_hdf5(path_or_stem, n, seed, files=1):
    """The snapshot as Gadget-style HDF5, chunk by chunk; the files' paths."""
    import h5py

    from emst_dask import datasets_cosmic as dc

    cuts = np.linspace(0, n, files + 1).astype(np.int64)
    paths = [path_or_stem if files == 1 else f"{path_or_stem}.{k}.hdf5" for k in range(files)]
    handles = []
    for k, p in enumerate(paths):
        f = h5py.File(p, "w")
        m = int(cuts[k + 1] - cuts[k])
        h = f.create_group("Header")
        this = np.zeros(6, np.uint32)
        this[1] = m
        total = np.zeros(6, np.uint64)
        total[1] = n
        h.attrs["NumPart_ThisFile"] = this
        h.attrs["NumPart_Total"] = (total & 0xFFFFFFFF).astype(np.uint32)
        h.attrs["NumPart_Total_HighWord"] = (total >> 32).astype(np.uint32)
        h.attrs["NumFilesPerSnapshot"] = np.int32(files)
        h.attrs["BoxSize"] = 1.0
        h.attrs["MassTable"] = np.array([0, 1.0 / n, 0, 0, 0, 0])
        g = f.create_group("PartType1")
        g.create_dataset("Coordinates", (m, 3), np.float32)
        g.create_dataset("Velocities", (m, 3), np.float32)
        g.create_dataset("ParticleIDs", (m,), np.uint64)
        handles.append(f)
    try:
        for c in range(dc.n_chunks(n)):
            pos, vel, ids = dc.chunk(n, c, seed)
            a = c * dc.CHUNK_ROWS
            b = a + len(pos)
            for k, f in enumerate(handles):
                lo, hi = max(a, cuts[k]), min(b, cuts[k + 1])
                if hi <= lo:
                    continue
                g = f["PartType1"]
                g["Coordinates"][lo - cuts[k]:hi - cuts[k]] = pos[lo - a:hi - a]
                g["Velocities"][lo - cuts[k]:hi - cuts[k]] = vel[lo - a:hi - a]
                g["ParticleIDs"][lo - cuts[k]:hi - cuts[k]] = ids[lo - a:hi - a]
    finally:
        for f in handles:
            f.close()
    return paths


def write_zarr(path, n, seed):
    """The snapshot as the package writes snapshots (checksummed chunks),
    with ``Velocities`` and ``ParticleIDs`` beside ``points``."""
    import zarr

    from emst_dask import datasets_cosmic as dc
    from emst_dask.io.codecs import create_array

    g = zarr.open_group(path, mode="w")
    rows = dc.CHUNK_ROWS
    pts = create_array(g, "points", (n, 3), (min(rows, n), 3), np.float32, 3)
    vel = create_array(g, "Velocities", (n, 3), (min(rows, n), 3), np.float32, 3)
    ids = create_array(g, "ParticleIDs", (n,), (min(rows, n),), np.uint64, 3)
    for c in range(dc.n_chunks(n)):
        p, v, i = dc.chunk(n, c, seed)
        a = c * rows
        pts[a:a + len(p)] = p
        vel[a:a + len(p)] = v
        ids[a:a + len(p)] = i
    g.attrs["BoxSize"] = 1.0
    return path


def main():
    import emst_dask
    from emst_dask import datasets_cosmic as dc
    from emst_dask import emst

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to write (default: a temporary one)")
    p.add_argument("--write-only", action="store_true")
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                 "snapshots-cpu.json"))
    a = p.parse_args()
    where = a.dir or tempfile.mkdtemp(prefix="cosmic-")
    os.makedirs(where, exist_ok=True)
    res = {"machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                       "load_average": list(os.getloadavg())},
           "n": a.n, "seed": a.seed, "files": a.files, "dataset": "cosmic", "b_relative": 0.2,
           "min_members": 20, "repeats": a.repeats}
    t0 = time.perf_counter()
    one = write_hdf5(os.path.join(where, "cosmic.hdf5"), a.n, a.seed)[0]
    multi = write_hdf5(os.path.join(where, "cosmic_multi"), a.n, a.seed, a.files)
    zsnap = write_zarr(os.path.join(where, "cosmic.zarr"), a.n, a.seed)
    res["write_seconds"] = time.perf_counter() - t0
    print(f"wrote {one}, {multi[0]} .. ({a.files} files), {zsnap} in "
          f"{res['write_seconds']:.1f} s")
    if a.write_only:
        return

    def timed(fn):
        fn()
        ts, r = [], None
        for _ in range(a.repeats):
            t = time.perf_counter()
            r = fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts), r

    warm = dc.cosmic(20_000, seed=1)
    emst_dask.fof(warm, 0.2, box_size=1.0, ids=np.arange(20_000))  # compile, untimed
    emst(warm, box_size=1.0).statistics(warm, box_size=1.0)
    x, v, ids = dc.snapshot(a.n, a.seed)
    res["tree"], tree = timed(lambda: emst(x, box_size=1.0))
    res["catalogue"], cat = timed(lambda: emst_dask.fof(x, 0.2, box_size=1.0, min_members=20,
                                                        velocities=v, tree=tree))
    res["catalogue_phases"] = {k: float(t) for k, t in cat.timings.items()}
    res["catalogue_ids"], cid = timed(lambda: emst_dask.fof(
        x, 0.2, box_size=1.0, min_members=20, velocities=v, ids=ids, tree=tree))
    res["catalogue_ids_phases"] = {k: float(t) for k, t in cid.timings.items()}
    res["fof_own_tree"], own = timed(lambda: emst_dask.fof(x, 0.2, box_size=1.0,
                                                           min_members=20, velocities=v))
    res["fof_own_tree_phases"] = {k: float(t) for k, t in own.timings.items()}
    res["statistics"], _ = timed(lambda: tree.statistics(x, box_size=1.0))
    s = cat.summary()[0]
    res.update(groups=s["groups"], largest=s["largest"], smallest=int(cat.length[-1]),
               fraction_in_groups=s["fraction"],
               groups_over_1e3=int((cat.length >= 1000).sum()),
               groups_over_1e4=int((cat.length >= 10000).sum()))
    res["catalogue/tree"] = res["catalogue"] / res["tree"]
    res["catalogue_ids/tree"] = res["catalogue_ids"] / res["tree"]
    beyond = res["fof_own_tree"] - res["fof_own_tree_phases"]["tree"]
    res["fof_own_tree_beyond_tree/tree"] = beyond / res["fof_own_tree_phases"]["tree"]
    res["statistics/tree"] = res["statistics"] / res["tree"]

    with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        for name, src, kw in (("hdf5_multi", multi[0], {}), ("hdf5_one", one, {}),
                              ("zarr", zsnap, {"array": "points"})):
            def run(src=src, kw=kw):
                return emst(src, box_size="snapshot", client=emb.client, **kw)

            run()
            reads, totals = [], []
            for _ in range(a.repeats):
                t = time.perf_counter()
                tr = run()
                totals.append(time.perf_counter() - t)
                reads.append(tr.timings["read"])
                assert tr.total_weight == tree.total_weight, name
            res[f"read_{name}"] = statistics.median(reads)
            res[f"service_{name}"] = statistics.median(totals)
    res["read_hdf5_multi/zarr"] = res["read_hdf5_multi"] / res["read_zarr"]
    res["read_hdf5_one/zarr"] = res["read_hdf5_one"] / res["read_zarr"]
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    for k, val in res.items():
        if not isinstance(val, dict):
            print(f"{k:32s} {val}")


if __name__ == "__main__":
    main()
