// What the one-thread-an-item kernels (dendrogram.cu, clusters.cu) share;
// their loaders put it in front of each source.  Templates over the index
// type I (int below 2^31 items, else long long): half the bytes a pass
// moves when int fits.

typedef unsigned int u32;
typedef unsigned long long u64;

// the unsigned type of I, for atomics on non-negative values
template <typename I> struct Unsigned;
template <> struct Unsigned<int> { typedef u32 type; };
template <> struct Unsigned<long long> { typedef u64 type; };

#define GRID_STRIDE(i, count)                                              \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; \
         i < (count); i += (long long)gridDim.x * blockDim.x)
