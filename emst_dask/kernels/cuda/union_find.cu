// Friends-of-friends cuts at K linking lengths from one union-find: a
// lock-free union-find whose links remember the cut (level) they were made
// at, so one pass over the points reads every cut's groups.
//
// A node is one 64-bit word, level << 56 | parent, so that a link and its
// level change together under one compare-and-swap.  A root has parent ==
// itself and level ROOT.  Levels 1 .. K are the cuts in increasing length;
// level 0 is a link made before this batch of cuts.  Edges are hooked
// level after level, each hooking the larger of its endpoints' roots under
// the smaller, so every root is its component's smallest row and parent <=
// row throughout.  Along any path the levels never decrease (a node is
// linked while it is a root, to a root that is linked later), so the root
// of x at cut L is the last node reached from x over links of level <= L.
// Path splitting only shortcuts links of the level being hooked: a shortcut
// over an older link would lose the cut at which two groups met.

typedef unsigned long long u64;

#define UF_ROOT 0xffull
#define UF_SHIFT 56
#define UF_INDEX ((1ull << UF_SHIFT) - 1)

__device__ __forceinline__ u64 uf_parent(u64 node) { return node & UF_INDEX; }
__device__ __forceinline__ unsigned uf_level(u64 node) { return (unsigned)(node >> UF_SHIFT); }

// The root of x (while level `level` is being hooked).
__device__ u64 uf_find(u64* nodes, u64 x, unsigned level) {
    u64 node = nodes[x];
    u64 cur = uf_parent(node);
    if (cur == x) return x;
    u64 prev = x;
    for (;;) {
        u64 up = nodes[cur];
        u64 next = uf_parent(up);
        if (next == cur) return cur;
        if (uf_level(node) == level)  // then up's level is `level` too
            nodes[prev] = ((u64)level << UF_SHIFT) | next;
        prev = cur;
        node = up;
        cur = next;
    }
}

__device__ void uf_union(u64* nodes, u64 a, u64 b, unsigned level) {
    a = uf_find(nodes, a, level);
    b = uf_find(nodes, b, level);
    while (a != b) {  // hook the larger root under the smaller
        if (a < b) { u64 c = a; a = b; b = c; }
        u64 root = (UF_ROOT << UF_SHIFT) | a;
        u64 got = atomicCAS(&nodes[a], root, ((u64)level << UF_SHIFT) | b);
        if (got == root) return;
        a = uf_find(nodes, a, level);  // a was hooked meanwhile
        b = uf_find(nodes, b, level);
    }
}

extern "C" __global__ void uf_init(u64* nodes, long long n) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x)
        nodes[x] = (UF_ROOT << UF_SHIFT) | (u64)x;
}

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
