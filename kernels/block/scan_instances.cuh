// The (operator, type) pairs every scan entry point is instantiated for, and the policy
// defaults (Rust passes the real values from primitives::policy as -D defines; the defaults let
// CI compile every source with none).
#pragma once
#include "common.cuh"

#ifndef SCAN_THREADS
#define SCAN_THREADS 256
#endif
#ifndef SCAN_ITEMS_4
#define SCAN_ITEMS_4 16
#endif
#ifndef SCAN_ITEMS_8
#define SCAN_ITEMS_8 8
#endif
#ifndef SCAN_MIN_BLOCKS
#define SCAN_MIN_BLOCKS 8
#endif
#ifndef SPINE_THREADS
#define SPINE_THREADS 512
#endif
#ifndef SPINE_ITEMS
#define SPINE_ITEMS 8
#endif
#ifndef WE_THREADS
#define WE_THREADS 128
#endif

// M(op name, op struct, C type, suffix, items per thread)
#define SCAN_FOR_EACH_TYPE(M, OPN, OP)              \
    M(OPN, OP, float, f32, SCAN_ITEMS_4)            \
    M(OPN, OP, double, f64, SCAN_ITEMS_8)           \
    M(OPN, OP, int, i32, SCAN_ITEMS_4)              \
    M(OPN, OP, unsigned int, u32, SCAN_ITEMS_4)
#define SCAN_FOR_EACH_OP_TYPE(M)                    \
    SCAN_FOR_EACH_TYPE(M, plus, OpPlus)             \
    SCAN_FOR_EACH_TYPE(M, max, OpMax)               \
    SCAN_FOR_EACH_TYPE(M, min, OpMin)

// The scans' entry points, written once for the plain scans (PREFIX scan, SEG false, FP empty,
// FLAGS nullptr) and the segmented ones (PREFIX segscan, SEG true, FP a macro that expands to the
// head-flags parameter `const u32* __restrict__ flags,`, FLAGS flags). The tile functions they
// call are in block/tile_scan.cuh and block/block_work_efficient.cuh, which the source includes.
//
// PREFIX_lookback_OPN_SUF: the single-pass scan with decoupled look-back.
#define SCAN_LOOKBACK_ENTRY(PREFIX, SEG, FP, FLAGS, OPN, OP, T, SUF, ITEMS)                         \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS)                     \
        PREFIX##_lookback_##OPN##_##SUF(const T* __restrict__ in, FP T* __restrict__ out,           \
                                        long long n, u32 num_tiles, int bwd, int excl,              \
                                        u32* header, u64* status, T* agg, T* incl) {                \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        TileStatus<T> ts = {header, status, agg, incl};                                             \
        lookback_scan_tile<T, OP, SEG, SCAN_THREADS, ITEMS>(in, FLAGS, out, n, num_tiles,           \
                                                            bwd != 0, excl != 0, ts, s);            \
    }

// The multi-pass scans: PREFIX_ws_reduce_* (tile aggregates) -> PREFIX_spine_* (one block scans
// them) -> PREFIX_ws_scan_* (warp-shuffle, reduce-then-scan), and PREFIX_we_block_* (block-local
// tree scan, block sums) -> PREFIX_spine_* -> scan_we_fixup_* (work-efficient).
#define SCAN_MULTIPASS_ENTRY(PREFIX, SEG, FP, FLAGS, OPN, OP, T, SUF, ITEMS)                        \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS) PREFIX##_ws_reduce_##OPN##_##SUF(    \
        const T* __restrict__ in, FP long long n, int bwd, u32* spine_f, T* spine_v) {              \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        reduce_tile<T, OP, SEG, SCAN_THREADS, ITEMS>(in, FLAGS, n, bwd != 0, spine_f, spine_v, s);  \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS) PREFIX##_ws_scan_##OPN##_##SUF(      \
        const T* __restrict__ in, FP T* __restrict__ out, long long n, int bwd, int excl,           \
        const T* __restrict__ spine_v) {                                                            \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        scan_tile_from_spine<T, OP, SEG, SCAN_THREADS, ITEMS>(in, FLAGS, out, n, bwd != 0,          \
                                                            excl != 0, spine_v, s);                 \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SPINE_THREADS) PREFIX##_spine_##OPN##_##SUF(       \
        const u32* __restrict__ spine_f, T* spine_v, long long m) {                                 \
        __shared__ TileStorage<T, SPINE_THREADS, SPINE_ITEMS> s;                                    \
        spine_scan<T, OP, SEG, SPINE_THREADS, SPINE_ITEMS>(spine_f, spine_v, m, s);                 \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(WE_THREADS) PREFIX##_we_block_##OPN##_##SUF(       \
        const T* __restrict__ in, FP T* __restrict__ out, long long n, int bwd, int excl,           \
        u32* spine_f, T* spine_v, u32* first_head) {                                                \
        __shared__ WeStorage<T, WE_THREADS> s;                                                      \
        we_block<T, OP, SEG, WE_THREADS>(in, FLAGS, out, n, bwd != 0, excl != 0, spine_f, spine_v,  \
                                         first_head, s);                                            \
    }

// The head-flags parameter of the segmented entry points (FP above).
#define SEGSCAN_FLAGS_PARAM const u32* __restrict__ flags,
