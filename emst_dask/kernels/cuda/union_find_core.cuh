// The lock-free union-find of the friends-of-friends cuts and of the
// periodic unwrapping's pieces (included before union_find.cu and
// union_find_pieces.cu).
//
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

