// Single-tree Boruvka EMST: the CUDA kernels of emst_dask's "cuda" backend.
// This file holds what every stage shares (conventions, the data layout,
// float traits, records, distances, leaves); the kernels follow in
// construction.cu, search.cu and core_distances.cu (then queries.cu), which
// backend.py joins after it into one program.
//
// Compiled at first use by NVRTC (cupy.RawModule), one module per
// (float type T, dimension D); every kernel is a template instantiated
// through name expressions.  No host headers: NVRTC has none.  The same
// program also compiles as plain C++ for the test emulator (tests/cuda_emu),
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

