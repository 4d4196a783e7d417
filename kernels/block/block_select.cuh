// Block-level selection (compaction) and split of one tile, stable, with the flags packed one bit
// per element (bit i%32 of word i/32) or computed from a predicate on the values.
//
// Layout: a tile is SEL_THREADS*SEL_ITEMS elements; warp w owns the contiguous chunk
// [w*32*SEL_ITEMS, (w+1)*32*SEL_ITEMS) of the tile and walks it 32 elements (one flag word) per
// step, so a lane's rank among the selected elements of a step is popc(word & lanes_below): the
// packed flag word *is* the warp ballot, no scan is needed inside a warp. The 8 warp totals are
// combined through shared memory (a 8-entry prefix, done redundantly by every thread), and the
// tile's offset comes from a device-wide scan of the per-tile counts (pass 1), as in Roger et al.
// 2007 (compact blocks, then concatenate them at offsets from a scan of the block counts).
#pragma once
#include "common.cuh"

#if !defined(SEL_THREADS) || !defined(SEL_ITEMS)
#error "SEL_THREADS and SEL_ITEMS come from the Rust side as -D defines (primitives::compact)"
#endif
#define SEL_TILE (SEL_THREADS * SEL_ITEMS)
#define SEL_WARPS (SEL_THREADS / 32)

// Keep predicates, numbered as primitives::compact::Keep::code().
template <typename T> __device__ __forceinline__ bool keep_test(u32 code, T x, T c) {
    switch (code) {
    case 0: return x > c;
    case 1: return x >= c;
    case 2: return x < c;
    case 3: return x <= c;
    case 4: return x == c;
    default: return x != c;
    }
}

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }
__device__ __forceinline__ u32 lanes_below() { return (1u << lane_id()) - 1u; }

// Mask of the lanes whose element index base+lane is < n.
__device__ __forceinline__ u32 valid_mask(u32 base, u32 n) {
    if (base >= n) return 0u;
    u32 left = n - base;
    return left >= 32u ? FULL_MASK : ((1u << left) - 1u);
}

// Where the flags come from: packed words or a predicate on the keys.
struct FlagsFromBits {
    const u32* words;
    template <typename K> __device__ __forceinline__ u32 word(u32 base, u32 n, K) const {
        return base < n ? (words[base >> 5] & valid_mask(base, n)) : 0u;
    }
};
template <typename K> struct FlagsFromPred {
    u32 code;
    K c;
    __device__ __forceinline__ u32 word(u32 base, u32 n, K x) const {
        bool f = (base + lane_id() < n) && keep_test<K>(code, x, c);
        return __ballot_sync(FULL_MASK, f);
    }
};

// Pass 1: the number of selected elements of this block's tile (selected = flag == SEL).
template <u32 SEL, typename K, typename F>
__device__ __forceinline__ void block_select_count(const K* keys, u32 n, F flags, u32* tile_counts,
                                                   bool need_keys) {
    __shared__ u32 warp_sum[SEL_WARPS];
    const u32 warp = threadIdx.x >> 5;
    const u32 tile_base = blockIdx.x * SEL_TILE + warp * 32u * SEL_ITEMS;
    u32 cnt = 0;
#pragma unroll
    for (u32 it = 0; it < SEL_ITEMS; ++it) {
        u32 base = tile_base + it * 32u;
        u32 idx = base + lane_id();
        K x = (need_keys && idx < n) ? keys[idx] : K(0);
        u32 w = flags.word(base, n, x);
        if (SEL == 0) w = ~w & valid_mask(base, n);
        cnt += __popc(w);
    }
    if (lane_id() == 0) warp_sum[warp] = cnt;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 s = 0;
        for (u32 i = 0; i < SEL_WARPS; ++i) s += warp_sum[i];
        tile_counts[blockIdx.x] = s;
    }
}

// Pass 2: scatter. Selected elements (flag == SEL) go to offset(tile) + rank; with SPLIT the
// others go to nsel_total + i - (selected before i), the paper's t = i - f + NF (§2.3.3).
// tile_incl is the inclusive scan of the per-tile counts; its last entry is the total.
template <u32 SEL, bool SPLIT, bool HAS_V, typename K, typename V, typename F>
__device__ __forceinline__ void block_select_scatter(const K* keys, const V* vals, u32 n, F flags,
                                                     const u32* tile_incl, u32 num_tiles,
                                                     K* keys_out, V* vals_out) {
    __shared__ u32 warp_sum[SEL_WARPS];
    const u32 warp = threadIdx.x >> 5;
    const u32 lane = lane_id();
    const u32 tile_base = blockIdx.x * SEL_TILE + warp * 32u * SEL_ITEMS;
    K x[SEL_ITEMS];
    V v[SEL_ITEMS];
    u32 w[SEL_ITEMS];
    u32 cnt = 0;
#pragma unroll
    for (u32 it = 0; it < SEL_ITEMS; ++it) {
        u32 base = tile_base + it * 32u;
        u32 idx = base + lane;
        x[it] = idx < n ? keys[idx] : K(0);
        if (HAS_V) v[it] = idx < n ? vals[idx] : V(0);
        u32 fw = flags.word(base, n, x[it]);
        w[it] = SEL ? fw : (~fw & valid_mask(base, n));
        cnt += __popc(w[it]);
    }
    if (lane == 0) warp_sum[warp] = cnt;
    __syncthreads();
    u32 run = blockIdx.x > 0 ? tile_incl[blockIdx.x - 1] : 0u;
    for (u32 i = 0; i < warp; ++i) run += warp_sum[i];
    const u32 total_sel = SPLIT ? tile_incl[num_tiles - 1] : 0u;
#pragma unroll
    for (u32 it = 0; it < SEL_ITEMS; ++it) {
        u32 base = tile_base + it * 32u;
        u32 idx = base + lane;
        u32 before = run + __popc(w[it] & lanes_below());
        if ((w[it] >> lane) & 1u) {
            keys_out[before] = x[it];
            if (HAS_V) vals_out[before] = v[it];
        } else if (SPLIT && idx < n) {
            u32 dst = total_sel + idx - before;
            keys_out[dst] = x[it];
            if (HAS_V) vals_out[dst] = v[it];
        }
        run += __popc(w[it]);
    }
}

// The entry points of a selection by packed flag bits, written once for compact (PREFIX compact,
// SEL 1, SPLIT false) and split (split, 0, true): PREFIX_count_bits (pass 1), PREFIX_bits_S for
// keys K, PREFIX_bits_pairs_S for keys K with values V (pass 2); SELECT_BITS_ENTRIES makes all
// of them for 32- and 64-bit keys and values.
#define SELECT_COUNT_BITS(PREFIX, SEL)                                                             \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                      \
    PREFIX##_count_bits(const u32* words, u32 n, u32* tile_counts) {                               \
        block_select_count<SEL, u32>(nullptr, n, FlagsFromBits{words}, tile_counts, false);        \
    }
#define SELECT_BITS(PREFIX, SEL, SPLIT, K, S)                                                      \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                      \
    PREFIX##_bits_##S(const K* x, const u32* words, u32 n, const u32* tile_incl, u32 num_tiles,    \
                      K* out) {                                                                    \
        block_select_scatter<SEL, SPLIT, false, K, u32>(x, nullptr, n, FlagsFromBits{words},       \
                                                        tile_incl, num_tiles, out, nullptr);       \
    }
#define SELECT_BITS_PAIRS(PREFIX, SEL, SPLIT, K, V, S)                                             \
    extern "C" __global__ void __launch_bounds__(SEL_THREADS)                                      \
    PREFIX##_bits_pairs_##S(const K* x, const V* v, const u32* words, u32 n,                       \
                            const u32* tile_incl, u32 num_tiles, K* xo, V* vo) {                   \
        block_select_scatter<SEL, SPLIT, true, K, V>(x, v, n, FlagsFromBits{words}, tile_incl,     \
                                                     num_tiles, xo, vo);                           \
    }
#define SELECT_BITS_ENTRIES(PREFIX, SEL, SPLIT)                                                    \
    SELECT_COUNT_BITS(PREFIX, SEL)                                                                 \
    SELECT_BITS(PREFIX, SEL, SPLIT, u32, b32)                                                      \
    SELECT_BITS(PREFIX, SEL, SPLIT, u64, b64)                                                      \
    SELECT_BITS_PAIRS(PREFIX, SEL, SPLIT, u32, u32, b32_b32)                                       \
    SELECT_BITS_PAIRS(PREFIX, SEL, SPLIT, u32, u64, b32_b64)                                       \
    SELECT_BITS_PAIRS(PREFIX, SEL, SPLIT, u64, u32, b64_b32)                                       \
    SELECT_BITS_PAIRS(PREFIX, SEL, SPLIT, u64, u64, b64_b64)
