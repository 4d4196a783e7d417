// Sparse matrix times dense block: Y <- alpha*A*X + beta*Y, CSR A, X and Y dense blocks of kw
// columns (a window of a wider block: the host offsets the pointers and passes the leading
// dimensions). The matrix is read once for all kw columns. Every product is one launch.
//
// 1. spmm_row_*: row-major blocks (kw <= 32). A row of X is kw contiguous values; `lc` lanes
//    read it, each V of them with one vector load (V = 16 bytes / sizeof(T) when the widths
//    allow, else 1), so the lc lanes of a "slot" fetch one entry's X row as whole sectors. A
//    row is summed by a team of slots: slot s takes entries s, s+S, s+2S, ... in order (U
//    loads of col/val, then U of X, in flight at once), and the slots are reduced with xor
//    shuffles. Each block owns a window of rows and sums them with three team sizes, chosen
//    per row from its length alone (so a row's bits do not depend on the block or the order):
//      - a group of `sg` slots (from the mean row length) per row of the window;
//      - rows longer than `lim_group`: a whole warp each (the block's warps share them);
//      - rows longer than `lim_warp`: left to the `long_blocks` extra blocks at the start of
//        the grid (started first: a long row is the launch's longest walk, and the groups'
//        blocks fill the SMs around it), which scan small windows of rows for them, so that long
//        rows close together go to different blocks, and sum each with the whole block (warps
//        reduce by shuffles, then one thread per column adds the warps' sums in warp order).
//        A row longer than 2 * `chunk` is cut into pieces at multiples of `chunk` in the entry
//        index, the pieces (and the uncut rows) of a window spread over the `parts` blocks that
//        scan it, and a row's pieces' sums are added in piece order by whichever block finishes
//        its last piece.
//    A walk's latency is its number of rounds (a col load, then an X load): the teams bound
//    it by a few rounds per row, where a fixed group per row walked a 100-entry row in 12
//    rounds and kept a small matrix's launch waiting for it.
// 2. spmm_col_*: column-major blocks. A group of L lanes per row (L a power of two <= 32, from
//    the mean row length); each lane sums a strided share of the row's entries for SPMM_CW
//    columns at a time, the group reduces with xor shuffles, and the lanes write the SPMM_CW
//    results. Neighbouring rows (neighbouring groups) read neighbouring elements of a column of
//    X when the matrix is banded; on irregular matrices every column is its own gather. Rows
//    longer than `skip` entries are left to the `long_blocks` extra blocks at the start of the
//    same grid: each such block scans a window of rows for long ones, then
//    sums each with all its threads, SPMM_CW columns at a time, reducing in a fixed order
//    (warps by shuffles, then warp 0 over the warps' sums), so the result does not depend on
//    which block found the row.
// 3. spmm_scale_*: Y <- beta*Y (alpha = 0 reads neither A nor X; beta = 0 writes zeros).
//
// Group shuffles use the group's own lane mask: a group's lanes always run the same loop (they
// work on the same row), while different groups of a warp may run different trip counts.
#include "common.cuh"

#ifndef SPMM_THREADS
#error "SPMM_THREADS comes from the Rust side as a -D define (spmm::gpu::THREADS)"
#endif
#ifndef SPMM_CW
#define SPMM_CW 8
#endif

template <int G>
__device__ __forceinline__ u32 group_mask() {
    if (G == 32) return FULL_MASK;
    const u32 wl = threadIdx.x & 31u;
    return ((1u << (G % 32)) - 1u) << (wl & ~(u32)(G - 1)); // G < 32 here
}

template <typename T>
__device__ __forceinline__ void spmm_store(T* y, T alpha, T acc, T beta) {
    *y = (beta == T(0)) ? alpha * acc : alpha * acc + beta * *y;
}

template <typename T, int V>
struct alignas(sizeof(T) * V) SpmmVec {
    T v[V];
};

// This lane's V partial sums of entries [s, e) of a row for slot `slot` of `S` (entries slot,
// slot+S, ... in order); `xoff` is the lane's first column, `act` whether it has columns.
template <typename T, int V, int U>
__device__ __forceinline__ void spmm_rm_walk(const u32* __restrict__ col, const T* __restrict__ val,
                                             const T* __restrict__ x, u32 ldx, u32 s, u32 e,
                                             u32 slot, u32 S, u32 xoff, bool act, T (&acc)[V]) {
    for (u32 p0 = s + slot; p0 < e; p0 += S * U) {
        u32 c[U];
        T v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const u32 p = p0 + u * S;
            c[u] = 0u;
            v[u] = T(0);
            if (p < e) {
                c[u] = col[p];
                v[u] = val[p];
            }
        }
        SpmmVec<T, V> xv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (act && p0 + u * S < e) {
                xv[u] = *reinterpret_cast<const SpmmVec<T, V>*>(x + (u64)c[u] * ldx + xoff);
            } else {
#pragma unroll
                for (int i = 0; i < V; ++i) xv[u].v[i] = T(0);
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int i = 0; i < V; ++i) acc[i] += v[u] * xv[u].v[i];
    }
}

// Adds the partial sums of the slots lc, 2lc, ... apart (lanes of one column set) within a team
// of `span` lanes; every lane ends with its column set's total (the same bits in each).
template <typename T, int V>
__device__ __forceinline__ void spmm_rm_reduce(T (&acc)[V], u32 lc, u32 span, u32 mask) {
    for (u32 o = lc; o < span; o <<= 1)
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] += __shfl_xor_sync(mask, acc[i], o);
}

template <typename T, int V>
__device__ __forceinline__ void spmm_rm_store(T* __restrict__ y, u64 row, u32 ldy, u32 xoff,
                                              u32 kw, T alpha, T beta, const T (&acc)[V]) {
#pragma unroll
    for (int i = 0; i < V; ++i)
        if (xoff + i < kw) spmm_store(&y[row * ldy + xoff + i], alpha, acc[i], beta);
}

// Entries in flight per slot (loads of col/val, then of X, issued before any is used).
#define SPMM_U 8

// The long rows of this block's windows: block `vb` of the `nvb` that share them scans windows
// of `window` rows (spread over the blocks, so that long rows close together go to different
// blocks), collects those of more than `lim` entries into `rows` (in the order the threads find
// them) and calls `sum(rows, n)` with every thread of the block, once per window.
template <typename Sum>
__device__ __forceinline__ void spmm_long_windows(const u32* __restrict__ row_ptr, u32 nrows,
                                                  u32 lim, u32 window, u32 vb, u32 nvb, u32* rows,
                                                  u32& count, Sum sum) {
    for (u64 base = (u64)vb * window; base < nrows; base += (u64)nvb * window) {
        if (threadIdx.x == 0) count = 0;
        __syncthreads();
        const u64 r = base + threadIdx.x;
        if (threadIdx.x < window && r < nrows && row_ptr[r + 1] - row_ptr[r] > lim)
            rows[atomicAdd(&count, 1u)] = (u32)r;
        __syncthreads();
        sum((const u32*)rows, (u32)count);
        __syncthreads(); // every thread has read `count` before it is reset
    }
}

// Rows rows[0..n) summed by the whole block, one piece at a time: every warp's slots walk the
// piece, warps reduce by shuffles, then one thread per column adds the warps' sums in warp order.
// With `chunk` > 0 a row of more than 2 * chunk entries is cut where the entry index crosses a
// multiple of `chunk` (such a row runs past the end of the chunk it starts in, so at most one cut
// row starts in a chunk and at most one runs into it from before). Of the `parts` blocks that
// scan the same windows, the one with `part` = (row + j) mod `parts` sums piece j of a row (an
// uncut row is its piece 0), so that the rows and pieces of a window spread over its blocks. A
// cut row's piece goes to `partial` (slot 2c + 1 for the piece where the row starts in chunk c,
// 2c for a piece that continues the row into chunk c; `kw` values each) and is counted in
// `count[first chunk]`; the block that counts the row's last piece adds the pieces' sums in
// piece order, stores the row and resets the count: the result's bits depend on the matrix and
// `chunk` only, not on which block finishes last.
template <typename T, int V>
__device__ __forceinline__ void spmm_rm_block_rows(const u32* __restrict__ row_ptr,
                                                   const u32* __restrict__ col,
                                                   const T* __restrict__ val,
                                                   const T* __restrict__ x, u32 ldx,
                                                   T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                                   T beta, u32 log_lc, const u32* rows, u32 n,
                                                   T (*warp_sums)[32], u32 chunk, u32 parts,
                                                   u32 part, T* __restrict__ partial,
                                                   u32* __restrict__ count) {
    __shared__ u32 last_piece;
    const u32 lc = 1u << log_lc;
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const u32 xoff = (lane & (lc - 1)) * V;
    const bool act = xoff < kw;
    const u32 sw = 32u >> log_lc;
    for (u32 q = 0; q < n; ++q) {
        const u32 row = rows[q];
        const u32 s = row_ptr[row], e = row_ptr[row + 1];
        const bool cut = chunk && e - s > 2u * chunk;
        const u32 c0 = cut ? s / chunk : 0u;
        const u32 np = cut ? (e - 1u) / chunk - c0 + 1u : 1u;
        for (u32 j = (part + parts - row % parts) % parts; j < np; j += parts) {
            const u64 cs = (u64)(c0 + j) * chunk;
            const u32 ps = (np == 1u || (u64)s > cs) ? s : (u32)cs;
            const u32 pe = (np == 1u || (u64)e < cs + chunk) ? e : (u32)(cs + chunk);
            T acc[V];
#pragma unroll
            for (int i = 0; i < V; ++i) acc[i] = T(0);
            spmm_rm_walk<T, V, SPMM_U>(col, val, x, ldx, ps, pe, warp * sw + (lane >> log_lc),
                                       nwarps * sw, xoff, act, acc);
            spmm_rm_reduce<T, V>(acc, lc, 32u, FULL_MASK);
            if (lane < lc && act) {
#pragma unroll
                for (int i = 0; i < V; ++i)
                    if (xoff + i < 32u) warp_sums[warp][xoff + i] = acc[i];
            }
            __syncthreads();
            T sum = T(0);
            if (threadIdx.x < kw)
                for (u32 w = 0; w < nwarps; ++w) sum += warp_sums[w][threadIdx.x];
            if (np == 1u) {
                if (threadIdx.x < kw) spmm_store(&y[(u64)row * ldy + threadIdx.x], alpha, sum, beta);
                __syncthreads();
                continue;
            }
            if (threadIdx.x < kw) {
                partial[((u64)(c0 + j) * 2u + (j == 0u)) * kw + threadIdx.x] = sum;
                __threadfence(); // the piece's sums are visible before it is counted
            }
            __syncthreads();
            if (threadIdx.x == 0) last_piece = atomicAdd(&count[c0], 1u) == np - 1u;
            __syncthreads();
            if (last_piece) {
                __threadfence();
                if (threadIdx.x < kw) {
                    T total = T(0);
                    for (u32 jj = 0; jj < np; ++jj)
                        total += __ldcg(&partial[((u64)(c0 + jj) * 2u + (jj == 0u)) * kw +
                                                 threadIdx.x]);
                    spmm_store(&y[(u64)row * ldy + threadIdx.x], alpha, total, beta);
                }
                if (threadIdx.x == 0) count[c0] = 0u; // ready for the next launch
            }
            __syncthreads();
        }
    }
}

template <typename T, int V>
__device__ __forceinline__ void spmm_row_body(const u32* __restrict__ row_ptr,
                                              const u32* __restrict__ col,
                                              const T* __restrict__ val, u32 nrows,
                                              const T* __restrict__ x, u32 ldx,
                                              T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                              T beta, u32 log_lc, u32 log_sg, u32 lim_group,
                                              u32 lim_warp, u32 long_blocks, u32 window,
                                              u32 chunk, u32 parts, T* __restrict__ partial,
                                              u32* __restrict__ count) {
    __shared__ u32 warp_rows[SPMM_THREADS], block_rows[SPMM_THREADS];
    __shared__ u32 n_warp_rows, n_block_rows;
    __shared__ T warp_sums[SPMM_THREADS / 32][32];
    const u32 lc = 1u << log_lc, tg = 1u << (log_lc + log_sg);
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const u32 cl = lane & (lc - 1);
    const u32 xoff = cl * V;
    const bool act = xoff < kw;
    if (blockIdx.x < long_blocks) {
        // The rows longer than lim_warp, summed by all the threads of long-row blocks: `parts`
        // blocks scan the same windows, each summing its pieces of the rows found there.
        const u32 part = blockIdx.x % parts;
        spmm_long_windows(row_ptr, nrows, lim_warp, window, blockIdx.x / parts,
                          long_blocks / parts, block_rows, n_block_rows,
                          [&](const u32* rows, u32 n) {
                              spmm_rm_block_rows<T, V>(row_ptr, col, val, x, ldx, y, ldy, kw,
                                                       alpha, beta, log_lc, rows, n, warp_sums,
                                                       chunk, parts, part, partial, count);
                          });
        return;
    }
    if (threadIdx.x == 0) n_warp_rows = 0;
    __syncthreads();
    // Groups: one row of the window each.
    {
        const u64 row = (u64)(blockIdx.x - long_blocks) * (blockDim.x / tg) + threadIdx.x / tg;
        if (row < nrows) {
            const u32 s = row_ptr[row], e = row_ptr[row + 1];
            if (e - s <= lim_group) {
                const u32 tl = threadIdx.x & (tg - 1);
                const u32 mask = tg >= 32 ? FULL_MASK : ((1u << tg) - 1u) << (lane & ~(tg - 1));
                T acc[V];
#pragma unroll
                for (int i = 0; i < V; ++i) acc[i] = T(0);
                spmm_rm_walk<T, V, SPMM_U>(col, val, x, ldx, s, e, tl >> log_lc,
                                                 1u << log_sg, xoff, act, acc);
                spmm_rm_reduce<T, V>(acc, lc, tg, mask);
                if (tl < lc && act) spmm_rm_store<T, V>(y, row, ldy, xoff, kw, alpha, beta, acc);
            } else if ((threadIdx.x & (tg - 1)) == 0 && e - s <= lim_warp) {
                warp_rows[atomicAdd(&n_warp_rows, 1u)] = (u32)row; // longer: the long-row blocks
            }
        }
    }
    __syncthreads();
    // Warps: the window's longer rows, a warp each.
    const u32 nw = n_warp_rows;
    for (u32 q = warp; q < nw; q += nwarps) {
        const u32 row = warp_rows[q];
        const u32 s = row_ptr[row], e = row_ptr[row + 1];
        T acc[V];
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = T(0);
        spmm_rm_walk<T, V, SPMM_U>(col, val, x, ldx, s, e, lane >> log_lc, 32u >> log_lc,
                                        xoff, act, acc);
        spmm_rm_reduce<T, V>(acc, lc, 32u, FULL_MASK);
        if (lane < lc && act) spmm_rm_store<T, V>(y, row, ldy, xoff, kw, alpha, beta, acc);
    }
}

template <typename T, int L>
__device__ __forceinline__ void spmm_col_body(const u32* __restrict__ row_ptr,
                                              const u32* __restrict__ col,
                                              const T* __restrict__ val, u32 nrows,
                                              const T* __restrict__ x, u32 ldx,
                                              T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                              T beta, u32 skip, u32 gb) {
    const u64 tid = (u64)gb * blockDim.x + threadIdx.x;
    const u64 row = tid / L;
    if (row >= nrows) return;
    const u32 lane = threadIdx.x & (L - 1);
    const u32 mask = group_mask<L>();
    const u32 s = row_ptr[row], e = row_ptr[row + 1];
    if (e - s > skip) return; // a long-row block's row (the whole group leaves)
    for (u32 j0 = 0; j0 < kw; j0 += SPMM_CW) {
        T acc[SPMM_CW];
#pragma unroll
        for (int jj = 0; jj < SPMM_CW; ++jj) acc[jj] = T(0);
        for (u32 p = s + lane; p < e; p += L) {
            const u32 c = col[p];
            const T v = val[p];
#pragma unroll
            for (int jj = 0; jj < SPMM_CW; ++jj)
                if (j0 + jj < kw) acc[jj] += v * x[(u64)(j0 + jj) * ldx + c];
        }
#pragma unroll
        for (int jj = 0; jj < SPMM_CW; ++jj)
#pragma unroll
            for (int o = L / 2; o > 0; o >>= 1) acc[jj] += __shfl_xor_sync(mask, acc[jj], o, L);
#pragma unroll
        for (int jj = 0; jj < SPMM_CW; ++jj)
            if ((u32)(jj % L) == lane && j0 + jj < kw)
                spmm_store(&y[(u64)(j0 + jj) * ldy + row], alpha, acc[jj], beta);
    }
}

// Column-major rows of more than `skip` entries, one at a time per block, the block being
// number `vblock` of `nvblocks` that share the rows.
template <typename T>
__device__ __forceinline__ void spmm_long_body(const u32* __restrict__ row_ptr,
                                               const u32* __restrict__ col,
                                               const T* __restrict__ val, u32 nrows,
                                               const T* __restrict__ x, u32 ldx,
                                               T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                               T beta, u32 skip, u32 window,
                                               u32 vblock, u32 nvblocks) {
    __shared__ u32 rows[SPMM_THREADS];
    __shared__ u32 count;
    __shared__ T warp_sums[SPMM_THREADS / 32][SPMM_CW];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    spmm_long_windows(row_ptr, nrows, skip, window, vblock, nvblocks, rows, count,
                      [&](const u32* found_rows, u32 found) {
        for (u32 q = 0; q < found; ++q) {
            const u32 row = found_rows[q];
            const u32 s = row_ptr[row], e = row_ptr[row + 1];
            for (u32 j0 = 0; j0 < kw; j0 += SPMM_CW) {
                T acc[SPMM_CW];
#pragma unroll
                for (int jj = 0; jj < SPMM_CW; ++jj) acc[jj] = T(0);
                for (u32 p = s + threadIdx.x; p < e; p += blockDim.x) {
                    const u32 c = col[p];
                    const T v = val[p];
#pragma unroll
                    for (int jj = 0; jj < SPMM_CW; ++jj)
                        if (j0 + jj < kw)
                            acc[jj] += v * x[(u64)(j0 + jj) * ldx + c];
                }
#pragma unroll
                for (int jj = 0; jj < SPMM_CW; ++jj) {
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) acc[jj] += __shfl_xor_sync(FULL_MASK, acc[jj], o);
                    if (lane == 0) warp_sums[warp][jj] = acc[jj];
                }
                __syncthreads();
                if (threadIdx.x < SPMM_CW && j0 + threadIdx.x < kw) {
                    T sum = T(0);
                    for (u32 w = 0; w < blockDim.x / 32; ++w) sum += warp_sums[w][threadIdx.x];
                    const u32 j = j0 + threadIdx.x;
                    spmm_store(&y[(u64)j * ldy + row], alpha, sum, beta);
                }
                __syncthreads();
            }
        }
    });
}

#define SPMM_COL_SWITCH(T, LOG)                                                                      \
    switch (LOG) {                                                                                 \
    case 0: spmm_col_body<T, 1>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    case 1: spmm_col_body<T, 2>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    case 2: spmm_col_body<T, 4>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    case 3: spmm_col_body<T, 8>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    case 4: spmm_col_body<T, 16>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    default: spmm_col_body<T, 32>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, gb); break; \
    }

// Vector width of the row-major loads: 16 bytes.
#define SPMM_INSTANTIATE(T, SUFFIX, VW)                                                            \
    extern "C" __global__ void __launch_bounds__(SPMM_THREADS) spmm_row_##SUFFIX(                  \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const T* x, u32 ldx, T* y,    \
        u32 ldy, u32 kw, T alpha, T beta, u32 vec, u32 log_lc, u32 log_sg, u32 lim_group,         \
        u32 lim_warp, u32 long_blocks, u32 window, u32 chunk, u32 parts, T* partial,            \
        u32* count) {                                                                              \
        if (vec)                                                                                   \
            spmm_row_body<T, VW>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta,       \
                                 log_lc, log_sg, lim_group, lim_warp, long_blocks, window, chunk, \
                                 parts, partial, count);                                           \
        else                                                                                       \
            spmm_row_body<T, 1>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta,        \
                                log_lc, log_sg, lim_group, lim_warp, long_blocks, window, chunk,  \
                                parts, partial, count);                                            \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SPMM_THREADS) spmm_col_##SUFFIX(                  \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const T* x, u32 ldx, T* y,    \
        u32 ldy, u32 kw, T alpha, T beta, u32 log_group, u32 skip, u32 long_blocks,               \
        u32 window) {                                                                              \
        if (blockIdx.x >= long_blocks) {                                                           \
            const u32 gb = blockIdx.x - long_blocks;                                               \
            SPMM_COL_SWITCH(T, log_group)                                                          \
        } else {                                                                                   \
            spmm_long_body<T>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip,     \
                              window, blockIdx.x, long_blocks);                                    \
        }                                                                                          \
    }                                                                                              \
    extern "C" __global__ void spmm_scale_##SUFFIX(T* y, T beta, u64 n) {                          \
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                            \
             i += (u64)gridDim.x * blockDim.x)                                                     \
            y[i] = (beta == T(0)) ? T(0) : beta * y[i];                                            \
    }

SPMM_INSTANTIATE(float, f32, 4)
SPMM_INSTANTIATE(double, f64, 2)
