// Entry points of the multi-pass segmented scans:
//  * warp-shuffle (Sengupta, Harris, Garland 2008), reduce-then-scan:
//      segscan_ws_reduce_* (tile aggregates) -> segscan_spine_* (one block scans them) -> segscan_ws_scan_*;
//  * work-efficient (Sengupta et al. 2007, Algorithms 1-5):
//      segscan_we_block_* (block-local tree scan, block sums) -> segscan_spine_* -> scan_we_fixup_*.
#include "common.cuh"
#include "block/scan_instances.cuh"
#include "block/tile_scan.cuh"
#include "block/block_work_efficient.cuh"

#define MULTIPASS_ENTRY(OPN, OP, T, SUF, ITEMS)                                                     \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS) segscan_ws_reduce_##OPN##_##SUF(        \
        const T* __restrict__ in, const u32* __restrict__ flags, long long n, int bwd, u32* spine_f, T* spine_v) {            \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        reduce_tile<T, OP, true, SCAN_THREADS, ITEMS>(in, flags, n, bwd != 0, spine_f, spine_v, s); \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS) segscan_ws_scan_##OPN##_##SUF(          \
        const T* __restrict__ in, const u32* __restrict__ flags, T* __restrict__ out, long long n, int bwd, int excl,         \
        const T* __restrict__ spine_v) {                                                            \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        scan_tile_from_spine<T, OP, true, SCAN_THREADS, ITEMS>(in, flags, out, n, bwd != 0,        \
                                                              excl != 0, spine_v, s);              \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SPINE_THREADS) segscan_spine_##OPN##_##SUF(           \
        const u32* __restrict__ spine_f, T* spine_v, long long m) {                                 \
        __shared__ TileStorage<T, SPINE_THREADS, SPINE_ITEMS> s;                                    \
        spine_scan<T, OP, true, SPINE_THREADS, SPINE_ITEMS>(spine_f, spine_v, m, s);              \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(WE_THREADS) segscan_we_block_##OPN##_##SUF(           \
        const T* __restrict__ in, const u32* __restrict__ flags, T* __restrict__ out, long long n, int bwd, int excl,         \
        u32* spine_f, T* spine_v, u32* first_head) {                                                \
        __shared__ WeStorage<T, WE_THREADS> s;                                                      \
        we_block<T, OP, true, WE_THREADS>(in, flags, out, n, bwd != 0, excl != 0, spine_f,       \
                                          spine_v, first_head, s);                                 \
    }

SCAN_FOR_EACH_OP_TYPE(MULTIPASS_ENTRY)
