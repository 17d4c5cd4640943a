// The friends-of-friends cuts' kernels (after union_find_core.cuh).

// Every edge's level: the first cut whose length is >= its weight (1 .. K),
// or 0 when it is longer than every cut.  `cuts` holds K increasing lengths.
template <typename W>
__global__ void uf_edge_levels(const W* __restrict__ weight, const double* __restrict__ cuts,
                               int k, unsigned char* __restrict__ levels, long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        double w = (double)weight[e];
        int lo = 0, hi = k;  // first j with cuts[j] >= w
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (cuts[mid] >= w) hi = mid; else lo = mid + 1;
        }
        levels[e] = (unsigned char)(lo < k ? lo + 1 : 0);
    }
}

// Hook the edges of one level (levels[e] == level).
extern "C" __global__ void uf_hook_level(const long long* __restrict__ source,
                                         const long long* __restrict__ target,
                                         const unsigned char* __restrict__ levels,
                                         unsigned level, u64* nodes, long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        if (levels[e] != level) continue;
        uf_union(nodes, (u64)source[e], (u64)target[e], level);
    }
}

// Hook the edges whose weight lies in (lo, hi] as level `level` (one cut:
// no level array).
template <typename W>
__global__ void uf_hook_range(const long long* __restrict__ source,
                              const long long* __restrict__ target,
                              const W* __restrict__ weight, double lo, double hi,
                              unsigned level, u64* nodes, long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        double w = (double)weight[e];
        if (!(w > lo && w <= hi)) continue;
        uf_union(nodes, (u64)source[e], (u64)target[e], level);
    }
}

// The roots of every cut as bit masks: bits[j * words + i] has bit b set
// when row 32 i + b is a root at cut j + 1 (its level is above j + 1), and
// counts[j * words + i] is how many bits that word has.  One warp a word;
// launched with at least 32 * words threads in blocks of a multiple of 32.
extern "C" __global__ void uf_root_bits(const u64* __restrict__ nodes, int k,
                                        unsigned* __restrict__ bits,
                                        long long* __restrict__ counts, long long n,
                                        long long words) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long span = (words * 32 + stride - 1) / stride * stride;  // every lane loops alike
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < span;
         x += stride) {
        unsigned level = x < n ? uf_level(nodes[x]) : 0;
        long long word = x >> 5;
        for (int j = 0; j < k; ++j) {
            unsigned mask = __ballot_sync(0xffffffffu, level > (unsigned)(j + 1));
            if ((threadIdx.x & 31) == 0 && word < words) {
                bits[j * words + word] = mask;
                counts[j * words + word] = __popc(mask);
            }
        }
    }
}

// The labels: for every row x and cut j, the number of x's root at that cut
// among that cut's roots (groups numbered by their smallest row).  `ranks`
// is the inclusive running sum of `counts` along each cut's words; row j of
// the output is out[rows[j] * n ...].
extern "C" __global__ void uf_labels(const u64* __restrict__ nodes, int k,
                                     const unsigned* __restrict__ bits,
                                     const long long* __restrict__ ranks,
                                     const long long* __restrict__ rows,
                                     long long* __restrict__ out, long long n,
                                     long long words) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        u64 r = (u64)x;
        u64 node = nodes[r];
        for (int j = 0; j < k; ++j) {
            unsigned level = (unsigned)(j + 1);
            while (uf_parent(node) != r && uf_level(node) <= level) {
                r = uf_parent(node);
                node = nodes[r];
            }
            long long word = (long long)(r >> 5);
            unsigned above = bits[j * words + word] >> (r & 31);  // roots >= r in the word
            out[rows[j] * n + x] = ranks[j * words + word] - __popc(above);
        }
    }
}

// Every link becomes a level-0 link straight to its root (between batches
// of cuts, so the next batch's levels start again at 1).
extern "C" __global__ void uf_flatten(u64* nodes, long long n) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        u64 r = (u64)x, p;
        while ((p = uf_parent(nodes[r])) != r) r = p;
        if (r != (u64)x) nodes[x] = r;  // level 0
    }
}
