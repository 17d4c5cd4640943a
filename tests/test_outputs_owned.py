"""What an output may replace, and where it may go.

* Replacing an output (``overwrite=True`` / ``--overwrite``) removes only
  what the package wrote there: a store that holds anything else -- a file,
  an array, a group, a group attribute the package did not write -- is
  refused before any work, the message naming every foreign entry, and the
  store is left as it was (``test_overwrite_refuses_*``).  Every kind of
  store the package writes is still replaced when it holds only its own
  entries, also a store written before the package recorded what it wrote
  (``test_overwrite_replaces_*``).
* An output inside the input (a Zarr snapshot, the store holding the
  array read), the input inside an output, or the two equal, through
  symbolic links too, is refused before any work: ``emst``, ``fof``,
  ``HDBSCAN``, ``emst_many`` and the command line
  (``test_output_inside_the_input_*``).
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from service_util import assert_same_tree, cloud, no_tmp_siblings, write_snapshot
from test_integrity_outputs import contents, error_line, refused

import emst_dask
from emst_dask.cli import main


@pytest.fixture(scope="module")
def pts():
    return cloud(300, 3, seed=71)


@pytest.fixture(scope="module")
def other_pts():
    return cloud(200, 3, seed=72)


@pytest.fixture
def runner():
    return CliRunner()


def _note(store, *parts, text="my notes\n"):
    path = os.path.join(store, *parts)
    with open(path, "w") as fh:
        fh.write(text)
    return path


def _add_attribute(store, key, value):
    g = zarr.open_group(store, mode="r+")
    g.attrs[key] = value


# --------------------------------------------------------------------------
# replacing: only what the package wrote
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_overwrite_refuses_an_edge_store_holding_a_user_file(tmp_path, pts, other_pts,
                                                             zarr_format):
    out = os.fspath(tmp_path / "edges.zarr")
    emst_dask.emst(other_pts, out=out, zarr_format=zarr_format)
    _note(out, "my_notes.txt")
    before = contents(out)
    msg = refused(lambda rec: emst_dask.emst(pts, out=out, overwrite=True,
                                             zarr_format=zarr_format, progress=rec), out)
    assert "my_notes.txt" in msg, msg
    assert contents(out) == before
    assert no_tmp_siblings(out)


def test_overwrite_refuses_a_user_file_inside_an_array_of_the_store(tmp_path, pts,
                                                                    other_pts):
    out = os.fspath(tmp_path / "edges.zarr")
    emst_dask.emst(other_pts, out=out)
    _note(out, "weight", "README")
    before = contents(out)
    msg = refused(lambda rec: emst_dask.emst(pts, out=out, overwrite=True, progress=rec), out)
    assert "weight/README" in msg, msg
    assert contents(out) == before


def test_overwrite_refuses_an_edge_store_holding_a_user_array_and_attribute(tmp_path, pts,
                                                                            other_pts):
    out = os.fspath(tmp_path / "edges.zarr")
    emst_dask.emst(other_pts, out=out)
    g = zarr.open_group(out, mode="r+")
    g.create_array("my_weights", shape=(5,), dtype="f8")[...] = np.arange(5.0)
    g.create_group("my_group")
    g.attrs["my_comment"] = "checked by hand"
    before = contents(out)
    msg = refused(lambda rec: emst_dask.emst(pts, out=out, overwrite=True, progress=rec), out)
    for name in ("my_weights", "my_group", "my_comment"):
        assert name in msg, msg
    assert contents(out) == before


@pytest.mark.parametrize("zarr_format", ["2", "3"])
def test_cli_generate_overwrite_refuses_a_snapshot_holding_a_user_array(runner, tmp_path,
                                                                        zarr_format):
    out = os.fspath(tmp_path / "snap.zarr")
    res = runner.invoke(main, ["generate", "uniform", "500", "--out", out,
                               "--zarr-format", zarr_format])
    assert res.exit_code == 0, res.output
    g = zarr.open_group(out, mode="r+")
    g.create_array("velocities", shape=(500, 3), dtype="f4")[...] = \
        np.ones((500, 3), np.float32)
    g.attrs["BoxSize"] = 1.0
    before = contents(out)
    res = runner.invoke(main, ["generate", "uniform", "400", "--out", out, "--overwrite",
                               "--zarr-format", zarr_format])
    line = error_line(res, "snap.zarr", "velocities", "BoxSize")
    assert "Traceback" not in line
    assert contents(out) == before
    assert no_tmp_siblings(out)


def test_overwrite_refuses_a_cluster_store_holding_a_user_group(tmp_path, pts, other_pts):
    """A friends-of-friends catalogue (a cluster store) with the user's group
    and file added: refused, naming both."""
    out = os.fspath(tmp_path / "halos.zarr")
    emst_dask.fof(other_pts, 0.3, min_members=2, out=out)
    zarr.open_group(out, mode="r+").create_group("my_subhalos")
    _note(out, "catalogue", "notes.md")
    before = contents(out)
    with pytest.raises(emst_dask.OutputError) as err:
        emst_dask.fof(pts, 0.3, min_members=2, out=out, overwrite=True)
    msg = str(err.value)
    assert "my_subhalos" in msg and "catalogue/notes.md" in msg, msg
    assert contents(out) == before


def test_cli_hdbscan_overwrite_refuses_a_cluster_store_holding_a_user_file(runner, tmp_path,
                                                                           pts):
    edges = os.fspath(tmp_path / "mr.zarr")
    emst_dask.emst(pts, out=edges, min_samples=3)
    out = os.fspath(tmp_path / "labels.zarr")
    args = ["hdbscan", edges, "--out", out, "--min-cluster-size", "5", "--min-samples", "3"]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    _note(out, "condensed", "mine.txt")
    before = contents(out)
    error_line(runner.invoke(main, args + ["--overwrite"]), "labels.zarr",
               "condensed/mine.txt")
    assert contents(out) == before


# the package's own stores of every kind are still replaced -----------------
def _forget_record(store):
    """Strip what the package records about its own entries, as a store
    written before it did so."""
    from emst_dask.io.owned import WRITTEN_ATTR

    g = zarr.open_group(store, mode="r+")
    if WRITTEN_ATTR in g.attrs:
        del g.attrs[WRITTEN_ATTR]


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older"])
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("kind", ["edges", "mutual-reachability", "periodic"])
def test_overwrite_replaces_the_packages_own_edge_stores(tmp_path, pts, other_pts, kind,
                                                         zarr_format, recorded):
    out = os.fspath(tmp_path / "edges.zarr")
    kw = dict(min_samples=3) if kind == "mutual-reachability" else \
        dict(box_size=1.0) if kind == "periodic" else {}
    emst_dask.emst(other_pts, out=out, zarr_format=zarr_format, **kw)
    if not recorded:
        _forget_record(out)
    st = emst_dask.emst(pts, out=out, overwrite=True, zarr_format=zarr_format, **kw)
    assert st.n == len(pts)
    if kind == "edges":
        assert_same_tree(emst_dask.read_edges(out), pts)
    assert no_tmp_siblings(out)


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older"])
@pytest.mark.parametrize("velocities", [False, True])
def test_overwrite_replaces_the_packages_own_fof_catalogue(tmp_path, pts, other_pts,
                                                           velocities, recorded):
    out = os.fspath(tmp_path / "halos.zarr")
    v = (lambda p: np.ones_like(p)) if velocities else (lambda p: None)
    emst_dask.fof(other_pts, [0.2, 0.4], min_members=2, velocities=v(other_pts), out=out)
    if not recorded:
        _forget_record(out)
    st = emst_dask.fof(pts, [0.2, 0.4], min_members=2, velocities=v(pts), out=out,
                       overwrite=True)
    assert st.attrs["n"] == len(pts)
    assert no_tmp_siblings(out)


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older"])
def test_cli_overwrite_replaces_the_packages_own_hdbscan_store(runner, tmp_path, pts,
                                                               recorded):
    edges = os.fspath(tmp_path / "mr.zarr")
    emst_dask.emst(pts, out=edges, min_samples=3)
    out = os.fspath(tmp_path / "labels.zarr")
    args = ["hdbscan", edges, "--out", out, "--min-cluster-size", "5", "--min-samples", "3"]
    assert runner.invoke(main, args).exit_code == 0
    if not recorded:
        _forget_record(out)
    res = runner.invoke(main, args + ["--overwrite"])
    assert res.exit_code == 0, res.output
    assert no_tmp_siblings(out)


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "older"])
@pytest.mark.parametrize("columns", [None, "x,y,z"])
@pytest.mark.parametrize("zarr_format", ["2", "3"])
def test_cli_generate_overwrite_replaces_its_own_snapshots(runner, tmp_path, columns,
                                                           zarr_format, recorded):
    out = os.fspath(tmp_path / "snap.zarr")
    cols = ["--columns", columns] if columns else []
    args = ["generate", "uniform", "500", "--out", out, "--zarr-format", zarr_format, *cols]
    assert runner.invoke(main, args).exit_code == 0
    if not recorded:
        _forget_record(out)
    res = runner.invoke(main, ["generate", "normal", "300", "--out", out, "--overwrite",
                               "--zarr-format", zarr_format, *cols])
    if not recorded and columns:
        # an older snapshot recorded no column names: its arrays are not
        # provably the package's, so it is refused, naming them
        error_line(res, "snap.zarr", "x")
        return
    assert res.exit_code == 0, res.output
    g = zarr.open_group(out, mode="r")
    assert g.attrs["n"] == 300
    assert no_tmp_siblings(out)


def test_every_store_the_package_writes_records_its_entries(tmp_path, pts):
    """The record lists every entry and attribute key the package wrote."""
    from emst_dask.io.owned import WRITTEN_ATTR

    out = os.fspath(tmp_path / "edges.zarr")
    emst_dask.emst(pts, out=out, min_samples=2)
    with open(os.path.join(out, "zarr.json")) as fh:
        meta = json.load(fh)
    rec = meta["attributes"][WRITTEN_ATTR]
    assert set(rec["entries"]) == {"source", "target", "weight", "core_distances"}
    assert set(rec["attributes"]) == set(meta["attributes"]) - {WRITTEN_ATTR}


# --------------------------------------------------------------------------
# an output never inside the input, nor the input inside an output
# --------------------------------------------------------------------------
@pytest.fixture
def snap(tmp_path, pts):
    path = write_snapshot(tmp_path / "snap.zarr", pts, chunk_rows=100)
    return path, contents(path)


def _inside_refused(call, snap_and_before, out):
    path, before = snap_and_before
    msg = refused(call, out)
    assert "inside the input" in msg or "holds the input" in msg or "is the input" in msg, msg
    assert contents(path) == before, "the input changed"
    return msg


@pytest.mark.parametrize("name", ["edges.zarr", "edges.npy"])
def test_output_inside_the_input_emst(snap, name):
    out = os.path.join(snap[0], name)
    _inside_refused(lambda rec: emst_dask.emst(snap[0], client=False, out=out, progress=rec),
                    snap, out)


def test_output_inside_the_input_emst_array_path(snap):
    """The input given as the array inside the snapshot: the output may not
    go into the store holding it either."""
    out = os.path.join(snap[0], "edges.zarr")
    _inside_refused(lambda rec: emst_dask.emst(os.path.join(snap[0], "points"), client=False,
                                               out=out, progress=rec), snap, out)


def test_output_inside_the_input_through_a_symbolic_link(tmp_path, snap):
    link = tmp_path / "view"
    os.symlink(snap[0], link)
    out = os.fspath(link / "edges.zarr")
    _inside_refused(lambda rec: emst_dask.emst(snap[0], client=False, out=out, progress=rec),
                    snap, out)


def test_output_inside_the_input_fof(snap):
    out = os.path.join(snap[0], "halos.zarr")
    _inside_refused(lambda rec: emst_dask.fof(snap[0], 0.05, client=False, out=out,
                                              progress=rec), snap, out)


def test_output_inside_the_input_hdbscan(snap):
    out = os.path.join(snap[0], "labels.zarr")
    est = emst_dask.HDBSCAN(min_cluster_size=5, client=False, out=out)
    _inside_refused(lambda rec: est.fit(snap[0], progress=rec), snap, out)


def test_output_inside_another_input_of_a_batch(tmp_path, pts, other_pts):
    a = write_snapshot(tmp_path / "a.zarr", pts, chunk_rows=100)
    b = write_snapshot(tmp_path / "b.zarr", other_pts, chunk_rows=100)
    before = contents(b)
    with pytest.raises(emst_dask.InputError) as err:
        emst_dask.emst_many([a, b], outs=[os.path.join(b, "edges.zarr"),
                                          os.fspath(tmp_path / "b-edges.zarr")], client=False)
    assert "b.zarr" in str(err.value) and "inside the input" in str(err.value), str(err.value)
    assert contents(b) == before


@pytest.mark.parametrize("command", ["run", "fof", "hdbscan"])
def test_output_inside_the_input_cli(runner, snap, command):
    path, before = snap
    out = os.path.join(path, "result.zarr")
    args = {"run": ["run", path, "--out", out, "--in-process"],
            "fof": ["fof", path, "-b", "0.05", "--out", out, "--in-process"],
            "hdbscan": ["hdbscan", path, "--out", out, "--min-cluster-size", "5"]}[command]
    error_line(runner.invoke(main, args), "result.zarr", "inside the input")
    assert contents(path) == before


@pytest.mark.parametrize("command", ["hdbscan", "cut", "linkage", "stats"])
def test_output_inside_an_input_edge_store_cli(runner, tmp_path, pts, command):
    """The products of an edge store may not be written into it (nor into
    the points ``stats`` reads)."""
    edges = os.fspath(tmp_path / "mr.zarr")
    emst_dask.emst(pts, out=edges, min_samples=3 if command == "hdbscan" else 1)
    npy = os.fspath(tmp_path / "pts.npy")
    np.save(npy, pts)
    before = contents(edges)
    args = {"hdbscan": ["hdbscan", edges, "--out", os.path.join(edges, "l.zarr"),
                        "--min-cluster-size", "5", "--min-samples", "3"],
            "cut": ["cut", edges, "-b", "0.1", "--out", os.path.join(edges, "l.zarr")],
            "linkage": ["linkage", edges, "--out", os.path.join(edges, "l.npy")],
            "stats": ["stats", edges, "--points", npy, "--out",
                      os.path.join(edges, "s.npz")]}[command]
    error_line(runner.invoke(main, args), "inside the input")
    assert contents(edges) == before


def test_output_inside_the_input_submit(snap):
    """A detached job (the service path) is refused before it is submitted."""
    from distributed import Client

    out = os.path.join(snap[0], "edges.zarr")
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=None) as c:
        with pytest.raises(emst_dask.OutputError) as err:
            emst_dask.submit(snap[0], out=out, client=c)
        assert "inside the input" in str(err.value), str(err.value)
        assert not c.list_datasets()
    assert contents(snap[0]) == snap[1]


def test_overwrite_of_a_url_refuses_a_store_holding_a_user_array(pts, other_pts):
    """A store at a URL: its arrays, groups and group attributes are judged."""
    out = "memory://owned-edges-with-extra.zarr"
    emst_dask.emst(other_pts, out=out, client=False)
    g = zarr.open_group(out, mode="r+")
    g.create_array("my_velocities", shape=(3,), dtype="f8")[...] = np.arange(3.0)
    g.attrs["my_note"] = "kept"
    with pytest.raises(emst_dask.OutputError) as err:
        emst_dask.emst(pts, out=out, overwrite=True, client=False)
    assert "my_velocities" in str(err.value) and "my_note" in str(err.value), str(err.value)
    g = zarr.open_group(out, mode="r")
    assert "my_velocities" in g and g.attrs["my_note"] == "kept"
    assert g["weight"].shape == (len(other_pts) - 1,)
