"""Integrity of the point sources and edge stores (the integrity issue):
what is read is what was written, or an error that names the place.

Each test pins one numbered defect of the issue; all of them fail on the
code before the fix (how, in the report that came with this file):

1.  A missing chunk file of a Zarr snapshot read as zeros (zarr fills it with
    the fill value): ``InputError`` naming ``chunk K``, ``rows A-B`` and
    "missing", before any tree is computed (v2 and v3; a bare array, a group
    with an (n, d) array, 1-D columns) --
    ``test_missing_chunk_is_an_error_naming_the_chunk``,
    ``test_missing_column_chunk_is_an_error_naming_the_chunk``.
2.  A ``zarr.Array`` / ``zarr.Group`` opened with a relative path and given
    to a cluster was reopened by the workers relative to *their* working
    directory (every chunk "missing": total weight 0.0, a "complete" store):
    the exact tree, the exact edge store --
    ``test_relative_zarr_objects_are_read_by_workers_from_the_right_place``.
3.  Flipped bytes in a compressed chunk decoded silently to other numbers:
    snapshots of ``emst-dask generate`` and edge stores written by this
    package carry a checksum, every corruption is an ``InputError`` naming
    the chunk (and, for edge stores, the array); NaN decoded from an
    unchecksummed third-party chunk is reported as possibly corrupt --
    ``test_generated_snapshot_detects_every_corrupted_chunk``,
    ``test_edge_store_detects_every_corrupted_chunk``,
    ``test_nan_in_unchecksummed_chunk_says_it_may_be_corrupt``.
4.  Integer coordinates beyond 2**53 were rounded to float64 silently:
    ``InputError`` naming 2**53 and the first offending row (in-memory
    int64/uint64, .npy, Zarr); integers within +-2**53 stay exact --
    ``test_integers_beyond_2_53_are_refused_with_the_row``,
    ``test_integers_within_2_53_are_exact`` (a guard: passes today too).
5.  A tiny cluster inside a huge extent gave zero weights and a non-minimal
    tree (squared distances underflowed after the power-of-two scaling):
    the exact tree; and where no exact computation in the input precision
    exists, ``InputError`` before any work --
    ``test_tiny_cluster_in_huge_extent_is_exact``,
    ``test_unrepresentable_distance_range_is_refused``.
10. Big-endian float input crashed in numba: the exact tree, equal to the
    native-endian one (in memory, .npy, Zarr v2) --
    ``test_big_endian_input_gives_the_native_tree``.
12. (part) A broken ``zarr.json`` of a member array raised a bare
    ``JSONDecodeError`` (a traceback from the command): ``InputError`` and
    an ``Error:`` line with status 2 --
    ``test_broken_zarr_json_is_an_input_error``,
    ``test_broken_zarr_json_is_one_error_line_in_the_cli``.
14. ``emst-dask info`` described a point cloud .npy as an edge list, and
    ``emst-dask plot`` drew edges over points of another dimension or another
    file: ``Error:`` lines, status 2 --
    ``test_info_refuses_a_point_cloud_npy``,
    ``test_info_still_reads_an_edge_npy`` (guard),
    ``test_plot_refuses_points_that_are_not_the_input``.
15. A Gadget/Arepo-style group (``PartType1/Coordinates`` in a subgroup)
    "held no arrays": the one (n, d) float array among all subgroups is
    taken; several are an ``InputError`` listing their paths; ``array=``
    picks one -- ``test_nested_group_with_one_candidate_is_read``,
    ``test_nested_group_with_several_candidates_lists_them``.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from scipy.sparse.csgraph import minimum_spanning_tree

import emst_dask
from emst_dask.cli import main
from oracle import check_spanning_tree, distance_matrix, edge_set
from service_util import assert_same_tree, cloud, write_snapshot

InputError = emst_dask.InputError

#: zarr's metadata files (everything else in a store is a chunk)
META = {"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _chunk_files(root, member=None) -> list:
    """Relative paths of the chunk files of a store (under ``member``)."""
    base = os.path.join(root, member) if member else root
    out = []
    for d, _, files in os.walk(base):
        for f in files:
            if f not in META:
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def _chunk_index(rel: str) -> int:
    """The row-chunk index of a chunk file: ``points/c/K/0`` (v3), ``points/K.0``
    or ``x/K`` (v2), ``x/c/K`` (v3)."""
    parts = rel.split(os.sep)
    if "c" in parts[:-1]:
        return int(parts[parts.index("c") + 1])
    return int(parts[-1].split(".")[0])


def _names_chunk(msg: str, k: int) -> bool:
    return re.search(rf"\bchunk {k}\b", msg) is not None


def _flip(path, rng, count=3):
    """XOR ``count`` random bytes of the file with random non-zero values."""
    with open(path, "rb") as fh:
        b = bytearray(fh.read())
    for p in rng.choice(len(b), size=min(count, len(b)), replace=False):
        b[int(p)] ^= int(rng.integers(1, 256))
    with open(path, "wb") as fh:
        fh.write(bytes(b))


def _one_line_error(result, *fragments):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    lines = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    for frag in fragments:
        assert frag in lines[0], (frag, lines[0])
    return lines[0]


def _scipy_mst(points):
    """(edge set, total) of the MST of ``points`` from float64 distances."""
    d = distance_matrix(points)
    m = minimum_spanning_tree(d).tocoo()
    return ({(min(int(a), int(b)), max(int(a), int(b))) for a, b in zip(m.row, m.col)},
            float(m.data.sum()))


def _sorted_edges(tree):
    """(u, v, w) rows with u < v, ordered: comparable across edge orders."""
    u = np.minimum(tree.source, tree.target)
    v = np.maximum(tree.source, tree.target)
    order = np.lexsort((v, u))
    return u[order], v[order], np.asarray(tree.weight)[order]


@pytest.fixture
def runner():
    return CliRunner()


# --------------------------------------------------------------------------
# 1. a missing chunk is an error, not zeros
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("layout", ["bare", "array"])
def test_missing_chunk_is_an_error_naming_the_chunk(tmp_path, layout, zarr_format):
    pts = cloud(1000, 3, seed=21)
    path = write_snapshot(tmp_path / "snap.zarr", pts, layout=layout,
                          zarr_format=zarr_format, chunk_rows=250)
    member = "points" if layout == "array" else None
    files = [f for f in _chunk_files(path, member) if _chunk_index(f) == 2]
    assert len(files) == 1, files
    os.remove(os.path.join(path, files[0]))
    phases = []
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False, progress=lambda p, **i: phases.append(p))
    msg = str(exc.value)
    assert _names_chunk(msg, 2) and "rows 500-749" in msg, msg
    assert "missing" in msg.lower(), msg
    assert "tree" not in phases and "iteration" not in phases, phases


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_missing_column_chunk_is_an_error_naming_the_chunk(tmp_path, zarr_format):
    pts = cloud(1000, 3, seed=22)
    path = write_snapshot(tmp_path / "cols.zarr", pts, layout="columns",
                          zarr_format=zarr_format, chunk_rows=250)
    files = [f for f in _chunk_files(path, "y") if _chunk_index(f) == 1]
    assert len(files) == 1, files
    os.remove(os.path.join(path, files[0]))
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False)
    msg = str(exc.value)
    assert _names_chunk(msg, 1) and "rows 250-499" in msg, msg
    assert "missing" in msg.lower(), msg


@pytest.mark.parametrize("inner", [(100, 3), (50, 1)], ids=["row-chunks", "row-column-chunks"])
def test_sharded_array_written_in_part_is_an_error_naming_the_rows(tmp_path, inner):
    """A shard's file exists once any of its chunks is written; the chunks
    it never got read as the fill value.  They are missing chunks: refused
    before any work, naming their rows; the whole array is read exactly."""
    pts = cloud(450, 3, seed=23)
    path = os.fspath(tmp_path / "sharded.zarr")
    arr = zarr.create_array(path, shape=pts.shape, chunks=inner, shards=(200, 3),
                            dtype=pts.dtype)
    arr[:100] = pts[:100]
    arr[200:] = pts[200:]
    phases = []
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False, progress=lambda p, **i: phases.append(p))
    msg = str(exc.value)
    assert _names_chunk(msg, 0) and "rows 100-" in msg and "never written" in msg, msg
    assert "tree" not in phases and "iteration" not in phases, phases
    arr[100:200] = pts[100:200]
    assert_same_tree(emst_dask.emst(path, client=False), pts)


def test_sharded_chunk_lost_after_the_check_is_an_error_on_read(tmp_path):
    """The worker's read finds a chunk its shard lost after the source was
    checked (the shard rewritten in part): it reads as the fill value, so
    the shard's index is looked up and the read refused."""
    from emst_dask.io import resolve_source

    pts = cloud(400, 3, seed=24)
    path = os.fspath(tmp_path / "sharded.zarr")
    arr = zarr.create_array(path, shape=pts.shape, chunks=(100, 3), shards=(200, 3),
                            dtype=pts.dtype)
    arr[:] = pts
    src = resolve_source(path)
    np.testing.assert_array_equal(src.read(0, 400), pts)
    again = zarr.create_array(path, shape=pts.shape, chunks=(100, 3), shards=(200, 3),
                              dtype=pts.dtype, overwrite=True)
    again[:100] = pts[:100]
    again[200:] = pts[200:]
    with pytest.raises(InputError) as exc:
        src.read(0, 400)
    assert "rows 100-199" in str(exc.value) and "never written" in str(exc.value), exc.value


# --------------------------------------------------------------------------
# 2. zarr objects opened with a relative path, read by workers elsewhere
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def one_worker():
    pytest.importorskip("distributed")
    # the cluster leaves its workers' NUMBA_NUM_THREADS in this process's
    # environment; numba refuses a later compile whose setting differs from
    # the threads it launched, so keep this process's value as it was
    saved = os.environ.get("NUMBA_NUM_THREADS")
    try:
        with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
            yield emb
    finally:
        if saved is None:
            os.environ.pop("NUMBA_NUM_THREADS", None)
        else:
            os.environ["NUMBA_NUM_THREADS"] = saved


def test_relative_zarr_objects_are_read_by_workers_from_the_right_place(
        one_worker, tmp_path, monkeypatch):
    client = one_worker.client
    pts = cloud(600, 3, seed=23)
    ref = emst_dask.emst(pts, backend="cpu")
    # the worker started before this chdir: its working directory is elsewhere
    monkeypatch.chdir(tmp_path)
    assert str(tmp_path) not in set(client.run(os.getcwd).values())
    write_snapshot("snap.zarr", pts, layout="array", zarr_format=3, chunk_rows=200)
    group = zarr.open_group("snap.zarr", mode="r")
    array = zarr.open_array("snap.zarr/points", mode="r")
    for i, source in enumerate((array, group)):
        tree = emst_dask.emst(source, client=client)
        check_spanning_tree(tree, pts, certify=False)
        assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
        assert tree.total_weight == ref.total_weight, (type(source), tree.total_weight)
        out = f"edges{i}.zarr"
        st = emst_dask.emst(source, client=client, out=out)
        assert st.total_weight == ref.total_weight, (type(source), st.total_weight)
        again = emst_dask.read_edges(tmp_path / out)
        assert edge_set(again.source, again.target) == edge_set(ref.source, ref.target)
        assert again.total_weight == ref.total_weight


# --------------------------------------------------------------------------
# 3. corrupted chunks are detected
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format,columns", [("3", None), ("2", None), ("3", "x,y,z")])
def test_generated_snapshot_detects_every_corrupted_chunk(runner, tmp_path, zarr_format,
                                                          columns):
    snap = str(tmp_path / "halos.zarr")
    args = ["generate", "halos", "2000", "--out", snap, "--chunk-rows", "500",
            "--zarr-format", zarr_format]
    if columns:
        args += ["--columns", columns]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    clean = emst_dask.emst(snap, client=False)
    assert clean.n_edges == 1999
    files = _chunk_files(snap)
    assert len(files) == (4 if columns is None else 12), files
    silent = []
    for trial in range(10):
        rng = np.random.default_rng(1000 + trial)
        copy = str(tmp_path / f"t{trial}.zarr")
        shutil.copytree(snap, copy)
        rel = files[int(rng.integers(len(files)))]
        _flip(os.path.join(copy, rel), rng)
        try:
            emst_dask.emst(copy, client=False)
        except InputError as exc:
            assert _names_chunk(str(exc), _chunk_index(rel)), (rel, str(exc))
        else:
            silent.append(rel)
        shutil.rmtree(copy)
    assert not silent, f"corruption read silently in {len(silent)} of 10 trials: {silent}"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_edge_store_detects_every_corrupted_chunk(tmp_path, zarr_format):
    pts = cloud(1000, 3, seed=24)
    out = str(tmp_path / "edges.zarr")
    emst_dask.emst(pts, out=out, chunk_rows=250, zarr_format=zarr_format)
    clean = emst_dask.read_edges(out)
    assert clean.n_edges == 999
    files = [f for f in _chunk_files(out)
             if f.split(os.sep)[0] in ("source", "target", "weight")]
    assert len(files) == 12, files
    silent = []
    for trial in range(10):
        rng = np.random.default_rng(2000 + trial)
        copy = str(tmp_path / f"t{trial}.zarr")
        shutil.copytree(out, copy)
        rel = files[int(rng.integers(len(files)))]
        name = rel.split(os.sep)[0]
        _flip(os.path.join(copy, rel), rng)
        try:
            if trial % 2:
                emst_dask.read_edges(copy)
            else:
                emst_dask.open_edges(copy).load()
        except InputError as exc:
            msg = str(exc)
            assert name in msg and _names_chunk(msg, _chunk_index(rel)), (rel, msg)
        else:
            silent.append(rel)
        shutil.rmtree(copy)
    assert not silent, f"corruption read silently in {len(silent)} of 10 trials: {silent}"


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_edge_store_refuses_every_missing_chunk(tmp_path, zarr_format):
    """zarr reads an absent chunk as zeros, without a checksum to fail: a
    deleted weight chunk would make every height 0 (one FoF group, an
    all-noise HDBSCAN*).  Each deleted chunk file is an error naming its
    array and chunk, whichever product reads the store."""
    pts = cloud(1000, 3, seed=25)
    out = str(tmp_path / "edges.zarr")
    emst_dask.emst(pts, min_samples=3, out=out, chunk_rows=250, zarr_format=zarr_format)
    files = [f for f in _chunk_files(out)
             if f.split(os.sep)[0] in ("source", "target", "weight", "core_distances")]
    assert len(files) == 16, files
    readers = [lambda p: emst_dask.read_edges(p),
               lambda p: emst_dask.HDBSCAN(min_cluster_size=5, min_samples=3,
                                           backend="cpu").fit_tree(p)]
    for trial, rel in enumerate(files):
        copy = str(tmp_path / f"t{trial}.zarr")
        shutil.copytree(out, copy)
        os.remove(os.path.join(copy, rel))
        with pytest.raises(InputError) as info:
            readers[trial % 2](copy)
        msg = str(info.value)
        assert rel.split(os.sep)[0] in msg and _names_chunk(msg, _chunk_index(rel)), (rel, msg)
        assert "missing" in msg
        shutil.rmtree(copy)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nan_in_unchecksummed_chunk_says_it_may_be_corrupt(tmp_path, zarr_format):
    """A third-party snapshot, uncompressed and without a checksum, whose
    chunk 2 has 8 bytes overwritten with 0xff: a NaN where a float64 was."""
    pts = cloud(1000, 3, seed=25, dtype=np.float64)
    path = str(tmp_path / "raw.zarr")
    z = zarr.create_array(path, shape=pts.shape, chunks=(250, 3), dtype="f8",
                          compressors=None, zarr_format=zarr_format)
    z[...] = pts
    rel = [f for f in _chunk_files(path) if _chunk_index(f) == 2]
    assert len(rel) == 1
    chunk = os.path.join(path, rel[0])
    with open(chunk, "r+b") as fh:
        fh.seek(8 * 3 * 17)  # row 517
        fh.write(b"\xff" * 8)
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False)
    msg = str(exc.value)
    assert _names_chunk(msg, 2) and "corrupt" in msg.lower(), msg


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nan_written_into_a_checksummed_chunk_is_not_called_corrupt(tmp_path, zarr_format):
    """A NaN written through zarr into a snapshot whose chunks carry
    checksums passed its check: it was written so, and the message names
    the row without suggesting damage."""
    from emst_dask.io.codecs import create_array

    pts = cloud(1000, 3, seed=27, dtype=np.float64)
    path = str(tmp_path / "checked.zarr")
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    z = create_array(group, "points", pts.shape, (250, 3), "f8", zarr_format)
    pts[517, 1] = np.nan
    z[...] = pts
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False, array="points")
    msg = str(exc.value)
    assert _names_chunk(msg, 2) and "517" in msg and "corrupt" not in msg.lower(), msg


# --------------------------------------------------------------------------
# 4. integers beyond 2**53
# --------------------------------------------------------------------------
def _big_int_cloud(dtype):
    """50 distinct small points; row 37 (and row 44) beyond 2**53."""
    rng = np.random.default_rng(26)
    pts = rng.permutation(150).reshape(50, 3).astype(dtype)
    if np.dtype(dtype).kind == "u":
        pts[37, 1] = 2**53 + 1
        pts[44, 0] = 2**63 + 5
    else:
        pts[37, 1] = -(2**53) - 1
        pts[44, 0] = 2**62
    return pts


def _assert_names_2_53_and_row_37(msg):
    assert "2**53" in msg or "9007199254740992" in msg, msg
    assert re.search(r"\brow[^0-9]*37\b", msg), msg


@pytest.mark.parametrize("where", ["int64", "uint64", "npy", "zarr"])
def test_integers_beyond_2_53_are_refused_with_the_row(tmp_path, where):
    pts = _big_int_cloud(np.uint64 if where == "uint64" else np.int64)
    source, options = pts, {}
    if where == "npy":
        source, options = str(tmp_path / "big.npy"), {"client": False}
        np.save(source, pts)
    elif where == "zarr":
        source, options = str(tmp_path / "big.zarr"), {"client": False}
        z = zarr.create_array(source, shape=pts.shape, chunks=(10, 3), dtype="i8")
        z[...] = pts
    with pytest.raises(InputError) as exc:
        emst_dask.emst(source, **options)
    _assert_names_2_53_and_row_37(str(exc.value))


@pytest.mark.parametrize("where", ["int64", "uint64", "npy", "zarr"])
def test_integers_within_2_53_are_exact(tmp_path, where):
    """Two clusters of distinct integer points touching +-2**53 (or 0 and
    2**53 unsigned): every coordinate is exact in float64, so is the tree."""
    rng = np.random.default_rng(27)
    off = rng.permutation(4000)[:120].reshape(40, 3).astype(np.int64)
    if where == "uint64":
        lo, hi = np.zeros(3, np.int64), np.full(3, 2**53, np.int64)
        pts = np.vstack([lo + off[:20], hi - off[20:]]).astype(np.uint64)
        pts[0] = 0
        pts[20] = 2**53
    else:
        pts = np.vstack([-(2**53) + off[:20], 2**53 - off[20:]])
        pts[0] = -(2**53)
        pts[20] = 2**53
    if where == "npy":
        np.save(tmp_path / "ok.npy", pts)
        tree = emst_dask.emst(str(tmp_path / "ok.npy"), client=False)
    elif where == "zarr":
        z = zarr.create_array(str(tmp_path / "ok.zarr"), shape=pts.shape, chunks=(16, 3),
                              dtype=pts.dtype)
        z[...] = pts
        tree = emst_dask.emst(str(tmp_path / "ok.zarr"), client=False)
    else:
        tree = emst_dask.emst(pts)
    assert tree.weight.dtype == np.float64
    assert (tree.weight > 0).all()
    check_spanning_tree(tree, pts.astype(np.float64))


# --------------------------------------------------------------------------
# 5. a tiny cluster in a huge extent
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,far,extent", [
    (np.float64, 1e160, 1.0), (np.float64, 1e160, 1e-3),
    (np.float32, 1e20, 1.0), (np.float32, 1e20, 1e-2)])
def test_tiny_cluster_in_huge_extent_is_exact(dtype, far, extent):
    n = 200
    cluster = (cloud(n, 3, seed=28, dtype=np.float64) * extent).astype(dtype)
    pts = np.vstack([cluster, np.full((1, 3), far, dtype)]).astype(dtype)
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    tree = emst_dask.emst(pts)
    assert tree.n_edges == n
    assert tree.weight.dtype == np.dtype(dtype)
    assert (tree.weight > 0).all(), f"{int((tree.weight == 0).sum())} zero weight(s)"
    inside = (tree.source < n) & (tree.target < n)
    # the far point is a leaf: one edge, of its true length
    assert int((~inside).sum()) == 1
    x = pts.astype(np.float64)
    far_len = math.dist(x[n], x[int(tree.source[~inside][0] + tree.target[~inside][0] - n)])
    assert math.isclose(float(tree.weight[~inside][0]), far_len, rel_tol=rtol)
    # the rest is the cluster's own minimum spanning tree
    want_edges, want_total = _scipy_mst(cluster)
    assert edge_set(tree.source[inside], tree.target[inside]) == want_edges
    got = float(tree.weight[inside].astype(np.float64).sum())
    assert math.isclose(got, want_total, rel_tol=rtol), (got, want_total)
    assert math.isclose(tree.total_weight, want_total + far_len, rel_tol=rtol)


def test_unrepresentable_distance_range_is_refused():
    """Distances 1e-300 and 1e300: their squares cannot both be float64."""
    pts = np.array([[0.0, 0.0, 0.0], [1e-300, 0.0, 0.0], [1e300, 0.0, 0.0]])
    calls = []
    with pytest.raises(InputError) as exc:
        emst_dask.emst(pts, progress=lambda phase, **info: calls.append(phase))
    msg = str(exc.value).lower()
    assert "range" in msg or "underflow" in msg, msg
    assert calls == [], calls


# --------------------------------------------------------------------------
# 10. big-endian input
# --------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["memory", "npy", "zarr2"])
@pytest.mark.parametrize("dt", [">f8", ">f4"])
def test_big_endian_input_gives_the_native_tree(tmp_path, dt, where):
    native = np.dtype(dt).newbyteorder("=")
    pts = cloud(400, 3, seed=29, dtype=native)
    ref = emst_dask.emst(pts, sort_by_weight=True, backend="cpu")
    big = pts.astype(dt)
    assert big.dtype.byteorder == ">" and np.array_equal(big, pts)
    if where == "npy":
        np.save(tmp_path / "be.npy", big)
        tree = emst_dask.emst(str(tmp_path / "be.npy"), client=False, sort_by_weight=True,
                              backend="cpu")
    elif where == "zarr2":
        z = zarr.create_array(str(tmp_path / "be.zarr"), shape=big.shape, chunks=(100, 3),
                              dtype=dt, zarr_format=2)
        z[...] = big
        tree = emst_dask.emst(str(tmp_path / "be.zarr"), client=False, sort_by_weight=True,
                              backend="cpu")
    else:
        tree = emst_dask.emst(big, sort_by_weight=True, backend="cpu")
    assert tree.weight.dtype == native
    for got, want in zip(_sorted_edges(tree), _sorted_edges(ref)):
        np.testing.assert_array_equal(got, want)
    assert tree.total_weight == ref.total_weight


# --------------------------------------------------------------------------
# 12 (part). a broken zarr.json
# --------------------------------------------------------------------------
BROKEN = [("zarr.json", "truncate"), ("points/zarr.json", "truncate"),
          ("points/zarr.json", "garbage")]


def _broken_snapshot(tmp_path, meta, how):
    pts = cloud(300, 3, seed=30)
    path = write_snapshot(tmp_path / "snap.zarr", pts, layout="array", zarr_format=3,
                          chunk_rows=100)
    f = os.path.join(path, meta)
    with open(f) as fh:
        text = fh.read()
    json.loads(text)  # valid before
    with open(f, "w") as fh:
        fh.write(text[: len(text) // 2] if how == "truncate" else "{not json at all")
    return path


@pytest.mark.parametrize("meta,how", BROKEN)
def test_broken_zarr_json_is_an_input_error(tmp_path, meta, how):
    path = _broken_snapshot(tmp_path, meta, how)
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False)
    assert "snap.zarr" in str(exc.value)


@pytest.mark.parametrize("meta,how", BROKEN)
def test_broken_zarr_json_is_one_error_line_in_the_cli(runner, tmp_path, meta, how):
    path = _broken_snapshot(tmp_path, meta, how)
    out = tmp_path / "edges.zarr"
    res = runner.invoke(main, ["run", path, "--out", str(out)])
    _one_line_error(res, "snap.zarr")
    assert not out.exists()


# --------------------------------------------------------------------------
# 14. info and plot on the wrong files
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_info_refuses_a_point_cloud_npy(runner, tmp_path, dtype):
    f = tmp_path / "cloud.npy"
    np.save(f, cloud(500, 3, seed=31, dtype=dtype))
    _one_line_error(runner.invoke(main, ["info", str(f)]))


def test_info_still_reads_an_edge_npy(runner, tmp_path):
    pts = tmp_path / "pts.npy"
    np.save(pts, cloud(500, 3, seed=32))
    edges = tmp_path / "edges.npy"
    res = runner.invoke(main, ["run", str(pts), "--out", str(edges)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["info", str(edges)])
    assert res.exit_code == 0, res.output
    assert "edges=499" in res.output and "n=500" in res.output


@pytest.mark.parametrize("other", ["n", "d", "file"])
def test_plot_refuses_points_that_are_not_the_input(runner, tmp_path, other):
    pts = cloud(500, 3, seed=33)
    snap = write_snapshot(tmp_path / "snap.zarr", pts, chunk_rows=250)
    edges = tmp_path / "edges.zarr"
    emst_dask.emst(snap, client=False, out=edges)
    # the right points draw
    png = tmp_path / "ok.png"
    res = runner.invoke(main, ["plot", str(edges), "--points", snap, "--out", str(png)])
    assert res.exit_code == 0, res.output
    assert png.exists()
    shape = {"n": (400, 3), "d": (500, 2), "file": (500, 3)}[other]
    wrong = tmp_path / f"other_{other}.npy"
    np.save(wrong, cloud(shape[0], shape[1], seed=34))
    png = tmp_path / f"{other}.png"
    res = runner.invoke(main, ["plot", str(edges), "--points", str(wrong), "--out", str(png)])
    line = _one_line_error(res)
    if other == "file":
        assert "snap.zarr" in line, line  # the store's recorded input
    assert not png.exists()


# --------------------------------------------------------------------------
# 15. Gadget/Arepo-style groups: the (n, d) array in a subgroup
# --------------------------------------------------------------------------
def _gadget(path, pts, zarr_format, velocities=False):
    n = len(pts)
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    g.create_group("Header").attrs["NumPart_ThisFile"] = [0, n, 0, 0, 0, 0]
    p1 = g.create_group("PartType1")
    p1.create_array("Coordinates", shape=(n, 3), chunks=(128, 3), dtype="f4")[...] = pts
    p1.create_array("ParticleIDs", shape=(n,), chunks=(128,), dtype="u8")[...] = np.arange(n)
    p1.create_array("Masses", shape=(n,), chunks=(128,), dtype="f4")[...] = 1.0
    if velocities:
        p1.create_array("Velocities", shape=(n, 3), chunks=(128, 3), dtype="f4")[...] = -pts
    return str(path)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nested_group_with_one_candidate_is_read(tmp_path, zarr_format):
    pts = cloud(500, 3, seed=35)
    path = _gadget(tmp_path / "snap_000.zarr", pts, zarr_format)
    tree = emst_dask.emst(path, client=False)
    check_spanning_tree(tree, pts, certify=False)
    ref = emst_dask.emst(pts)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    assert tree.total_weight == ref.total_weight


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_nested_group_with_several_candidates_lists_them(tmp_path, zarr_format):
    pts = cloud(500, 3, seed=36)
    path = _gadget(tmp_path / "snap_000.zarr", pts, zarr_format, velocities=True)
    with pytest.raises(InputError) as exc:
        emst_dask.emst(path, client=False)
    msg = str(exc.value)
    assert "PartType1/Coordinates" in msg and "PartType1/Velocities" in msg, msg
    tree = emst_dask.emst(path, client=False, array="PartType1/Coordinates")
    ref = emst_dask.emst(pts)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    assert tree.total_weight == ref.total_weight


# --------------------------------------------------------------------------
# containers that would hide or change what the points are
# --------------------------------------------------------------------------
def test_masked_points_are_refused_naming_the_row():
    """A masked array's mask would be dropped and the values under it taken
    as coordinates: refused, in memory and in a dask array's blocks; a
    masked array with nothing masked is its data."""
    import dask.array as da

    pts = cloud(300, 3, seed=31)
    m = np.ma.masked_array(pts.copy(), np.zeros(pts.shape, bool))
    m.mask[7, 1] = True
    with pytest.raises(InputError, match=r"masked array with 1 masked row\(s\) \(first: row 7\)"):
        emst_dask.emst(m)
    with pytest.raises(InputError, match="masked"):
        emst_dask.HDBSCAN(min_cluster_size=5).fit(m)
    dm = da.from_array(pts, chunks=(100, 3)).map_blocks(
        lambda b: np.ma.masked_array(b, b > 0.999 * pts.max()))
    with pytest.raises(InputError, match="block 2 .* masked"):
        emst_dask.emst(dm, client=False)
    assert_same_tree(emst_dask.emst(np.ma.masked_array(pts)), pts)


def test_dask_blocks_must_be_what_the_array_declares():
    import dask.array as da

    pts = cloud(300, 3, seed=32)
    x = da.from_array(pts, chunks=(100, 3))
    with pytest.raises(InputError, match=f"computed to dtype complex.*, but the array "
                                         f"declares {pts.dtype}"):
        emst_dask.emst(x.map_blocks(lambda b: b + 1j, dtype=pts.dtype), client=False)
    with pytest.raises(InputError, match="unknown number of columns"):
        emst_dask.emst(x[:, x[0] > 0.3], client=False)


def test_integer_beyond_2_53_names_the_chunk_that_holds_it(tmp_path):
    z = (np.arange(1800, dtype=np.int64) % 97).reshape(900, 2)
    z[700, 0] = 2 ** 60
    arr = zarr.create_array(os.fspath(tmp_path / "i.zarr"), shape=z.shape, chunks=(300, 2),
                            dtype="i8")
    arr[:] = z
    with pytest.raises(InputError) as exc:
        emst_dask.emst(os.fspath(tmp_path / "i.zarr"), client=False)
    assert _names_chunk(str(exc.value), 2) and "first bad row is 700" in str(exc.value)


def test_a_tree_and_points_of_another_dimension_are_refused():
    pts = cloud(300, 3, seed=33)
    tree = emst_dask.emst(pts)
    with pytest.raises(InputError, match="computed in 3 dimensions"):
        tree.statistics(pts[:, :2])
    with pytest.raises(InputError, match="computed in 3 dimensions"):
        emst_dask.fof(pts[:, :2], 0.2, tree=tree)


def test_a_result_npy_is_no_point_cloud(tmp_path):
    """An edge array, labels or a linkage matrix the package wrote, given
    as points, is refused: its rows are no cloud."""
    pts = cloud(300, 3, seed=34)
    edges = tmp_path / "e.npy"
    emst_dask.emst(pts, out=edges)
    with pytest.raises(InputError, match="is an edge array emst-dask wrote, not a point cloud"):
        emst_dask.emst(os.fspath(edges), client=False)
    with pytest.raises(InputError, match="is an edge array"):
        emst_dask.HDBSCAN(min_cluster_size=5, min_samples=1).fit(os.fspath(edges))


def test_a_tree_of_other_points_or_another_box_is_refused():
    """``fof(tree=...)`` and ``statistics`` recompute a sample of the
    tree's weights from the points: a tree of other points is refused
    (it gave other groups, and branch shapes above 1); the same points
    moved are accepted.  A periodic tree is measured only in its own box."""
    rng = np.random.default_rng(35)
    p, q = rng.random((500, 3)), rng.random((500, 3))
    tree = emst_dask.emst(p, box_size=1.0)
    with pytest.raises(InputError, match="is not the tree of"):
        emst_dask.fof(q, 0.06, relative=False, box_size=1.0, min_members=2, tree=tree)
    with pytest.raises(InputError, match="is not the tree of"):
        tree.statistics(q)
    with pytest.raises(InputError, match=r"records box_size=\[1.0, 1.0, 1.0\], this "
                                         r"call asks for box_size=\[2.0, 2.0, 2.0\]"):
        tree.statistics(p, box_size=2.0)
    st = tree.statistics(p)
    assert st.branch_shape.max() <= 1.0
    assert np.array_equal(emst_dask.emst(p).statistics(p + 5.0).degree,
                          emst_dask.emst(p).statistics(p).degree)
    want = emst_dask.fof(p, 0.06, relative=False, box_size=1.0, min_members=2)
    got = emst_dask.fof(p, 0.06, relative=False, box_size=1.0, min_members=2, tree=tree)
    assert np.array_equal(np.asarray(got.labels), np.asarray(want.labels))


def test_cli_stats_refuses_another_box_than_the_trees(tmp_path):
    from click.testing import CliRunner

    p = np.random.default_rng(36).random((400, 3))
    np.save(tmp_path / "p.npy", p)
    emst_dask.emst(p, box_size=1.0, out=tmp_path / "e.zarr")
    res = CliRunner().invoke(main, ["stats", str(tmp_path / "e.zarr"), "--points",
                                    str(tmp_path / "p.npy"), "--box-size", "2"])
    assert res.exit_code != 0 and "records box_size=[1.0, 1.0, 1.0]" in res.output, \
        res.output
    res = CliRunner().invoke(main, ["stats", str(tmp_path / "e.zarr"), "--points",
                                    str(tmp_path / "p.npy")])
    assert res.exit_code == 0, res.output


def test_a_tree_read_from_an_npy_edge_array_is_checked_by_its_weights(tmp_path):
    """An .npy edge array records no dimension (the loaded tree's n_dims is
    0): its tree is used with its own points, checked by its weights, and
    refused with other points."""
    rng = np.random.default_rng(37)
    p, q = rng.random((300, 3)), rng.random((300, 3))
    path = os.fspath(tmp_path / "e.npy")
    emst_dask.emst(p, out=path)
    tree = emst_dask.read_edges(path)
    assert tree.n_dims == 0
    assert np.array_equal(tree.statistics(p).degree, emst_dask.emst(p).statistics(p).degree)
    got = emst_dask.fof(p, 0.1, relative=False, min_members=2, tree=path)
    want = emst_dask.fof(p, 0.1, relative=False, min_members=2)
    assert np.array_equal(np.asarray(got.labels), np.asarray(want.labels))
    with pytest.raises(InputError, match="is not the tree of"):
        tree.statistics(q)
