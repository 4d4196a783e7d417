// Compact (stream reduction): keep flagged elements, or those satisfying a predicate, stably.
// Two passes over tiles (count, then scatter at offsets from a device-wide scan of the counts);
// see block/block_select.cuh. Entry points are thin; b32/b64 name the element width (the kernels
// move bits, so f32/i32/u32 share b32 and f64/u64 share b64).
#include "common.cuh"
#include "block/block_select.cuh"

SELECT_BITS_ENTRIES(compact, 1, false)

#define COUNT_PRED(T, S)                                                                          \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_count_pred_##S(const T* x, u32 n, u32 code, T c, u32* tile_counts) {                  \
        block_select_count<1, T>(x, n, FlagsFromPred<T>{code, c}, tile_counts, true);             \
    }
// The key types of the predicate kernels: the scan element types and u64.
#define COMPACT_KEYS(X) FOR_SCAN_ELEMS(X) X(u64, u64)
COMPACT_KEYS(COUNT_PRED)

// The pair variant of compact_pred for values V (suffix B).
#define COMPACT_PRED_PAIRS(T, S, V, B)                                                            \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_pred_pairs_##S##_##B(const T* x, const V* v, u32 n, u32 code, T c,                    \
                                 const u32* tile_incl, u32 num_tiles, T* xo, V* vo) {             \
        block_select_scatter<1, false, true, T, V>(x, v, n, FlagsFromPred<T>{code, c}, tile_incl, \
                                                   num_tiles, xo, vo);                            \
    }

#define COMPACT_PRED(T, S)                                                                        \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_pred_##S(const T* x, u32 n, u32 code, T c, const u32* tile_incl, u32 num_tiles,       \
                     T* out) {                                                                    \
        block_select_scatter<1, false, false, T, u32>(x, nullptr, n, FlagsFromPred<T>{code, c},   \
                                                      tile_incl, num_tiles, out, nullptr);        \
    }                                                                                             \
    COMPACT_PRED_PAIRS(T, S, u32, b32)                                                            \
    COMPACT_PRED_PAIRS(T, S, u64, b64)
COMPACT_KEYS(COMPACT_PRED)
