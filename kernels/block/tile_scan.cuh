// Tile-level scan ("agent" in CUB's terms): one block scans one tile of THREADS x ITEMS
// consecutive logical elements, in four steps:
//   1. load the tile (coalesced, striped) and transpose it to ITEMS consecutive elements per
//      thread through shared memory; read the thread's head flags (one or two u32 words);
//   2. each thread reduces its ITEMS elements sequentially to a (flag, value) pair;
//   3. a block-wide exclusive scan of those pairs (warp shuffles + one shared-memory pass);
//   4. the tile's carry-in is combined in, each thread rescans its ITEMS elements from its
//      prefix, and the tile is stored back through shared memory.
// The carry-in comes from the decoupled look-back (lookback_scan_tile), or from a scanned array
// of tile sums (the reduce-then-scan kernels of the warp-shuffle algorithm).
#pragma once
#include "common.cuh"
#include "warp/warp_reduce.cuh"
#include "block/block_scan.cuh"
#include "block/block_load_store.cuh"
#include "block/tile_lookback.cuh"

template <typename T, int THREADS, int ITEMS> struct TileStorage {
    TileBuffer<T, THREADS * ITEMS> buf;
    BlockScanStorage<T, THREADS> scan;
    T prefix_v;
    u32 prefix_f;
    u32 tile;
    u32 gen;
};

template <typename T, typename Op, bool SEG, int ITEMS>
__device__ __forceinline__ SegPair<T> thread_reduce(const T (&x)[ITEMS], u32 bits, Op op) {
    SegPair<T> r;
    r.f = SEG ? (bits != 0u) : 0u;
    r.v = x[0];
#pragma unroll
    for (int i = 1; i < ITEMS; ++i) r.v = (SEG && ((bits >> i) & 1u)) ? x[i] : op(r.v, x[i]);
    return r;
}

#define SCAN_MODE_INCL 0
#define SCAN_MODE_EXCL 1
// Exclusive over PAIRS (the tile sums of the multi-pass algorithms): a flag marks a head
// somewhere INSIDE the run an element summarises, so the element's own flag does not reset what
// comes before it; out[b] = pair(0) (+) ... (+) pair(b-1).
#define SCAN_MODE_PAIR_EXCL 2

// Rescans the thread's elements in place from the value `pre` of everything before them.
template <typename T, typename Op, bool SEG, int ITEMS>
__device__ __forceinline__ void thread_scan(T (&x)[ITEMS], u32 bits, T pre, int mode, Op op) {
    const T id = Op::template identity<T>();
    T run = pre;
    if (mode == SCAN_MODE_PAIR_EXCL) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const bool h = SEG && ((bits >> i) & 1u);
            const T o = run;
            run = h ? x[i] : op(run, x[i]);
            x[i] = o;
        }
    } else if (mode == SCAN_MODE_EXCL) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const bool h = SEG && ((bits >> i) & 1u);
            const T o = h ? id : run;
            run = h ? x[i] : op(run, x[i]);
            x[i] = o;
        }
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const bool h = SEG && ((bits >> i) & 1u);
            run = h ? x[i] : op(run, x[i]);
            x[i] = run;
        }
    }
}

// Steps 1-3 for tile `tile`: loads x, reads bits, returns the thread's exclusive pair within the
// tile and the tile aggregate.
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ SegPair<T> tile_upsweep(const T* __restrict__ in, const u32* __restrict__ flags,
                                                   long long n, long long base, bool bwd, Op op,
                                                   TileStorage<T, THREADS, ITEMS>& s, T (&x)[ITEMS],
                                                   u32& bits, SegPair<T>& agg) {
    load_tile_blocked<T, THREADS, ITEMS>(in, n, base, bwd, s.buf.items, x, Op::template identity<T>());
    bits = SEG ? logical_flags(flags, n, base + (long long)threadIdx.x * ITEMS, ITEMS, bwd) : 0u;
    SegPair<T> tp = thread_reduce<T, Op, SEG, ITEMS>(x, bits, op);
    return block_exclusive_scan<T, Op, SEG, THREADS>(tp, op, s.scan, agg);
}

// Tiles per look-back block (policy::lookback_tiles): 1, or 2 for lookback_scan_tile_pair.
#ifndef SCAN_TILES
#define SCAN_TILES 1
#endif

// The single-pass scan of two consecutive tiles A = 2p, B = 2p + 1 by one block (SCAN_TILES = 2).
// The block publishes A's aggregate, then loads and block-scans B and publishes B's aggregate,
// and only then has warp 0 look back for A: B's loads and scan fill the time the one-tile kernel
// spends in the first-window wait (SCAN_FIRST_DELAY) with seven warps idle at the barrier. B
// needs no look-back of its own: its prefix is A's inclusive prefix, known in the block.
// Both aggregates are published before the look-back, so no look-back ever waits on another
// block's look-back (the decoupling of the one-tile kernel is kept). Pair ids come from the
// same counter (or blockIdx.x) as tile ids do in the one-tile kernel; a block waits only on
// tiles of pairs drawn earlier.
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ void lookback_scan_tile_pair(const T* __restrict__ in, const u32* __restrict__ flags,
                                                        T* __restrict__ out, long long n, u32 num_tiles, bool bwd,
                                                        bool excl, const TileStatus<T>& ts,
                                                        TileStorage<T, THREADS, ITEMS>& s) {
    const Op op;
    const T id = Op::template identity<T>();
    const u32 num_blocks = (num_tiles + 1u) / 2u;
#if SCAN_TILE_ORDER
    const u32 pair = blockIdx.x;
    const u32 gen = threadIdx.x < 32 ? ts.generation() : 0u;
#else
    if (threadIdx.x == 0) {
        u32 t, g;
        ts.draw(t, g);
        s.tile = t;
        s.gen = g;
    }
    __syncthreads();
    const u32 pair = s.tile, gen = s.gen;
#endif
    const u32 ta = 2u * pair, tb = ta + 1u;
    const bool has_b = tb < num_tiles;  // uniform over the block
    const int mode = excl ? SCAN_MODE_EXCL : SCAN_MODE_INCL;
    const long long base_a = (long long)ta * (THREADS * ITEMS);
    const long long base_b = base_a + THREADS * ITEMS;
    T xa[ITEMS];
    u32 bits_a;
    SegPair<T> agg_a;
    SegPair<T> pre_a = tile_upsweep<T, Op, SEG, THREADS, ITEMS>(in, flags, n, base_a, bwd, op, s, xa, bits_a, agg_a);
    // A's inclusive prefix is known here when A is the first tile or contains a segment head.
    const bool a_known = ta == 0 || (SEG && agg_a.f);
    if (threadIdx.x == 0) ts.publish(ta, gen, a_known ? TILE_INCL : TILE_AGG, agg_a.f, agg_a.v);
    T xb[ITEMS];
    u32 bits_b = 0u;
    SegPair<T> pre_b = {0u, id}, agg_b = {0u, id};
    if (has_b) {
        // tile_upsweep's barriers also order A's block scan storage before B's reuse of it.
        pre_b = tile_upsweep<T, Op, SEG, THREADS, ITEMS>(in, flags, n, base_b, bwd, op, s, xb, bits_b, agg_b);
    }
    const bool b_known = a_known || (SEG && agg_b.f);
    if (has_b && threadIdx.x == 0) {
        // Known: B's inclusive prefix at once (A's is its aggregate), else B's aggregate.
        if (b_known) {
            const SegPair<T> inc = seg_combine(agg_a, agg_b, op);
            ts.publish(tb, gen, TILE_INCL, inc.f, inc.v);
        } else {
            ts.publish(tb, gen, TILE_AGG, agg_b.f, agg_b.v);
        }
    }
    if (threadIdx.x < 32) {
        SegPair<T> P = {0u, id};
        if (ta != 0) {
            P = tile_lookback<T, Op>(ts, ta, gen, op, num_tiles);
            if (threadIdx.x == 0 && !a_known) {
                const SegPair<T> inc = seg_combine(P, agg_a, op);
                ts.publish(ta, gen, TILE_INCL, inc.f, inc.v);
                if (has_b && !b_known) {
                    const SegPair<T> incb = seg_combine(inc, agg_b, op);
                    ts.publish(tb, gen, TILE_INCL, incb.f, incb.v);
                }
            }
        }
        if (threadIdx.x == 0) {
            s.prefix_v = P.v;
            s.prefix_f = P.f;
        }
    }
    __syncthreads();
    const SegPair<T> Pa = {s.prefix_f, s.prefix_v};
    pre_a = seg_combine(Pa, pre_a, op);
    thread_scan<T, Op, SEG, ITEMS>(xa, bits_a, pre_a.v, mode, op);
    store_tile_blocked<T, THREADS, ITEMS>(out, n, base_a, bwd, s.buf.items, xa);
    if (has_b) {
        const SegPair<T> inc_a = seg_combine(Pa, agg_a, op);
        pre_b = seg_combine(inc_a, pre_b, op);
        __syncthreads();  // A's stores have read the buffer
        thread_scan<T, Op, SEG, ITEMS>(xb, bits_b, pre_b.v, mode, op);
        store_tile_blocked<T, THREADS, ITEMS>(out, n, base_b, bwd, s.buf.items, xb);
    }
    if (threadIdx.x == 0) ts.finish(num_blocks, gen);
}

// The single-pass scan of one tile with decoupled look-back.
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ void lookback_scan_tile(const T* __restrict__ in, const u32* __restrict__ flags,
                                                   T* __restrict__ out, long long n, u32 num_tiles, bool bwd,
                                                   bool excl, const TileStatus<T>& ts,
                                                   TileStorage<T, THREADS, ITEMS>& s) {
#if SCAN_TILES == 2
    lookback_scan_tile_pair<T, Op, SEG, THREADS, ITEMS>(in, flags, out, n, num_tiles, bwd, excl, ts, s);
    return;
#endif
    const Op op;
    const T id = Op::template identity<T>();
#if SCAN_TILE_ORDER
    // Tiles in blockIdx order (CUB's choice): the loads start at once, without the round trip
    // of the counter draw and the barrier that broadcasts it. Relies on the hardware starting
    // blocks in blockIdx order (as CUB's single-pass scan does); only warp 0, which looks back
    // and publishes, needs the generation.
    const u32 tile = blockIdx.x;
    const u32 gen = threadIdx.x < 32 ? ts.generation() : 0u;
#else
    if (threadIdx.x == 0) {
        u32 t, g;
        ts.draw(t, g);
        s.tile = t;
        s.gen = g;
    }
    __syncthreads();
    const u32 tile = s.tile, gen = s.gen;
#endif
    const long long base = (long long)tile * (THREADS * ITEMS);
    T x[ITEMS];
    u32 bits;
    SegPair<T> agg;
    SegPair<T> pre = tile_upsweep<T, Op, SEG, THREADS, ITEMS>(in, flags, n, base, bwd, op, s, x, bits, agg);
    if (threadIdx.x < 32) {
        SegPair<T> P = {0u, id};
        // A tile that contains a segment head knows its inclusive prefix already.
        const bool closed = SEG && agg.f;
        if (tile == 0) {
            if (threadIdx.x == 0) ts.publish(0, gen, TILE_INCL, agg.f, agg.v);
        } else {
            if (threadIdx.x == 0) ts.publish(tile, gen, closed ? TILE_INCL : TILE_AGG, agg.f, agg.v);
            P = tile_lookback<T, Op>(ts, tile, gen, op, num_tiles);
            if (threadIdx.x == 0 && !closed) {
                SegPair<T> inc = seg_combine(P, agg, op);
                ts.publish(tile, gen, TILE_INCL, inc.f, inc.v);
            }
        }
        if (threadIdx.x == 0) {
            s.prefix_v = P.v;
            s.prefix_f = P.f;
        }
    }
    __syncthreads();
    SegPair<T> P = {s.prefix_f, s.prefix_v};
    pre = seg_combine(P, pre, op);
    thread_scan<T, Op, SEG, ITEMS>(x, bits, pre.v, excl ? SCAN_MODE_EXCL : SCAN_MODE_INCL, op);
    store_tile_blocked<T, THREADS, ITEMS>(out, n, base, bwd, s.buf.items, x);
    if (threadIdx.x == 0) ts.finish(num_tiles, gen);
}

// Reduce-then-scan, pass 1: tile blockIdx.x writes its aggregate pair.
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ void reduce_tile(const T* __restrict__ in, const u32* __restrict__ flags, long long n,
                                            bool bwd, u32* spine_f, T* spine_v,
                                            TileStorage<T, THREADS, ITEMS>& s) {
    const Op op;
    const long long base = (long long)blockIdx.x * (THREADS * ITEMS);
    T x[ITEMS];
    u32 bits;
    SegPair<T> agg;
    tile_upsweep<T, Op, SEG, THREADS, ITEMS>(in, flags, n, base, bwd, op, s, x, bits, agg);
    if (threadIdx.x == 0) {
        spine_f[blockIdx.x] = agg.f;
        spine_v[blockIdx.x] = agg.v;
    }
}

// Reduce-then-scan, pass 3: tile blockIdx.x scans from its carry spine_v[blockIdx.x] (the
// exclusive scan of the tile aggregates).
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ void scan_tile_from_spine(const T* __restrict__ in, const u32* __restrict__ flags,
                                                     T* __restrict__ out, long long n, bool bwd, bool excl,
                                                     const T* __restrict__ spine_v,
                                                     TileStorage<T, THREADS, ITEMS>& s) {
    const Op op;
    const long long base = (long long)blockIdx.x * (THREADS * ITEMS);
    T x[ITEMS];
    u32 bits;
    SegPair<T> agg;
    SegPair<T> pre = tile_upsweep<T, Op, SEG, THREADS, ITEMS>(in, flags, n, base, bwd, op, s, x, bits, agg);
    SegPair<T> P = {0u, spine_v[blockIdx.x]};
    pre = seg_combine(P, pre, op);
    thread_scan<T, Op, SEG, ITEMS>(x, bits, pre.v, excl ? SCAN_MODE_EXCL : SCAN_MODE_INCL, op);
    store_tile_blocked<T, THREADS, ITEMS>(out, n, base, bwd, s.buf.items, x);
}

// Reduce-then-scan, pass 2 (also the second level of the work-efficient algorithm): ONE block
// scans the m tile pairs (spine_f, spine_v) in place, exclusive and forward, looping over
// chunks of THREADS x ITEMS with a running carry.
template <typename T, typename Op, bool SEG, int THREADS, int ITEMS>
__device__ __forceinline__ void spine_scan(const u32* __restrict__ spine_f, T* spine_v, long long m,
                                           TileStorage<T, THREADS, ITEMS>& s) {
    const Op op;
    const T id = Op::template identity<T>();
    SegPair<T> carry = {0u, id};
    for (long long base = 0; base < m; base += THREADS * ITEMS) {
        T x[ITEMS];
        load_tile_blocked<T, THREADS, ITEMS>(spine_v, m, base, false, s.buf.items, x, id);
        u32 bits = 0;
        if (SEG) {
            const long long j0 = base + (long long)threadIdx.x * ITEMS;
#pragma unroll
            for (int k = 0; k < ITEMS; ++k)
                if (j0 + k < m && spine_f[j0 + k]) bits |= 1u << k;
        }
        SegPair<T> tp = thread_reduce<T, Op, SEG, ITEMS>(x, bits, op);
        SegPair<T> agg;
        SegPair<T> pre = block_exclusive_scan<T, Op, SEG, THREADS>(tp, op, s.scan, agg);
        pre = seg_combine(carry, pre, op);
        thread_scan<T, Op, SEG, ITEMS>(x, bits, pre.v, SCAN_MODE_PAIR_EXCL, op);
        store_tile_blocked<T, THREADS, ITEMS>(spine_v, m, base, false, s.buf.items, x);
        carry = seg_combine(carry, agg, op);
        __syncthreads();  // the next chunk reuses the buffer and the warp totals
    }
}
