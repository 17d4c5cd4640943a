"""The compact edge store (format version 2): int32 row ids below 2**31
points, lz4 with CRC-32C, written by many threads; stores of version 1
(int64, zstd) still read the same."""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import emst_dask
from emst_dask.errors import InputError
from emst_dask.io import edge_store, open_edges, write_edges

from oracle import check_spanning_tree

DATA = os.path.join(os.path.dirname(__file__), "data")


def _cloud(n=3000, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3)).astype(dtype)
    x[::7] = np.round(x[::7] * 8) / 8  # ties and duplicates beside smooth points
    return x


def _chunk_files(store, name):
    return sorted(f for f in glob.glob(os.path.join(store, name, "c", "*")) if os.path.isfile(f))


def test_compact_store_round_trip(tmp_path):
    import zarr

    x = _cloud()
    tree = emst_dask.emst(x, backend="cpu", client=False)
    out = str(tmp_path / "e.zarr")
    st = write_edges(out, tree, input="cloud", chunk_rows=500)
    g = zarr.open_group(out, mode="r")
    assert g.attrs["format_version"] == edge_store.EDGE_FORMAT_VERSION == 2
    assert g["source"].dtype == np.int32 and g["target"].dtype == np.int32
    assert g["weight"].dtype == np.float32
    names = [type(c).__name__ for c in g["source"].compressors]
    assert names[0] == "BloscCodec" and names[-1] == "Crc32cCodec", names
    assert len(_chunk_files(out, "source")) == 6  # 2999 edges in chunks of 500
    back = open_edges(out).load()
    assert back.source.dtype == np.int64 and back.target.dtype == np.int64
    np.testing.assert_array_equal(back.source, tree.source)
    np.testing.assert_array_equal(back.target, tree.target)
    np.testing.assert_array_equal(back.weight, tree.weight)
    assert back.total_weight == st.total_weight == tree.total_weight
    check_spanning_tree(back, x)


def test_compact_store_checksums_are_the_standard_crc32c(tmp_path):
    """The codec the package registers writes what zarr's own reads."""
    import google_crc32c

    x = _cloud(800)
    out = str(tmp_path / "e.zarr")
    write_edges(out, emst_dask.emst(x, backend="cpu", client=False), chunk_rows=300)
    for f in _chunk_files(out, "weight"):
        raw = open(f, "rb").read()
        assert int.from_bytes(raw[-4:], "little") == google_crc32c.value(raw[:-4])


@pytest.mark.parametrize("name", ["edges-v1.zarr", "edges-v1-mr.zarr"])
def test_a_version_1_store_reads_as_before(name):
    """A store the previous layout wrote (int64 row ids, zstd, no
    format_version) opens and loads, its tree exact."""
    x = np.load(os.path.join(DATA, "edges-v1-points.npy"))
    st = open_edges(os.path.join(DATA, name))
    assert "format_version" not in st.attrs
    assert st.source.dtype == np.int64
    tree = st.load()
    assert tree.source.dtype == np.int64
    check_spanning_tree(tree, x, tree.min_samples)
    assert float(np.sum(tree.weight, dtype=np.float64)) == pytest.approx(st.total_weight,
                                                                          rel=1e-12)


def test_a_corrupt_or_missing_chunk_of_a_compact_store_is_named(tmp_path):
    import shutil

    x = _cloud(2000)
    out = str(tmp_path / "e.zarr")
    write_edges(out, emst_dask.emst(x, backend="cpu", client=False), chunk_rows=400)
    bad = str(tmp_path / "bad.zarr")
    shutil.copytree(out, bad)
    f = _chunk_files(bad, "target")[2]
    raw = bytearray(open(f, "rb").read())
    raw[len(raw) // 2] ^= 0x5A
    open(f, "wb").write(bytes(raw))
    with pytest.raises(InputError, match=r"target.*chunk 2 \(rows 800-1199\)"):
        open_edges(bad).load()
    gone = str(tmp_path / "gone.zarr")
    shutil.copytree(out, gone)
    os.remove(_chunk_files(gone, "weight")[3])
    with pytest.raises(InputError, match=r"weight: chunk 3 \(rows 1200-1599\) is missing"):
        open_edges(gone).load()


def test_row_ids_are_int64_beyond_the_int32_bound(tmp_path, monkeypatch):
    """n above the bound (forced low here) stores int64 row ids; at the
    bound, int32."""
    import zarr

    x = _cloud(1000)
    tree = emst_dask.emst(x, backend="cpu", client=False)
    monkeypatch.setattr(edge_store, "INT32_POINTS", 1000)
    write_edges(str(tmp_path / "at.zarr"), tree)
    assert zarr.open_group(str(tmp_path / "at.zarr"))["source"].dtype == np.int32
    monkeypatch.setattr(edge_store, "INT32_POINTS", 999)
    write_edges(str(tmp_path / "over.zarr"), tree)
    g = zarr.open_group(str(tmp_path / "over.zarr"))
    assert g["source"].dtype == np.int64 and g["target"].dtype == np.int64
    back = open_edges(str(tmp_path / "over.zarr")).load()
    np.testing.assert_array_equal(back.source, tree.source)
    monkeypatch.undo()
    assert edge_store.index_dtype(2 ** 31) == np.int32  # row ids up to 2**31 - 1
    assert edge_store.index_dtype(2 ** 31 + 1) == np.int64


def test_a_killed_write_leaves_no_store(tmp_path):
    """SIGKILL in the middle of writing a large store: the output path does
    not exist, and nothing there opens as an edge store."""
    out = str(tmp_path / "edges.zarr")
    flag = str(tmp_path / "writing")
    script = textwrap.dedent(f"""
        import os, sys, time
        import numpy as np
        from emst_dask.io import edge_store
        from emst_dask.tree import SpanningTree
        m = 4_000_000
        rng = np.random.default_rng(0)
        t = SpanningTree(np.arange(m, dtype=np.int64), np.arange(1, m + 1, dtype=np.int64),
                         rng.random(m).astype(np.float32), None, m + 1, 3)
        real = edge_store.write_rows
        def slow(z, at, data):
            open({flag!r}, "w").close()
            time.sleep(0.05)
            real(z, at, data)
        edge_store.write_rows = slow
        edge_store.write_edges({out!r}, t, chunk_rows=100_000, threads=2)
        print("finished")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + sys.path))
    p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE)
    import time

    t0 = time.monotonic()
    while not os.path.exists(flag) and p.poll() is None and time.monotonic() - t0 < 120:
        time.sleep(0.02)
    time.sleep(0.3)
    assert p.poll() is None, "the writer ended before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait(30)
    assert b"finished" not in p.stdout.read()
    assert not os.path.exists(out)
    with pytest.raises(InputError):
        open_edges(out)
