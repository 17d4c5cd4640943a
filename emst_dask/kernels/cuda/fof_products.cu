// The friends-of-friends catalogue's passes over the points, one thread an
// item and no cooperation between lanes (so the CPU emulator of the tests
// runs them too).  items.cuh goes in front.
//
// Every value is the one the whole-array version computes (float32 widened
// to float64 exactly, the same operations in the same order, additions and
// products rounded one by one: no fused multiply-add), so the results are
// the host's bits.

#ifndef FOF_SUM_CHUNK
#define FOF_SUM_CHUNK 32  // members a thread sums: levels 0 .. 5 of the pairwise tree
#endif
#define FOF_SUM_LEVELS 6  // log2(FOF_SUM_CHUNK) + 1

// -floor(((a - b) / L) + 0.5): the whole box lengths that move a to its
// image nearest b.
__device__ __forceinline__ long long fof_image(double a, double b, double L) {
    return -(long long)floor((a - b) / L + 0.5);
}

// Each kept point (keep null: every point) moved to its image nearest the
// smallest row of its group (first[raw[i]]); the others 0.  One pass over
// the points: shift (n, d) int64 is written whole.
template <typename TP>
__global__ void fof_nearest_shifts(const TP* __restrict__ points, long long n, int d,
                                   const long long* __restrict__ raw,
                                   const long long* __restrict__ first,
                                   const bool* __restrict__ keep,
                                   const double* __restrict__ box, long long* shift) {
    GRID_STRIDE(i, n) {
        bool in = keep == nullptr || keep[i];
        long long r = in ? first[raw[i]] : i;
        for (int j = 0; j < d; ++j)
            shift[i * d + j] = in ? fof_image((double)points[i * d + j],
                                              (double)points[r * d + j], box[j]) : 0;
    }
}

// Per edge: 0 not unwrapped along (weight > b, or its source not kept),
// 1 its ends' shifts put them at each other's nearest image, 2 they do not
// (the edge lies in a group wider than half the box).  One pass over the
// edges; ``count`` gets the number of 2s.
template <typename TP, typename TW>
__global__ void fof_edge_states(const long long* __restrict__ source,
                                const long long* __restrict__ target,
                                const TW* __restrict__ weight, long long m, double b,
                                const bool* __restrict__ keep,
                                const TP* __restrict__ points, int d,
                                const double* __restrict__ box,
                                const long long* __restrict__ shift,
                                unsigned char* state, unsigned long long* count) {
    GRID_STRIDE(e, m) {
        long long u = source[e], v = target[e];
        unsigned char s = 0;
        if ((double)weight[e] <= b && (keep == nullptr || keep[u])) {
            s = 1;
            for (int j = 0; j < d; ++j)
                if (shift[u * d + j] - shift[v * d + j] !=
                    fof_image((double)points[u * d + j], (double)points[v * d + j], box[j]))
                    s = 2;
        }
        state[e] = s;
        if (s == 2) atomicAdd(count, 1ull);
    }
}

// One member's catalogue values (the columns of group_catalogue): its
// displacement from the group's smallest row ``ref`` unwrapped, its
// velocity, each times its mass, and its mass.
template <typename TP, typename TV, typename TM, int D, bool VEL, bool MASS>
struct MemberValues {
    static const int C = D + (VEL ? D : 0) + (MASS ? 1 : 0);
    const TP* points;
    const long long* shift;  // null: no box
    const double* box;
    const TV* velocities;
    const TM* masses;

    __device__ __forceinline__ void load(long long row, long long ref, double* x) const {
        double w = MASS ? (double)masses[row] : 1.0;
#pragma unroll
        for (int j = 0; j < D; ++j) {
            double dx = __dsub_rn((double)points[row * D + j], (double)points[ref * D + j]);
            if (shift != nullptr)
                dx = __dadd_rn(dx, __dmul_rn((double)(shift[row * D + j] - shift[ref * D + j]),
                                             box[j]));
            x[j] = MASS ? __dmul_rn(dx, w) : dx;
        }
        if (VEL) {
#pragma unroll
            for (int j = 0; j < D; ++j) {
                double v = (double)velocities[row * D + j];
                x[D + j] = MASS ? __dmul_rn(v, w) : v;
            }
        }
        if (MASS) x[C - 1] = w;
    }
};

// The group of chunk t: cstart (G + 1,) increasing, the first chunk of
// each group and the total.
__device__ __forceinline__ long long fof_chunk_group(const long long* cstart, long long G,
                                                     long long t) {
    long long lo = 0, hi = G;  // the last g with cstart[g] <= t
    while (hi - lo > 1) {
        long long mid = (lo + hi) >> 1;
        if (cstart[mid] <= t) lo = mid; else hi = mid;
    }
    return lo;
}

// The pairwise sum of k (1 .. FOF_SUM_CHUNK) items, ``item(i, x)`` loading
// item i's C values: the items added as a binary counter adds ones (acc[l]
// the aligned block of 2^l items waiting at level l), so every addition is
// one of the pairwise rounds' (neighbours (0, 1), (2, 3), ... of each
// round, an odd last one carried), left operand first; a partial chunk's
// blocks are then folded from the right, as the carried odd ones are.
template <int C, typename Item>
__device__ __forceinline__ void fof_pairwise_chunk(const Item& item, int k, double* out) {
    double acc[FOF_SUM_LEVELS][C];
    double x[C];
#pragma unroll
    for (int i = 0; i < FOF_SUM_CHUNK; ++i) {
        if (i >= k) break;
        item(i, x);
#pragma unroll
        for (int l = 0; l < FOF_SUM_LEVELS; ++l) {
            if (!((i >> l) & 1)) {
#pragma unroll
                for (int c = 0; c < C; ++c) acc[l][c] = x[c];
                break;
            }
#pragma unroll
            for (int c = 0; c < C; ++c) x[c] = __dadd_rn(acc[l][c], x[c]);
        }
    }
    if (k == FOF_SUM_CHUNK) {
#pragma unroll
        for (int c = 0; c < C; ++c) out[c] = acc[FOF_SUM_LEVELS - 1][c];
        return;
    }
    bool any = false;
#pragma unroll
    for (int l = 0; l < FOF_SUM_LEVELS - 1; ++l) {
        if (!((k >> l) & 1)) continue;
#pragma unroll
        for (int c = 0; c < C; ++c) x[c] = any ? __dadd_rn(acc[l][c], x[c]) : acc[l][c];
        any = true;
    }
#pragma unroll
    for (int c = 0; c < C; ++c) out[c] = x[c];
}

template <typename V>
struct MemberItem {
    const V& values;
    const long long* rows;
    long long base, ref;
    __device__ __forceinline__ void operator()(int i, double* x) const {
        values.load(rows[base + i], ref, x);
    }
};

template <int C>
struct ValueItem {
    const double* values;
    long long base;
    __device__ __forceinline__ void operator()(int i, double* x) const {
#pragma unroll
        for (int c = 0; c < C; ++c) x[c] = values[(base + i) * C + c];
    }
};

// (At most 128 registers, so that two blocks of 256 threads share an SM:
// the chunks' gathers wait on memory, and more warps hide more of it.)

// The first round: chunk t of group g (its members rows[start[g] ..
// start[g] + length[g]) in (label, row) order) summed from the points,
// out (K, C) float64, one row a chunk.
template <typename TP, typename TV, typename TM, int D, bool VEL, bool MASS>
__global__ void __launch_bounds__(256, 2) fof_member_sums(const TP* __restrict__ points,
                                const long long* __restrict__ shift,
                                const double* __restrict__ box,
                                const TV* __restrict__ velocities,
                                const TM* __restrict__ masses,
                                const long long* __restrict__ rows,
                                const long long* __restrict__ start,
                                const long long* __restrict__ length,
                                const long long* __restrict__ ref,
                                const long long* __restrict__ cstart, long long G,
                                long long K, double* out) {
    typedef MemberValues<TP, TV, TM, D, VEL, MASS> V;
    V values{points, shift, box, velocities, masses};
    GRID_STRIDE(t, K) {
        long long g = fof_chunk_group(cstart, G, t);
        long long q = (t - cstart[g]) * FOF_SUM_CHUNK;
        long long left = length[g] - q;
        int k = left < FOF_SUM_CHUNK ? (int)left : FOF_SUM_CHUNK;
        MemberItem<V> item{values, rows, start[g] + q, ref[g]};
        fof_pairwise_chunk<V::C>(item, k, out + t * V::C);
    }
}

// The later rounds: chunk t of group g over values (K', C) (the previous
// round's chunks, group after group), into out (K, C).
template <int C>
__global__ void __launch_bounds__(256, 2) fof_value_sums(const double* __restrict__ values,
                               const long long* __restrict__ start,
                               const long long* __restrict__ length,
                               const long long* __restrict__ cstart, long long G,
                               long long K, double* out) {
    GRID_STRIDE(t, K) {
        long long g = fof_chunk_group(cstart, G, t);
        long long q = (t - cstart[g]) * FOF_SUM_CHUNK;
        long long left = length[g] - q;
        int k = left < FOF_SUM_CHUNK ? (int)left : FOF_SUM_CHUNK;
        ValueItem<C> item{values, start[g] + q};
        fof_pairwise_chunk<C>(item, k, out + t * C);
    }
}
