// Sparse matrix times dense block: Y <- alpha*A*X + beta*Y, CSR A, X and Y dense blocks of kw
// columns (a window of a wider block: the host offsets the pointers and passes the leading
// dimensions). The matrix is read once for all kw columns.
//
// 1. spmm_row_*: row-major blocks. A group of G lanes (G a power of two >= kw, <= 32) per row;
//    lane j owns column j. The group loads G consecutive entries of its row at once (one per
//    lane, coalesced) and hands them round with shuffles; for each entry every lane reads
//    X[c][j], so the group's reads of X are one contiguous run of kw values (whole sectors).
// 2. spmm_col_*: column-major blocks. A group of L lanes per row (L a power of two <= 32, from
//    the mean row length); each lane sums a strided share of the row's entries for SPMM_CW
//    columns at a time, the group reduces with xor shuffles, and the lanes write the SPMM_CW
//    results. Neighbouring rows (neighbouring groups) read neighbouring elements of a column of
//    X when the matrix is banded; on irregular matrices every column is its own gather.
// 3. spmm_long_*: rows longer than `skip` entries, which the two kernels above leave alone (a
//    group of at most 32 lanes would sum such a row while the rest of the device idles): each
//    block scans a window of rows (at most a block's threads; smaller where the matrix has few
//    rows, so that they spread over more blocks) for long ones, then sums each with all its threads,
//    SPMM_CW columns at a time, reducing in a fixed order (warps by shuffles, then warp 0 over
//    the warps' sums), so the result does not depend on which block found the row.
// 4. spmm_scale_*: Y <- beta*Y (alpha = 0 reads neither A nor X; beta = 0 writes zeros).
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

template <typename T, int G>
__device__ __forceinline__ void spmm_row_body(const u32* __restrict__ row_ptr,
                                              const u32* __restrict__ col,
                                              const T* __restrict__ val, u32 nrows,
                                              const T* __restrict__ x, u32 ldx,
                                              T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                              T beta, u32 skip) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 row = tid / G;
    if (row >= nrows) return; // the whole group leaves together (G divides the warp)
    const u32 lane = threadIdx.x & (G - 1);
    const u32 mask = group_mask<G>();
    const bool active = lane < kw;
    const u32 s = row_ptr[row], e = row_ptr[row + 1];
    if (e - s > skip) return; // spmm_long's row (the whole group leaves)
    T acc0 = T(0), acc1 = T(0);
    for (u32 base = s; base < e; base += G) {
        const u32 p = base + lane;
        u32 c = 0;
        T v = T(0);
        if (p < e) {
            c = col[p];
            v = val[p];
        }
        const u32 cnt = min(e - base, (u32)G);
#pragma unroll
        for (int t = 0; t < G; ++t) {
            if ((u32)t < cnt) { // uniform within the group
                const u32 ct = __shfl_sync(mask, c, t, G);
                const T vt = __shfl_sync(mask, v, t, G);
                if (active) {
                    const T xv = x[(u64)ct * ldx + lane];
                    if (t & 1) acc1 += vt * xv; else acc0 += vt * xv;
                }
            }
        }
    }
    if (active) spmm_store(&y[row * ldy + lane], alpha, acc0 + acc1, beta);
}

template <typename T, int L>
__device__ __forceinline__ void spmm_col_body(const u32* __restrict__ row_ptr,
                                              const u32* __restrict__ col,
                                              const T* __restrict__ val, u32 nrows,
                                              const T* __restrict__ x, u32 ldx,
                                              T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                              T beta, u32 skip) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 row = tid / L;
    if (row >= nrows) return;
    const u32 lane = threadIdx.x & (L - 1);
    const u32 mask = group_mask<L>();
    const u32 s = row_ptr[row], e = row_ptr[row + 1];
    if (e - s > skip) return; // spmm_long's row (the whole group leaves)
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

// Rows of more than `skip` entries, one at a time per block; `rowmajor` selects the layout of X
// and Y (element (i, j) at i*ld + j, or at j*ld + i).
template <typename T>
__device__ __forceinline__ void spmm_long_body(const u32* __restrict__ row_ptr,
                                               const u32* __restrict__ col,
                                               const T* __restrict__ val, u32 nrows,
                                               const T* __restrict__ x, u32 ldx,
                                               T* __restrict__ y, u32 ldy, u32 kw, T alpha,
                                               T beta, u32 skip, u32 window, bool rowmajor) {
    __shared__ u32 rows[SPMM_THREADS];
    __shared__ u32 count;
    __shared__ T warp_sums[SPMM_THREADS / 32][SPMM_CW];
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (u64 base = (u64)blockIdx.x * window; base < nrows; base += (u64)gridDim.x * window) {
        if (threadIdx.x == 0) count = 0;
        __syncthreads();
        const u64 r = base + threadIdx.x;
        if (threadIdx.x < window && r < nrows && row_ptr[r + 1] - row_ptr[r] > skip)
            rows[atomicAdd(&count, 1u)] = (u32)r;
        __syncthreads();
        const u32 found = count;
        for (u32 q = 0; q < found; ++q) {
            const u32 row = rows[q];
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
                            acc[jj] += v * (rowmajor ? x[(u64)c * ldx + j0 + jj]
                                                     : x[(u64)(j0 + jj) * ldx + c]);
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
                    spmm_store(rowmajor ? &y[(u64)row * ldy + j] : &y[(u64)j * ldy + row], alpha, sum,
                               beta);
                }
                __syncthreads();
            }
        }
    }
}

#define SPMM_SWITCH(T, BODY, LOG)                                                                     \
    switch (LOG) {                                                                                 \
    case 0: BODY<T, 1>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;          \
    case 1: BODY<T, 2>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;          \
    case 2: BODY<T, 4>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;          \
    case 3: BODY<T, 8>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;          \
    case 4: BODY<T, 16>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;         \
    default: BODY<T, 32>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip); break;        \
    }

#define SPMM_INSTANTIATE(T, SUFFIX)                                                                \
    extern "C" __global__ void __launch_bounds__(SPMM_THREADS) spmm_row_##SUFFIX(                  \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const T* x, u32 ldx, T* y,    \
        u32 ldy, u32 kw, T alpha, T beta, u32 log_group, u32 skip) {                               \
        SPMM_SWITCH(T, spmm_row_body, log_group)                                                      \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SPMM_THREADS) spmm_col_##SUFFIX(                  \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const T* x, u32 ldx, T* y,    \
        u32 ldy, u32 kw, T alpha, T beta, u32 log_group, u32 skip) {                               \
        SPMM_SWITCH(T, spmm_col_body, log_group)                                                      \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SPMM_THREADS) spmm_long_##SUFFIX(                 \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const T* x, u32 ldx, T* y,    \
        u32 ldy, u32 kw, T alpha, T beta, u32 skip, u32 window, u32 rowmajor) {                    \
        spmm_long_body<T>(row_ptr, col, val, nrows, x, ldx, y, ldy, kw, alpha, beta, skip, window, \
                          rowmajor != 0);                                                          \
    }                                                                                              \
    extern "C" __global__ void spmm_scale_##SUFFIX(T* y, T beta, u64 n) {                          \
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;                            \
             i += (u64)gridDim.x * blockDim.x)                                                     \
            y[i] = (beta == T(0)) ? T(0) : beta * y[i];                                            \
    }

SPMM_INSTANTIATE(float, f32)
SPMM_INSTANTIATE(double, f64)
