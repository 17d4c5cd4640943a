"""The shuffle as one exchange (``partitioned.exchange``): every rank packs
what it sends, all ranks send and receive at once, each assembles its
boxes.  Run here with threads and queues standing in for NCCL: the boxes
equal those ``steps.assemble_box`` makes from the same pieces (rows, ids,
face distances bit for bit), for any placement of blocks and boxes on
ranks, ranks holding no block or no box included."""
from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from emst_dask.datasets import GENERATORS
from emst_dask.partitioned import steps
from emst_dask.partitioned.boxes import choose_partitioning
from emst_dask.partitioned.exchange import (assign_boxes_xp, exchange_boxes, make_plan, pack,
                                            split_block_xp)
from emst_dask.partitioned.boxes import box_walls, face_distances

from cupy_emu import StableNumpy


class ThreadComm:
    """One rank of a communicator of threads: a queue per (sender, receiver)."""

    def __init__(self, rank, queues):
        self.rank, self.queues = rank, queues

    def exchange(self, send, recv):
        for q, arrays in send.items():
            self.queues[self.rank, q].put([np.array(a, copy=True) for a in arrays])
        for q, arrays in recv.items():
            got = self.queues[q, self.rank].get(timeout=30)
            assert len(got) == len(arrays)
            for dst, src in zip(arrays, got):
                assert dst.shape == src.shape and dst.dtype == src.dtype
                dst[...] = src


def run_exchange(splits, part, block_rank, box_rank, ranks):
    P = part.n_boxes
    rows = [[len(s[k].gids) for k in range(P)] for s in splits]
    d = part.lo.shape[1]
    frame = splits[0][0].points.dtype
    plan = make_plan(rows, block_rank, box_rank, ranks, d, frame)
    queues = {(a, b): queue.Queue() for a in range(ranks) for b in range(ranks)}
    out, errors = {}, []

    def rank_main(r):
        try:
            mine = {i: splits[i] for i in plan.blocks_of(r)}
            out.update(exchange_boxes(ThreadComm(r, queues), plan, r, mine, part))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return plan, out


def split_cloud(pts, P, blocks, exponent=0):
    part = choose_partitioning(pts, P)
    cuts = np.linspace(0, len(pts), blocks + 1).astype(int)
    splits = [steps.split_block(steps.Block(int(a), pts[a:b]), part, pts.dtype.str, exponent)
              for a, b in zip(cuts[:-1], cuts[1:])]
    return part, splits


@pytest.mark.parametrize("P,blocks,ranks", [(2, 4, 2), (3, 5, 2), (5, 7, 3), (4, 3, 4),
                                            (2, 1, 3)])
@pytest.mark.parametrize("cloud", ["halos", "lattice"])
def test_exchanged_boxes_equal_assembled_boxes(P, blocks, ranks, cloud):
    rng = np.random.default_rng(P * 10 + blocks)
    if cloud == "halos":
        pts = GENERATORS["halos"](20_000, 3, P)
    else:  # ties and duplicates
        pts = rng.integers(0, 9, (12_000, 2)).astype(np.float64)
    part, splits = split_cloud(pts, P, blocks)
    # blocks on arbitrary ranks (some rank may hold none), boxes round robin
    block_rank = rng.integers(0, ranks, blocks).tolist()
    box_rank = [k % ranks for k in range(P)]
    plan, boxes = run_exchange(splits, part, block_rank, box_rank, ranks)
    assert sorted(boxes) == list(range(P))
    for k in range(P):
        want = steps.assemble_box(k, part, *[s[k] for s in splits])
        got = boxes[k]
        np.testing.assert_array_equal(got.gids, want.gids)
        assert got.points.dtype == want.points.dtype
        np.testing.assert_array_equal(got.points.view(np.uint8), want.points.view(np.uint8))
        np.testing.assert_array_equal(got.face.view(np.uint8), want.face.view(np.uint8))
        assert np.all(np.diff(got.gids) > 0)
    # every row is in exactly one box
    every = np.sort(np.concatenate([boxes[k].gids for k in range(P)]))
    np.testing.assert_array_equal(every, np.arange(len(pts)))
    # what crossed: the rows whose block and box sit on different ranks
    cross = sum(len(splits[i][k].gids) for i in range(blocks) for k in range(P)
                if block_rank[i] != box_rank[k])
    assert plan.moved_bytes == cross * plan.row_bytes


def test_packing_follows_the_plan():
    pts = GENERATORS["uniform"](5000, 3, 1).astype(np.float64)
    part, splits = split_cloud(pts, 3, 4)
    rows = [[len(s[k].gids) for k in range(3)] for s in splits]
    plan = make_plan(rows, [0, 1, 0, 1], [1, 0, 1], 2, 3, np.float64)
    p, g = pack(plan, 0, 1, {i: splits[i] for i in (0, 2)})
    want = np.concatenate([splits[i][k].gids for i in (0, 2) for k in (0, 2)])
    np.testing.assert_array_equal(g, want)
    assert p.shape == (plan.rows_between(0, 1), 3)
    assert plan.rows_between(0, 1) + plan.rows_between(0, 0) + plan.rows_between(1, 0) \
        + plan.rows_between(1, 1) == len(pts)


def test_plan_refuses_a_rank_outside():
    with pytest.raises(ValueError, match="outside ranks"):
        make_plan([[1, 2]], [2], [0, 1], 2, 3, np.float32)
    with pytest.raises(ValueError, match="box placed outside"):
        make_plan([[1, 2]], [0], [0, -1], 2, 3, np.float32)


@pytest.mark.parametrize("period", [None, 1.0])
def test_face_distances_on_any_array_module(period):
    """The walls' array-module distances have the numba version's bits
    (here on a stand-in module other than numpy: the same operations)."""
    pts = GENERATORS["halos"](30_000, 3, 2)
    part = choose_partitioning(pts.astype(np.float64), 5)
    if period is not None:
        from dataclasses import replace

        part = replace(part, period=np.full(3, period))
    for k in range(5):
        want = face_distances(part, k, pts)
        got = box_walls(part, k).distances(pts, StableNumpy())
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


# ---------------------------------------------------------------------------
# the Dask side (``distributed.device_exchange``), with the threads' comm
# standing in for NCCL on in-process workers
# ---------------------------------------------------------------------------
_QUEUES: dict = {}
_FAIL_RANK: list = []


def _threads_split_task(block, partitioning, frame, exponent):
    return split_block_xp(StableNumpy(), np.asarray, block, partitioning, frame, exponent)


def _threads_exchange_task(uid, timeout, plan, rank, place, partitioning, *splits):
    from emst_dask.distributed.nccl import ExchangeFailed

    if rank in _FAIL_RANK:
        raise ExchangeFailed(f"rank {rank} stands in for a worker gone")
    queues = _QUEUES.setdefault(uid, {(a, b): queue.Queue() for a in range(plan.ranks)
                                      for b in range(plan.ranks)})
    mine = dict(zip(plan.blocks_of(rank), splits))
    seconds = {}
    boxes = exchange_boxes(ThreadComm(rank, queues), plan, rank, mine, partitioning,
                           seconds=seconds)
    return {**boxes, "seconds": seconds}


@pytest.fixture
def threads_client(monkeypatch):
    from distributed import Client, LocalCluster

    from emst_dask.distributed import device_exchange, nccl

    import emst_dask.kernels

    ids = iter(range(10**6))
    monkeypatch.setattr(emst_dask.kernels, "device_memory", lambda backend: 10**12)
    monkeypatch.setattr(nccl, "ready", lambda backend: True)
    monkeypatch.setattr(nccl, "unique_id", lambda: f"threads-{next(ids)}".encode())
    monkeypatch.setattr(nccl, "exchange_task", _threads_exchange_task)
    monkeypatch.setattr(nccl, "split_task", _threads_split_task)
    monkeypatch.setattr(device_exchange, "_UIDS", {})
    with LocalCluster(n_workers=3, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client
    _QUEUES.clear()
    _FAIL_RANK.clear()


@pytest.mark.parametrize("fail", [False, True])
def test_the_dask_driver_of_the_exchange(threads_client, fail):
    """Blocks read on three workers, four boxes: the exchange's plan from
    Dask's placement gives the one-box tree; a rank that fails makes the
    job shuffle through Dask instead, with the same tree."""
    from emst_dask import emst
    from oracle import check_spanning_tree, edge_set

    if fail:
        _FAIL_RANK.append(1)
    pts = GENERATORS["halos"](6_000, 3, 5)   # the oracle is quadratic
    ref = emst(pts, backend="cpu")
    tree = emst(pts, client=threads_client, partitions=4)
    assert tree.report.shuffle_by == ("dask" if fail else "nccl")
    assert tree.report.bytes_moved["shuffle"] > 0
    if not fail:  # every rank timed its steps
        assert len(tree.report.shuffle_steps) == 3
        assert all(set(s) == {"pack", "to_device", "exchange", "assemble"}
                   for s in tree.report.shuffle_steps)
    check_spanning_tree(tree, pts)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    np.testing.assert_allclose(tree.total_weight, ref.total_weight, rtol=1e-9)


_RAN: list = []


def _exchange_that_must_not_run(uid, timeout, plan, rank, *args):
    # module level: a task's closure would be pickled with a copy of the list
    _RAN.append(rank)
    raise AssertionError("an exchange task ran")  # would also end in the Dask shuffle


def test_ranks_whose_gpus_cannot_hold_their_boxes_shuffle_through_dask(threads_client,
                                                                       monkeypatch):
    """Four boxes on three stand-in GPUs of 100 kB, too small for a rank's
    2,000 points with their phase 1: no exchange is tried (no rank's task
    runs), the job shuffles through Dask and gives the one-box tree."""
    import emst_dask.kernels
    from emst_dask import emst
    from emst_dask.distributed import nccl
    from oracle import check_spanning_tree, edge_set

    monkeypatch.setattr(emst_dask.kernels, "device_memory", lambda backend: 100_000)
    monkeypatch.setattr(nccl, "exchange_task", _exchange_that_must_not_run)
    _RAN.clear()
    pts = GENERATORS["halos"](6_000, 3, 5)
    ref = emst(pts, backend="cpu")
    tree = emst(pts, client=threads_client, partitions=4)
    assert tree.report.shuffle_by == "dask"
    assert _RAN == []
    check_spanning_tree(tree, pts)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)


def test_a_rank_fits_by_its_own_rows():
    """``rank_boxes_fit`` counts a rank's read rows, its boxes, the
    certified edges it keeps and its largest box's phase 1: uniform 1B over
    two H200s (500M read and held a rank) fits, over two 80 GB GPUs only
    in smaller boxes; 2.5B in four boxes over two H200s fits only when
    each box's edges leave the GPU before the next box (staged writes, the
    default for an edge store), in eight boxes either way; a rank given
    all of 2.5B does not."""
    from emst_dask.partitioned.sizing import rank_boxes_fit

    h200, h100 = 150_000_000_000, 85_000_000_000
    f32 = np.float32
    assert rank_boxes_fit(500_000_000, 500_000_000, 500_000_000, 3, f32, h200)
    assert not rank_boxes_fit(500_000_000, 500_000_000, 500_000_000, 3, f32, h100)
    assert rank_boxes_fit(500_000_000, 500_000_000, 125_000_000, 3, f32, h100)
    half = 1_250_000_000
    assert rank_boxes_fit(half, half, half // 2, 3, f32, h200, staged=True)
    assert not rank_boxes_fit(half, half, half // 2, 3, f32, h200, staged=False)
    assert rank_boxes_fit(half, half, half // 4, 3, f32, h200, staged=False)
    assert not rank_boxes_fit(half, 2 * half, half // 2, 3, f32, h200, staged=True)
    assert not rank_boxes_fit(10, 10, 10, 3, f32, None)


_ASSEMBLE_FAILS: list = []


def _stand_in_assemble_task(partitioning, *splits):
    from emst_dask.partitioned.exchange import assemble_boxes

    if _ASSEMBLE_FAILS:
        raise MemoryError("out of memory (a stand-in for the GPU's)")
    return {**assemble_boxes(list(splits), partitioning, StableNumpy()),
            "seconds": {"assemble": 0.0}}


_STAGED: list = []


def _stand_in_stage_task(src):
    _STAGED.append(src.n)
    return steps.Block(0, src.read_all())


@pytest.mark.parametrize("memory,fails,want", [(10**12, False, "device"), (10**5, False, "dask"),
                                               (10**12, True, "dask")])
@pytest.mark.parametrize("source", ["memory", "npy"])
def test_one_gpu_worker_assembles_its_boxes_on_its_device(monkeypatch, tmp_path, memory, fails,
                                                          want, source):
    """One worker: the blocks are split and every box assembled on its
    (stand-in) device when they fit its memory for the job, with the
    one-box tree, and a snapshot is then read there whole, as one block;
    a device too small, or an assembly that fails there, leaves the
    shuffle to the host, with the same tree."""
    from distributed import Client, LocalCluster

    import emst_dask.kernels
    from emst_dask import emst
    from emst_dask.distributed import device_exchange, nccl
    from oracle import check_spanning_tree, edge_set

    monkeypatch.setattr(nccl, "split_task", _threads_split_task)
    monkeypatch.setattr(device_exchange, "assemble_task", _stand_in_assemble_task)
    monkeypatch.setattr(device_exchange, "stage_task", _stand_in_stage_task)
    monkeypatch.setattr(emst_dask.kernels, "device_memory", lambda backend: memory)
    if fails:
        _ASSEMBLE_FAILS.append(True)
    pts = GENERATORS["halos"](6_000, 3, 6)
    ref = emst(pts, backend="cpu")
    given = pts
    if source == "npy":
        given = str(tmp_path / "pts.npy")
        np.save(given, pts)
    try:
        with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            tree = emst(given, client=client, partitions=3)
        staged = list(_STAGED)
    finally:
        _ASSEMBLE_FAILS.clear()
        _STAGED.clear()
    assert staged == ([6_000] if source == "npy" and memory > 10**5 else [])
    assert tree.report.shuffle_by == want
    if want == "device":
        assert tree.report.bytes_moved["shuffle"] == 0
        assert tree.report.shuffle_steps == [{"assemble": 0.0}]
    check_spanning_tree(tree, pts)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    np.testing.assert_allclose(tree.total_weight, ref.total_weight, rtol=1e-9)


def test_assembled_boxes_equal_host_boxes():
    """``assemble_boxes`` (every box on one device from the blocks' device
    pieces) gives ``steps.assemble_box``'s boxes bit for bit, blocks of
    runs apart (their ids interleaving) included."""
    from emst_dask.partitioned.exchange import assemble_boxes

    pts = GENERATORS["halos"](20_000, 3, 8)
    part = choose_partitioning(pts, 4)
    for blocks in ([steps.Block(a, pts[a:a + 5000]) for a in range(0, 20_000, 5000)],
                   _blocks_of_runs_apart(pts, 1000, ["a", "b", "c"])):
        dev = [split_block_xp(StableNumpy(), np.asarray, b, part, pts.dtype.str, 0)
               for b in blocks]
        host = [steps.split_block(b, part, pts.dtype.str, 0) for b in blocks]
        got = assemble_boxes(dev, part, StableNumpy())
        for k in range(4):
            want = steps.assemble_box(k, part, *[h[k] for h in host])
            np.testing.assert_array_equal(np.asarray(got[k].points), want.points)
            np.testing.assert_array_equal(np.asarray(got[k].gids), want.gids)
            np.testing.assert_array_equal(np.asarray(got[k].face).view(np.uint64),
                                          want.face.view(np.uint64))


@pytest.mark.parametrize("case", ["float32", "float64", "float32-in-float64", "scaled",
                                  "periodic", "lattice"])
def test_split_on_the_device_equals_the_host_split(case):
    """``split_block_xp`` (boxes assigned level by level, rows grouped by a
    stable sort, ids made on the device) gives ``steps.split_block``'s
    pieces: the same rows in the same order, the same bits."""
    rng = np.random.default_rng(3)
    pts = GENERATORS["halos"](20_000, 3, 1)
    frame, exponent = pts.dtype.str, 0
    if case == "float64":
        pts = pts.astype(np.float64)
        frame = pts.dtype.str
    elif case == "float32-in-float64":
        frame = np.dtype(np.float64).str
    elif case == "scaled":
        pts = (pts.astype(np.float64) * 1e-160)
        frame, exponent = pts.dtype.str, 520
    elif case == "lattice":
        pts = rng.integers(0, 5, (20_000, 3)).astype(np.float32)  # points on the splits
    part = choose_partitioning(np.ldexp(pts.astype(np.float64), exponent), 5)
    if case == "periodic":
        from dataclasses import replace

        part = replace(part, period=np.ones(3))
    block = steps.Block(1234, pts)
    want = steps.split_block(block, part, frame, exponent)
    got = split_block_xp(StableNumpy(), np.asarray, block, part, frame, exponent)
    assert sorted(got) == sorted(want) == list(range(5))
    assert sum(len(p.gids) for p in got.values()) == len(pts)
    for k in want:
        np.testing.assert_array_equal(got[k].gids, want[k].gids)
        assert got[k].points.dtype == want[k].points.dtype
        np.testing.assert_array_equal(got[k].points.view(np.uint8),
                                      want[k].points.view(np.uint8))


def test_boxes_assigned_level_by_level():
    from emst_dask.partitioned.boxes import assign_boxes

    pts = GENERATORS["uniform"](50_000, 2, 4)
    for P in (1, 2, 3, 7, 16):
        part = choose_partitioning(pts.astype(np.float64), P)
        np.testing.assert_array_equal(assign_boxes_xp(StableNumpy(), part, pts),
                                      assign_boxes(part, pts))


def test_a_rank_rerun_on_another_worker_refuses_at_once():
    """A rank's exchange task rerun on a worker other than its own (its
    worker lost after the exchange) refuses at once, naming both, rather
    than waiting for peers that will not answer."""
    from distributed import Client, LocalCluster

    from emst_dask.distributed import nccl

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        a, b = sorted(client.scheduler_info()["workers"])
        fut = client.submit(nccl.exchange_task, b"id", 30.0, None, 1, b, None,
                            workers=[a], pure=False)
        with pytest.raises(nccl.ExchangeFailed, match="belongs on"):
            fut.result(timeout=60)


def test_a_lost_exchange_reruns_the_job_through_dask(monkeypatch):
    """``ExchangeFailed`` out of a job (boxes of the exchange lost with a
    worker afterwards) runs the job once more with the shuffle through
    Dask; a second failure is raised."""
    import dask.config

    from emst_dask.distributed import partitioned as driver
    from emst_dask.distributed.nccl import EXCHANGE_KEY, ExchangeFailed

    calls = []

    def fake_run(*args, **kwargs):
        calls.append(dask.config.get(EXCHANGE_KEY, "auto"))
        if len(calls) == 1:
            raise ExchangeFailed("rank 1 lost")
        return "tree"

    monkeypatch.setattr(driver, "_run", fake_run)
    monkeypatch.setattr("emst_dask.distributed.client.workers_of", lambda client: ["w"])

    class FakeClient:
        def as_current(self):
            import contextlib

            return contextlib.nullcontext()

    assert driver.emst_partitioned(None, client=FakeClient(), partitions=2) == "tree"
    assert calls == ["auto", "dask"]

    calls.clear()

    def always(*args, **kwargs):
        calls.append(dask.config.get(EXCHANGE_KEY, "auto"))
        raise ExchangeFailed("again")

    monkeypatch.setattr(driver, "_run", always)
    monkeypatch.setattr(driver, "lost_error", lambda *a, **k: None)
    with pytest.raises(ExchangeFailed):
        driver.emst_partitioned(None, client=FakeClient(), partitions=2)
    assert calls == ["auto", "dask"]


def _blocks_of_runs_apart(pts, chunk, holders):
    """Blocks each joining one holder's chunks (``chunk`` rows each, chunk
    i held by ``holders[i % len(holders)]``), as a persisted array's
    chunks on the workers are read: runs apart, their ids interleaving."""
    cuts = list(range(0, len(pts), chunk)) + [len(pts)]
    blocks = []
    for h in range(len(holders)):
        mine = [i for i in range(len(cuts) - 1) if i % len(holders) == h]
        starts = [cuts[i] for i in mine]
        blocks.append(steps.array_blocks(starts, "x", pts.dtype,
                                         *[pts[cuts[i]:cuts[i + 1]] for i in mine]))
    return blocks


@pytest.mark.parametrize("P,ranks", [(2, 2), (3, 2), (4, 3)])
def test_blocks_of_runs_apart_give_the_same_boxes(P, ranks):
    """A block of chunks that are not neighbours (``segments``): its rows'
    global ids come from its runs, its pieces interleave with other
    blocks', and the boxes -- assembled on the host or exchanged -- are
    those of contiguous blocks (ids ascending, the same rows and bits); the
    device split (a stand-in) gives the host split's pieces."""
    pts = GENERATORS["halos"](20_000, 3, P)
    part = choose_partitioning(pts, P)
    blocks = _blocks_of_runs_apart(pts, 1_500, list(range(ranks)))
    assert all(b.segments is not None for b in blocks)
    for b in blocks:  # the global ids of the block's rows
        want = np.concatenate([np.arange(a, a + m) for a, m in b.segments])
        np.testing.assert_array_equal(b.global_ids(np, np.arange(len(b.points))), want)
        np.testing.assert_array_equal(b.points, pts[want])
    splits = [steps.split_block(b, part, pts.dtype.str, 0) for b in blocks]
    for b, s in zip(blocks, splits):
        dev = split_block_xp(StableNumpy(), np.asarray, b, part, pts.dtype.str, 0)
        for k in range(P):
            np.testing.assert_array_equal(dev[k].gids, s[k].gids)
            np.testing.assert_array_equal(dev[k].points, s[k].points)
    _, contiguous = split_cloud(pts, P, 4)
    plan, exchanged = run_exchange(splits, part, list(range(len(blocks))),
                                   [k % ranks for k in range(P)], ranks)
    for k in range(P):
        want = steps.assemble_box(k, part, *[s[k] for s in contiguous])
        for got in (steps.assemble_box(k, part, *[s[k] for s in splits]), exchanged[k]):
            np.testing.assert_array_equal(got.gids, want.gids)
            np.testing.assert_array_equal(got.points.view(np.uint8), want.points.view(np.uint8))
            np.testing.assert_array_equal(got.face.view(np.uint8), want.face.view(np.uint8))


def test_a_block_of_neighbouring_chunks_has_no_runs_and_names_bad_rows():
    """Neighbouring chunks join into a plain block; a NaN in a block of runs
    apart is named by its global row."""
    from emst_dask import InputError

    pts = GENERATORS["halos"](3_000, 3, 1)
    b = steps.array_blocks([0, 1000, 2000], "x", pts.dtype, pts[:1000], pts[1000:2000],
                           pts[2000:])
    assert b.segments is None and b.start == 0
    bad = pts.copy()
    bad[2345, 1] = np.nan
    with pytest.raises(InputError, match="2345"):
        steps.array_blocks([0, 2000], "x", pts.dtype, bad[:1000], bad[2000:])
