// Segmented reduce over CSR-style offsets: out[s] = reduction of x[offsets[s]..offsets[s+1]]
// (the operator's identity when empty), reading x once.
//
// Tiles of SR_TILE elements. Tile t owns the segments whose last element lies in it (an empty
// segment is owned by the tile holding position offsets[s] - 1, tile 0 for position 0). The tile:
//   1. finds its owned segment range [lo, hi) by binary search in offsets (thread 0);
//   2. loads its values (coalesced) into shared memory and marks the starts of its segments in a
//      shared bitmap (bit 0 always: the tile restarts the running reduction);
//   3. runs a segmented inclusive reduction of the tile in place: sequential over each thread's
//      SR_ITEMS consecutive values, then a (flag, value) segmented scan of the thread carries
//      (warp shuffles, then the warp carries), then the carry-in applied up to the first head;
//   4. each owned segment reads its result at its last element; a segment that began in an
//      earlier tile instead leaves its in-tile part (headpart) for the fix-up, and every tile
//      leaves the running value at its last element (tail).
// segreduce_fixup then finishes the segments that crossed tiles: one block per such segment
// reduces the tails of the tiles it covers (so a 2^26-element segment is not one thread's walk).
#include "common.cuh"

#ifndef SR_THREADS
#define SR_THREADS 256
#endif
#ifndef SR_ITEMS
#define SR_ITEMS 16
#endif
#define SR_TILE (SR_THREADS * SR_ITEMS)
#define SR_WARPS (SR_THREADS / 32)
#define SR_PAD(j) ((j) + ((j) >> 5))
#define SR_NONE 0xffffffffu

// First s in [0, m) with offsets[s + 1] > v, or m: a 32-ary search by one whole warp (every
// lane returns the answer). Each round probes 32 evenly spaced offsets in one coalesced-ish
// load and keeps the gap where the predicate turns true, so 2^21 segments take 5 dependent
// loads instead of the 21 of a binary search by one thread — that chain of L2/DRAM round trips
// before a tile could start was the segmented reduce's latency floor.
__device__ __forceinline__ u32 first_ending_after(const u32* offsets, u32 m, u32 v) {
    const u32 lane = threadIdx.x & 31u;
    u32 lo = 0, hi = m;  // the answer lies in [lo, hi]
    while (hi - lo > 32u) {
        const u32 step = (hi - lo + 31u) / 32u;
        const u32 p = lo + (lane + 1u) * step - 1u;
        const bool pred = p >= hi || offsets[p + 1] > v;
        const u32 bal = __ballot_sync(FULL_MASK, pred);
        if (bal == 0u) {
            lo = lo + 32u * step;  // past every probe: only hi is left
            if (lo > hi) lo = hi;
        } else {
            const u32 f = __ffs(bal) - 1u;
            const u32 nhi = min(lo + (f + 1u) * step - 1u, hi);
            lo = f == 0u ? lo : lo + f * step;
            hi = nhi;
        }
    }
    const u32 p = lo + lane;
    const bool pred = p < hi && offsets[p + 1] > v;
    const u32 bal = __ballot_sync(FULL_MASK, pred);
    return bal ? lo + __ffs(bal) - 1u : hi;
}

template <typename T, typename Op>
__device__ __forceinline__ void segreduce_tile(const T* x, u32 n, const u32* offsets, u32 m, T* out,
                                               T* tail, T* headpart, u32* fixseg) {
    __shared__ T sv[SR_PAD(SR_TILE)];
    __shared__ u32 hb[SR_TILE / 32];
    __shared__ u32 range[2];
    __shared__ u32 wflag[SR_WARPS];
    __shared__ T wval[SR_WARPS];
    Op op;
    const T ident = Op::template identity<T>();
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const u32 start = blockIdx.x * SR_TILE;
    const u32 end = min(start + SR_TILE, n);
    // Warps 0 and 1 search the two ends at once (SR_THREADS >= 64).
    if (warp < 2) {
        const u32 r = first_ending_after(offsets, m, warp == 0 ? start : end);
        if (lane == 0) range[warp] = r;
    }
    for (u32 i = tid; i < SR_TILE / 32; i += SR_THREADS) hb[i] = i == 0 ? 1u : 0u;
#pragma unroll
    for (u32 it = 0; it < SR_ITEMS; ++it) {
        u32 j = it * SR_THREADS + tid;
        sv[SR_PAD(j)] = start + j < n ? x[start + j] : ident;
    }
    __syncthreads();
    const u32 lo = range[0], hi = range[1];
    // Segment starts inside the tile: segments lo+1 .. hi (hi may start here and continue).
    for (u32 s = lo + 1 + tid; s <= hi && s < m; s += SR_THREADS) {
        u32 pos = offsets[s];
        if (pos >= start && pos < end) atomicOr(&hb[(pos - start) >> 5], 1u << ((pos - start) & 31u));
    }
    __syncthreads();
    // Thread-sequential inclusive segmented reduction of SR_ITEMS consecutive values.
    const u32 base = tid * SR_ITEMS;
    T v[SR_ITEMS];
    u32 hw = 0; // head bits of this thread's items (SR_ITEMS <= 32)
#pragma unroll
    for (u32 k = 0; k < SR_ITEMS; ++k) {
        v[k] = sv[SR_PAD(base + k)];
        hw |= ((hb[(base + k) >> 5] >> ((base + k) & 31u)) & 1u) << k;
    }
    T acc = v[0];
#pragma unroll
    for (u32 k = 1; k < SR_ITEMS; ++k) {
        acc = ((hw >> k) & 1u) ? v[k] : op(acc, v[k]);
        v[k] = acc;
    }
    // Exclusive segmented scan of the (has-head, carry) pairs over the threads of the block.
    u32 f = hw != 0;
    T c = acc;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        u32 of = __shfl_up_sync(FULL_MASK, f, d);
        T oc = __shfl_up_sync(FULL_MASK, c, d);
        if (lane >= d) {
            if (!f) c = op(oc, c);
            f |= of;
        }
    }
    if (lane == 31) { wflag[warp] = f; wval[warp] = c; }
    u32 ef = __shfl_up_sync(FULL_MASK, f, 1);
    T ec = __shfl_up_sync(FULL_MASK, c, 1);
    bool has = lane > 0;
    __syncthreads();
    // Carry from earlier warps: walk back until a warp with a head.
    if (warp > 0 && !(has && ef)) {
        T pc = wval[warp - 1];
        u32 pf = wflag[warp - 1];
        for (int w = (int)warp - 2; w >= 0 && !pf; --w) {
            pc = op(wval[w], pc);
            pf = wflag[w];
        }
        ec = has ? op(pc, ec) : pc;
        has = true;
    }
    if (has) {
#pragma unroll
        for (u32 k = 0; k < SR_ITEMS; ++k) {
            if ((hw >> k) & 1u) break;
            v[k] = op(ec, v[k]);
        }
    }
    __syncthreads();
#pragma unroll
    for (u32 k = 0; k < SR_ITEMS; ++k) sv[SR_PAD(base + k)] = v[k];
    __syncthreads();
    // Results of the owned segments.
    for (u32 s = (blockIdx.x == 0 ? 0 : lo) + tid; s < hi; s += SR_THREADS) {
        u32 a = offsets[s], b = offsets[s + 1];
        if (a == b) out[s] = ident;
        else if (a >= start) out[s] = sv[SR_PAD(b - 1 - start)];
    }
    if (tid == 0) {
        bool carried = lo < hi && offsets[lo] < start;
        fixseg[blockIdx.x] = carried ? lo : SR_NONE;
        if (carried) headpart[blockIdx.x] = sv[SR_PAD(offsets[lo + 1] - 1 - start)];
        tail[blockIdx.x] = sv[SR_PAD(end - 1 - start)];
    }
}

// One block per tile; only tiles whose first owned segment began in an earlier tile work.
template <typename T, typename Op>
__device__ __forceinline__ void segreduce_fixup(const u32* offsets, T* out, const T* tail,
                                                const T* headpart, const u32* fixseg) {
    __shared__ T red[SR_WARPS];
    const u32 t = blockIdx.x;
    const u32 s = fixseg[t];
    if (s == SR_NONE) return;
    Op op;
    const u32 u0 = offsets[s] / SR_TILE;
    T acc = Op::template identity<T>();
    for (u32 u = u0 + threadIdx.x; u < t; u += blockDim.x) acc = op(acc, tail[u]);
#pragma unroll
    for (u32 d = 16; d > 0; d >>= 1) acc = op(acc, __shfl_down_sync(FULL_MASK, acc, d));
    if ((threadIdx.x & 31u) == 0) red[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        T r = red[0];
        for (u32 w = 1; w < blockDim.x / 32; ++w) r = op(r, red[w]);
        out[s] = op(r, headpart[t]);
    }
}

#define SEGREDUCE(T, S, OP, ON)                                                                   \
    extern "C" __global__ void __launch_bounds__(SR_THREADS)                                      \
    segreduce_##ON##_##S(const T* x, u32 n, const u32* offsets, u32 m, T* out, T* tail,           \
                         T* headpart, u32* fixseg) {                                              \
        segreduce_tile<T, OP>(x, n, offsets, m, out, tail, headpart, fixseg);                     \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(SR_THREADS)                                      \
    segreduce_fixup_##ON##_##S(const u32* offsets, T* out, const T* tail, const T* headpart,      \
                               const u32* fixseg) {                                               \
        segreduce_fixup<T, OP>(offsets, out, tail, headpart, fixseg);                             \
    }                                                                                             \
    extern "C" __global__ void fill_identity_##ON##_##S(T* out, u32 m) {                          \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)   \
            out[i] = OP::template identity<T>();                                                  \
    }
#define SEGREDUCE_OPS(T, S)                                                                       \
    SEGREDUCE(T, S, OpPlus, plus)                                                                 \
    SEGREDUCE(T, S, OpMax, max)                                                                   \
    SEGREDUCE(T, S, OpMin, min)
SEGREDUCE_OPS(float, f32)
SEGREDUCE_OPS(double, f64)
SEGREDUCE_OPS(int, i32)
SEGREDUCE_OPS(u32, u32)
