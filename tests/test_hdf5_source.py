"""HDF5 snapshots (Gadget-2/4, Arepo, SWIFT layout) as point sources.

The snapshots are written here with h5py (``gadget_files``), one file or a
set of files; every product of an HDF5 source is compared with the same
product of the same points in memory, and every bad input is refused by
name before any work.
"""
from __future__ import annotations

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import emst_dask
from emst_dask import InputError
from emst_dask.io import resolve_source

h5py = pytest.importorskip("h5py")
from gadget_files import truncate, write_gadget  # noqa: E402


def cloud(n=1500, seed=0, box=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.random((12, 3)) * box
    x = centres[rng.integers(0, 12, n)] + rng.normal(scale=0.02 * box, size=(n, 3))
    return np.mod(x, box)


@pytest.fixture
def snap(tmp_path):
    x = cloud()
    v = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    ids = (np.arange(len(x), dtype=np.uint64) * 7 + 2**40)
    one = write_gadget(str(tmp_path / "one.hdf5"), x, vel=v, ids=ids)[0]
    files = write_gadget(str(tmp_path / "snap_042"), x, vel=v, ids=ids, files=4, chunks=100)
    return dict(x=x, v=v, ids=ids, one=one, files=files, stem=str(tmp_path / "snap_042"),
                tmp=tmp_path)


def test_every_way_of_naming_a_snapshot_reads_its_rows_in_order(snap):
    specs = [snap["one"], snap["stem"], snap["files"][0], snap["files"][2],
             str(snap["tmp"] / "snap_042.*.hdf5")]
    for spec in specs:
        src = resolve_source(spec)
        assert (src.n, src.d) == snap["x"].shape
        assert src.where.endswith("/PartType1/Coordinates")
        np.testing.assert_array_equal(src.read_all(), snap["x"])
        assert src.attribute("BoxSize") == 1.0
    multi = resolve_source(snap["stem"])
    assert len(multi.files) == 4 and len(multi.chunks) >= 4  # a read unit per file at least
    vel = resolve_source(snap["stem"], array="Velocities")
    np.testing.assert_array_equal(vel.read_all(), snap["v"])
    assert resolve_source(snap["stem"], array="PartType1").where == multi.where


def test_pickled_source_reopens_its_files(snap):
    import pickle

    src = resolve_source(snap["stem"])
    src.read(0, 10)  # handles opened here are not pickled
    back = pickle.loads(pickle.dumps(src))
    np.testing.assert_array_equal(back.read(0, src.n), snap["x"])


def test_trees_groups_and_statistics_equal_the_points_in_memory(snap):
    x = snap["x"]
    here = emst_dask.emst(x, box_size=1.0)
    for spec in (snap["one"], snap["stem"]):
        t = emst_dask.emst(spec, box_size="snapshot", client=False)
        assert t.total_weight == here.total_weight
        np.testing.assert_array_equal(np.sort(t.weight), np.sort(here.weight))
        cat = emst_dask.fof(spec, 0.2, box_size="snapshot", min_members=5,
                            velocities="Velocities", client=False)
        ref = emst_dask.fof(x, 0.2, box_size=1.0, min_members=5, velocities=snap["v"])
        np.testing.assert_array_equal(cat.labels, ref.labels)
        np.testing.assert_array_equal(cat.position, ref.position)
        np.testing.assert_array_equal(cat.velocity, ref.velocity)
    est = emst_dask.HDBSCAN(min_cluster_size=20, min_samples=5).fit(snap["stem"])
    ref = emst_dask.HDBSCAN(min_cluster_size=20, min_samples=5).fit(x)
    np.testing.assert_array_equal(est.labels_, ref.labels_)
    many = emst_dask.mst_statistics_many(snap["stem"], 2, subsample=0.5, box_size="snapshot",
                                         client=False, seed=3)
    mem = emst_dask.mst_statistics_many(x, 2, subsample=0.5, box_size=1.0, client=False, seed=3)
    assert list(many.n) == list(mem.n) and many.values.keys() == mem.values.keys()
    for name in mem.values:
        np.testing.assert_array_equal(many.edges[name], mem.edges[name])
        np.testing.assert_array_equal(many.values[name], mem.values[name])


@pytest.fixture(scope="module")
def client():
    with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        yield emb.client


def test_service_and_command_line_read_a_multi_file_snapshot(snap, client):
    from emst_dask.cli import main
    from emst_dask.products.catalogue import open_fof

    x = snap["x"]
    here = emst_dask.emst(x, box_size=1.0)
    t = emst_dask.emst(snap["stem"], box_size="snapshot", client=client)
    assert t.total_weight == here.total_weight
    ref = emst_dask.fof(x, 0.2, box_size=1.0, min_members=5, velocities=snap["v"])
    store = emst_dask.fof(snap["stem"], 0.2, box_size="snapshot", min_members=5,
                          velocities="Velocities", client=client,
                          out=str(snap["tmp"] / "h.zarr"))
    got = store.load()
    np.testing.assert_array_equal(got.labels, ref.labels)
    np.testing.assert_array_equal(got.velocity, ref.velocity)
    out = snap["tmp"] / "cli.zarr"
    run = CliRunner().invoke(main, ["fof", str(snap["tmp"] / "snap_042.*.hdf5"), "-m", "5",
                                    "--box-size", "snapshot", "--out", str(out),
                                    "--in-process"])
    assert run.exit_code == 0, run.output
    np.testing.assert_array_equal(open_fof(str(out)).load().labels, ref.labels)
    # no --box-size on a snapshot with a box: refused, naming the box and the option
    run = CliRunner().invoke(main, ["fof", snap["stem"], "--out", str(snap["tmp"] / "n.zarr"),
                                    "--in-process"])
    assert run.exit_code == 2 and "BoxSize = 1.0" in run.output \
        and "--box-size snapshot" in run.output, run.output
    assert not (snap["tmp"] / "n.zarr").exists()


def test_box_from_a_zarr_header_group(tmp_path):
    x = cloud(600, seed=2, box=2.0)
    g = zarr.open_group(str(tmp_path / "snap.zarr"), mode="w")
    g.create_group("Header").attrs["BoxSize"] = 2.0
    g.create_group("PartType1").create_array("Coordinates", shape=x.shape, chunks=(100, 3),
                                             dtype=x.dtype)[...] = x
    src = resolve_source(str(tmp_path / "snap.zarr"))
    assert src.attribute("BoxSize") == 2.0
    t = emst_dask.emst(str(tmp_path / "snap.zarr"), box_size="snapshot", client=False)
    assert t.total_weight == emst_dask.emst(x, box_size=2.0).total_weight
    cat = emst_dask.fof(str(tmp_path / "snap.zarr"), 0.2, box_size="snapshot", min_members=5,
                        client=False)
    np.testing.assert_array_equal(
        cat.labels, emst_dask.fof(x, 0.2, box_size=2.0, min_members=5).labels)
    with pytest.raises(InputError, match=r"BoxSize = 2.0.*box_size='open'"):
        emst_dask.fof(str(tmp_path / "snap.zarr"), 0.2, client=False)
    opened = emst_dask.fof(str(tmp_path / "snap.zarr"), 0.2, box_size="open", client=False,
                           min_members=5)
    np.testing.assert_array_equal(opened.labels, emst_dask.fof(x, 0.2, min_members=5).labels)


# --------------------------------------------------------------------------
# bad input: refused by name, before any work
# --------------------------------------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    import emst_dask.engine.core

    def boom(*a, **k):
        raise AssertionError("computed before refusing")

    monkeypatch.setattr(emst_dask.engine.core, "boruvka", boom)


def test_particle_types_missing_or_ambiguous(tmp_path, no_work):
    x = cloud(300)
    path = write_gadget(str(tmp_path / "s.hdf5"), x, others={0: cloud(100, seed=5)})[0]
    with pytest.raises(InputError, match=r"several particle types have Coordinates.*"
                                         r"PartType0 \(Coordinates.*PartType1"):
        resolve_source(path)
    with pytest.raises(InputError, match=r"no particle type PartType4; it holds PartType0"):
        resolve_source(path, array="PartType4")
    with pytest.raises(InputError, match=r"PartType1 has no dataset 'Masses'"):
        emst_dask.emst(path, array="PartType1/Masses", client=False)
    np.testing.assert_array_equal(resolve_source(path, array="PartType1").read_all(), x)


def test_coordinates_outside_the_box(tmp_path, no_work):
    x = cloud(300)
    x[17] = [0.5, 1.25, 0.5]
    path = write_gadget(str(tmp_path / "s.hdf5"), x)[0]
    with pytest.raises(InputError, match=r"s.hdf5:/PartType1/Coordinates has 1 row.*outside"
                                         r".*first bad row is 17"):
        emst_dask.emst(path, box_size="snapshot", client=False)
    with pytest.raises(InputError, match=r"first bad row is 17"):
        emst_dask.fof(path, 0.2, box_size="snapshot", client=False)


@pytest.mark.parametrize("key, value", [
    ("NumPart_Total", np.array([0, 999, 0, 0, 0, 0], np.uint32)),
    ("BoxSize", 2.0),
    ("NumFilesPerSnapshot", np.int32(5)),
])
def test_files_that_disagree(tmp_path, no_work, key, value):
    x = cloud(400)
    write_gadget(str(tmp_path / "snap"), x, files=3, header_extra={2: {key: value}})
    with pytest.raises(InputError, match=rf"snap.2.hdf5: Header/{key} = .* disagrees with "
                                         r".*snap.0.hdf5"):
        emst_dask.emst(str(tmp_path / "snap"), client=False)


def test_a_missing_file_of_a_set(tmp_path, no_work):
    import os

    files = write_gadget(str(tmp_path / "snap"), cloud(400), files=3)
    os.remove(files[1])
    for spec in (str(tmp_path / "snap"), files[0], files[2]):
        with pytest.raises(InputError, match=r"snap.1.hdf5: missing: the snapshot has 3 files"):
            emst_dask.emst(spec, client=False)


def test_a_truncated_file(tmp_path, no_work):
    files = write_gadget(str(tmp_path / "snap"), cloud(4000), files=2)
    truncate(files[1], 0.6)
    with pytest.raises(InputError, match=r"snap.1.hdf5: truncated"):
        emst_dask.emst(str(tmp_path / "snap"), client=False)


def test_rows_that_disagree_with_the_header_or_never_written(tmp_path, no_work):
    x = cloud(400)
    path = write_gadget(str(tmp_path / "a.hdf5"), x)[0]
    with h5py.File(path, "r+") as f:
        f["Header"].attrs["NumPart_ThisFile"] = np.array([0, 399, 0, 0, 0, 0], np.int32)
    with pytest.raises(InputError, match=r"a.hdf5: dataset PartType1/Coordinates has 400 rows"
                                         r"; Header/NumPart_ThisFile says 399"):
        resolve_source(path)
    path = write_gadget(str(tmp_path / "b.hdf5"), x, chunks=100)[0]
    with h5py.File(path, "r+") as f:  # a dataset created and never filled
        del f["PartType1/Coordinates"]
        f["PartType1"].create_dataset("Coordinates", shape=(400, 3), dtype="f8", chunks=(100, 3))
    with pytest.raises(InputError, match=r"b.hdf5: dataset PartType1/Coordinates has 4 of its "
                                         r"4 chunks missing"):
        resolve_source(path)


def test_a_damaged_dataset_is_named_not_read_as_zeros(tmp_path):
    """Bytes of a compressed chunk overwritten: the read fails, naming the
    file, the dataset and the rows."""
    x = cloud(4000)
    path = str(tmp_path / "c.hdf5")
    write_gadget(path, x)
    with h5py.File(path, "r+") as f:
        del f["PartType1/Coordinates"]
        f["PartType1"].create_dataset("Coordinates", data=x, chunks=(500, 3),
                                      compression="gzip")
    with h5py.File(path, "r") as f:
        off = f["PartType1/Coordinates"].id.get_chunk_info(3).byte_offset
    with open(path, "r+b") as fh:
        fh.seek(off + 10)
        fh.write(b"\xff" * 64)
    with pytest.raises(InputError, match=r"c.hdf5: cannot read dataset PartType1/Coordinates "
                                         r"rows"):
        resolve_source(path).read_all()


def test_a_swift_style_virtual_file_over_a_set(tmp_path):
    """SWIFT writes a one-file view of a multi-file snapshot whose datasets
    are virtual (no storage of their own): read through to the files."""
    x = cloud(900)
    files = write_gadget(str(tmp_path / "part"), x, files=3)
    cuts = np.linspace(0, len(x), 4).astype(int)
    layout = h5py.VirtualLayout(shape=x.shape, dtype=x.dtype)
    for k, f in enumerate(files):
        layout[cuts[k]:cuts[k + 1]] = h5py.VirtualSource(f, "PartType1/Coordinates",
                                                         shape=(cuts[k + 1] - cuts[k], 3))
    path = str(tmp_path / "virtual.hdf5")
    with h5py.File(path, "w") as f, h5py.File(files[0], "r") as g:
        h = f.create_group("Header")
        for key, v in g["Header"].attrs.items():
            h.attrs[key] = v
        h.attrs["NumFilesPerSnapshot"] = np.int32(1)
        h.attrs["NumPart_ThisFile"] = np.array([0, len(x), 0, 0, 0, 0], np.int32)
        f.create_group("PartType1").create_virtual_dataset("Coordinates", layout)
    np.testing.assert_array_equal(resolve_source(path).read_all(), x)


def test_a_header_box_of_zero_declares_no_box(tmp_path):
    x = cloud(500) * 3.0  # a non-periodic run: BoxSize 0, coordinates anywhere
    path = write_gadget(str(tmp_path / "iso.hdf5"), x, box=0.0)[0]
    cat = emst_dask.fof(path, 0.2, min_members=5, client=False)
    np.testing.assert_array_equal(cat.labels, emst_dask.fof(x, 0.2, min_members=5).labels)
    with pytest.raises(InputError, match="box_size lengths must be finite and > 0"):
        emst_dask.fof(path, 0.2, box_size="snapshot", client=False)


def test_a_file_changed_after_it_was_opened_is_named(tmp_path):
    x = cloud(600)
    files = write_gadget(str(tmp_path / "snap"), x, files=2)
    src = resolve_source(str(tmp_path / "snap"))
    write_gadget(str(tmp_path / "other"), cloud(500), files=2)
    import shutil

    shutil.copy(str(tmp_path / "other.1.hdf5"), files[1])
    with pytest.raises(InputError, match=r"snap.1.hdf5: dataset PartType1/Coordinates: 250 "
                                         r"rows where 300 rows were found"):
        src.read_all()


def test_a_box_the_client_could_not_see_is_refused_by_the_worker(snap, client, monkeypatch):
    """A snapshot on the workers' disks only: the worker finds its box and
    refuses no box_size as the client would have."""
    import emst_dask.distributed.client as dc
    import emst_dask.distributed.fof as dfof
    import emst_dask.distributed.service as ds
    from emst_dask.distributed.job import DeferredSource

    monkeypatch.setattr(dfof, "visible_here", lambda loc: False)
    monkeypatch.setattr(ds, "visible_here", lambda loc: False)
    monkeypatch.setattr(dc, "workers_may_see_other_files", lambda cl: True)
    deferred = []
    prepare = dfof.prepare_fof

    def spy(*a, **k):
        out = prepare(*a, **k)
        deferred.append(isinstance(out[0].spec.source, DeferredSource))
        return out

    monkeypatch.setattr(dfof, "prepare_fof", spy)
    with pytest.raises(InputError, match=r"periodic box \(BoxSize = 1.0\)"):
        emst_dask.fof(snap["one"], 0.2, min_members=5, client=client)
    assert deferred == [True]  # the worker resolved the snapshot and refused
    got = emst_dask.fof(snap["one"], 0.2, min_members=5, client=client, box_size="open")
    np.testing.assert_array_equal(got.labels,
                                  emst_dask.fof(snap["x"], 0.2, min_members=5).labels)


def test_emst_dask_run_on_a_multi_file_snapshot(snap):
    from emst_dask.cli import main
    from emst_dask.io import open_edges

    out = snap["tmp"] / "edges.zarr"
    run = CliRunner().invoke(main, ["run", snap["stem"], "--box-size", "snapshot", "--out",
                                    str(out), "--in-process"])
    assert run.exit_code == 0, run.output
    store = open_edges(str(out))
    assert store.attrs["input"] == resolve_source(snap["stem"]).where
    assert store.attrs["box_size"] == [1.0, 1.0, 1.0]
    here = emst_dask.emst(snap["x"], box_size=1.0)
    assert store.load().total_weight == here.total_weight
    bad = CliRunner().invoke(main, ["run", snap["stem"], "--array", "PartType0", "--out",
                                    str(snap["tmp"] / "e2.zarr"), "--in-process"])
    assert bad.exit_code == 2 and "no particle type PartType0" in bad.output, bad.output
