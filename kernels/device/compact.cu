// Compact (stream reduction): keep flagged elements, or those satisfying a predicate, stably.
// Two passes over tiles (count, then scatter at offsets from a device-wide scan of the counts);
// see block/block_select.cuh. Entry points are thin; b32/b64 name the element width (the kernels
// move bits, so f32/i32/u32 share b32 and f64/u64 share b64).
#include "common.cuh"
#include "block/block_select.cuh"

extern "C" __global__ void __launch_bounds__(SEL_THREADS)
compact_count_bits(const u32* words, u32 n, u32* tile_counts) {
    block_select_count<1, u32>(nullptr, n, FlagsFromBits{words}, tile_counts, false);
}

#define COUNT_PRED(T, S)                                                                          \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_count_pred_##S(const T* x, u32 n, u32 code, T c, u32* tile_counts) {                  \
        block_select_count<1, T>(x, n, FlagsFromPred<T>{code, c}, tile_counts, true);             \
    }
COUNT_PRED(float, f32)
COUNT_PRED(double, f64)
COUNT_PRED(int, i32)
COUNT_PRED(u32, u32)
COUNT_PRED(u64, u64)

#define COMPACT_BITS(K, S)                                                                        \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_bits_##S(const K* x, const u32* words, u32 n, const u32* tile_incl, u32 num_tiles,    \
                     K* out) {                                                                    \
        block_select_scatter<1, false, false, K, u32>(x, nullptr, n, FlagsFromBits{words},        \
                                                      tile_incl, num_tiles, out, nullptr);        \
    }
COMPACT_BITS(u32, b32)
COMPACT_BITS(u64, b64)

#define COMPACT_BITS_PAIRS(K, V, S)                                                               \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_bits_pairs_##S(const K* x, const V* v, const u32* words, u32 n, const u32* tile_incl, \
                           u32 num_tiles, K* xo, V* vo) {                                         \
        block_select_scatter<1, false, true, K, V>(x, v, n, FlagsFromBits{words}, tile_incl,      \
                                                   num_tiles, xo, vo);                            \
    }
COMPACT_BITS_PAIRS(u32, u32, b32_b32)
COMPACT_BITS_PAIRS(u32, u64, b32_b64)
COMPACT_BITS_PAIRS(u64, u32, b64_b32)
COMPACT_BITS_PAIRS(u64, u64, b64_b64)

#define COMPACT_PRED(T, S)                                                                        \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_pred_##S(const T* x, u32 n, u32 code, T c, const u32* tile_incl, u32 num_tiles,       \
                     T* out) {                                                                    \
        block_select_scatter<1, false, false, T, u32>(x, nullptr, n, FlagsFromPred<T>{code, c},   \
                                                      tile_incl, num_tiles, out, nullptr);        \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_pred_pairs_##S##_b32(const T* x, const u32* v, u32 n, u32 code, T c,                  \
                                 const u32* tile_incl, u32 num_tiles, T* xo, u32* vo) {           \
        block_select_scatter<1, false, true, T, u32>(x, v, n, FlagsFromPred<T>{code, c},          \
                                                     tile_incl, num_tiles, xo, vo);               \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    compact_pred_pairs_##S##_b64(const T* x, const u64* v, u32 n, u32 code, T c,                  \
                                 const u32* tile_incl, u32 num_tiles, T* xo, u64* vo) {           \
        block_select_scatter<1, false, true, T, u64>(x, v, n, FlagsFromPred<T>{code, c},          \
                                                     tile_incl, num_tiles, xo, vo);               \
    }
COMPACT_PRED(float, f32)
COMPACT_PRED(double, f64)
COMPACT_PRED(int, i32)
COMPACT_PRED(u32, u32)
COMPACT_PRED(u64, u64)
