// GPU SpGEMM C = A·B (row-binned hash / sorted-row accumulation), transpose helpers, diagonal
// extraction and scaling. Launched by src/sparse/gpu/mod.rs, which documents the method.
//
// Rows of A are binned by their product count ub(i) = sum over k in A[i,:] of nnz(B[k,:]) (an
// upper bound of nnz(C[i,:])). Each bin has its own group size G (lanes per row) and table
// capacity CAP >= ub: G = 8/16/32 lanes of a warp with shared-memory tables for short rows, a
// 256-thread block with a shared table for longer ones, and a block with a global-memory table
// for the longest. Within a group, A's row entries are taken in order and the lanes split
// B[k,:] between them.
//
// Phases (each a kernel per bin):
//   count   — insert the product columns into an open-addressing hash table (linear probing,
//             atomicCAS), count the distinct ones: nnz(C[i,:]).
//   fill    — the same insertion, then the distinct columns sorted (ranking for warp groups,
//             compaction and a bitonic sort for blocks) and written at row_ptr[i].
//   numeric — C's sorted row loaded, values accumulated in the order of A's row entries:
//             for each A entry k (in order) the lanes take distinct columns of B[k,:], find
//             each one's position by binary search in C's sorted row and add a_ik·b_kj there;
//             a group barrier separates consecutive k. Every C entry is therefore the sum of
//             its products in A's row order, rounded as round(acc + round(a·b)) — the CPU's
//             order and rounding (no FMA contraction: __fmul_rn/__fadd_rn), so the GPU result
//             equals the CPU's bit for bit, run after run.
#include "common.cuh"

#define SPGEMM_EMPTY 0xffffffffu
// Shared with src/sparse/gpu/mod.rs (KernelSource::constants, passed as -D): the threads of the
// block kernels and of the group kernels, the rows per block of group bins 0-3 (their lanes per
// row are SPGEMM_GROUP_THREADS / rows), the number of bins, and the flat numeric kernel's
// segment length and segments per block.
#if !defined(SPGEMM_BLOCK) || !defined(SPGEMM_GROUP_THREADS) || !defined(SPGEMM_NBINS) ||           \
    !defined(SPGEMM_BIN0_ROWS) || !defined(SPGEMM_BIN1_ROWS) || !defined(SPGEMM_BIN2_ROWS) ||        \
    !defined(SPGEMM_BIN3_ROWS) || !defined(SPGEMM_FLAT_SEG) || !defined(SPGEMM_FLAT_SEGS_PER_BLOCK)
#error "the SPGEMM_* constants must be defined by the host (KernelSource::constants)"
#endif
#define SPGEMM_G(ROWS) (SPGEMM_GROUP_THREADS / (ROWS))
static_assert(SPGEMM_G(SPGEMM_BIN0_ROWS) * SPGEMM_BIN0_ROWS == SPGEMM_GROUP_THREADS &&
                  SPGEMM_G(SPGEMM_BIN1_ROWS) * SPGEMM_BIN1_ROWS == SPGEMM_GROUP_THREADS &&
                  SPGEMM_G(SPGEMM_BIN2_ROWS) * SPGEMM_BIN2_ROWS == SPGEMM_GROUP_THREADS &&
                  SPGEMM_G(SPGEMM_BIN3_ROWS) * SPGEMM_BIN3_ROWS == SPGEMM_GROUP_THREADS &&
                  SPGEMM_G(SPGEMM_BIN0_ROWS) <= 32 && SPGEMM_G(SPGEMM_BIN3_ROWS) <= 32,
              "group bins: lanes per row must divide a warp and fill the block");
static_assert(SPGEMM_FLAT_SEGS_PER_BLOCK * 32 == SPGEMM_GROUP_THREADS, "one warp per flat segment");

__device__ __forceinline__ u32 spgemm_hash(u32 col, u32 mask) { return (col * 2654435761u) & mask; }

// Inserts col; returns 1 when it was not there before.
__device__ __forceinline__ u32 spgemm_insert(u32* keys, u32 mask, u32 col) {
    u32 h = spgemm_hash(col, mask);
    while (true) {
        const u32 old = atomicCAS(keys + h, SPGEMM_EMPTY, col);
        if (old == SPGEMM_EMPTY) return 1;
        if (old == col) return 0;
        h = (h + 1) & mask;
    }
}

__device__ __forceinline__ float spgemm_fma(float acc, float a, float b) { return __fadd_rn(acc, __fmul_rn(a, b)); }
__device__ __forceinline__ double spgemm_fma(double acc, double a, double b) { return __dadd_rn(acc, __dmul_rn(a, b)); }

// Position of col in the sorted cols[0..n) (col is present).
__device__ __forceinline__ u32 spgemm_find(const u32* cols, u32 n, u32 col) {
    u32 lo = 0, hi = n;
    while (hi - lo > 1) {
        const u32 mid = (lo + hi) >> 1;
        if (cols[mid] <= col) lo = mid; else hi = mid;
    }
    return lo;
}

// ---------------------------------------------------------------------------------------------
// Binning. Bin limits (on ub) are spgemm_bin_of's; a row with ub == 0 goes nowhere
// (its count stays 0). Pass 1 counts rows per bin and the largest ub per bin; pass 2 writes the
// rows of each bin at offsets[b] + an atomic cursor (the order within a bin does not matter: each
// row writes only its own output).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ u32 spgemm_bin_of(u32 ub) {
    return ub <= 32 ? 0 : ub <= 64 ? 1 : ub <= 256 ? 2 : ub <= 1024 ? 3 : ub <= 4096 ? 4 : 5;
}

// Every lane of a warp runs the same number of iterations (base is warp-uniform), so the
// ballots below see the whole warp. Counters are updated once per warp and bin (a single
// global counter hit by every row cost 6 ms for 4M rows: ncu, poisson3d:160). A row of more
// than SPGEMM_LONG_ROW entries is summed by the whole warp (a thread walking a dense row of
// thousands of entries alone held the kernel for over 100 us on matrices with dense rows).
#define SPGEMM_LONG_ROW 8u
extern "C" __global__ void spgemm_bound(const u32* __restrict__ arp, const u32* __restrict__ acol,
                                        const u32* __restrict__ brp, u32 m, u32* ub_out, u32* bin_count,
                                        u32* bin_max, u64* ub_total) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 base = blockIdx.x * blockDim.x; base < m; base += gridDim.x * blockDim.x) {
        const u32 i = base + threadIdx.x;
        u64 ub = 0;
        bool long_row = false;
        if (i < m) {
            const u32 p0 = arp[i], p1 = arp[i + 1];
            long_row = p1 - p0 > SPGEMM_LONG_ROW;
            if (!long_row)
                for (u32 p = p0; p < p1; ++p) {
                    const u32 k = acol[p];
                    ub += brp[k + 1] - brp[k];
                }
        }
        for (u32 lm = __ballot_sync(FULL_MASK, long_row); lm != 0; lm &= lm - 1) {
            const u32 src = __ffs(lm) - 1;
            const u32 ri = __shfl_sync(FULL_MASK, i, src);
            const u32 q1 = arp[ri + 1];
            u64 sum = 0;
            for (u32 p = arp[ri] + lane; p < q1; p += 32) {
                const u32 k = acol[p];
                sum += brp[k + 1] - brp[k];
            }
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, o);
            if (lane == src) ub = sum;
        }
        u32 u = 0;
        if (i < m) {
            u = ub > 0xfffffff0ull ? 0xfffffff0u : (u32)ub;
            ub_out[i] = u;
        }
        u64 sum = u;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, o);
        if (lane == 0 && sum > 0) atomicAdd(ub_total, sum);
        const u32 b = spgemm_bin_of(u);
        for (u32 bb = 0; bb < SPGEMM_NBINS; ++bb) {
            const bool mine = u > 0 && b == bb;
            const u32 mask = __ballot_sync(FULL_MASK, mine);
            if (mask == 0) continue;
            const u32 mx = __reduce_max_sync(FULL_MASK, mine ? u : 0u);
            if (lane == (u32)(__ffs(mask) - 1)) {
                atomicAdd(bin_count + bb, (u32)__popc(mask));
                atomicMax(bin_max + bb, mx);
            }
        }
    }
}

// bad[0] = 1 + a row of B whose columns are not strictly increasing (the largest such row
// index found; 0: none). The numeric phase lets the lanes of a group add distinct columns of
// one B row at once, which needs B canonical (sorted, no duplicates within a row). Long rows
// are checked by the whole warp, as in spgemm_bound.
extern "C" __global__ void spgemm_check_rows(const u32* __restrict__ brp, const u32* __restrict__ bcol, u32 n,
                                             u32* bad) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 base = blockIdx.x * blockDim.x; base < n; base += gridDim.x * blockDim.x) {
        const u32 k = base + threadIdx.x;
        bool long_row = false;
        if (k < n) {
            const u32 b0 = brp[k], b1 = brp[k + 1];
            long_row = b1 - b0 > SPGEMM_LONG_ROW;
            if (!long_row)
                for (u32 q = b0 + 1; q < b1; ++q)
                    if (bcol[q] <= bcol[q - 1]) {
                        atomicMax(bad, k + 1);
                        break;
                    }
        }
        for (u32 lm = __ballot_sync(FULL_MASK, long_row); lm != 0; lm &= lm - 1) {
            const u32 rk = __shfl_sync(FULL_MASK, k, __ffs(lm) - 1);
            const u32 b1 = brp[rk + 1];
            bool wrong = false;
            for (u32 q = brp[rk] + 1 + lane; q < b1; q += 32) wrong |= bcol[q] <= bcol[q - 1];
            if (__any_sync(FULL_MASK, wrong) && lane == 0) atomicMax(bad, rk + 1);
        }
    }
}

extern "C" __global__ void spgemm_bin_rows(const u32* __restrict__ ub, u32 m, const u32* __restrict__ offsets,
                                           u32* cursor, u32* rows) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 base = blockIdx.x * blockDim.x; base < m; base += gridDim.x * blockDim.x) {
        const u32 i = base + threadIdx.x;
        const u32 u = i < m ? ub[i] : 0u;
        const u32 b = spgemm_bin_of(u);
        for (u32 bb = 0; bb < SPGEMM_NBINS; ++bb) {
            const bool mine = u > 0 && b == bb;
            const u32 mask = __ballot_sync(FULL_MASK, mine);
            if (mask == 0) continue;
            const u32 leader = __ffs(mask) - 1;
            u32 pos = 0;
            if (lane == leader) pos = atomicAdd(cursor + bb, (u32)__popc(mask));
            pos = __shfl_sync(FULL_MASK, pos, leader);
            if (mine) rows[offsets[bb] + pos + __popc(mask & ((1u << lane) - 1u))] = i;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Warp-group kernels: G lanes per row (G divides 32), GROUPS groups per block, tables of CAP
// (a power of two >= the bin's largest ub) entries per group in shared memory.
// ---------------------------------------------------------------------------------------------
template <int G>
__device__ __forceinline__ u32 spgemm_group_mask() {
    const u32 lane = threadIdx.x & 31u;
    return G == 32 ? FULL_MASK : (((1u << G) - 1u) << (lane & ~(u32)(G - 1)));
}

template <int G>
__device__ __forceinline__ u32 spgemm_group_sum(u32 v, u32 mask) {
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o, G);
    return v;
}

// Inserts every product column of row i into keys (CAP entries, set to EMPTY first by the
// caller); returns this lane's count of new insertions.
template <int G>
__device__ __forceinline__ u32 spgemm_group_insert(u32 i, u32 r, const u32* __restrict__ arp,
                                                   const u32* __restrict__ acol, const u32* __restrict__ brp,
                                                   const u32* __restrict__ bcol, u32* keys, u32 mask) {
    // One A entry per lane (the insertion order does not matter here): each lane's chain of
    // dependent loads is one entry long instead of the whole row.
    u32 added = 0;
    const u32 a1 = arp[i + 1];
    for (u32 p = arp[i] + r; p < a1; p += G) {
        const u32 k = acol[p];
        const u32 b1 = brp[k + 1];
        for (u32 q = brp[k]; q < b1; ++q) added += spgemm_insert(keys, mask, bcol[q]);
    }
    return added;
}

template <int G, int GROUPS, int CAP>
__device__ void spgemm_count_group(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                   const u32* __restrict__ acol, const u32* __restrict__ brp,
                                   const u32* __restrict__ bcol, u32* counts) {
    __shared__ u32 table[GROUPS][CAP];
    const u32 g = threadIdx.x / G, r = threadIdx.x % G;
    const u32 gm = spgemm_group_mask<G>();
    const u32 slot = blockIdx.x * GROUPS + g;
    if (slot >= nrows_bin) return;  // whole groups leave together
    u32* keys = table[g];
    for (u32 t = r; t < CAP; t += G) keys[t] = SPGEMM_EMPTY;
    __syncwarp(gm);
    const u32 i = rows[slot];
    u32 added = spgemm_group_insert<G>(i, r, arp, acol, brp, bcol, keys, CAP - 1);
    added = spgemm_group_sum<G>(added, gm);
    if (r == 0) counts[i] = added;
}

template <int G, int GROUPS, int CAP>
__device__ void spgemm_fill_group(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                  const u32* __restrict__ acol, const u32* __restrict__ brp,
                                  const u32* __restrict__ bcol, const u32* __restrict__ out_off, u32* ccol,
                                  u32* counts) {
    __shared__ u32 table[GROUPS][CAP];
    __shared__ u32 list[GROUPS][CAP];
    __shared__ u32 fill[GROUPS];
    const u32 g = threadIdx.x / G, r = threadIdx.x % G;
    const u32 gm = spgemm_group_mask<G>();
    const u32 slot = blockIdx.x * GROUPS + g;
    if (slot >= nrows_bin) return;
    u32* keys = table[g];
    for (u32 t = r; t < CAP; t += G) keys[t] = SPGEMM_EMPTY;
    if (r == 0) fill[g] = 0;
    __syncwarp(gm);
    const u32 i = rows[slot];
    spgemm_group_insert<G>(i, r, arp, acol, brp, bcol, keys, CAP - 1);
    __syncwarp(gm);
    // Compact the table into list (any order), then rank each key among the list.
    for (u32 t = r; t < CAP; t += G) {
        const u32 c = keys[t];
        if (c != SPGEMM_EMPTY) list[g][atomicAdd(&fill[g], 1u)] = c;
    }
    __syncwarp(gm);
    const u32 n = fill[g];
    const u32 base = out_off[i];
    if (r == 0) counts[i] = n;
    for (u32 t = r; t < n; t += G) {
        const u32 c = list[g][t];
        u32 rank = 0;
        for (u32 s = 0; s < n; ++s) rank += list[g][s] < c;
        ccol[base + rank] = c;
    }
}

template <typename T, int G, int GROUPS, int CAP>
__device__ void spgemm_numeric_group(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                     const u32* __restrict__ acol, const T* __restrict__ aval,
                                     const u32* __restrict__ brp, const u32* __restrict__ bcol,
                                     const T* __restrict__ bval, const u32* __restrict__ crp,
                                     const u32* __restrict__ ccol, T* cval) {
    __shared__ u32 scol[GROUPS][CAP];
    __shared__ T sval[GROUPS][CAP];
    const u32 g = threadIdx.x / G, r = threadIdx.x % G;
    const u32 gm = spgemm_group_mask<G>();
    const u32 slot = blockIdx.x * GROUPS + g;
    if (slot >= nrows_bin) return;
    const u32 i = rows[slot];
    const u32 c0 = crp[i], n = crp[i + 1] - c0;
    for (u32 t = r; t < n; t += G) {
        scol[g][t] = ccol[c0 + t];
        sval[g][t] = T(0);
    }
    __syncwarp(gm);
    // The lanes load G of A's entries at a time (column, value, B row range); the row is then
    // walked in order with the entry broadcast by shuffles, so the serial path holds only the
    // loads of B's entries.
    const u32 a0 = arp[i], a1 = arp[i + 1];
    for (u32 c = a0; c < a1; c += G) {
        u32 kb0 = 0, kb1 = 0;
        T av = T(0);
        if (c + r < a1) {
            const u32 k = acol[c + r];
            av = aval[c + r];
            kb0 = brp[k];
            kb1 = brp[k + 1];
        }
        const u32 cnt = a1 - c < (u32)G ? a1 - c : (u32)G;
        for (u32 j = 0; j < cnt; ++j) {
            const u32 q0 = __shfl_sync(gm, kb0, j, G), q1 = __shfl_sync(gm, kb1, j, G);
            const T a = __shfl_sync(gm, av, j, G);
            for (u32 q = q0 + r; q < q1; q += G) {
                const u32 pos = spgemm_find(scol[g], n, bcol[q]);
                sval[g][pos] = spgemm_fma(sval[g][pos], a, bval[q]);
            }
            __syncwarp(gm);
        }
    }
    for (u32 t = r; t < n; t += G) cval[c0 + t] = sval[g][t];
}

// ---------------------------------------------------------------------------------------------
// Block kernels: one row per block of SPGEMM_BLOCK threads. CAP entries in shared memory, or
// (CAP == 0) a per-block slab of `slab` entries in global scratch (`slab` a power of two >= the
// bin's largest ub); such blocks loop over their rows.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ u32 spgemm_block_insert(u32 i, const u32* __restrict__ arp, const u32* __restrict__ acol,
                                                   const u32* __restrict__ brp, const u32* __restrict__ bcol,
                                                   u32* keys, u32 mask) {
    // One A entry per warp, its B row split between the lanes (order does not matter here).
    u32 added = 0;
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u, nwarps = blockDim.x >> 5;
    const u32 a1 = arp[i + 1];
    for (u32 p = arp[i] + warp; p < a1; p += nwarps) {
        const u32 k = acol[p];
        const u32 b1 = brp[k + 1];
        for (u32 q = brp[k] + lane; q < b1; q += 32) added += spgemm_insert(keys, mask, bcol[q]);
    }
    return added;
}

// Bitonic sort of keys[0..len) ascending, len a power of two, by the whole block.
__device__ void spgemm_bitonic(u32* keys, u32 len) {
    for (u32 k = 2; k <= len; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 t = threadIdx.x; t < len; t += blockDim.x) {
                const u32 o = t ^ j;
                if (o > t) {
                    const u32 x = keys[t], y = keys[o];
                    const bool up = (t & k) == 0;
                    if ((x > y) == up) {
                        keys[t] = y;
                        keys[o] = x;
                    }
                }
            }
            __syncthreads();
        }
    }
}

__device__ u32 spgemm_block_total(u32 v) {
    __shared__ u32 total;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    if ((threadIdx.x & 31u) == 0) atomicAdd(&total, v);
    __syncthreads();
    const u32 t = total;
    __syncthreads();
    return t;
}

template <int CAP>
__device__ void spgemm_count_block(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                   const u32* __restrict__ acol, const u32* __restrict__ brp,
                                   const u32* __restrict__ bcol, u32* counts, u32* scratch, u32 slab) {
    __shared__ u32 stable[CAP > 0 ? CAP : 1];
    u32* keys = CAP > 0 ? stable : scratch + (u64)blockIdx.x * slab;
    const u32 len = CAP > 0 ? CAP : slab;
    for (u32 slot = blockIdx.x; slot < nrows_bin; slot += gridDim.x) {
        for (u32 t = threadIdx.x; t < len; t += blockDim.x) keys[t] = SPGEMM_EMPTY;
        __syncthreads();
        const u32 i = rows[slot];
        const u32 n = spgemm_block_total(spgemm_block_insert(i, arp, acol, brp, bcol, keys, len - 1));
        if (threadIdx.x == 0) counts[i] = n;
        __syncthreads();
    }
}

// The table's distinct keys are compacted into `list` (n = nnz(C[i,:]) of them) and only the next power of two >= n is bitonic-sorted, not the whole table.
template <int CAP>
__device__ void spgemm_fill_block(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                  const u32* __restrict__ acol, const u32* __restrict__ brp,
                                  const u32* __restrict__ bcol, const u32* __restrict__ out_off, u32* ccol,
                                  u32* counts, u32* scratch, u32 slab) {
    __shared__ u32 stable[CAP > 0 ? CAP : 1];
    __shared__ u32 slist[CAP > 0 ? CAP : 1];
    __shared__ u32 fill;
    u32* keys = CAP > 0 ? stable : scratch + (u64)blockIdx.x * slab * 2;
    u32* list = CAP > 0 ? slist : scratch + (u64)blockIdx.x * slab * 2 + slab;
    const u32 len = CAP > 0 ? CAP : slab;
    for (u32 slot = blockIdx.x; slot < nrows_bin; slot += gridDim.x) {
        for (u32 t = threadIdx.x; t < len; t += blockDim.x) keys[t] = SPGEMM_EMPTY;
        if (threadIdx.x == 0) fill = 0;
        __syncthreads();
        const u32 i = rows[slot];
        spgemm_block_insert(i, arp, acol, brp, bcol, keys, len - 1);
        __syncthreads();
        for (u32 t = threadIdx.x; t < len; t += blockDim.x) {
            const u32 c = keys[t];
            if (c != SPGEMM_EMPTY) list[atomicAdd(&fill, 1u)] = c;
        }
        __syncthreads();
        const u32 c0 = out_off[i], n = fill;
        if (threadIdx.x == 0) counts[i] = n;
        u32 n2 = 1;
        while (n2 < n) n2 <<= 1;
        for (u32 t = n + threadIdx.x; t < n2; t += blockDim.x) list[t] = SPGEMM_EMPTY;
        __syncthreads();
        spgemm_bitonic(list, n2);  // padding (all ones) sorts last
        for (u32 t = threadIdx.x; t < n; t += blockDim.x) ccol[c0 + t] = list[t];
        __syncthreads();
    }
}

// One row per block. C's row in shared memory when it has at most CAP entries, else C's own
// arrays in global memory (values accumulated in place).
template <typename T, int CAP>
__device__ void spgemm_numeric_block(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                     const u32* __restrict__ acol, const T* __restrict__ aval,
                                     const u32* __restrict__ brp, const u32* __restrict__ bcol,
                                     const T* __restrict__ bval, const u32* __restrict__ crp,
                                     const u32* __restrict__ ccol, T* cval) {
    __shared__ u32 scol_s[CAP];
    __shared__ T sval_s[CAP];
    for (u32 slot = blockIdx.x; slot < nrows_bin; slot += gridDim.x) {
        const u32 i = rows[slot];
        const u32 c0 = crp[i], n = crp[i + 1] - c0;
        const bool in_shared = n <= CAP;
        const u32* scol = in_shared ? scol_s : ccol + c0;
        T* sval = in_shared ? sval_s : cval + c0;
        for (u32 t = threadIdx.x; t < n; t += blockDim.x) {
            if (in_shared) scol_s[t] = ccol[c0 + t];
            sval[t] = T(0);
        }
        __syncthreads();
        const u32 a1 = arp[i + 1];
        for (u32 p = arp[i]; p < a1; ++p) {
            const u32 k = acol[p];
            const T a = aval[p];
            const u32 b1 = brp[k + 1];
            for (u32 q = brp[k] + threadIdx.x; q < b1; q += blockDim.x) {
                const u32 pos = spgemm_find(scol, n, bcol[q]);
                sval[pos] = spgemm_fma(sval[pos], a, bval[q]);
            }
            __syncthreads();
        }
        if (in_shared)
            for (u32 t = threadIdx.x; t < n; t += blockDim.x) cval[c0 + t] = sval_s[t];
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points, one per bin (threads and rows per block from the Rust side's BINS table):
//   bin 0: ub <= 32,   8 lanes,  16 groups (SPGEMM_GROUP_THREADS = 128 threads), CAP 32
//   bin 1: ub <= 64,   16 lanes, 8 groups,  CAP 64
//   bin 2: ub <= 256,  32 lanes, 4 groups,  CAP 256
//   bin 3: ub <= 1024, 32 lanes, 4 groups,  CAP 1024
//   bin 4: ub <= 4096, a block of 256 threads per row,    CAP 4096
//   bin 5: larger,     a block of 256 threads per row,    global slab
// ---------------------------------------------------------------------------------------------
#define SPGEMM_SYM_ARGS const u32 *rows, u32 nrows_bin, const u32 *arp, const u32 *acol, const u32 *brp, const u32 *bcol
#define SPGEMM_SYM_PASS rows, nrows_bin, arp, acol, brp, bcol

#define SPGEMM_GROUP_BIN(B, G, GROUPS, CAP)                                                                  \
    extern "C" __global__ void __launch_bounds__(G * GROUPS)                                               \
        spgemm_count_b##B(SPGEMM_SYM_ARGS, u32 *counts, u32 *scratch, u32 slab) {                          \
        spgemm_count_group<G, GROUPS, CAP>(SPGEMM_SYM_PASS, counts);                                       \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(G * GROUPS)                                               \
        spgemm_fill_b##B(SPGEMM_SYM_ARGS, const u32 *out_off, u32 *ccol, u32 *counts, u32 *scratch,        \
                         u32 slab) {                                                                       \
        spgemm_fill_group<G, GROUPS, CAP>(SPGEMM_SYM_PASS, out_off, ccol, counts);                         \
    }
#define SPGEMM_BLOCK_BIN(B, CAP)                                                                           \
    extern "C" __global__ void __launch_bounds__(SPGEMM_BLOCK)                                             \
        spgemm_count_b##B(SPGEMM_SYM_ARGS, u32 *counts, u32 *scratch, u32 slab) {                          \
        spgemm_count_block<CAP>(SPGEMM_SYM_PASS, counts, scratch, slab);                                   \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_BLOCK)                                             \
        spgemm_fill_b##B(SPGEMM_SYM_ARGS, const u32 *out_off, u32 *ccol, u32 *counts, u32 *scratch,        \
                         u32 slab) {                                                                       \
        spgemm_fill_block<CAP>(SPGEMM_SYM_PASS, out_off, ccol, counts, scratch, slab);                     \
    }
SPGEMM_GROUP_BIN(0, SPGEMM_G(SPGEMM_BIN0_ROWS), SPGEMM_BIN0_ROWS, 32)
SPGEMM_GROUP_BIN(1, SPGEMM_G(SPGEMM_BIN1_ROWS), SPGEMM_BIN1_ROWS, 64)
SPGEMM_GROUP_BIN(2, SPGEMM_G(SPGEMM_BIN2_ROWS), SPGEMM_BIN2_ROWS, 256)
SPGEMM_GROUP_BIN(3, SPGEMM_G(SPGEMM_BIN3_ROWS), SPGEMM_BIN3_ROWS, 1024)
SPGEMM_BLOCK_BIN(4, 4096)
SPGEMM_BLOCK_BIN(5, 0)

#define SPGEMM_NUM_ARGS(T)                                                                                 \
    const u32 *rows, u32 nrows_bin, const u32 *arp, const u32 *acol, const T *aval, const u32 *brp,        \
        const u32 *bcol, const T *bval, const u32 *crp, const u32 *ccol, T *cval
#define SPGEMM_NUM_PASS rows, nrows_bin, arp, acol, aval, brp, bcol, bval, crp, ccol, cval
#define SPGEMM_NUMERIC(T, S)                                                                               \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_numeric_b0_##S(SPGEMM_NUM_ARGS(T)) {          \
        spgemm_numeric_group<T, SPGEMM_G(SPGEMM_BIN0_ROWS), SPGEMM_BIN0_ROWS, 32>(SPGEMM_NUM_PASS);                                               \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_numeric_b1_##S(SPGEMM_NUM_ARGS(T)) {          \
        spgemm_numeric_group<T, SPGEMM_G(SPGEMM_BIN1_ROWS), SPGEMM_BIN1_ROWS, 64>(SPGEMM_NUM_PASS);                                               \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_numeric_b2_##S(SPGEMM_NUM_ARGS(T)) {          \
        spgemm_numeric_group<T, SPGEMM_G(SPGEMM_BIN2_ROWS), SPGEMM_BIN2_ROWS, 256>(SPGEMM_NUM_PASS);                                              \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_numeric_b3_##S(SPGEMM_NUM_ARGS(T)) {          \
        spgemm_numeric_group<T, SPGEMM_G(SPGEMM_BIN3_ROWS), SPGEMM_BIN3_ROWS, 1024>(SPGEMM_NUM_PASS);                                             \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_BLOCK) spgemm_numeric_b4_##S(SPGEMM_NUM_ARGS(T)) { \
        spgemm_numeric_block<T, 2048>(SPGEMM_NUM_PASS);                                                    \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_BLOCK) spgemm_numeric_b5_##S(SPGEMM_NUM_ARGS(T)) { \
        spgemm_numeric_block<T, 2048>(SPGEMM_NUM_PASS);                                                       \
    }
SPGEMM_NUMERIC(float, f32)
SPGEMM_NUMERIC(double, f64)

// ---------------------------------------------------------------------------------------------
// Numeric phase, flattened: the products of consecutive A entries are dealt to the lanes one
// each (the lanes load G of A's entries, a prefix sum of their B-row lengths tells each lane
// which entry and which B entry its product is), so every lane works whatever the lengths of
// B's rows. Products that land on the same C entry within one round of G are added by the
// lowest such lane, in lane order (= A's row order, then B's), before the next round: the CPU's
// order and rounding, so the result is still the CPU's bit for bit.
//
// A row's C entries may be split into segments of at most SEG consecutive entries, each
// processed alone (a warp per segment): each A entry then contributes only the part of its B
// row inside the segment's column range (found by binary search). A segment whose column
// range spans at most 2·SEG columns accumulates in a dense window (the product's column minus
// the first column is its slot: no search), others find each column by binary search in the
// segment's sorted columns.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ float spgemm_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double spgemm_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float spgemm_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double spgemm_add(double a, double b) { return __dadd_rn(a, b); }

// First q in [lo, hi) with col[q] >= x (hi if none).
__device__ __forceinline__ u32 spgemm_lower_bound(const u32* __restrict__ col, u32 lo, u32 hi, u32 x) {
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        if (col[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// Adds the products of A's entries a0..a1 of one row whose columns lie in [c_lo, c_hi] (all of
// them when FULL) into sval: slot col - c_lo when dense, else the position of col in scol[0..sn).
// stage: this warp's 32 staging slots. All G lanes of the group call it together.
template <typename T, int G, bool FULL>
__device__ __forceinline__ void spgemm_accumulate(u32 a0, u32 a1, const u32* __restrict__ acol,
                                                  const T* __restrict__ aval, const u32* __restrict__ brp,
                                                  const u32* __restrict__ bcol, const T* __restrict__ bval,
                                                  const u32* scol, u32 sn, T* sval, u32 c_lo, u32 c_hi,
                                                  bool dense, T* stage, u32 gm) {
    const u32 lane = threadIdx.x & 31u, r = lane & (G - 1);
    for (u32 ab = a0; ab < a1; ab += G) {
        u32 lo = 0, len = 0;
        T av = T(0);
        if (ab + r < a1) {
            const u32 k = acol[ab + r];
            av = aval[ab + r];
            lo = brp[k];
            u32 hi = brp[k + 1];
            if (!FULL) {
                lo = spgemm_lower_bound(bcol, lo, hi, c_lo);
                hi = spgemm_lower_bound(bcol, lo, hi, c_hi + 1u);  // c_hi < ncols <= u32::MAX - 1
            }
            len = hi - lo;
        }
        u32 incl = len;
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            const u32 y = __shfl_up_sync(gm, incl, o, G);
            if (r >= (u32)o) incl += y;
        }
        const u32 excl = incl - len;
        const u32 total = __shfl_sync(gm, incl, G - 1, G);
        for (u32 t0 = 0; t0 < total; t0 += G) {
            const u32 t = t0 + r;
            // The entry j whose products hold t: the last with excl_j <= t (entries without
            // products share their successor's excl and lose to it).
            u32 j = 0;
#pragma unroll
            for (int s = G / 2; s > 0; s >>= 1) {
                const u32 e = __shfl_sync(gm, excl, j + s, G);
                if (e <= t) j += s;
            }
            const u32 qlo = __shfl_sync(gm, lo, j, G);
            const u32 ej = __shfl_sync(gm, excl, j, G);
            const T a = __shfl_sync(gm, av, j, G);
            u32 pos = SPGEMM_EMPTY;
            T p = T(0);
            if (t < total) {
                const u32 q = qlo + (t - ej);
                const u32 col = bcol[q];
                p = spgemm_mul(a, bval[q]);
                pos = dense ? col - c_lo : spgemm_find(scol, sn, col);
            }
            const u32 same = __match_any_sync(gm, pos);
            stage[lane] = p;
            __syncwarp(gm);
            if (pos != SPGEMM_EMPTY && lane == (u32)(__ffs(same) - 1)) {
                T acc = sval[pos];
                for (u32 m = same; m != 0; m &= m - 1) acc = spgemm_add(acc, stage[__ffs(m) - 1]);
                sval[pos] = acc;
            }
            __syncwarp(gm);
        }
    }
}

// One group of G lanes per row (rows whose C row has at most CAP entries).
template <typename T, int G, int GROUPS, int CAP>
__device__ void spgemm_numeric_flat_group(const u32* __restrict__ rows, u32 nrows_bin,
                                          const u32* __restrict__ arp, const u32* __restrict__ acol,
                                          const T* __restrict__ aval, const u32* __restrict__ brp,
                                          const u32* __restrict__ bcol, const T* __restrict__ bval,
                                          const u32* __restrict__ crp, const u32* __restrict__ ccol, T* cval) {
    __shared__ u32 scol[GROUPS][CAP];
    __shared__ T sval[GROUPS][2 * CAP];
    __shared__ T stage[GROUPS * G];
    const u32 g = threadIdx.x / G, r = threadIdx.x % G;
    const u32 gm = spgemm_group_mask<G>();
    const u32 slot = blockIdx.x * GROUPS + g;
    if (slot >= nrows_bin) return;  // whole groups leave together
    const u32 i = rows[slot];
    const u32 c0 = crp[i], n = crp[i + 1] - c0;
    for (u32 t = r; t < n; t += G) scol[g][t] = ccol[c0 + t];
    __syncwarp(gm);
    const u32 c_lo = scol[g][0], c_hi = scol[g][n - 1];
    const bool dense = c_hi - c_lo < 2u * CAP;
    const u32 width = dense ? c_hi - c_lo + 1 : n;
    for (u32 t = r; t < width; t += G) sval[g][t] = T(0);
    __syncwarp(gm);
    spgemm_accumulate<T, G, true>(arp[i], arp[i + 1], acol, aval, brp, bcol, bval, scol[g], n, sval[g], c_lo,
                                  c_hi, dense, stage + (threadIdx.x & ~31u), gm);
    for (u32 t = r; t < n; t += G) cval[c0 + t] = sval[g][dense ? scol[g][t] - c_lo : t];
}

// One warp per segment: items[3s..3s+3) = row, first and end entry of the segment in the row;
// *nitems segments.
template <typename T, int WARPS, int SEG>
__device__ void spgemm_numeric_flat_seg(const u32* __restrict__ items, const u32* __restrict__ nitems,
                                        const u32* __restrict__ arp, const u32* __restrict__ acol,
                                        const T* __restrict__ aval, const u32* __restrict__ brp,
                                        const u32* __restrict__ bcol, const T* __restrict__ bval,
                                        const u32* __restrict__ crp, const u32* __restrict__ ccol, T* cval) {
    __shared__ u32 scol[WARPS][SEG];
    __shared__ T sval[WARPS][2 * SEG];
    __shared__ T stage[WARPS * 32];
    const u32 w = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const u32 count = *nitems;
    for (u32 it = blockIdx.x * WARPS + w; it < count; it += gridDim.x * WARPS) {
        const u32 i = items[3 * it], p0 = items[3 * it + 1], p1 = items[3 * it + 2];
        const u32 r0 = crp[i], c0 = r0 + p0, sn = p1 - p0;
        const bool full = p0 == 0 && r0 + p1 == crp[i + 1];
        for (u32 t = lane; t < sn; t += 32) scol[w][t] = ccol[c0 + t];
        __syncwarp();
        const u32 c_lo = scol[w][0], c_hi = scol[w][sn - 1];
        const bool dense = c_hi - c_lo < 2u * SEG;
        const u32 width = dense ? c_hi - c_lo + 1 : sn;
        for (u32 t = lane; t < width; t += 32) sval[w][t] = T(0);
        __syncwarp();
        if (full)
            spgemm_accumulate<T, 32, true>(arp[i], arp[i + 1], acol, aval, brp, bcol, bval, scol[w], sn, sval[w],
                                           c_lo, c_hi, dense, stage + w * 32, FULL_MASK);
        else
            spgemm_accumulate<T, 32, false>(arp[i], arp[i + 1], acol, aval, brp, bcol, bval, scol[w], sn, sval[w],
                                            c_lo, c_hi, dense, stage + w * 32, FULL_MASK);
        for (u32 t = lane; t < sn; t += 32) cval[c0 + t] = sval[w][dense ? scol[w][t] - c_lo : t];
        __syncwarp();
    }
}

// The segments of the rows rows[0..nrows): a row of n entries and ub products gets
// s = min(n, max(ceil(n / seg), ceil(ub / prod))) segments of n/s entries (rounded), so that no
// segment holds more than seg entries and rows with many products per entry are shared by
// several warps. Written at an atomic cursor (their order does not matter); every lane of a
// warp runs the same iterations.
extern "C" __global__ void spgemm_seg_items(const u32* __restrict__ rows, u32 nrows, const u32* __restrict__ crp,
                                            const u32* __restrict__ ub, u32 seg, u32 prod, u32* cursor,
                                            u32* items) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 base = blockIdx.x * blockDim.x; base < nrows; base += gridDim.x * blockDim.x) {
        const u32 idx = base + threadIdx.x;
        u32 i = 0, ns = 0, n = 0;
        if (idx < nrows) {
            i = rows[idx];
            n = crp[i + 1] - crp[i];
            const u32 by_entries = (n + seg - 1) / seg, by_products = (ub[i] + prod - 1) / prod;
            ns = by_entries > by_products ? by_entries : by_products;
            if (ns > n) ns = n;
        }
        u32 incl = ns;
        for (int o = 1; o < 32; o <<= 1) {
            const u32 y = __shfl_up_sync(FULL_MASK, incl, o);
            if (lane >= (u32)o) incl += y;
        }
        u32 start = 0;
        if (lane == 31 && incl > 0) start = atomicAdd(cursor, incl);
        start = __shfl_sync(FULL_MASK, start, 31) + incl - ns;
        for (u32 s = 0; s < ns; ++s) {
            items[3 * (start + s)] = i;
            items[3 * (start + s) + 1] = (u32)((u64)s * n / ns);
            items[3 * (start + s) + 2] = (u32)((u64)(s + 1) * n / ns);
        }
    }
}

#define SPGEMM_FLAT(T, S)                                                                                  \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_flat_b0_##S(SPGEMM_NUM_ARGS(T)) {             \
        spgemm_numeric_flat_group<T, SPGEMM_G(SPGEMM_BIN0_ROWS), SPGEMM_BIN0_ROWS, 32>(SPGEMM_NUM_PASS);                                          \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_flat_b1_##S(SPGEMM_NUM_ARGS(T)) {             \
        spgemm_numeric_flat_group<T, SPGEMM_G(SPGEMM_BIN1_ROWS), SPGEMM_BIN1_ROWS, 64>(SPGEMM_NUM_PASS);                                          \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(SPGEMM_GROUP_THREADS) spgemm_flat_seg_##S(                                 \
        const u32 *items, const u32 *nitems, const u32 *arp, const u32 *acol, const T *aval,              \
        const u32 *brp, const u32 *bcol, const T *bval, const u32 *crp, const u32 *ccol, T *cval) {        \
        spgemm_numeric_flat_seg<T, SPGEMM_FLAT_SEGS_PER_BLOCK, SPGEMM_FLAT_SEG>(                          \
            items, nitems, arp, acol, aval, brp, bcol, bval, crp, ccol, cval);                             \
    }
SPGEMM_FLAT(float, f32)
SPGEMM_FLAT(double, f64)

// ---------------------------------------------------------------------------------------------
// Symbolic phase, flattened: the product columns of a row dealt to the lanes one each (as in
// the flat numeric phase), inserted into the group's hash table with a plain read before the
// atomicCAS (most products of a row with far fewer distinct columns than products find their
// column already there), the table compacted by ballots and sorted by ranking (short rows) or
// a bitonic sort (longer ones). Rows of the block bins whose B has at most 2^16 columns use a
// bitmap of B's columns instead of a hash table: no probing, and the set bits read in order
// are the sorted row.
// ---------------------------------------------------------------------------------------------

// Calls f(col) for every product column of A's entries [a0, a1) of one row, taking G entries
// at a time from a0 + start, stepping by stride; of their products this group takes rounds of G
// from t_start, stepping by t_stride (several groups may share a batch), dealt to its lanes.
// All G lanes call it together.
template <int G, typename F>
__device__ __forceinline__ void spgemm_each_product(u32 a0, u32 a1, u32 start, u32 stride, u32 t_start,
                                                    u32 t_stride, const u32* __restrict__ acol,
                                                    const u32* __restrict__ brp, const u32* __restrict__ bcol,
                                                    u32 gm, F&& f) {
    const u32 r = threadIdx.x & (G - 1);
    for (u32 ab = a0 + start; ab < a1; ab += stride) {
        u32 lo = 0, len = 0;
        if (ab + r < a1) {
            const u32 k = acol[ab + r];
            lo = brp[k];
            len = brp[k + 1] - lo;
        }
        u32 incl = len;
#pragma unroll
        for (int o = 1; o < G; o <<= 1) {
            const u32 y = __shfl_up_sync(gm, incl, o, G);
            if (r >= (u32)o) incl += y;
        }
        const u32 excl = incl - len;
        const u32 total = __shfl_sync(gm, incl, G - 1, G);
        for (u32 t0 = t_start; t0 < total; t0 += t_stride) {
            const u32 t = t0 + r;
            u32 j = 0;
#pragma unroll
            for (int s = G / 2; s > 0; s >>= 1) {
                const u32 e = __shfl_sync(gm, excl, j + s, G);
                if (e <= t) j += s;
            }
            const u32 qlo = __shfl_sync(gm, lo, j, G);
            const u32 ej = __shfl_sync(gm, excl, j, G);
            if (t < total) f(bcol[qlo + (t - ej)]);
        }
    }
}

__device__ __forceinline__ void spgemm_insert_read_first(u32* keys, u32 mask, u32 col) {
    u32 h = spgemm_hash(col, mask);
    while (true) {
        const u32 cur = ((volatile u32*)keys)[h];
        if (cur == col) return;
        if (cur == SPGEMM_EMPTY) {
            const u32 old = atomicCAS(keys + h, SPGEMM_EMPTY, col);
            if (old == SPGEMM_EMPTY || old == col) return;
        }
        h = (h + 1) & mask;
    }
}

// Bitonic sort of keys[0..len) ascending (len a power of two) by the G lanes of a group.
template <int G>
__device__ void spgemm_bitonic_group(u32* keys, u32 len, u32 gm) {
    const u32 r = threadIdx.x & (G - 1);
    for (u32 k = 2; k <= len; k <<= 1) {
        for (u32 j = k >> 1; j > 0; j >>= 1) {
            for (u32 t = r; t < len; t += G) {
                const u32 o = t ^ j;
                if (o > t) {
                    const u32 x = keys[t], y = keys[o];
                    if ((x > y) == ((t & k) == 0)) {
                        keys[t] = y;
                        keys[o] = x;
                    }
                }
            }
            __syncwarp(gm);
        }
    }
}

// The row's table holds next_pow2(out_off[i + 1] - out_off[i]) entries (at most CAP): the
// row's product count in the one-pass symbolic phase, its distinct count in the two-pass one,
// both at least its distinct columns. Clearing and compacting cost the table's size, not the
// bin's largest. The distinct columns are compacted in place (a round's writes land at or
// below the positions it read) and sorted there.
template <int G, int GROUPS, int CAP>
__device__ void spgemm_fill_flat_group(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                       const u32* __restrict__ acol, const u32* __restrict__ brp,
                                       const u32* __restrict__ bcol, const u32* __restrict__ out_off, u32* ccol,
                                       u32* counts) {
    __shared__ u32 table[GROUPS][CAP];
    const u32 g = threadIdx.x / G, r = threadIdx.x % G, lane = threadIdx.x & 31u;
    const u32 gm = spgemm_group_mask<G>();
    const u32 slot = blockIdx.x * GROUPS + g;
    if (slot >= nrows_bin) return;
    u32* keys = table[g];
    const u32 i = rows[slot];
    const u32 base = out_off[i], room = out_off[i + 1] - base;
    u32 tsize = 1;
    while (tsize < room && tsize < (u32)CAP) tsize <<= 1;
    for (u32 t = r; t < tsize; t += G) keys[t] = SPGEMM_EMPTY;
    __syncwarp(gm);
    spgemm_each_product<G>(arp[i], arp[i + 1], 0, G, 0, G, acol, brp, bcol, gm,
                           [&](u32 c) { spgemm_insert_read_first(keys, tsize - 1, c); });
    __syncwarp(gm);
    // Compact in place (ballots over rounds of G consecutive slots).
    u32 n = 0;
    const u32 below = gm & ((1u << lane) - 1u);
    for (u32 t0 = 0; t0 < tsize; t0 += G) {
        const u32 c = t0 + r < tsize ? keys[t0 + r] : SPGEMM_EMPTY;
        const u32 m = __ballot_sync(gm, c != SPGEMM_EMPTY);
        if (c != SPGEMM_EMPTY) keys[n + __popc(m & below)] = c;
        n += __popc(m);
        __syncwarp(gm);
    }
    if (r == 0) counts[i] = n;
    if (n <= 64) {
        for (u32 t = r; t < n; t += G) {
            const u32 c = keys[t];
            u32 rank = 0;
            for (u32 s = 0; s < n; ++s) rank += keys[s] < c;
            ccol[base + rank] = c;
        }
    } else {
        u32 n2 = 1;
        while (n2 < n) n2 <<= 1;
        for (u32 t = n + r; t < n2; t += G) keys[t] = SPGEMM_EMPTY;
        __syncwarp(gm);
        spgemm_bitonic_group<G>(keys, n2, gm);
        for (u32 t = r; t < n; t += G) ccol[base + t] = keys[t];
    }
}

// A block of SPGEMM_BLOCK threads per row, a bitmap of B's ncols columns in dynamic shared
// memory. The warps share each batch of 32 A entries and split its products between them.
__device__ void spgemm_fill_bitmap(const u32* __restrict__ rows, u32 nrows_bin, const u32* __restrict__ arp,
                                   const u32* __restrict__ acol, const u32* __restrict__ brp,
                                   const u32* __restrict__ bcol, u32 ncols, const u32* __restrict__ out_off,
                                   u32* ccol, u32* counts) {
    extern __shared__ u32 bits[];
    __shared__ u32 wsum[SPGEMM_BLOCK / 32];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const u32 nw = (ncols + 31) / 32;
    const u32 per = (nw + SPGEMM_BLOCK - 1) / SPGEMM_BLOCK;
    for (u32 slot = blockIdx.x; slot < nrows_bin; slot += gridDim.x) {
        for (u32 t = threadIdx.x; t < nw; t += SPGEMM_BLOCK) bits[t] = 0;
        __syncthreads();
        const u32 i = rows[slot];
        spgemm_each_product<32>(arp[i], arp[i + 1], 0, 32, warp * 32, SPGEMM_BLOCK, acol, brp, bcol, FULL_MASK,
                                [&](u32 c) {
                                    const u32 bit = 1u << (c & 31u);
                                    if (!(((volatile u32*)bits)[c >> 5] & bit)) atomicOr(bits + (c >> 5), bit);
                                });
        __syncthreads();
        const u32 w0 = threadIdx.x * per, w1 = w0 + per < nw ? w0 + per : nw;
        u32 mine = 0;
        for (u32 w = w0; w < w1; ++w) mine += __popc(bits[w]);
        u32 incl = mine;
        for (int o = 1; o < 32; o <<= 1) {
            const u32 y = __shfl_up_sync(FULL_MASK, incl, o);
            if (lane >= (u32)o) incl += y;
        }
        if (lane == 31) wsum[warp] = incl;
        __syncthreads();
        u32 before = 0, total = 0;
        for (u32 v = 0; v < SPGEMM_BLOCK / 32; ++v) {
            before += v < warp ? wsum[v] : 0u;
            total += wsum[v];
        }
        u32 o = out_off[i] + before + incl - mine;
        for (u32 w = w0; w < w1; ++w)
            for (u32 m = bits[w]; m != 0; m &= m - 1) ccol[o++] = w * 32 + __ffs(m) - 1;
        if (threadIdx.x == 0) counts[i] = total;
        __syncthreads();
    }
}

#define SPGEMM_FLAT_GROUP_BIN(B, G, GROUPS, CAP)                                                           \
    extern "C" __global__ void __launch_bounds__(G * GROUPS)                                               \
        spgemm_fill_flat_b##B(SPGEMM_SYM_ARGS, const u32 *out_off, u32 *ccol, u32 *counts) {               \
        spgemm_fill_flat_group<G, GROUPS, CAP>(SPGEMM_SYM_PASS, out_off, ccol, counts);                    \
    }
SPGEMM_FLAT_GROUP_BIN(0, SPGEMM_G(SPGEMM_BIN0_ROWS), SPGEMM_BIN0_ROWS, 32)
SPGEMM_FLAT_GROUP_BIN(1, SPGEMM_G(SPGEMM_BIN1_ROWS), SPGEMM_BIN1_ROWS, 64)
SPGEMM_FLAT_GROUP_BIN(2, SPGEMM_G(SPGEMM_BIN2_ROWS), SPGEMM_BIN2_ROWS, 256)
SPGEMM_FLAT_GROUP_BIN(3, SPGEMM_G(SPGEMM_BIN3_ROWS), SPGEMM_BIN3_ROWS, 1024)
extern "C" __global__ void __launch_bounds__(SPGEMM_BLOCK)
    spgemm_fill_bitmap_rows(SPGEMM_SYM_ARGS, u32 ncols, const u32* out_off, u32* ccol, u32* counts) {
    spgemm_fill_bitmap(SPGEMM_SYM_PASS, ncols, out_off, ccol, counts);
}

// The one-pass symbolic phase writes each row's sorted columns at its product-count offset
// (exclusive scan of ub) in a temporary array; this moves them to row_ptr (a warp per row).
extern "C" __global__ void spgemm_move_rows(const u32* __restrict__ src_off, const u32* __restrict__ crp, u32 m,
                                            const u32* __restrict__ tmp, u32* ccol) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 i = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; i < m; i += (gridDim.x * blockDim.x) >> 5) {
        const u32 s0 = src_off[i], d0 = crp[i], n = crp[i + 1] - d0;
        for (u32 t = lane; t < n; t += 32) ccol[d0 + t] = tmp[s0 + t];
    }
}

// ---------------------------------------------------------------------------------------------
// Transpose helpers: the row of every entry (for the stable key sort by column), the column
// histogram (counts per column, atomics: the counts do not depend on the order), and the gather
// of the sorted entries.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void sparse_entry_rows(const u32* __restrict__ rp, u32 m, u32* rows) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)
        for (u32 p = rp[i]; p < rp[i + 1]; ++p) rows[p] = i;
}

extern "C" __global__ void sparse_iota(u32 n, u32* out) {
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) out[p] = p;
}

extern "C" __global__ void sparse_col_counts(const u32* __restrict__ col, u32 nnz, u32* counts) {
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < nnz; p += gridDim.x * blockDim.x)
        atomicAdd(counts + col[p], 1u);
}

#define SPARSE_TYPED(T, S)                                                                                 \
    extern "C" __global__ void sparse_transpose_gather_##S(const u32* __restrict__ perm,                   \
                                                           const u32* __restrict__ rows,                   \
                                                           const T* __restrict__ val, u32 nnz, u32* tcol,  \
                                                           T* tval) {                                      \
        for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < nnz; q += gridDim.x * blockDim.x) {        \
            const u32 p = perm[q];                                                                         \
            tcol[q] = rows[p];                                                                             \
            tval[q] = val[p];                                                                              \
        }                                                                                                  \
    }                                                                                                      \
    /* d[i] = A[i,i] (0 when not stored; the last stored one when repeated). */                            \
    extern "C" __global__ void sparse_diagonal_##S(const u32* __restrict__ rp, const u32* __restrict__ col, \
                                                   const T* __restrict__ val, u32 n, T* d) {               \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {          \
            T v = T(0);                                                                                    \
            for (u32 p = rp[i]; p < rp[i + 1]; ++p)                                                        \
                if (col[p] == i) v = val[p];                                                               \
            d[i] = v;                                                                                      \
        }                                                                                                  \
    }                                                                                                      \
    /* A <- diag(left)·A·diag(right); has_left/has_right select the sides. */                             \
    extern "C" __global__ void sparse_scale_##S(const u32* __restrict__ rp, const u32* __restrict__ col,   \
                                                T* val, u32 m, const T* __restrict__ left,                 \
                                                const T* __restrict__ right, u32 has_left, u32 has_right) { \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {          \
            const T l = has_left ? left[i] : T(1);                                                         \
            for (u32 p = rp[i]; p < rp[i + 1]; ++p) {                                                      \
                T v = val[p];                                                                              \
                if (has_left) v = v * l;                                                                   \
                if (has_right) v = v * right[col[p]];                                                      \
                val[p] = v;                                                                                \
            }                                                                                              \
        }                                                                                                  \
    }
SPARSE_TYPED(float, f32)
SPARSE_TYPED(double, f64)

// C = A + alpha*B for canonical A and B (sorted, unique columns per row): one thread per row
// merges the two rows. Count pass: the union's size per row into counts[i].
extern "C" __global__ void sparse_add_count(const u32* __restrict__ arp, const u32* __restrict__ acol,
                                            const u32* __restrict__ brp, const u32* __restrict__ bcol, u32 m,
                                            u32* __restrict__ counts) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {
        u32 p = arp[i], q = brp[i], c = 0;
        const u32 pe = arp[i + 1], qe = brp[i + 1];
        while (p < pe || q < qe) {
            const u32 ca = p < pe ? acol[p] : 0xffffffffu, cb = q < qe ? bcol[q] : 0xffffffffu;
            p += ca <= cb;
            q += cb <= ca;
            ++c;
        }
        counts[i] = c;
    }
}

// Fill pass at crp[i] (the exclusive scan of the counts): the CPU's rounding, a + round(alpha*b)
// where both are stored (sparse::add sums the duplicate in that order), round(alpha*b) where only B is.
template <typename T>
__device__ __forceinline__ void sparse_add_fill(const u32* __restrict__ arp, const u32* __restrict__ acol,
                                                const T* __restrict__ aval, const u32* __restrict__ brp,
                                                const u32* __restrict__ bcol, const T* __restrict__ bval, T alpha,
                                                u32 m, const u32* __restrict__ crp, u32* __restrict__ ccol,
                                                T* __restrict__ cval) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {
        u32 p = arp[i], q = brp[i], o = crp[i];
        const u32 pe = arp[i + 1], qe = brp[i + 1];
        while (p < pe || q < qe) {
            const u32 ca = p < pe ? acol[p] : 0xffffffffu, cb = q < qe ? bcol[q] : 0xffffffffu;
            T v;
            if (ca < cb) {
                v = aval[p++];
            } else if (cb < ca) {
                v = alpha * bval[q++];
            } else {
                v = spgemm_fma(aval[p++], alpha, bval[q++]);
            }
            ccol[o] = ca < cb ? ca : cb;
            cval[o++] = v;
        }
    }
}
extern "C" __global__ void sparse_add_fill_f32(const u32* arp, const u32* acol, const float* aval, const u32* brp,
                                               const u32* bcol, const float* bval, float alpha, u32 m,
                                               const u32* crp, u32* ccol, float* cval) {
    sparse_add_fill<float>(arp, acol, aval, brp, bcol, bval, alpha, m, crp, ccol, cval);
}
extern "C" __global__ void sparse_add_fill_f64(const u32* arp, const u32* acol, const double* aval, const u32* brp,
                                               const u32* bcol, const double* bval, double alpha, u32 m,
                                               const u32* crp, u32* ccol, double* cval) {
    sparse_add_fill<double>(arp, acol, aval, brp, bcol, bval, alpha, m, crp, ccol, cval);
}
