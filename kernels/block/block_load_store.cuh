// Tile loads and stores: coalesced striped global accesses, transposed through shared memory
// into a blocked arrangement (thread t owns ITEMS consecutive elements), and back. Logical
// element j of a tile maps to physical index j (forward) or n-1-j (backward): a backward scan
// is the forward scan of the reversed array, so the same kernels do both with no extra pass,
// and the accesses stay coalesced (a warp reads 32 consecutive addresses, descending).
//
// Shared memory is padded with one element every 32 (PAD), so the blocked reads
// sm[t*ITEMS + i] of a warp hit distinct banks for 4-byte types when ITEMS is a power of two.
//
// Packed head flags: bit (i % 32) of word (i / 32) flags physical element i.
#pragma once
#include "common.cuh"

#define TILE_PAD(i) ((i) + ((i) >> 5))

template <typename T, int TILE> struct TileBuffer {
    T items[TILE + TILE / 32];
};

template <typename T> __device__ __forceinline__ T load_ro(const T* p) { return __ldg(p); }

#ifndef SCAN_VEC
#define SCAN_VEC 1
#endif

// Streaming (evict-first) global stores of the output (SCAN_STREAM_STORE = 1): the output is not
// read again by the scan, so it should not push the look-back's status words out of L2.
#ifndef SCAN_STREAM_STORE
#define SCAN_STREAM_STORE 0
#endif

__device__ __forceinline__ void store_vec(uint4* p, uint4 v) {
#if SCAN_STREAM_STORE
    __stcs(p, v);
#else
    *p = v;
#endif
}

// Full tiles whose first physical element is 16-byte aligned are moved with 16-byte vector
// accesses (VEC = 16 / sizeof(T) elements each): a quarter of the load/store instructions for
// 4-byte types. Backward, the physical range of a tile is reversed into logical order while
// writing shared memory. Shared-memory writes of a vector are conflict-free with TILE_PAD.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ bool tile_vectorizable(const T* p, long long n, long long base, bool bwd) {
    constexpr int VEC = 16 / (int)sizeof(T);
    if (!SCAN_VEC || ITEMS % VEC != 0) return false;
    if (base + (long long)THREADS * ITEMS > n) return false;
    const long long first = bwd ? n - base - (long long)THREADS * ITEMS : base;
    return (((unsigned long long)(p + first)) & 15ull) == 0;
}

// Loads logical elements base .. base+THREADS*ITEMS of `in` (length n); elements past n get
// `fill`. Ends with a barrier, so the buffer may be reused at once.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile_blocked(const T* __restrict__ in, long long n, long long base,
                                                  bool bwd, T* sm, T (&items)[ITEMS], T fill) {
    constexpr int TILE = THREADS * ITEMS;
    constexpr int VEC = 16 / (int)sizeof(T);
    if (tile_vectorizable<T, THREADS, ITEMS>(in, n, base, bwd)) {
        const long long first = bwd ? n - base - TILE : base;
        const uint4* src = reinterpret_cast<const uint4*>(in + first);
#pragma unroll
        for (int k = 0; k < ITEMS / VEC; ++k) {
            const int v = k * THREADS + (int)threadIdx.x;
            __align__(16) T vals[VEC];
            *reinterpret_cast<uint4*>(vals) = __ldg(src + v);
#pragma unroll
            for (int c = 0; c < VEC; ++c) {
                const int idx = bwd ? TILE - 1 - (v * VEC + c) : v * VEC + c;
                sm[TILE_PAD(idx)] = vals[c];
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int idx = k * THREADS + (int)threadIdx.x;
            const long long j = base + idx;
            T v = fill;
            if (j < n) v = load_ro(in + (bwd ? n - 1 - j : j));
            sm[TILE_PAD(idx)] = v;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) items[i] = sm[TILE_PAD((int)threadIdx.x * ITEMS + i)];
    __syncthreads();
}

// Stores a blocked tile to logical elements base .. (only those < n). Starts by writing shared
// memory, so the caller must have passed a barrier since the buffer was last read.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void store_tile_blocked(T* __restrict__ out, long long n, long long base, bool bwd,
                                                   T* sm, const T (&items)[ITEMS]) {
    constexpr int TILE = THREADS * ITEMS;
    constexpr int VEC = 16 / (int)sizeof(T);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) sm[TILE_PAD((int)threadIdx.x * ITEMS + i)] = items[i];
    __syncthreads();
    if (tile_vectorizable<T, THREADS, ITEMS>(out, n, base, bwd)) {
        const long long first = bwd ? n - base - TILE : base;
        uint4* dst = reinterpret_cast<uint4*>(out + first);
#pragma unroll
        for (int k = 0; k < ITEMS / VEC; ++k) {
            const int v = k * THREADS + (int)threadIdx.x;
            __align__(16) T vals[VEC];
#pragma unroll
            for (int c = 0; c < VEC; ++c) {
                const int idx = bwd ? TILE - 1 - (v * VEC + c) : v * VEC + c;
                vals[c] = sm[TILE_PAD(idx)];
            }
            store_vec(dst + v, *reinterpret_cast<const uint4*>(vals));
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int idx = k * THREADS + (int)threadIdx.x;
            const long long j = base + idx;
            if (j < n) out[bwd ? n - 1 - j : j] = sm[TILE_PAD(idx)];
        }
    }
}

// Warp-local variants (CUB's BLOCK_LOAD_WARP_TRANSPOSE): warp w moves logical elements
// [w*W, (w+1)*W) of the tile, W = 32*ITEMS, through its own slice of the same padded buffer, so
// the blocked arrangement (thread t owns elements t*ITEMS ..) is the same as above, but no block
// barrier is needed: a warp starts its scan as soon as its OWN loads have landed, instead of
// waiting for the slowest warp of the block. Slices do not overlap (TILE_PAD(w*W + i) with W a
// multiple of 32 stays inside [w*(W + W/32), (w+1)*(W + W/32))), so __syncwarp() orders every
// shared-memory access (racecheck-clean). Selected by SCAN_WARP_XPOSE (policy::lookback_xpose).
#ifndef SCAN_WARP_XPOSE
#define SCAN_WARP_XPOSE 0
#endif
template <typename T, int ITEMS>
__device__ __forceinline__ bool warp_vectorizable(const T* p, long long n, long long wbase, bool bwd) {
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int W = 32 * ITEMS;
    if (!SCAN_VEC || ITEMS % VEC != 0) return false;
    if (wbase + W > n) return false;
    const long long first = bwd ? n - wbase - W : wbase;
    return (((unsigned long long)(p + first)) & 15ull) == 0;
}

template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile_warp(const T* __restrict__ in, long long n, long long base, bool bwd,
                                               T* sm, T (&items)[ITEMS], T fill) {
    constexpr int W = 32 * ITEMS;
    constexpr int VEC = 16 / (int)sizeof(T);
    const int lane = (int)(threadIdx.x & 31u);
    const int w0 = (int)(threadIdx.x >> 5) * W;  // the warp's first logical element in the tile
    const long long wbase = base + w0;
    if (warp_vectorizable<T, ITEMS>(in, n, wbase, bwd)) {
        const long long first = bwd ? n - wbase - W : wbase;
        const uint4* src = reinterpret_cast<const uint4*>(in + first);
#pragma unroll
        for (int k = 0; k < ITEMS / VEC; ++k) {
            const int v = k * 32 + lane;
            __align__(16) T vals[VEC];
            *reinterpret_cast<uint4*>(vals) = __ldg(src + v);
#pragma unroll
            for (int c = 0; c < VEC; ++c) {
                const int idx = bwd ? W - 1 - (v * VEC + c) : v * VEC + c;
                sm[TILE_PAD(w0 + idx)] = vals[c];
            }
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int idx = k * 32 + lane;
            const long long j = wbase + idx;
            T v = fill;
            if (j < n) v = load_ro(in + (bwd ? n - 1 - j : j));
            sm[TILE_PAD(w0 + idx)] = v;
        }
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) items[i] = sm[TILE_PAD((int)threadIdx.x * ITEMS + i)];
    __syncwarp();
}

// Warp-local store: the warp's slice was last read by this warp (load_tile_warp ends with a
// __syncwarp), so no block barrier is needed before writing it.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void store_tile_warp(T* __restrict__ out, long long n, long long base, bool bwd, T* sm,
                                                const T (&items)[ITEMS]) {
    constexpr int W = 32 * ITEMS;
    constexpr int VEC = 16 / (int)sizeof(T);
    const int lane = (int)(threadIdx.x & 31u);
    const int w0 = (int)(threadIdx.x >> 5) * W;
    const long long wbase = base + w0;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) sm[TILE_PAD((int)threadIdx.x * ITEMS + i)] = items[i];
    __syncwarp();
    if (warp_vectorizable<T, ITEMS>(out, n, wbase, bwd)) {
        const long long first = bwd ? n - wbase - W : wbase;
        uint4* dst = reinterpret_cast<uint4*>(out + first);
#pragma unroll
        for (int k = 0; k < ITEMS / VEC; ++k) {
            const int v = k * 32 + lane;
            __align__(16) T vals[VEC];
#pragma unroll
            for (int c = 0; c < VEC; ++c) {
                const int idx = bwd ? W - 1 - (v * VEC + c) : v * VEC + c;
                vals[c] = sm[TILE_PAD(w0 + idx)];
            }
            store_vec(dst + v, *reinterpret_cast<const uint4*>(vals));
        }
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int idx = k * 32 + lane;
            const long long j = wbase + idx;
            if (j < n) out[bwd ? n - 1 - j : j] = sm[TILE_PAD(w0 + idx)];
        }
    }
}

// The tile scans' load and store: warp-local or block-wide transposes (SCAN_WARP_XPOSE). Both
// leave the buffer free for reuse by the same thread's later store.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile(const T* __restrict__ in, long long n, long long base, bool bwd, T* sm,
                                          T (&items)[ITEMS], T fill) {
    if (SCAN_WARP_XPOSE) load_tile_warp<T, THREADS, ITEMS>(in, n, base, bwd, sm, items, fill);
    else load_tile_blocked<T, THREADS, ITEMS>(in, n, base, bwd, sm, items, fill);
}
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void store_tile(T* __restrict__ out, long long n, long long base, bool bwd, T* sm,
                                           const T (&items)[ITEMS]) {
    if (SCAN_WARP_XPOSE) store_tile_warp<T, THREADS, ITEMS>(out, n, base, bwd, sm, items);
    else store_tile_blocked<T, THREADS, ITEMS>(out, n, base, bwd, sm, items);
}

// Bits start .. start+count-1 (count <= 32) of a packed bit vector of nbits bits; bit k of the
// result is bit start+k. Bits outside [0, nbits) read as 0; start may be negative.
__device__ __forceinline__ u32 load_bits(const u32* __restrict__ words, long long nbits, long long start,
                                         int count) {
    const long long nwords = (nbits + 31) >> 5;
    const long long wi = start >> 5;  // arithmetic shift: floor division
    const int sh = (int)(start - (wi << 5));
    const u64 lo = (wi >= 0 && wi < nwords) ? (u64)__ldg(words + wi) : 0ull;
    const u64 hi = (wi + 1 >= 0 && wi + 1 < nwords) ? (u64)__ldg(words + wi + 1) : 0ull;
    u32 r = (u32)((lo | (hi << 32)) >> sh);
    if (count < 32) r &= (1u << count) - 1u;
    const long long lim = nbits - start;  // bits k >= lim lie past the end
    if (lim < 32) r &= lim <= 0 ? 0u : ((1u << lim) - 1u);
    return r;
}

// The head flags of logical elements j0 .. j0+count-1 (bit k <-> element j0+k) in the scan's
// direction. Forward: the packed bits themselves. Backward: logical j is physical p = n-1-j, and
// a backward segment starts at the LAST element of a forward segment, i.e. where bit p+1 is set
// or p = n-1 — the paper's "flip, then shift right by one" (Sengupta 2007, §2.2.2), done here
// while reading.
__device__ __forceinline__ u32 logical_flags(const u32* __restrict__ words, long long n, long long j0,
                                             int count, bool bwd) {
    if (!bwd) return load_bits(words, n, j0, count);
    // physical bits p+1 = n-j for j = j0 .. j0+count-1, i.e. positions n-j0-count+1 .. n-j0
    const long long s = n - j0 - count + 1;
    u32 raw = load_bits(words, n, s, count);
    u32 r = __brev(raw) >> (32 - count);  // bit k <-> position n-j0-k
    if (j0 == 0) r |= 1u;                 // position n: past the end, a segment boundary
    return r;
}
