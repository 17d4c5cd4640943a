"""Outputs of the integrity issue: what may be written, replaced or refused.

Which defect of the issue each test pins:

* **6** -- ``overwrite=True`` / ``--overwrite`` replaces only what this
  package wrote: an edge store it recognises (a Zarr group whose attributes
  carry the package's edge-store format tag, complete or not) or a ``.npy``
  edge array (an (m, 3) float64 array); never the input, never a directory
  holding the input, never a directory of the user's files, a Zarr snapshot
  or a ``.npy`` that is not an edge array.  Everything else raises
  ``emst_dask.OutputError`` before any work, the thing left intact:
  ``test_overwrite_refuses_*``, ``test_overwrite_replaces_*``,
  ``test_overwrite_on_a_cluster_*``, ``test_cli_run_overwrite_*``.  A
  ``.npy`` is the package's only when it carries the package's header
  (``emst_dask.io.npy``): a user's float64 (n, 3) cloud, their own copy of
  an edge array, their int64 particle ids are refused:
  ``test_overwrite_refuses_an_npy_of_the_right_shape_*``,
  ``test_overwrite_refuses_a_users_int64_npy_as_labels``,
  ``test_cli_generate_overwrite_refuses_a_users_npy``.
* **7** -- ``emst-dask run X.npy --out X.npy`` (with or without
  ``--overwrite``) and ``run X.npy --out EXISTING.npy`` without
  ``--overwrite`` are refused; ``emst-dask generate --out EXISTING`` is
  refused without ``--overwrite`` (.npy and .zarr) and with it replaces only
  a .npy file or a snapshot that generate wrote, never a directory of other
  files; two concurrent writers of one output: exactly one wins, the other
  gets ``OutputError``, the output holds the winner's edges:
  ``test_cli_run_refuses_*``, ``test_cli_run_overwrite_replaces_*``,
  ``test_cli_generate_*``, ``test_api_refuses_an_existing_npy_*``,
  ``test_two_concurrent_writers_of_one_output_exactly_one_wins``.
* **12** (part) -- an output whose parent directory is missing, or is a
  file, is refused with ``OutputError`` before any work (no ``tree`` or
  ``iteration`` progress phase; on the command line no summary line):
  ``test_output_without_a_parent_directory_*``,
  ``test_cli_output_without_a_parent_directory_*``.
* **3** (write side) -- every array of an edge store (zarr_format 2 and 3)
  and of a snapshot written by ``emst-dask generate`` carries a checksum
  codec (v3: ``crc32c``; v2: a checksum filter such as numcodecs CRC32,
  Adler32, Fletcher32); bytes flipped in one chunk file of an edge store make
  ``read_edges`` raise ``InputError``: ``test_*_carries_a_checksum*``,
  ``test_flipped_bytes_in_an_edge_store_chunk_are_an_input_error``.
* Normal path (not a defect; these pass today and must keep passing): a
  complete edge store is written and read back exactly in both formats, and
  a generated snapshot is read exactly:
  ``test_complete_edge_store_is_written_and_read_exactly``,
  ``test_generated_snapshot_is_read_exactly``.

``emst_dask.OutputError`` does not exist on today's code; tests that name it
fail there with AttributeError before doing anything.
"""
from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import emst_dask
from emst_dask import datasets
from emst_dask.cli import main
from oracle import edge_set
from service_util import assert_same_tree, cloud, no_tmp_siblings, write_snapshot

#: checksum codecs (zarr v3 names, numcodecs ids for v2 filters)
CHECKSUM_CODECS = {"crc32c", "crc32", "adler32", "fletcher32", "jenkins_lookup3"}
#: files of a Zarr store that hold metadata, not chunk data
METADATA_FILES = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}
#: progress phases that mean the computation has started
WORK_PHASES = {"tree", "core_distances", "iteration"}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pts():
    return cloud(400, 3, seed=21)


@pytest.fixture(scope="module")
def other_pts():
    return cloud(300, 3, seed=22)


@pytest.fixture
def runner():
    return CliRunner()


def contents(path) -> dict:
    """Everything at ``path``: {relative file path: bytes} (a file: {"": bytes}),
    directories included (as None), so that a removed empty directory shows."""
    path = os.fspath(path)
    if os.path.isfile(path):
        with open(path, "rb") as fh:
            return {"": fh.read()}
    out = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path) + "/"] = None
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
    return out


def user_directory(path):
    """A directory of the user's own files (nothing this package wrote)."""
    os.makedirs(os.path.join(path, "sub"))
    with open(os.path.join(path, "notes.txt"), "w") as fh:
        fh.write("my notes\n")
    with open(os.path.join(path, "sub", "table.csv"), "w") as fh:
        fh.write("a,b\n1,2\n")
    np.save(os.path.join(path, "sub", "thing.npy"), np.arange(10))
    return os.fspath(path)


class Phases:
    """A progress callback that records the phases reported."""

    def __init__(self):
        self.seen = []
        self.lock = threading.Lock()

    def __call__(self, phase, **info):
        with self.lock:
            self.seen.append(phase)

    def worked(self):
        return sorted(WORK_PHASES.intersection(self.seen))


def refused(call, place, *, progress=None):
    """``call(progress)`` raises OutputError (an InputError) naming ``place``
    (its base name), before any work; returns the message."""
    OutputError = emst_dask.OutputError
    assert issubclass(OutputError, emst_dask.InputError)
    rec = Phases() if progress is None else progress
    with pytest.raises(OutputError) as exc:
        call(rec)
    msg = str(exc.value)
    assert os.path.basename(os.fspath(place).rstrip("/")) in msg, msg
    assert rec.worked() == [], f"refused only after work began: phases {rec.seen}"
    return msg


def error_line(res, *fragments):
    """One ``Error:`` line, status 2, no traceback; returns the line."""
    assert res.exit_code == 2, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, res.output
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    return lines[0]


def no_summary(res):
    """The command printed no result summary: it computed nothing."""
    assert "total_weight=" not in res.output and "iterations=" not in res.output, res.output


def same_edges(store_or_tree, reference):
    tree = store_or_tree.load() if hasattr(store_or_tree, "load") else store_or_tree
    assert tree.n_edges == reference.n_edges
    assert edge_set(tree.source, tree.target) == edge_set(reference.source, reference.target)
    assert tree.total_weight == pytest.approx(reference.total_weight, rel=1e-12)


def npy_edges_equal(path, reference):
    e = np.load(path)
    assert e.shape == (reference.n_edges, 3) and e.dtype == np.float64
    assert edge_set(e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)) == \
        edge_set(reference.source, reference.target)
    assert float(e[:, 2].sum()) == pytest.approx(reference.total_weight, rel=1e-12)


def input_layout(tmp_path, pts, kind):
    """The input at top/data/<input> beside a user file: (input path, data dir, top dir)."""
    top = tmp_path / "project"
    data = top / "input_dir"
    data.mkdir(parents=True)
    (data / "README.txt").write_text("the input of my analysis\n")
    if kind == "zarr":
        src = write_snapshot(data / "snap.zarr", pts, chunk_rows=100)
    else:
        src = os.fspath(data / "cloud.npy")
        np.save(src, pts)
    return src, os.fspath(data), os.fspath(top)


def edge_store(path, points, *, complete=True, zarr_format=3):
    """An edge store written by this package (``complete`` False: as a
    crashed job leaves one in place; the format tag is the package's own)."""
    emst_dask.emst(points, out=path, zarr_format=zarr_format)
    if not complete:
        g = zarr.open_group(os.fspath(path), mode="r+")
        assert g.attrs["format"]  # the package's tag, whatever it is
        g.attrs["complete"] = False
    return os.fspath(path)


def checksum_codecs(arr) -> set:
    """Names/ids of the checksum codecs in a zarr array's metadata (codecs,
    filters, compressor; nested codecs such as sharding's included)."""
    found = set()

    def walk(obj):
        if isinstance(obj, dict):
            for key in ("name", "id"):
                v = obj.get(key)
                if isinstance(v, str) and v.lower() in CHECKSUM_CODECS:
                    found.add(v.lower())
            for v in obj.values():
                walk(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                walk(v)

    meta = arr.metadata.to_dict()
    walk({k: meta.get(k) for k in ("codecs", "filters", "compressor", "compressors")})
    return found


def chunk_files(store) -> list:
    """The chunk files of every array of a local Zarr store."""
    out = []
    for root, _dirs, files in os.walk(store):
        for f in files:
            if f not in METADATA_FILES:
                out.append(os.path.join(root, f))
    return sorted(out)


# --------------------------------------------------------------------------
# 6: overwrite=True replaces only what this package wrote (API, in process)
# --------------------------------------------------------------------------
def test_overwrite_refuses_a_directory_of_user_files(tmp_path, pts):
    mine = user_directory(tmp_path / "my_results")
    before = contents(mine)
    refused(lambda rec: emst_dask.emst(pts, out=mine, overwrite=True, progress=rec), mine)
    assert contents(mine) == before
    assert no_tmp_siblings(mine)


@pytest.mark.parametrize("kind", ["zarr", "npy"])
def test_overwrite_refuses_the_input_itself(tmp_path, pts, kind):
    src, data, _top = input_layout(tmp_path, pts, kind)
    before = contents(data)
    refused(lambda rec: emst_dask.emst(src, client=False, out=src, overwrite=True,
                                       progress=rec), src)
    assert contents(data) == before
    assert no_tmp_siblings(src)


@pytest.mark.parametrize("kind", ["zarr", "npy"])
@pytest.mark.parametrize("holder", ["parent", "grandparent"])
def test_overwrite_refuses_a_directory_holding_the_input(tmp_path, pts, kind, holder):
    src, data, top = input_layout(tmp_path, pts, kind)
    out = data if holder == "parent" else top
    before = contents(top)
    refused(lambda rec: emst_dask.emst(src, client=False, out=out, overwrite=True,
                                       progress=rec), out)
    assert contents(top) == before
    assert no_tmp_siblings(out)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_overwrite_refuses_a_zarr_snapshot(tmp_path, pts, other_pts, zarr_format):
    snap = write_snapshot(tmp_path / "other_snap.zarr", other_pts, zarr_format=zarr_format)
    before = contents(snap)
    refused(lambda rec: emst_dask.emst(pts, out=snap, overwrite=True, progress=rec), snap)
    assert contents(snap) == before
    assert no_tmp_siblings(snap)


@pytest.mark.parametrize("what", ["float32 (n, 3) point cloud", "float64 (n, 2) array",
                                  "int64 (n, 3) array"])
def test_overwrite_refuses_an_npy_that_is_not_an_edge_array(tmp_path, pts, other_pts, what):
    path = tmp_path / "precious.npy"
    if what.startswith("float32"):
        np.save(path, other_pts)                              # a point cloud, not edges
    elif what.startswith("float64"):
        np.save(path, other_pts[:, :2].astype(np.float64))
    else:
        np.save(path, np.arange(30, dtype=np.int64).reshape(10, 3))
    before = contents(path)
    refused(lambda rec: emst_dask.emst(pts, out=path, overwrite=True, progress=rec), path)
    assert contents(path) == before
    assert no_tmp_siblings(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("complete", [True, False], ids=["complete", "incomplete"])
def test_overwrite_replaces_an_edge_store_this_package_wrote(tmp_path, pts, other_pts,
                                                             complete, zarr_format):
    """(Passes today: the fix must keep replacing the package's own stores.)"""
    out = edge_store(tmp_path / "edges.zarr", other_pts, complete=complete,
                     zarr_format=zarr_format)
    st = emst_dask.emst(pts, out=out, overwrite=True, zarr_format=zarr_format)
    assert st.n == len(pts)
    got = emst_dask.read_edges(out)
    assert got.n_points == len(pts)
    assert_same_tree(got, pts)
    assert no_tmp_siblings(out)


def test_overwrite_replaces_an_npy_edge_array(tmp_path, pts, other_pts):
    """(Passes today.)"""
    path = tmp_path / "edges.npy"
    emst_dask.emst(other_pts, out=path)              # an (m, 3) float64 edge array
    assert np.load(path).shape == (len(other_pts) - 1, 3)
    emst_dask.emst(pts, out=path, overwrite=True)
    npy_edges_equal(path, emst_dask.emst(pts))
    assert no_tmp_siblings(path)


@pytest.mark.parametrize("what", ["3-D float64 point cloud", "copy of an edge array"])
def test_overwrite_refuses_an_npy_of_the_right_shape_it_did_not_write(tmp_path, pts,
                                                                      other_pts, what):
    """A user's (n, 3) float64 cloud has an edge array's shape and dtype, and
    so has their own ``np.save`` of an edge array: only a .npy carrying the
    package's header is replaced."""
    path = tmp_path / "mine.npy"
    if what.startswith("3-D"):
        np.save(path, other_pts.astype(np.float64))
    else:
        np.save(path, emst_dask.emst(other_pts).to_numpy())
    before = contents(path)
    msg = refused(lambda rec: emst_dask.emst(pts, out=path, overwrite=True, progress=rec),
                  path)
    assert "did not write" in msg
    assert contents(path) == before


def test_overwrite_refuses_a_users_int64_npy_as_labels(runner, tmp_path, pts):
    """Particle ids are an int64 .npy, like a label array: ``cut --overwrite``
    does not replace them, and does replace the labels it wrote."""
    from scipy.cluster.hierarchy import fcluster, linkage

    edges = os.fspath(tmp_path / "edges.zarr")
    emst_dask.emst(pts, out=edges)
    ids = tmp_path / "ids.npy"
    np.save(ids, np.arange(len(pts), dtype=np.int64))
    before = contents(ids)
    res = runner.invoke(main, ["cut", edges, "-b", "0.05", "--out", os.fspath(ids),
                               "--overwrite"])
    error_line(res, "ids.npy", "did not write")
    assert contents(ids) == before
    labels = os.fspath(tmp_path / "labels.npy")
    for b in ("0.05", "0.08"):
        res = runner.invoke(main, ["cut", edges, "-b", b, "--out", labels, "--overwrite"])
        assert res.exit_code == 0, res.output
    got = np.load(labels)
    want = fcluster(linkage(pts.astype(np.float64), "single"), 0.08, "distance")
    assert len(np.unique(got * (want.max() + 1) + want)) == len(np.unique(want)) \
        == len(np.unique(got))


def test_npy_outputs_are_plain_npy_files(tmp_path):
    """The marked header is a .npy header any reader takes: numpy reads the
    arrays back, memory-mapped too, for every dtype and shape written."""
    from emst_dask.io import npy

    rng = np.random.default_rng(5)
    for i, a in enumerate([rng.random((17, 3)), np.arange(9, dtype=np.int64),
                           rng.random((0, 4)), rng.random((4, 3))[:, ::2],
                           rng.random((6, 3)).astype(np.float32),
                           np.arange(24, dtype=np.int64).reshape(3, 8)]):
        path = tmp_path / f"a{i}.npy"
        kind = ("edges", "points", "clusters", "linkage")[i % 4]
        with open(path, "wb") as fh:
            npy.save(fh, a, kind)
        assert npy.written_here(path) == kind
        for got in (np.load(path), np.load(path, mmap_mode="r")):
            assert got.dtype == a.dtype and got.shape == a.shape
            np.testing.assert_array_equal(got, a)
        np.save(path, a)
        assert not npy.written_here(path)


def test_api_refuses_an_existing_npy_without_overwrite(tmp_path, pts, other_pts):
    """7 (API side): an existing .npy edge array is kept without overwrite=True."""
    path = tmp_path / "edges.npy"
    emst_dask.emst(other_pts, out=path)
    before = contents(path)
    msg = refused(lambda rec: emst_dask.emst(pts, out=path, progress=rec), path)
    assert "overwrite" in msg
    assert contents(path) == before


# --------------------------------------------------------------------------
# 6: the same on an embedded cluster (the check is made before submission)
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("distributed")
    with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu",
                                   env={"NUMBA_NUM_THREADS": "1"}) as emb:
        yield emb


@pytest.mark.parametrize("case", ["user directory", "input snapshot", "parent of the input",
                                  "other snapshot", "point cloud .npy", "missing parent",
                                  "parent is a file"])
def test_overwrite_on_a_cluster_refuses_what_it_did_not_write(cluster, tmp_path, pts,
                                                              other_pts, case):
    src, data, top = input_layout(tmp_path, pts, "zarr")
    guard = top
    if case == "user directory":
        out = guard = user_directory(tmp_path / "my_results")
    elif case == "input snapshot":
        out = src
    elif case == "parent of the input":
        out = data
    elif case == "other snapshot":
        out = guard = write_snapshot(tmp_path / "other.zarr", other_pts)
    elif case == "point cloud .npy":
        out = guard = os.fspath(tmp_path / "cloud.npy")
        np.save(out, other_pts)
    elif case == "missing parent":
        out = os.fspath(tmp_path / "nowhere" / "edges.zarr")
        guard = tmp_path
    else:
        (tmp_path / "afile").write_text("not a directory\n")
        out = os.fspath(tmp_path / "afile" / "edges.zarr")
        guard = tmp_path / "afile"
    before = contents(guard)
    src_before = contents(data)
    place = os.path.dirname(out) if "parent" in case and "input" not in case else out
    refused(lambda rec: emst_dask.emst(src, client=cluster.client, out=out, overwrite=True,
                                       progress=rec), place)
    assert contents(guard) == before
    assert contents(data) == src_before
    assert not os.path.exists(tmp_path / "nowhere")


def test_overwrite_on_a_cluster_replaces_its_own_edge_store(cluster, tmp_path, pts,
                                                            other_pts):
    """(Passes today.)"""
    src, _data, _top = input_layout(tmp_path, pts, "zarr")
    out = edge_store(tmp_path / "edges.zarr", other_pts)
    emst_dask.emst(src, client=cluster.client, out=out, overwrite=True)
    assert_same_tree(emst_dask.read_edges(out), pts)
    assert no_tmp_siblings(out)


# --------------------------------------------------------------------------
# 6 and 7: the command line
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kind,case", [
    (kind, case) for kind in ("zarr", "npy")
    for case in ("user directory", "input snapshot", "parent of the input", "other snapshot",
                 "point cloud .npy")
    if not (kind == "npy" and case == "input snapshot")])  # .npy: the next test
def test_cli_run_overwrite_refuses_what_it_did_not_write(runner, tmp_path, pts, other_pts,
                                                         case, kind):
    src, data, top = input_layout(tmp_path, pts, kind)
    guard = top
    if case == "user directory":
        out = guard = user_directory(tmp_path / "my_results")
    elif case == "input snapshot":
        out = src
    elif case == "parent of the input":
        out = data
    elif case == "other snapshot":
        out = guard = write_snapshot(tmp_path / "other.zarr", other_pts)
    else:
        out = guard = os.fspath(tmp_path / "precious.npy")
        np.save(out, other_pts)
    before, src_before = contents(guard), contents(data)
    res = runner.invoke(main, ["run", src, "--out", out, "--overwrite", "--in-process",
                               "--backend", "cpu"])
    error_line(res, os.path.basename(out))
    no_summary(res)
    assert contents(guard) == before
    assert contents(data) == src_before


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "--overwrite"])
def test_cli_run_refuses_to_write_over_its_input(runner, tmp_path, pts, overwrite):
    """7: ``emst-dask run X.npy --out X.npy``."""
    src = os.fspath(tmp_path / "cloud.npy")
    np.save(src, pts)
    before = contents(src)
    args = ["run", src, "--out", src, "--backend", "cpu"] + (["--overwrite"] if overwrite
                                                             else [])
    res = runner.invoke(main, args)
    error_line(res, "cloud.npy")
    no_summary(res)
    assert contents(src) == before


def test_cli_run_refuses_an_existing_npy_without_overwrite(runner, tmp_path, pts, other_pts):
    """7: ``emst-dask run X.npy --out EXISTING.npy`` (an edge array of an earlier run)."""
    src = os.fspath(tmp_path / "cloud.npy")
    np.save(src, pts)
    earlier = os.fspath(tmp_path / "earlier.npy")
    np.save(tmp_path / "other.npy", other_pts)
    res = runner.invoke(main, ["run", os.fspath(tmp_path / "other.npy"), "--out", earlier,
                               "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    before = contents(earlier)
    res = runner.invoke(main, ["run", src, "--out", earlier, "--backend", "cpu"])
    error_line(res, "earlier.npy", "--overwrite")
    no_summary(res)
    assert contents(earlier) == before


@pytest.mark.parametrize("ext", [".npy", ".zarr"])
def test_cli_run_overwrite_replaces_its_own_output(runner, tmp_path, pts, other_pts, ext):
    """(Passes today.)  An edge array / edge store of an earlier run is replaced."""
    src = os.fspath(tmp_path / "cloud.npy")
    np.save(src, pts)
    np.save(tmp_path / "other.npy", other_pts)
    out = os.fspath(tmp_path / f"edges{ext}")
    res = runner.invoke(main, ["run", os.fspath(tmp_path / "other.npy"), "--out", out,
                               "--in-process", "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["run", src, "--out", out, "--overwrite", "--in-process",
                               "--backend", "cpu"])
    assert res.exit_code == 0, res.output
    ref = emst_dask.emst(pts)
    if ext == ".npy":
        npy_edges_equal(out, ref)
    else:
        assert_same_tree(emst_dask.read_edges(out), pts, reference=ref)
    assert no_tmp_siblings(out)


def _generate(runner, out, *extra, seed=0, n=500):
    return runner.invoke(main, ["generate", "uniform", str(n), "--out", os.fspath(out),
                                "--seed", str(seed), "--chunk-rows", "200", *extra])


@pytest.mark.parametrize("ext", [".npy", ".zarr"])
def test_cli_generate_refuses_an_existing_output_without_overwrite(runner, tmp_path, ext):
    out = tmp_path / f"cloud{ext}"
    assert _generate(runner, out, seed=0).exit_code == 0
    before = contents(out)
    res = _generate(runner, out, seed=1)
    error_line(res, f"cloud{ext}", "--overwrite")
    assert contents(out) == before


@pytest.mark.parametrize("ext", [".npy", ".zarr"])
def test_cli_generate_overwrite_replaces_its_own_output(runner, tmp_path, ext):
    out = tmp_path / f"cloud{ext}"
    assert _generate(runner, out, seed=0).exit_code == 0
    res = _generate(runner, out, "--overwrite", seed=1)
    assert res.exit_code == 0, res.output
    want = datasets.uniform(500, dim=3, seed=1)
    got = np.load(out) if ext == ".npy" else zarr.open_group(out, mode="r")["points"][:]
    np.testing.assert_array_equal(got, want)
    assert no_tmp_siblings(out)


def test_cli_generate_overwrite_refuses_a_users_npy(runner, tmp_path, other_pts):
    out = tmp_path / "catalogue.npy"
    np.save(out, other_pts)
    before = contents(out)
    res = _generate(runner, out, "--overwrite", seed=1)
    error_line(res, "catalogue.npy", "did not write")
    assert contents(out) == before


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "--overwrite"])
def test_cli_generate_refuses_a_directory_of_other_files(runner, tmp_path, overwrite):
    mine = user_directory(tmp_path / "my_results")
    before = contents(mine)
    res = _generate(runner, mine, *(["--overwrite"] if overwrite else []))
    error_line(res, "my_results")
    assert contents(mine) == before


# --------------------------------------------------------------------------
# 7: two concurrent writers of one output
# --------------------------------------------------------------------------
@pytest.mark.parametrize("ext", [".npy", ".zarr"])
def test_two_concurrent_writers_of_one_output_exactly_one_wins(tmp_path, pts, other_pts, ext):
    """Two threads write the same output (no overwrite).  Each job holds at
    its first ``write`` report until the other has reached its own (so both
    have passed every up-front check and computed their tree); the
    computations themselves are serialised (one numba computation at a time).
    Exactly one job succeeds, the other raises OutputError, and the output
    holds the winner's tree."""
    OutputError = emst_dask.OutputError
    path = os.fspath(tmp_path / f"edges{ext}")
    clouds = [pts, other_pts]
    refs = [emst_dask.emst(c) for c in clouds]
    barrier = threading.Barrier(2)
    compute = threading.Lock()
    results = [None, None]

    def job(i):
        state = {"held": False, "written": False}

        def progress(phase, **info):
            if phase in ("done", "error"):
                return
            if phase == "write":
                if state["held"]:
                    state["held"] = False
                    compute.release()
                if not state["written"]:
                    state["written"] = True
                    try:
                        barrier.wait(timeout=60)
                    except threading.BrokenBarrierError:
                        pass
                return
            if not state["held"] and not state["written"]:
                compute.acquire()
                state["held"] = True

        try:
            results[i] = emst_dask.emst(clouds[i], out=path, progress=progress)
        except BaseException as exc:  # noqa: BLE001 - recorded for the asserts
            results[i] = exc
            barrier.abort()
        finally:
            if state["held"]:
                compute.release()

    threads = [threading.Thread(target=job, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    errors = [r for r in results if isinstance(r, BaseException)]
    wins = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert len(wins) == 1, f"exactly one writer must succeed: {results}"
    assert len(errors) == 1 and isinstance(errors[0], OutputError), errors
    assert os.path.basename(path) in str(errors[0])
    w = wins[0]
    if ext == ".npy":
        npy_edges_equal(path, refs[w])
    else:
        same_edges(emst_dask.read_edges(path), refs[w])
    assert no_tmp_siblings(path)


# --------------------------------------------------------------------------
# 12 (part): an output that cannot be written is refused before any work
# --------------------------------------------------------------------------
def _unwritable(tmp_path, why, ext):
    if why == "missing parent":
        return os.fspath(tmp_path / "nowhere" / f"edges{ext}"), os.fspath(tmp_path / "nowhere")
    (tmp_path / "afile").write_text("not a directory\n")
    return os.fspath(tmp_path / "afile" / f"edges{ext}"), os.fspath(tmp_path / "afile")


@pytest.mark.parametrize("ext", [".npy", ".zarr"])
@pytest.mark.parametrize("why", ["missing parent", "parent is a file"])
@pytest.mark.parametrize("source", ["points", "snapshot", "npy file"])
def test_output_without_a_parent_directory_is_refused_before_any_work(tmp_path, pts, why,
                                                                      ext, source):
    out, parent = _unwritable(tmp_path, why, ext)
    if source == "points":
        src, kw = pts, {}
    elif source == "snapshot":
        src, kw = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=100), {"client": False}
    else:
        src, kw = os.fspath(tmp_path / "c.npy"), {"client": False}
        np.save(src, pts)
    before = contents(tmp_path)
    refused(lambda rec: emst_dask.emst(src, out=out, progress=rec, **kw), parent)
    assert contents(tmp_path) == before
    assert not os.path.exists(tmp_path / "nowhere")


@pytest.mark.parametrize("ext", [".npy", ".zarr"])
@pytest.mark.parametrize("why", ["missing parent", "parent is a file"])
def test_cli_output_without_a_parent_directory_is_refused_before_any_work(runner, tmp_path,
                                                                          pts, why, ext):
    src = os.fspath(tmp_path / "cloud.npy")
    np.save(src, pts)
    out, parent = _unwritable(tmp_path, why, ext)
    before = contents(tmp_path)
    res = runner.invoke(main, ["run", src, "--out", out, "--in-process", "--backend", "cpu"])
    error_line(res, os.path.basename(parent))
    no_summary(res)
    assert contents(tmp_path) == before


@pytest.mark.parametrize("source", ["points", "npy file"])
def test_mutual_reachability_tree_to_an_npy_is_refused_before_any_work(tmp_path, pts, source):
    """An edge .npy records no min_samples: written there, a mutual-
    reachability tree would be read back as a Euclidean one (cut and
    linkage would take its weights for distances)."""
    src, kw = pts, {}
    if source == "npy file":
        src, kw = os.fspath(tmp_path / "c.npy"), {"client": False}
        np.save(src, pts)
    out = os.fspath(tmp_path / "mr.npy")
    before = contents(tmp_path)
    msg = refused(lambda rec: emst_dask.emst(src, min_samples=3, out=out, progress=rec, **kw),
                  out)
    assert "min_samples" in msg and ".zarr" in msg
    assert contents(tmp_path) == before
    store = emst_dask.emst(src, min_samples=3, out=os.fspath(tmp_path / "mr.zarr"), **kw)
    assert store.min_samples == 3
    assert emst_dask.emst(src, out=out, **kw).min_samples in (None, 1)  # Euclidean: fine


def test_periodic_tree_to_an_npy_is_refused_before_any_work(tmp_path, pts):
    """An edge .npy records no box: a periodic tree written there would be
    read back as an open one (its statistics and catalogues refused)."""
    box = float(np.ceil(pts.max())) + 1.0
    out = os.fspath(tmp_path / "periodic.npy")
    before = contents(tmp_path)
    msg = refused(lambda rec: emst_dask.emst(pts - pts.min(), box_size=box, out=out,
                                             progress=rec), out)
    assert "box" in msg and ".zarr" in msg
    assert contents(tmp_path) == before
    store = emst_dask.emst(pts - pts.min(), box_size=box, out=os.fspath(tmp_path / "p.zarr"))
    assert store.load().box_size is not None


def test_cli_mutual_reachability_tree_to_an_npy_is_refused(runner, tmp_path, pts):
    src = os.fspath(tmp_path / "cloud.npy")
    np.save(src, pts)
    before = contents(tmp_path)
    res = runner.invoke(main, ["run", src, "-k", "3", "--out", os.fspath(tmp_path / "mr.npy"),
                               "--in-process", "--backend", "cpu"])
    error_line(res, "mr.npy", "min_samples")
    no_summary(res)
    assert contents(tmp_path) == before


# --------------------------------------------------------------------------
# 3 (write side): checksums in what the package writes
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_edge_store_arrays_carry_a_checksum(tmp_path, pts, zarr_format):
    out = tmp_path / "edges.zarr"
    emst_dask.emst(pts, out=out, zarr_format=zarr_format, min_samples=3)
    g = zarr.open_group(os.fspath(out), mode="r")
    assert g.metadata.zarr_format == zarr_format
    names = sorted(g.array_keys())
    assert {"source", "target", "weight", "core_distances"} <= set(names), names
    for name in names:
        assert checksum_codecs(g[name]), \
            f"{name}: no checksum codec in {g[name].metadata.to_dict()}"


@pytest.mark.parametrize("zarr_format", ["2", "3"])
@pytest.mark.parametrize("columns", [None, "x,y,z"], ids=["points", "columns"])
def test_generated_snapshot_carries_a_checksum(runner, tmp_path, zarr_format, columns):
    out = tmp_path / "snap.zarr"
    res = _generate(runner, out, "--zarr-format", zarr_format,
                    *(["--columns", columns] if columns else []))
    assert res.exit_code == 0, res.output
    g = zarr.open_group(os.fspath(out), mode="r")
    assert g.metadata.zarr_format == int(zarr_format)
    names = sorted(g.array_keys())
    assert names == (["points"] if columns is None else ["x", "y", "z"]), names
    for name in names:
        assert checksum_codecs(g[name]), \
            f"{name}: no checksum codec in {g[name].metadata.to_dict()}"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_flipped_bytes_in_an_edge_store_chunk_are_an_input_error(tmp_path, pts, zarr_format):
    """Eight trials: a copy of a good store, one byte of one chunk file (of
    any array) XOR-ed with a random non-zero mask.  Never silently different
    edges: read_edges raises InputError naming the store and the array.
    zarr_format 3 (crc32c over the stored bytes): every trial is detected.
    zarr_format 2 (a checksum filter sees the bytes before compression, so a
    flip in a compressor header field that the decoder ignores is harmless):
    every trial is detected or reads back exactly the good tree, and at
    least 6 of the 8 are detected."""
    good = os.fspath(tmp_path / "good.zarr")
    emst_dask.emst(pts, out=good, zarr_format=zarr_format, chunk_rows=100, min_samples=2)
    ref = emst_dask.read_edges(good)
    assert_same_tree(ref, pts, 2)
    rng = np.random.default_rng(1234 + zarr_format)
    detected = 0
    for trial in range(8):
        bad = os.fspath(tmp_path / f"bad{trial}.zarr")
        shutil.copytree(good, bad)
        files = chunk_files(bad)
        assert len(files) >= 4, files   # 4 arrays, one chunk (or shard) file at least
        victim = files[int(rng.integers(len(files)))]
        with open(victim, "rb") as fh:
            data = bytearray(fh.read())
        at = int(rng.integers(len(data)))
        data[at] ^= int(rng.integers(1, 256))
        with open(victim, "wb") as fh:
            fh.write(bytes(data))
        where = (trial, os.path.relpath(victim, bad), at)
        try:
            got = emst_dask.read_edges(bad)
        except emst_dask.InputError as exc:
            detected += 1
            msg = str(exc)
            array = os.path.relpath(victim, bad).split(os.sep)[0]
            assert f"bad{trial}.zarr" in msg and array in msg, (where, msg)
            continue
        assert zarr_format == 2, f"corruption not detected: {where}"
        for name in ("source", "target", "weight", "core_distances"):
            np.testing.assert_array_equal(getattr(got, name), getattr(ref, name),
                                          err_msg=f"silently different {name}: {where}")
    assert detected >= (8 if zarr_format == 3 else 6), detected


# --------------------------------------------------------------------------
# the normal path still works (passes today)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("min_samples", [1, 3])
def test_complete_edge_store_is_written_and_read_exactly(tmp_path, pts, zarr_format,
                                                         min_samples):
    out = os.fspath(tmp_path / "edges.zarr")
    ref = emst_dask.emst(pts, min_samples=min_samples, backend="cpu")
    st = emst_dask.emst(pts, out=out, zarr_format=zarr_format, min_samples=min_samples,
                        chunk_rows=128, backend="cpu")
    assert isinstance(st, emst_dask.EdgeStore)
    opened = emst_dask.open_edges(out)
    assert opened.attrs["complete"] is True
    assert opened.n == len(pts) and opened.n_edges == len(pts) - 1
    assert zarr.open_group(out, mode="r").metadata.zarr_format == zarr_format
    tree = emst_dask.read_edges(out)
    assert_same_tree(tree, pts, min_samples, reference=ref)
    np.testing.assert_array_equal(tree.weight, ref.weight)
    if min_samples > 1:
        np.testing.assert_array_equal(tree.core_distances, ref.core_distances)
    assert no_tmp_siblings(out)


@pytest.mark.parametrize("zarr_format", ["2", "3"])
def test_generated_snapshot_is_read_exactly(runner, tmp_path, zarr_format):
    out = tmp_path / "snap.zarr"
    res = _generate(runner, out, "--zarr-format", zarr_format, n=700)
    assert res.exit_code == 0, res.output
    want = datasets.uniform(700, dim=3, seed=0)
    np.testing.assert_array_equal(zarr.open_group(os.fspath(out), mode="r")["points"][:], want)
    assert_same_tree(emst_dask.emst(os.fspath(out), client=False), want)


def test_job_dying_between_the_renames_of_an_overwrite_keeps_the_old_store(tmp_path, pts):
    """``place`` sets the old store aside, then moves the new one in; a
    worker killed in between leaves only the set-aside old store.  The
    failed job's clean-up must put it back, not delete it as a temporary."""
    from emst_dask.io.output import Output

    out = str(tmp_path / "edges.zarr")
    old = emst_dask.emst(pts, out=out)
    o = Output(out, overwrite=True)
    os.rename(out, o.temporary("old-12345678"))  # place's first rename; then the process dies
    os.makedirs(o.temporary("attempt-0"))      # the new store's unfinished temporary
    assert o.cleanup() == 2
    back = emst_dask.read_edges(out)
    assert (edge_set(np.asarray(back.source), np.asarray(back.target))
            == edge_set(np.asarray(old.source), np.asarray(old.target)))
    assert no_tmp_siblings(out)


def test_cleanup_never_moves_an_unfinished_temporary_into_place(tmp_path):
    """Only ``place``'s set-aside old output goes back: an output whose own
    name holds "-old-" does not make every temporary look set aside."""
    from emst_dask.io.output import Output

    out = str(tmp_path / "edges-old-1.zarr")
    o = Output(out, overwrite=True)
    os.makedirs(o.temporary("attempt-0"))  # an unfinished new store
    assert o.cleanup() == 1
    assert not os.path.lexists(out)
    assert no_tmp_siblings(out)


def test_a_dead_jobs_set_aside_output_is_said_before_any_work(tmp_path, pts):
    """A job killed between ``place``'s renames, whose client never cleaned
    up (it died too): the user's former output sits hidden in a set-aside
    temporary.  The next job writing that name refuses before any work,
    naming where the former output is and how to put it back; its own job
    writes nothing and leaves the set-aside as it is."""
    from emst_dask.io.output import Output

    out = str(tmp_path / "edges.zarr")
    emst_dask.emst(pts, out=out)
    dead = Output(out, overwrite=True)
    held = dead.temporary("old-12345678")
    os.rename(out, held)
    events = []
    with pytest.raises(emst_dask.OutputError) as err:
        emst_dask.emst(pts, out=out, overwrite=True,
                       progress=lambda phase, **kw: events.append(phase))
    msg = str(err.value)
    assert "edges.zarr is absent" in msg and held in msg and "move it back" in msg, msg
    assert "tree" not in events and "iteration" not in events, events
    assert os.path.isdir(held) and not os.path.lexists(out)
    os.rename(held, out)  # as the message says
    assert emst_dask.read_edges(out).n_edges == len(pts) - 1


def test_a_dead_jobs_temporaries_are_said_in_the_log(tmp_path, pts, caplog):
    """Unfinished temporaries of another job (a worker killed while writing,
    its client gone) may belong to a job that still runs: the next job
    leaves them and says where they are."""
    import logging

    from emst_dask.io.output import Output

    out = str(tmp_path / "edges.zarr")
    left = Output(out).temporary("attempt-0")
    os.makedirs(left)
    with caplog.at_level(logging.WARNING, logger="emst_dask.io.output"):
        emst_dask.emst(pts, out=out)
    assert_same_tree(emst_dask.open_edges(out), pts)
    assert os.path.basename(left) in caplog.text and "temporary of earlier jobs" in caplog.text
    assert os.path.isdir(left)


@pytest.mark.parametrize("kind", ["run", "hdbscan", "linkage"])
def test_cli_generate_overwrite_refuses_the_packages_other_npy_files(runner, tmp_path, pts,
                                                                     kind):
    """``generate --overwrite`` replaces only a point cloud ``generate``
    wrote: an edge array, labels or a linkage matrix the package wrote are
    results, refused and left as they are."""
    src = tmp_path / "pts.npy"
    np.save(src, pts)
    out = tmp_path / f"{kind}.npy"
    if kind == "run":
        args = ["run", str(src), "--out", str(out)]
    elif kind == "hdbscan":
        args = ["hdbscan", str(src), "--min-cluster-size", "5", "--out", str(out)]
    else:
        edges = tmp_path / "e.zarr"
        assert runner.invoke(main, ["run", str(src), "--out", str(edges)]).exit_code == 0
        args = ["linkage", str(edges), "--out", str(out)]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    before = out.read_bytes()
    res = runner.invoke(main, ["generate", "uniform", "100", "--out", str(out), "--overwrite"])
    assert res.exit_code != 0 and "not a point cloud emst-dask generated" in res.output, \
        res.output
    assert out.read_bytes() == before
    res = runner.invoke(main, ["generate", "uniform", "100", "--out", str(tmp_path / "g.npy")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["generate", "uniform", "50", "--out", str(tmp_path / "g.npy"),
                               "--overwrite"])
    assert res.exit_code == 0 and np.load(tmp_path / "g.npy").shape[0] == 50, res.output


@pytest.fixture(scope="module")
def picture_sources(tmp_path_factory, pts):
    """A directory with the points, their tree and their clusters, computed
    once a module (each costs a job on the embedded cluster): the inputs of
    the picture-drawing commands, which the tests only read."""
    where = tmp_path_factory.mktemp("picture-sources")
    runner = CliRunner()
    np.save(where / "pts.npy", pts)
    res = runner.invoke(main, ["run", str(where / "pts.npy"), "--out", str(where / "e.zarr")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["hdbscan", str(where / "pts.npy"), "-m", "5", "--out",
                               str(where / "h.zarr")])
    assert res.exit_code == 0, res.output
    return where


def _cli_picture(runner, sources, tmp_path, command, picture, *extra):
    """Run a picture-drawing command on the ``sources`` directory's inputs
    (its outputs other than the picture go to ``tmp_path``); its result."""
    src = sources / "pts.npy"
    args = {"plot": ["plot", str(sources / "e.zarr"), "--points", str(src), "--out"],
            "plot-clusters": ["plot-clusters", str(sources / "h.zarr"), "--points", str(src),
                              "--out"],
            "stats": ["stats", str(sources / "e.zarr"), "--points", str(src), "--plot"],
            "hdbscan": ["hdbscan", str(src), "-m", "5", "--out",
                        str(tmp_path / f"h-{len(os.listdir(tmp_path))}.zarr"), "--plot"]}
    return runner.invoke(main, args[command] + [str(picture), *extra])


@pytest.mark.parametrize("command", ["plot", "plot-clusters", "stats", "hdbscan"])
def test_cli_pictures_never_replace_a_users_file(runner, picture_sources, tmp_path, command):
    """A picture is an output: a file there already (the user's thesis.pdf)
    is refused, with or without --overwrite, and left as it was; a picture
    this package drew is replaced only with --overwrite."""
    thesis = tmp_path / "thesis.pdf"
    thesis.write_bytes(b"%PDF-1.4 the user's own words")
    for extra in ((), ("--overwrite",)):
        res = _cli_picture(runner, picture_sources, tmp_path, command, thesis, *extra)
        assert res.exit_code != 0 and "thesis.pdf" in res.output, res.output
        assert thesis.read_bytes() == b"%PDF-1.4 the user's own words"
    drawn = tmp_path / "drawn.svg"
    res = _cli_picture(runner, picture_sources, tmp_path, command, drawn)
    assert res.exit_code == 0 and drawn.read_bytes().lstrip().startswith(b"<?xml"), res.output
    res = _cli_picture(runner, picture_sources, tmp_path, command, drawn)
    assert res.exit_code != 0 and "already exists" in res.output, res.output
    res = _cli_picture(runner, picture_sources, tmp_path, command, drawn, "--overwrite")
    assert res.exit_code == 0, res.output
    assert no_tmp_siblings(str(drawn))


@pytest.mark.parametrize("command", ["plot", "plot-clusters", "stats", "hdbscan"])
@pytest.mark.parametrize("where", ["suffix", "directory"])
def test_cli_a_picture_that_cannot_be_drawn_is_refused_before_any_work(
        runner, picture_sources, tmp_path, command, where):
    """An unknown picture format or a missing directory is refused before
    the work: nothing is computed or written, here or beside the inputs."""
    before = sorted(os.listdir(tmp_path)), contents(picture_sources)
    bad = tmp_path / ("p.txt" if where == "suffix" else "nodir/p.png")
    res = _cli_picture(runner, picture_sources, tmp_path, command, bad)
    assert res.exit_code != 0, res.output
    assert (".png, .pdf or .svg" if where == "suffix" else "no directory") in res.output, \
        res.output
    assert "wrote" not in res.output and "n=" not in res.output, res.output
    assert (sorted(os.listdir(tmp_path)), contents(picture_sources)) == before


def test_cli_hdbscan_plot_of_npy_labels_is_refused_before_any_work(runner, tmp_path, pts):
    src = tmp_path / "pts.npy"
    np.save(src, pts)
    res = runner.invoke(main, ["hdbscan", str(src), "-m", "5", "--out", str(tmp_path / "l.npy"),
                               "--plot", str(tmp_path / "c.png")])
    assert res.exit_code != 0 and "condensed tree" in res.output, res.output
    assert sorted(os.listdir(tmp_path)) == ["pts.npy"]


def test_api_pictures_refuse_a_users_file(tmp_path, pts):
    """The API's pictures (statistics, ensembles, the tree) follow the same
    rule: an existing file that is not a picture drawn here is refused."""
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n the user's picture")
    st = emst_dask.emst(pts).statistics(pts)
    with pytest.raises(emst_dask.OutputError, match="mine.png"):
        st.plot(mine)
    assert mine.read_bytes() == b"\x89PNG\r\n\x1a\n the user's picture"
    out = tmp_path / "st.png"
    assert st.plot(out) == str(out) and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_url_and_store_object_outputs_in_this_process(pts):
    """memory:// URLs and zarr store objects as outputs, computed here: the
    store comes back and reads back exact (the clean-up of temporaries
    assumed a local path and raised a TypeError after the write)."""
    ms = zarr.storage.MemoryStore()
    for out in ("memory://url-out.zarr", ms):
        emst_dask.emst(pts, out=out, client=False)
        assert_same_tree(emst_dask.open_edges(out), pts)
    est = emst_dask.HDBSCAN(min_cluster_size=5, out="memory://url-clusters.zarr").fit(pts)
    want = emst_dask.HDBSCAN(min_cluster_size=5).fit(pts)
    np.testing.assert_array_equal(est.labels_, want.labels_)


def test_overwrite_of_a_url_replaces_only_a_store_of_its_kind(tmp_path, pts):
    """zarr's overwrite removes whatever a location holds: a URL or store
    object holding the user's files, a user's array, or a store of another
    kind is refused, with overwrite=True, and left as it was."""
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/user-files/notes.txt", b"the user's notes")
    zarr.create_array("memory://user-array.zarr", shape=(4,), dtype="f8")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for out in ("memory://user-files", "memory://user-array.zarr",
                zarr.storage.LocalStore(str(mine))):
        with pytest.raises(emst_dask.OutputError, match="not an edge store emst-dask wrote"):
            emst_dask.emst(pts, out=out, overwrite=True, client=False)
    assert fs.cat("/user-files/notes.txt") == b"the user's notes"
    assert zarr.open_array("memory://user-array.zarr", mode="r").shape == (4,)
    assert (mine / "notes.txt").read_text() == "mine"
    emst_dask.emst(pts, out="memory://edges-then-labels.zarr", client=False)
    with pytest.raises(emst_dask.OutputError, match="not a cluster store"):
        emst_dask.HDBSCAN(min_cluster_size=5, out="memory://edges-then-labels.zarr",
                          overwrite=True).fit(pts)
    emst_dask.emst(pts, out="memory://edges-then-labels.zarr", overwrite=True, client=False)
