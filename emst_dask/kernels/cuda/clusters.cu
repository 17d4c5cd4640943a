// Steps of HDBSCAN* on the device (products/hdbscan/device_levels.py and
// device.py) that the whole-array formulation does in several passes each:
// here one thread per item (items.cuh comes first: the index type I,
// GRID_STRIDE), and where heights are read over their float type W.  Nodes:
// v < n is point v, n + i the merge of edge i, the root R = 2n - 2 the last
// merge; N = 2n - 1 nodes.

// lambda = 1 / height in float64, +inf at height 0 (device_levels._lam)
template <typename W>
__device__ __forceinline__ double lambda_of(W h) {
    double x = (double)h;
    return x > 0.0 ? 1.0 / x : __longlong_as_double(0x7ff0000000000000LL);
}

// The level sets: every merge (index i = v - n) to its parent's merge when
// both have one height (merges at one height are one merge), else to
// itself; the last merge, the root, to itself.
template <typename I, typename W>
__global__ void level_up(const I* __restrict__ parent, const W* __restrict__ w,
                         I* __restrict__ up, long long m, long long n) {
    GRID_STRIDE(i, m) {
        I u = (I)i;
        if (i + 1 < m) {
            I pm = parent[n + i] - (I)n;
            if (w[pm] == w[i]) u = pm;
        }
        up[i] = u;
    }
}

// With top[i] the top merge of merge i's run: every node below the root
// gets the top of its parent's run as its level-set parent (a node id), in
// place; level[i]: merge i is a node of the level-set hierarchy.
template <typename I>
__global__ void level_parents(const I* __restrict__ top, I* __restrict__ parent,
                              bool* __restrict__ level, long long m, long long n) {
    GRID_STRIDE(v, 2 * m) {
        parent[v] = top[parent[v] - n] + (I)n;
        if (v < m) level[v] = top[v] == (I)v;
    }
}

// Runt pruning.  A merge is big when it is a level-set node of at least
// mcs points (the root apart): count the big children of every merge.
template <typename I>
__global__ void count_big(const I* __restrict__ mparent, const bool* __restrict__ level,
                          const I* __restrict__ size, I* __restrict__ n_big, long long m,
                          long long n, long long mcs) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(i, m - 1) {
        if (level[i] && size[i] >= mcs) atomicAdd((U*)&n_big[mparent[n + i] - n], (U)1);
    }
}

// The holders (big merges and the root) and the births (the big children of
// a merge with two or more, and the root).
template <typename I>
__global__ void holders_births(const I* __restrict__ mparent, const bool* __restrict__ level,
                               const I* __restrict__ size, const I* __restrict__ n_big,
                               bool* __restrict__ holder, bool* __restrict__ birth,
                               long long m, long long n, long long mcs) {
    GRID_STRIDE(i, m) {
        bool root = i + 1 == m;
        bool big = !root && level[i] && size[i] >= mcs;
        holder[i] = big || root;
        birth[i] = root || (big && n_big[mparent[n + i] - n] >= 2);
    }
}

// Small level-set merges climb to their level-set parent while it is small
// (merge indices i = v - n; the root and any other merge stay).
template <typename I>
__global__ void climb_start(const I* __restrict__ mparent, const bool* __restrict__ level,
                            const I* __restrict__ size, I* __restrict__ climb, long long m,
                            long long n, long long mcs) {
    GRID_STRIDE(i, m) {
        I c = (I)i;
        if (i + 1 < m && level[i] && size[i] < mcs) {
            I mp = mparent[n + i];
            if (mp != (I)(n + m - 1) && size[mp - n] < mcs) c = mp - (I)n;
        }
        climb[i] = c;
    }
}

// Where every point leaves: at the parent of the top of its climb (the
// lowest big merge or the root above it; a point climbs first to its
// level-set parent when that is small, then as merges do, to top[...]), at
// that merge's lambda, from the cluster of the nearest birth at or above
// it; per birth, the smallest row leaving it.  Most of a birth's points
// find a smaller row there already (the lanes hold consecutive rows, the
// early blocks run first), so one read spares most atomics, which would
// queue on the few births that hold most points.
template <typename I, typename W>
__global__ void points_leave(const I* __restrict__ top, const I* __restrict__ mparent,
                             const I* __restrict__ size, const W* __restrict__ w,
                             const I* __restrict__ where, const I* __restrict__ holder_birth,
                             double* __restrict__ point_lambda, I* __restrict__ point_cluster,
                             I* min_row, long long n, long long mcs) {
    typedef typename Unsigned<I>::type U;
    GRID_STRIDE(p, n) {
        I mp = mparent[p] - (I)n;  // merge indices from here
        I at = mp;
        if (mp != (I)(n - 2) && size[mp] < mcs) at = mparent[n + top[mp]] - (I)n;
        point_lambda[p] = lambda_of(w[at]);
        I b = holder_birth[where[at]];
        point_cluster[p] = b;
        unsigned group = __match_any_sync(__activemask(), b);
        if ((threadIdx.x & 31) == __ffs(group) - 1 && (I)p < __ldcg(&min_row[b]))
            atomicMin((U*)&min_row[b], (U)p);
    }
}

// The points leaving at every holder: its points less its big children's.
// A point under holder j leaves there unless a big child of j holds it, and
// the level-set parent of a big merge is a holder, so each holder adds its
// size to its own count and takes it from its parent's: a few atomics per
// holder, where counting the points as they leave queues on the holders
// that most points leave (the root's, a big cluster's).
template <typename I>
__global__ void holder_counts(const I* __restrict__ holders, const I* __restrict__ mparent,
                              const I* __restrict__ size, const I* __restrict__ where,
                              u64* count, long long h, long long n) {
    GRID_STRIDE(j, h) {
        I i = holders[j];
        u64 s = (u64)size[i];
        atomicAdd(&count[j], s);
        if (i != (I)(n - 2)) atomicAdd(&count[where[mparent[n + i] - n]], (u64)0 - s);
    }
}

// lambda_of(w[at[i]]) for a list of merges, one pass (no float64 copy of
// the gathered heights, no temporaries).
template <typename I, typename W>
__global__ void lambdas_at(const I* __restrict__ at, const W* __restrict__ w,
                           double* __restrict__ lam, long long count) {
    GRID_STRIDE(i, count) {
        lam[i] = lambda_of(w[at[i]]);
    }
}
