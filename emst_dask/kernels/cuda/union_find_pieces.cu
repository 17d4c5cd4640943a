// The periodic unwrapping's pieces (after union_find_core.cuh); no warp
// votes, so the CPU emulator of the tests runs them too.

// Hook the flagged edges (flag[e] != 0) as level 1: the components of a
// subset of the edges (the periodic unwrapping's pieces), roots the
// smallest rows.
extern "C" __global__ void uf_hook_flagged(const long long* __restrict__ source,
                                           const long long* __restrict__ target,
                                           const bool* __restrict__ flag, u64* nodes,
                                           long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        if (!flag[e]) continue;
        uf_union(nodes, (u64)source[e], (u64)target[e], 1u);
    }
}

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
