// Entry points of the multi-pass scans:
//  * warp-shuffle (Sengupta, Harris, Garland 2008), reduce-then-scan:
//      scan_ws_reduce_* (tile aggregates) -> scan_spine_* (one block scans them) -> scan_ws_scan_*;
//  * work-efficient (Sengupta et al. 2007, Algorithms 1-5):
//      scan_we_block_* (block-local tree scan, block sums) -> scan_spine_* -> scan_we_fixup_*.
#include "common.cuh"
#include "block/scan_instances.cuh"
#include "block/tile_scan.cuh"
#include "block/block_work_efficient.cuh"

#define MULTIPASS_ENTRY(OPN, OP, T, SUF, ITEMS)                                                     \
    SCAN_MULTIPASS_ENTRY(scan, false, , nullptr, OPN, OP, T, SUF, ITEMS)
#define FIXUP_ENTRY(OPN, OP, T, SUF, ITEMS)                                                         \
    extern "C" __global__ void __launch_bounds__(WE_THREADS) scan_we_fixup_##OPN##_##SUF(           \
        T* out, long long n, int bwd, const T* __restrict__ spine_v,                                \
        const u32* __restrict__ first_head) {                                                       \
        we_fixup<T, OP, WE_THREADS>(out, n, bwd != 0, spine_v, first_head);                        \
    }
SCAN_FOR_EACH_OP_TYPE(FIXUP_ENTRY)

SCAN_FOR_EACH_OP_TYPE(MULTIPASS_ENTRY)
