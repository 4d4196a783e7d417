// Tile status words for the single-pass scan with decoupled look-back (Merrill and Garland,
// "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVR-2016-002).
//
// Workspace layout (bytes, offsets passed from Rust, see primitives::gpu):
//   [0]   u32 generation   [4] u32 tile counter   [8] u32 done counter   (header, 256 bytes)
//   status: u64 per tile; high word = gen << 3 | flag << 2 | status, low word = the value's bits
//           for 4-byte types (value and status in ONE 64-bit store, so a reader that sees the
//           status sees its value: no fence needed)
//   8-byte types, SCAN_STATUS16 = 1 (default): status words of 16 bytes, {value bits, high word
//           << 32}, written and read as ONE 16-byte vector access (st/ld .v2.u64 by one thread,
//           16-byte aligned: a single access on sm_70 and later, which CUB's tile state for
//           8-byte values also relies on). No fence on either side. The array starts at `status`
//           and uses the agg/incl regions behind it (the workspace gives status, agg and incl
//           8 bytes per tile each, contiguous, so 16 bytes per tile fit).
//   8-byte types, SCAN_STATUS16 = 0: agg, incl hold one T per tile each: the value is stored
//           first, then __threadfence(), then the status word; a reader that sees the status
//           fences before reading the value (release/acquire through fences). Aggregate and
//           inclusive values live in separate arrays, because a tile overwrites AGG by INCL
//           while others read. Measured slower (two fences per tile; benches/results/history/scan.md).
//
// No reset pass between launches: every status word carries the generation of the launch that
// wrote it, and a word of another generation reads as "not yet". The last block to finish
// advances the generation for the next launch and resets the counters (every block has read
// the generation by then; the next launch on the stream starts after this one ends).
// A workspace must be zero-filled once when allocated.
//
// Tile ids come from an atomic counter, not blockIdx: a block only waits on tiles whose ids
// were drawn earlier, by blocks already running, so the look-back can never deadlock.
// (SCAN_TILE_ORDER = 1 uses blockIdx.x instead, as CUB does: 3 % faster for f32 on an H200, but
// correct only while the hardware starts blocks in index order; off by default.)
#pragma once
#include "common.cuh"
#include "warp/warp_reduce.cuh"

#define TILE_INVALID 0u
#define TILE_AGG 1u
#define TILE_INCL 2u
#define TILE_GEN_MASK 0x1fffffffu

// Nanoseconds a look-back lane sleeps between polls of a status word that is not ready yet
// (0 = spin). Polling lanes of a thousand resident blocks otherwise compete with the streaming
// loads for L2 bandwidth.
// Tile ids: 0 = drawn from an atomic counter (below), 1 = blockIdx.x (policy::lookback_order).
#ifndef SCAN_TILE_ORDER
#define SCAN_TILE_ORDER 0
#endif

#ifndef SCAN_BACKOFF
#define SCAN_BACKOFF 0
#endif

// Nanoseconds warp 0 waits before its first look-back window (0 = none), in launches of at
// least SCAN_FIRST_DELAY_TILES tiles: see policy::lookback_first_delay_ns. Small launches skip
// it: their tiles all start together and the wait would sit on the critical path.
#ifndef SCAN_FIRST_DELAY
#define SCAN_FIRST_DELAY 0
#endif
#ifndef SCAN_FIRST_DELAY_TILES
#define SCAN_FIRST_DELAY_TILES 2048
#endif

#ifndef SCAN_STATUS16
#define SCAN_STATUS16 1
#endif

template <typename T> __device__ __forceinline__ u64 bits64(T v) { return 0ull; }
template <> __device__ __forceinline__ u64 bits64<double>(double v) { return (u64)__double_as_longlong(v); }
template <typename T> __device__ __forceinline__ T from_bits64(u64 b) { return T(0); }
template <> __device__ __forceinline__ double from_bits64<double>(u64 b) { return __longlong_as_double((long long)b); }

// One status word as read by a look-back lane: `hi` is the 64-bit word with the status in its
// high half (4-byte values: the value in its low half); `val` holds an 8-byte value's bits
// (16-byte words only).
struct StatusWord {
    u64 hi;
    u64 val;
};

template <typename T> __device__ __forceinline__ u32 bits32(T v);
template <> __device__ __forceinline__ u32 bits32<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ u32 bits32<int>(int v) { return (u32)v; }
template <> __device__ __forceinline__ u32 bits32<unsigned int>(unsigned int v) { return v; }
template <> __device__ __forceinline__ u32 bits32<double>(double) { return 0u; }
template <typename T> __device__ __forceinline__ T from_bits32(u32 b);
template <> __device__ __forceinline__ float from_bits32<float>(u32 b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ int from_bits32<int>(u32 b) { return (int)b; }
template <> __device__ __forceinline__ unsigned int from_bits32<unsigned int>(u32 b) { return b; }
template <> __device__ __forceinline__ double from_bits32<double>(u32) { return 0.0; }

template <typename T> struct TileStatus {
    u32* header;   // [0] generation, [1] tile counter
    u64* status;   // one word per tile
    T* agg;        // 8-byte types only
    T* incl;       // 8-byte types only

    // The generation of this launch (valid until every block of it has finished).
    __device__ __forceinline__ u32 generation() const { return *(volatile u32*)&header[0]; }

    // Thread 0 only: reads the generation and draws a tile id. No fence is needed between the
    // two: the generation only changes in finish(), after every block of this launch has
    // counted itself done, i.e. long after this read returned.
    __device__ __forceinline__ void draw(u32& tile, u32& gen) const {
        gen = *(volatile u32*)&header[0];
        tile = atomicAdd(&header[1], 1u);
    }

    // Thread 0 only, at the very end of a block: the last block of the launch to finish resets
    // both counters and advances the generation for the next launch (which starts after this
    // one ends, on the same stream).
    __device__ __forceinline__ void finish(u32 num_tiles, u32 gen) const {
        if (atomicAdd(&header[2], 1u) == num_tiles - 1) {
            header[1] = 0u;
            header[2] = 0u;
            *(volatile u32*)&header[0] = (gen + 1u) & TILE_GEN_MASK;
        }
    }

    static constexpr bool WIDE = sizeof(T) == 8 && SCAN_STATUS16;

    __device__ __forceinline__ void publish(u32 tile, u32 gen, u32 st, u32 f, T v) const {
        const u32 hi = (gen << 3) | (f << 2) | st;
        if (sizeof(T) == 4) {
            *(volatile u64*)&status[tile] = ((u64)hi << 32) | (u64)bits32<T>(v);
        } else if (WIDE) {
            u64* p = status + 2 * (size_t)tile;
            asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(bits64<T>(v)),
                         "l"((u64)hi << 32)
                         : "memory");
        } else {
            if (st == TILE_INCL) *(volatile T*)&incl[tile] = v;
            else *(volatile T*)&agg[tile] = v;
            __threadfence();
            *(volatile u64*)&status[tile] = ((u64)hi << 32);
        }
    }

    __device__ __forceinline__ StatusWord load_word(u32 t) const {
        StatusWord w = {0ull, 0ull};
        if (WIDE) {
            const u64* p = status + 2 * (size_t)t;
            asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(w.val), "=l"(w.hi) : "l"(p) : "memory");
        } else {
            w.hi = *(volatile u64*)&status[t];
        }
        return w;
    }
    __device__ __forceinline__ static bool valid(StatusWord w, u32 gen) {
        const u32 hi = (u32)(w.hi >> 32);
        return (hi & 3u) != TILE_INVALID && (hi >> 3) == gen;
    }
    // Spins until the word of tile `t` is valid (`w` holds a first read).
    __device__ __forceinline__ StatusWord wait_word(u32 t, u32 gen, StatusWord w) const {
        while (!valid(w, gen)) {
#if SCAN_BACKOFF > 0
            __nanosleep(SCAN_BACKOFF);
#endif
            w = load_word(t);
        }
        return w;
    }
    // The status and pair of a valid word. For 8-byte values, the caller has fenced after
    // reading the word (see tile_lookback).
    __device__ __forceinline__ u32 decode(u32 t, StatusWord w, SegPair<T>& p) const {
        const u32 hi = (u32)(w.hi >> 32);
        const u32 st = hi & 3u;
        p.f = (hi >> 2) & 1u;
        if (sizeof(T) == 4) p.v = from_bits32<T>((u32)w.hi);
        else if (WIDE) p.v = from_bits64<T>(w.val);
        else p.v = st == TILE_INCL ? *(volatile T*)&incl[t] : *(volatile T*)&agg[t];
        return st;
    }
};

#ifndef SCAN_LOOKBACK_K
#define SCAN_LOOKBACK_K 1
#endif

// Warp 0 of tile `tile` (> 0): the exclusive prefix pair of the tile, by looking back over
// windows of 32 x K predecessors (lane l reads tiles tile-1-(K*l+k), k = 0..K-1, K independent
// loads in flight) until one has its inclusive prefix. A predecessor whose aggregate flag is set
// publishes INCL at once (its prefix cannot pass a segment head), so segmented look-backs stop
// early. Returns the pair on every lane.
//
// K is a tuning knob (policy::lookback_k). The idea behind K > 1: a tile that finds no
// inclusive prefix in its window moves one window back per L2 round trip, which would cap the
// frontier at one window per round trip. Measured on an H200 (f32, 2^26): K = 1 287 us,
// K = 4 310 us, K = 8 428 us — waiting for more predecessors costs more than it saves, so
// K = 1 (CUB's window) is the default.
template <typename T, typename Op>
__device__ __forceinline__ SegPair<T> tile_lookback(const TileStatus<T>& ts, u32 tile, u32 gen, Op op,
                                                    u32 num_tiles) {
    const int lane = (int)(threadIdx.x & 31u);
    const T id = Op::template identity<T>();
    SegPair<T> running = {0u, id};
    long long pred = (long long)tile - 1;
#if SCAN_FIRST_DELAY > 0
    if (num_tiles >= SCAN_FIRST_DELAY_TILES) __nanosleep(SCAN_FIRST_DELAY);
#else
    (void)num_tiles;
#endif
    while (true) {
        SegPair<T> p[SCAN_LOOKBACK_K];
        u32 st[SCAN_LOOKBACK_K];
        StatusWord w[SCAN_LOOKBACK_K];
        // Issue all K loads before looking at any (one round trip, not K).
#pragma unroll
        for (int k = 0; k < SCAN_LOOKBACK_K; ++k) {
            const long long t = pred - (long long)(SCAN_LOOKBACK_K * lane + k);
            w[k] = t >= 0 ? ts.load_word((u32)t) : StatusWord{0ull, 0ull};
        }
#pragma unroll
        for (int k = 0; k < SCAN_LOOKBACK_K; ++k) {
            const long long t = pred - (long long)(SCAN_LOOKBACK_K * lane + k);
            if (t >= 0) w[k] = ts.wait_word((u32)t, gen, w[k]);
        }
        // acquire (separate-array layout only): values were stored before the status
        if (sizeof(T) != 4 && !TileStatus<T>::WIDE) __threadfence();
#pragma unroll
        for (int k = 0; k < SCAN_LOOKBACK_K; ++k) {
            const long long t = pred - (long long)(SCAN_LOOKBACK_K * lane + k);
            p[k].f = 0u;
            p[k].v = id;
            st[k] = TILE_INCL;
            if (t >= 0) st[k] = ts.decode((u32)t, w[k], p[k]);
        }
        __syncwarp();
        // Nearest tile with its full prefix: first lane with one, then its first k.
        int kstop = SCAN_LOOKBACK_K;
#pragma unroll
        for (int k = SCAN_LOOKBACK_K - 1; k >= 0; --k)
            if (st[k] == TILE_INCL) kstop = k;
        const u32 incl = __ballot_sync(FULL_MASK, kstop < SCAN_LOOKBACK_K);
        const int stop = incl ? __ffs(incl) - 1 : 32;
        // This lane's pair over its K tiles, oldest first, ignoring tiles past the stop.
        SegPair<T> q = {0u, id};
#pragma unroll
        for (int k = SCAN_LOOKBACK_K - 1; k >= 0; --k) {
            const bool use = lane < stop || (lane == stop && k <= kstop);
            if (use) q = seg_combine(q, p[k], op);
        }
        SegPair<T> win = warp_seg_reduce_reversed(q, op);
        win.f = __shfl_sync(FULL_MASK, win.f, 0);
        win.v = __shfl_sync(FULL_MASK, win.v, 0);
        running = seg_combine(win, running, op);
        if (incl) break;
        pred -= 32 * SCAN_LOOKBACK_K;
    }
    return running;
}
