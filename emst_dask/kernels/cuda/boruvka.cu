// Single-tree Boruvka EMST: the CUDA kernels of emst_dask's "cuda" backend.
//
// Compiled at first use by NVRTC (cupy.RawModule), one module per
// (float type T, dimension D); every kernel is a template instantiated
// through name expressions.  No host headers: NVRTC has none.  The same
// file also compiles as plain C++ for the test emulator (tests/cuda_emu),
// which supplies the few CUDA built-ins used here.
//
// Conventions (identical to the numba CPU kernels, emst_dask/kernels/cpu.py):
//  * all distances are squared; w = |x_i - x_j|^2, or for mutual
//    reachability max(core2_i, core2_j, |x_i - x_j|^2);
//  * arithmetic is explicitly rounded (__fadd_rn, __fmul_rn...): no fused
//    multiply-add, so a weight computed twice, in any kernel, is the same
//    bits (the component minimum below relies on it) and equals the CPU's;
//  * an edge compares by (w, min(orig_u, orig_v), max(orig_u, orig_v)) on
//    ORIGINAL input rows; for a fixed query point i that is (w, orig_j);
//  * everything lives in tree (Morton) order; orig[p] maps a tree position to
//    its input row; int32 positions (n < 2^31).
//
// Data layout
//  * Pt<T,D>   : the point (D coordinates) and its component label, 16 bytes
//                for 3-D float32: one 128-bit load gives what a leaf test needs.
//  * leaves    : the radix tree over the points, with every node of two
//                points made one leaf: leaf l holds one point or two
//                (about 36% of the points' nodes are such pairs, so the
//                tree keeps about 0.64 n nodes; its hierarchy is the points'
//                tree's, unchanged above the pairs).  tab[l >> 5]: low word
//                the first point of leaf 32 (l >> 5), bit b of the high word
//                set when leaf 32 (l >> 5) + b holds two points (8 bytes a
//                32 leaves; leaf_of below).  Leaf ranges and splits count
//                leaves; the L leaves and L - 1 nodes.
//  * Node<T,D> : one internal node of the binary radix tree over the leaves
//                (Karras 2012 numbering: internal node k covers a range
//                [f, l] with k == f or k == l; its children are gamma and
//                gamma + 1, leaves when gamma == f resp. gamma + 1 == l):
//                box, split gamma and the node's component label (-1 =
//                mixed).  32 bytes in 3-D float32: two 128-bit loads.  Node
//                ranges are not stored: traversals derive them from the
//                parent's range and split.
//  * delta[i]  : common-prefix length of the augmented keys (code, fine
//                code, i) and those of i+1, one byte; with it the tree is
//                built bottom-up (Apetrei 2014), over the leaves with the
//                deltas where leaves meet.  Construction only: the label
//                walk finds each parent from the splits and one bit a leaf
//                (`side`, below), so delta is freed with the codes.
//  * side[w]   : bit b of word w is set when leaf 32 w + b is its parent's
//                left child (L / 8 bytes).
//
// Boruvka state (indexed by tree position; a component is named by the
// position of its representative, labels[C] == C):
//  * best[C] (u64) : float: (bits(w) << 32) | min(orig_u, orig_v) of the best
//                    edge known; its high word is the component's shared
//                    search radius, lowered with 64-bit atomicMin.
//                    double: the weight's bits (the radius); key2[C] holds
//                    (min orig << 32 | orig of the source) for the tie pass.
//                    After the merge, an absorbed representative's slot keeps
//                    its edge as (src position << 32 | dst position): every
//                    position but the final root is absorbed exactly once, so
//                    the n-1 edges need no separate array.
//  * cl[i]         : i's certified candidate or its lower bound, one word
//                    (the float's width; the CL traits below):
//      - ~j (< 0)    j is i's nearest point in another component, certified
//                    exact (everything nearer was searched).  A certified
//                    candidate stays exact while its point stays foreign (the
//                    foreign set only shrinks), so it answers later
//                    iterations without a search.  i's lower bound is then
//                    w(i, j) itself: every bound ever raised is at most the
//                    weight of an edge to a foreign point, and the search
//                    that certified j raised it to w(i, j); so when j joins
//                    i's component the bound w(i, j) is put back, the same
//                    value a separate array would hold.
//      - bits >= 0   no candidate: the bits of a lower bound on i's distance
//                    to any foreign point (a float >= 0).
//  * aux[]         : int scratch: CAS flags of the bottom-up passes (kept at
//                    -1 between them), the tie minimum, the merge pointers.

#ifndef EMST_EMULATE
typedef unsigned int u32;
typedef unsigned long long u64;
#endif

#define EMST_STACK 168  // > 160: the tree depth bound (64 + 64 code bits, 32 index bits)
#define EMST_INT_MAX 0x7fffffff

// ---------------------------------------------------------------------------
// float traits: explicitly rounded arithmetic, infinity, keys
// ---------------------------------------------------------------------------
template <typename T> struct FT;

template <> struct FT<float> {
  static __device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
  static __device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
  static __device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
  static __device__ __forceinline__ float inf() { return __int_as_float(0x7f800000); }
  // component key: weight bits high, smaller original row low
  static __device__ __forceinline__ u64 key(float w, int a) {
    return ((u64)__float_as_uint(w) << 32) | (u64)(u32)a;
  }
  static __device__ __forceinline__ float radius(u64 b) { return __uint_as_float((u32)(b >> 32)); }
};

template <> struct FT<double> {
  static __device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
  static __device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
  static __device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }
  static __device__ __forceinline__ double inf() { return __longlong_as_double(0x7ff0000000000000LL); }
  static __device__ __forceinline__ u64 key(double w, int) { return (u64)__double_as_longlong(w); }
  static __device__ __forceinline__ double radius(u64 b) { return __longlong_as_double((long long)b); }
};

// cl[] words: a candidate j as ~j (negative), else a lower bound's bits (>= 0)
template <typename T> struct CL;
template <> struct CL<float> {
  typedef int word;
  static __device__ __forceinline__ word of(float lo) {
    return (int)(__float_as_uint(lo) & 0x7fffffffu);  // a -0 reads as +0, never as a candidate
  }
  static __device__ __forceinline__ float lower(word v) { return __uint_as_float((u32)v); }
};
template <> struct CL<double> {
  typedef long long word;
  static __device__ __forceinline__ word of(double lo) {
    return __double_as_longlong(lo) & 0x7fffffffffffffffLL;
  }
  static __device__ __forceinline__ double lower(word v) { return __longlong_as_double(v); }
};
// the candidate of a word, or -1
template <typename W> __device__ __forceinline__ int cl_cand(W v) { return v < 0 ? (int)~v : -1; }

// best[] initial value: +inf radius (and, for float, the largest tie key)
template <typename T> struct KeyInit;
template <> struct KeyInit<float> { static const u64 value = 0x7f800000ffffffffULL; };
template <> struct KeyInit<double> { static const u64 value = 0x7ff0000000000000ULL; };

// ---------------------------------------------------------------------------
// records
// ---------------------------------------------------------------------------
template <typename T, int D> struct RecAlign {
  static const int pt_raw = D * (int)sizeof(T) + 4;
  static const int pt = pt_raw <= 8 ? 8 : 16;
  static const int node = 16;
};

template <typename T, int D> struct alignas(RecAlign<T, D>::pt) Pt {
  T x[D];
  int label;
};

template <typename T, int D> struct alignas(RecAlign<T, D>::node) Node {
  T lo[D];
  T hi[D];
  int split;
  int label;
};

template <typename T> struct StackEntry {
  int f;      // first leaf of the range, ~f when the box is a single point
  int l;      // last leaf
  int split;  // the node's split
  T d;        // its distance when pushed
};

__device__ __forceinline__ int thread_index() {
  return (int)(blockIdx.x * blockDim.x + threadIdx.x);
}

// A periodic box (modules compiled with EMST_PERIODIC): every coordinate in
// [0, L) per axis, distances under the minimum image.  The lengths live in
// constant memory (set by the host before each launch); plain modules do
// not have them, so open space pays nothing.
#ifdef EMST_PERIODIC
__constant__ float emst_period_f[8];
__constant__ double emst_period_d[8];
template <typename T> __device__ __forceinline__ T period(int q);
template <> __device__ __forceinline__ float period<float>(int q) { return emst_period_f[q]; }
template <> __device__ __forceinline__ double period<double>(int q) { return emst_period_d[q]; }

// |a - b| on axis q the short way round: the way round as (L - hi) + lo,
// not L - (hi - lo): L - hi is exact where the way round can win (hi >= L/2),
// so each way has one rounding of its own (the CPU kernels' formula).
template <typename T>
__device__ __forceinline__ T axis_gap(T a, T b, int q) {
  T hi = a < b ? b : a;
  T lo = a < b ? a : b;
  T t = FT<T>::sub(hi, lo);
  T u = FT<T>::add(FT<T>::sub(period<T>(q), hi), lo);
  return u < t ? u : t;
}
#else
template <typename T>
__device__ __forceinline__ T axis_gap(T a, T b, int) { return FT<T>::sub(a, b); }
#endif

template <typename T, int D>
__device__ __forceinline__ T dist2(const T* a, const T* b) {
  T t = axis_gap<T>(a[0], b[0], 0);
  T s = FT<T>::mul(t, t);
#pragma unroll
  for (int q = 1; q < D; ++q) {
    t = axis_gap<T>(a[q], b[q], q);
    s = FT<T>::add(s, FT<T>::mul(t, t));
  }
  return s;
}

// squared distance to a box: a lower bound on dist2 to every point inside.
// Periodic: the way round is dist2's formula at the box's far corner, so
// (rounding being monotone) it never exceeds any inside point's distance.
template <typename T, int D>
__device__ __forceinline__ T box_dist2(const T* x, const T* lo, const T* hi) {
  T s = (T)0;
#pragma unroll
  for (int q = 0; q < D; ++q) {
    T t = (T)0;
    if (x[q] < lo[q]) {
      t = FT<T>::sub(lo[q], x[q]);
#ifdef EMST_PERIODIC
      T u = FT<T>::add(FT<T>::sub(period<T>(q), hi[q]), x[q]);
      if (u < t) t = u;
#endif
    } else if (x[q] > hi[q]) {
      t = FT<T>::sub(x[q], hi[q]);
#ifdef EMST_PERIODIC
      T u = FT<T>::add(FT<T>::sub(period<T>(q), x[q]), lo[q]);
      if (u < t) t = u;
#endif
    }
    s = FT<T>::add(s, FT<T>::mul(t, t));
  }
  return s;
}

template <typename T, int D>
__device__ __forceinline__ bool degenerate(const Node<T, D>& nd) {
  bool deg = true;
#pragma unroll
  for (int q = 0; q < D; ++q) deg = deg && (nd.lo[q] == nd.hi[q]);
  return deg;
}

template <typename T>
__device__ __forceinline__ T tmax(T a, T b) { return a > b ? a : b; }

// the metric, given the squared distance and both core distances
template <typename T, bool MRD>
__device__ __forceinline__ T metric(T d2, T ci, T cj) {
  T w = d2;
  if (MRD) {
    if (ci > w) w = ci;
    if (cj > w) w = cj;
  }
  return w;
}

// is the node covering [l, r] the left child of its parent?  (Not the root.)
__device__ __forceinline__ bool is_left_child(const unsigned char* delta, int l, int r, int n) {
  if (l == 0) return true;
  if (r == n - 1) return false;
  return delta[r] > delta[l - 1];
}

// points i and i + 1 are one node of the points' tree (n points): leaf i is
// a left child and leaf i + 1 a right one, so both hang from split i
__device__ __forceinline__ bool is_pair(const unsigned char* delta, int i, int n) {
  return i < n - 1 && is_left_child(delta, i, i, n) && !is_left_child(delta, i + 1, i + 1, n);
}

// leaf l of the tree: its first point, and whether it holds a second
struct Leaf {
  int first;
  bool two;
};
__device__ __forceinline__ Leaf leaf_of(const u64* __restrict__ tab, int l) {
  u64 t = tab[l >> 5];
  u32 mask = (u32)(t >> 32);
  int b = l & 31;
  Leaf f;
  f.first = (int)(u32)t + b + __popc(mask & ((1u << b) - 1u));
  f.two = (mask >> b) & 1u;
  return f;
}

// ---------------------------------------------------------------------------
// size check: Python mirrors the record sizes
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_sizes(int* out) {
  if (thread_index() == 0) {
    out[0] = (int)sizeof(Pt<T, D>);
    out[1] = (int)sizeof(Node<T, D>);
  }
}

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

// side[w], bit b: leaf 32 w + b is its parent's left child (one thread a
// word of 32 leaves; n >= 2 leaves, delta the leaves').  The label walk
// starts from these bits.
template <typename T, int D>
__global__ void k_sides(const unsigned char* __restrict__ delta, int n, u32* __restrict__ side) {
  int w = thread_index();
  if (w >= ((n + 31) >> 5)) return;
  int first = w << 5;
  u32 bits = 0;
  for (int b = 0; b < 32 && first + b < n; ++b)
    if (is_left_child(delta, first + b, first + b, n)) bits |= 1u << b;
  side[w] = bits;
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

// the common component label of leaf l's points, or -1
template <typename T, int D>
__device__ __forceinline__ int leaf_label(const Pt<T, D>* P, const u64* tab, int l) {
  Leaf f = leaf_of(tab, l);
  int L = P[f.first].label;
  if (f.two && P[f.first + 1].label != L) L = -1;
  return L;
}

// Bottom-up construction, one thread per leaf (n leaves here, delta the
// leaves'): a thread holding the finished subtree [l, r] flags its parent's
// split with a CAS; the first to arrive leaves, the second merges its
// sibling's box and writes the parent.  Boxes are written once; the CAS is
// only a flag (Apetrei 2014; ArborX).  flags[] must hold -1; every flag is
// back at -1 when the kernel ends.
template <typename T, int D>
__global__ void k_build(const unsigned char* __restrict__ delta, const Pt<T, D>* __restrict__ P,
                        const u64* __restrict__ tab, int n, Node<T, D>* nodes, int* flags) {
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
    if (root) return;
    l = pl;
    r = pr;
  }
}

// ---------------------------------------------------------------------------
// 3. label reduction: the same bottom-up walk; a node gets its children's
// common label, or -1 (mixed).  Without delta: a leaf's side is its bit in
// side[]; an internal node [l, r] is stored at r when it is a left child and
// at l otherwise (Karras), so the walker knows the side of the node it
// holds, and the parent [pl, pr] with split s is the node at pr exactly when
// that node's split is s (every split is one node's).
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_climb(const u32* __restrict__ side, const Pt<T, D>* __restrict__ P,
                        const u64* __restrict__ tab, int n, Node<T, D>* nodes, int* flags) {
  int i = thread_index();
  if (i >= n) return;  // n: the leaves
  int l = i, r = i;
  bool left = (side[i >> 5] >> (i & 31)) & 1u;
  int L = leaf_label<T, D>(P, tab, i);
  while (true) {
    int s = left ? r : l - 1;
    __threadfence();
    int other = atomicCAS(&flags[s], -1, left ? l : r);
    if (other == -1) return;
    __threadfence();
    flags[s] = -1;
    int sib, pl, pr;
    bool sib_leaf;
    if (left) {
      sib = r + 1; sib_leaf = (other == r + 1); pl = l; pr = other;
    } else {
      sib = l - 1; sib_leaf = (other == l - 1); pl = other; pr = r;
    }
    int Ls = sib_leaf ? leaf_label<T, D>(P, tab, sib) : __ldcg(&nodes[sib].label);
    if (Ls != L) L = -1;
    bool root = (pl == 0 && pr == n - 1);
    // (the walk writes labels only: the splits read here are the build's)
    left = !root && pr < n - 1 && nodes[pr].split == s;
    int k = root ? 0 : (left ? pr : pl);
    nodes[k].label = L;
    if (root) return;
    l = pl;
    r = pr;
  }
}

// ---------------------------------------------------------------------------
// 4. upper bounds on each component's shortest outgoing edge, before the
// search: Morton neighbours in different components (the paper's), and every
// certified candidate that is still foreign (exact for its point).  A
// candidate that has joined its point's component is dropped: its weight
// becomes the point's lower bound again.
// ---------------------------------------------------------------------------
template <typename T, int D, bool MRD>
__global__ void k_bounds(const Pt<T, D>* __restrict__ P, const int* __restrict__ orig,
                         const T* __restrict__ core2, typename CL<T>::word* __restrict__ cl,
                         u64* best, int n) {
  int i = thread_index();
  if (i >= n) return;
  Pt<T, D> pi = P[i];
  int C = pi.label;
  T ci = MRD ? core2[i] : (T)0;
  if (i + 1 < n) {
    Pt<T, D> pn = P[i + 1];
    if (pn.label != C) {
      T w = metric<T, MRD>(dist2<T, D>(pi.x, pn.x), ci, MRD ? core2[i + 1] : (T)0);
      int oi = orig[i], on = orig[i + 1];
      u64 key = FT<T>::key(w, oi < on ? oi : on);
      atomicMin(&best[C], key);
      atomicMin(&best[pn.label], key);
    }
  }
  int j = cl_cand(cl[i]);
  if (j >= 0) {
    Pt<T, D> pj = P[j];
    T w = metric<T, MRD>(dist2<T, D>(pi.x, pj.x), ci, MRD ? core2[j] : (T)0);
    if (pj.label != C) {
      int oi = orig[i], oj = orig[j];
      u64 key = FT<T>::key(w, oi < oj ? oi : oj);
      if (key < __ldcg(&best[C])) atomicMin(&best[C], key);
    } else {
      cl[i] = CL<T>::of(w);  // joined: the candidate's weight is i's lower bound
    }
  }
}

// ---------------------------------------------------------------------------
// 4b. the work list of the search (iterations after the first): the points
// with no still-foreign certified candidate whose lower bound does not
// exceed their component's radius.  Appended warp by warp (one atomicAdd a
// warp, lanes in order), so the search runs dense, mostly Morton-coherent
// warps instead of warps where a few lanes search and the rest wait.
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_select(const Pt<T, D>* __restrict__ P,
                         const typename CL<T>::word* __restrict__ cl,
                         const u64* __restrict__ best, int* __restrict__ list, int* count, int n) {
  int i = thread_index();
  bool need = false;
  if (i < n) {
    typename CL<T>::word v = cl[i];
    if (v >= 0) {  // no candidate: v is the lower bound
      int C = P[i].label;
      need = !(CL<T>::lower(v) > FT<T>::radius(best[C]));
    }
  }
#ifdef EMST_EMULATE
  if (need) list[atomicAdd(count, 1)] = i;
#else
  unsigned active = __activemask();
  unsigned mask = __ballot_sync(active, need);
  if (mask == 0) return;
  int lane = (int)(threadIdx.x & 31);
  int leader = __ffs(mask) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(count, __popc(mask));
  base = __shfl_sync(active, base, leader);
  if (need) list[base + __popc(mask & ((1u << lane) - 1u))] = i;
#endif
}

// ---------------------------------------------------------------------------
// 5. the search: every point's nearest point in another component, under
// (w, orig_j).  One thread per point, in tree order.  FIRST: the first
// iteration, every point its own component: a plain nearest-other-point query.
//
// A leaf holds one point or two (both tested); ranges count leaves (nl).
// Skipped: points with a certified candidate (answered by k_bounds), and
// points whose lower bound exceeds their component's radius.  The radius is
// shared by the component (best[C]'s high word) and re-read as the search
// goes.  Subtrees whose label is the query's component are skipped; a
// subtree whose points are all one point, at exactly the best distance and
// with a larger original row than the best's, is skipped too (duplicates).
// Closest child first; a stack of EMST_STACK entries (the depth bound is 160).
// ---------------------------------------------------------------------------
template <typename T, int D, bool MRD, bool FIRST>
__global__ void __launch_bounds__(256)
k_search(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
         const u64* __restrict__ tab, const int* __restrict__ orig, const T* __restrict__ core2,
         typename CL<T>::word* __restrict__ clw, u64* best, int n, int nl, int* list,
         const int* count) {
  int i = thread_index();
  if (FIRST) {
    if (i >= n) return;
  } else {
    // later iterations: the k_select work list, which lives in aux[]; each
    // slot is put back to -1 (aux's resting value) once read
    int t = i;
    if (t >= *count) return;
    i = list[t];
    list[t] = -1;
  }
  const T inf = FT<T>::inf();
  Pt<T, D> pi = P[i];
  const int C = FIRST ? i : pi.label;
  // a listed point has no candidate: its word is its lower bound (the
  // first iteration's words are all zero)
  const T lower = FIRST ? (T)0 : CL<T>::lower(clw[i]);
  if (!FIRST) {
    // the radius may have shrunk since the selection
    if (lower > FT<T>::radius(__ldcg(&best[C]))) return;
  }
  const T ci = MRD ? core2[i] : (T)0;
  T bw = inf;
  int bo = EMST_INT_MAX;
  int bj = -1;
  // the smallest distance of a subtree pruned for its distance: no foreign
  // point is nearer than min(bw, pruned) (label-pruned subtrees hold none)
  T pruned = inf;

  // a leaf candidate j
#define EMST_LEAF(J)                                                                 \
  {                                                                                  \
    int j_ = (J);                                                                    \
    Pt<T, D> pj_ = P[j_];                                                            \
    if (FIRST ? (j_ != i) : (pj_.label != C)) {                                      \
      T w_ = metric<T, MRD>(dist2<T, D>(pi.x, pj_.x), ci, MRD ? core2[j_] : (T)0);   \
      if (w_ <= bw) {                                                                \
        int o_ = orig[j_];                                                           \
        if (w_ < bw || o_ < bo) { bw = w_; bo = o_; bj = j_; }                       \
      }                                                                              \
    }                                                                                \
  }

  // leaf B: its one point or two
#define EMST_LEAVES(B)                        \
  {                                           \
    Leaf lf_ = leaf_of(tab, (B));             \
    EMST_LEAF(lf_.first)                      \
    if (lf_.two) EMST_LEAF(lf_.first + 1)     \
  }

  // the Morton neighbours first: usually close, they start the radius small
  if (i > 0) EMST_LEAF(i - 1)
  if (i + 1 < n) EMST_LEAF(i + 1)

  StackEntry<T> stack[EMST_STACK];
  int sp = 0;
  // one leaf (n <= 2): the neighbours were every point
  int cf = 0, cl = nl - 1, cs = nl > 1 ? nodes[0].split : 0;
  // the root's own label: nothing foreign when it is C (cannot happen while
  // two components are left, but costs nothing)
  bool go = nl > 1 && (FIRST || nodes[0].label != C);
  while (go) {
    T rr = bw;
    if (!FIRST) {
      T rc = FT<T>::radius(__ldcg(&best[C]));
      if (rc < rr) rr = rc;
    }
    const int g = cs;
    bool goL = false, goR = false, degL = false, degR = false;
    T dL = inf, dR = inf;
    int sL = 0, sR = 0;
    // left child [cf, g]
    if (g == cf) {
      EMST_LEAVES(g)
    } else {
      Node<T, D> nd = nodes[g];
      if (FIRST || nd.label != C) {
        dL = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
        if (MRD && ci > dL) dL = ci;
        goL = true;
        sL = nd.split;
        degL = degenerate<T, D>(nd);
      }
    }
    // right child [g + 1, cl]
    if (g + 1 == cl) {
      EMST_LEAVES(g + 1)
    } else {
      Node<T, D> nd = nodes[g + 1];
      if (FIRST || nd.label != C) {
        dR = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
        if (MRD && ci > dR) dR = ci;
        goR = true;
        sR = nd.split;
        degR = degenerate<T, D>(nd);
      }
    }
    if (bw < rr) rr = bw;
    if (goL && dL > rr) { goL = false; if (dL < pruned) pruned = dL; }
    if (goR && dR > rr) { goR = false; if (dR < pruned) pruned = dR; }
    // (a degenerate subtree's first point has its smallest row: equal
    // points are in input-row order)
    if (goL) goL = !(dL == bw && degL && orig[leaf_of(tab, cf).first] > bo);
    if (goR) goR = !(dR == bw && degR && orig[leaf_of(tab, g + 1).first] > bo);
    if (goL && goR) {
      if (dL <= dR) {  // nearer first, ties to the left
        StackEntry<T> e; e.f = degR ? ~(g + 1) : (g + 1); e.l = cl; e.split = sR; e.d = dR;
        stack[sp++] = e;
        cl = g; cs = sL;
      } else {
        StackEntry<T> e; e.f = degL ? ~cf : cf; e.l = g; e.split = sL; e.d = dL;
        stack[sp++] = e;
        cf = g + 1; cs = sR;
      }
    } else if (goL) {
      cl = g; cs = sL;
    } else if (goR) {
      cf = g + 1; cs = sR;
    } else {
      go = false;
      while (sp > 0) {
        StackEntry<T> e = stack[--sp];
        bool deg = e.f < 0;
        int f = deg ? ~e.f : e.f;
        if (e.d > rr) { if (e.d < pruned) pruned = e.d; continue; }
        if (e.d == bw && deg && orig[leaf_of(tab, f).first] > bo) continue;
        cf = f; cl = e.l; cs = e.split;
        go = true;
        break;
      }
    }
  }
#undef EMST_LEAVES
#undef EMST_LEAF

  // Nothing foreign is nearer than min(bw, pruned): subtrees pruned for their
  // label hold no foreign point, the others are at least `pruned` away, and
  // the tie-pruned ones at least bw.  bw < pruned certifies bj as i's exact
  // nearest foreign point under (w, orig) (a tie at `pruned` could hide a
  // smaller row).  Every candidate that can be its component's shortest
  // edge (bw <= final radius) is certified: pruned subtrees were beyond
  // min(radius, bw) of their time, and both only shrink.
  // (certified: the lower bound is bw itself, implied by the candidate)
  if (bj >= 0 && bw < pruned) {
    clw[i] = ~(typename CL<T>::word)bj;
    if (!FIRST) {
      int oi = orig[i];
      u64 key = FT<T>::key(bw, oi < bo ? oi : bo);
      if (key < __ldcg(&best[C])) atomicMin(&best[C], key);
    }
  } else {
    T lb = bw < pruned ? bw : pruned;
    if (FIRST || lb > lower) clw[i] = CL<T>::of(lb > lower ? lb : lower);
  }
}

// ---------------------------------------------------------------------------
// 6. component minima under the strict order, after the search.
// k_ties: every point's lower bound rises to its component's shortest edge
// (valid once merged); candidates equal to the component's best (w, min orig)
// (double: best w) take part in an atomicMin of the source's original row
// (double: of (min orig << 32 | source orig)).  Given (w, min orig), the
// smallest source row is the smallest (min, max) pair: either the min row is
// the source itself (one candidate), or all tying edges share the foreign end
// and max = source row.
// ---------------------------------------------------------------------------
template <typename T, int D, bool MRD>
__global__ void k_ties(const Pt<T, D>* __restrict__ P, const int* __restrict__ orig,
                       const T* __restrict__ core2, typename CL<T>::word* __restrict__ cl,
                       const u64* __restrict__ best, int* aux, u64* key2, int n) {
  int i = thread_index();
  if (i >= n) return;
  Pt<T, D> pi = P[i];
  int C = pi.label;
  u64 B = best[C];
  T wstar = FT<T>::radius(B);
  typename CL<T>::word v = cl[i];
  if (v >= 0) {  // no candidate: raise the lower bound
    if (wstar > CL<T>::lower(v)) cl[i] = CL<T>::of(wstar);
    return;
  }
  // a candidate's bound, w(i, j), is not below its component's shortest edge
  int j = (int)~v;
  Pt<T, D> pj = P[j];
  T w = metric<T, MRD>(dist2<T, D>(pi.x, pj.x), MRD ? core2[i] : (T)0, MRD ? core2[j] : (T)0);
  int oi = orig[i], oj = orig[j];
  int a = oi < oj ? oi : oj;
  if (FT<T>::key(w, a) != B) return;
  if (sizeof(T) == 4) {
    atomicMin((u32*)&aux[C], (u32)oi);
  } else {
    atomicMin(&key2[C], ((u64)(u32)a << 32) | (u64)(u32)oi);
  }
}

// k_winner: the candidate whose source row won marks its component:
// aux[C] = -2 - i (at most -2: never a row, nor the rest value -1, which
// ~i would be for position 0 and so skip that component's merge).
template <typename T, int D>
__global__ void k_winner(const Pt<T, D>* __restrict__ P, const int* __restrict__ orig,
                         const typename CL<T>::word* __restrict__ cl, int* aux,
                         const u64* __restrict__ key2, int n) {
  int i = thread_index();
  if (i >= n) return;
  if (cl[i] >= 0) return;  // no candidate
  int C = P[i].label;
  u32 oi = (u32)orig[i];
  if (sizeof(T) == 4) {
    if ((u32)aux[C] == oi) aux[C] = -2 - i;
  } else {
    u64 K = key2[C];
    if (K != ~0ULL && (u32)K == oi) aux[C] = -2 - i;
  }
}

// ---------------------------------------------------------------------------
// 7. merge.  Representatives only (P[C].label == C).
// k_merge_next: C's edge (win, cand[win]) goes into its edge slot, and
// aux[C] = next(C) = the label of the edge's far end.
// ---------------------------------------------------------------------------
template <typename T, int D>
__global__ void k_merge_next(const Pt<T, D>* __restrict__ P,
                             const typename CL<T>::word* __restrict__ cl, int* aux, u64* edges,
                             int n, int first) {
  int C = thread_index();
  if (C >= n) return;
  if (P[C].label != C) return;
  int win;
  if (first) {
    win = C;
  } else {
    int a = aux[C];
    win = a < -1 ? -2 - a : -1;
  }
  if (win < 0) {  // no outgoing edge (a single component left)
    aux[C] = C;
    return;
  }
  int j = (int)~cl[win];  // the winner holds a candidate
  edges[C] = ((u64)(u32)win << 32) | (u64)(u32)j;
  aux[C] = P[j].label;
}

// k_record_picks (optional, for the HDBSCAN* dendrogram): between
// k_merge_next and k_merge_roots, so that aux[] still holds every
// representative's far component.  A component's pick lives in the slot of
// the representative that will be absorbed along it: its own, or its
// partner's when it is the root of a mutual pair (side 1, stored as ~slot).
// Thread p records, for itself as a point (first iteration) or for the edge
// its slot got in the iteration before, the pick of the component that now
// holds it; the edges picked in the last iteration keep EMST_INT_MAX (the
// root chain).  rec_round[p] is the iteration p's slot got its edge: a slot
// that got it before the last iteration has nothing left to record, and
// returns after a one-byte read (most slots, after the first iterations).
template <typename T, int D>
__global__ void k_record_picks(const Pt<T, D>* __restrict__ P, const int* __restrict__ aux,
                               int* rec_point, int* rec_edge, unsigned char* rec_round,
                               int n, int it) {
  int p = thread_index();
  if (p >= n) return;
  unsigned char got = rec_round[p];
  if (it > 0 && got != 255 && got != (unsigned char)(it - 1)) return;
  int C = P[p].label;
  int Dn = aux[C];
  bool root = Dn != C && aux[Dn] == C && C < Dn;
  int slot = root ? Dn : C;
  int enc = root ? ~slot : slot;
  if (it == 0) {
    rec_point[p] = enc;
  } else if (C != p && got == (unsigned char)(it - 1)) {
    rec_edge[p] = enc;
  }
  if (C == p && !root) rec_round[p] = (unsigned char)it;
}

// k_record_rank, k_record_edges, k_record_points (hierarchy=True, after
// k_finalize): the recorded picks renamed from tree slots to the edges'
// ranks in the strict edge order (order[r] = the edge of rank r), one thread
// an item.  Edge e sits in slot e, or e + 1 past the root's.
template <typename T, int D>
__global__ void k_record_rank(const long long* __restrict__ order, int* __restrict__ rank,
                              int m) {
  int r = thread_index();
  if (r >= m) return;
  rank[order[r]] = r;
}

// a recorded slot (~slot on side 1) -> its edge
__device__ __forceinline__ int record_slot_edge(int enc, int root) {
  int q = enc >= 0 ? enc : ~enc;
  return q - (q > root ? 1 : 0);
}

template <typename T, int D>
__global__ void k_record_edges(const long long* __restrict__ order, const int* __restrict__ rank,
                               const int* __restrict__ rec_edge,
                               const unsigned char* __restrict__ rec_round, int root, int m,
                               int* __restrict__ alpha, signed char* __restrict__ side,
                               unsigned char* __restrict__ round) {
  int r = thread_index();
  if (r >= m) return;
  int e = (int)order[r];
  int slot = e < root ? e : e + 1;
  int enc = rec_edge[slot];
  alpha[r] = enc == EMST_INT_MAX ? -1 : rank[record_slot_edge(enc, root)];
  side[r] = enc < 0 ? 1 : 0;
  round[r] = rec_round[slot];
}

// A point is alone on its chain, the child of its first pick on its side:
// its row goes straight to that slot of the dendrogram's (m, 2) children,
// children[2 rank + side] (every other slot holds -1).
template <typename T, int D>
__global__ void k_record_points(const int* __restrict__ orig, const int* __restrict__ rank,
                                const int* __restrict__ rec_point, int root, int n,
                                int* __restrict__ point_children) {
  int p = thread_index();
  if (p >= n) return;
  int enc = rec_point[p];
  point_children[2 * (long long)rank[record_slot_edge(enc, root)] + (enc < 0 ? 1 : 0)] =
      orig[p];
}

// k_merge_roots: under a strict order the only cycles are 2-cycles over one
// shared edge; the smaller representative of such a pair becomes the root
// (and drops its copy of the edge); every other representative adds its edge.
template <typename T, int D>
__global__ void k_merge_roots(const Pt<T, D>* __restrict__ P, int* aux, u64* best, u64* key2,
                              int* counter, int n) {
  int C = thread_index();
  if (C >= n) return;
  if (P[C].label != C) return;
  int Dn = aux[C];
  bool root = (Dn == C);
  if (!root) {
    int E = __ldcg(&aux[Dn]);
    root = (E == C && C < Dn);
    if (root) aux[C] = C;
  }
  if (root) {
    best[C] = KeyInit<T>::value;
    if (sizeof(T) != 4) key2[C] = ~0ULL;
  } else {
    atomicAdd(counter, 1);
  }
}

// k_merge_jump: every representative jumps its own pointer to its
// grandparent until its parent is a root (pointer jumping).  Only the owner
// writes a slot, so no value can be replaced by a lower ancestor (a shared
// halving walk can, and makes every early thread walk and CAS the same long
// chain: quadratic when the root sits at the high end of the tree order).
// At most `steps` jumps a launch; a representative left unfinished sets
// *unfinished, which the host reads together with the edge count and then
// launches again (only chains far longer than real data makes).
template <typename T, int D>
__global__ void k_merge_jump(const Pt<T, D>* __restrict__ P, int* aux, int n, int steps,
                             int* unfinished) {
  int C = thread_index();
  if (C >= n) return;
  if (P[C].label != C) return;
  int p = __ldcg(&aux[C]);
  for (int it = 0; it < steps; ++it) {
    int gp = __ldcg(&aux[p]);
    if (gp == p) return;  // p is a root
    aux[C] = gp;
    p = gp;
  }
  if (__ldcg(&aux[p]) != p) *unfinished = 1;
}

// k_relabel: every point takes its representative's root.
template <typename T, int D>
__global__ void k_relabel(Pt<T, D>* P, const int* __restrict__ aux, int n) {
  int i = thread_index();
  if (i >= n) return;
  int C = P[i].label;
  P[i].label = aux[C];
}

// ---------------------------------------------------------------------------
// 8. output: the n-1 edge slots are every position but the root's
// ---------------------------------------------------------------------------
template <typename T, int D, bool MRD>
__global__ void k_finalize(const Pt<T, D>* __restrict__ P, const int* __restrict__ orig,
                           const T* __restrict__ core2, const u64* __restrict__ edges, int root,
                           int n, long long* __restrict__ src, long long* __restrict__ dst,
                           T* __restrict__ w2) {
  int e = thread_index();
  if (e >= n - 1) return;
  int p = e < root ? e : e + 1;
  u64 E = edges[p];
  int a = (int)(E >> 32), b = (int)(u32)E;
  src[e] = orig[a];
  dst[e] = orig[b];
  w2[e] = metric<T, MRD>(dist2<T, D>(P[a].x, P[b].x), MRD ? core2[a] : (T)0,
                         MRD ? core2[b] : (T)0);
}

// ---------------------------------------------------------------------------
// 9. core distances: the k-th smallest squared distance to another point.
// Only the value matters, so a subtree at exactly the k-th distance cannot
// change it and is pruned (duplicates stay cheap).  KMAX > 0: the k smallest
// in a thread-local array; KMAX == 0: in scratch[i * k ...] (large k).
// ---------------------------------------------------------------------------
template <typename T, int D, int KMAX>
__global__ void __launch_bounds__(256)
k_knn(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
      const u64* __restrict__ tab, int n, int nl, int k, T* __restrict__ core2, T* scratch) {
  int i = thread_index();
  if (i >= n) return;
  const T inf = FT<T>::inf();
  Pt<T, D> pi = P[i];
  T local[KMAX > 0 ? KMAX : 1];
  T* kd = KMAX > 0 ? local : scratch + (long long)i * k;
  int m = 0;

#define EMST_KLEAF(J)                                                  \
  {                                                                    \
    int j_ = (J);                                                      \
    if (j_ != i) {                                                     \
      T w_ = dist2<T, D>(pi.x, P[j_].x);                               \
      if (m < k || w_ < kd[k - 1]) {                                   \
        int p_ = (m < k) ? m++ : k - 1;                                \
        while (p_ > 0 && kd[p_ - 1] > w_) { kd[p_] = kd[p_ - 1]; --p_; } \
        kd[p_] = w_;                                                   \
      }                                                                \
    }                                                                  \
  }

  // seed with the k + 1 neighbours along the curve (the range holds i and
  // at least k others, so the list starts full); the traversal skips them
  int sa = i - k / 2 - 1;
  if (sa > n - 2 - k) sa = n - 2 - k;
  if (sa < 0) sa = 0;
  int sz = sa + k + 1;
  if (sz > n - 1) sz = n - 1;
  for (int j = sa; j <= sz; ++j) EMST_KLEAF(j)

  // leaf B: its points not among the seeds
#define EMST_KLEAVES(B)                                                   \
  {                                                                       \
    Leaf lf_ = leaf_of(tab, (B));                                         \
    if (lf_.first < sa || lf_.first > sz) EMST_KLEAF(lf_.first)           \
    if (lf_.two && (lf_.first + 1 < sa || lf_.first + 1 > sz)) EMST_KLEAF(lf_.first + 1) \
  }

  StackEntry<T> stack[EMST_STACK];
  int sp = 0;
  int cf = 0, cl = nl - 1, cs = nl > 1 ? nodes[0].split : 0;
  bool go = nl > 1;  // one leaf: the seeds were every point
  while (go) {
    T rr = (m < k) ? inf : kd[k - 1];
    const int g = cs;
    bool goL = false, goR = false;
    T dL = inf, dR = inf;
    int sL = 0, sR = 0;
    if (g == cf) {
      EMST_KLEAVES(g)
    } else {
      Node<T, D> nd = nodes[g];
      dL = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
      goL = true;
      sL = nd.split;
    }
    if (g + 1 == cl) {
      EMST_KLEAVES(g + 1)
    } else {
      Node<T, D> nd = nodes[g + 1];
      dR = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
      goR = true;
      sR = nd.split;
    }
    bool full = (m == k);
    if (full) rr = kd[k - 1];
    if (goL) goL = !(full && dL >= rr);
    if (goR) goR = !(full && dR >= rr);
    if (goL && goR) {
      if (dL <= dR) {
        StackEntry<T> e; e.f = g + 1; e.l = cl; e.split = sR; e.d = dR;
        stack[sp++] = e;
        cl = g; cs = sL;
      } else {
        StackEntry<T> e; e.f = cf; e.l = g; e.split = sL; e.d = dL;
        stack[sp++] = e;
        cf = g + 1; cs = sR;
      }
    } else if (goL) {
      cl = g; cs = sL;
    } else if (goR) {
      cf = g + 1; cs = sR;
    } else {
      go = false;
      while (sp > 0) {
        StackEntry<T> e = stack[--sp];
        if (m == k && e.d >= kd[k - 1]) continue;
        cf = e.f; cl = e.l; cs = e.split;
        go = true;
        break;
      }
    }
  }
#undef EMST_KLEAVES
#undef EMST_KLEAF
  core2[i] = kd[k - 1];
}

// The same query with the list in registers: KMAX >= k slots kept sorted by
// a fully unrolled insertion (no run-time index, so no local memory).  The
// first KMAX - k slots hold -1, below any distance and never displaced, so
// the k-th smallest distance is always in the last slot.  For k <= 32.
template <typename T, int KMAX>
__device__ __forceinline__ void kinsert(T (&kd)[KMAX], T w) {
  if (!(w < kd[KMAX - 1])) return;
#pragma unroll
  for (int q = 0; q < KMAX; ++q) {
    T lo = w < kd[q] ? w : kd[q];
    T hi = w < kd[q] ? kd[q] : w;
    kd[q] = lo;
    w = hi;
  }
}

template <typename T, int D, int KMAX>
__global__ void __launch_bounds__(256)
k_knn_reg(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
          const u64* __restrict__ tab, int n, int nl, int k, T* __restrict__ core2) {
  int i = thread_index();
  if (i >= n) return;
  const T inf = FT<T>::inf();
  Pt<T, D> pi = P[i];
  T kd[KMAX];
#pragma unroll
  for (int j = 0; j < KMAX; ++j) kd[j] = (j < KMAX - k) ? (T)-1 : inf;

#define EMST_RLEAF(J)                                                   \
  {                                                                     \
    int j_ = (J);                                                       \
    if (j_ != i) kinsert<T, KMAX>(kd, dist2<T, D>(pi.x, P[j_].x));      \
  }

  int sa = i - k / 2 - 1;
  if (sa > n - 2 - k) sa = n - 2 - k;
  if (sa < 0) sa = 0;
  int sz = sa + k + 1;
  if (sz > n - 1) sz = n - 1;
  for (int j = sa; j <= sz; ++j) EMST_RLEAF(j)
  T kth = kd[KMAX - 1];  // finite: the seeds hold >= k others

  // leaf B: its points not among the seeds
#define EMST_RLEAVES(B)                                                   \
  {                                                                       \
    Leaf lf_ = leaf_of(tab, (B));                                         \
    if (lf_.first < sa || lf_.first > sz) EMST_RLEAF(lf_.first)           \
    if (lf_.two && (lf_.first + 1 < sa || lf_.first + 1 > sz)) EMST_RLEAF(lf_.first + 1) \
  }

  StackEntry<T> stack[EMST_STACK];
  int sp = 0;
  int cf = 0, cl = nl - 1, cs = nl > 1 ? nodes[0].split : 0;
  bool go = nl > 1;  // one leaf: the seeds were every point
  while (go) {
    const int g = cs;
    bool goL = false, goR = false;
    T dL = inf, dR = inf;
    int sL = 0, sR = 0;
    if (g == cf) {
      EMST_RLEAVES(g)
    } else {
      Node<T, D> nd = nodes[g];
      dL = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
      goL = true;
      sL = nd.split;
    }
    if (g + 1 == cl) {
      EMST_RLEAVES(g + 1)
    } else {
      Node<T, D> nd = nodes[g + 1];
      dR = box_dist2<T, D>(pi.x, nd.lo, nd.hi);
      goR = true;
      sR = nd.split;
    }
    kth = kd[KMAX - 1];
    if (goL) goL = dL < kth;
    if (goR) goR = dR < kth;
    if (goL && goR) {
      if (dL <= dR) {
        StackEntry<T> e; e.f = g + 1; e.l = cl; e.split = sR; e.d = dR;
        stack[sp++] = e;
        cl = g; cs = sL;
      } else {
        StackEntry<T> e; e.f = cf; e.l = g; e.split = sL; e.d = dL;
        stack[sp++] = e;
        cf = g + 1; cs = sR;
      }
    } else if (goL) {
      cl = g; cs = sL;
    } else if (goR) {
      cf = g + 1; cs = sR;
    } else {
      go = false;
      while (sp > 0) {
        StackEntry<T> e = stack[--sp];
        if (e.d >= kth) continue;
        cf = e.f; cl = e.l; cs = e.split;
        go = true;
        break;
      }
    }
  }
#undef EMST_RLEAVES
#undef EMST_RLEAF
  core2[i] = kd[KMAX - 1];
}
