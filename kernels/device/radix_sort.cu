// LSD radix sort, one 8-bit digit per pass, stable: the paper's split-based radix sort with the
// 1-bit split generalised to 256 buckets. Per pass:
//   radix_upsweep   per-tile digit histogram, stored digit-major: hist[d * num_tiles + tile];
//   (host)          one device-wide exclusive scan of hist gives every (digit, tile) its first
//                   output position (all smaller digits, then the same digit in earlier tiles);
//   radix_downsweep ranks the tile's keys by digit (block/block_radix_rank.cuh), scatters them
//                   into shared memory in rank order, and writes them out from there, so each
//                   digit's run of the tile is written contiguously (coalesced).
// Keys are stored unchanged; the order-preserving bit map (mode) is applied when a digit is read.
#include "common.cuh"
#include "block/block_radix_rank.cuh"

template <typename K>
__device__ __forceinline__ void radix_upsweep(const K* keys, u32 n, u32 shift, u32 nbits, u32 mode,
                                              u32* hist, u32 num_tiles) {
    __shared__ u32 counts[RADIX_WARPS][RADIX_BUCKETS];
    const u32 warp = threadIdx.x >> 5;
    for (u32 i = threadIdx.x; i < RADIX_WARPS * RADIX_BUCKETS; i += RADIX_THREADS)
        (&counts[0][0])[i] = 0;
    __syncthreads();
    const u32 start = blockIdx.x * RADIX_TILE;
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) {
        u32 idx = start + it * RADIX_THREADS + threadIdx.x;
        if (idx < n) atomicAdd(&counts[warp][radix_digit(keys[idx], mode, shift, nbits)], 1u);
    }
    __syncthreads();
    u32 d = threadIdx.x, s = 0;
#pragma unroll
    for (u32 w = 0; w < RADIX_WARPS; ++w) s += counts[w][d];
    hist[d * num_tiles + blockIdx.x] = s;
}

template <typename K, typename V, bool HAS_V>
__device__ __forceinline__ void radix_downsweep(const K* kin, K* kout, const V* vin, V* vout, u32 n,
                                                u32 shift, u32 nbits, u32 mode, const u32* offsets,
                                                u32 num_tiles) {
    constexpr u32 W = sizeof(K) > sizeof(V) ? sizeof(K) : sizeof(V);
    __shared__ RadixRankStorage rs;
    __shared__ u32 gofs[RADIX_BUCKETS];
    __shared__ __align__(16) unsigned char exch_raw[RADIX_TILE * (HAS_V ? W : sizeof(K))];
    K* exk = reinterpret_cast<K*>(exch_raw);
    V* exv = reinterpret_cast<V*>(exch_raw);

    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const u32 tile_start = blockIdx.x * RADIX_TILE;
    const u32 chunk = tile_start + warp * 32u * RADIX_ITEMS;
    const u32 max_digit = (1u << nbits) - 1u;
    K key[RADIX_ITEMS];
    u32 digit[RADIX_ITEMS], rank[RADIX_ITEMS];
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) {
        u32 idx = chunk + it * 32u + lane;
        bool ok = idx < n;
        key[it] = ok ? kin[idx] : K(0);
        // Missing keys (last tile) take the largest digit: they are last in tile order, so
        // they rank after every real key and are never written.
        digit[it] = ok ? radix_digit(key[it], mode, shift, nbits) : max_digit;
    }
    gofs[threadIdx.x] = offsets[threadIdx.x * num_tiles + blockIdx.x];
    block_radix_rank(digit, rank, rs);
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) exk[rank[it]] = key[it];
    __syncthreads();
    const u32 count = min((u32)RADIX_TILE, n - tile_start);
    u32 dst[RADIX_ITEMS];
#pragma unroll
    for (u32 it = 0; it < RADIX_ITEMS; ++it) {
        u32 j = it * RADIX_THREADS + threadIdx.x;
        if (j < count) {
            K k = exk[j];
            u32 d = radix_digit(k, mode, shift, nbits);
            dst[it] = gofs[d] + j - rs.digit_base[d];
            kout[dst[it]] = k;
        }
    }
    if (HAS_V) {
        V val[RADIX_ITEMS];
#pragma unroll
        for (u32 it = 0; it < RADIX_ITEMS; ++it) {
            u32 idx = chunk + it * 32u + lane;
            val[it] = idx < n ? vin[idx] : V(0);
        }
        __syncthreads();
#pragma unroll
        for (u32 it = 0; it < RADIX_ITEMS; ++it) exv[rank[it]] = val[it];
        __syncthreads();
#pragma unroll
        for (u32 it = 0; it < RADIX_ITEMS; ++it) {
            u32 j = it * RADIX_THREADS + threadIdx.x;
            if (j < count) vout[dst[it]] = exv[j];
        }
    }
}

#define RADIX_KEYS(K, S)                                                                          \
    extern "C" __global__ void __launch_bounds__(RADIX_THREADS)                                   \
    radix_upsweep_##S(const K* keys, u32 n, u32 shift, u32 nbits, u32 mode, u32* hist,           \
                      u32 num_tiles) {                                                            \
        radix_upsweep<K>(keys, n, shift, nbits, mode, hist, num_tiles);                           \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(RADIX_THREADS)                                   \
    radix_downsweep_##S(const K* kin, K* kout, u32 n, u32 shift, u32 nbits, u32 mode,             \
                        const u32* offsets, u32 num_tiles) {                                      \
        radix_downsweep<K, u32, false>(kin, kout, nullptr, nullptr, n, shift, nbits, mode,        \
                                       offsets, num_tiles);                                       \
    }
RADIX_KEYS(u32, b32)
RADIX_KEYS(u64, b64)

#define RADIX_PAIRS(K, V, S)                                                                      \
    extern "C" __global__ void __launch_bounds__(RADIX_THREADS)                                   \
    radix_downsweep_pairs_##S(const K* kin, K* kout, const V* vin, V* vout, u32 n, u32 shift,     \
                              u32 nbits, u32 mode, const u32* offsets, u32 num_tiles) {           \
        radix_downsweep<K, V, true>(kin, kout, vin, vout, n, shift, nbits, mode, offsets,         \
                                    num_tiles);                                                   \
    }
RADIX_PAIRS(u32, u32, b32_b32)
RADIX_PAIRS(u32, u64, b32_b64)
RADIX_PAIRS(u64, u32, b64_b32)
RADIX_PAIRS(u64, u64, b64_b64)
