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

// The 16-byte vector moves of a full, aligned tile between global memory `g` (the tile's
// physical range, `const uint4` to load) and shared memory `sm` (logical order): LOAD reads g
// into sm, else sm is written to g. Backward, the physical range is reversed into logical order.
template <bool LOAD, typename T, int THREADS, int ITEMS, typename V>
__device__ __forceinline__ void vector_tile(V* g, T* sm, bool bwd) {
    constexpr int TILE = THREADS * ITEMS;
    constexpr int VEC = 16 / (int)sizeof(T);
#pragma unroll
    for (int k = 0; k < ITEMS / VEC; ++k) {
        const int v = k * THREADS + (int)threadIdx.x;
        __align__(16) T vals[VEC];
        if constexpr (LOAD) *reinterpret_cast<uint4*>(vals) = __ldg(g + v);
#pragma unroll
        for (int c = 0; c < VEC; ++c) {
            const int idx = bwd ? TILE - 1 - (v * VEC + c) : v * VEC + c;
            if constexpr (LOAD)
                sm[TILE_PAD(idx)] = vals[c];
            else
                vals[c] = sm[TILE_PAD(idx)];
        }
        if constexpr (!LOAD) store_vec(g + v, *reinterpret_cast<const uint4*>(vals));
    }
}

// Loads logical elements base .. base+THREADS*ITEMS of `in` (length n); elements past n get
// `fill`. Ends with a barrier, so the buffer may be reused at once.
template <typename T, int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile_blocked(const T* __restrict__ in, long long n, long long base,
                                                  bool bwd, T* sm, T (&items)[ITEMS], T fill) {
    constexpr int TILE = THREADS * ITEMS;
    if (tile_vectorizable<T, THREADS, ITEMS>(in, n, base, bwd)) {
        const long long first = bwd ? n - base - TILE : base;
        vector_tile<true, T, THREADS, ITEMS>(reinterpret_cast<const uint4*>(in + first), sm, bwd);
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
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) sm[TILE_PAD((int)threadIdx.x * ITEMS + i)] = items[i];
    __syncthreads();
    if (tile_vectorizable<T, THREADS, ITEMS>(out, n, base, bwd)) {
        const long long first = bwd ? n - base - TILE : base;
        vector_tile<false, T, THREADS, ITEMS>(reinterpret_cast<uint4*>(out + first), sm, bwd);
    } else {
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int idx = k * THREADS + (int)threadIdx.x;
            const long long j = base + idx;
            if (j < n) out[bwd ? n - 1 - j : j] = sm[TILE_PAD(idx)];
        }
    }
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
