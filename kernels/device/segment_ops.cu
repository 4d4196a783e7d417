// Element-wise kernels of the primitives that the paper builds from (segmented) scans:
// enumerate (flags to 0/1 values before the scan), distribute (keep only heads or tails before a
// segmented scan; broadcast when unsegmented), split-and-segment and the segmented quicksort
// (compare with the pivot, scatter with new head flags, sortedness check), segmented sort
// (segment id of every element, gathers). Grid-stride loops: any grid size is correct.
#include "common.cuh"
#include "block/block_radix_rank.cuh"

#define GRID_STRIDE(i, n) for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

__device__ __forceinline__ u32 get_bit(const u32* words, u32 i) { return (words[i >> 5] >> (i & 31u)) & 1u; }
__device__ __forceinline__ u32 is_head(const u32* heads, u32 i) { return i == 0 || get_bit(heads, i); }
__device__ __forceinline__ u32 is_tail(const u32* heads, u32 i, u32 n) { return i + 1 == n || get_bit(heads, i + 1); }

// out[i] = bit i of words, xor invert (enumerate's 1-for-true vector; split's e = !flag).
extern "C" __global__ void bits_to_u32(const u32* words, u32 n, u32 invert, u32* out) {
    GRID_STRIDE(i, n) out[i] = get_bit(words, i) ^ invert;
}

// Distribute, segmented: keep the head (forward) or tail (backward) element, zero the others;
// a segmented inclusive sum-scan of the result (in the same direction) copies it across the
// segment. Done on the bits (u32 / u64) so that any element type is copied exactly.
#define KEEP_ENDS(K, S)                                                                           \
    extern "C" __global__ void keep_segment_ends_##S(const K* x, const u32* heads, u32 n,        \
                                                     u32 backward, K* out) {                      \
        GRID_STRIDE(i, n) {                                                                       \
            u32 keep = backward ? is_tail(heads, i, n) : is_head(heads, i);                       \
            out[i] = keep ? x[i] : K(0);                                                          \
        }                                                                                         \
    }                                                                                             \
    extern "C" __global__ void broadcast_##S(const K* x, u32 n, u32 from_last, K* out) {          \
        K v = x[from_last ? n - 1 : 0];                                                           \
        GRID_STRIDE(i, n) out[i] = v;                                                             \
    }                                                                                             \
    extern "C" __global__ void gather_##S(const K* src, const u32* idx, u32 n, K* out) {         \
        GRID_STRIDE(i, n) out[i] = src[idx[i]];                                                   \
    }
KEEP_ENDS(u32, b32)
KEEP_ENDS(u64, b64)

// Quicksort compare (§4.1): e[i] = 1 when the key goes left (is NOT flagged), i.e.
// !(key > pivot) on even passes and !(key >= pivot) on odd ones, in radix order.
#define QS_COMPARE(K, S)                                                                          \
    extern "C" __global__ void qs_compare_##S(const K* keys, const K* pivot, u32 n, u32 mode,     \
                                              u32 ge, u32* e) {                                   \
        GRID_STRIDE(i, n) {                                                                       \
            K a = radix_bits(keys[i], mode), p = radix_bits(pivot[i], mode);                      \
            bool flag = ge ? (a >= p) : (a > p);                                                  \
            e[i] = flag ? 0u : 1u;                                                                \
        }                                                                                         \
    }                                                                                             \
    extern "C" __global__ void count_descents_##S(const K* keys, u32 n, u32 mode, u32* count) {   \
        u32 c = 0;                                                                                \
        GRID_STRIDE(i, n) {                                                                       \
            if (i + 1 < n && radix_bits(keys[i], mode) > radix_bits(keys[i + 1], mode)) ++c;      \
        }                                                                                         \
        c = __reduce_add_sync(FULL_MASK, c);                                                      \
        if ((threadIdx.x & 31u) == 0 && c) atomicAdd(count, c);                                   \
    }
QS_COMPARE(u32, b32)
QS_COMPARE(u64, b64)

// Split-and-segment scatter (§2.3.3, the two-scan version): per element
//   e  = 1 if it goes to the falses half,  f = falses before it in its segment (segmented
//   exclusive scan of e), b = falses from it to its segment's end (backward segmented inclusive
//   scan of e), p = its position in the segment (segmented exclusive scan of ones).
// NF = f + b (falses in the segment), s = i - p (segment start),
// addr = e ? s + f : i - f + NF = i + b (the paper's t = id - f + NF). New heads: the first false of a
// segment lands on s, the first true on s + NF; new_heads must be zeroed beforehand.
#define SAS_SCATTER(K, S)                                                                         \
    extern "C" __global__ void sas_scatter_##S(const K* x, const u32* e, const u32* f,            \
                                               const u32* b, const u32* p, u32 n, K* out,         \
                                               u32* new_heads) {                                  \
        GRID_STRIDE(i, n) {                                                                       \
            u32 fi = f[i];                                                                        \
            u32 addr = e[i] ? (i - p[i] + fi) : (i + b[i]);                                       \
            out[addr] = x[i];                                                                     \
            bool first = e[i] ? (fi == 0) : (p[i] == fi);                                         \
            if (first) atomicOr(&new_heads[addr >> 5], 1u << (addr & 31u));                      \
        }                                                                                         \
    }
SAS_SCATTER(u32, b32)
SAS_SCATTER(u64, b64)

// Segment id of every element for CSR-style offsets (m+1 entries): the last s with
// offsets[s] <= i (binary search; empty segments are skipped because a later offset is equal).
extern "C" __global__ void segment_ids(const u32* offsets, u32 m, u32 n, u32* ids) {
    GRID_STRIDE(i, n) {
        u32 lo = 0, hi = m; // answer in [lo, hi)
        while (hi - lo > 1) {
            u32 mid = (lo + hi) >> 1;
            if (offsets[mid] <= i) lo = mid; else hi = mid;
        }
        ids[i] = lo;
    }
}

extern "C" __global__ void iota_u32(u32* out, u32 n) { GRID_STRIDE(i, n) out[i] = i; }
extern "C" __global__ void fill_u32(u32* out, u32 n, u32 v) { GRID_STRIDE(i, n) out[i] = v; }

// Interleaves / splits 64-bit elements into two u32 halves (distribute scans 32-bit words).
extern "C" __global__ void join_halves(const u32* lo, const u32* hi, u32 n, u64* out) {
    GRID_STRIDE(i, n) out[i] = (u64)lo[i] | ((u64)hi[i] << 32);
}
extern "C" __global__ void split_halves(const u64* x, u32 n, u32* lo, u32* hi) {
    GRID_STRIDE(i, n) { lo[i] = (u32)x[i]; hi[i] = (u32)(x[i] >> 32); }
}

// *p = v (the closing offset n of offsets built on the device); *p |= v (force head bit 0).
extern "C" __global__ void set_u32(u32* p, u32 v) { if (blockIdx.x == 0 && threadIdx.x == 0) *p = v; }
extern "C" __global__ void or_u32(u32* p, u32 v) { if (blockIdx.x == 0 && threadIdx.x == 0) *p |= v; }
