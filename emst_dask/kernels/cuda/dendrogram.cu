// Steps of the parallel single-linkage dendrogram (products/dendrogram.py)
// that the whole-array formulation does in many passes: each is one thread
// per item here.

// The roots of Boruvka's pick forest: ptr[c] is the component at the other
// end of c's lightest edge.  Mutual pairs (the only cycles, ranks being
// distinct) are first broken at the smaller id; then pointer jumping.
extern "C" __global__ void pick_forest_break_pairs(long long* ptr, long long k) {
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < k;
         c += (long long)gridDim.x * blockDim.x) {
        long long p = ptr[c];
        if (c < p && ptr[p] == c) ptr[c] = c;
    }
}

// One pass of pointer jumping in any forest (roots where ptr[c] == c), in
// place: ptr[c] = ptr[ptr[c]].  A value read may already have jumped in this
// pass, which only takes c further up; only thread c writes ptr[c].  Passes
// repeat until none changes anything: log2(depth) + 1 of them, however deep
// the forest (path halving by concurrent threads degrades on the
// million-deep chains of a big cluster's spine).
extern "C" __global__ void forest_jump(long long* ptr, long long k, int* changed) {
    int any = 0;
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < k;
         c += (long long)gridDim.x * blockDim.x) {
        long long p = ptr[c], up = ptr[p];
        if (up != p) { ptr[c] = up; any = 1; }
    }
    if (any) *changed = 1;
}

// Followers of one round: an edge above its component's pick joins the root
// path above the pick at its own rank, in the first chain up from the pick's
// whose top edge is heavier.  The keys read are those of this round's picks
// and later ones, all final; the keys written are of the round before's.
extern "C" __global__ void place_followers(const long long* __restrict__ edge,
                                           const long long* __restrict__ target,
                                           long long count, long long* key,
                                           const long long* __restrict__ owner,
                                           long long m) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        long long e = edge[i], t = target[i];
        for (;;) {
            long long k = key[t];
            if (k == 2 * m) { key[e] = k; break; }
            long long top = owner[k >> 1];
            if (e < top) { key[e] = k; break; }
            t = top;
        }
    }
}

// Every component's lightest edge: the lowest rank among the edges at it.
extern "C" __global__ void lightest_edges(const long long* __restrict__ cs,
                                          const long long* __restrict__ ct,
                                          const long long* __restrict__ rank,
                                          unsigned long long* best, long long count) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
         e += (long long)gridDim.x * blockDim.x) {
        unsigned long long r = (unsigned long long)rank[e];
        atomicMin(&best[cs[e]], r);
        atomicMin(&best[ct[e]], r);
    }
}

// The picks: flag[e] = 1 when edge e is some component's lightest; for each
// component, side (0: it is the pick's source, 1: its target) and the
// component at the pick's other end (each component has one pick, so each
// is written once).
extern "C" __global__ void picks(const long long* __restrict__ cs,
                                 const long long* __restrict__ ct,
                                 const long long* __restrict__ rank,
                                 const long long* __restrict__ best,
                                 unsigned char* __restrict__ flag,
                                 long long* __restrict__ side, long long* __restrict__ ptr,
                                 long long count) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < count;
         e += (long long)gridDim.x * blockDim.x) {
        long long r = rank[e], u = cs[e], v = ct[e];
        bool by_s = best[u] == r, by_t = best[v] == r;
        if (by_s) { side[u] = 0; ptr[u] = v; }
        if (by_t) { side[v] = 1; ptr[v] = u; }
        flag[e] = by_s || by_t;
    }
}

// Every item to the chain of its component's pick on the component's side:
// key[items[i]] = 2 cid[alpha] + side[comp], alpha = best[comp].
extern "C" __global__ void chain_keys(const long long* __restrict__ items,
                                      const long long* __restrict__ comp,
                                      const long long* __restrict__ best,
                                      const long long* __restrict__ cid,
                                      const long long* __restrict__ side,
                                      long long* __restrict__ key,
                                      long long* __restrict__ alpha, long long count) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        long long c = comp[i], a = best[c];
        alpha[i] = a;
        key[items[i]] = 2 * cid[a] + side[c];
    }
}
