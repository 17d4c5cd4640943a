// Steps of the parallel single-linkage dendrogram (products/dendrogram.py)
// that the whole-array formulation does in many passes: each is one thread
// per item here (items.cuh comes first: the index type I, GRID_STRIDE).

// Every node as far up its root path as a walk of ``steps`` steps takes it,
// in place.  Only non-roots are written, and a value read that another
// thread wrote already is an ancestor, which only shortens a walk; a walk
// that ends at a node pointing at itself ends at a root.  ``unfinished`` is
// set where a walk stopped short: another pass then walks a forest already
// ``steps`` times shallower, so a forest of depth D takes about
// log(D) / log(steps) passes (one, for most of Borůvka's pick forests), and
// none is spent finding that nothing changes.
template <typename I>
__global__ void forest_walk(I* ptr, long long k, int steps, int* unfinished) {
    int any = 0;
    GRID_STRIDE(c, k) {
        I p = ptr[c];
        if (p == (I)c) continue;
        I up = ptr[p];
        for (int s = 0; up != p && s < steps; ++s) {
            p = up;
            up = ptr[p];
        }
        ptr[c] = p;
        if (up != p) any = 1;
    }
    if (any) *unfinished = 1;
}

// New component numbers after the walks: flag[c] = 1 for the roots, whose
// inclusive scan numbers them; then every node to its root's number, in
// place (only thread c writes ptr[c]).
template <typename I>
__global__ void root_flags(const I* __restrict__ ptr, I* __restrict__ flag, long long k) {
    GRID_STRIDE(c, k) {
        flag[c] = ptr[c] == (I)c;
    }
}

template <typename I>
__global__ void renumber(I* ptr, const I* __restrict__ scan, long long k) {
    GRID_STRIDE(c, k) {
        ptr[c] = scan[ptr[c]] - 1;
    }
}

// Followers of one round: an edge above its component's pick joins the root
// path above the pick at its own rank, in the first chain up from the pick's
// whose top edge is heavier.  The keys read are those of this round's picks
// and later ones, all final; the keys written are of the round before's.
template <typename I>
__global__ void place_followers(const I* __restrict__ edge, const I* __restrict__ target,
                                long long count, I* key, const I* __restrict__ owner,
                                long long m) {
    GRID_STRIDE(i, count) {
        I e = edge[i], t = target[i];
        for (;;) {
            I k = key[t];
            if (k == 2 * m) { key[e] = k; break; }
            I top = owner[k >> 1];
            if (e < top) { key[e] = k; break; }
            t = top;
        }
    }
}

// Every component's lightest edge: the lowest position among the edges at
// it (the edges stay in rank order round after round, so the lowest
// position is the lowest rank).
template <typename I>
__global__ void lightest_edges(const I* __restrict__ cs, const I* __restrict__ ct, I* best,
                               long long count) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(e, count) {
        atomicMin((U*)&best[cs[e]], (U)e);
        atomicMin((U*)&best[ct[e]], (U)e);
    }
}

// The picks, one thread a component (its writes coalesce; a pass over the
// edges wrote side and ptr at random): c's pick is the edge at best[c].
// flag[e] = 1 for a picked edge (zeroed before); side[c] 0 where c is the
// pick's source, 1 its target; ptr[c] the component at the other end, but
// c itself for the smaller of a mutual pair (both picked one edge, the only
// cycles of the pick forest, ranks being distinct), so that ptr is a
// forest; alpha[c] the pick's rank (its position, with ``positions``: the
// first round, whose ranks are the positions).
template <typename I>
__global__ void component_picks(const I* __restrict__ best, const I* __restrict__ cs,
                                const I* __restrict__ ct, const I* __restrict__ rank,
                                int positions, unsigned char* __restrict__ flag,
                                signed char* __restrict__ side, I* __restrict__ ptr,
                                I* __restrict__ alpha, long long k) {
    GRID_STRIDE(c, k) {
        I e = best[c];
        I u = cs[e], v = ct[e];
        bool target = u != (I)c;
        I other = target ? u : v;
        side[c] = target;
        ptr[c] = (other > (I)c && best[other] == e) ? (I)c : other;
        alpha[c] = positions ? e : rank[e];
        flag[e] = 1;
    }
}

// After the inclusive scan pos of the pick flags: the picks' ranks in edge
// order, and their chain numbers cid[r] = so_far + (picks before r).
// With ``positions`` (the first round) the ranks are the positions: rank
// is not read.
template <typename I>
__global__ void take_picks(const I* __restrict__ pos, const I* __restrict__ rank,
                           int positions, long long count, I* __restrict__ prank,
                           I* __restrict__ cid, long long so_far) {
    GRID_STRIDE(e, count) {
        I before = e ? pos[e - 1] : 0;
        if (pos[e] != before) {
            I r = positions ? (I)e : rank[e];
            prank[before] = r;
            cid[r] = (I)(so_far + before);
        }
    }
}

// After the merge, one pass over the round's edges: a pick's new component
// goes to its item slot; any other edge moves down to its place among the
// edges left, with its ends' new components (equal ones: a cycle).  With
// ``positions`` (the first round) rank is not read: the ranks are the
// positions.
template <typename I>
__global__ void split_edges(const I* __restrict__ pos, const I* __restrict__ rank,
                            int positions, const I* __restrict__ cs, const I* __restrict__ ct,
                            const I* __restrict__ new_comp, long long count,
                            I* __restrict__ item_comp, I* __restrict__ rank_out,
                            I* __restrict__ cs_out, I* __restrict__ ct_out, int* cycle) {
    GRID_STRIDE(e, count) {
        I before = e ? pos[e - 1] : 0;
        I u = new_comp[cs[e]];
        if (pos[e] != before) {
            item_comp[before] = u;
        } else {
            long long j = e - before;
            I v = new_comp[ct[e]];
            rank_out[j] = positions ? (I)e : rank[e];
            cs_out[j] = u;
            ct_out[j] = v;
            if (u == v) *cycle = 1;
        }
    }
}

// Every item to the chain of its component's pick on the component's side:
// key[items[i]] = 2 cid[alpha] + side[comp], alpha = best[comp].
template <typename I>
__global__ void chain_keys(const I* __restrict__ items, const I* __restrict__ comp,
                           const I* __restrict__ best, const I* __restrict__ cid,
                           const signed char* __restrict__ side, I* __restrict__ key,
                           I* __restrict__ alpha, long long count) {
    GRID_STRIDE(i, count) {
        I c = comp[i], a = best[c];
        alpha[i] = a;
        key[items[i]] = 2 * cid[a] + side[c];
    }
}

// The chains of the picks the EMST recorded: key[e] = 2 cid[alpha[e]] +
// side[e] for edge e (2m, the root chain, where alpha[e] < 0).
template <typename I>
__global__ void record_keys(const int* __restrict__ alpha, const signed char* __restrict__ side,
                            const I* __restrict__ cid, I* key, long long m) {
    GRID_STRIDE(e, m) {
        int a = alpha[e];
        key[e] = a < 0 ? (I)(2 * m) : (I)(2 * (long long)cid[a] + side[e]);
    }
}

// ---------------------------------------------------------------------------
// Children and sizes from the edges in chain order: skey[i] the chain of
// the i-th edge, order[i] the edge, whose linkage id is n + edge; the points
// (alone on their chains) apart.  children is (m, 2) row-major.
// ---------------------------------------------------------------------------

// A chain's last item is a child of the edge the chain names, on the side
// the key says.
template <typename I>
__global__ void chain_tops(const I* __restrict__ skey, const I* __restrict__ order,
                           const I* __restrict__ owner, I* children, long long count,
                           long long m, long long n) {
    GRID_STRIDE(i, count) {
        I k = skey[i];
        bool last = i + 1 == count || skey[i + 1] != k;
        if (last && k < 2 * m) children[2 * (long long)owner[k >> 1] + (k & 1)] =
            (I)(order[i] + n);
    }
}

// A point is alone on its chain (round 1's): the top, a child of the edge
// the chain names, on the key's side; pslot[p] = 2 edge + side.
template <typename I>
__global__ void point_tops(const I* __restrict__ pslot, I* children, long long n) {
    GRID_STRIDE(p, n) {
        children[pslot[p]] = (I)p;
    }
}

// Any other item is a child of the next item of its chain (an edge), in the
// slot a chain top left free; then each edge's pair is ordered.  After
// chain_tops, with the points in place: an edge has at most one child below
// it in its own chain.
template <typename I>
__global__ void chain_below(const I* __restrict__ skey, const I* __restrict__ order,
                            I* children, long long count, long long m, long long n) {
    GRID_STRIDE(i, count) {
        if (i + 1 < count && skey[i + 1] == skey[i]) {
            long long up = order[i + 1];
            int slot = children[2 * up] == -1 ? 0 : 1;
            children[2 * up + slot] = (I)(order[i] + n);
        }
    }
}

// Parents instead of children (HDBSCAN* reads only these): an edge's is the
// next edge of its chain, a chain's last edge's the edge the chain names
// (-1 on the root chain); node n + e is edge e.
template <typename I>
__global__ void chain_parents(const I* __restrict__ skey, const I* __restrict__ order,
                              const I* __restrict__ owner, I* __restrict__ parent,
                              long long count, long long m, long long n) {
    GRID_STRIDE(i, count) {
        I k = skey[i];
        I up;
        if (i + 1 < count && skey[i + 1] == k) up = (I)(order[i + 1] + n);
        else up = k < 2 * m ? (I)(owner[k >> 1] + n) : (I)-1;
        parent[n + order[i]] = up;
    }
}

// A point's parent is the edge of its slot (pslot[p] = 2 edge + side); the
// points among each edge's children are counted (at most two a counter).
template <typename I>
__global__ void point_parents(const I* __restrict__ pslot, I* __restrict__ parent,
                              I* weight, long long n) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(p, n) {
        I e = pslot[p] >> 1;
        parent[p] = (I)(e + n);
        atomicAdd((U*)&weight[e], (U)1);
    }
}

// The same from the children the EMST recorded ((m, 2) int32, the points
// in their slots, -1 elsewhere), one thread an edge.
template <typename I>
__global__ void recorded_point_parents(const int* __restrict__ rec, I* __restrict__ parent,
                                       I* __restrict__ weight, long long m, long long n) {
    GRID_STRIDE(e, m) {
        int a = rec[2 * e], b = rec[2 * e + 1];
        if (a >= 0) parent[a] = (I)(e + n);
        if (b >= 0) parent[b] = (I)(e + n);
        weight[e] = (I)((a >= 0) + (b >= 0));
    }
}

template <typename I>
__global__ void order_pairs(I* children, long long m) {
    GRID_STRIDE(e, m) {
        I a = children[2 * e], b = children[2 * e + 1];
        if (a > b) { children[2 * e] = b; children[2 * e + 1] = a; }
    }
}

// Sizes, one round's chains [lo, hi): every edge weighs its points (the
// totals of the chains below it, already final);
// terms[i - lo] = (chain starts here) << 32 | weight, whose inclusive scan
// is (chain number << 32 | running total).
template <typename I>
__global__ void size_terms(const I* __restrict__ skey, const I* __restrict__ order,
                           const I* __restrict__ weight, long long lo, long long hi,
                           long long m, u64* __restrict__ terms) {
    GRID_STRIDE(j, hi - lo) {
        long long i = lo + j;
        u64 w = (u64)weight[order[i]];
        bool first = j == 0 || skey[i - 1] != skey[i];
        terms[j] = ((u64)first << 32) | w;
    }
}

// base[c - 1] = the running total before chain c starts (32 bits: a
// round's running total stays below n < 2**31).
template <typename I>
__global__ void chain_bases(const I* __restrict__ skey, const u64* __restrict__ scan,
                            long long lo, long long hi, unsigned* __restrict__ base) {
    GRID_STRIDE(j, hi - lo) {
        long long i = lo + j;
        if (j == 0 || skey[i - 1] != skey[i])
            base[(scan[j] >> 32) - 1] = j ? (unsigned)(scan[j - 1] & 0xffffffffULL) : 0u;
    }
}

// An edge's cluster holds the points up to it along its chain; a chain's
// total goes to the edge the chain names (an item of a later round).
template <typename I>
__global__ void chain_sizes(const I* __restrict__ skey, const I* __restrict__ order,
                            const I* __restrict__ owner, const u64* __restrict__ scan,
                            const unsigned* __restrict__ base, long long lo, long long hi,
                            long long m, I* size, I* weight) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(j, hi - lo) {
        long long i = lo + j;
        u64 s = scan[j];
        I within = (I)((s & 0xffffffffULL) - base[(s >> 32) - 1]);
        I k = skey[i];
        size[order[i]] = within;
        bool last = i + 1 == hi || skey[i + 1] != k;
        if (last && k < 2 * m) atomicAdd((U*)&weight[owner[k >> 1]], (U)within);
    }
}

// Per value k >= 0 of key: how many items hold it (total[k] += ...) and,
// with first, the lowest item holding it (atomic minimum; first[k] starts
// above every item).  The lanes of a warp holding one value add once, so
// a value held by millions of items (the points leaving the root cluster)
// costs one atomic a warp, not one a point.  Negative keys are skipped.
template <typename I>
__global__ void tally(const I* __restrict__ key, long long count,
                      unsigned long long* total, I* first) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(i, count) {
        I k = key[i];
        unsigned group = __match_any_sync(__activemask(), k);
        // lanes hold consecutive items: the group's lowest lane, its first item
        if (k >= 0 && (threadIdx.x & 31) == __ffs(group) - 1) {
            atomicAdd(&total[k], (unsigned long long)__popc(group));
            // read first: most groups of a crowded value come after its lowest
            if (first && (U)i < (U)__ldcg(&first[k])) atomicMin((U*)&first[k], (U)i);
        }
    }
}
