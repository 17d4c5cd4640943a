"""The CUDA kernel set's Borůvka phases: the iteration state, labels,
bounds, the searches, the components' minima, the merge and the edges (one
launch or a few a phase; ``kernel_set`` binds them with the construction)."""
from __future__ import annotations

import numpy as np

from .records import _NO_KEY, CL_WORD, INT_MAX, JUMP_STEPS, KEY_INIT, CudaBoruvkaState, _i32


class BoruvkaPhases:
    """Borůvka phases of the CUDA kernel set (``cls._launch``, ``cls.xp``,
    ``cls.to_host`` come from the kernel set)."""

    # -- Boruvka ---------------------------------------------------------------
    @classmethod
    def init_boruvka(cls, bvh, core2, mrd):
        """The iteration state; the labels live in ``bvh.P`` (each point its own).

        Parameters
        ----------
        bvh : CudaBVH
        core2 : (n,) cupy array of the points' dtype, or None
            Squared core distances, tree order (not used when ``mrd`` is False:
            ``s.core2`` is then ``s.cl``; the Euclidean kernels do not read it).
        mrd : bool
            Mutual reachability: weights are ``max(core2_i, core2_j, d2)``.

        Returns
        -------
        CudaBoruvkaState
            ``cl`` zeros (no candidate, lower bound 0); ``best`` the
            infinite-radius key (``KEY_INIT``); ``key2`` all ones for float64,
            else ``best`` itself; ``edges`` is ``best`` (float32) or ``key2``
            (float64); ``it = 0``.  The tree's ``delta`` is dropped: the
            label pass reads each node's range from ``bvh.far``.
        """
        xp = cls.xp
        n, dt = bvh.n, bvh.dtype
        bvh.delta = None  # construction only
        cl = xp.zeros(n, CL_WORD[dt])
        best = xp.full(n, KEY_INIT[dt], np.uint64)
        key2 = xp.full(n, _NO_KEY, np.uint64) if dt == np.float64 else best
        return CudaBoruvkaState(
            mrd=bool(mrd), core2=core2 if mrd else cl, cl=cl, best=best, key2=key2,
            edges=best if dt == np.float32 else key2,
            counter=xp.zeros(2, np.int32), count=xp.zeros(1, np.int32),
            )

    @classmethod
    def reduce_labels(cls, bvh, s):
        """Label every internal node with its leaves' common component, or -1.

        A node's points are one component's exactly when no label changes
        between neighbouring points of its range: ``k_change_bits`` writes a
        bit a point (it and the next differ) and a count a word of 32
        points, a cumsum of the counts gives the changes up to each word's
        end, and ``k_node_labels`` (a thread a node) compares the
        prefix counts at its range's two ends (``bvh.far``).  Nothing in the
        first iteration: all points are singletons and ``k_build`` left every
        node at -1.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Writes the label field of the node records in ``bvh.nodes``
            (scratch: two (ceil(n/32),) int32 arrays and the cumsum's) and
            puts ``bvh.aux`` back at -1 for the later passes.
        """
        if s.it == 0:
            return  # all points singletons: every node is mixed (k_build set -1)
        bvh.aux.fill(-1)  # the rest value the later passes expect
        if bvh.n_leaves < 2:
            return  # one leaf: no node
        xp = cls.xp
        n = bvh.n
        words = (n + 31) // 32
        bits = xp.empty(words, np.uint32)
        count = xp.empty(words, np.int32)
        cls._launch(bvh, bvh.d, "k_change_bits", n, (bvh.P, _i32(n), bits, count))
        upto = xp.cumsum(count, dtype=np.int32)
        del count
        cls._launch(bvh, bvh.d, "k_node_labels", bvh.n_leaves - 1,
                    (bvh.P, bvh.tab, bvh.far, bits, upto, _i32(bvh.n_leaves - 1), bvh.nodes))

    @classmethod
    def compute_upper_bounds(cls, bvh, s):
        """Upper bounds on each component's shortest outgoing edge (``k_bounds``).

        One thread per point: an edge to the next tree position in another
        component lowers both components' key in ``s.best`` (64-bit atomicMin of
        the packed (weight, min input row) key; float64: the weight), and so does a
        certified candidate that is still foreign; a candidate that has joined the
        point's component is dropped, its weight the point's lower bound again.
        Nothing in the first iteration (the search starts from the Morton
        neighbours).  In the second, a Euclidean point whose nearest other
        point has joined it takes its second-nearest (``s.second``, then
        dropped) as its certified candidate when that one is foreign, else
        its weight as the lower bound.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Lowers ``s.best``; sets ``s.cl[i]`` to the lower bound for dropped
            candidates.
        """
        if s.it == 0:
            return  # the first search starts from its Morton neighbours
        second = s.second
        s.second = None  # read once, in the second iteration
        cls._launch(bvh, bvh.d, "k_bounds", bvh.n,
                    (bvh.P, bvh.orig, s.core2, s.cl, s.best, _i32(bvh.n),
                     s.count if second is None else second, _i32(second is not None)), s.mrd)

    @classmethod
    def find_component_outgoing_edges(cls, bvh, s):
        """Each point's nearest point in another component: a pruned traversal a thread.

        After the first iteration ``k_select`` compacts the points that must
        search (no certified candidate, lower bound not above their component's
        radius) into ``bvh.aux`` (``s.count`` of them), and ``k_search`` runs one
        thread per listed point.  The first iteration is a plain nearest-other-point
        query for every point; Euclidean, it keeps each point's certified
        second-nearest too (``s.second``, 4 bytes a point until the second
        iteration's bounds: most points' nearest foreign point then, since
        their nearest has joined them).

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Sets ``s.cl`` (``~j`` for the certified nearest foreign point at tree
            position j, else the raised lower bound's bits), lowers ``s.best`` (not
            in the first iteration); the work list's slots of ``bvh.aux`` are back
            at -1.
        """
        n = _i32(bvh.n)
        first = s.it == 0
        if not first:
            # the points that must search, compacted into aux[] (at rest -1;
            # the search puts every slot it reads back to -1)
            s.count.fill(0)
            cls._launch(bvh, bvh.d, "k_select", bvh.n,
                        (bvh.P, s.cl, s.best, bvh.aux, s.count, n))
        second = first and not s.mrd
        if second:
            s.second = cls.xp.empty(bvh.n, np.int32)
        cls._launch(bvh, bvh.d, "k_search", bvh.n,
                    (bvh.P, bvh.nodes, bvh.tab, bvh.orig, s.core2, s.cl, s.best,
                     n, _i32(bvh.n_leaves), bvh.aux, s.count,
                     s.second if second else s.count), s.mrd, first, second)

    @classmethod
    def reduce_component_minima(cls, bvh, s):
        """Each component's minimum outgoing edge, strict order (``k_ties``, ``k_winner``).

        ``s.best`` already holds each component's least (weight, min input row)
        key (float64: least weight).  ``k_ties`` raises every point's lower bound
        to its component's radius and, among the candidates matching that key,
        takes the least source row (float32: atomicMin in ``bvh.aux``; float64: of
        (min row, source row) in ``s.key2``); ``k_winner`` marks the winning point
        ``i`` with ``bvh.aux[C] = -2 - i``.  Nothing in the first iteration (a
        singleton's edge is its point's candidate).

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        None
            Sets ``bvh.aux[C]`` per component, raises the lower bounds in ``s.cl``,
            fills ``s.key2`` (float64).
        """
        if s.it == 0:
            return  # a singleton's shortest edge is its point's candidate
        n = _i32(bvh.n)
        cls._launch(bvh, bvh.d, "k_ties", bvh.n,
                    (bvh.P, bvh.orig, s.core2, s.cl, s.best, bvh.aux, s.key2, n),
                    s.mrd)
        cls._launch(bvh, bvh.d, "k_winner", bvh.n,
                    (bvh.P, bvh.orig, s.cl, bvh.aux, s.key2, n))

    @classmethod
    def merge_components(cls, bvh, s):
        """Hook every component along its chosen edge, find the roots, relabel the points.

        ``k_merge_next`` packs each representative's edge (source and target tree
        positions) into its ``s.edges`` slot and points ``bvh.aux[C]`` at the far
        end's component; ``k_merge_roots`` makes the smaller representative of each
        mutual pair a root and counts the other representatives' edges;
        ``k_merge_jump`` (pointer jumping, ``JUMP_STEPS`` a launch, launched again
        while a chain is unfinished) and ``k_relabel`` give every point its root.
        ``s.counter`` (two int32) is read back after each ``k_merge_jump``.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        int
            Tree edges found so far (also ``s.n_edges``).  ``s.it`` is incremented,
            the labels in ``bvh.P`` are the new roots, and each root's ``s.best``
            (and ``s.key2``) is back at the infinite key.
        """
        dt, d, n = bvh.dtype, bvh.d, _i32(bvh.n)
        cls._launch(dt, d, "k_merge_next", bvh.n,
                    (bvh.P, s.cl, bvh.aux, s.edges, n, _i32(1 if s.it == 0 else 0)))
        if s.rec is not None:  # the picks, while aux[] holds the far components
            cls._launch(dt, d, "k_record_picks", bvh.n, (bvh.P, bvh.aux, *s.rec, n, _i32(s.it)))
        cls._launch(dt, d, "k_merge_roots", bvh.n,
                    (bvh.P, bvh.aux, s.best, s.key2, s.counter, n))
        # counter = [edges so far, unfinished root search]
        unfinished = s.counter[1:]
        unfinished.fill(0)
        cls._launch(dt, d, "k_merge_jump", bvh.n,
                    (bvh.P, bvh.aux, n, _i32(JUMP_STEPS), unfinished))
        # the loop condition: the one device-to-host read of an iteration
        h = cls.to_host(s.counter)
        while h[1]:  # only chains much longer than real data makes
            unfinished.fill(0)
            cls._launch(dt, d, "k_merge_jump", bvh.n,
                        (bvh.P, bvh.aux, n, _i32(JUMP_STEPS), unfinished))
            h = cls.to_host(s.counter)
        cls._launch(dt, d, "k_relabel", bvh.n, (bvh.P, bvh.aux, n))
        s.it += 1
        s.n_edges = int(h[0])
        return s.n_edges

    @classmethod
    def _final_root(cls, bvh):
        """The one component left: the label of position 0 (4 bytes read)."""
        off = bvh.d * bvh.dtype.itemsize
        return int(cls.to_host(bvh.P[off:off + 4].view(np.int32))[0])

    @classmethod
    def start_hierarchy(cls, bvh, s):
        """Record every iteration's picks from now on (``k_record_picks``), for
        ``finalize_hierarchy``: 9 bytes a point.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState, before the first iteration.
        """
        xp, n = cls.xp, bvh.n
        s.rec = (xp.empty(n, np.int32), xp.full(n, INT_MAX, np.int32),
                 xp.full(n, 255, np.uint8))

    @classmethod
    def finalize_hierarchy(cls, bvh, s, order):
        """The recorded picks, the edges named by their rank in ``order``
        (after ``finalize_edges``: the point records and ``orig`` are all
        this reads; ``k_record_rank``, ``k_record_edges``,
        ``k_record_points``).

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState, recording since ``start_hierarchy``.
        order : (n-1,) int64 array of ``xp``, the edges of ``finalize_edges``
            in the strict order (rank -> edge).

        Returns
        -------
        dict of arrays of ``xp``, ``m = n - 1``, edges by rank: ``alpha`` (m,)
        int32, the edge whose chain each edge joins in the iteration after
        its own (the pick of the component holding it; -1 for the last
        iteration's, the root chain), ``side`` (m,) int8 (1: the component
        was its pick's mutual root), ``round`` (m,) uint8, the iteration each
        edge was picked in; ``point_children`` (m, 2) int32, every input
        row in the slot of its first pick (``[rank, side]``), -1 in the
        slots an edge will fill: a point is alone on its dendrogram chain,
        so this is where the dendrogram's children start.
        """
        xp, n, m = cls.xp, bvh.n, bvh.n - 1
        rec_point, rec_edge, rec_round = s.rec
        s.rec = None
        out = {"alpha": xp.empty(m, np.int32), "side": xp.empty(m, np.int8),
               "round": xp.empty(m, np.uint8),
               "point_children": xp.full((m, 2), -1, np.int32)}
        if m < 1:
            return out
        root = _i32(cls._final_root(bvh))
        order = xp.ascontiguousarray(order, dtype=np.int64)
        rank = xp.empty(m, np.int32)
        dt, d = bvh.dtype, bvh.d
        cls._launch(dt, d, "k_record_rank", m, (order, rank, _i32(m)))
        cls._launch(dt, d, "k_record_edges", m,
                    (order, rank, rec_edge, rec_round, root, _i32(m),
                     out["alpha"], out["side"], out["round"]))
        cls._launch(dt, d, "k_record_points", n,
                    (bvh.orig, rank, rec_point, root, _i32(n), out["point_children"]))
        return out

    @classmethod
    def finalize_edges(cls, bvh, s):
        """The tree's edges as input rows, their weights recomputed (``k_finalize``).

        Reads the root's label (4 bytes), releases the tree and the search state
        (``bvh.nodes``, ``bvh.far``, ``bvh.aux``, ``s.cl`` and the key arrays
        become None), then one thread per edge: every tree position but
        the root's holds the edge that absorbed it.

        Parameters
        ----------
        bvh : CudaBVH
        s : CudaBoruvkaState

        Returns
        -------
        source, target : (n-1,) int64 cupy arrays
            Input rows of each edge's ends (edges in tree-position order).
        weight2 : (n-1,) cupy array of the points' dtype
            Squared weights.

        Raises
        ------
        RuntimeError
            ``s.n_edges != n - 1``.
        """
        xp = cls.xp
        n, d, dt = bvh.n, bvh.d, bvh.dtype
        m = s.n_edges
        if m != n - 1:
            raise RuntimeError(f"finalize_edges: {m} edges for {n} points")
        root = cls._final_root(bvh)
        # the tree and the search state are done with: give their memory back
        # before the outputs are allocated (the peak stays the loop's)
        bvh.nodes = bvh.delta = bvh.far = bvh.aux = bvh.tab = None
        s.cl = None
        if s.edges is not s.best:
            s.best = None
        src = xp.empty(m, np.int64)
        dst = xp.empty(m, np.int64)
        w2 = xp.empty(m, dt)
        cls._launch(bvh, d, "k_finalize", m,
                    (bvh.P, bvh.orig, s.core2, s.edges, _i32(root), _i32(n), src, dst, w2),
                    s.mrd)
        s.edges = s.best = s.key2 = None
        return src, dst, w2

    # -- extras (benchmarks) -----------------------------------------------------
    @classmethod
    def nearest_other_point(cls, bvh):
        """The floor's query: every point's nearest other point (tree positions).

        Parameters
        ----------
        bvh : CudaBVH

        Returns
        -------
        (n,) int32 (float64 points: int64) cupy array
            The search's words: ``~j`` (negative) for j, the tree position of
            the point's nearest other point (ties: the smaller input row),
            else, where a tie at the pruning distance left it uncertified,
            the bits of a lower bound on the squared distance.
        """
        xp = cls.xp
        n = bvh.n
        cl = xp.empty(n, CL_WORD[bvh.dtype])  # the first search writes every word
        unused = xp.empty(1, np.uint64)  # the first search reads no radius
        nolist = xp.zeros(1, np.int32)   # nor a work list
        cls._launch(bvh, bvh.d, "k_search", n,
                    (bvh.P, bvh.nodes, bvh.tab, bvh.orig, cl, cl, unused, _i32(n),
                     _i32(bvh.n_leaves), nolist, nolist, nolist), False, True, False)
        return cl
