// Warp-level reductions with shuffles: plain and segmented-pair, for reuse by other kernels
// (SpMV row sums, tile look-back).
#pragma once
#include "common.cuh"

// Reduction of one value per lane; every lane receives the result (butterfly).
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T x, Op op) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) x = op(x, __shfl_xor_sync(FULL_MASK, x, off));
    return x;
}

// A (flag, value) pair of a segmented scan: `f` says a segment starts inside the run the pair
// summarises, `v` is the total since the last start. The segmented operator
//   (fa, a) (+) (fb, b) = (fa | fb, fb ? b : a (+) b)
// is associative (Schwartz 1980; Blelloch 1990), which is what lets segmented scan use every
// tree and look-back that plain scan uses.
template <typename T> struct SegPair {
    u32 f;
    T v;
};

template <typename T, typename Op>
__device__ __forceinline__ SegPair<T> seg_combine(SegPair<T> a, SegPair<T> b, Op op) {
    SegPair<T> r;
    r.f = a.f | b.f;
    r.v = b.f ? b.v : op(a.v, b.v);
    return r;
}

// Segmented reduction of the warp's pairs by a shfl_down tree, which keeps the operands in order
// (the operator need not commute). In lane order (lane 0 earliest) lane 0 receives the pair of
// the whole warp; REVERSED: lane 31 holds the EARLIEST element and lane 0 the latest (the order of
// a look-back window), and lane 0 receives (p31 (+) ... (+) p0). Other lanes hold partial results.
template <bool REVERSED, typename T, typename Op>
__device__ __forceinline__ SegPair<T> warp_seg_reduce_ordered(SegPair<T> p, Op op) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        SegPair<T> q;
        q.f = __shfl_down_sync(FULL_MASK, p.f, off);
        q.v = __shfl_down_sync(FULL_MASK, p.v, off);
        if ((int)(threadIdx.x & 31u) + off < 32)
            p = REVERSED ? seg_combine(q, p, op) : seg_combine(p, q, op);
    }
    return p;
}

// warp_seg_reduce_ordered with lane 31 earliest (a look-back window).
template <typename T, typename Op>
__device__ __forceinline__ SegPair<T> warp_seg_reduce_reversed(SegPair<T> p, Op op) {
    return warp_seg_reduce_ordered<true>(p, op);
}

// warp_seg_reduce_ordered in lane order (lane 0 earliest).
template <typename T, typename Op>
__device__ __forceinline__ SegPair<T> warp_seg_reduce(SegPair<T> p, Op op) {
    return warp_seg_reduce_ordered<false>(p, op);
}
