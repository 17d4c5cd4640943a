// The periodic unwrapping's pieces (after union_find_core.cuh); no warp
// votes, so the CPU emulator of the tests runs them too.

// The root of each of `rows` (read only: several threads may share a path).
extern "C" __global__ void uf_roots_of(const u64* __restrict__ nodes,
                                       const long long* __restrict__ rows,
                                       long long* __restrict__ out, long long k) {
    for (long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x; q < k;
         q += (long long)gridDim.x * blockDim.x) {
        u64 r = (u64)rows[q], p;
        while ((p = uf_parent(nodes[r])) != r) r = p;
        out[q] = (long long)r;
    }
}

// The pieces of the wide groups straight from the edge states of
// fof_products.cu's fof_edge_states: hook every edge whose ends agree
// (state 1) in a group marked wide (wide[raw[source]]), level 1; no
// compacted copy of those edges.
extern "C" __global__ void uf_hook_agreeing(const long long* __restrict__ source,
                                            const long long* __restrict__ target,
                                            const unsigned char* __restrict__ state,
                                            const long long* __restrict__ raw,
                                            const bool* __restrict__ wide, u64* nodes,
                                            long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        if (state[e] != 1) continue;
        long long u = source[e];
        if (!wide[raw[u]]) continue;
        uf_union(nodes, (u64)u, (u64)target[e], 1u);
    }
}

// Every kept point (keep null: every point) of a wide group moved by its
// piece's constant, in place: its piece is its root in nodes, looked up in
// pieces (p,) increasing, off (p, d) int64 (a piece not there keeps its
// shift).  One pass over the points.
extern "C" __global__ void uf_add_piece_offsets(const u64* __restrict__ nodes,
                                                const long long* __restrict__ raw,
                                                const bool* __restrict__ wide,
                                                const bool* __restrict__ keep,
                                                const long long* __restrict__ pieces,
                                                const long long* __restrict__ off,
                                                long long p, int d, long long* shift,
                                                long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        if (!wide[raw[i]] || (keep != nullptr && !keep[i])) continue;
        u64 r = (u64)i, up;
        while ((up = uf_parent(nodes[r])) != r) r = up;
        long long lo = 0, hi = p;
        while (lo < hi) {
            long long mid = (lo + hi) >> 1;
            if (pieces[mid] < (long long)r) lo = mid + 1; else hi = mid;
        }
        if (lo < p && pieces[lo] == (long long)r)
            for (int j = 0; j < d; ++j) shift[i * d + j] += off[lo * d + j];
    }
}
