// Onesweep LSD radix sort (Adinets and Merrill 2022, "Onesweep: A Faster Least Significant Digit
// Radix Sort for GPUs"), 8-bit digits, stable.
//
//   radix_histogram  ONE read of the keys counts the digits of EVERY pass at once (shared-memory
//                    counters per block, then global atomics); the last block to finish turns
//                    each pass's 256 counts into an exclusive prefix in place: bins[p][d] is the
//                    first output position of digit d in pass p.
//   radix_onesweep   one launch per digit: each block draws a tile id from a counter and
//                    (1) counts each warp's digits with shared atomics ("early counts");
//                    (2) thread d publishes the tile's count of digit d as an AGGREGATE status
//                        word at once, and turns the warp counts into each (warp, digit)'s first
//                        tile rank;
//                    (3) ranks the keys: peers by 8 warp ballots, the highest peer lane claims
//                        their ranks with one shared atomicAdd and shuffles the old count to
//                        them (no per-lane read-modify-write chain, no second pass);
//                    (4) thread d runs the decoupled look-back for digit d: sums predecessors'
//                        words back to the first INCLUSIVE one and publishes its own INCLUSIVE
//                        prefix; the tile's digit-d keys then go to bins[d] + prefix + (position
//                        among the tile's digit-d keys): ranked into shared memory, written out
//                        in rank order (runs of one digit are contiguous, so the stores coalesce).
//
// Measured on an H200 (benches/results/history/primitives.md): the first version (per-lane count
// read-modify-write per key, look-back before ranking) took 142 us per pass at 2^24 against
// CUB's 101; this one 115 us at 384 threads, less at the default 256 x 28. match.any instead of
// the ballots is 1.5x slower; making the key map a template parameter with a volatile bfe
// (against register spills) was slower too, so the map stays a runtime branch.
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

// The default shape (256 threads, 28 keys alone, 24 pairs, 14 with 8-byte elements) is the
// fastest of an H200 sweep (benches/results/history/primitives.md); the host passes these defines.
#ifndef OS_THREADS
#define OS_THREADS 256
#endif
#ifndef OS_ITEMS
#define OS_ITEMS 28
#endif
#ifndef OS_ITEMS_PAIRS
#define OS_ITEMS_PAIRS 24
#endif
// Items per thread when the wider of key and value has 8 bytes (the exchange buffer must fit
// the same 48 KiB of static shared memory).
#ifndef OS_ITEMS8
#define OS_ITEMS8 14
#endif
#ifndef OS_MIN_BLOCKS
#define OS_MIN_BLOCKS 3
#endif
// Key-value sorts: 1 = issue the value loads as soon as the keys sit in shared memory, so
// their latency overlaps the look-back and the key scatter (the keys' registers are free by
// then); 0 = load them after the key scatter, just before they are exchanged (CUB's order).
// The key scatter keeps each element's digit (4 per register) instead of its output index,
// so the early values cost few registers. See primitives::sort::gpu::onesweep_policy.
#ifndef OS_EARLY_VALUES
#define OS_EARLY_VALUES 1
#endif
// Nanoseconds a look-back thread sleeps between polls of a status word that is not ready yet
// (0 = spin): 256 spinning threads per waiting block compete with the scatter's traffic for L2.
#ifndef OS_POLL_NS
#define OS_POLL_NS 0
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

// Peer lanes (same digit) of this warp: 8 ballots, or (OS_MATCH_ANY = 1) the match.any
// instruction.
#ifndef OS_MATCH_ANY
#define OS_MATCH_ANY 0
#endif
__device__ __forceinline__ u32 os_peers(u32 d) {
#if OS_MATCH_ANY
    return __match_any_sync(FULL_MASK, d);
#else
    return match_digit(d);
#endif
}

// The digit of a key with the order-preserving map folded into two masks set once per thread
// (radix_bits, branch-free): bits = k ^ ((sign-extended top bit & neg) | sign).
struct DigitOf {
    u32 shift, mask, neg, sign;
    __device__ __forceinline__ DigitOf(u32 mode, u32 shift_, u32 nbits)
        : shift(shift_), mask((1u << nbits) - 1u), neg(mode == 2 ? ~0u : 0u), sign(mode >= 1 ? 1u : 0u) {}
    __device__ __forceinline__ u32 operator()(u32 k) const {
        const u32 x = k ^ (((u32)((i32)k >> 31) & neg) | (sign << 31));
        return (x >> shift) & mask;
    }
    __device__ __forceinline__ u32 operator()(u64 k) const {
        const u64 m = ((u64)((i64)k >> 63) & ((u64)neg << 32 | neg)) | ((u64)sign << 63);
        return (u32)((k ^ m) >> shift) & mask;
    }
};

struct OnesweepStorage {
    u32 warp_count[OS_WARPS][RADIX_BUCKETS];  // per-warp digit counts, then each (warp, digit)'s next rank
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
    const DigitOf digit_of(mode, shift, nbits);

    if (tid == 0) s.tile = atomicAdd(&ws[WS_COUNTERS + pass], 1u);
    for (u32 i = lane; i < RADIX_BUCKETS; i += 32u) s.warp_count[warp][i] = 0u;
    __syncthreads();
    const u32 tile = s.tile;
    const u32 tile_start = tile * OS_TILE;
    const u32 chunk = tile_start + warp * 32u * ITEMS;
    const u32 max_digit = (1u << nbits) - 1u;
    const bool full = tile_start + OS_TILE <= n;

    // Load (warp-striped: item it of lane l is chunk position it*32 + l, coalesced). Keys past
    // n get the largest digit.
    K key[ITEMS];
    u32 rank[ITEMS];
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 idx = chunk + it * 32u + lane;
        key[it] = (full || idx < n) ? kin[idx] : K(0);
    }
    auto digit = [&](u32 it) -> u32 {
        return (full || chunk + it * 32u + lane < n) ? digit_of(key[it]) : max_digit;
    };
    // (1) Early counts: each warp's digit histogram by shared atomics (independent, pipelined).
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) atomicAdd(&s.warp_count[warp][digit(it)], 1u);
    __syncthreads();
    // (2) Thread d: prefix over warps of digit d and the tile's count of digit d; publish the
    // count at once (successors' look-backs need it before this tile has ranked anything); the
    // prefix over digits (two barriers inside) turns every warp's count into its first rank.
    u32 total = 0;
    u32* st = ws + WS_STATUS + ((size_t)pass * num_tiles + tile) * RADIX_BUCKETS + tid;
    if (tid < RADIX_BUCKETS) {
#pragma unroll
        for (u32 w = 0; w < OS_WARPS; ++w) {
            const u32 c = s.warp_count[w][tid];
            s.warp_count[w][tid] = total;
            total += c;
        }
        *(volatile u32*)st = (tile == 0 ? OS_FLAG_INCL : OS_FLAG_AGG) | total;
    }
    const u32 base = exclusive_256(total, s.tot);
    if (tid < RADIX_BUCKETS) {
#pragma unroll
        for (u32 w = 0; w < OS_WARPS; ++w) s.warp_count[w][tid] += base;
    }
    __syncthreads();
    // (3) Ranks: the highest peer lane (whose count of lower-or-equal peers is the peer count)
    // claims the peers' ranks with one shared atomic and hands the old count to its peers.
    const u32 le = 0xffffffffu >> (31u - lane);
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 d = digit(it);
        const u32 peers = os_peers(d);
        const u32 leader = 31u - __clz(peers);
        const u32 pos = __popc(peers & le);
        u32 first = 0;
        if (lane == leader) first = atomicAdd(&s.warp_count[warp][d], pos);
        first = __shfl_sync(FULL_MASK, first, leader);
        rank[it] = first + pos - 1u;
    }
    // Keys into shared memory in rank order (the exchange buffer is not read before the
    // barrier below).
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) exk[rank[it]] = key[it];
    // Values (warp-striped like the keys), early: in flight during the look-back and the key
    // scatter.
    V val[HAS_V ? ITEMS : 1];
    auto load_values = [&]() {
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) {
            const u32 idx = chunk + it * 32u + lane;
            val[HAS_V ? it : 0] = (full || idx < n) ? vin[idx] : V(0);
        }
    };
    if (HAS_V && OS_EARLY_VALUES) load_values();
    // (4) Decoupled look-back for digit tid over this pass's tiles, while the ranks settle.
    if (tid < RADIX_BUCKETS) {
        u32 excl = 0;
        if (tile != 0) {
            const u32* p = st - RADIX_BUCKETS;
            while (true) {
                u32 w = *(volatile const u32*)p;
                while ((w & (OS_FLAG_AGG | OS_FLAG_INCL)) == 0u) {
#if OS_POLL_NS > 0
                    __nanosleep(OS_POLL_NS);
#endif
                    w = *(volatile const u32*)p;
                }
                excl += w & OS_VALUE_MASK;
                if (w & OS_FLAG_INCL) break;
                p -= RADIX_BUCKETS;
            }
            *(volatile u32*)st = OS_FLAG_INCL | (excl + total);
        }
        s.goff[tid] = ws[pass * RADIX_BUCKETS + tid] + excl - base;
    }
    __syncthreads();
    // (5) Scatter in rank order: tile position j of digit d goes to goff[d] + j. For the
    // values, the digit of position j is kept (a byte each), not its output index.
    const u32 count = min((u32)OS_TILE, n - tile_start);
    constexpr u32 DWORDS = HAS_V ? (ITEMS + 3) / 4 : 1;
    u32 digs[DWORDS];
#pragma unroll
    for (u32 w = 0; w < DWORDS; ++w) digs[w] = 0u;
#pragma unroll
    for (u32 it = 0; it < ITEMS; ++it) {
        const u32 j = it * OS_THREADS + tid;
        if (full || j < count) {
            const K k = exk[j];
            const u32 d = digit_of(k);
            kout[s.goff[d] + j] = k;
            if (HAS_V) digs[HAS_V ? it / 4 : 0] |= d << (8 * (it % 4));
        }
    }
    if (HAS_V) {
        if (!OS_EARLY_VALUES) load_values();
        __syncthreads();  // every key has left the exchange buffer
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) exv[rank[it]] = val[HAS_V ? it : 0];
        __syncthreads();
#pragma unroll
        for (u32 it = 0; it < ITEMS; ++it) {
            const u32 j = it * OS_THREADS + tid;
            const u32 d = (digs[HAS_V ? it / 4 : 0] >> (8 * (it % 4))) & 0xffu;
            if (full || j < count) vout[s.goff[d] + j] = exv[j];
        }
    }
}

// Items per thread of each instance: 4-byte keys alone and 4-byte pairs have their own counts
// (the value exchange changes the best tile), 8-byte keys or values another.
#define OS_ITEMS_OF(K, V, PAIRS) \
    ((sizeof(K) == 8 || sizeof(V) == 8) ? OS_ITEMS8 : ((PAIRS) ? OS_ITEMS_PAIRS : OS_ITEMS))

#define ONESWEEP_KEYS(K, S)                                                                       \
    extern "C" __global__ void __launch_bounds__(HIST_THREADS)                                    \
    radix_histogram_##S(const K* keys, u32 n, u32 begin_bit, u32 end_bit, u32 mode, u32* ws) {    \
        radix_histogram<K>(keys, n, begin_bit, end_bit, mode, ws);                                \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(OS_THREADS, OS_MIN_BLOCKS)                       \
    radix_onesweep_##S(const K* kin, K* kout, u32 n, u32 shift, u32 nbits, u32 mode, u32 pass,    \
                       u32 num_tiles, u32* ws) {                                                  \
        radix_onesweep<K, u32, false, OS_ITEMS_OF(K, K, false)>(kin, kout, nullptr, nullptr, n,   \
                                                                shift, nbits, mode, pass,         \
                                                                num_tiles, ws);                   \
    }
ONESWEEP_KEYS(u32, b32)
ONESWEEP_KEYS(u64, b64)

#define ONESWEEP_PAIRS(K, V, S)                                                                   \
    extern "C" __global__ void __launch_bounds__(OS_THREADS, OS_MIN_BLOCKS)                       \
    radix_onesweep_pairs_##S(const K* kin, K* kout, const V* vin, V* vout, u32 n, u32 shift,      \
                             u32 nbits, u32 mode, u32 pass, u32 num_tiles, u32* ws) {             \
        radix_onesweep<K, V, true, OS_ITEMS_OF(K, V, true)>(kin, kout, vin, vout, n, shift,       \
                                                            nbits, mode, pass, num_tiles, ws);    \
    }
ONESWEEP_PAIRS(u32, u32, b32_b32)
ONESWEEP_PAIRS(u32, u64, b32_b64)
ONESWEEP_PAIRS(u64, u32, b64_b32)
ONESWEEP_PAIRS(u64, u64, b64_b64)
