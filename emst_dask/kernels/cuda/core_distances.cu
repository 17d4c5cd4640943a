// Core distances for mutual reachability (after lbvh.cuh): each point's k-th
// nearest other point, the k smallest in registers (k <= 32) or in scratch.

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
