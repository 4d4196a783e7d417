// Block-wide scans of one (flag, value) pair per thread, built from warp scans plus one
// shared-memory pass over the warp totals (CUB's "warp scans" block algorithm; Sengupta, Harris
// and Garland 2008, §4.2: scan each warp, scan the warp totals, add them back).
//
// SEG = false ignores the flags (plain scan) and compiles to the plain warp scan.
#pragma once
#include "common.cuh"
#include "warp/warp_scan.cuh"
#include "warp/warp_reduce.cuh"

template <typename T, int THREADS> struct BlockScanStorage {
    T warp_v[THREADS / 32];
    u32 warp_f[THREADS / 32];
};

// Exclusive scan across the block of the pairs (f, v), thread order = element order. Returns
// the pair of everything before this thread (identity and flag 0 for thread 0) and writes the
// block's aggregate to `agg` (on every thread). Contains one __syncthreads(); the storage must
// not be reused before another barrier.
template <typename T, typename Op, bool SEG, int THREADS>
__device__ __forceinline__ SegPair<T> block_exclusive_scan(SegPair<T> p, Op op,
                                                          BlockScanStorage<T, THREADS>& s,
                                                          SegPair<T>& agg) {
    const u32 lane = lane_id(), warp = threadIdx.x >> 5;
    const T id = Op::template identity<T>();
    T inc;
    u32 closed = 0;
    u32 heads = 0;
    if (SEG) {
        bool c;
        inc = warp_seg_inclusive_scan(p.v, p.f != 0, op, c);
        closed = c;
        heads = __ballot_sync(FULL_MASK, p.f != 0);
    } else {
        inc = warp_inclusive_scan(p.v, op);
    }
    if (lane == 31) {
        s.warp_v[warp] = inc;
        s.warp_f[warp] = closed;
    }
    __syncthreads();
    // Every thread folds the (at most 32) warp totals itself: broadcasts from shared memory,
    // cheaper than a second barrier.
    SegPair<T> wpre = {0u, id};
    SegPair<T> total = {0u, id};
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) {
        SegPair<T> q = {SEG ? s.warp_f[w] : 0u, s.warp_v[w]};
        if (w == (int)warp) wpre = total;
        total = seg_combine(total, q, op);
    }
    agg = total;
    SegPair<T> ex;
    ex.v = __shfl_up_sync(FULL_MASK, inc, 1);
    ex.f = SEG ? ((heads & ((1u << lane) - 1u)) != 0) : 0u;
    if (lane == 0) {
        ex.v = id;
        ex.f = 0;
    }
    return seg_combine(wpre, ex, op);
}

// Block-wide reduction of one value per thread (plain); the result is valid on every thread.
// One __syncthreads().
template <typename T, typename Op, int THREADS>
__device__ __forceinline__ T block_reduce(T x, Op op, BlockScanStorage<T, THREADS>& s) {
    x = warp_reduce(x, op);
    if (lane_id() == 0) s.warp_v[threadIdx.x >> 5] = x;
    __syncthreads();
    T r = s.warp_v[0];
#pragma unroll
    for (int w = 1; w < THREADS / 32; ++w) r = op(r, s.warp_v[w]);
    return r;
}
