"""Friends-of-friends halo catalogues (``emst_dask.fof``).

Oracles: the connected components of the radius graph (scipy's k-d tree
``query_pairs``, periodic with ``boxsize=``, pairs at distance <= b), a
brute-force periodic minimum spanning tree (Prim's algorithm on the dense
minimum-image distance matrix) standing in for ``emst(box_size=)``, and a
direct catalogue: per group, its members unwrapped by a breadth-first walk
of the radius graph from its smallest row, averaged in a Python loop.
"""
from __future__ import annotations

import inspect
from collections import deque

import numpy as np
import pytest
import zarr
from click.testing import CliRunner

import emst_dask
from emst_dask import InputError, SpanningTree, emst
from emst_dask.products._images import image_shifts
from emst_dask.products.catalogue import open_fof
from emst_dask.products.unwrap import image_shifts_any, image_shifts_xp

spatial = pytest.importorskip("scipy.spatial")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
sparse = pytest.importorskip("scipy.sparse")


# --------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------
def min_image(delta, box):
    return delta - box * np.floor(delta / box + 0.5)


def periodic_tree(points, box):
    """A minimum spanning tree under the minimum-image distance, by Prim's
    algorithm on the dense distance matrix (duplicates at distance 0 are
    edges like any other), as a SpanningTree carrying its box."""
    x = np.asarray(points, np.float64)
    n, d = x.shape
    box = np.broadcast_to(np.asarray(box, np.float64), (d,))
    delta = min_image(x[:, None, :] - x[None, :, :], box)
    D = np.sqrt((delta ** 2).sum(-1))
    inside = np.zeros(n, bool)
    best = np.full(n, np.inf)
    parent = np.full(n, -1)
    best[0] = 0.0
    s, t, w = [], [], []
    for _ in range(n):
        i = int(np.argmin(np.where(inside, np.inf, best)))
        inside[i] = True
        if parent[i] >= 0:
            s.append(parent[i]), t.append(i), w.append(D[parent[i], i])
        closer = ~inside & (D[i] < best)
        best[closer], parent[closer] = D[i][closer], i
    tree = SpanningTree(np.array(s, np.int64), np.array(t, np.int64),
                        np.array(w, points.dtype), None, n, d)
    tree.box_size = np.array(box)
    return tree


def radius_pairs(points, b, box=None):
    kd = spatial.cKDTree(np.asarray(points, np.float64),
                         boxsize=None if box is None else np.broadcast_to(box, points.shape[1]))
    return kd.query_pairs(b, output_type="ndarray").reshape(-1, 2)


def components(points, b, box=None):
    n = len(points)
    p = radius_pairs(points, b, box)
    g = sparse.coo_matrix((np.ones(len(p)), (p[:, 0], p[:, 1])), shape=(n, n))
    return csgraph.connected_components(g, directed=False)[1], p


def same_partition(a, b):
    a, b = np.asarray(a), np.asarray(b)
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def direct_catalogue(points, b, min_members, box=None, velocities=None):
    """Labels and catalogue by brute force: groups from the radius graph,
    numbered by decreasing size then smallest row; each group unwrapped by a
    walk from its smallest row, one minimum-image step per pair.  A group
    that percolates (reaches its own image around the box) has no centre of
    mass: NaN."""
    x = np.asarray(points, np.float64)
    n, d = x.shape
    comp, pairs = components(points, b, box)
    adj = [[] for _ in range(n)]
    for i, j in pairs.tolist():
        adj[i].append(j)
        adj[j].append(i)
    groups = {}
    for i in range(n):
        groups.setdefault(comp[i], []).append(i)
    big = [g for g in groups.values() if len(g) >= min_members]
    big.sort(key=lambda g: (-len(g), g[0]))
    labels = np.full(n, -1, np.int64)
    length, position, velocity = [], [], []
    for k, g in enumerate(big):
        labels[g] = k
        unw = {g[0]: x[g[0]]}
        queue = deque([g[0]])
        percolates = False
        while queue:
            i = queue.popleft()
            for j in adj[i]:
                step = x[j] - x[i]
                there = unw[i] + (step if box is None else min_image(step, box))
                if j not in unw:
                    unw[j] = there
                    queue.append(j)
                elif box is not None:  # a loop around the box: it meets its own image
                    percolates |= bool(np.abs(unw[j] - there).max() > 0.5 * np.min(box))
        c = np.mean([unw[i] for i in g], axis=0)
        if box is not None:
            c = np.full(d, np.nan) if percolates else np.mod(c, box)
        length.append(len(g))
        position.append(c)
        if velocities is not None:
            velocity.append(np.mean(np.asarray(velocities, np.float64)[g], axis=0))
    return (labels, np.array(length, np.int64), np.array(position).reshape(-1, d),
            None if velocities is None else np.array(velocity).reshape(-1, d))


def assert_catalogue(cat, ref, box=None, k=None):
    got = cat.groups(0 if k is None else k)
    labels, length, position, velocity = ref
    np.testing.assert_array_equal(got["labels"], labels)
    np.testing.assert_array_equal(got["length"], length)
    assert got["position"].dtype == np.float64
    if velocity is not None:
        np.testing.assert_allclose(got["velocity"], velocity, rtol=1e-12, atol=1e-12)
    if box is None:
        np.testing.assert_allclose(got["position"], position, rtol=1e-12, atol=1e-12)
    else:  # equal on the circle: 0 and a hair below L are one place
        ok = np.isfinite(position).all(axis=1)  # not percolating
        diff = min_image(got["position"][ok] - position[ok], np.asarray(box))
        assert np.abs(diff).max(initial=0) < 1e-12 * np.max(box)
        assert np.all((got["position"] >= 0) & (got["position"] < box))
        return int(ok.sum())
    return len(length)


def wrapped_blobs(n, d, box, seed, spread=0.03, centres=None):
    """Clumps of points, several centred on faces and corners, wrapped into
    [0, L): groups that straddle the faces."""
    rng = np.random.default_rng(seed)
    box = np.broadcast_to(np.asarray(box, np.float64), (d,))
    if centres is None:
        centres = np.concatenate([np.zeros((1, d)), rng.random((5, d))]) * box
        centres[1, 0] = 0.999 * box[0]
    m = len(centres)
    parts = [c + rng.normal(0, spread * box.min() * (1 + i % 3), (n // (2 * m), d))
             for i, c in enumerate(centres)]
    parts.append(rng.random((n - m * (n // (2 * m)), d)) * box)
    pts = np.mod(np.concatenate(parts), box)
    pts[pts >= box] = 0.0
    return pts


# --------------------------------------------------------------------------
# labels
# --------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3])
def test_labels_are_the_radius_graph_components(d):
    pts = wrapped_blobs(900, d, 1.0, seed=d)
    bs = [0.004, 0.012, 0.03] if d > 1 else [0.0004, 0.001]
    cat = emst_dask.fof(pts, bs, relative=False, min_members=1, backend="cpu")
    assert cat.labels.shape == (len(bs), len(pts)) and cat.labels.dtype == np.int64
    for k, b in enumerate(bs):
        comp, _ = components(pts, b)
        assert same_partition(cat.labels[k], comp)
        assert_catalogue(cat, direct_catalogue(pts, b, 1), k=k)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_periodic_labels_and_catalogue(d):
    box = np.array([1.0, 0.8, 1.3][:d])
    pts = wrapped_blobs(700, d, box, seed=10 + d)
    tree = periodic_tree(pts, box)
    bs = [0.005, 0.02] if d > 1 else [0.0005, 0.002]
    cat = emst_dask.fof(pts, bs, relative=False, box_size=box, min_members=3, tree=tree)
    engine = emst_dask.fof(pts, bs, relative=False, box_size=box, min_members=3,
                           backend="cpu")  # the periodic tree of emst(box_size=)
    np.testing.assert_array_equal(cat.box_size, box)
    straddling = 0
    for k, b in enumerate(bs):
        ref = direct_catalogue(pts, b, 3, box)
        assert_catalogue(cat, ref, box, k=k)
        assert_catalogue(engine, ref, box, k=k)
        comp, _ = components(pts, b, box)
        assert same_partition(cat.labels[k][cat.labels[k] >= 0], comp[cat.labels[k] >= 0])
        for g in range(cat.n_groups[k]):
            member = pts[cat.labels[k] == g]
            straddling += bool((np.ptp(member, axis=0) > box / 2).any())
    assert straddling >= 1  # groups that cross a face were there to unwrap


def test_periodic_groups_are_not_the_open_box_groups():
    """The periodic groups join across the faces; the open box's do not."""
    box = 1.0
    pts = wrapped_blobs(600, 2, box, seed=3)
    b = 0.02
    open_ = emst_dask.fof(pts, b, relative=False, min_members=1, backend="cpu")
    periodic = emst_dask.fof(pts, b, relative=False, min_members=1, box_size=box,
                             tree=periodic_tree(pts, box))
    assert periodic.n_groups < open_.n_groups
    assert same_partition(periodic.labels, components(pts, b, box)[0])


def test_lattice_ties_and_duplicates():
    """Points at distance exactly b are linked, duplicates are one place."""
    g = np.stack(np.meshgrid(np.arange(8.0), np.arange(6.0), indexing="ij"), -1).reshape(-1, 2)
    keep = np.random.default_rng(0).random(len(g)) < 0.55
    pts = np.concatenate([g[keep], g[keep][::3], g[keep][::5]])  # duplicates
    compared = 0
    for b in (1.0, np.sqrt(2.0), 0.999):
        for box in (None, np.array([8.0, 6.0])):
            tree = periodic_tree(pts, box) if box is not None else None
            ref = direct_catalogue(pts, b, 2, box)
            cat = emst_dask.fof(pts, b, relative=False, min_members=2, box_size=box,
                                tree=tree, backend="cpu")
            compared += assert_catalogue(cat, ref, box)
            engine = emst_dask.fof(pts.astype(np.float32), b, relative=False, min_members=2,
                                   box_size=box, backend="cpu")
            assert_catalogue(engine, ref, box)
    assert compared > 10
    one = emst_dask.fof(pts, 0.999, relative=False, min_members=2, backend="cpu")
    # below the lattice spacing only the duplicates are groups
    assert set(one.length.tolist()) <= {2, 3}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_points_at_zero_and_just_below_the_box(dtype):
    """A group of points at 0 and at the largest coordinate below L is one
    group across the face, centred on it; L itself is outside."""
    L = dtype(2.0)
    top = np.nextafter(L, dtype(0))
    rng = np.random.default_rng(0)
    y = (0.5 + 0.3 * rng.random((30, 1))).astype(dtype)
    pts = np.concatenate([np.hstack([np.zeros((10, 1), dtype), y[:10]]),
                          np.hstack([np.full((10, 1), top, dtype), y[10:20]]),
                          np.hstack([np.full((10, 1), dtype(1.0)), y[20:]])])
    box = np.array([2.0, 1.0])
    cat = emst_dask.fof(pts, 0.2, relative=False, box_size=box, min_members=5,
                        tree=periodic_tree(pts, box))
    assert_catalogue(cat, direct_catalogue(pts, 0.2, 5, box), box)
    assert cat.length.tolist() == [20, 10]
    assert abs(min_image(cat.position[0, 0], 2.0)) < 1e-6
    bad = pts.copy()
    bad[4, 0] = L
    with pytest.raises(InputError, match=r"row is 4: \[2.0, .*coordinate 0 is not in"):
        emst_dask.fof(bad, 0.2, relative=False, box_size=box, min_members=5)


def test_no_points_and_one_point(tmp_path):
    empty = emst_dask.fof(np.zeros((0, 3)), [0.1, 0.2], relative=False, min_members=1,
                          out=str(tmp_path / "e.zarr"))
    got = empty.load()
    assert got.labels.shape == (2, 0) and got.n_groups == [0, 0]
    assert got.position[1].shape == (0, 3)
    one = emst_dask.fof(np.array([[0.5, 0.5]]), 0.1, relative=False, min_members=1,
                        box_size=1.0, tree=periodic_tree(np.array([[0.5, 0.5]]), 1.0))
    assert one.labels.tolist() == [0] and one.position.tolist() == [[0.5, 0.5]]


def test_sizes_order_and_min_members():
    rng = np.random.default_rng(5)
    pts = np.concatenate([rng.normal(c, 0.01, (m, 2)) for c, m in
                          ((0.2, 40), (0.5, 40), (0.8, 25), (1.1, 3))])
    pts = pts[rng.permutation(len(pts))]
    cat = emst_dask.fof(pts, 0.05, relative=False, min_members=20, backend="cpu")
    assert cat.length.tolist() == [40, 40, 25]
    assert (cat.labels == -1).sum() == 3
    first = [int(np.flatnonzero(cat.labels == g)[0]) for g in range(2)]
    assert first[0] < first[1]  # equal sizes: by smallest row
    everyone = emst_dask.fof(pts, 0.05, relative=False, min_members=1, backend="cpu")
    assert everyone.length.tolist() == [40, 40, 25, 3] and (everyone.labels >= 0).all()


def test_row_permutation_changes_nothing_but_the_names():
    box = 1.0
    pts = wrapped_blobs(600, 3, box, seed=7)
    vel = np.random.default_rng(1).normal(size=pts.shape)
    perm = np.random.default_rng(2).permutation(len(pts))
    b = 0.6
    a = emst_dask.fof(pts, b, box_size=box, min_members=2, velocities=vel,
                      tree=periodic_tree(pts, box))
    p = emst_dask.fof(pts[perm], b, box_size=box, min_members=2, velocities=vel[perm],
                      tree=periodic_tree(pts[perm], box))
    assert same_partition(a.labels[perm], p.labels)
    np.testing.assert_array_equal((a.labels[perm] < 0), (p.labels < 0))
    np.testing.assert_array_equal(a.length, p.length)
    # group g of one is the group of the same members in the other
    match = {int(x): int(y) for x, y in zip(a.labels[perm], p.labels) if x >= 0}
    idx = np.array([match[g] for g in range(a.n_groups)])
    np.testing.assert_allclose(min_image(a.position - p.position[idx], box), 0, atol=1e-12)
    np.testing.assert_allclose(a.velocity, p.velocity[idx], rtol=1e-12, atol=1e-12)


def test_relative_length_is_mean_separation():
    box = np.array([2.0, 1.0, 0.5])
    pts = wrapped_blobs(500, 3, box, seed=4)
    cat = emst_dask.fof(pts, [0.2, 0.3], box_size=box, min_members=2,
                        tree=periodic_tree(pts, box))
    np.testing.assert_allclose(cat.linking_length,
                               np.array([0.2, 0.3]) * (box.prod() / 500) ** (1 / 3))
    ref = direct_catalogue(pts, cat.linking_length[1], 2, box)
    assert_catalogue(cat, ref, box, k=1)
    np.testing.assert_array_equal(cat.linking_length_given, [0.2, 0.3])
    no_box = emst_dask.fof(pts, 0.2, min_members=2, backend="cpu")
    extent = pts.max(0) - pts.min(0)
    assert no_box.linking_length[0] == pytest.approx(0.2 * (extent.prod() / 500) ** (1 / 3))


# --------------------------------------------------------------------------
# unwrapping across the faces
# --------------------------------------------------------------------------
def filament(box=1.0, n=150, seed=0):
    """A chain of points 0.7 L long along x, crossing the face x = 0, plus
    a few points elsewhere: one group wider than half the box (a member's
    nearest image to the group's first member is not where the group puts
    it)."""
    rng = np.random.default_rng(seed)
    x = np.linspace(-0.35, 0.35, n) * box
    pts = np.stack([x, 0.5 + 0.002 * rng.standard_normal(n), np.full(n, 0.3)], 1)
    pts = np.concatenate([pts, rng.random((40, 3)) * [1, 0.3, 1] + [0, 0.6, 0]])
    pts = np.mod(pts[rng.permutation(len(pts))], box)
    return pts


def test_a_group_wider_than_half_the_box():
    box = 1.0
    pts = filament(box)
    tree = periodic_tree(pts, box)
    b = 0.01
    cat = emst_dask.fof(pts, b, relative=False, box_size=box, min_members=10, tree=tree)
    ref = direct_catalogue(pts, b, 10, box)
    assert_catalogue(cat, ref, box)
    assert_catalogue(emst_dask.fof(pts, b, relative=False, box_size=box, min_members=10,
                                   backend="cpu"), ref, box)
    assert cat.length[0] == 150
    assert abs(min_image(cat.position[0, 0] - 0.0, box)) < 1e-9  # centred on the face
    # the device algorithm (run with numpy) walks this group and agrees exactly
    raw = tree.fof(b)
    host = image_shifts(tree.source, tree.target, tree.weight, pts, np.full(3, box), b)
    dev = image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, np.full(3, box), b,
                          raw)
    np.testing.assert_array_equal(host, dev)
    np.testing.assert_array_equal(host, image_shifts_any(tree.source, tree.target,
                                                         tree.weight, pts, np.full(3, box),
                                                         b, raw))
    assert np.abs(host).max() == 1
    # ... where the nearest image of each member to the group's first
    # member (what the device tries first, and nbodykit's way) is wrong
    members = np.flatnonzero(raw == raw[np.argmax(np.bincount(raw))])
    nearest = -np.floor((pts[members] - pts[members.min()]) / box + 0.5)
    assert (nearest != host[members]).any()


@pytest.mark.parametrize("seed", range(4))
def test_device_shifts_equal_host_shifts(seed):
    box = np.array([1.0, 1.0, 0.7])
    pts = wrapped_blobs(500, 3, box, seed=20 + seed)
    if seed % 2:
        pts = np.concatenate([pts, filament(1.0, 80, seed)[:80] * [1, 1, 0.7]])
    tree = periodic_tree(pts, box)
    for b in (0.01, 0.05, 0.2):
        raw = tree.fof(b)
        host = image_shifts(tree.source, tree.target, tree.weight, pts, box, b)
        dev = image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, box, b, raw)
        np.testing.assert_array_equal(host, dev)
        np.testing.assert_array_equal(
            host, image_shifts_any(tree.source, tree.target, tree.weight, pts, box, b, raw))
        # only the groups of at least m points: the same shifts there
        keep = (np.bincount(raw) >= 5)[raw]
        some = image_shifts_any(tree.source, tree.target, tree.weight, pts, box, b, raw, 5)
        np.testing.assert_array_equal(some[keep], host[keep])
        part = image_shifts_xp(np, tree.source, tree.target, tree.weight, pts, box, b, raw,
                               keep)
        np.testing.assert_array_equal(part[keep], host[keep])
        assert not part[~keep].any()


# --------------------------------------------------------------------------
# velocities, stores, the service, the command line
# --------------------------------------------------------------------------
def test_velocities_and_store_round_trip(tmp_path):
    box = 1.0
    pts = wrapped_blobs(500, 3, box, seed=8)
    vel = np.random.default_rng(3).normal(size=pts.shape)
    tree = periodic_tree(pts, box)
    cat = emst_dask.fof(pts, [0.5, 0.8], box_size=box, min_members=4, velocities=vel,
                        tree=tree)
    for k in range(2):
        assert_catalogue(cat, direct_catalogue(pts, cat.linking_length[k], 4, box, vel),
                         box, k=k)
    store = emst_dask.fof(pts, [0.5, 0.8], box_size=box, min_members=4, velocities=vel,
                          tree=tree, out=str(tmp_path / "halos.zarr"))
    assert store.n_groups == cat.n_groups
    back = open_fof(store.path).load()
    np.testing.assert_array_equal(back.labels, cat.labels)
    for k in range(2):
        for name in ("length", "position", "velocity"):
            np.testing.assert_array_equal(back.groups(k)[name], cat.groups(k)[name])
    assert back.box_size.tolist() == [1.0, 1.0, 1.0] and back.min_members == 4
    with pytest.raises(emst_dask.OutputError):
        cat.to_zarr(store.path)
    again = cat.to_zarr(store.path, overwrite=True)
    assert again.path == store.path
    with pytest.raises(InputError, match="Zarr group"):
        cat.to_zarr(str(tmp_path / "labels.npy"))


def write_snapshot(path, pos, vel=None, box=None, chunk_rows=200):
    g = zarr.open_group(str(path), mode="w")
    g.create_array("Position", shape=pos.shape, chunks=(chunk_rows, pos.shape[1]),
                   dtype=pos.dtype)[...] = pos
    if vel is not None:
        g.create_array("Velocity", shape=vel.shape, chunks=(chunk_rows, vel.shape[1]),
                       dtype=vel.dtype)[...] = vel
    if box is not None:
        g.attrs["BoxSize"] = box
    return str(path)


@pytest.fixture(scope="module")
def client():
    with emst_dask.EmbeddedCluster(n_workers=1, backend="cpu") as emb:
        yield emb.client


def test_service_from_a_snapshot(client, tmp_path):
    pts = wrapped_blobs(1200, 3, 1.0, seed=9).astype(np.float32)
    vel = np.random.default_rng(4).normal(size=pts.shape).astype(np.float32)
    snap = write_snapshot(tmp_path / "snap.zarr", pts, vel, box=1.0)
    here = emst_dask.fof(pts, [0.15, 0.2], min_members=5, velocities=vel, backend="cpu")
    store = emst_dask.fof(snap, [0.15, 0.2], min_members=5, velocities="Velocity",
                          client=client, out=str(tmp_path / "halos.zarr"), box_size="open")
    assert store.attrs["velocities"] == "Velocity" and store.attrs["input"].endswith("Position")
    got = store.load()
    np.testing.assert_array_equal(got.labels, here.labels)
    for k in range(2):
        for name in ("length", "position", "velocity"):
            np.testing.assert_array_equal(got.groups(k)[name], here.groups(k)[name])
    # without out=: the catalogue comes back; client=False runs the same phases here
    back = emst_dask.fof(snap, 0.2, min_members=5, client=client, box_size="open")
    inline = emst_dask.fof(snap, 0.2, min_members=5, client=False, box_size="open")
    # a snapshot with a box, and no box_size: refused, naming the box and the options
    for where in (client, False):
        with pytest.raises(InputError, match=r"periodic box \(BoxSize = 1.0\).*--box-size"):
            emst_dask.fof(snap, 0.2, min_members=5, client=where)
    np.testing.assert_array_equal(back.labels, here.labels[1])
    np.testing.assert_array_equal(inline.position, here.position[1])
    assert back.velocity is None
    # worker-side refusals come back as InputError, and nothing is written
    with pytest.raises(InputError, match="row"):
        emst_dask.fof(snap, 0.2, box_size=0.5, client=client, out=str(tmp_path / "no.zarr"))
    assert not (tmp_path / "no.zarr").exists()


needs_periodic_engine = pytest.mark.skipif(
    "box_size" not in inspect.signature(
        __import__("emst_dask.engine", fromlist=["spanning_tree"]).spanning_tree).parameters,
    reason="the periodic tree (engine box_size=) is not on this branch yet")


@needs_periodic_engine
def test_service_periodic_with_the_snapshot_box(client, tmp_path):
    pts = wrapped_blobs(1000, 3, 2.0, seed=11)
    vel = np.random.default_rng(6).normal(size=pts.shape)
    snap = write_snapshot(tmp_path / "snap.zarr", pts, vel, box=[2.0, 2.0, 2.0])
    store = emst_dask.fof(snap, 0.25, box_size="snapshot", min_members=5,
                          velocities="Velocity", client=client, out=str(tmp_path / "h.zarr"))
    got = store.load()
    ref = direct_catalogue(pts, got.linking_length[0], 5, np.full(3, 2.0), vel)
    assert_catalogue(got, ref, np.full(3, 2.0))
    here = emst_dask.fof(pts, 0.25, box_size=2.0, min_members=5, velocities=vel,
                         backend="cpu")
    np.testing.assert_array_equal(here.labels, got.labels)


def test_command_line(tmp_path):
    from emst_dask.cli import main

    pts = wrapped_blobs(800, 3, 1.0, seed=12)
    vel = np.random.default_rng(7).normal(size=pts.shape)
    snap = write_snapshot(tmp_path / "snap.zarr", pts, vel, box=1.0)
    out = tmp_path / "halos.zarr"
    run = CliRunner().invoke(main, ["fof", snap, "-b", "0.15", "-b", "0.2", "--min-members",
                                    "5", "--velocities", "Velocity", "--out", str(out),
                                    "--in-process", "--box-size", "open"])
    assert run.exit_code == 0, run.output
    here = emst_dask.fof(pts, [0.15, 0.2], min_members=5, backend="cpu")
    assert f"groups={here.n_groups[1]} " in run.output
    assert f"largest={int(here.length[1][0])} " in run.output
    got = open_fof(str(out)).load()
    np.testing.assert_array_equal(got.labels, here.labels)
    assert got.velocity is not None
    again = CliRunner().invoke(main, ["fof", snap, "--out", str(out), "--in-process",
                                      "--box-size", "open"])
    assert again.exit_code == 2 and "Error:" in again.output and "exists" in again.output
    bad = CliRunner().invoke(main, ["fof", snap, "-b", "-1", "--out", str(tmp_path / "x.zarr"),
                                    "--in-process"])
    assert bad.exit_code == 2 and "linking_length" in bad.output
    for i, box in enumerate(["snapshot", "1,1,1"]):
        periodic = CliRunner().invoke(main, ["fof", snap, "-b", "0.2", "-m", "5", "--box-size",
                                             box, "--out", str(tmp_path / f"p{i}.zarr"),
                                             "--in-process"])
        assert periodic.exit_code == 0, periodic.output
        p = open_fof(str(tmp_path / f"p{i}.zarr")).load()
        assert p.box_size.tolist() == [1.0, 1.0, 1.0]
        assert_catalogue(p, direct_catalogue(pts, p.linking_length[0], 5, np.ones(3)),
                         np.ones(3))
    tree = tmp_path / "tree.zarr"
    emst(pts, backend="cpu", out=str(tree))
    reuse = CliRunner().invoke(main, ["fof", snap, "-b", "0.2", "--min-members", "5",
                                      "--tree", str(tree), "--out", str(tmp_path / "r.zarr"),
                                      "--box-size", "open"])
    assert reuse.exit_code == 0, reuse.output
    np.testing.assert_array_equal(open_fof(str(tmp_path / "r.zarr")).load().labels,
                                  here.labels[1])


# --------------------------------------------------------------------------
# bad input: a clear error before any work
# --------------------------------------------------------------------------
@pytest.fixture
def no_work(monkeypatch):
    import emst_dask.engine.core

    def boom(*a, **k):
        raise AssertionError("computed before refusing")

    monkeypatch.setattr(emst_dask.engine.core, "boruvka", boom)


@pytest.mark.parametrize("kw, match", [
    (dict(linking_length=0.0), "linking_length"),
    (dict(linking_length=-0.2), "linking_length"),
    (dict(linking_length=float("nan")), "linking_length"),
    (dict(linking_length=[0.1, float("inf")]), "linking_length"),
    (dict(linking_length="0.2"), "linking_length"),
    (dict(linking_length=[]), "at least one"),
    (dict(min_members=0), "min_members"),
    (dict(min_members=2.5), "min_members"),
    (dict(box_size=0.0), "box_size"),
    (dict(box_size=[1.0, 1.0]), "2 lengths"),
    (dict(box_size=[1.0, -1.0, 1.0]), "box_size"),
    (dict(box_size=0.9), "first bad row is 7"),
    (dict(box_size=1.0, linking_length=0.5, relative=False), "half"),
    (dict(velocities=np.zeros((10, 3))), "velocities must have shape"),
    (dict(velocities=np.full((50, 3), np.nan)), "velocities row 0"),
    (dict(velocities="Velocity"), "not a Zarr group"),
    (dict(box_size="snapshot"), "BoxSize"),
    (dict(relative="yes"), "relative"),
])
def test_bad_input_refused_before_any_work(no_work, kw, match):
    pts = np.random.default_rng(0).random((50, 3)) * 0.85
    pts[7] = [0.95, 0.1, 0.1]
    with pytest.raises(InputError, match=match):
        emst_dask.fof(pts, **{"min_members": 5, **kw})


def test_flat_cloud_has_no_volume(no_work):
    pts = np.random.default_rng(0).random((50, 3))
    pts[:, 2] = 0.25
    with pytest.raises(InputError, match="coordinate 2 equal to 0.25"):
        emst_dask.fof(pts)
    with pytest.raises(InputError, match="no points"):
        emst_dask.fof(np.zeros((0, 3)))


def test_a_tree_of_other_points_or_another_box_is_refused(no_work):
    pts = np.random.default_rng(0).random((60, 2))
    tree = periodic_tree(pts, 1.0)
    with pytest.raises(InputError, match="no box"):
        emst_dask.fof(pts, 0.2, tree=tree)
    with pytest.raises(InputError, match="box_size"):
        emst_dask.fof(pts, 0.2, box_size=2.0, tree=tree)
    with pytest.raises(InputError, match="60 points"):
        emst_dask.fof(pts[:50], 0.2, box_size=1.0, tree=tree)


@pytest.mark.gpu
def test_device_catalogue_equals_host():
    import cupy

    box = 1.0
    pts = wrapped_blobs(3000, 3, box, seed=13).astype(np.float32)
    vel = np.random.default_rng(0).normal(size=pts.shape)
    tree = periodic_tree(pts[:1500], box)
    host = emst_dask.fof(pts[:1500], [0.2, 0.4], box_size=box, min_members=3,
                         velocities=vel[:1500], tree=tree)
    dt = SpanningTree(cupy.asarray(tree.source), cupy.asarray(tree.target),
                      cupy.asarray(tree.weight), None, tree.n_points, tree.n_dims,
                      backend="cuda")
    dt.box_size = tree.box_size
    dev = emst_dask.fof(cupy.asarray(pts[:1500]), [0.2, 0.4], box_size=box, min_members=3,
                        velocities=cupy.asarray(vel[:1500]), tree=dt).to_host()
    np.testing.assert_array_equal(dev.labels, host.labels)
    for k in range(2):
        np.testing.assert_array_equal(dev.length[k], host.length[k])
        np.testing.assert_allclose(min_image(dev.position[k] - host.position[k], box), 0,
                                   atol=1e-12)
        np.testing.assert_allclose(dev.velocity[k], host.velocity[k], rtol=1e-12)
    for b in (None, box):  # the engine's trees, open and periodic, on both backends
        got = emst_dask.fof(cupy.asarray(pts), 0.2, box_size=b, min_members=3,
                            velocities=cupy.asarray(vel), backend="cuda").to_host()
        ref = emst_dask.fof(pts, 0.2, box_size=b, min_members=3, velocities=vel,
                            backend="cpu")
        np.testing.assert_array_equal(got.labels, ref.labels)
        np.testing.assert_allclose(min_image(got.position - ref.position, box), 0, atol=1e-12)


def test_a_tree_with_one_row_moved_is_refused():
    """Every edge's weight is checked, not a sample: one row moved onto
    another point changes the weights of its own edges only, and the
    catalogue would drop it from its group."""
    rng = np.random.default_rng(10)
    p = rng.random((5000, 3))
    tree = emst(p, backend="cpu", box_size=1.0)
    for row in (17, 4001):
        q = p.copy()
        q[row] = p[(row + 1) % len(p)]
        with pytest.raises(InputError, match=r"is not the tree of.*\(\d+ of 4999 edges"):
            emst_dask.fof(q, 0.2, relative=False, box_size=1.0, min_members=2, tree=tree)
        with pytest.raises(InputError, match="is not the tree of"):
            tree.statistics(q)
    cat = emst_dask.fof(p, 0.2, relative=False, box_size=1.0, min_members=2, tree=tree)
    assert cat.labels.shape == (5000,)


@pytest.mark.gpu
def test_device_tree_of_other_points_is_refused():
    """The tree checks on a CUDA tree (cupy arrays) with cupy or numpy
    points: the right points pass, other points and another box do not
    (here, not beside the statistics' tests, which need MiSTree)."""
    import cupy

    rng = np.random.default_rng(8)
    p, q = rng.random((3000, 3)), rng.random((3000, 3))
    tree = emst(cupy.asarray(p), backend="cuda", box_size=1.0)
    assert isinstance(tree.source, cupy.ndarray)
    for pts in (p, cupy.asarray(p)):
        st = tree.statistics(pts)
        assert float(st.to_numpy().branch_shape.max()) <= 1.0
    for pts in (q, cupy.asarray(q)):
        with pytest.raises(InputError, match="is not the tree of"):
            tree.statistics(pts)
    with pytest.raises(InputError, match="this call asks for box_size"):
        tree.statistics(p, box_size=2.0)
    with pytest.raises(InputError, match="is not the tree of"):
        emst_dask.fof(cupy.asarray(q), 0.05, relative=False, box_size=1.0, min_members=2,
                      tree=tree)


def test_open_fof_reads_a_store_object_and_refuses_cut_labels(tmp_path):
    """A catalogue written to a zarr store object opens from it; the labels
    `emst-dask cut` writes (kind "fof", no catalogue) are refused clearly
    instead of failing on a missing attribute."""
    pts = np.random.default_rng(9).random((300, 3))
    ms = zarr.storage.MemoryStore()
    emst_dask.fof(pts, 0.3, out=ms, client=False)
    got = open_fof(ms).load()
    np.testing.assert_array_equal(np.asarray(got.labels),
                                  np.asarray(emst_dask.fof(pts, 0.3, client=False).labels))
    np.save(tmp_path / "p.npy", pts)
    emst_dask.emst(pts, out=tmp_path / "e.zarr")
    from emst_dask.cli import main

    res = CliRunner().invoke(main, ["cut", str(tmp_path / "e.zarr"), "-b", "0.05",
                                    "--out", str(tmp_path / "cut.zarr")])
    assert res.exit_code == 0, res.output
    with pytest.raises(InputError, match="labels without a catalogue"):
        open_fof(tmp_path / "cut.zarr")
