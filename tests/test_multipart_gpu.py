"""The partitioned EMST on GPU workers (dask-cuda): phase 1 and 2 on the CUDA
backend, edge sets equal to the CPU engine's one-box tree (both backends
implement the same strict order on the same arithmetic)."""
import numpy as np
import pytest

from emst_dask import emst
from emst_dask.datasets import GENERATORS
from emst_dask.kernels import cuda_available

from oracle import edge_set

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_client():
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from emst_dask import EmbeddedCluster

    # the jobs run from a reserved pool, as on deployed workers
    with EmbeddedCluster(backend="cuda", device_pool=0.5) as emb:
        assert emb.kind == "LocalCUDACluster"
        yield emb.client


@pytest.mark.parametrize("name,dim,n", [("halos", 3, 300_000), ("uniform", 2, 200_000),
                                        ("normal", 3, 100_000)])
def test_every_P_equals_one_box(gpu_client, name, dim, n):
    pts = GENERATORS[name](n, dim, 0)
    ref = emst(pts, backend="cpu")
    for P in (1, 2, 4, 8):
        tree = emst(pts, client=gpu_client, partitions=P)
        assert {b["backend"] for b in tree.report.boxes} == {"cuda"}
        assert tree.n_edges == n - 1
        assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
        assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-9)


@pytest.mark.parametrize("k", [2, 5, 16])
def test_mutual_reachability(gpu_client, k):
    pts = GENERATORS["halos"](100_000, 3, 1)
    ref = emst(pts, min_samples=k, backend="cpu")
    tree = emst(pts, client=gpu_client, partitions=3, min_samples=k)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    np.testing.assert_allclose(tree.core_distances, ref.core_distances, rtol=1e-6)


def test_ties_and_duplicates(gpu_client):
    rng = np.random.default_rng(5)
    lattice = rng.integers(0, 30, (60_000, 3)).astype(np.float32)
    ref = emst(lattice, backend="cpu")
    tree = emst(lattice, client=gpu_client, partitions=4)
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)


def test_strict_edge_order_on_the_device():
    """The device order (float32: one packed (weight, min) radix sort and the
    ties' fix-up; float64: three stable radix sorts) equals the three-key
    lexsort, ties in weight and in the smaller endpoint included, the edges
    listed in no particular order."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp

    from emst_dask.engine.order import strict_edge_order

    rng = np.random.default_rng(3)
    for m in (1, 2, 1000, 300_000):
        child = np.arange(1, m + 1)
        parent = rng.integers(0, child)          # a random tree on m + 1 vertices
        flip = rng.random(m) < 0.5
        s, t = np.where(flip, child, parent), np.where(flip, parent, child)
        shuffle = rng.permutation(m)
        s, t = s[shuffle], t[shuffle]
        for dtype in (np.float32, np.float64):
            w2 = (rng.integers(0, 7, m) ** 2).astype(dtype)
            want = np.lexsort([np.maximum(s, t), np.minimum(s, t), w2.astype(np.float64)])
            got = strict_edge_order(cp, cp.asarray(s), cp.asarray(t), cp.asarray(w2)).get()
            np.testing.assert_array_equal(got, want)


def test_device_certificate_equals_host_certificate():
    """solve_box on the GPU (Borůvka certificate in CuPy) certifies the same
    edges and leaves the same super-vertices as the numpy run of that
    certificate on the CPU engine."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from emst_dask.partitioned.boxes import assign_boxes, choose_partitioning, face_distances
    from emst_dask.partitioned.phase1 import solve_box

    pts = GENERATORS["halos"](200_000, 3, 4)
    part = choose_partitioning(pts, 4)
    box = assign_boxes(part, pts)
    for k in range(4):
        idx = np.flatnonzero(box == k)
        face = face_distances(part, k, pts[idx])
        dev = solve_box(pts[idx], idx, face, backend="cuda")
        host = solve_box(pts[idx], idx, face, backend="cpu", certificate="boruvka")
        assert edge_set(dev.certified.u, dev.certified.v) == \
            edge_set(host.certified.u, host.certified.v)
        np.testing.assert_array_equal(dev.super_labels, host.super_labels)
        assert dev.n_super == host.n_super and set(dev.seconds) >= {"order", "certificate"}


def test_certified_edges_stay_on_the_device():
    """A GPU box's certified edges are device arrays (global ids gathered
    there); ``certified_edges`` brings them to the host unchanged."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from emst_dask.arrays import is_device_array
    from emst_dask.partitioned import steps
    from emst_dask.partitioned.boxes import assign_boxes, choose_partitioning, face_distances
    from emst_dask.partitioned.phase1 import solve_box

    pts = GENERATORS["halos"](100_000, 3, 2)
    part = choose_partitioning(pts, 3)
    box = assign_boxes(part, pts)
    for k in range(3):
        idx = np.flatnonzero(box == k)
        dev = solve_box(pts[idx], idx, face_distances(part, k, pts[idx]), backend="cuda")
        assert is_device_array(dev.certified.u) and is_device_array(dev.certified.v)
        assert is_device_array(dev.label_rows)
        host = steps.certified_edges((dev, 0.0, "cuda"))
        assert isinstance(host.u, np.ndarray) and isinstance(host.w2, np.ndarray)
        np.testing.assert_array_equal(host.u, dev.certified.u.get())
        assert set(host.u.tolist()) <= set(idx.tolist())
        np.testing.assert_array_equal(dev.super_labels_of(np.arange(0, len(idx), 5)),
                                      dev.super_labels[::5])


@pytest.mark.parametrize("src,dst", [(np.float32, np.float32), (np.float64, np.float64),
                                     (np.float64, np.float32)])
@pytest.mark.parametrize("exponent", [0, 5, -5, -100, 100, -250, 250])
def test_device_conversions_have_the_host_bits(src, dst, exponent):
    """On the GPU, ``rescale_exact`` and ``weights_exact`` give the host's
    bits: subnormal inputs and results go to the host, the rest is exact
    there."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp

    from emst_dask.engine.scaling import rescale_exact, weights_exact, weights_from_squares
    from test_partition_device import _values

    rng = np.random.default_rng(abs(exponent))
    for name, w2 in _values(src, rng).items():
        with np.errstate(over="ignore"):
            want = np.ldexp(w2.astype(np.float64), exponent).astype(dst)
            got = cp.asnumpy(rescale_exact(cp, cp.asarray(w2), exponent, dst))
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)
            want = weights_from_squares(w2, exponent, dst)
            got = cp.asnumpy(weights_exact(cp, cp.asarray(w2), exponent, dst))
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)


@pytest.mark.parametrize("dtype,scale", [(np.float32, 1.0), (np.float32, 1e-37),
                                         (np.float64, 1e-160), (np.float64, 1e150)])
def test_edge_store_written_from_the_device(gpu_client, tmp_path, dtype, scale):
    """GPU workers write their certified edges from the device: the store
    holds the one-box tree's edges, and every weight has the bits of the
    same job's tree gathered through the host (subnormal-scaled clouds
    included)."""
    from emst_dask.io.edge_store import open_edges

    pts = (GENERATORS["halos"](60_000, 3, 6).astype(np.float64) * scale).astype(dtype)
    pts = np.unique(pts, axis=0)
    ref = emst(pts, backend="cpu")
    out = tmp_path / "e.zarr"
    emst(pts, client=gpu_client, partitions=3, out=str(out), chunk_rows=997)
    stored = open_edges(str(out)).load()
    gathered = emst(pts, client=gpu_client, partitions=3)
    assert edge_set(stored.source, stored.target) == edge_set(ref.source, ref.target)
    assert np.isclose(stored.total_weight, ref.total_weight, rtol=1e-6)

    def by_edge(t):
        lo, hi = np.minimum(t.source, t.target), np.maximum(t.source, t.target)
        o = np.lexsort([hi, lo])
        return lo[o], hi[o], np.asarray(t.weight)[o]

    for a, b in zip(by_edge(stored), by_edge(gathered)):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("dtype,scale,box_size", [(np.float32, 1.0, None), (np.float32, 1e-37, None),
                                                  (np.float64, 1.0, None),
                                                  (np.float32, 1.0, 1.0)])
def test_snapshot_boxes_made_on_one_gpu(gpu_client, tmp_path, dtype, scale, box_size):
    """A snapshot on one GPU worker, several boxes: read whole onto the
    GPU, split and assembled there (``shuffle_by`` "device"), written to a
    store from there: the one-box tree's edges, and every weight the bits
    of the same job shuffled on the host; subnormal-scaled (a frame with
    an exponent) and periodic clouds included."""
    import dask.config
    import zarr

    from emst_dask.distributed.nccl import EXCHANGE_KEY
    from emst_dask.io.edge_store import open_edges

    if len(gpu_client.scheduler_info(n_workers=-1)["workers"]) != 1:
        pytest.skip("one GPU worker")
    pts = (GENERATORS["halos"](200_000, 3, 9).astype(np.float64) * scale).astype(dtype)
    if box_size is not None:
        pts %= dtype(box_size)
    snap = str(tmp_path / "snap.zarr")
    g = zarr.open_group(snap, mode="w")
    g.create_array("points", shape=pts.shape, chunks=(30_000, 3), dtype=pts.dtype)[...] = pts
    ref = emst(pts, backend="cpu", box_size=box_size)
    trees = {}
    for mode in ("auto", "dask"):
        out = str(tmp_path / f"e-{mode}.zarr")
        with dask.config.set({EXCHANGE_KEY: mode}):
            emst(snap, client=gpu_client, partitions=3, out=out, box_size=box_size)
        stored = open_edges(out)
        assert stored.attrs["partitioned"]["shuffle_by"] == ("device" if mode == "auto"
                                                            else "dask")
        trees[mode] = stored.load()
        assert edge_set(trees[mode].source, trees[mode].target) == \
            edge_set(ref.source, ref.target)
    np.testing.assert_array_equal(_weights_by_edge(trees["auto"]).view(np.uint8),
                                  _weights_by_edge(trees["dask"]).view(np.uint8))


def _weights_by_edge(t):
    """A tree's weights in the order of its edges (min end, max end)."""
    lo, hi = np.minimum(t.source, t.target), np.maximum(t.source, t.target)
    return np.asarray(t.weight)[np.lexsort([hi, lo])]


@pytest.mark.parametrize("box_size", [None, 1.0])
def test_nccl_shuffle_equals_dask_shuffle(gpu_client, box_size):
    """Two GPU workers: the shuffle through NCCL (boxes assembled on the
    devices, phase 2's shells taken from there) gives the one-box tree's
    edges and the same bits of every weight as the shuffle through Dask."""
    import dask.config

    from emst_dask.distributed.nccl import EXCHANGE_KEY, TIMEOUT_KEY

    if len(gpu_client.scheduler_info(n_workers=-1)["workers"]) < 2:
        pytest.skip("needs two GPU workers")
    pts = GENERATORS["halos"](300_000, 3, 7)
    ref = emst(pts, backend="cpu", box_size=box_size)
    trees = {}
    for mode in ("nccl", "dask"):
        with dask.config.set({EXCHANGE_KEY: mode, TIMEOUT_KEY: 30}):
            trees[mode] = emst(pts, client=gpu_client, partitions=4, box_size=box_size)
        assert trees[mode].report.shuffle_by == mode
        assert edge_set(trees[mode].source, trees[mode].target) == \
            edge_set(ref.source, ref.target)
    assert trees["nccl"].report.bytes_moved["shuffle"] > 0
    np.testing.assert_array_equal(_weights_by_edge(trees["nccl"]).view(np.uint8),
                                  _weights_by_edge(trees["dask"]).view(np.uint8))
    assert np.isclose(trees["nccl"].total_weight, ref.total_weight, rtol=1e-6)


def test_persisted_device_blocks_stay_on_the_device(gpu_client):
    """A dask array persisted on the GPU workers as CuPy blocks: its blocks
    are checked, summarised and split by box on their devices (never copied
    to the host and back), the tree is the one-box tree, and a NaN in a
    device block is refused naming its row."""
    import cupy
    import dask.array as da

    from emst_dask import InputError
    from emst_dask.partitioned import steps

    pts = GENERATORS["halos"](300_000, 3, 11)
    blk = steps.array_block(cupy.asarray(pts[:1000].astype(np.float64)), 5, "x", np.float32)
    assert isinstance(blk.points, cupy.ndarray) and blk.points.dtype == np.float32
    np.testing.assert_array_equal(blk.points.get(), pts[:1000].astype(np.float64)
                                  .astype(np.float32))
    info = steps.summarize(blk, 1000, 100, 0)
    host = steps.summarize(steps.Block(5, blk.points.get()), 1000, 100, 0)
    for key in ("lo", "hi", "sample"):
        np.testing.assert_array_equal(info[key], host[key])
    assert info["smallest"] == host["smallest"] and info["m"] == host["m"]

    ref = emst(pts, backend="cpu")
    x = gpu_client.persist(da.from_array(pts, chunks=(40_000, 3)).map_blocks(cupy.asarray))
    tree = emst(x, client=gpu_client, partitions=4)
    one = len(gpu_client.scheduler_info(n_workers=-1)["workers"]) == 1
    assert tree.report.shuffle_by == ("device" if one else "nccl")
    assert edge_set(tree.source, tree.target) == edge_set(ref.source, ref.target)
    assert np.isclose(tree.total_weight, ref.total_weight, rtol=1e-6)
    bad = pts.copy()
    bad[123_456, 1] = np.nan
    xb = gpu_client.persist(da.from_array(bad, chunks=(40_000, 3)).map_blocks(cupy.asarray))
    with pytest.raises(InputError, match="first bad row is 123456"):
        emst(xb, client=gpu_client, partitions=4)


# --------------------------------------------------------------------------
# phase 2's reductions on the device
# --------------------------------------------------------------------------
def _big_graph(rng, m, n_super, dtype, levels):
    """m candidate edges between random global ids below 2**32 (and beyond
    with ``offset``), super-vertices drawn from n_super labels, few weight
    levels (ties everywhere), 5% exact copies, some self-loops."""
    from emst_dask.partitioned.edges import Edges

    labels = rng.choice(1 << 31, n_super, replace=False).astype(np.int64)
    su, sv = labels[rng.integers(0, n_super, (2, m))]
    u, v = rng.integers(0, 1 << 31, (2, m))
    w2 = (rng.integers(0, levels, m) ** 2).astype(dtype)
    dup = np.flatnonzero(rng.random(m) < 0.05)
    src = rng.integers(0, m, dup.shape[0])
    for a in (u, v, w2, su, sv):
        a[dup] = a[src]
    return Edges(u, v, w2, su, sv)


def _sorted_records(e):
    """The records as columns sorted by (u, v, weight bits, su, sv)."""
    get = [np.asarray(a.get() if hasattr(a, "get") else a) for a in (e.u, e.v, e.w2, e.su, e.sv)]
    bits = get[2].view(np.uint32 if get[2].dtype == np.float32 else np.uint64)
    cols = [get[0], get[1], bits, get[3], get[4]]
    o = np.lexsort(cols[::-1])
    return [c[o] for c in cols]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n_super,levels", [(1, 2, 1), (1000, 300, 3), (2_000_000, 900_000, 50),
                                              (4_000_000, 400_000, 4000)])
def test_device_msf_equals_host_kruskal(dtype, m, n_super, levels):
    """``minimum_spanning_forest_xp`` in CuPy gives host Kruskal's forest,
    record for record and bit for bit, at phase 2's sizes (millions of
    candidates, ties, copies, self-loops, super-vertices left apart)."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    import cupy as cp

    from emst_dask.partitioned.edges import minimum_spanning_forest, minimum_spanning_forest_xp

    e = _big_graph(np.random.default_rng(m), m, n_super, dtype, levels)
    want = minimum_spanning_forest(e)
    got = minimum_spanning_forest_xp(cp, e.to(cp.asarray))
    assert isinstance(got.u, cp.ndarray)
    for a, b in zip(_sorted_records(got), _sorted_records(want)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("min_samples", [1, 5])
def test_device_connect_box_equals_host(min_samples):
    """``connect_box`` on the GPU (the engine's edges kept on the device,
    candidates reduced there) gives the CPU path's forest, bit for bit,
    as host Edges; ``spanning_forest_on`` on the GPU equals host Kruskal."""
    if not cuda_available():
        pytest.skip("needs a CUDA GPU")
    from emst_dask.partitioned import steps
    from emst_dask.partitioned.edges import Edges

    rng = np.random.default_rng(min_samples)
    pts = GENERATORS["halos"](200_000, 3, 8).astype(np.float32)
    m = len(pts)
    gids = np.sort(rng.choice(1 << 33, m, replace=False)).astype(np.int64)  # beyond 32 bits
    cell = np.floor((pts - pts.min(0)) / np.ptp(pts, 0) * 40).astype(np.int64)
    _, group = np.unique(cell, axis=0, return_inverse=True)
    group = group.reshape(-1)
    first = np.full(group.max() + 1, -1, np.int64)
    first[group[::-1]] = gids[::-1]                       # each cell's first id
    labels = first[group]
    core = steps._core2(pts, min_samples, "cpu") if min_samples > 1 else None
    a, b = rng.integers(0, m, (2, 5000))
    unc = Edges(gids[a], gids[b], rng.integers(0, 3, 5000).astype(np.float32),
                labels[a], labels[b])
    host = steps.connect_box(pts, gids, labels, unc, "cpu", min_samples, core)
    dev = steps.connect_box(pts, gids, labels, unc, "cuda", min_samples, core)
    assert isinstance(dev.u, np.ndarray) and len(host) > 1000
    for x, y in zip(_sorted_records(dev), _sorted_records(host)):
        np.testing.assert_array_equal(x, y)
    parts = [host, _big_graph(rng, 100_000, 50_000, np.float32, 20)]
    want = steps.spanning_forest("<f4", *parts)
    got = steps.spanning_forest_on("cuda", "<f4", *parts)
    assert isinstance(got.u, np.ndarray)
    for x, y in zip(_sorted_records(got), _sorted_records(want)):
        np.testing.assert_array_equal(x, y)
