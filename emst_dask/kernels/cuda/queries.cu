// Queries of outside points against a fitted cloud's LBVH (lbvh.cuh's
// records and helpers; this file is compiled after the Boruvka kernels): the k-NN distance
// of each query and its nearest point in mutual reachability, for
// HDBSCAN*'s prediction (products/hdbscan/queries).
//
//  * Distances as search.cu computes them (explicit rounding, coordinates
//    summed in order), so the CPU's prediction, summing the same way,
//    gets the same bits.  A box's distance never exceeds that of a point
//    inside it (rounding is monotone), so pruning is exact.
//  * One thread a query; the cloud's tree order; X is (m, D) row-major.

template <typename T> __device__ __forceinline__ T tsqrt(T x);
template <> __device__ __forceinline__ float tsqrt<float>(float x) { return __fsqrt_rn(x); }
template <> __device__ __forceinline__ double tsqrt<double>(double x) { return __dsqrt_rn(x); }

// leaf l's points to v.leaf
template <class V>
__device__ __forceinline__ void visit_leaf(const u64* __restrict__ tab, int l, V& v) {
  Leaf f = leaf_of(tab, l);
  v.leaf(f.first);
  if (f.two) v.leaf(f.first + 1);
}

// Closest child first over the whole tree (nl leaves), calling v.leaf(j) at
// each point of each leaf reached and skipping every box (squared distance
// b) with v.prune(b).
template <typename T, int D, class V>
__device__ __forceinline__ void query_walk(const Pt<T, D>* __restrict__ P,
                                          const Node<T, D>* __restrict__ nodes,
                                          const u64* __restrict__ tab, int nl, const T* x,
                                          V& v) {
  if (nl == 1) {  // no node
    visit_leaf(tab, 0, v);
    return;
  }
  StackEntry<T> stack[EMST_STACK];
  int sp = 0;
  int cf = 0, cl = nl - 1, cs = nodes[0].split;
  while (true) {
    const int g = cs;
    bool nodeL = g != cf, nodeR = g + 1 != cl;
    T dL = (T)0, dR = (T)0;
    int sL = 0, sR = 0;
    if (!nodeL) {
      visit_leaf(tab, g, v);
    } else {
      Node<T, D> nd = nodes[g];
      dL = box_dist2<T, D>(x, nd.lo, nd.hi);
      sL = nd.split;
    }
    if (!nodeR) {
      visit_leaf(tab, g + 1, v);
    } else {
      Node<T, D> nd = nodes[g + 1];
      dR = box_dist2<T, D>(x, nd.lo, nd.hi);
      sR = nd.split;
    }
    bool goL = nodeL && !v.prune(dL);
    bool goR = nodeR && !v.prune(dR);
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
      bool found = false;
      while (sp > 0) {
        StackEntry<T> e = stack[--sp];
        if (v.prune(e.d)) continue;
        cf = e.f; cl = e.l; cs = e.split;
        found = true;
        break;
      }
      if (!found) return;
    }
  }
}

// the k smallest squared distances, in registers (KMAX > 0, k <= KMAX; the
// first KMAX - k slots hold -1) or in scratch (KMAX == 0)
template <typename T, int D, int KMAX>
struct KnnVisit {
  const Pt<T, D>* P;
  const T* x;
  T kd[KMAX > 0 ? KMAX : 1];
  T* sd;
  int k, m;
  __device__ __forceinline__ T kth() const { return KMAX > 0 ? kd[KMAX - 1] : sd[k - 1]; }
  __device__ __forceinline__ void leaf(int j) {
    T w = dist2<T, D>(x, P[j].x);
    if (KMAX > 0) {
      kinsert<T, (KMAX > 0 ? KMAX : 1)>(kd, w);
    } else if (m < k || w < sd[k - 1]) {
      int p = (m < k) ? m++ : k - 1;
      while (p > 0 && sd[p - 1] > w) { sd[p] = sd[p - 1]; --p; }
      sd[p] = w;
    }
  }
  // a tie with the k-th distance cannot change it
  __device__ __forceinline__ bool prune(T b) const {
    return (KMAX > 0 || m == k) && b >= kth();
  }
};

template <typename T, int D, int KMAX>
__global__ void __launch_bounds__(256)
k_query_knn(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
            const u64* __restrict__ tab, int nl, const T* __restrict__ X, int m, int k,
            T* __restrict__ kth2, T* scratch) {
  int i = thread_index();
  if (i >= m) return;
  T x[D];
#pragma unroll
  for (int q = 0; q < D; ++q) x[q] = X[(long long)i * D + q];
  KnnVisit<T, D, KMAX> v;
  v.P = P; v.x = x; v.k = k; v.m = 0;
  v.sd = KMAX > 0 ? (T*)0 : scratch + (long long)i * k;
  if (KMAX > 0) {
#pragma unroll
    for (int j = 0; j < (KMAX > 0 ? KMAX : 1); ++j)
      v.kd[j] = (j < KMAX - k) ? (T)-1 : FT<T>::inf();
  }
  query_walk<T, D>(P, nodes, tab, nl, x, v);
  kth2[i] = v.kth();
}

// the smallest max(core_j, core_x, |x - x_j|), ties to the lexicographically
// smallest point, then the smallest input row
template <typename T, int D>
struct MrVisit {
  const Pt<T, D>* P;
  const int* orig;
  const T* core;
  const T* x;
  T cx, best;
  int bj;
  __device__ __forceinline__ bool before(int j) const {
#pragma unroll
    for (int q = 0; q < D; ++q) {
      if (P[j].x[q] != P[bj].x[q]) return P[j].x[q] < P[bj].x[q];
    }
    return orig[j] < orig[bj];
  }
  __device__ __forceinline__ void leaf(int j) {
    T w = tsqrt<T>(dist2<T, D>(x, P[j].x));
    if (cx > w) w = cx;
    if (core[j] > w) w = core[j];
    if (w < best || (w == best && (bj < 0 || before(j)))) {
      best = w;
      bj = j;
    }
  }
  // strictly farther boxes only: a tie may still win on its coordinates
  __device__ __forceinline__ bool prune(T b) const {
    T lb = tsqrt<T>(b);
    if (cx > lb) lb = cx;
    return lb > best;
  }
};

template <typename T, int D>
__global__ void __launch_bounds__(256)
k_query_mr(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
           const u64* __restrict__ tab, const int* __restrict__ orig,
           const T* __restrict__ core, int nl,
           const T* __restrict__ X, const T* __restrict__ corex, int m,
           long long* __restrict__ nbr, T* __restrict__ best) {
  int i = thread_index();
  if (i >= m) return;
  T x[D];
#pragma unroll
  for (int q = 0; q < D; ++q) x[q] = X[(long long)i * D + q];
  MrVisit<T, D> v;
  v.P = P; v.orig = orig; v.core = core; v.x = x; v.cx = corex[i];
  v.best = FT<T>::inf(); v.bj = -1;
  query_walk<T, D>(P, nodes, tab, nl, x, v);
  nbr[i] = orig[v.bj];
  best[i] = v.best;
}
