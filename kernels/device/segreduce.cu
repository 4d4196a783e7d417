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
// segreduce_fixup then finishes the segments that crossed tiles: one warp per such segment
// reduces the tails of the tiles it covers.
#include "common.cuh"

#if !defined(SR_THREADS) || !defined(SR_ITEMS)
#error "SR_THREADS and SR_ITEMS come from the Rust side as -D defines (primitives::segreduce)"
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

// The same tile contract as segreduce_tile (out for the owned segments that begin in the tile,
// headpart / fixseg for the one that began earlier, tail = the reduction from the tile's last
// segment start to its end), without the shared-memory segmented scan: the host picks this
// body when segments average >= SR_WARP_MIN_AVG elements, where the scan's per-element
// instructions made the tile kernel instruction-bound (ncu: 3x its memory floor).
//   - groups of G lanes reduce whole segments straight from global memory (a segment's G lanes
//     read consecutive elements; four loads in flight per lane), then a shuffle tree;
//   - the whole block reduces the two pieces that cross the tile's ends (the carried segment's
//     part and the tail) in one strided pass.
// Every reduction runs in a fixed order, so results are deterministic for a given G.
//
// With SR_VEC = 1 (primitives::segreduce::gpu::vector_loads: off by default, measured slower),
// 4-byte values of a group's segment of at least 4 G elements, with x 16-byte aligned, are read
// as 16-byte vectors: the unaligned head and tail (fewer than 4 elements each) by single loads,
// the aligned middle as one vector per lane per step, two steps in flight.
#ifndef SR_VEC
#define SR_VEC 0
#endif
template <typename T, typename Op, int G>
__device__ __forceinline__ T group_reduce(const T* __restrict__ x, u32 a, u32 b, u32 gl, Op op) {
    T acc = Op::template identity<T>();
    if (SR_VEC && sizeof(T) == 4 && b - a >= 4u * G && (((unsigned long long)x) & 15ull) == 0ull) {
        const u32 a4 = (a + 3u) & ~3u, b4 = b & ~3u;  // a4 <= b4: b - a >= 16
        if (a + gl < a4) acc = x[a + gl];
        if (b4 + gl < b) acc = op(acc, x[b4 + gl]);
        const uint4* v = reinterpret_cast<const uint4*>(x);
        const u32 ve = b4 / 4u;
        u32 j = a4 / 4u + gl;
        for (; j + G < ve; j += 2u * G) {
            const uint4 q0 = __ldg(v + j), q1 = __ldg(v + j + G);
            const T* e0 = reinterpret_cast<const T*>(&q0);
            const T* e1 = reinterpret_cast<const T*>(&q1);
            acc = op(acc, op(op(op(e0[0], e0[1]), op(e0[2], e0[3])), op(op(e1[0], e1[1]), op(e1[2], e1[3]))));
        }
        if (j < ve) {
            const uint4 q = __ldg(v + j);
            const T* e = reinterpret_cast<const T*>(&q);
            acc = op(acc, op(op(e[0], e[1]), op(e[2], e[3])));
        }
    } else {
        u32 i = a + gl;
        for (; i < b && b - i > 3u * G; i += 4u * G) {
            const T v0 = x[i], v1 = x[i + G], v2 = x[i + 2u * G], v3 = x[i + 3u * G];
            acc = op(acc, op(op(v0, v1), op(v2, v3)));
        }
        for (; i < b; i += G) acc = op(acc, x[i]);
    }
#pragma unroll
    for (int d = G / 2; d > 0; d >>= 1) acc = op(acc, __shfl_xor_sync(FULL_MASK, acc, d, G));
    return acc;
}

template <typename T, typename Op, int G>
__device__ __forceinline__ void segreduce_tile_groups(const T* __restrict__ x, u32 n, const u32* __restrict__ offsets,
                                                      u32 m, T* out, T* tail, T* headpart, u32* fixseg) {
    __shared__ u32 range[3];
    __shared__ T red[2][SR_WARPS];
    Op op;
    const T ident = Op::template identity<T>();
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const u32 start = blockIdx.x * SR_TILE;
    const u32 end = min(start + SR_TILE, n);
    // Warps 0, 1, 2 search at once: owned range [lo, hi) and the segment holding end - 1.
    if (warp < 3) {
        const u32 r = first_ending_after(offsets, m, warp == 0 ? start : warp == 1 ? end : end - 1);
        if (lane == 0) range[warp] = r;
    }
    __syncthreads();
    const u32 lo = range[0], hi = range[1], last = range[2];
    const bool carried = lo < hi && offsets[lo] < start;
    // The owned segments that begin here (empty ones get the identity).
    const u32 first = blockIdx.x == 0 ? 0u : lo;
    constexpr u32 GROUPS = SR_THREADS / G;
    const u32 grp = tid / G, gl = tid % G;
    // Rounds are uniform over a warp (its groups are consecutive), so every lane of the warp
    // reaches the shuffles.
    const u32 warp_first_grp = (warp * 32u) / G;
    // Segments longer than 16 G (more than 16 loads per lane) are left to the whole block
    // below: one group on a long segment would hold its block while the other warps idle.
    // At most SR_TILE / (16 G) <= 64 of them fit in a tile.
    __shared__ u32 longs[SR_TILE / 64];
    __shared__ u32 nlong;
    if (tid == 0) nlong = 0u;
    __syncthreads();
    for (u32 r0 = first; r0 + warp_first_grp < hi; r0 += GROUPS) {
        const u32 sg = r0 + grp;
        u32 a = 0, b = 0;
        if (sg < hi) {
            a = offsets[sg];
            b = offsets[sg + 1];
        }
        bool mine = sg < hi && a >= start;  // a < start: the carried segment (below)
        if (mine && b - a > 16u * G) {
            if (gl == 0) longs[atomicAdd(&nlong, 1u)] = sg;
            mine = false;
        }
        const T v = group_reduce<T, Op, G>(x, mine ? a : 0u, mine ? b : 0u, gl, op);
        if (mine && gl == 0) out[sg] = a == b ? ident : v;
    }
    __syncthreads();
    // The long segments, one after another by the whole block (the list's order varies between
    // runs, each segment's reduction order does not).
    for (u32 k = 0; k < nlong; ++k) {
        const u32 sg = longs[k];
        const u32 a = offsets[sg], b = offsets[sg + 1];
        T v = ident;
        for (u32 i = a + tid; i < b; i += SR_THREADS) v = op(v, x[i]);
#pragma unroll
        for (u32 d = 16; d > 0; d >>= 1) v = op(v, __shfl_down_sync(FULL_MASK, v, d));
        if (lane == 0) red[0][warp] = v;
        __syncthreads();
        if (tid == 0) {
            T r = red[0][0];
            for (u32 w = 1; w < SR_WARPS; ++w) r = op(r, red[0][w]);
            out[sg] = r;
        }
        __syncthreads();
    }
    // The two pieces that cross the tile's ends, by the whole block in one pass.
    const u32 h_end = carried ? offsets[lo + 1] : start;  // carried part: [start, h_end)
    const u32 t_beg = max(start, offsets[last]);           // tail: [t_beg, end)
    T hv = ident, tv = ident;
    for (u32 i = start + tid; i < h_end; i += SR_THREADS) hv = op(hv, x[i]);
    for (u32 i = t_beg + tid; i < end; i += SR_THREADS) tv = op(tv, x[i]);
#pragma unroll
    for (u32 d = 16; d > 0; d >>= 1) {
        hv = op(hv, __shfl_down_sync(FULL_MASK, hv, d));
        tv = op(tv, __shfl_down_sync(FULL_MASK, tv, d));
    }
    if (lane == 0) {
        red[0][warp] = hv;
        red[1][warp] = tv;
    }
    __syncthreads();
    if (tid == 0) {
        T h = red[0][0], t = red[1][0];
        for (u32 w = 1; w < SR_WARPS; ++w) {
            h = op(h, red[0][w]);
            t = op(t, red[1][w]);
        }
        fixseg[blockIdx.x] = carried ? lo : SR_NONE;
        if (carried) headpart[blockIdx.x] = h;
        tail[blockIdx.x] = t;
    }
}

// One warp per tile (SR_WARPS tiles per block, so the launch has a tile count / SR_WARPS
// blocks that mostly exit at once); only tiles whose first owned segment began in an earlier
// tile work: the warp reduces the tails of the tiles the segment covers, four loads in flight
// per lane, then adds the tile's own part.
template <typename T, typename Op>
__device__ __forceinline__ void segreduce_fixup(const u32* offsets, T* out, const T* tail,
                                                const T* headpart, const u32* fixseg, u32 tiles) {
    const u32 lane = threadIdx.x & 31u;
    const u32 t = blockIdx.x * SR_WARPS + (threadIdx.x >> 5);
    if (t >= tiles) return;
    const u32 s = fixseg[t];
    if (s == SR_NONE) return;  // uniform over the warp
    Op op;
    const u32 u0 = offsets[s] / SR_TILE;
    T acc = Op::template identity<T>();
    u32 u = u0 + lane;
    for (; u + 96u < t; u += 128u)
        acc = op(acc, op(op(tail[u], tail[u + 32u]), op(tail[u + 64u], tail[u + 96u])));
    for (; u < t; u += 32u) acc = op(acc, tail[u]);
#pragma unroll
    for (u32 d = 16; d > 0; d >>= 1) acc = op(acc, __shfl_down_sync(FULL_MASK, acc, d));
    if (lane == 0) out[s] = op(acc, headpart[t]);
}

// segreduce_groupsG_OP_T: the lane-group tile kernel for groups of G lanes.
#define SEGREDUCE_GROUPS(T, S, OP, ON, G)                                                         \
    extern "C" __global__ void __launch_bounds__(SR_THREADS)                                      \
    segreduce_groups##G##_##ON##_##S(const T* x, u32 n, const u32* offsets, u32 m, T* out,        \
                                     T* tail, T* headpart, u32* fixseg) {                         \
        segreduce_tile_groups<T, OP, G>(x, n, offsets, m, out, tail, headpart, fixseg);           \
    }
#define SEGREDUCE(T, S, OP, ON)                                                                   \
    extern "C" __global__ void __launch_bounds__(SR_THREADS)                                      \
    segreduce_##ON##_##S(const T* x, u32 n, const u32* offsets, u32 m, T* out, T* tail,           \
                         T* headpart, u32* fixseg) {                                              \
        segreduce_tile<T, OP>(x, n, offsets, m, out, tail, headpart, fixseg);                     \
    }                                                                                             \
    SEGREDUCE_GROUPS(T, S, OP, ON, 4)                                                             \
    SEGREDUCE_GROUPS(T, S, OP, ON, 8)                                                             \
    SEGREDUCE_GROUPS(T, S, OP, ON, 16)                                                            \
    SEGREDUCE_GROUPS(T, S, OP, ON, 32)                                                            \
    extern "C" __global__ void __launch_bounds__(SR_THREADS)                                      \
    segreduce_fixup_##ON##_##S(const u32* offsets, T* out, const T* tail, const T* headpart,      \
                               const u32* fixseg, u32 tiles) {                                    \
        segreduce_fixup<T, OP>(offsets, out, tail, headpart, fixseg, tiles);                      \
    }                                                                                             \
    extern "C" __global__ void fill_identity_##ON##_##S(T* out, u32 m) {                          \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)   \
            out[i] = OP::template identity<T>();                                                  \
    }
#define SEGREDUCE_OPS(T, S)                                                                       \
    SEGREDUCE(T, S, OpPlus, plus)                                                                 \
    SEGREDUCE(T, S, OpMax, max)                                                                   \
    SEGREDUCE(T, S, OpMin, min)
FOR_SCAN_ELEMS(SEGREDUCE_OPS)
