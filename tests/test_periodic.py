"""The exact tree in a periodic box (``emst(points, box_size=L)``).

Every tree is held to a brute-force minimum-image MST (``oracle`` with
``box_size``: per axis the shorter of ``hi - lo`` and ``(L - hi) + lo`` in
float64, Prim's algorithm,
the cycle property).  Clouds straddle the faces, sit at 0 and just below L,
repeat points and tie on lattices; bad boxes and points outside the box are
refused before any work, naming the row.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emst_dask.engine.core as core
from emst_dask import EmbeddedCluster, InputError, emst
from emst_dask.kernels import get_kernels
from cuda_emu import emulated_kernels
from oracle import assert_same_edges_and_weights, check_spanning_tree, edge_set, host, oracle

EMU = emulated_kernels()


@pytest.fixture(scope="module")
def client():
    with EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        yield emb.client


def straddling(n, d, L, rng, dtype=np.float64):
    """A cloud of small clusters centred on the faces and corners of the box,
    plus points at 0 and at the largest value below L."""
    L = np.broadcast_to(np.asarray(L, np.float64), (d,))
    centres = rng.integers(0, 2, (6, d)) * L  # corners: 0 or L
    pts = centres[rng.integers(0, 6, n)] + rng.normal(0, 0.03, (n, d)) * L
    pts = np.mod(pts, L)
    pts[0] = 0.0
    pts[1] = np.nextafter(L.astype(dtype), 0, dtype=dtype)
    pts = pts.astype(dtype)
    # float32 rounding may land on L: wrap again in the stored precision
    pts = np.where(pts >= L.astype(dtype), 0, pts).astype(dtype)
    return pts


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_straddling_clusters_against_brute_force(d, k, dtype):
    rng = np.random.default_rng(100 * d + k)
    L = np.array([1.0, 2.5, 0.75][:d])
    pts = straddling(300, d, L, rng, dtype)
    tree = emst(pts, box_size=L, min_samples=k, backend="cpu")
    check_spanning_tree(tree, pts, k, box_size=L)
    np.testing.assert_array_equal(tree.box_size, L)
    # the faces matter: the open-space tree of the same cloud is longer
    assert tree.total_weight < emst(pts, min_samples=k, backend="cpu").total_weight


@pytest.mark.skipif(EMU is None, reason="no C++ compiler for the CUDA emulator")
@pytest.mark.parametrize("d, k, dtype", [(2, 1, np.float64), (3, 5, np.float32)])
def test_cuda_kernels_emulated(monkeypatch, d, k, dtype):
    """The CUDA kernels' periodic module (compiled as C++, threads run in
    turn): the same weights as the CPU's, an exact minimum-image tree."""
    real = get_kernels
    monkeypatch.setattr(core, "get_kernels", lambda b: EMU if b == "cuda" else real(b))
    rng = np.random.default_rng(10 * d + k)
    L = np.array([1.0, 2.5, 0.75][:d])
    pts = straddling(300, d, L, rng, dtype)
    tree = emst(pts, box_size=L, min_samples=k, backend="cuda")
    check_spanning_tree(tree, pts, k, box_size=L)
    cpu = emst(pts, box_size=L, min_samples=k, backend="cpu")
    np.testing.assert_array_equal(np.sort(host(tree.weight)), np.sort(cpu.weight))
    if k > 1:
        np.testing.assert_array_equal(host(tree.core_distances), cpu.core_distances)


@pytest.mark.gpu
@pytest.mark.parametrize("d, k, dtype", [(2, 1, np.float64), (3, 1, np.float32),
                                         (3, 5, np.float32)])
def test_cuda_periodic_against_brute_force(d, k, dtype):
    rng = np.random.default_rng(20 * d + k)
    L = np.array([1.0, 2.5, 0.75][:d])
    pts = straddling(2000, d, L, rng, dtype)
    tree = emst(pts, box_size=L, min_samples=k, backend="cuda")
    check_spanning_tree(tree, pts, k, box_size=L)
    cpu = emst(pts, box_size=L, min_samples=k, backend="cpu")
    if k == 1:
        assert edge_set(tree.source, tree.target) == edge_set(cpu.source, cpu.target)
    np.testing.assert_array_equal(np.sort(host(tree.weight)), np.sort(cpu.weight))


def test_cube_length_as_one_number():
    rng = np.random.default_rng(1)
    pts = rng.random((200, 3)) * 10.0
    a = emst(pts, box_size=10.0, backend="cpu")
    b = emst(pts, box_size=[10.0, 10.0, 10.0], backend="cpu")
    check_spanning_tree(a, pts, box_size=10.0)
    assert a.total_weight == b.total_weight


def test_cloud_within_half_the_box_is_the_open_tree():
    """Where no pair is more than L/2 apart the minimum image is the plain
    distance: the trees are equal, weight for weight."""
    rng = np.random.default_rng(2)
    pts = 0.25 + 0.5 * rng.random((400, 2))
    a = emst(pts, box_size=1.0, backend="cpu", sort_by_weight=True)
    b = emst(pts, backend="cpu", sort_by_weight=True)
    np.testing.assert_array_equal(a.weight, b.weight)


def test_lattice_ties_and_duplicates_are_exact_and_order_free():
    """A full periodic lattice (every point has 2d neighbours at exactly 1)
    with each site repeated: the total is known exactly, every weight is 0
    or 1, and a row permutation gives the same weights."""
    g = np.stack(np.meshgrid(np.arange(6), np.arange(5), indexing="ij"), -1).reshape(-1, 2)
    pts = np.concatenate([g, g]).astype(np.float64)
    tree = emst(pts, box_size=[6.0, 5.0], backend="cpu", sort_by_weight=True)
    check_spanning_tree(tree, pts, box_size=[6.0, 5.0])
    assert tree.total_weight == len(g) - 1  # 30 zero-weight pairs, 29 unit edges
    perm = np.random.default_rng(3).permutation(len(pts))
    again = emst(pts[perm], box_size=[6.0, 5.0], backend="cpu", sort_by_weight=True)
    np.testing.assert_array_equal(again.weight, tree.weight)


def test_two_points_across_the_face():
    pts = np.array([[0.0, 0.5], [0.9, 0.5]])
    tree = emst(pts, box_size=1.0, backend="cpu")
    assert tree.weight[0] == pytest.approx(0.1)


def test_far_from_unit_magnitudes():
    """A box of 1e-150 and one of 1e150: the exact scaling takes the box in."""
    rng = np.random.default_rng(4)
    for scale in (1e-150, 1e150):
        pts = rng.random((150, 3)) * scale
        tree = emst(pts, box_size=scale, backend="cpu")
        check_spanning_tree(tree, pts, box_size=scale)


def test_float32_cloud_in_a_box_float32_cannot_hold():
    """L = 0.1 is not a float32: the tree is computed in float64 on the
    exact box, weights rounded to float32 at the end."""
    rng = np.random.default_rng(5)
    pts = (rng.random((200, 2)) * 0.1).astype(np.float32)
    pts = pts[(pts.astype(np.float64) < 0.1).all(axis=1)]
    tree = emst(pts, box_size=0.1, backend="cpu")
    assert tree.weight.dtype == np.float32
    check_spanning_tree(tree, pts, box_size=0.1)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 120), d=st.integers(1, 3), seed=st.integers(0, 2**31),
       grid=st.sampled_from([0, 4, 7]), k=st.sampled_from([1, 1, 3]),
       aniso=st.booleans())
def test_property_random_boxes(n, d, seed, grid, k, aniso):
    rng = np.random.default_rng(seed)
    L = (rng.integers(1, 5, d) if aniso else np.full(d, 3)).astype(np.float64)
    if grid:  # quantised coordinates: ties and duplicates
        pts = rng.integers(0, grid, (n, d)) * (L / grid)
    else:
        pts = rng.random((n, d)) * L
    k = min(k, n)
    tree = emst(pts, box_size=L, min_samples=k, backend="cpu")
    check_spanning_tree(tree, pts, k, box_size=L)


def test_periodic_tree_through_the_service(client, tmp_path):
    """A snapshot with a BoxSize attribute: box_size="snapshot" reads it on
    the worker; the edge store records the box."""
    from emst_dask import open_edges
    from emst_dask.io.snapshot import write_points

    rng = np.random.default_rng(6)
    pts = straddling(500, 3, 2.0, rng)
    write_points(tmp_path / "snap.zarr", pts, chunk_rows=128, attrs={"BoxSize": 2.0})
    store = emst(str(tmp_path / "snap.zarr"), client=client, box_size="snapshot",
                 out=str(tmp_path / "edges.zarr"))
    tree = open_edges(str(store)).load()
    np.testing.assert_array_equal(tree.box_size, [2.0, 2.0, 2.0])
    check_spanning_tree(tree, pts, box_size=2.0)


# ---------------------------------------------------------------------------
# bad input: refused before any work, naming the row or the parameter
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad_value, row", [(-1e-9, 7), (1.0, 3), (1.5, 11)])
def test_point_outside_the_box_names_its_row(bad_value, row):
    pts = np.random.default_rng(7).random((20, 2)) * 0.99
    pts[row, 1] = bad_value
    with pytest.raises(InputError, match=rf"first bad row is {row}\b"):
        emst(pts, box_size=1.0, backend="cpu")


@pytest.mark.parametrize("box, words", [
    (0.0, "> 0"), (-2.0, "> 0"), (np.inf, "finite"), (np.nan, "finite"),
    ([1.0, 1.0, 1.0], "3 lengths"), ("big", "snapshot"), ([[1.0, 1.0]], "per axis"),
])
def test_bad_box_is_refused(box, words):
    pts = np.random.default_rng(8).random((10, 2)) * 0.5
    with pytest.raises(InputError, match=words):
        emst(pts, box_size=box, backend="cpu")


def test_snapshot_box_without_the_attribute(client, tmp_path):
    from emst_dask.io.snapshot import write_points

    write_points(tmp_path / "snap.zarr", np.random.default_rng(9).random((50, 2)))
    with pytest.raises(InputError, match="BoxSize"):
        emst(str(tmp_path / "snap.zarr"), client=client, box_size="snapshot")


# ---------------------------------------------------------------------------
# partitions=: a face on the global boundary is shared with the opposite box
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("P", [2, 3, 5])
@pytest.mark.parametrize("k", [1, 4])
def test_partitioned_periodic_is_the_single_device_tree(P, k):
    """Clusters straddling the faces, split into P boxes (P = 2 leaves every
    box spanning two whole axes: they wrap onto themselves): the same edge
    set as one device, an exact minimum-image tree."""
    rng = np.random.default_rng(40 + P + k)
    L = np.array([1.0, 1.5, 0.8])
    pts = straddling(600, 3, L, rng)
    one = emst(pts, box_size=L, min_samples=k, backend="cpu")
    tree = emst(pts, box_size=L, min_samples=k, partitions=P, client=False, backend="cpu")
    assert edge_set(tree.source, tree.target) == edge_set(one.source, one.target)
    assert tree.total_weight == pytest.approx(one.total_weight, rel=1e-12)
    np.testing.assert_array_equal(tree.box_size, L)
    check_spanning_tree(tree, pts, k, box_size=L)


def test_partitioned_periodic_lattice_ties():
    """A periodic lattice (ties everywhere) in 4 boxes: total exactly known."""
    g = np.stack(np.meshgrid(np.arange(8), np.arange(6), indexing="ij"), -1).reshape(-1, 2)
    pts = g.astype(np.float64)
    tree = emst(pts, box_size=[8.0, 6.0], partitions=4, client=False, backend="cpu")
    assert tree.total_weight == len(pts) - 1
    check_spanning_tree(tree, pts, box_size=[8.0, 6.0])


def test_partitioned_periodic_on_the_cluster(client, tmp_path):
    from emst_dask import open_edges
    from emst_dask.io.snapshot import write_points

    rng = np.random.default_rng(41)
    pts = straddling(800, 2, 1.0, rng)
    write_points(tmp_path / "snap.zarr", pts, chunk_rows=200, attrs={"BoxSize": [1.0, 1.0]})
    store = emst(str(tmp_path / "snap.zarr"), client=client, box_size="snapshot",
                 partitions=3, out=str(tmp_path / "edges.zarr"))
    tree = open_edges(str(store)).load()
    np.testing.assert_array_equal(tree.box_size, [1.0, 1.0])
    one = emst(pts, box_size=1.0, backend="cpu")
    assert edge_set(tree.source, tree.target) == edge_set(one.source, one.target)
    check_spanning_tree(tree, pts, box_size=1.0)


def _float32_in_box(n, d, L, seed):
    pts = (np.random.default_rng(seed).random((n, d)) * L).astype(np.float32)
    return pts[(pts.astype(np.float64) < L).all(axis=1)]


@pytest.mark.parametrize("k", [1, 4])
def test_partitioned_float32_in_a_box_float32_cannot_hold(k):
    """A box of 67.77 (100 Mpc times h), which no float32 holds, around
    float32 positions: computed in float64 box by box, weights rounded to
    float32 at the end: the one-box tree bit for bit."""
    L = 67.77
    pts = _float32_in_box(1500, 3, L, 43)
    one = emst(pts, box_size=L, min_samples=k, backend="cpu")
    tree = emst(pts, box_size=L, min_samples=k, partitions=3, client=False, backend="cpu")
    assert_same_edges_and_weights(tree, one)
    check_spanning_tree(tree, pts, k, box_size=L)


def test_partitioned_far_from_unit_magnitudes():
    """A box of 1e-150: the partitioned algorithm scales it as one device does."""
    rng = np.random.default_rng(44)
    L = 1e-150
    pts = straddling(500, 3, 1.0, rng) * L
    pts = pts[(pts < L).all(axis=1)]
    one = emst(pts, box_size=L, backend="cpu")
    tree = emst(pts, box_size=L, partitions=3, client=False, backend="cpu")
    assert_same_edges_and_weights(tree, one)
    check_spanning_tree(tree, pts, box_size=L)


def test_partitioned_frame_on_the_cluster(client, tmp_path):
    """The same from a snapshot on the workers, written by the boxes'
    workers into one store."""
    from emst_dask import open_edges
    from emst_dask.io.snapshot import write_points

    L = 67.77
    pts = _float32_in_box(900, 3, L, 45)
    write_points(tmp_path / "snap.zarr", pts, chunk_rows=200, attrs={"BoxSize": [L] * 3})
    store = emst(str(tmp_path / "snap.zarr"), client=client, box_size="snapshot",
                 partitions=3, out=str(tmp_path / "edges.zarr"))
    tree = open_edges(str(store)).load()
    one = emst(pts, box_size=L, backend="cpu")
    assert_same_edges_and_weights(tree, one)
    check_spanning_tree(tree, pts, box_size=L)
    back = emst(str(tmp_path / "snap.zarr"), client=client, box_size="snapshot", partitions=3)
    assert_same_edges_and_weights(back, one)


def test_partitioned_point_outside_the_box_names_its_row():
    pts = np.random.default_rng(42).random((100, 2))
    pts[63, 0] = 1.25
    with pytest.raises(InputError, match=r"first bad row is 63\b"):
        emst(pts, box_size=1.0, partitions=2, client=False)


def test_oracle_minimum_image_is_independent():
    """The oracle itself: two points 0.1 apart across the face of a unit box."""
    o = oracle(np.array([[0.05], [0.95]]), box_size=[1.0])
    assert o["total"] == pytest.approx(0.1)
