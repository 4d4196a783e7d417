// Block-level radix ranking for an 8-bit digit (256 buckets), stable, and the per-tile digit
// histogram. The generalisation of the paper's 1-bit split to a multi-bit digit.
//
// Ranking (RADIX_THREADS must be 256: thread d owns digit d in the digit-wise steps):
//  1. each warp walks its contiguous chunk of the tile 32 keys at a time; the lanes holding the
//     same digit ("peers") are found with 8 ballots, one per digit bit (the warp-level multisplit
//     of Onesweep, Adinets & Merrill 2022); a key's rank within the warp is the warp's running
//     count for its digit plus the peers in lower lanes, and the lowest peer bumps the count;
//  2. the per-warp counts are turned, per digit, into an exclusive prefix over warps (thread d
//     walks the 8 warps), and the digit totals of the tile into an exclusive prefix over digits
//     (a 256-entry block prefix: warp shuffles, then the 8 warp totals).
// The tile-local rank of a key is digit_base[d] + warp_prefix[w][d] + rank-in-warp; walking
// warps in order, steps in order and lanes in order keeps the ranking stable.
#pragma once
#include "common.cuh"

#if !defined(RADIX_THREADS) || !defined(RADIX_ITEMS)
#error "RADIX_THREADS and RADIX_ITEMS come from the Rust side as -D defines (primitives::sort)"
#endif
#define RADIX_TILE (RADIX_THREADS * RADIX_ITEMS)
#define RADIX_WARPS (RADIX_THREADS / 32)
#define RADIX_BUCKETS 256

// Order-preserving radix bits: 0 unsigned, 1 signed (flip the sign bit), 2 float (flip all bits
// of negatives, the sign bit of positives): IEEE totalOrder.
__device__ __forceinline__ u32 radix_bits(u32 k, u32 mode) {
    if (mode == 1) return k ^ 0x80000000u;
    if (mode == 2) return (k & 0x80000000u) ? ~k : (k | 0x80000000u);
    return k;
}
__device__ __forceinline__ u64 radix_bits(u64 k, u32 mode) {
    if (mode == 1) return k ^ 0x8000000000000000ull;
    if (mode == 2) return (k & 0x8000000000000000ull) ? ~k : (k | 0x8000000000000000ull);
    return k;
}
template <typename K> __device__ __forceinline__ u32 radix_digit(K k, u32 mode, u32 shift, u32 nbits) {
    return (u32)(radix_bits(k, mode) >> shift) & ((1u << nbits) - 1u);
}

// Lanes of this warp whose 8-bit digit equals this lane's.
__device__ __forceinline__ u32 match_digit(u32 digit) {
    u32 peers = FULL_MASK;
#pragma unroll
    for (u32 b = 0; b < 8; ++b) {
        u32 bit = (digit >> b) & 1u;
        u32 bal = __ballot_sync(FULL_MASK, bit);
        peers &= bit ? bal : ~bal;
    }
    return peers;
}

struct RadixRankStorage {
    u32 warp_count[RADIX_WARPS][RADIX_BUCKETS];
    u32 digit_base[RADIX_BUCKETS];
    u32 warp_total[RADIX_WARPS];
};

// Exclusive prefix of v over threads 0..255; every thread of the block calls it (threads >= 256
// pass anything and get garbage). tot: 8 shared words. Two barriers: tot may be reused at once.
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

// Ranks the RADIX_ITEMS digits this thread holds (warp-striped within the warp's chunk: item it
// of lane l is chunk position it*32 + l). Out: rank[it] = tile-local stable rank. Ends with a
// barrier; s.digit_base holds each digit's first tile-local position afterwards.
__device__ __forceinline__ void block_radix_rank(const u32 (&digit)[RADIX_ITEMS], u32 (&rank)[RADIX_ITEMS],
                                                 RadixRankStorage& s) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (u32 i = threadIdx.x; i < RADIX_WARPS * RADIX_BUCKETS; i += RADIX_THREADS)
        (&s.warp_count[0][0])[i] = 0;
    __syncthreads();
    const u32 below = (1u << lane) - 1u;
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) {
        u32 d = digit[it];
        u32 peers = match_digit(d);
        u32 cnt = s.warp_count[warp][d];
        u32 lt = __popc(peers & below);
        rank[it] = cnt + lt;
        __syncwarp();
        if (lt == 0) s.warp_count[warp][d] = cnt + __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    // Per digit (thread d): exclusive prefix over warps, and the tile total.
    u32 total = 0;
    {
        const u32 d = threadIdx.x;
#pragma unroll
        for (u32 w = 0; w < RADIX_WARPS; ++w) {
            u32 c = s.warp_count[w][d];
            s.warp_count[w][d] = total;
            total += c;
        }
    }
    u32 base = exclusive_256(total, s.warp_total);
    s.digit_base[threadIdx.x] = base;
    __syncthreads();
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) {
        u32 d = digit[it];
        rank[it] += s.digit_base[d] + s.warp_count[warp][d];
    }
}
