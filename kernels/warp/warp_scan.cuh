// Warp-level scans with shuffles: plain and segmented (head flags).
//
// The segmented form is the warp formulation of Sengupta, Harris and Garland (2008, §4): every
// lane finds the lane where its segment starts ("mindex" in the paper, computed there by a max-
// scan of head indices in shared memory; here one __ballot_sync and a __clz), then runs the
// Kogge-Stone steps of the plain warp scan but accepts a partner only when the partner lies in
// its own segment (lane - offset >= start). log2(32) = 5 shuffle steps, no shared memory.
#pragma once
#include "common.cuh"

__device__ __forceinline__ u32 lane_id() { return threadIdx.x & 31u; }

// Inclusive scan of one value per lane (lane order = element order).
template <typename T, typename Op>
__device__ __forceinline__ T warp_inclusive_scan(T x, Op op) {
    const int lane = (int)lane_id();
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        T y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane >= off) x = op(y, x);
    }
    return x;
}

// Exclusive scan; lane 0 gets the identity. `total` receives the warp's reduction.
template <typename T, typename Op>
__device__ __forceinline__ T warp_exclusive_scan(T x, Op op, T& total) {
    T inc = warp_inclusive_scan(x, op);
    total = __shfl_sync(FULL_MASK, inc, 31);
    T exc = __shfl_up_sync(FULL_MASK, inc, 1);
    return lane_id() == 0 ? Op::template identity<T>() : exc;
}

// Segmented inclusive scan: `head` set on a lane starts a segment there. On return `open`
// tells whether a head occurs at or before this lane (then the value does not depend on
// anything before the warp).
template <typename T, typename Op>
__device__ __forceinline__ T warp_seg_inclusive_scan(T x, bool head, Op op, bool& closed) {
    const int lane = (int)lane_id();
    const u32 heads = __ballot_sync(FULL_MASK, head);
    const u32 le = heads & (FULL_MASK >> (31 - lane));   // heads at lanes <= lane
    const int start = le ? 31 - __clz(le) : 0;           // the paper's mindex
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        T y = __shfl_up_sync(FULL_MASK, x, off);
        if (lane - off >= start) x = op(y, x);
    }
    closed = le != 0;
    return x;
}
