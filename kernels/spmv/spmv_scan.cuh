// Warp- and block-level pieces of the fused SpMV: a scan of per-thread (head count, boundary
// flag, partial sum) triples. The count part is a plain sum (how many rows start before a
// thread); the (flag, value) part is the segmented-sum operator of Sengupta et al. 2007 §2.2 in
// its reduce-by-key form: combining an earlier element a with a later one b gives
// (a.flag | b.flag, b.flag ? b.value : a.value + b.value). It is associative, so a warp can scan
// it with the Kogge-Stone shuffle ladder and a block can combine its warps' aggregates.
//
// These live under kernels/spmv/ because the fused kernel scans a *triple* in one pass (the
// generic segmented warp scan of kernels/warp/ scans one value with head flags); keeping the
// three in one shuffle ladder saves two thirds of the block-level synchronisation.
#pragma once
#include "common.cuh"

template <typename T> struct SegAgg {
    u32 count;  // head flags (row starts) in the span
    u32 flag;   // 1 if the span contains a segment boundary (a row start or a row end)
    T value;    // sum of the span's products after its last boundary
};

template <typename T>
__device__ __forceinline__ SegAgg<T> seg_combine(const SegAgg<T>& a, const SegAgg<T>& b) {
    SegAgg<T> r;
    r.count = a.count + b.count;
    r.flag = a.flag | b.flag;
    r.value = b.flag ? b.value : a.value + b.value;
    return r;
}

// Inclusive warp scan of the triple (all 32 lanes must call it).
template <typename T>
__device__ __forceinline__ SegAgg<T> warp_seg_scan_inclusive(SegAgg<T> v, u32 lane) {
#pragma unroll
    for (u32 off = 1; off < 32; off <<= 1) {
        SegAgg<T> up;
        up.count = __shfl_up_sync(FULL_MASK, v.count, off);
        up.flag = __shfl_up_sync(FULL_MASK, v.flag, off);
        up.value = __shfl_up_sync(FULL_MASK, v.value, off);
        if (lane >= off) v = seg_combine(up, v);
    }
    return v;
}

// Shared storage of the block scan: one aggregate per warp.
template <typename T, int WARPS> struct BlockSegScanStorage {
    SegAgg<T> warp_agg[WARPS];
};

// Exclusive block scan of the triple. Returns the exclusive prefix of this thread (identity
// (0, 0, 0) for thread 0) and writes the block aggregate to *block_agg. Contains one
// __syncthreads; the caller must not reuse `st` before another barrier.
template <typename T, int THREADS>
__device__ __forceinline__ SegAgg<T> block_seg_scan_exclusive(
    SegAgg<T> v, BlockSegScanStorage<T, THREADS / 32>& st, SegAgg<T>* block_agg) {
    constexpr int WARPS = THREADS / 32;
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    SegAgg<T> incl = warp_seg_scan_inclusive(v, lane);
    if (lane == 31) st.warp_agg[warp] = incl;
    __syncthreads();
    // Prefix of the warps before this one: at most WARPS-1 reads of shared memory (broadcast,
    // every lane of a warp reads the same address, so no bank conflicts).
    SegAgg<T> prefix;
    prefix.count = 0;
    prefix.flag = 0;
    prefix.value = T(0);
    SegAgg<T> total = prefix;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        SegAgg<T> a = st.warp_agg[w];
        if (w < (int)warp) prefix = seg_combine(prefix, a);
        total = seg_combine(total, a);
    }
    *block_agg = total;
    // Exclusive within the warp: the inclusive value of the lane before.
    SegAgg<T> ex;
    ex.count = __shfl_up_sync(FULL_MASK, incl.count, 1);
    ex.flag = __shfl_up_sync(FULL_MASK, incl.flag, 1);
    ex.value = __shfl_up_sync(FULL_MASK, incl.value, 1);
    if (lane == 0) return prefix;
    return seg_combine(prefix, ex);
}
