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
    SCAN_MULTIPASS_ENTRY(segscan, true, SEGSCAN_FLAGS_PARAM, flags, OPN, OP, T, SUF, ITEMS)

SCAN_FOR_EACH_OP_TYPE(MULTIPASS_ENTRY)
