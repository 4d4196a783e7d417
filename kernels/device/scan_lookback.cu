// Entry points of the single-pass scan with decoupled look-back:
// scan_lookback_{plus,max,min}_{f32,f64,i32,u32}. One block per tile, grid = number of tiles;
// tile ids are drawn from the workspace's counter (see block/tile_lookback.cuh).
// Direction and inclusive/exclusive are run-time arguments (uniform branches; they cost nothing
// next to the memory traffic).
#include "common.cuh"
#include "block/scan_instances.cuh"
#include "block/tile_scan.cuh"

#define LOOKBACK_ENTRY(OPN, OP, T, SUF, ITEMS)                                                      \
    SCAN_LOOKBACK_ENTRY(scan, false, , nullptr, OPN, OP, T, SUF, ITEMS)

SCAN_FOR_EACH_OP_TYPE(LOOKBACK_ENTRY)
