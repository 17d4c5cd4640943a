"""An independent brute-force oracle for (mutual-reachability) EMSTs.

Nothing here uses emst_dask: a dense float64 distance matrix and Prim's
O(n^2) algorithm in numpy.  ``check_spanning_tree`` holds a returned tree to
the tree contract (``docs/architecture.md``):

* n-1 edges, int64 ``source``/``target`` in range, ``weight`` of the input's
  float type, no self-loops;
* connected and acyclic (union-find);
* every weight equal to the distance recomputed from the input rows
  (mutual reachability: ``max(core_u, core_v, |x_u - x_v|)``);
* total weight equal to Prim's;
* the cycle property, edge by edge: no pair of points is closer than the
  heaviest edge on the tree path between them, which certifies the tree as a
  minimum spanning tree even when ties allow several;
* when the minimum spanning tree is unique with a margin larger than the
  rounding of the input precision, the edge set equals Prim's.

Distances are computed on the input values converted to float64, each pair
scaled by its largest coordinate difference (as ``hypot`` does), so that
coordinates of any magnitude (1e-300, 1e300) neither underflow nor overflow
when squared.
"""
from __future__ import annotations

import math

import numpy as np

#: relative tolerance of one recomputed weight, by input dtype
WEIGHT_RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12}
#: relative tolerance of the total weight, by input dtype
TOTAL_RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12}
#: relative margin that makes an MST "unique" for the edge-set comparison
UNIQUE_MARGIN = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def resolution(points) -> float:
    """Absolute tolerance of one weight: below this, squared distances in the
    input precision underflow (the engine squares distances; a cloud of
    extent E resolves distances down to about sqrt(tiny) * max(1, E))."""
    x = np.asarray(points).astype(np.float64)
    dt = float_dtype(points)
    if x.shape[0] == 0:
        return 0.0
    extent = float(np.max(x.max(axis=0) - x.min(axis=0)))
    return 16.0 * math.sqrt(float(np.finfo(dt).tiny)) * max(1.0, extent)


def host(a):
    """numpy view of a numpy or cupy array (None stays None)."""
    if a is None or isinstance(a, np.ndarray):
        return a
    return a.get()


def float_dtype(points) -> np.dtype:
    """The float type the engine computes in for this input."""
    dt = np.asarray(points).dtype
    if dt.kind == "f" and dt.itemsize == 4:
        return np.dtype(np.float32)
    if dt.kind == "f" and dt.itemsize < 4:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def distance_matrix(points, box_size=None) -> np.ndarray:
    """(n, n) float64 Euclidean distances, safe from over- and underflow.

    Like ``hypot``: each pair's coordinate differences are divided by their
    largest magnitude before squaring, so distances of any size (1e-300 next
    to 1e300) come out to a few ulps.  With ``box_size`` (d,) lengths of a
    periodic box: the minimum image per axis, ``min(hi - lo, (L - hi) + lo)``
    for the pair's larger and smaller coordinate: each term rounds once
    (``L - hi`` is exact where the way round is the shorter, hi >= L/2),
    where ``L - |dx|`` would add the rounding of ``dx`` (an ulp of L) to a
    short distance across the face.
    """
    x = np.asarray(points).astype(np.float64)
    n = x.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    L = None if box_size is None else np.broadcast_to(np.asarray(box_size, np.float64),
                                                       (x.shape[1],))

    def diff(k):
        hi = np.maximum(x[:, None, k], x[None, :, k])
        lo = np.minimum(x[:, None, k], x[None, :, k])
        t = hi - lo
        return t if L is None else np.minimum(t, (L[k] - hi) + lo)

    big = np.zeros((n, n))
    for k in range(x.shape[1]):  # one axis at a time: n^2 memory, not n^2 d
        np.maximum(big, diff(k), out=big)
    safe = np.where(big > 0, big, 1.0)
    s2 = np.zeros((n, n))
    for k in range(x.shape[1]):
        t = diff(k) / safe
        s2 += t * t
    return big * np.sqrt(s2)


def core_distances(dist: np.ndarray, min_samples: int) -> np.ndarray:
    """k-th smallest entry of every row, counting the row's own 0 (k = min_samples)."""
    n = dist.shape[0]
    if n == 0:
        return np.zeros(0)
    return np.partition(dist, min_samples - 1, axis=1)[:, min_samples - 1]


def mutual_reachability(dist: np.ndarray, core: np.ndarray) -> np.ndarray:
    m = np.maximum(dist, np.maximum(core[:, None], core[None, :]))
    np.fill_diagonal(m, 0.0)
    return m


def prim(w: np.ndarray):
    """Prim's algorithm on a dense symmetric weight matrix.

    Returns (total weight, (n-1, 2) int64 edges with u < v).
    """
    n = w.shape[0]
    if n <= 1:
        return 0.0, np.zeros((0, 2), np.int64)
    in_tree = np.zeros(n, bool)
    best = np.full(n, np.inf)
    parent = np.full(n, -1, np.int64)
    in_tree[0] = True
    best[:] = w[0]
    parent[:] = 0
    best[0] = np.inf
    edges = np.empty((n - 1, 2), np.int64)
    total = 0.0
    for k in range(n - 1):
        cand = np.where(in_tree, np.inf, best)
        v = int(np.argmin(cand))
        total += float(best[v])
        p = int(parent[v])
        edges[k] = (min(p, v), max(p, v))
        in_tree[v] = True
        closer = (~in_tree) & (w[v] < best)
        best[closer] = w[v][closer]
        parent[closer] = v
    return total, edges


def oracle(points, min_samples: int = 1, box_size=None):
    """Brute-force MST: dict(total, edges (n-1, 2) u < v, weights matrix, core);
    under the minimum image of a periodic box with ``box_size``."""
    dist = distance_matrix(points, box_size)
    core = None
    w = dist
    if min_samples > 1:
        core = core_distances(dist, min_samples)
        w = mutual_reachability(dist, core)
    total, edges = prim(w)
    return {"total": total, "edges": edges, "w": w, "dist": dist, "core": core}


def kruskal_tie_ordered(keys: np.ndarray):
    """Kruskal under the total order (key, min(u, v), max(u, v)).

    ``keys`` is an exact (n, n) matrix (integers, or values without rounding).
    Returns the unique MST under that order as a set of (u, v), u < v.
    """
    n = keys.shape[0]
    iu, ju = np.triu_indices(n, 1)
    order = np.lexsort((ju, iu, keys[iu, ju]))
    uf = _UnionFind(n)
    out = set()
    for e in order:
        u, v = int(iu[e]), int(ju[e])
        if uf.union(u, v):
            out.add((u, v))
            if len(out) == n - 1:
                break
    return out


class _UnionFind:
    def __init__(self, n):
        self.p = list(range(n))

    def find(self, a):
        p = self.p
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.p[max(ra, rb)] = min(ra, rb)
        return True


def tree_minimax(n: int, edges: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(n, n) matrix of the heaviest edge on the tree path between each pair."""
    adj = [[] for _ in range(n)]
    for (u, v), w in zip(edges.tolist(), weights.tolist()):
        adj[u].append((v, w))
        adj[v].append((u, w))
    order = [0]
    parent = {0: (-1, 0.0)}
    for a in order:  # BFS; the list grows while we walk it
        for b, w in adj[a]:
            if b not in parent:
                parent[b] = (a, w)
                order.append(b)
    pos = np.empty(n, np.int64)
    pos[np.asarray(order)] = np.arange(n)
    m = np.zeros((n, n))
    for k in range(1, n):
        p, w = parent[order[k]]
        row = np.maximum(m[pos[p], :k], w)
        m[k, :k] = row
        m[:k, k] = row
    # back from BFS positions to vertex ids
    return m[np.ix_(pos, pos)]


def edge_set(source, target):
    s = host(source).tolist()
    t = host(target).tolist()
    return {(min(a, b), max(a, b)) for a, b in zip(s, t)}


def check_spanning_tree(tree, points, min_samples: int = 1, *, expected=None,
                        certify: bool = True, box_size=None):
    """Assert that ``tree`` is an exact (mutual-reachability) MST of ``points``.

    ``expected`` may be a precomputed ``oracle(points, min_samples)``.
    Returns a dict: the oracle result plus ``unique`` (whether the edge set
    was compared with Prim's).
    """
    pts = np.asarray(points)
    n = pts.shape[0]
    dt = float_dtype(pts)
    src = host(tree.source)
    dst = host(tree.target)
    w = host(tree.weight)

    # shapes and types
    assert tree.n_points == n
    assert src.dtype == np.int64, src.dtype
    assert dst.dtype == np.int64, dst.dtype
    assert w.dtype == dt, (w.dtype, dt)
    m = max(n - 1, 0)
    assert src.shape == (m,) and dst.shape == (m,) and w.shape == (m,), \
        (src.shape, dst.shape, w.shape, n)
    arr = tree.to_numpy()
    assert arr.shape == (m, 3) and arr.dtype == np.float64
    if min_samples > 1:
        assert tree.core_distances is not None
        assert host(tree.core_distances).shape == (n,)
    else:
        assert tree.core_distances is None
    if n <= 1:
        assert tree.total_weight == 0.0
        return {"unique": True, "total": 0.0}

    # valid indices, no self-loops, connected and acyclic
    assert src.min() >= 0 and dst.min() >= 0, "negative vertex index"
    assert src.max() < n and dst.max() < n, "vertex index out of range"
    assert np.all(src != dst), f"self-loop at edge {int(np.argmax(src == dst))}"
    uf = _UnionFind(n)
    for k, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
        assert uf.union(a, b), f"edge {k} ({a}, {b}) closes a cycle"
    # n-1 edges without a cycle on n vertices: connected

    exp = expected if expected is not None else oracle(pts, min_samples, box_size)
    wt = exp["w"]
    rtol = WEIGHT_RTOL[dt]
    atol = resolution(pts)

    # every weight is the recomputed distance (or mutual-reachability distance)
    want = wt[src, dst]
    got = w.astype(np.float64)
    assert np.all(got >= 0), "negative weight"
    err = np.abs(got - want)
    bad = err > rtol * want + atol
    assert not bad.any(), (
        f"{int(bad.sum())} weight(s) differ from the recomputed distance, first "
        f"edge {int(np.argmax(bad))}: ({src[bad][0]}, {dst[bad][0]}) got "
        f"{got[bad][0]!r} want {want[bad][0]!r}")
    if exp["core"] is not None:
        core = host(tree.core_distances).astype(np.float64)
        cerr = np.abs(core - exp["core"])
        cbad = cerr > rtol * exp["core"] + atol
        assert not cbad.any(), (
            f"{int(cbad.sum())} core distance(s) wrong, first row "
            f"{int(np.argmax(cbad))}: got {core[cbad][0]!r} want {exp['core'][cbad][0]!r}")

    # total weight
    total_rtol = TOTAL_RTOL[dt]
    assert math.isclose(tree.total_weight, exp["total"], rel_tol=total_rtol,
                        abs_tol=n * atol), \
        f"total weight {tree.total_weight!r} != brute force {exp['total']!r}"

    out = dict(exp)
    mine = np.stack([np.minimum(src, dst), np.maximum(src, dst)], axis=1)
    if certify:
        # cycle property: every pair is at least as far apart as the heaviest
        # edge on its tree path (allowing the input precision's rounding)
        mm = tree_minimax(n, mine, want)
        viol = wt < mm * (1.0 - 4 * rtol) - atol
        assert not viol.any(), (
            f"{int(viol.sum()) // 2} pair(s) violate the cycle property, e.g. "
            f"{tuple(int(i) for i in np.argwhere(viol)[0])}")
        # unique with a margin: then the edge set is determined
        om = tree_minimax(n, exp["edges"], wt[exp["edges"][:, 0], exp["edges"][:, 1]])
        tree_mask = np.zeros((n, n), bool)
        e = exp["edges"]
        tree_mask[e[:, 0], e[:, 1]] = tree_mask[e[:, 1], e[:, 0]] = True
        np.fill_diagonal(tree_mask, True)
        margin = UNIQUE_MARGIN[dt]
        unique = bool(np.all(tree_mask | (wt > om * (1.0 + margin) + 2 * atol)))
        out["unique"] = unique
        if unique:
            got_set = {tuple(r) for r in mine.tolist()}
            want_set = {tuple(r) for r in exp["edges"].tolist()}
            assert got_set == want_set, (
                f"edge set differs from the unique MST: {len(got_set - want_set)} "
                f"edge(s) not in it, e.g. {sorted(got_set - want_set)[:3]}")
    return out


def squarable(pts):
    """Whether some power-of-two scaling puts every squared distance of two
    distinct points of ``pts`` in the normal range of float64 (float32
    clouds: float64 holds the square of any float32 difference) without
    overflow: distinct coordinates differ by at least the float spacing at
    the smallest nonzero magnitude, and no difference exceeds twice the
    largest magnitude (room kept for 8 squared terms).  True / False, or
    None within a factor 8 of the limit (either answer is right there).
    A single point has no distances: True."""
    if len(pts) < 2:
        return True
    a = np.abs(np.asarray(pts))
    nz = a[a > 0]
    if nz.size == 0 or np.asarray(pts).dtype == np.float32:
        return True
    fi = np.finfo(np.float64)
    span = math.log2(2.0 * float(nz.max()) / float(np.spacing(nz.min())))
    # need e with (spacing 2^e)^2 >= tiny and 8 (2 max 2^e)^2 <= max
    limit = (math.log2(float(fi.max) / 8) - math.log2(float(fi.tiny))) / 2
    return True if span <= limit - 3 else False if span > limit else None


def assert_same_edges_and_weights(a, b):
    """Two trees with the same edges, bit-identical weights of one dtype, and
    bit-identical core distances where either has them."""
    def triples(t):
        s, d = host(t.source), host(t.target)
        lo, hi = np.minimum(s, d), np.maximum(s, d)
        order = np.lexsort((hi, lo))
        return lo[order], hi[order], host(t.weight)[order]
    for x, y in zip(triples(a), triples(b)):
        np.testing.assert_array_equal(x, y)
    assert host(a.weight).dtype == host(b.weight).dtype
    if a.core_distances is not None or b.core_distances is not None:
        np.testing.assert_array_equal(host(a.core_distances), host(b.core_distances))
