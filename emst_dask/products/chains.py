"""The chains of the single-linkage dendrogram: Borůvka rounds on the tree.

Kruskal's merges are sequential; the dendrogram (``dendrogram.py``) comes
instead from O(log n) rounds of whole-array operations, so that it runs
where the tree is (CuPy on the device; numpy for tests).  The edges come in
the strict order (weight, min(u, v), max(u, v)): an edge's *rank* is its
position.

Borůvka on the tree.  Each round, every component picks its lightest incident
edge (lowest rank) and the components joined by the picked edges merge.
Every item (a point, in round 1; an edge picked in the round before,
afterwards) now lies inside one component K whose pick is alpha:

* an item below alpha hangs on the *chain* (alpha, side of K): the part of
  the dendrogram's root path that leads from K's side up into alpha;
* an item above alpha (an edge inside K heavier than K's lightest way out)
  *follows* alpha: it joins the root path above alpha at its own rank, in
  the first chain up from alpha's whose top edge is heavier;
* the picks of the last round form the root chain.

``boruvka_chains`` runs the rounds; ``record_chains`` reads the same chains
from the picks the EMST's own Borůvka recorded (its iterations are these
rounds, in the engine's order).  Every index array is int32 while the 2m +
n keys and items fit (``index_dtype``), which halves the bytes each pass
moves on the device.
"""
from __future__ import annotations

from itertools import pairwise

import numpy as np

from ..arrays import jump_to_roots, stable_argsort
from ..errors import InputError


def index_dtype(m, n):
    """int32 while the chain keys (up to 2m) and the m + n items fit in it,
    else int64."""
    return np.int32 if max(2 * m + 1, m + n) < 2**31 else np.int64


def _components(xp, ptr):
    """Roots of the pick forest ``ptr`` (``_picks``'): (new id of every
    node's root, number of roots), in the dtype of ``ptr`` (which CuPy
    overwrites)."""
    if xp is not np:  # in-place passes, no (k,) temporaries per pass
        from ..kernels.cuda.dendrogram import pick_forest_components

        return pick_forest_components(ptr)
    ptr = jump_to_roots(xp, ptr)
    roots = ptr == xp.arange(ptr.shape[0], dtype=ptr.dtype)
    new_id = xp.cumsum(roots, dtype=ptr.dtype) - 1
    return new_id[ptr], int(new_id[-1]) + 1


def _lightest(xp, k, cs, ct, m):
    """(k,) of cs's dtype: every component's lightest edge among the edges
    (cs, ct) between components, its lowest position (the edges are in
    rank order); m for none."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import lightest_edges

        return lightest_edges(k, cs, ct, m)
    best = xp.full(k, m, cs.dtype)
    at = xp.arange(cs.shape[0], dtype=cs.dtype)
    xp.minimum.at(best, cs, at)
    xp.minimum.at(best, ct, at)
    return best


def _picks(xp, k, cs, ct, rank, best):
    """The round's picked edges: (``sel``, (k,) int8 side of every component
    on its pick (0 source, 1 target), (k,) the component at the other end of
    every pick (the smaller of a mutual pair, two components that picked one
    edge, points at itself instead: a forest), (k,) every pick's rank).
    ``best``: the picks' positions (``_lightest``); ``rank`` None: the ranks
    are the positions (the first round).  ``sel`` says which edges were
    picked: their positions (numpy), or the running count of picks, an
    inclusive scan over the edges (CuPy)."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import picks

        flag, side, ptr, alpha = picks(k, cs, ct, rank, best)
        return xp.cumsum(flag, dtype=cs.dtype), side, ptr, alpha
    c = xp.arange(k, dtype=best.dtype)
    u, v = cs[best], ct[best]
    side = (u != c).astype(xp.int8)
    other = xp.where(side == 1, u, v)
    mutual = (other > c) & (best[other] == best)
    ptr = xp.where(mutual, c, other)
    picked = xp.zeros(cs.shape[0], bool)
    picked[best] = True
    return xp.flatnonzero(picked), side, ptr, best if rank is None else rank[best]


def _take_picks(xp, sel, rank, cid, so_far):
    """The picks' ranks, in edge order, and their chain numbers: ``cid[r] =
    so_far + i`` for the i-th picked rank r (``rank`` None: the positions)."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import take_picks

        return take_picks(sel, rank, cid, so_far)
    prank = sel.astype(cid.dtype) if rank is None else rank[sel]
    cid[prank] = xp.arange(so_far, so_far + prank.shape[0], dtype=cid.dtype)
    return prank


def _split(xp, sel, rank, cs, ct, new_comp, p):
    """After the merge: (the picks' new components, the other edges' ranks
    and new end components, whether one of those joins a component to
    itself); p is the number of picks, ``rank`` None: the ranks are the
    positions."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import split_edges

        return split_edges(sel, p, rank, cs, ct, new_comp)
    item_comp = new_comp[cs[sel]]
    rest = xp.ones(cs.shape[0], bool)
    rest[sel] = False
    rest = xp.flatnonzero(rest)
    cs, ct = new_comp[cs[rest]], new_comp[ct[rest]]
    rank = rest.astype(cs.dtype) if rank is None else rank[rest]
    return item_comp, rank, cs, ct, bool((cs == ct).any())


def _chain_keys(xp, key, items, item_comp, pick, cid, side):
    """key[items] = the chain of each item's component's pick on its side
    (``pick``: (k,) every component's pick's rank); returns alpha,
    (len(items),) the pick of each item's component."""
    if xp is not np:
        from ..kernels.cuda.dendrogram import chain_keys

        return chain_keys(key, items, item_comp, pick, cid, side)
    alpha = pick[item_comp]
    key[items] = 2 * cid[alpha] + side[item_comp]  # int8 side: stays key's dtype
    return alpha


def boruvka_chains(xp, s, t, n, it=np.int64):
    """Chain keys of the dendrogram's nodes, from Borůvka rounds on the tree.

    Parameters
    ----------
    xp : numpy or cupy.
    s, t : (m,) integer arrays of ``xp``, the endpoints of the m = n - 1
        edges in the strict order (rank = position); read, not written
        (of dtype ``it`` they are not copied).
    n : int >= 1.
    it : the index dtype (``index_dtype``) of the arrays made.

    Returns
    -------
    key : (m,) ``it``, the chain of every edge: ``2 * cid[alpha] + side``,
        or ``2 * m`` for the root chain.
    points : (n,) ``it``, every point's slot in the dendrogram's (m, 2)
        children, ``2 * edge + side``: a point is alone on its chain (round
        1's), the child of its lightest edge, on its side (``point_children``
        makes the array).
    owner : (m,) ``it``, the edge whose chains keys ``2 * c`` and ``2 * c + 1``
        name (``c`` numbers the edges round by round, in the order they were
        picked, so the chains of later rounds sort after those of earlier ones).
    round_ends : list of int, ``c`` at the end of every round.

    Raises
    ------
    InputError
        The edges do not connect the n points (or close a cycle).
    """
    m = s.shape[0]
    key = xp.empty(m, it)
    followers = []  # per round: (edges above their component's pick, the pick)
    cid = xp.empty(m, it)
    round_ends = []
    # Round 1 needs no rank, item or item component arrays: the ranks are
    # the positions, the items the points, each its own component.
    rank = None
    cs, ct = s.astype(it, copy=False), t.astype(it, copy=False)
    k = n
    items = item_comp = None
    points = xp.zeros(n, it)  # n = 1: no edge, no round
    picked_so_far = 0
    while k > 1:
        if cs.shape[0] == 0:
            raise InputError(f"the edges do not connect the {n} points: they leave "
                             f"{k} components")
        best = _lightest(xp, k, cs, ct, m)
        lonely = int((best == m).sum())
        if lonely:
            raise InputError(f"the edges do not connect the {n} points: {lonely} of {k} "
                             "components have no edge out")
        sel, side, ptr, pick = _picks(xp, k, cs, ct, rank, best)
        del best
        prank = _take_picks(xp, sel, rank, cid, picked_so_far)
        picked_so_far += int(prank.shape[0])
        round_ends.append(picked_so_far)

        if items is None:
            # a point is alone on its chain: the child of its pick (its
            # lightest edge, rank = position), on its side
            points = pick
            points *= 2
            points += side
        else:
            # every item to its chain; those above their pick are put right later
            alpha = _chain_keys(xp, key, items, item_comp, pick, cid, side)
            above = xp.flatnonzero(items > alpha)  # an item's rank is itself
            followers.append((items[above], alpha[above]))
            del above, alpha
        del side, pick
        new_comp, k = _components(xp, ptr)

        items = prank  # the items are edges from now on
        item_comp, rank, cs, ct, cycle = _split(xp, sel, rank, cs, ct, new_comp,
                                                prank.shape[0])
        del sel, new_comp
        if cycle:
            raise InputError(f"the edges do not connect the {n} points: some close a cycle")
    if items is not None:
        key[items] = 2 * m  # the last picks: the root chain
    owner = xp.empty(m, it)  # the edge whose chain a key names (inverse of cid)
    owner[cid] = xp.arange(m, dtype=it)
    del cid
    for edge, target in reversed(followers):
        # An edge above its component's pick joins the root path above the
        # pick, at its own rank: the first chain up from the pick's whose
        # top edge is heavier (the picks of later rounds are placed already).
        _place(xp, key, owner, edge, target, m)
    return key, points, owner, round_ends


def point_children(xp, points, m, n, it):
    """(m, 2) ``it``: the dendrogram's children with the points in place
    and -1 in every other slot.

    Parameters
    ----------
    xp : numpy or cupy.
    points : the chain builders' ``points``: (n,) slots, or the recorded
        (m, 2) children (copied, not written).
    m, n : int, the numbers of edges and points.
    it : the index dtype.
    """
    if points.ndim == 2:
        return points.astype(it)  # a copy
    if xp is not np:  # one thread a point
        from ..kernels.cuda.dendrogram import point_tops

        return point_tops(points, m, n)
    children = xp.full((m, 2), -1, it)
    children.reshape(-1)[points] = xp.arange(n, dtype=it)
    return children


def record_chains(xp, hierarchy, n, it=np.int64):
    """``boruvka_chains`` from the picks the EMST's own Borůvka recorded.

    The engine's iterations are Borůvka rounds on the tree (each component
    picks its lightest edge, in the engine's strict order), so the rounds
    need not run again: each edge's recorded pick is its chain, and only
    the followers' walks remain.  The edges must be in the engine's order
    (``SpanningTree.hierarchy``).

    Parameters
    ----------
    xp : numpy or cupy.
    hierarchy : dict of arrays of ``xp`` (``SpanningTree.hierarchy``) for m
        = n - 1 edges.
    n : int >= 2.
    it : the index dtype.

    Returns
    -------
    key, points, owner, round_ends : as ``boruvka_chains``, but ``points``
        is the recorded ``point_children`` itself, (m, 2) int32 with every
        point in its slot already (read only: ``point_children`` copies it).
    """
    alpha = hierarchy["alpha"]
    rounds = hierarchy["round"]
    m = alpha.shape[0]
    # chains numbered round by round, by rank within a round (as the rounds do)
    owner = stable_argsort(xp, rounds).astype(it)
    cid = xp.empty(m, it)
    cid[owner] = xp.arange(m, dtype=it)
    round_ends = list(hierarchy["round_ends"])
    if xp is not np:  # one pass, one thread an item
        from ..kernels.cuda.dendrogram import record_keys

        key = record_keys(hierarchy, cid, m)
    else:
        root = alpha < 0
        key = xp.where(root, 2 * m, 2 * cid[xp.where(root, 0, alpha)] + hierarchy["side"])
        key = key.astype(it, copy=False)
    # followers (an edge above the pick of the component holding it), the
    # later iterations' first
    follow = xp.flatnonzero(_above_their_pick(xp, alpha))
    follow = follow[stable_argsort(xp, -rounds[follow].astype(xp.int32))]
    by_round = rounds[follow]
    cuts = xp.flatnonzero(by_round[1:] != by_round[:-1]) + 1
    bounds = [0] + cuts.tolist() + [int(follow.shape[0])]
    for lo, hi in pairwise(bounds):
        edge = follow[lo:hi].astype(it)
        _place(xp, key, owner, edge, alpha[edge].astype(it, copy=False), m)
    return key, hierarchy["point_children"], owner, round_ends


def _above_their_pick(xp, alpha):
    """(m,) bool: the edges heavier than the pick of the component holding
    them (rank > alpha >= 0), the followers."""
    if xp is not np:  # one pass
        from ..kernels.cuda.dendrogram import above_their_pick

        return above_their_pick(alpha)
    return (alpha >= 0) & (xp.arange(alpha.shape[0]) > alpha)


def _place(xp, key, owner, edge, target, m):
    """Followers of one round to their chains, in place in ``key``: the first
    chain up from their pick's whose top edge is heavier."""
    if xp is not np:  # one thread a follower walks the chains up
        from ..kernels.cuda.dendrogram import place_followers

        place_followers(key, owner, edge, target, m)
        return
    while edge.shape[0]:
        k_t = key[target]
        top = owner[xp.minimum(k_t >> 1, m - 1)]
        fits = (k_t == 2 * m) | (edge < top)
        key[edge[fits]] = k_t[fits]
        edge, target = edge[~fits], top[~fits]
