// Exact duplicates found and set aside before the tree (engine/duplicates.py),
// after lbvh.cuh.  Equal points have equal Morton codes, so every group of
// identical points lies in one run of equal codes, its rows ascending (the
// sort is stable).  A run whose every point equals the one before it is one
// group whose first point is its smallest row: lattices, k copies of each
// site, quantised coordinates whose code cells are finer than the quantum.
// A run holding distinct points (a clump inside one code cell) is "mixed";
// the engine then groups the crowded points by their coordinates instead.

// One thread a tree position i: a copy equals (as values, -0.0 == 0.0) the
// point before it in tree order and shares its code.  keep_tree is 0 at
// copies, 1 elsewhere (written whole, coalesced: the input order's copy,
// a scattered write, is k_keep_in's, run only when the copies are set
// aside); info[0] += copies, info[1] += positions sharing the code of the
// one before, info[2] += of those, the unequal ones (info zeroed).
template <typename T, int D>
__global__ void k_mark_copies(const T* __restrict__ x, const int* __restrict__ perm,
                              const u64* __restrict__ codes, int n,
                              unsigned char* __restrict__ keep_tree, int* __restrict__ info) {
  int i = thread_index();  // no early return: the whole warp takes part in the ballots
  bool shared = false, copy = false;
  if (i < n) {
    if (i > 0 && codes[i] == codes[i - 1]) {  // only then are the points read
      shared = true;
      const T* a = x + (long long)perm[i] * D;
      const T* b = x + (long long)perm[i - 1] * D;
      copy = true;
#pragma unroll
      for (int k = 0; k < D; ++k) copy = copy && a[k] == b[k];
    }
    keep_tree[i] = copy ? 0 : 1;
  }
#ifdef EMST_EMULATE
  if (copy) atomicAdd(&info[0], 1);
  if (shared) atomicAdd(&info[1], 1);
  if (shared && !copy) atomicAdd(&info[2], 1);
#else
  // one atomic a warp and counter, not one a point: a lattice has millions
  u32 mc = __ballot_sync(0xffffffffu, copy);
  u32 ms = __ballot_sync(0xffffffffu, shared);
  u32 mm = __ballot_sync(0xffffffffu, shared && !copy);
  if ((threadIdx.x & 31) == 0) {
    if (mc) atomicAdd(&info[0], __popc(mc));
    if (ms) atomicAdd(&info[1], __popc(ms));
    if (mm) atomicAdd(&info[2], __popc(mm));
  }
#endif
}

// keep_tree in input order: keep_in[perm[i]] = keep_tree[i]
template <typename T, int D>
__global__ void k_keep_in(const int* __restrict__ perm, const unsigned char* __restrict__ keep_tree,
                          int n, unsigned char* __restrict__ keep_in) {
  int i = thread_index();
  if (i < n) keep_in[perm[i]] = keep_tree[i];
}

// The distinct points (the representatives) and the copies, when no run is
// mixed.  pos: the inclusive sums of keep_tree (position i's representative
// is distinct point pos[i] - 1 in tree order), local: those of keep_in (an
// input row's local index + 1).  Thread i writes tree position i's part
// (kcodes, kperm: the representatives' codes and tree order over local
// indices; or copy and head: the copy's row and its representative's tree
// index) and input row i's (rows: local index -> input row).
template <typename T, int D>
__global__ void k_compact_copies(const u64* __restrict__ codes, const int* __restrict__ perm,
                                 const unsigned char* __restrict__ keep_tree,
                                 const unsigned char* __restrict__ keep_in,
                                 const int* __restrict__ pos, const int* __restrict__ local,
                                 int n, long long* __restrict__ rows,
                                 u64* __restrict__ kcodes, int* __restrict__ kperm,
                                 int* __restrict__ copy, int* __restrict__ head) {
  int i = thread_index();
  if (i >= n) return;
  int p = pos[i] - 1;  // >= 0: position 0 is never a copy
  if (keep_tree[i]) {
    kcodes[p] = codes[i];
    kperm[p] = local[perm[i]] - 1;
  } else {
    int c = i - pos[i];  // the copies before position i
    copy[c] = perm[i];
    head[c] = p;
  }
  if (keep_in[i]) rows[local[i] - 1] = i;
}
