// Split: stable partition by a packed flag (falses first), the paper's one-enumerate
// formulation (Sengupta et al. 2007, §2.3.3) done per tile: falses go to (falses before the
// tile) + (rank among the tile's falses), trues to NF + i - f. See block/block_select.cuh.
// Also the kernels of split-and-segment and of the segmented quicksort.
#include "common.cuh"
#include "block/block_select.cuh"

extern "C" __global__ void __launch_bounds__(SEL_THREADS)
split_count_bits(const u32* words, u32 n, u32* tile_counts) {
    block_select_count<0, u32>(nullptr, n, FlagsFromBits{words}, tile_counts, false);
}

#define SPLIT_BITS(K, S)                                                                          \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    split_bits_##S(const K* x, const u32* words, u32 n, const u32* tile_incl, u32 num_tiles,      \
                   K* out) {                                                                      \
        block_select_scatter<0, true, false, K, u32>(x, nullptr, n, FlagsFromBits{words},         \
                                                     tile_incl, num_tiles, out, nullptr);         \
    }
SPLIT_BITS(u32, b32)
SPLIT_BITS(u64, b64)

#define SPLIT_BITS_PAIRS(K, V, S)                                                                 \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                     \
    split_bits_pairs_##S(const K* x, const V* v, const u32* words, u32 n, const u32* tile_incl,   \
                         u32 num_tiles, K* xo, V* vo) {                                           \
        block_select_scatter<0, true, true, K, V>(x, v, n, FlagsFromBits{words}, tile_incl,       \
                                                  num_tiles, xo, vo);                             \
    }
SPLIT_BITS_PAIRS(u32, u32, b32_b32)
SPLIT_BITS_PAIRS(u32, u64, b32_b64)
SPLIT_BITS_PAIRS(u64, u32, b64_b32)
SPLIT_BITS_PAIRS(u64, u64, b64_b64)
