"""The exact EMST across several Dask workers (``emst_dask.distributed.partitioned``).

CPU workers on loopback stand in for GPU ones.  For every P the edge set
must equal the one-box edge set of the in-process CPU engine (itself held to
brute force elsewhere); small clouds are also held to the brute-force
oracle here.
"""
import sys

import numpy as np
import pytest
import zarr
from distributed import get_task_stream
from hypothesis import HealthCheck, given, settings, strategies as st

from emst_dask import emst
from emst_dask.datasets import GENERATORS
from emst_dask.distributed.partitioned import choose_partitions
from emst_dask.partitioned.boxes import choose_partitioning
from emst_dask.partitioned.sizing import box_footprint_bytes_per_point, footprint_bytes_per_point
from emst_dask import EmbeddedCluster
from emst_dask.io.edge_store import EdgeStore, open_edges
from emst_dask import InputError

from oracle import check_spanning_tree, edge_set


@pytest.fixture(scope="module")
def client():
    with EmbeddedCluster(n_workers=2, backend="cpu") as emb:
        yield emb.client


def same_as_single(tree, pts, min_samples=1):
    ref = emst(pts, min_samples=min_samples, backend="cpu")
    assert tree.n_edges == pts.shape[0] - 1
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-9)
    if min_samples > 1:
        np.testing.assert_allclose(tree.core_distances, ref.core_distances, rtol=1e-6)
    return ref


@pytest.mark.parametrize("name,dim", [("uniform", 3), ("normal", 3), ("halos", 3),
                                      ("uniform", 2)])
def test_shared_datasets_every_P(client, name, dim):
    pts = GENERATORS[name](8_000, dim, 0)
    for P in (1, 2, 3, 4, 8):
        tree = emst(pts, client=client, partitions=P)
        same_as_single(tree, pts)
        rep = tree.report
        assert rep.partitions == P and len(rep.boxes) == P
        assert sum(b["n"] for b in rep.boxes) == pts.shape[0]
        if P == 1:
            assert rep.rounds == 0 and rep.n_super_vertices == 1
        else:
            # rounds do not grow with n: one, or two when R must widen
            assert 1 <= rep.rounds <= 2, rep.rounds
            assert rep.bytes_moved["phase2"] > 0
        assert {"read", "partition", "shuffle", "phase1", "phase2", "output"} \
            <= set(rep.seconds)


@pytest.mark.parametrize("P", [2, 4, 8])
def test_brute_force_small(client, P):
    pts = np.random.default_rng(P).random((900, 3))
    tree = emst(pts, client=client, partitions=P)
    check_spanning_tree(tree, pts)  # brute force: edges, weights, total


@pytest.mark.parametrize("P", [2, 3, 8])
def test_duplicates_and_lattices(client, P):
    rng = np.random.default_rng(7)
    lattice = rng.integers(0, 7, (4000, 3)).astype(np.float32)   # massive ties + dups
    same_as_single(emst(lattice, client=client, partitions=P), lattice)
    dups = np.repeat(rng.random((300, 2)), 5, axis=0)
    same_as_single(emst(dups, client=client, partitions=P), dups)
    same = np.ones((50, 3))
    same_as_single(emst(same, client=client, partitions=P), same)


@pytest.mark.parametrize("P", [2, 4, 8])
def test_clusters_straddling_faces(client, P):
    rng = np.random.default_rng(3)
    base = rng.random((12_000, 3)).astype(np.float32)
    part = choose_partitioning(base, P)
    centres = []
    for axis, v, _, _ in part.splits:
        c = rng.random((4, 3))
        c[:, axis] = v
        centres.append(c)
    centres = np.concatenate(centres)
    blobs = (centres[rng.integers(0, len(centres), 6000)]
             + rng.normal(0, 0.003, (6000, 3))).astype(np.float32)
    pts = np.concatenate([base, blobs])
    same_as_single(emst(pts, client=client, partitions=P), pts)


@pytest.mark.parametrize("P,k", [(2, 2), (3, 5), (8, 16), (4, 5)])
def test_mutual_reachability(client, P, k):
    pts = GENERATORS["halos"](6000, 3, 1)
    tree = emst(pts, client=client, partitions=P, min_samples=k)
    same_as_single(tree, pts, min_samples=k)
    assert "core_distances" in tree.report.seconds


def test_mutual_reachability_brute_force(client):
    pts = np.random.default_rng(11).random((500, 2))
    tree = emst(pts, client=client, partitions=4, min_samples=7)
    check_spanning_tree(tree, pts, 7)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 300), d=st.integers(1, 4), P=st.integers(2, 6),
       seed=st.integers(0, 2**31), grid=st.sampled_from([0, 3, 20]),
       k=st.sampled_from([1, 3]))
def test_property_random(client, n, d, P, seed, grid, k):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, d))
    if grid:
        pts = np.round(pts * grid)
    k = min(k, n)
    P = min(P, n)  # at most a box per point (more is refused: test_partitions_bounded)
    same_as_single(emst(pts, client=client, partitions=P, min_samples=k), pts, k)


def test_zarr_snapshot_to_edge_store(client, tmp_path):
    """Workers read the chunks and write the store: the client never holds
    the points or the edges."""
    pts = GENERATORS["halos"](8000, 3, 2)
    g = zarr.open_group(str(tmp_path / "snap.zarr"), mode="w")
    g.create_array("points", shape=pts.shape, chunks=(1000, 3), dtype=pts.dtype)[...] = pts
    store = emst(str(tmp_path / "snap.zarr"), client=client, partitions=3,
                 out=str(tmp_path / "edges.zarr"))
    assert isinstance(store, EdgeStore)
    tree = open_edges(str(tmp_path / "edges.zarr")).load()
    same_as_single(tree, pts)
    attrs = open_edges(str(tmp_path / "edges.zarr")).attrs
    rep = attrs["partitioned"]
    assert rep["partitions"] == 3 and rep["rounds"] >= 1 and rep["total_bytes_moved"] > 0
    # every phase is timed in the store, the output included
    for name in ("read", "shuffle", "phase1", "phase2", "output"):
        assert rep["seconds"][name] >= 0.0, name
    assert attrs["timings"]["output"] == rep["seconds"]["output"]


@pytest.mark.parametrize("chunk_rows", [1, 997, 4096, None])
def test_edge_store_written_by_every_box(client, tmp_path, chunk_rows):
    """Each box's worker writes the whole chunks of its row range, one worker
    the chunks two ranges share: any chunk length gives the one-box tree."""
    # a chunk a row is a file a row: fewer points keep that case quick
    pts = GENERATORS["halos"](600 if chunk_rows == 1 else 6000, 3, 3)
    out = tmp_path / "edges.zarr"
    st = emst(pts, client=client, partitions=4, out=str(out), chunk_rows=chunk_rows)
    assert st.n_edges == pts.shape[0] - 1
    tree = open_edges(str(out)).load()
    ref = same_as_single(tree, pts)
    assert st.total_weight == pytest.approx(ref.total_weight, rel=1e-12)
    C = zarr.open_group(str(out), mode="r")["source"].chunks[0]
    assert C == min(chunk_rows or 1 << 20, pts.shape[0] - 1)
    assert [p.name for p in tmp_path.iterdir()] == ["edges.zarr"]  # no temporary left


def test_edge_store_mutual_reachability(client, tmp_path):
    pts = GENERATORS["normal"](5000, 3, 1)
    emst(pts, client=client, partitions=3, out=str(tmp_path / "e.zarr"), min_samples=5,
         chunk_rows=1000)
    tree = open_edges(str(tmp_path / "e.zarr")).load()
    same_as_single(tree, pts, 5)


def test_failed_partitioned_write_leaves_nothing(client, tmp_path, monkeypatch):
    """A job whose finishing writer fails leaves neither the store nor its
    temporary sibling, and a later job can write the same path."""
    import emst_dask.distributed.partitioned_output as po

    def boom(*args):
        raise OSError("disk full (test)")

    pts = GENERATORS["uniform"](4000, 3, 5)
    monkeypatch.setattr(po, "_finish", boom)
    with pytest.raises(OSError, match="disk full"):
        emst(pts, client=client, partitions=2, out=str(tmp_path / "e.zarr"), chunk_rows=500)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    emst(pts, client=client, partitions=2, out=str(tmp_path / "e.zarr"), chunk_rows=500)
    same_as_single(open_edges(str(tmp_path / "e.zarr")).load(), pts)


def test_dask_array_source(client):
    import dask.array as da

    pts = GENERATORS["normal"](6000, 3, 0)
    tree = emst(da.from_array(pts, chunks=(1500, 3)), client=client, partitions=2)
    same_as_single(tree, pts)


def test_persisted_chunks_read_as_one_block_a_run(client):
    """A persisted dask array of many small chunks: each worker's runs of
    neighbouring chunks become one block (one task, not one a chunk), the
    tree is the one-box tree, and a NaN is named by its global row."""
    import dask.array as da

    from emst_dask.distributed.partitioned import held_runs, persisted_chunks
    from emst_dask.io.source import irregular_chunks

    pts = GENERATORS["halos"](12_000, 3, 3)
    x = client.persist(da.from_array(pts, chunks=(250, 3)))
    futs = persisted_chunks(client, x)
    chunks = irregular_chunks(x.chunks[0])
    runs = held_runs(client, futs, chunks, 3000)
    assert runs[0][0] == 0 and runs[-1][1] == len(chunks)
    assert all(a[1] == b[0] for a, b in zip(runs, runs[1:]))        # cover in order
    assert all(chunks[j - 1][1] - chunks[i][0] <= 3000 for i, j, _ in runs)
    assert len(runs) < len(chunks)
    where = client.who_has(futs)
    for i, j, w in runs:                                             # held there
        assert all(w in where[f.key] for f in futs[i:j])
    del futs
    assert persisted_chunks(client, x + 1) is None                  # a graph on top
    same_as_single(emst(x, client=client, partitions=3), pts)
    bad = pts.copy()
    bad[7777, 2] = np.nan
    xb = client.persist(da.from_array(bad, chunks=(250, 3)))
    with pytest.raises(InputError, match="first bad row is 7777"):
        emst(xb, client=client, partitions=3)
    # not persisted: a task a chunk, as before
    assert held_runs(client, [], chunks, 3000) is None


def test_persisted_device_chunks_read_as_one_block_a_worker(client, monkeypatch):
    """Chunks on the devices (stood in for by host chunks here): each
    worker's chunks join into blocks though other workers' chunks lie
    between them (``held_groups``: every chunk once, held where it is
    read, at most the rows asked unless one chunk is larger), the boxes
    come out ordered by id, the tree is the one-box tree, and a NaN is
    named by its global row."""
    import dask.array as da

    from emst_dask.distributed import partitioned as dp
    from emst_dask.io.source import irregular_chunks

    pts = GENERATORS["halos"](12_000, 3, 5)
    x = client.persist(da.from_array(pts, chunks=(250, 3)))
    futs = dp.persisted_chunks(client, x)
    chunks = irregular_chunks(x.chunks[0])
    groups = dp.held_groups(client, futs, chunks, 3000)
    assert sorted(i for idx, _ in groups for i in idx) == list(range(len(chunks)))
    where = client.who_has(futs)
    for idx, w in groups:
        assert idx == sorted(idx) and all(w in where[futs[i].key] for i in idx)
        assert sum(chunks[i][1] - chunks[i][0] for i in idx) <= 3000
    assert len(groups) < len(dp.held_runs(client, futs, chunks, 3000))  # runs apart joined
    del futs
    monkeypatch.setattr(dp, "chunks_on_device", lambda arr: True)
    tree = emst(x, client=client, partitions=3)
    same_as_single(tree, pts)
    bad = pts.copy()
    bad[7777, 2] = np.nan
    xb = client.persist(da.from_array(bad, chunks=(250, 3)))
    with pytest.raises(InputError, match="first bad row is 7777"):
        emst(xb, client=client, partitions=3)


def test_nan_in_a_chunk_is_named_before_any_work(client, tmp_path):
    pts = np.random.default_rng(0).random((3000, 3)).astype(np.float32)
    pts[2345, 1] = np.nan
    g = zarr.open_group(str(tmp_path / "bad.zarr"), mode="w")
    g.create_array("points", shape=pts.shape, chunks=(500, 3), dtype=pts.dtype)[...] = pts
    with pytest.raises(InputError, match="2345"):
        emst(str(tmp_path / "bad.zarr"), client=client, partitions=2)


def test_api_and_errors(client):
    pts = GENERATORS["uniform"](3000, 3, 4)
    tree = emst(pts, client=client, partitions=3, sort_by_weight=True)
    same_as_single(tree, pts)
    assert np.all(np.diff(tree.weight) >= 0)
    inproc = emst(pts, client=False, partitions=3)
    assert edge_set(inproc.source, inproc.target) == edge_set(tree.source, tree.target)
    # "auto" keeps a cloud that fits on one worker whole (ordinary service path)
    auto = emst(pts, client=client, partitions="auto")
    assert auto.report is None
    same_as_single(auto, pts)
    for bad in (0, -1, 1.5, "many", True):
        with pytest.raises(InputError, match="partitions"):
            emst(pts, client=client, partitions=bad)
    for pts_small in (np.zeros((0, 3)), np.zeros((1, 2))):
        t = emst(pts_small, client=client, partitions=2)
        assert t.n_edges == 0


def test_auto_partitions_follow_worker_memory(client):
    """The footprint per point decides P: with GPUs of 100 MB, 3M float32
    points in 3-D (89 B/pt on one device) do not fit one, and boxes (117
    B/pt, the largest up to ``BOX_SLACK`` = 1.25 times n / P points) need
    six: five would hold 4.4 boxes' worth of the cloud, not the 5.5 its
    largest box may take (CPU workers: ``test_auto_memory``)."""
    assert footprint_bytes_per_point(3, np.float32) == 3 * 4 + 77
    assert footprint_bytes_per_point(3, np.float64) == 3 * 8 + 154
    assert box_footprint_bytes_per_point(3, np.float32) == 3 * 4 + 105

    class Fake:
        def run(self, fn, *args):  # the workers' device memory
            return {"a": 100_000_000, "b": 200_000_000}

        def scheduler_info(self, n_workers=-1):
            return {"workers": {"a": {"memory_limit": 10**10}, "b": {"memory_limit": 10**10}}}

    assert choose_partitions("auto", 3_000_000, 3, np.float32, Fake(), "cpu") == 6
    assert choose_partitions("auto", 100_000, 3, np.float32, Fake(), "cpu") == 1
    assert choose_partitions(5, 10, 3, np.float32, Fake(), "cpu") == 5


def test_boxes_kept_on_one_gpu_only_where_they_fit():
    """One GPU keeps every box of its job (and the certified edges until
    they are written) only when they fit with one box's phase 1: uniform
    1B float32 3-D in two boxes on an H200 (141 GiB), not on an 80 GB
    GPU, where eight boxes do (40 GB of boxes and edges, 18 of phase 1);
    1.1B in two boxes only when the writes move each box's edges to host
    memory before the next box (staged, the default for an edge store);
    2.5B not even in eight boxes on the H200."""
    from emst_dask.partitioned.sizing import device_boxes_fit

    h200, h100 = 143_771 << 20, 81_559 << 20
    assert device_boxes_fit(10**9, 3, np.float32, 2, h200)
    assert device_boxes_fit(1_100_000_000, 3, np.float32, 2, h200, staged=True)
    assert not device_boxes_fit(1_100_000_000, 3, np.float32, 2, h200)
    assert not device_boxes_fit(10**9, 3, np.float32, 2, h100)
    assert device_boxes_fit(10**9, 3, np.float32, 8, h100)
    assert not device_boxes_fit(2_500_000_000, 3, np.float32, 8, h200, staged=True)
    assert not device_boxes_fit(10**9, 3, np.float64, 2, h200)
    assert not device_boxes_fit(10, 3, np.float32, 2, None)


def test_command_line(client, tmp_path):
    from click.testing import CliRunner

    from emst_dask.cli import main

    pts = GENERATORS["halos"](5000, 3, 5)
    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    g.create_array("points", shape=pts.shape, chunks=(1000, 3), dtype=pts.dtype)[...] = pts
    out = str(tmp_path / "e.zarr")
    r = CliRunner().invoke(main, ["run", str(tmp_path / "s.zarr"), "--out", out,
                                  "--partitions", "3", "--scheduler",
                                  client.scheduler.address])
    assert r.exit_code == 0, r.output
    assert "partitions=3" in r.output and "rounds=" in r.output
    same_as_single(open_edges(out).load(), pts)
    np.save(tmp_path / "p.npy", pts)
    r = CliRunner().invoke(main, ["run", str(tmp_path / "p.npy"), "--partitions", "2",
                                  "--in-process"])
    assert r.exit_code == 0, r.output
    ref = emst(pts, backend="cpu")
    assert f"total_weight={ref.total_weight!r}"[:24] in r.output
    r = CliRunner().invoke(main, ["run", str(tmp_path / "p.npy"), "--partitions", "x"])
    assert r.exit_code != 0 and "--partitions" in r.output


@pytest.mark.parametrize("early", ["on", "off"])
def test_box_writes_begun_before_phase_2(client, tmp_path, early):
    """With ``early-writes`` on, the box writes are submitted when phase 1
    ends (before any phase-2 task) and the store is the one-box tree; a
    phase 2 that fails waits for them, and leaves no store."""
    import dask.config

    from emst_dask.distributed import partitioned as dp
    from emst_dask.distributed.partitioned_output import EARLY_WRITES_KEY
    from emst_dask.io.edge_store import EdgeStore

    pts = GENERATORS["halos"](8000, 3, 6)
    order = []
    real_submit = dp.DaskExecutor.submit

    def spy(self, fn, *args, box=None, name="", **kw):
        order.append(name)
        return real_submit(self, fn, *args, box=box, name=name, **kw)

    with dask.config.set({EARLY_WRITES_KEY: early}), \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr(dp.DaskExecutor, "submit", spy)
        store = emst(pts, client=client, partitions=3, out=str(tmp_path / "e.zarr"))
    assert isinstance(store, EdgeStore)
    same_as_single(store.load(), pts)
    first_write = order.index("write")
    first_out = next(i for i, nm in enumerate(order) if nm.startswith("out"))
    assert (first_write < first_out) == (early == "on")

    from emst_dask.partitioned import steps

    def broken(*a, **k):
        raise RuntimeError("phase 2 broke")

    waited = []
    real_wait = dp.wait_quietly
    with dask.config.set({EARLY_WRITES_KEY: early}), \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "connect", broken)
        mp.setattr(dp, "wait_quietly", lambda c, f, *a: (waited.append(len(f)),
                                                        real_wait(c, f, *a)))
        with pytest.raises(RuntimeError, match="phase 2 broke"):
            emst(pts, client=client, partitions=3, out=str(tmp_path / "f.zarr"))
    assert waited == ([3] if early == "on" else [])
    assert not (tmp_path / "f.zarr").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["e.zarr"]    # no temporary left


@pytest.mark.parametrize("early,stage", [("on", "auto"), ("on", "all"), ("on", "off"),
                                         ("off", "auto")])
def test_a_box_write_begins_before_the_next_box_on_its_worker(tmp_path, early, stage):
    """One worker solving its boxes in turn (one GPU, P boxes): with early
    writes, box b's edges are copied off the device (``stage``) as soon as
    box b is solved, and its write starts before the worker takes up box
    b + 1 (so that it runs beside the next box's phase 1); the last box is
    written from where it is, beside phase 2, unless ``stage-writes`` is
    "all" (then it is staged too; "off": no box is).  Without early
    writes, every write starts after the last box.  The store is the
    one-box tree every way."""
    import dask.config

    from emst_dask.distributed.partitioned_output import EARLY_WRITES_KEY, STAGE_WRITES_KEY

    pts = GENERATORS["halos"](6000, 3, 7)
    with EmbeddedCluster(n_workers=1, backend="cpu") as emb, \
            dask.config.set({EARLY_WRITES_KEY: early, STAGE_WRITES_KEY: stage}):
        with get_task_stream(client=emb.client) as ts:
            store = emst(pts, client=emb.client, partitions=3, out=str(tmp_path / "e.zarr"))
        same_as_single(store.load(), pts)
    began = {}
    for t in ts.data:
        parts = t["key"].split("-")   # emst-part-<token>-<name>-<box>-<n>
        if parts[3] in ("solve", "stage", "write"):
            start = min(s["start"] for s in t["startstops"] if s["action"] == "compute")
            began[parts[3], int(parts[4])] = start
    staged = {("on", "auto"): [0, 1], ("on", "all"): [0, 1, 2]}.get((early, stage), [])
    assert sorted(began) == sorted([(nm, b) for nm in ("solve", "write") for b in range(3)]
                                   + [("stage", b) for b in staged])
    if early == "on":
        for b in range(3):
            assert began["solve", b] < began["write", b]
    if staged:   # the boxes in turn, each staged and its write begun before the next
        for b in range(2):
            assert (began["solve", b] < began["stage", b] < began["write", b]
                    < began["solve", b + 1])
    if stage == "all":
        assert began["solve", 2] < began["stage", 2] < began["write", 2]
    if early == "off":
        assert min(began["write", b] for b in range(3)) > max(began["solve", b] for b in range(3))


def test_a_wrong_stage_writes_setting_is_refused_before_the_job(client, tmp_path):
    """``stage-writes`` other than auto, all or off: a clear error naming
    the setting, and no store."""
    import dask.config

    from emst_dask.distributed.partitioned_output import EARLY_WRITES_KEY, STAGE_WRITES_KEY

    pts = GENERATORS["halos"](3000, 3, 8)
    with dask.config.set({EARLY_WRITES_KEY: "on", STAGE_WRITES_KEY: "sometimes"}), \
            pytest.raises(ValueError, match="stage-writes"):
        emst(pts, client=client, partitions=2, out=str(tmp_path / "e.zarr"))
    assert not (tmp_path / "e.zarr").exists()


def test_device_arrays_copied_to_the_host_in_pieces(monkeypatch):
    """``to_host_arrays`` (a box's edges staged for its write): every array
    whole and in the dtype asked, each cast where it is, whatever the
    pieces and threads; device arrays through the pinned buffers (a
    stand-in CuPy here; the device's copies are the GPU tests'), host
    arrays as they are."""
    import types

    from emst_dask.io.host_staging import to_host_arrays

    copied = []

    class DevArray:   # what ``is_device_array`` sees as a GPU array
        __cuda_array_interface__ = {}

        def __init__(self, a):
            self.a, self.shape, self.dtype = a, a.shape, a.dtype

        def __getitem__(self, key):
            return DevArray(self.a[key])

        def astype(self, dtype, copy=True):
            return DevArray(self.a.astype(dtype, copy=copy))

        def get(self, out=None, stream=None):
            assert stream is not None and out.dtype == self.dtype
            copied.append(len(self.a))
            out[...] = self.a
            return out

    class Stream:
        def __init__(self, non_blocking=False):
            assert non_blocking

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(Stream=Stream)
    cpx = types.ModuleType("cupyx")
    cpx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cpx)
    u = np.arange(1000, dtype=np.int64)[::-1].copy()
    w = np.linspace(0, 1, 1000, dtype=np.float64)
    a, b, c = to_host_arrays([DevArray(u), DevArray(w), u], [np.int32, np.float32,
                                                                        np.int64],
                             piece_rows=7, threads=3)
    assert [type(x) for x in (a, b, c)] == [np.ndarray] * 3
    assert (a.dtype, b.dtype, c.dtype) == (np.int32, np.float32, np.int64)
    np.testing.assert_array_equal(a, u)
    np.testing.assert_array_equal(b, w.astype(np.float32))
    np.testing.assert_array_equal(c, u)
    assert sorted(copied) == sorted([7] * 142 + [6] + [7] * 142 + [6])  # two device arrays


def test_a_box_the_host_cannot_stage_is_written_from_where_it_is(tmp_path, monkeypatch):
    """A box's certified edges moved to the host for its write leave its
    solve result (the rest of it unchanged, for phase 2); a box whose
    edges find no room in host memory keeps them and is written from
    there: the same rows, the same rests for the finisher, the same weight
    sum either way."""
    import zarr

    from emst_dask.distributed import partitioned_output as po
    from emst_dask.io.output import resolve_output
    from emst_dask.io.shared_store import create_shared_store
    from emst_dask.partitioned.edges import Edges

    from emst_dask.partitioned.phase1 import BoxResult

    rng = np.random.default_rng(3)
    m = 5000
    u, v = rng.integers(0, 9000, m), rng.integers(0, 9000, m)
    w2 = rng.random(m).astype(np.float32)
    rest = Edges(u[:10], v[:10], w2[:10], u[:10], v[:10])
    solved = (BoxResult(Edges(u, v, w2, u, v), rest, np.zeros(9000, np.int32),
                        np.arange(9000), 0.5, 7, {}), 1.25, "cpu")
    before = [dict(certified=123)]
    got = {}
    for how in ("staged", "no room"):
        if how == "no room":
            def no_room(*a, **k):
                raise MemoryError("no room")
            monkeypatch.setattr(po, "to_host_arrays", no_room)
        staged = po._stage_box(solved, 9000, "<f4", 2)
        left, host = staged
        if how == "no room":   # written from where the edges are
            assert host is None and left is solved
        else:   # the edges left the solve result; the rest of it is phase 2's, as it was
            assert len(left[0].certified) == 0 and left[1:] == solved[1:]
            assert left[0].uncertified is rest and left[0].n_super == 7
        out = resolve_output(str(tmp_path / f"{how}.zarr"), chunk_rows=1000)
        store = create_shared_store(out, 10000, np.float32)
        rests, total = po._write_staged((store, 0.0), staged, "<f4", 2, *before)
        g = zarr.open_group(store.where, mode="r")
        got[how] = ([a[1000:5000] for a in (g["source"], g["target"], g["weight"])],
                    [(at, *(np.asarray(x) for x in r)) for at, *r in rests], total)
    (a_rows, a_rests, a_total), (b_rows, b_rests, b_total) = got["staged"], got["no room"]
    for x, y in zip(a_rows, b_rows):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a_rows[0], u[1000 - 123:5000 - 123])
    assert a_total == b_total and len(a_rests) == len(b_rests) == 2
    for ra, rb in zip(a_rests, b_rests):
        assert ra[0] == rb[0]
        for x, y in zip(ra[1:], rb[1:]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_a_writer_beside_phase_2_lowers_only_its_own_threads():
    """``lower_thread_priority`` (what a box writer beside phase 2 calls
    once seceded) raises the calling thread's nice value, the threads it
    then starts (its writer pool) inherit it, and the rest of the process
    (phase 2's thread) keeps its own."""
    import os
    import threading

    from emst_dask.distributed.partitioned_output import BESIDE_NICE, lower_thread_priority

    def nice():
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    here = nice()
    seen = {}

    def writer():
        before = nice()
        seen["lowered"] = lower_thread_priority(BESIDE_NICE)
        seen["writer"] = nice() - before
        child = threading.Thread(target=lambda: seen.__setitem__("pool", nice() - before))
        child.start()
        child.join()

    t = threading.Thread(target=writer)
    t.start()
    t.join()
    assert seen["lowered"]
    want = min(19, here + BESIDE_NICE) - here
    assert want > 0 or here == 19
    assert seen["writer"] == want and seen["pool"] == want
    assert nice() == here
