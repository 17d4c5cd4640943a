// Lock-free union-find over edge lists: the connected components of the
// edges whose weight lies in (lo, hi], every root the smallest row of its
// component (a root is only ever hooked under a smaller root, so
// parent[x] <= x throughout, which is what makes the halving race-free).

__device__ long long uf_root(long long* parent, long long x) {
    long long cur = parent[x];
    if (cur != x) {
        long long prev = x, next;
        while (cur > (next = parent[cur])) {  // path halving
            parent[prev] = next;
            prev = cur;
            cur = next;
        }
    }
    return cur;
}

template <typename W>
__global__ void uf_hook(const long long* __restrict__ source,
                        const long long* __restrict__ target,
                        const W* __restrict__ weight, double lo, double hi,
                        long long* parent, long long m) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        double w = (double)weight[e];
        if (!(w > lo && w <= hi)) continue;
        long long a = uf_root(parent, source[e]);
        long long b = uf_root(parent, target[e]);
        while (a != b) {  // hook the larger root under the smaller
            if (a < b) { long long c = a; a = b; b = c; }
            unsigned long long got = atomicCAS((unsigned long long*)&parent[a],
                                               (unsigned long long)a, (unsigned long long)b);
            if ((long long)got == a) break;
            a = uf_root(parent, (long long)got);  // a was hooked meanwhile
            b = uf_root(parent, b);
        }
    }
}

// After the hooks: every parent is its root, and roots are flagged.
extern "C" __global__ void uf_flatten(long long* parent, long long* is_root, long long n) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        long long r = x, p;
        while ((p = parent[r]) != r) r = p;
        parent[x] = r;
        is_root[x] = (r == x);
    }
}

// labels[x] = number of the root of x among the roots (an inclusive scan of
// is_root, minus one).
extern "C" __global__ void uf_number(const long long* __restrict__ parent,
                          const long long* __restrict__ scan, long long* labels,
                          long long n) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        labels[x] = scan[parent[x]] - 1;
    }
}
