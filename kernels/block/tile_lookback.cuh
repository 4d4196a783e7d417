// Tile status words for the single-pass scan with decoupled look-back (Merrill and Garland,
// "Single-pass Parallel Prefix Scan with Decoupled Look-back", NVR-2016-002).
//
// Workspace layout (bytes, offsets passed from Rust, see primitives::gpu):
//   [0]   u32 generation   [4] u32 tile counter          (header, 256 bytes)
//   status: u64 per tile; high word = gen << 3 | flag << 2 | status, low word = the value's bits
//           for 4-byte types (value and status in ONE 64-bit store, so a reader that sees the
//           status sees its value: no fence needed)
//   agg, incl: one T per tile each, for 8-byte types: the value is stored first, then
//           __threadfence(), then the status word; a reader that sees the status fences before
//           reading the value (release/acquire through fences). Aggregate and inclusive values
//           live in separate arrays, because a tile overwrites AGG by INCL while others read.
//
// No reset pass between launches: every status word carries the generation of the launch that
// wrote it, and a word of another generation reads as "not yet". The block that draws the last
// tile id bumps the generation for the next launch and resets the tile counter (every other
// block has drawn its id by then; the next launch on the stream starts after this one ends).
// A workspace must be zero-filled once when allocated.
//
// Tile ids come from an atomic counter, not blockIdx: a block only waits on tiles whose ids
// were drawn earlier, by blocks already running, so the look-back can never deadlock.
#pragma once
#include "common.cuh"
#include "warp/warp_reduce.cuh"

#define TILE_INVALID 0u
#define TILE_AGG 1u
#define TILE_INCL 2u
#define TILE_GEN_MASK 0x1fffffffu

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

    // Thread 0 only: reads the generation, then draws a tile id. Bumps the generation and
    // resets the counter when it draws the last id.
    __device__ __forceinline__ void draw(u32 num_tiles, u32& tile, u32& gen) const {
        gen = *(volatile u32*)&header[0];
        __threadfence();
        tile = atomicAdd(&header[1], 1u);
        if (tile == num_tiles - 1) {
            atomicExch(&header[1], 0u);
            __threadfence();
            *(volatile u32*)&header[0] = (gen + 1u) & TILE_GEN_MASK;
        }
    }

    __device__ __forceinline__ void publish(u32 tile, u32 gen, u32 st, u32 f, T v) const {
        const u32 hi = (gen << 3) | (f << 2) | st;
        if (sizeof(T) == 4) {
            *(volatile u64*)&status[tile] = ((u64)hi << 32) | (u64)bits32<T>(v);
        } else {
            if (st == TILE_INCL) *(volatile T*)&incl[tile] = v;
            else *(volatile T*)&agg[tile] = v;
            __threadfence();
            *(volatile u64*)&status[tile] = ((u64)hi << 32);
        }
    }

    // Spins until tile `t` has a status of this generation; returns it with its pair.
    __device__ __forceinline__ u32 wait(u32 t, u32 gen, SegPair<T>& p) const {
        u64 w;
        u32 hi;
        do {
            w = *(volatile u64*)&status[t];
            hi = (u32)(w >> 32);
        } while ((hi & 3u) == TILE_INVALID || (hi >> 3) != gen);
        const u32 st = hi & 3u;
        p.f = (hi >> 2) & 1u;
        if (sizeof(T) == 4) {
            p.v = from_bits32<T>((u32)w);
        } else {
            __threadfence();
            p.v = st == TILE_INCL ? *(volatile T*)&incl[t] : *(volatile T*)&agg[t];
        }
        return st;
    }
};

// Warp 0 of tile `tile` (> 0): the exclusive prefix pair of the tile, by looking back over
// windows of 32 predecessors (lane l reads tile - 1 - l) until one has its inclusive prefix.
// A predecessor whose aggregate flag is set publishes INCL at once (its prefix cannot pass a
// segment head), so segmented look-backs stop early. Returns the pair on lane 0.
template <typename T, typename Op>
__device__ __forceinline__ SegPair<T> tile_lookback(const TileStatus<T>& ts, u32 tile, u32 gen, Op op) {
    const int lane = (int)(threadIdx.x & 31u);
    const T id = Op::template identity<T>();
    SegPair<T> running = {0u, id};
    long long pred = (long long)tile - 1;
    while (true) {
        const long long t = pred - lane;
        SegPair<T> p = {0u, id};
        u32 st = TILE_INCL;
        if (t >= 0) st = ts.wait((u32)t, gen, p);
        __syncwarp();
        const u32 incl = __ballot_sync(FULL_MASK, st == TILE_INCL);
        const int stop = incl ? __ffs(incl) - 1 : 32;  // nearest tile with its full prefix
        if (lane > stop) {
            p.f = 0;
            p.v = id;
        }
        SegPair<T> w = warp_seg_reduce_reversed(p, op);
        w.f = __shfl_sync(FULL_MASK, w.f, 0);
        w.v = __shfl_sync(FULL_MASK, w.v, 0);
        running = seg_combine(w, running, op);
        if (incl) break;
        pred -= 32;
    }
    return running;
}
