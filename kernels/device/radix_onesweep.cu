// Onesweep LSD radix sort (Adinets and Merrill 2022, "Onesweep: A Faster Least Significant Digit
// Radix Sort for GPUs"), 8-bit digits, stable.
//
//   radix_histogram  ONE read of the keys counts the digits of EVERY pass at once (shared-memory
//                    counters per block, then global atomics); the last block to finish turns
//                    each pass's 256 counts into an exclusive prefix in place: bins[p][d] is the
//                    first output position of digit d in pass p.
//   radix_onesweep   one launch per digit: each block draws a tile id from a counter, ranks its
//                    tile's keys by digit (warp ballots + per-warp counters, as in
//                    block/block_radix_rank.cuh, with any multiple of 32 threads), and thread d
//                    runs a decoupled look-back over tiles for digit d: it publishes the tile's
//                    count of digit d as an AGGREGATE, sums predecessors' words back to the first
//                    INCLUSIVE one, and publishes its own INCLUSIVE prefix. The tile's digit-d keys
//                    then go to bins[d] + prefix + (position among the tile's digit-d keys):
//                    ranked into shared memory, written out in rank order (runs of one digit are
//                    contiguous, so the stores coalesce).
// So per pass the keys are read once and written once (the three-kernel sort of radix_sort.cu
// reads them twice and scans a 256 x tiles count table between).
//
// Status words (u32, one per (tile, digit) and pass, zeroed once per sort): bits 31..30 the flag
// (0 not yet, 1 aggregate, 2 inclusive), bits 29..0 the count: the value and its flag travel in
// one 32-bit store, so a reader that sees the flag sees the value (no fence). Counts below 2^30:
// the host uses this sort for n < 2^30 only.
//
// Tile ids come from an atomic counter, not blockIdx: a block only waits on tiles drawn earlier
// by blocks already running, so the look-back cannot deadlock. Keys past n in the last tile take
// the largest digit (they rank last and are never written); their count pollutes only the last
// tile's status, which no tile reads.
#include "common.cuh"
#include "block/block_radix_rank.cuh"

#ifndef OS_THREADS
#define OS_THREADS 384
#endif
#ifndef OS_ITEMS
#define OS_ITEMS 20
#endif
// Items per thread when the wider of key and value has 8 bytes (the exchange buffer must fit
// the same 48 KiB of static shared memory).
#ifndef OS_ITEMS8
#define OS_ITEMS8 10
#endif
#ifndef OS_MIN_BLOCKS
#define OS_MIN_BLOCKS 2
#endif
#define OS_WARPS (OS_THREADS / 32)
#define OS_FLAG_AGG 0x40000000u
#define OS_FLAG_INCL 0x80000000u
#define OS_VALUE_MASK 0x3fffffffu

#define HIST_THREADS 256
#define HIST_MAX_PASSES 8
// Workspace layout (u32 words, see primitives::sort::gpu): bins[HIST_MAX_PASSES][256], the
// histogram's done counter, one tile counter per pass, then the status words.
#define WS_DONE (HIST_MAX_PASSES * RADIX_BUCKETS)
#define WS_COUNTERS (WS_DONE + 1)
#define WS_STATUS (WS_DONE + 32)

// Exclusive prefix of v over threads 0..255; every thread of the block calls it (threads >= 256
// pass anything and get garbage). tot: 8 shared words. Two barriers.
__device__ __forceinline__ u32 exclusive_256(u32 v, u32* tot) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 incl = v;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        u32 y = __shfl_up_sync(FULL_MASK, incl, d);
        if (lane >= d) incl += y;
    }
    if (lane == 31 && warp < 8) tot[warp] = incl;
    __syncthreads();
    u32 before = 0;
    if (warp < 8)
        for (u32 w = 0; w < warp; ++w) before += tot[w];
    __syncthreads();
    return before + incl - v;
}

template <typename K>
__device__ __forceinline__ void hist_count(u32* h, K k, u32 mode, u32 begin_bit, u32 end_bit, u32 passes) {
    const auto b = radix_bits(k, mode);
    for (u32 p = 0; p < passes; ++p) {
        const u32 shift = begin_bit + 8u * p;
        const u32 nb = min(8u, end_bit - shift);
        atomicAdd(&h[p * RADIX_BUCKETS + ((u32)(b >> shift) & ((1u << nb) - 1u))], 1u);
    }
}

template <typename K>
__device__ __forceinline__ void radix_histogram(const K* keys, u32 n, u32 begin_bit, u32 end_bit, u32 mode,
                                                u32* ws) {
    __shared__ u32 h[HIST_MAX_PASSES * RADIX_BUCKETS];
    __shared__ u32 tot[8];
    __shared__ u32 last;
    const u32 passes = CEIL_DIV(end_bit - begin_bit, 8u);
    for (u32 i = threadIdx.x; i < passes * RADIX_BUCKETS; i += HIST_THREADS) h[i] = 0u;
    __syncthreads();
    const u32 stride = gridDim.x * HIST_THREADS;
    u32 i = blockIdx.x * HIST_THREADS + threadIdx.x;
    // Four loads in flight per thread, then their counts.
    for (; (u64)i + 3ull * stride < n; i += 4u * stride) {
        K k[4];
#pragma unroll
        for (u32 j = 0; j < 4; ++j) k[j] = keys[i + j * stride];
#pragma unroll
        for (u32 j = 0; j < 4; ++j) hist_count(h, k[j], mode, begin_bit, end_bit, passes);
    }
    for (; i < n; i += stride) hist_count(h, keys[i], mode, begin_bit, end_bit, passes);
    __syncthreads();
    for (u32 j = threadIdx.x; j < passes * RADIX_BUCKETS; j += HIST_THREADS)
        if (h[j]) atomicAdd(&ws[j], h[j]);
    // The last block to finish sees every block's counts (release: fence before counting done;
    // acquire: fence after seeing the count).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&ws[WS_DONE], 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (u32 p = 0; p < passes; ++p) {
        const u32 v = *(volatile u32*)&ws[p * RADIX_BUCKETS + threadIdx.x];
        const u32 e = exclusive_256(v, tot);
        ws[p * RADIX_BUCKETS + threadIdx.x] = e;
    }
}

struct OnesweepStorage {
    u32 warp_count[OS_WARPS][RADIX_BUCKETS];  // per-warp digit counts, then their prefix over warps
    u32 digit_base[RADIX_BUCKETS];            // first tile-local position of each digit
    u32 goff[RADIX_BUCKETS];                  // output position of tile-local position 0 of each digit
    u32 tot[8];
    u32 tile;
};

template <typename K, typename V, bool HAS_V, u32 OS_ITEMS_W>
__device__ __forceinline__ void radix_onesweep(const K* kin, K* kout, const V* vin, V* vout, u32 n, u32 shift,
                                               u32 nbits, u32 mode, u32 pass, u32 num_tiles, u32* ws) {
    constexpr u32 W = (HAS_V && sizeof(V) > sizeof(K)) ? sizeof(V) : sizeof(K);
    constexpr u32 ITEMS = OS_ITEMS_W;
    constexpr u32 OS_TILE = OS_THREADS * ITEMS;
    __shared__ OnesweepStorage s;
    __shared__ __align__(16) unsigned char exch_raw[OS_TILE * W];
    K* exk = reinterpret_cast<K*>(exch_raw);
    V* exv = reinterpret_cast<V*>(exch_raw);
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;

    if (tid == 0) s.tile = atomicAdd(&ws[WS_COUNTERS + pass], 1u);
    for (u32 i = tid; i < OS_WARPS * RADIX_BUCKETS; i += OS_THREADS) (&s.warp_count[0][0])[i] = 0u;
    __syncthreads();
    const u32 tile = s.tile;
    const u32 tile_start = tile * OS_TILE;
    const u32 chunk = tile_start + warp * 32u * ITEMS;
    const u32 max_digit = (1u << nbits) - 1u;

    // Load (warp-striped: item it of lane l is chunk position it*32 + l, coalesced).
    K key[ITEMS];
    u32 rank[ITEMS];
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 idx = chunk + it * 32u + lane;
        key[it] = idx < n ? kin[idx] : K(0);
    }
    // Rank within the warp: peers by 8 ballots, running per-warp count per digit.
    const u32 below = (1u << lane) - 1u;
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 idx = chunk + it * 32u + lane;
        const u32 d = idx < n ? radix_digit(key[it], mode, shift, nbits) : max_digit;
        const u32 peers = match_digit(d);
        const u32 cnt = s.warp_count[warp][d];
        const u32 lt = __popc(peers & below);
        rank[it] = cnt + lt;
        __syncwarp();
        if (lt == 0) s.warp_count[warp][d] = cnt + __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    // Thread d: prefix over warps of digit d, the tile's count of digit d, and (two barriers
    // inside) the prefix over digits.
    u32 total = 0;
    if (tid < RADIX_BUCKETS) {
#pragma unroll
        for (u32 w = 0; w < OS_WARPS; ++w) {
            const u32 c = s.warp_count[w][tid];
            s.warp_count[w][tid] = total;
            total += c;
        }
    }
    const u32 base = exclusive_256(total, s.tot);
    if (tid < RADIX_BUCKETS) {
        s.digit_base[tid] = base;
        // Decoupled look-back for digit tid over the tiles of this pass.
        u32* st = ws + WS_STATUS + ((size_t)pass * num_tiles + tile) * RADIX_BUCKETS + tid;
        u32 excl = 0;
        if (tile == 0) {
            *(volatile u32*)st = OS_FLAG_INCL | total;
        } else {
            *(volatile u32*)st = OS_FLAG_AGG | total;
            const u32* p = st - RADIX_BUCKETS;
            while (true) {
                u32 w = *(volatile const u32*)p;
                while ((w & (OS_FLAG_AGG | OS_FLAG_INCL)) == 0u) w = *(volatile const u32*)p;
                excl += w & OS_VALUE_MASK;
                if (w & OS_FLAG_INCL) break;
                p -= RADIX_BUCKETS;
            }
            *(volatile u32*)st = OS_FLAG_INCL | (excl + total);
        }
        s.goff[tid] = ws[pass * RADIX_BUCKETS + tid] + excl - base;
    }
    __syncthreads();
    // Tile-local ranks, and the keys into shared memory in rank order.
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 idx = chunk + it * 32u + lane;
        const u32 d = idx < n ? radix_digit(key[it], mode, shift, nbits) : max_digit;
        rank[it] += s.digit_base[d] + s.warp_count[warp][d];
        exk[rank[it]] = key[it];
    }
    __syncthreads();
    const u32 count = min((u32)OS_TILE, n - tile_start);
    u32 dst[HAS_V ? ITEMS : 1];
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 j = it * OS_THREADS + tid;
        if (j < count) {
            const K k = exk[j];
            const u32 o = s.goff[radix_digit(k, mode, shift, nbits)] + j;
            kout[o] = k;
            if (HAS_V) dst[HAS_V ? it : 0] = o;
        }
    }
    if (HAS_V) {
        V val[HAS_V ? ITEMS : 1];
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) {
            const u32 idx = chunk + it * 32u + lane;
            val[HAS_V ? it : 0] = idx < n ? vin[idx] : V(0);
        }
        __syncthreads();
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) exv[rank[it]] = val[HAS_V ? it : 0];
        __syncthreads();
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) {
            const u32 j = it * OS_THREADS + tid;
            if (j < count) vout[dst[HAS_V ? it : 0]] = exv[j];
        }
    }
}

#define OS_ITEMS_OF(K, V) ((sizeof(K) == 8 || sizeof(V) == 8) ? OS_ITEMS8 : OS_ITEMS)

#define ONESWEEP_KEYS(K, S)                                                                       \
    extern "C" __global__ void __launch_bounds__(HIST_THREADS)                                    \
    radix_histogram_##S(const K* keys, u32 n, u32 begin_bit, u32 end_bit, u32 mode, u32* ws) {    \
        radix_histogram<K>(keys, n, begin_bit, end_bit, mode, ws);                                \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(OS_THREADS, OS_MIN_BLOCKS)                       \
    radix_onesweep_##S(const K* kin, K* kout, u32 n, u32 shift, u32 nbits, u32 mode, u32 pass,    \
                       u32 num_tiles, u32* ws) {                                                  \
        radix_onesweep<K, u32, false, OS_ITEMS_OF(K, K)>(kin, kout, nullptr, nullptr, n, shift,   \
                                                         nbits, mode, pass, num_tiles, ws);       \
    }
ONESWEEP_KEYS(u32, b32)
ONESWEEP_KEYS(u64, b64)

#define ONESWEEP_PAIRS(K, V, S)                                                                   \
    extern "C" __global__ void __launch_bounds__(OS_THREADS, OS_MIN_BLOCKS)                       \
    radix_onesweep_pairs_##S(const K* kin, K* kout, const V* vin, V* vout, u32 n, u32 shift,      \
                             u32 nbits, u32 mode, u32 pass, u32 num_tiles, u32* ws) {             \
        radix_onesweep<K, V, true, OS_ITEMS_OF(K, V)>(kin, kout, vin, vout, n, shift, nbits, mode, \
                                                      pass, num_tiles, ws);                       \
    }
ONESWEEP_PAIRS(u32, u32, b32_b32)
ONESWEEP_PAIRS(u32, u64, b32_b64)
ONESWEEP_PAIRS(u64, u32, b64_b32)
ONESWEEP_PAIRS(u64, u64, b64_b64)
