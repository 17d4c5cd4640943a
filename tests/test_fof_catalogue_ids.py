"""Halo catalogues as halo finders write them: members' IDs by group,
GroupLen / GroupOffset / GroupPos / GroupVel / GroupMass, read back with
``open_fof``; on the clustered snapshot generator, against a direct
computation (scipy's connected components of the periodic radius graph).
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr

import emst_dask
from emst_dask import InputError
from emst_dask.datasets_cosmic import model, snapshot
from emst_dask.products.catalogue import open_fof

spatial = pytest.importorskip("scipy.spatial")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
sparse = pytest.importorskip("scipy.sparse")
h5py = pytest.importorskip("h5py")
from gadget_files import write_gadget  # noqa: E402

N = 40_000


@pytest.fixture(scope="module")
def cosmic():
    pos, vel, ids = snapshot(N, seed=3)
    # IDs need not follow the rows: a permutation of large 64-bit numbers
    ids = (np.random.default_rng(1).permutation(N).astype(np.uint64) + np.uint64(2**62))
    masses = np.random.default_rng(2).uniform(0.5, 1.5, N)
    return pos, vel, ids, masses


def direct_groups(pos, b, min_members, box=1.0):
    """Groups of at least min_members by scipy: the periodic radius graph's
    components, as (sorted list of row arrays) by decreasing size, ties by
    smallest row."""
    n = len(pos)
    kd = spatial.cKDTree(np.asarray(pos, np.float64), boxsize=box)
    p = kd.query_pairs(b, output_type="ndarray").reshape(-1, 2)
    g = sparse.coo_matrix((np.ones(len(p)), (p[:, 0], p[:, 1])), shape=(n, n))
    lab = csgraph.connected_components(g, directed=False)[1]
    groups = [np.flatnonzero(lab == c) for c in np.unique(lab)]
    groups = [r for r in groups if len(r) >= min_members]
    return sorted(groups, key=lambda r: (-len(r), r[0]))


def test_generator_is_clustered_and_chunk_deterministic():
    from emst_dask import datasets_cosmic as dc

    pos, vel, ids = snapshot(N, seed=3)
    assert pos.dtype == np.float32 and (pos >= 0).all() and (pos < 1).all()
    assert np.array_equal(ids, np.arange(1, N + 1))
    md = model(N, 3)
    assert md.counts.sum() == N - md.side ** 3 and md.counts[-1] >= 1
    again = snapshot(N, seed=3)
    assert np.array_equal(again[0], pos) and np.array_equal(again[1], vel)
    assert not np.array_equal(snapshot(N, seed=4)[0], pos)
    # one chunk alone equals its rows of the whole
    old = dc.CHUNK_ROWS
    try:
        dc.CHUNK_ROWS = 10_000
        whole = dc.snapshot(N, seed=3)[0]
        np.testing.assert_array_equal(dc.chunk(N, 2, seed=3)[0], whole[20_000:30_000])
    finally:
        dc.CHUNK_ROWS = old


def test_groups_ids_and_offsets_against_the_radius_graph(cosmic):
    pos, vel, ids, masses = cosmic
    b = 0.2 * N ** (-1 / 3)
    ref = direct_groups(pos, b, 20)
    frac = sum(len(r) for r in ref) / N
    assert 0.3 <= frac <= 0.55, frac  # the generator's halo population
    assert len(ref[0]) >= 20 * len(ref[-1])
    cat = emst_dask.fof(pos, 0.2, box_size=1.0, min_members=20, ids=ids)
    assert cat.n_groups == len(ref)
    np.testing.assert_array_equal(cat.length, [len(r) for r in ref])
    np.testing.assert_array_equal(cat.offset, np.concatenate([[0], np.cumsum(cat.length)[:-1]]))
    assert cat.ids.dtype == np.uint64 and len(cat.ids) == sum(len(r) for r in ref)
    for g, rows in enumerate(ref):
        np.testing.assert_array_equal(cat.members(g), ids[rows])  # rows increasing
        assert (cat.labels[rows] == g).all()
    assert (cat.labels == -1).sum() == N - len(cat.ids)


def min_image(d):
    return d - np.floor(d + 0.5)


def test_masses_weight_the_centres(cosmic):
    pos, vel, ids, masses = cosmic
    b = 0.2 * N ** (-1 / 3)
    ref = direct_groups(pos, b, 20)
    cat = emst_dask.fof(pos, 0.2, box_size=1.0, min_members=20, ids=ids, masses=masses,
                        velocities=vel)
    x = pos.astype(np.float64)
    for g, rows in enumerate(ref[:40]):
        m = masses[rows]
        assert np.isclose(cat.mass[g], m.sum(), rtol=1e-12)
        # groups far smaller than the box: unwrapped around their first member
        u = x[rows[0]] + min_image(x[rows] - x[rows[0]])
        c = np.mod((u * m[:, None]).sum(0) / m.sum(), 1.0)
        np.testing.assert_allclose(min_image(cat.position[g] - c), 0, atol=1e-9)
        v = (vel[rows].astype(np.float64) * m[:, None]).sum(0) / m.sum()
        np.testing.assert_allclose(cat.velocity[g], v, rtol=1e-9, atol=1e-9)


def test_hdf5_and_zarr_by_name_through_the_service(cosmic, tmp_path):
    pos, vel, ids, masses = cosmic
    here = emst_dask.fof(pos, [0.2, 0.25], box_size=1.0, min_members=20, ids=ids,
                         masses=masses, velocities=vel)
    stem = str(tmp_path / "snap_007")
    write_gadget(stem, pos, vel=vel, ids=ids, masses=masses, files=3)
    g = zarr.open_group(str(tmp_path / "snap.zarr"), mode="w")
    g.create_group("Header").attrs["BoxSize"] = 1.0
    t = g.create_group("PartType1")
    for name, a in (("Coordinates", pos), ("Velocities", vel), ("ParticleIDs", ids),
                    ("Masses", masses)):
        t.create_array(name, shape=a.shape, chunks=(7000,) + a.shape[1:],
                       dtype=a.dtype)[...] = a
    for i, (src, kw) in enumerate([(stem, {}), (str(tmp_path / "snap.zarr"),
                                                dict(array="PartType1/Coordinates"))]):
        names = ("ParticleIDs", "Masses", "Velocities") if not kw else \
            ("PartType1/ParticleIDs", "PartType1/Masses", "PartType1/Velocities")
        store = emst_dask.fof(src, [0.2, 0.25], box_size="snapshot", min_members=20,
                              ids=names[0], masses=names[1], velocities=names[2],
                              out=str(tmp_path / f"h{i}.zarr"), **kw)
        assert store.attrs["ids"] == names[0] and store.attrs["masses"] == names[1]
        got = open_fof(store.path).load()
        for k in range(2):
            a, e = got.groups(k), here.groups(k)
            for name in ("length", "position", "velocity", "offset", "ids", "mass"):
                np.testing.assert_array_equal(a[name], e[name], err_msg=name)
        grp = zarr.open_group(store.path, mode="r")["catalogue/1"]
        np.testing.assert_array_equal(grp["GroupLen"][...], here.length[1])
        np.testing.assert_array_equal(grp["GroupOffset"][...], here.offset[1])
        np.testing.assert_array_equal(grp["IDs"][...], here.ids[1])
        np.testing.assert_array_equal(grp["GroupMass"][...], here.mass[1])
        np.testing.assert_array_equal(grp["GroupPos"][...], here.position[1])
        np.testing.assert_array_equal(grp["GroupVel"][...], here.velocity[1])
    # a catalogue with the new arrays is the package's own: overwrite replaces it
    again = emst_dask.fof(pos, 0.2, box_size=1.0, min_members=20, ids=ids,
                          out=str(tmp_path / "h0.zarr"), overwrite=True)
    back = open_fof(again.path)
    assert back.attrs["masses"] is None and back.load().mass is None
    np.testing.assert_array_equal(back.load().ids, here.ids[0])


@pytest.mark.parametrize("kw, match", [
    (dict(ids=np.arange(10)), r"ids must have shape \(n,\) = \(300,\)"),
    (dict(ids=np.zeros(300)), "ids must be integers"),
    (dict(masses=-np.ones(300)), "masses row 0 is NaN, inf or negative"),
    (dict(ids="ParticleIDs"), "not a Zarr group nor an HDF5 snapshot"),
])
def test_bad_ids_or_masses(kw, match):
    pos = np.random.default_rng(0).random((300, 3))
    with pytest.raises(InputError, match=match):
        emst_dask.fof(pos, 0.2, box_size=1.0, **kw)


def test_members_without_ids_is_refused():
    pos = np.random.default_rng(0).random((300, 3))
    cat = emst_dask.fof(pos, 0.9, box_size=1.0, min_members=2)
    with pytest.raises(InputError, match="without particle IDs"):
        cat.members(0)
