// The tree construction's kernels, after lbvh.cuh: the cloud's box, Morton
// codes, the radix tree over two-point leaves, the label reduction.

// ---------------------------------------------------------------------------
// 0. the cloud's bounding box (the engine asks for it before anything else;
// CuPy's axis-0 reductions of an (n, d) array are slow).  Floats map to
// unsigned integers in the same order, so min/max are integer atomics.
// ---------------------------------------------------------------------------
template <typename T> struct Ord;
template <> struct Ord<float> {
  typedef u32 type;
  static __device__ __forceinline__ u32 of(float x) {
    u32 b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  }
  // |x| in the same order-preserving encoding, 0 for +-0: on the bits, so
  // that a flushing (FTZ) build still sees subnormal coordinates
  static __device__ __forceinline__ u32 magnitude(float x) {
    u32 b = __float_as_uint(x) & 0x7FFFFFFFu;
    return b ? (b | 0x80000000u) : 0u;
  }
};
template <> struct Ord<double> {
  typedef u64 type;
  static __device__ __forceinline__ u64 of(double x) {
    u64 b = (u64)__double_as_longlong(x);
    return (b & 0x8000000000000000ULL) ? ~b : (b | 0x8000000000000000ULL);
  }
  static __device__ __forceinline__ u64 magnitude(double x) {
    u64 b = (u64)__double_as_longlong(x) & 0x7FFFFFFFFFFFFFFFULL;
    return b ? (b | 0x8000000000000000ULL) : 0ULL;
  }
};

// out[0..D) = ordered minimum per axis, out[D..2D) = ordered maximum,
// out[2D] = ordered smallest nonzero magnitude of any coordinate; out must
// hold (all ones, zeros, all ones).  Grid-stride over the points.
template <typename T, int D>
__global__ void k_minmax(const T* __restrict__ pts, int n, typename Ord<T>::type* out) {
  typedef typename Ord<T>::type U;
  int t = thread_index();
  int stride = (int)(gridDim.x * blockDim.x);
  U lo[D], hi[D];
  U small = ~(U)0;
#pragma unroll
  for (int a = 0; a < D; ++a) { lo[a] = ~(U)0; hi[a] = 0; }
  for (int i = t; i < n; i += stride) {
#pragma unroll
    for (int a = 0; a < D; ++a) {
      T x = pts[(long long)i * D + a];
      U v = Ord<T>::of(x);
      if (v < lo[a]) lo[a] = v;
      if (v > hi[a]) hi[a] = v;
      U m = Ord<T>::magnitude(x);
      if (m && m < small) small = m;
    }
  }
#ifndef EMST_EMULATE
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int a = 0; a < D; ++a) {
      U l = __shfl_xor_sync(0xffffffffu, lo[a], off);
      U h = __shfl_xor_sync(0xffffffffu, hi[a], off);
      if (l < lo[a]) lo[a] = l;
      if (h > hi[a]) hi[a] = h;
    }
    U m = __shfl_xor_sync(0xffffffffu, small, off);
    if (m < small) small = m;
  }
  if ((threadIdx.x & 31) != 0) return;
#endif
#pragma unroll
  for (int a = 0; a < D; ++a) {
    atomicMin(&out[a], lo[a]);
    atomicMax(&out[D + a], hi[a]);
  }
  atomicMin(&out[2 * D], small);
}

// ---------------------------------------------------------------------------
// 1. Morton codes (64-bit, `bits` per axis, axis 0 most significant)
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_morton(const T* __restrict__ pts, int n, const double* __restrict__ lo,
                         const double* __restrict__ scale, int bits, u64* __restrict__ codes) {
  int i = thread_index();
  if (i >= n) return;
  long long top = (1LL << bits) - 1;
  long long q[D];
#pragma unroll
  for (int a = 0; a < D; ++a) {
    double v = __dmul_rn(__dsub_rn((double)pts[(long long)i * D + a], lo[a]), scale[a]);
    long long c = (long long)v;  // truncation, as the CPU's int()
    q[a] = c < 0 ? 0 : (c > top ? top : c);
  }
  u64 code = 0;
  for (int level = bits - 1; level >= 0; --level) {
#pragma unroll
    for (int a = 0; a < D; ++a) code = (code << 1) | (u64)((q[a] >> level) & 1);
  }
  codes[i] = code;
}

// ---------------------------------------------------------------------------
// 2. tree construction
// ---------------------------------------------------------------------------
// delta[i] = common-prefix length of the augmented keys (codes[i], fine[i],
// i) and (codes[i+1], fine[i+1], i+1): 0..63 from the codes, 64..127 from
// the finer codes of a crowded cell (has_fine), 128..159 from the index bits
// of equal codes (duplicates), so every run of equal codes is one subtree.
template <typename T, int D>
__global__ void k_delta(const u64* __restrict__ codes, const u64* __restrict__ fine,
                        int has_fine, int n, unsigned char* __restrict__ delta) {
  int i = thread_index();
  if (i >= n - 1) return;
  u64 a = codes[i], b = codes[i + 1];
  int p;
  if (a != b) {
    p = __clzll((long long)(a ^ b));
  } else if (has_fine && fine[i] != fine[i + 1]) {
    p = 64 + __clzll((long long)(fine[i] ^ fine[i + 1]));
  } else {
    p = 128 + __clz(i ^ (i + 1));
  }
  delta[i] = (unsigned char)p;
}

// The leaves, in two passes over words of 32 points (one thread a word):
// k_pairs marks the pairs (bit b of pairs[w]: points 32 w + b and the next
// are one leaf) and counts the leaves starting in each word; k_leaves,
// given each word's first leaf (exclusive sums of the counts), writes the
// leaf table (tab zeroed) and the deltas where leaves meet (ldelta).
template <typename T, int D>
__global__ void k_pairs(const unsigned char* __restrict__ delta, int n, u32* __restrict__ pairs,
                        int* __restrict__ count) {
  int w = thread_index();
  if (w >= ((n + 31) >> 5)) return;
  int first = w << 5;
  u32 bits = 0;
  int c = 0;
  bool prev = first > 0 && is_pair(delta, first - 1, n);
  for (int b = 0; b < 32 && first + b < n; ++b) {
    bool p = is_pair(delta, first + b, n);
    if (p) bits |= 1u << b;
    if (!prev) ++c;  // a leaf starts here
    prev = p;
  }
  pairs[w] = bits;
  count[w] = c;
}

template <typename T, int D>
__global__ void k_leaves(const unsigned char* __restrict__ delta, const u32* __restrict__ pairs,
                         const int* __restrict__ start, int n, u64* tab,
                         unsigned char* __restrict__ ldelta) {
  int w = thread_index();
  if (w >= ((n + 31) >> 5)) return;
  int first = w << 5;
  int l = start[w];
  bool prev = first > 0 && ((pairs[(first - 1) >> 5] >> ((first - 1) & 31)) & 1u);
  u32 bits = pairs[w];
  for (int b = 0; b < 32 && first + b < n; ++b) {
    bool p = (bits >> b) & 1u;
    if (!prev) {  // leaf l starts at point i
      int i = first + b;
      u64 v = 0;
      if ((l & 31) == 0) v |= (u64)(u32)i;
      if (p) v |= 1ULL << (32 + (l & 31));
      if (v) atomicOr(&tab[l >> 5], v);
      int last = i + (p ? 1 : 0);
      if (last < n - 1) ldelta[l] = delta[last];
      ++l;
    }
    prev = p;
  }
}

// Points in tree order with their initial labels (own position).
template <typename T, int D>
__global__ void k_gather(const T* __restrict__ pts, const int* __restrict__ perm, int n,
                         Pt<T, D>* __restrict__ P) {
  int i = thread_index();
  if (i >= n) return;
  long long src = (long long)perm[i] * D;
  Pt<T, D> p;
#pragma unroll
  for (int a = 0; a < D; ++a) p.x[a] = pts[src + a];
  p.label = i;
  P[i] = p;
}

// the box of leaf l's points, merged into [lo, hi]
template <typename T, int D>
__device__ __forceinline__ void leaf_box(const Pt<T, D>* P, const u64* tab, int l, T* lo, T* hi) {
  Leaf f = leaf_of(tab, l);
  for (int q = 0; q < (f.two ? 2 : 1); ++q) {
    Pt<T, D> p = P[f.first + q];
#pragma unroll
    for (int a = 0; a < D; ++a) {
      if (p.x[a] < lo[a]) lo[a] = p.x[a];
      if (p.x[a] > hi[a]) hi[a] = p.x[a];
    }
  }
}

// Bottom-up construction, one thread per leaf (n leaves here, delta the
// leaves'): a thread holding the finished subtree [l, r] flags its parent's
// split with a CAS; the first to arrive leaves, the second merges its
// sibling's box and writes the parent, and the far end of its range (node k
// covers [k, far[k]] or [far[k], k]).  Boxes are written once; the CAS is
// only a flag (Apetrei 2014; ArborX).  flags[] must hold -1; every flag is
// back at -1 when the kernel ends.
template <typename T, int D>
__global__ void k_build(const unsigned char* __restrict__ delta, const Pt<T, D>* __restrict__ P,
                        const u64* __restrict__ tab, int n, Node<T, D>* nodes, int* flags,
                        int* __restrict__ far) {
  int i = thread_index();
  if (i >= n) return;
  int l = i, r = i;
  T lo[D], hi[D];
#pragma unroll
  for (int a = 0; a < D; ++a) { lo[a] = FT<T>::inf(); hi[a] = -FT<T>::inf(); }
  leaf_box<T, D>(P, tab, i, lo, hi);
  while (true) {
    bool left = is_left_child(delta, l, r, n);
    int s = left ? r : l - 1;
    __threadfence();
    int other = atomicCAS(&flags[s], -1, left ? l : r);
    if (other == -1) return;  // the sibling is not finished: it will go on
    __threadfence();
    flags[s] = -1;
    int sib, pl, pr;
    bool sib_leaf;
    if (left) {
      sib = r + 1; sib_leaf = (other == r + 1); pl = l; pr = other;
    } else {
      sib = l - 1; sib_leaf = (other == l - 1); pl = other; pr = r;
    }
    if (sib_leaf) {
      leaf_box<T, D>(P, tab, sib, lo, hi);
    } else {
      const Node<T, D>* sn = nodes + sib;
#pragma unroll
      for (int a = 0; a < D; ++a) {
        T v = __ldcg(&sn->lo[a]);
        T w = __ldcg(&sn->hi[a]);
        if (v < lo[a]) lo[a] = v;
        if (w > hi[a]) hi[a] = w;
      }
    }
    bool root = (pl == 0 && pr == n - 1);
    int k = root ? 0 : (is_left_child(delta, pl, pr, n) ? pr : pl);
    Node<T, D> nd;
#pragma unroll
    for (int a = 0; a < D; ++a) { nd.lo[a] = lo[a]; nd.hi[a] = hi[a]; }
    nd.split = s;
    nd.label = -1;  // every node is mixed while all points are singletons
    nodes[k] = nd;
    far[k] = k == pl ? pr : pl;  // the range's other end, for the label pass
    if (root) return;
    l = pl;
    r = pr;
  }
}

// ---------------------------------------------------------------------------
// 3. label reduction: a node is pure (all its points one component) exactly
// when no label changes between neighbouring points inside its range, so it
// reads two prefix counts of the changes along the tree order.  The counts
// are kept a word per 32 points: the word's change bits (bit b: point
// 32 w + b and the next differ) and the changes up to the word's end (an
// inclusive sum over the words' counts, CuPy's cumsum between the passes).
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_change_bits(const Pt<T, D>* __restrict__ P, int n, u32* __restrict__ bits,
                              int* __restrict__ count) {
  int i = thread_index();  // no early return: the whole warp takes part in the ballot
  bool c = i + 1 < n && P[i].label != P[i + 1].label;
#ifdef EMST_EMULATE
  if (i < n) {
    int w = i >> 5;
    if ((i & 31) == 0) { bits[w] = 0; count[w] = 0; }  // threads run in order
    if (c) { bits[w] |= 1u << (i & 31); count[w] += 1; }
  }
#else
  u32 m = __ballot_sync(0xffffffffu, c);  // blocks are whole warps: lane = i & 31
  if ((i & 31) == 0 && i < n) {
    bits[i >> 5] = m;
    count[i >> 5] = __popc(m);
  }
#endif
}

// the number of label changes between neighbouring points before point a:
// those up to the end of its word less those of the word from a on
__device__ __forceinline__ int changes_before(const u32* __restrict__ bits,
                                              const int* __restrict__ upto, int a) {
  int w = a >> 5;
  return upto[w] - __popc(bits[w] >> (a & 31));
}

// one thread a node: its points [a, b] are one component's when no label
// changes between a and b
template <typename T, int D>
__global__ void k_node_labels(const Pt<T, D>* __restrict__ P, const u64* __restrict__ tab,
                              const int* __restrict__ far, const u32* __restrict__ bits,
                              const int* __restrict__ upto, int m, Node<T, D>* nodes) {
  int k = thread_index();
  if (k >= m) return;  // m: the nodes
  int e = far[k];
  int f = k < e ? k : e, l = k < e ? e : k;
  int a = leaf_of(tab, f).first;
  Leaf z = leaf_of(tab, l);
  int b = z.first + (z.two ? 1 : 0);
  bool pure = changes_before(bits, upto, a) == changes_before(bits, upto, b);
  nodes[k].label = pure ? P[a].label : -1;
}
