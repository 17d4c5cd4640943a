// The Boruvka iterations' kernels, after lbvh.cuh: upper bounds, the search's
// work list, the search, component minima, the merge and the output edges.

// ---------------------------------------------------------------------------
// 4. upper bounds on each component's shortest outgoing edge, before the
// search: Morton neighbours in different components (the paper's), and every
// certified candidate that is still foreign (exact for its point).  A
// candidate that has joined its point's component is dropped: its weight
// becomes the point's lower bound again.
//
// In the second iteration, `second` (when has_second) holds each point's
// certified second-nearest other point from the first search (-1: none).
// The first candidate has always joined by then (every singleton's nearest
// edge is taken); every point but those two is at least as far as the
// second, so a second that is foreign is the point's certified nearest
// foreign point, and one that has joined is a lower bound for the search.
// ---------------------------------------------------------------------------
template <typename T, int D, bool MRD>
__global__ void k_bounds(const Pt<T, D>* __restrict__ P, const int* __restrict__ orig,
                         const T* __restrict__ core2, typename CL<T>::word* __restrict__ cl,
                         u64* best, int n, const int* __restrict__ second, int has_second) {
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
    } else if (has_second && second[i] >= 0) {
      int j2 = second[i];
      Pt<T, D> pj2 = P[j2];
      T w2 = dist2<T, D>(pi.x, pj2.x);  // Euclidean only (the first search's)
      if (pj2.label != C) {
        cl[i] = ~(typename CL<T>::word)j2;
        int oi = orig[i], oj = orig[j2];
        u64 key = FT<T>::key(w2, oi < oj ? oi : oj);
        if (key < __ldcg(&best[C])) atomicMin(&best[C], key);
      } else {
        cl[i] = CL<T>::of(w2);  // both nearest joined: nothing foreign is nearer
      }
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
// SECOND (with FIRST, Euclidean): the second-nearest too, under the same
// order and certified the same way, into second[] (-1: none certified):
// the next iteration's k_bounds answers most points from it, since every
// point's nearest has joined it by then (emulated, 200k uniform points:
// 62% fewer points search in the second iteration, 16% fewer nodes loaded
// over all iterations).
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
template <typename T, int D, bool MRD, bool FIRST, bool SECOND>
__global__ void __launch_bounds__(256)
k_search(const Pt<T, D>* __restrict__ P, const Node<T, D>* __restrict__ nodes,
         const u64* __restrict__ tab, const int* __restrict__ orig, const T* __restrict__ core2,
         typename CL<T>::word* __restrict__ clw, u64* best, int n, int nl, int* list,
         const int* count, int* __restrict__ second) {
  static_assert(!SECOND || (FIRST && !MRD), "the second candidate is the first Euclidean search's");
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
  // SECOND: the runner-up under (w, orig) too; the search then prunes at
  // its distance, so it is certified like the first
  T sw = inf;
  int so = EMST_INT_MAX;
  int sj = -1;
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
      if (SECOND) {                                                                  \
        if (w_ <= sw) {                                                              \
          int o_ = orig[j_];                                                         \
          /* a leaf met twice (the Morton neighbours) is one candidate */             \
          if (o_ != bo && o_ != so) {                                                \
            if (w_ < bw || (w_ == bw && o_ < bo)) {                                  \
              sw = bw; so = bo; sj = bj; bw = w_; bo = o_; bj = j_;                  \
            } else if (w_ < sw || o_ < so) {                                         \
              sw = w_; so = o_; sj = j_;                                             \
            }                                                                        \
          }                                                                          \
        }                                                                            \
      } else if (w_ <= bw) {                                                         \
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
    T rr = SECOND ? sw : bw;  // the last candidate kept
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
    // the leaves just tested may have lowered the last candidate's distance
    if (SECOND ? sw < rr : bw < rr) rr = SECOND ? sw : bw;
    if (goL && dL > rr) { goL = false; if (dL < pruned) pruned = dL; }
    if (goR && dR > rr) { goR = false; if (dR < pruned) pruned = dR; }
    // (a degenerate subtree's first point has its smallest row: equal
    // points are in input-row order; SECOND: behind the runner-up, which
    // itself is not behind the first)
    const T tw = SECOND ? sw : bw;
    const int to = SECOND ? so : bo;
    if (goL) goL = !(dL == tw && degL && orig[leaf_of(tab, cf).first] > to);
    if (goR) goR = !(dR == tw && degR && orig[leaf_of(tab, g + 1).first] > to);
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
        if (e.d == tw && deg && orig[leaf_of(tab, f).first] > to) continue;
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
  if (SECOND) second[i] = (sj >= 0 && sw < pruned) ? sj : -1;
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

