"""A brute-force HDBSCAN* oracle, built from the dense mutual-reachability
matrix (never from a spanning tree), for the tests of
``emst_dask.products.hdbscan``.

The hierarchy is the one of the level sets of the mutual-reachability
graph: for each distinct level ``w``, the connected components (scipy) of
the graph of the pairs at distance ``<= w`` are unions of those of the
pairs ``< w``; a component made of several parts is a node of height ``w``
with those parts as children.  Condensation, stability, excess of mass /
leaf selection, labels, probabilities and GLOSH scores are then computed
on Python sets, the slow and obvious way.

Clusters are identified by their point sets (frozensets), so results can be
compared with any numbering.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import cdist


def mutual_reachability(X, k):
    """(n, n) mutual-reachability distances, core distance to the k-th
    nearest neighbour counting the point itself."""
    X = np.asarray(X, np.float64)
    d = cdist(X, X)
    core = np.sort(d, axis=1)[:, k - 1]
    return np.maximum(d, np.maximum(core[:, None], core[None, :]))


def level_hierarchy(mrd):
    """Nodes of the level-set hierarchy: {frozenset: (height, [child sets])}."""
    n = mrd.shape[0]
    iu, ju = np.triu_indices(n, 1)
    w = mrd[iu, ju]
    order = np.argsort(w, kind="stable")
    iu, ju, w = iu[order], ju[order], w[order]
    labels = np.arange(n)
    nodes = {}
    start = 0
    while start < len(w):
        stop = np.searchsorted(w, w[start], side="right")
        level = w[start]
        if np.any(labels[iu[start:stop]] != labels[ju[start:stop]]):
            _, new = connected_components(csr_matrix(mrd <= level), directed=False)
            for c in np.unique(new):
                members = np.flatnonzero(new == c)
                parts = np.unique(labels[members])
                if len(parts) >= 2:
                    kids = [frozenset(np.flatnonzero(labels == p).tolist()) for p in parts]
                    nodes[frozenset(members.tolist())] = (float(level), kids)
            labels = new
        start = stop
    return nodes


def condense(nodes, n, m):
    """Condense the hierarchy top-down.

    n >= 2.  Returns ``clusters``: {set: dict(parent=set or None, birth=float,
    death=float, points={point: lambda it falls out at})} with the root
    ``frozenset(range(n))``.
    """
    root = frozenset(range(n))
    clusters = {root: dict(parent=None, birth=0.0, death=0.0, points={})}
    todo = [(root, root)]
    while todo:
        node, c = todo.pop()
        h, kids = nodes[node]
        lam = 1.0 / h if h > 0 else math.inf
        big = [y for y in kids if len(y) >= m]
        for y in kids:
            if len(y) < m:
                for p in y:
                    clusters[c]["points"][p] = lam
        if len(big) >= 2:
            clusters[c]["death"] = lam
            for y in big:
                clusters[y] = dict(parent=c, birth=lam, death=0.0, points={})
                todo.append((y, y))
        elif len(big) == 1:
            todo.append((big[0], c))
        else:
            clusters[c]["death"] = lam
    return clusters


def _children(clusters):
    kids = {c: [] for c in clusters}
    for c, v in clusters.items():
        if v["parent"] is not None:
            kids[v["parent"]].append(c)
    return kids


def stability(clusters):
    """{set: stability}: sum over the cluster's points of (the lambda at
    which they leave it - its birth)."""
    out = {}
    for c, v in clusters.items():
        s = 0.0
        for p in c:
            lam = v["points"].get(p, v["death"])
            s += lam - v["birth"]
        out[c] = s
    return out


def select(clusters, method="eom", allow_single_cluster=False):
    """The selected cluster sets (no epsilon, no max_cluster_size)."""
    kids = _children(clusters)
    root = max(clusters, key=len)
    if method == "leaf":
        return [c for c in clusters if not kids[c] and c != root]
    stab = stability(clusters)

    def eom(c):
        if not kids[c]:
            return stab[c], [c]
        sub, chosen = 0.0, []
        for y in kids[c]:
            s, ch = eom(y)
            sub += s
            chosen += ch
        if c == root and not allow_single_cluster:
            return sub, chosen
        if sub > stab[c]:
            return sub, chosen
        return stab[c], [c]

    return eom(root)[1]


def flat(clusters, selected, n, allow_single_cluster=False):
    """labels (numbered by the selected sets in the order given; -1 noise),
    probabilities and GLOSH scores, each (n,)."""
    root = max(clusters, key=len)
    leave = {}  # point -> (cluster it falls out of, lambda)
    for c, v in clusters.items():
        for p, lam in v["points"].items():
            leave[p] = (c, lam)
    labels = np.full(n, -1, np.int64)
    prob = np.zeros(n)
    for i, c in enumerate(selected):
        death = clusters[c]["death"]
        for p in c:
            lam = leave[p][1]
            if c == root:
                if not (allow_single_cluster and len(selected) == 1 and lam >= death):
                    continue
            labels[p] = i
            prob[p] = 1.0 if death == 0 or math.isinf(lam) else min(lam, death) / death
    kids = _children(clusters)

    def top(c):
        return max([clusters[c]["death"]] + [top(y) for y in kids[c]])

    lmax = {c: top(c) for c in clusters}
    score = np.zeros(n)
    for p, (c, lam) in leave.items():
        mx = lmax[c]
        if mx == 0 or math.isinf(lam):
            score[p] = 0.0
        elif math.isinf(mx):
            score[p] = 1.0
        else:
            score[p] = (mx - lam) / mx
    return labels, prob, score


def canonical(condensed):
    """A condensed tree (``CONDENSED_DTYPE``) as cluster sets:
    {set: dict(parent=set or None, birth, death, points={point: lambda})}."""
    par = condensed["parent"].astype(np.int64)
    chi = condensed["child"].astype(np.int64)
    lam = condensed["lambda_val"]
    n = int(par.min())
    kids, pts = {}, {}
    for p, c, lv in zip(par.tolist(), chi.tolist(), lam.tolist()):
        kids.setdefault(p, [])
        if c >= n:
            kids[p].append((c, lv))
        else:
            pts.setdefault(p, {})[c] = lv
    sets = {}

    def members(c):
        s = set(pts.get(c, {}))
        for y, _ in kids.get(c, []):
            s |= members(y)
        sets[c] = frozenset(s)
        return s

    members(n)
    out = {}
    births = {n: 0.0}
    parents = {n: None}
    for p, ys in kids.items():
        for y, lv in ys:
            births[y] = lv
            parents[y] = sets[p]
    for c, s in sets.items():
        deaths = [lv for _, lv in kids.get(c, [])] + list(pts.get(c, {}).values())
        out[s] = dict(parent=parents[c], birth=births[c], death=max(deaths),
                      points=dict(pts.get(c, {})))
    return out


def same_partition(a, b):
    """Labels equal up to renumbering, noise (-1) the same points."""
    a, b = np.asarray(a), np.asarray(b)
    if not np.array_equal(a < 0, b < 0):
        return False
    pairs = set(zip(a[a >= 0].tolist(), b[b >= 0].tolist()))
    return len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})
