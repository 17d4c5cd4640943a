"""Reading point sources (emst_dask.io) and edge stores (emst_dask.io.edge_store),
in this process: layouts, Zarr v2/v3, staging, errors that name the place,
stores that are whole or absent."""
from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import emst_dask
from emst_dask import io
import emst_dask.io.source  # noqa: F401  (io.source.BLOCK_ROWS)
from emst_dask.io import edge_store as store
from emst_dask.distributed.service import emst as service_emst
from emst_dask.io.edge_store import EdgeStore, open_edges, write_edges
from emst_dask import InputError
from service_util import assert_same_tree, cloud, no_tmp_siblings, write_snapshot


@pytest.fixture(scope="module")
def pts():
    return cloud(1000, 3, seed=11)


# --------------------------------------------------------------------------
# layouts
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("layout", ["array", "columns", "bare"])
def test_open_and_stage_layouts(tmp_path, pts, layout, zarr_format):
    path = write_snapshot(tmp_path / "s.zarr", pts, layout=layout, zarr_format=zarr_format)
    src = io.resolve_source(path)
    assert src.shape == pts.shape
    assert src.compute_dtype == np.float32
    assert src.chunks[0] == (0, 250) and src.chunks[-1] == (750, 1000)
    if layout == "columns":
        assert src.where.endswith("s.zarr[x,y,z]")
    np.testing.assert_array_equal(io.stage(src), pts)


def test_named_array_columns_and_npy(tmp_path, pts):
    g = zarr.open_group(tmp_path / "g.zarr", mode="w")
    g.create_array("pos", shape=pts.shape, chunks=(300, 3), dtype="f8")[...] = pts
    g.create_array("vel", shape=pts.shape, chunks=(300, 3), dtype="f4")[...] = -pts
    g.create_array("px", shape=(1000,), dtype="f4")[...] = pts[:, 2]
    g.create_array("py", shape=(1000,), dtype="f4")[...] = pts[:, 0]
    with pytest.raises(InputError, match="several 2-D arrays.*pos, vel.*array="):
        io.resolve_source(tmp_path / "g.zarr")
    src = io.resolve_source(tmp_path / "g.zarr", array="vel")
    np.testing.assert_array_equal(io.stage(src), -pts)
    src = io.resolve_source(str(tmp_path / "g.zarr"), array="pos")
    assert src.compute_dtype == np.float64
    src = io.resolve_source(tmp_path / "g.zarr", columns="px,py")
    np.testing.assert_array_equal(io.stage(src), pts[:, [2, 0]])
    np.save(tmp_path / "p.npy", pts)
    np.testing.assert_array_equal(io.stage(io.resolve_source(tmp_path / "p.npy")), pts)


def test_integer_and_mixed_columns(tmp_path):
    g = zarr.open_group(tmp_path / "g.zarr", mode="w", zarr_format=2)
    g.create_array("x", shape=(5,), dtype="i4")[...] = [0, 3, 3, 9, 1]
    g.create_array("y", shape=(5,), dtype="f4")[...] = [0, 4, 0, 1, 1]
    src = io.resolve_source(tmp_path / "g.zarr")  # x, y found without being told
    assert src.compute_dtype == np.float64
    np.testing.assert_array_equal(io.stage(src), [[0, 0], [3, 4], [3, 0], [9, 1], [1, 1]])


def test_many_blocks_and_progress(tmp_path, pts, monkeypatch):
    monkeypatch.setattr(io.source, "BLOCK_ROWS", 100)
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=64)
    src = io.resolve_source(path)
    assert len(src.blocks) == 8  # 64-row chunks merged to >= 100 rows
    events = []
    out = io.stage(src, threads=3, report=lambda phase, **i: events.append((phase, i)))
    np.testing.assert_array_equal(out, pts)
    rows = [i["rows"] for p, i in events if p == "read"]
    assert rows[0] == 0 and rows[-1] == 1000 and rows == sorted(rows)


class FakeDevice:
    """The CuPy layer of ``io.staging._stage_device`` on numpy: buffers are handed
    back only after their (simulated, delayed) copy is done."""

    def __init__(self):
        self.copies = 0
        self.pinned_made = 0

    def empty(self, shape, dtype):
        return np.full(shape, np.nan, dtype)

    def pinned(self, shape, dtype):
        self.pinned_made += 1
        return np.empty(shape, dtype)

    def copy_async(self, dev, a, b, buf):
        self.copies += 1
        snapshot = buf[: b - a].copy()

        class Event:
            def synchronize(_):
                dev[a:b] = snapshot
        return Event()

    def wait(self, event):
        event.synchronize()

    def finish(self):
        pass

    def first_bad_row(self, dev):
        ok = np.isfinite(dev).all(axis=1)
        return -1 if ok.all() else int(np.argmin(ok))

    def to_host(self, rows):
        return np.asarray(rows)


def test_device_staging_pipeline(tmp_path, pts, monkeypatch):
    monkeypatch.setattr(io.source, "BLOCK_ROWS", 50)
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=50, layout="columns")
    dev = FakeDevice()
    out = io.stage(io.resolve_source(path), threads=2, device=dev)
    np.testing.assert_array_equal(out, pts)
    assert dev.copies == 20 and dev.pinned_made == 4  # a ring of threads + 2 buffers
    # NaN found on the device: the lowest bad chunk, its row and the store are named
    bad = pts.copy()
    bad[[613, 977], 1] = np.nan
    path = write_snapshot(tmp_path / "bad.zarr", bad, chunk_rows=50)
    with pytest.raises(InputError) as exc:
        io.stage(io.resolve_source(path), threads=2, device=FakeDevice())
    msg = str(exc.value)
    assert "bad.zarr/points" in msg and "chunk 12 (rows 600-649)" in msg
    assert "first bad row is 613" in msg


# --------------------------------------------------------------------------
# bad inputs: each error names the place
# --------------------------------------------------------------------------
def test_nan_inside_a_chunk(tmp_path, pts):
    bad = pts.copy()
    bad[317, 2] = np.inf
    bad[[318, 900], 0] = np.nan
    for layout in ("array", "columns"):
        path = write_snapshot(tmp_path / f"{layout}.zarr", bad, layout=layout, chunk_rows=100)
        with pytest.raises(InputError) as exc:
            io.stage(io.resolve_source(path))
        msg = str(exc.value)
        assert path in msg, msg
        assert "chunk 3 (rows 300-399)" in msg and "2 row(s)" in msg
        assert "first bad row is 317" in msg


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_bad_sources(tmp_path, zarr_format):
    fmt = dict(zarr_format=zarr_format)
    missing = tmp_path / "missing.zarr"
    with pytest.raises(InputError, match=f"{missing}: no such file or Zarr store"):
        io.resolve_source(missing)
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="plain: no Zarr array or group here"):
        io.resolve_source(tmp_path / "plain")
    (tmp_path / "t.txt").write_text("x,y\n")
    with pytest.raises(InputError, match="neither a .npy array nor a Zarr store"):
        io.resolve_source(tmp_path / "t.txt")
    zarr.create_array(tmp_path / "r1.zarr", shape=(10,), dtype="f4", **fmt)
    with pytest.raises(InputError, match=r"r1.zarr must be a 2-D array .* got 1-D"):
        io.resolve_source(tmp_path / "r1.zarr")
    zarr.create_array(tmp_path / "r3.zarr", shape=(4, 3, 2), dtype="f4", **fmt)
    with pytest.raises(InputError, match="r3.zarr must be a 2-D array.*3-D"):
        io.resolve_source(tmp_path / "r3.zarr")
    zarr.create_array(tmp_path / "wide.zarr", shape=(4, 9), dtype="f4", **fmt)
    with pytest.raises(InputError, match="wide.zarr has 9 columns"):
        io.resolve_source(tmp_path / "wide.zarr")
    text = "<U4" if zarr_format == 2 else str
    zarr.create_array(tmp_path / "str.zarr", shape=(4, 3), dtype=text, **fmt)
    with pytest.raises(InputError, match="str.zarr has non-numeric dtype"):
        io.resolve_source(tmp_path / "str.zarr")
    g = zarr.open_group(tmp_path / "g.zarr", mode="w", **fmt)
    g.create_array("a", shape=(10,), dtype="f4")
    g.create_array("b", shape=(12,), dtype="f4")
    g.create_array("s", shape=(10,), dtype=text)
    g.create_array("m", shape=(10, 2), dtype="f4")
    g.create_group("sub")
    with pytest.raises(InputError, match="has no array 'c'; it holds a .*b .*m .*s "):
        io.resolve_source(tmp_path / "g.zarr", columns=("a", "c"))
    with pytest.raises(InputError, match=r"differ in length: a=10, b=12"):
        io.resolve_source(tmp_path / "g.zarr", columns=("a", "b"))
    with pytest.raises(InputError, match="g.zarr/m: a coordinate column must be 1-D"):
        io.resolve_source(tmp_path / "g.zarr", columns=("a", "m"))
    with pytest.raises(InputError, match="g.zarr/s has non-numeric dtype"):
        io.resolve_source(tmp_path / "g.zarr", columns=("a", "s"))
    with pytest.raises(InputError, match="g.zarr/sub: is a group"):
        io.resolve_source(tmp_path / "g.zarr", array="sub")
    with pytest.raises(InputError, match="is a single array, so array= does not apply"):
        io.resolve_source(tmp_path / "wide.zarr", array="x")
    with pytest.raises(InputError, match="not both"):
        io.resolve_source(tmp_path / "g.zarr", array="m", columns="a")
    g2 = zarr.open_group(tmp_path / "g2.zarr", mode="w", **fmt)
    g2.create_array("mass", shape=(10,), dtype="f4")
    with pytest.raises(InputError, match=r"without an \(n, d\) array; it holds mass"):
        io.resolve_source(tmp_path / "g2.zarr")


def test_unreadable_chunk_is_named(tmp_path, pts):
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=100, zarr_format=3)
    chunk = os.path.join(path, "points", "c", "4", "0")
    with open(chunk, "wb") as fh:
        fh.write(b"garbage")
    with pytest.raises(InputError, match=r"s.zarr/points: cannot read chunk 4 \(rows 400-499\)"):
        io.stage(io.resolve_source(path))


# --------------------------------------------------------------------------
# edge stores
# --------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_store_round_trip(tmp_path, pts, zarr_format):
    tree = emst_dask.emst(pts)
    st = write_edges(tmp_path / "e.zarr", tree, input="here", zarr_format=zarr_format,
                     chunk_rows=128)
    assert isinstance(st, EdgeStore) and os.fspath(st) == str(tmp_path / "e.zarr")
    again = open_edges(tmp_path / "e.zarr")
    a = again.attrs
    assert a["complete"] is True and a["n"] == 1000 and a["d"] == 3 and a["min_samples"] == 1
    assert a["total_weight"] == tree.total_weight and a["input"] == "here"
    assert a["version"] == emst_dask.__version__ and a["n_edges"] == 999
    assert again.source.chunks == (128,) and again.weight.dtype == np.float32
    assert_same_tree(again, pts, reference=tree)
    assert no_tmp_siblings(tmp_path / "e.zarr")


def test_store_overwrite_and_npy(tmp_path, pts):
    tree = emst_dask.emst(pts)
    out = tmp_path / "e.zarr"
    write_edges(out, tree)
    with pytest.raises(InputError, match="already exists; pass overwrite=True"):
        write_edges(out, tree)
    small = emst_dask.emst(pts[:10])
    write_edges(out, small, overwrite=True)
    assert open_edges(out).n == 10
    st = write_edges(tmp_path / "e.npy", tree)
    e = np.load(tmp_path / "e.npy")
    assert e.shape == (999, 3)
    assert open_edges(tmp_path / "e.npy").total_weight == pytest.approx(tree.total_weight)
    assert st.load().n_edges == 999
    with pytest.raises(InputError, match="cannot write .*no directory"):
        write_edges(tmp_path / "no" / "e.zarr", tree)


def test_failed_write_leaves_nothing(tmp_path, pts, monkeypatch):
    tree = emst_dask.emst(pts)
    out = tmp_path / "e.zarr"

    def boom(group, *a, **k):
        group.create_array("source", shape=(3,), dtype="i8")
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "_fill", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        write_edges(out, tree)
    assert not out.exists() and no_tmp_siblings(out)
    # replacing: the old store survives a failed replacement
    monkeypatch.undo()
    write_edges(out, tree)
    monkeypatch.setattr(store, "_fill", boom)
    with pytest.raises(RuntimeError):
        write_edges(out, emst_dask.emst(pts[:5]), overwrite=True)
    assert open_edges(out).n == 1000 and no_tmp_siblings(out)


def test_incomplete_store_refused(tmp_path, pts, monkeypatch):
    """Stores written in place (URLs, store objects) are marked incomplete
    until their last array is written, and readers refuse them."""
    tree = emst_dask.emst(pts)
    target = zarr.storage.LocalStore(str(tmp_path / "remote.zarr"))

    def boom(group, *a, **k):
        raise RuntimeError("connection lost")

    monkeypatch.setattr(store, "_fill", boom)
    with pytest.raises(RuntimeError):
        write_edges(target, tree)
    assert zarr.open_group(str(tmp_path / "remote.zarr"), mode="r").attrs["complete"] is False
    with pytest.raises(InputError, match="remote.zarr: incomplete edge store"):
        open_edges(tmp_path / "remote.zarr")
    monkeypatch.undo()
    st = write_edges(zarr.storage.LocalStore(str(tmp_path / "remote.zarr")), tree,
                     overwrite=True)
    assert st.attrs["complete"] is True
    assert_same_tree(open_edges(tmp_path / "remote.zarr"), pts, reference=tree)
    with pytest.raises(InputError, match="no such edge store"):
        open_edges(tmp_path / "nothing.zarr")
    write_snapshot(tmp_path / "pts.zarr", pts)
    with pytest.raises(InputError, match="not an emst-dask edge store"):
        open_edges(tmp_path / "pts.zarr")


# --------------------------------------------------------------------------
# the whole job in this process (client=False)
# --------------------------------------------------------------------------
def test_inline_jobs(tmp_path, pts):
    ref = emst_dask.emst(pts)
    path = write_snapshot(tmp_path / "s.zarr", pts, layout="columns", zarr_format=2)
    assert_same_tree(emst_dask.emst(path, client=False), pts, reference=ref)
    phases = []
    st = emst_dask.emst(path, client=False, out=tmp_path / "e.zarr",
                        progress=lambda p, **i: phases.append(p))
    assert_same_tree(st, pts, reference=ref)
    assert phases[0] == "start" and "tree" in phases and "iteration" in phases
    assert phases[-2:] == ["write", "done"]
    # in-memory points with out=: this process writes the store
    st = emst_dask.emst(pts, out=tmp_path / "m.zarr", min_samples=3)
    assert_same_tree(st, pts, 3)
    assert open_edges(tmp_path / "m.zarr").core_distances.shape == (1000,)
    import dask.array as da

    darr = da.from_array(pts, chunks=(300, 2))
    assert_same_tree(service_emst(darr, client=False), pts, reference=ref)
    bad = pts.copy()
    bad[5, 0] = np.nan
    with pytest.raises(InputError, match=r"block 0 \(rows 0-999\).*first bad row is 5"):
        emst_dask.emst(bad, out=tmp_path / "bad.zarr")
    assert not (tmp_path / "bad.zarr").exists() and no_tmp_siblings(tmp_path / "bad.zarr")


def test_in_memory_progress_bar(pts, capsys):
    tree = emst_dask.emst(pts, progress=True)
    err = capsys.readouterr().err
    assert "emst: boruvka iteration" in err and "components=1" in err and "emst: done" in err
    assert tree.total_weight == emst_dask.emst(pts).total_weight


def test_cupy_device_layer_glue(tmp_path, pts, monkeypatch):
    """``CupyDevice`` against a numpy stand-in for the few CuPy calls it makes
    (the real thing runs on GPU machines only): catches wrong names and shapes."""
    import sys
    import types

    class DevArray(np.ndarray):
        def set(self, arr, stream=None):
            assert isinstance(arr, np.ndarray) and arr.shape == self.shape
            assert arr.dtype == self.dtype and stream is not None
            self[...] = arr

    class Event:
        def synchronize(self):
            pass

    class Stream:
        def __init__(self, non_blocking=False):
            assert non_blocking

        def record(self):
            return Event()

        def synchronize(self):
            pass

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(Stream=Stream)
    cp.empty = lambda shape, dtype: np.empty(shape, dtype).view(DevArray)
    cp.isfinite = np.isfinite
    cp.flatnonzero = np.flatnonzero
    cp.asnumpy = lambda a: np.asarray(a).view(np.ndarray)
    cpx = types.ModuleType("cupyx")
    cpx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cpx)
    monkeypatch.setattr(io.source, "BLOCK_ROWS", 128)
    path = write_snapshot(tmp_path / "s.zarr", pts, chunk_rows=128)
    out = io.stage(io.resolve_source(path), "cuda", threads=3)
    assert isinstance(out, DevArray)
    np.testing.assert_array_equal(out, pts)
    bad = pts.copy()
    bad[300, 0] = np.inf
    path = write_snapshot(tmp_path / "bad.zarr", bad, chunk_rows=128)
    with pytest.raises(InputError, match=r"chunk 2 \(rows 256-383\).*first bad row is 300"):
        io.stage(io.resolve_source(path), "cuda", threads=3)


def _edited(path, how):
    """Edit the edge store at ``path`` as a damaged or hand-edited one would be."""
    g = zarr.open_group(path, mode="r+")

    def replace(name, data):
        del g[name]
        g.create_array(name, data=np.asarray(data))

    s, t, w = g["source"][:], g["target"][:], g["weight"][:]
    if how == "dtype attribute":
        g.attrs["dtype"] = "int8"
    elif how == "integer weights":
        replace("weight", w.astype(np.int32))
    elif how == "float ids":
        replace("source", s.astype(np.float32) + 0.5)
    elif how == "a cycle":
        s[-1], t[-1] = s[0], t[0]
        replace("source", s)
        replace("target", t)
    elif how == "a self-loop":
        t[-1] = s[-1]
        replace("target", t)
    elif how == "n attribute":
        g.attrs["n"] = int(g.attrs["n"]) + 200
    elif how == "extra edges":
        for name, a in (("source", s), ("target", t), ("weight", w)):
            replace(name, np.concatenate([a, a[:3]]))
    elif how == "an infinite weight":
        w[5] = np.inf
        replace("weight", w)
    elif how == "ids out of range":
        s[2] = 10_000
        replace("source", s)
    elif how == "weight a group":
        del g["weight"]
        g.create_group("weight")
    elif how == "short arrays":
        replace("weight", w[:-5])
    elif how == "no core distances":
        del g["core_distances"]
    elif how == "short core distances":
        replace("core_distances", g["core_distances"][:-7])
    elif how == "NaN core distance":
        c = g["core_distances"][:]
        c[3] = np.nan
        replace("core_distances", c)


@pytest.mark.parametrize("how", ["dtype attribute", "integer weights", "float ids", "a cycle",
                                 "a self-loop", "n attribute", "extra edges",
                                 "an infinite weight", "ids out of range", "weight a group",
                                 "short arrays", "no core distances", "short core distances",
                                 "NaN core distance"])
def test_an_edited_edge_store_is_refused_naming_it(tmp_path, pts, how):
    """A store edited or damaged past its checksums (they are recomputed
    when an array is rewritten) is refused when opened or loaded, naming
    the store, instead of giving wrong groups, heights or clusters."""
    k = 5 if "core" in how else 1
    path = str(tmp_path / "e.zarr")
    emst_dask.emst(pts, min_samples=k, out=path)
    assert emst_dask.read_edges(path).n_edges == len(pts) - 1
    _edited(path, how)
    with pytest.raises(emst_dask.InputError) as err:
        emst_dask.read_edges(path)
    assert "e.zarr" in str(err.value), err.value


def test_reader_threads_follow_the_cores_this_process_may_use(monkeypatch):
    """``default_threads``: the cores of the process's affinity (a GPU
    worker pinned near its GPU), at least 2 and at most 16; the machine's
    count where there is no affinity."""
    import os

    from emst_dask.io.reading import default_threads

    for allowed, want in [(1, 2), (4, 4), (12, 12), (64, 16)]:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, k=allowed: set(range(k)),
                            raising=False)
        monkeypatch.setattr(os, "cpu_count", lambda: 128)
        assert default_threads() == want
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert default_threads() == 6


def test_reader_and_writer_threads_from_the_configuration(tmp_path, monkeypatch):
    """``emst_dask.io.threads`` (as a worker's environment gives it) sets
    the threads where a job names none, and a store is written with that
    many writer threads; a value that is not 'auto' or an int >= 1 is
    refused, naming the key."""
    import threading

    import dask.config

    from emst_dask.io import edge_store
    from emst_dask.io.reading import THREADS_KEY, default_threads

    env = dask.config.collect_env({"DASK_EMST_DASK__IO__THREADS": "3"})
    with dask.config.set(env):
        assert default_threads() == 3
        seen = set()
        real = edge_store.write_rows

        def spy(*args, **kw):
            seen.add(threading.current_thread().name)
            return real(*args, **kw)

        monkeypatch.setattr(edge_store, "write_rows", spy)
        pts = np.random.default_rng(1).random((20_000, 3)).astype(np.float32)
        write_edges(str(tmp_path / "e.zarr"), emst_dask.emst(pts, backend="cpu"),
                    chunk_rows=1000)
    assert 1 < len(seen) <= 3 and all(n.startswith("emst-write") for n in seen)
    for bad in (0, -2, 2.5, "many", True):
        with dask.config.set({THREADS_KEY: bad}):
            with pytest.raises(ValueError, match="emst_dask.io.threads"):
                default_threads()
