// Entry points of the single-pass scan with decoupled look-back:
// scan_lookback_{plus,max,min}_{f32,f64,i32,u32}. One block per tile, grid = number of tiles;
// tile ids are drawn from the workspace's counter (see block/tile_lookback.cuh).
// Direction and inclusive/exclusive are run-time arguments (uniform branches; they cost nothing
// next to the memory traffic).
#include "common.cuh"
#include "block/scan_instances.cuh"
#include "block/tile_scan.cuh"

#define LOOKBACK_ENTRY(OPN, OP, T, SUF, ITEMS)                                                      \
    extern "C" __global__ void __launch_bounds__(SCAN_THREADS, SCAN_MIN_BLOCKS) scan_lookback_##OPN##_##SUF(         \
        const T* __restrict__ in, T* __restrict__ out, long long n, u32 num_tiles, int bwd,    \
        int excl, u32* header, u64* status, T* agg, T* incl) {                                      \
        __shared__ TileStorage<T, SCAN_THREADS, ITEMS> s;                                           \
        TileStatus<T> ts = {header, status, agg, incl};                                             \
        lookback_scan_tile<T, OP, false, SCAN_THREADS, ITEMS>(in, nullptr, out, n, num_tiles, bwd != 0, \
                                                            excl != 0, ts, s);                     \
    }

SCAN_FOR_EACH_OP_TYPE(LOOKBACK_ENTRY)
