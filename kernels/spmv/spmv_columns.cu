// The SpMV of one CSR matrix applied to several separate vectors in one launch:
// y_j <- alpha*A*x_j + beta*y_j for up to SPMVC_MAX columns, each column its own allocation
// (the solvers with several right-hand sides keep one vector per column). The matrix is read
// once for all columns of the launch.
//
// spmv_columns_*: the scheme of the column-major SpMM kernel. A group of L lanes per row (L a
// power of two <= 32, from the mean row length); each lane sums a strided share of the row's
// entries for SPMVC_CW columns at a time, the group reduces with xor shuffles, and the lanes
// write the SPMVC_CW results. A grid with gridDim.y > 1 splits the columns' groups of SPMVC_CW
// between its rows of blocks (a small matrix then fills more SMs; a column's sums do not change).
// The column pointers travel by value in the kernel's parameters (SPMVC_MAX input and output
// pointers), so a launch needs no upload and can be captured.
#include "common.cuh"

// SPMVC_THREADS, SPMVC_MAX (the pointer table's size, which the Rust side's parameter struct
// mirrors) and SPMVC_CW (columns per pass) are -D defines from the Rust side (spmv::gpu::columns).
#if !defined(SPMVC_THREADS) || !defined(SPMVC_MAX)
#error "SPMVC_THREADS and SPMVC_MAX come from the Rust side as -D defines (spmv::gpu::columns)"
#endif
#ifndef SPMVC_CW
#error "SPMVC_CW comes from the Rust side as a -D define (spmv::gpu::columns)"
#endif

template <typename T>
struct ColumnPtrs {
    const T* x[SPMVC_MAX];
    T* y[SPMVC_MAX];
};

template <int G>
__device__ __forceinline__ u32 spmvc_group_mask() {
    if (G == 32) return FULL_MASK;
    const u32 wl = threadIdx.x & 31u;
    return ((1u << (G % 32)) - 1u) << (wl & ~(u32)(G - 1)); // G < 32 here
}

template <typename T, int L>
__device__ __forceinline__ void spmv_columns_body(const u32* __restrict__ row_ptr,
                                                  const u32* __restrict__ col,
                                                  const T* __restrict__ val, u32 nrows,
                                                  const ColumnPtrs<T>& p, u32 kw, T alpha,
                                                  T beta) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    const u64 row = tid / L;
    if (row >= nrows) return; // the whole group leaves together (L divides the warp)
    const u32 lane = threadIdx.x & (L - 1);
    const u32 mask = spmvc_group_mask<L>();
    const u32 s = row_ptr[row], e = row_ptr[row + 1];
    for (u32 j0 = blockIdx.y * SPMVC_CW; j0 < kw; j0 += gridDim.y * SPMVC_CW) {
        const T* xs[SPMVC_CW];
#pragma unroll
        for (int jj = 0; jj < SPMVC_CW; ++jj) xs[jj] = (j0 + jj < kw) ? p.x[j0 + jj] : p.x[0];
        T acc[SPMVC_CW];
#pragma unroll
        for (int jj = 0; jj < SPMVC_CW; ++jj) acc[jj] = T(0);
        for (u32 q = s + lane; q < e; q += L) {
            const u32 c = col[q];
            const T v = val[q];
#pragma unroll
            for (int jj = 0; jj < SPMVC_CW; ++jj)
                if (j0 + jj < kw) acc[jj] += v * xs[jj][c];
        }
#pragma unroll
        for (int jj = 0; jj < SPMVC_CW; ++jj)
#pragma unroll
            for (int o = L / 2; o > 0; o >>= 1) acc[jj] += __shfl_xor_sync(mask, acc[jj], o, L);
#pragma unroll
        for (int jj = 0; jj < SPMVC_CW; ++jj)
            if ((u32)(jj % L) == lane && j0 + jj < kw) {
                T* y = p.y[j0 + jj] + row;
                *y = (beta == T(0)) ? alpha * acc[jj] : alpha * acc[jj] + beta * *y;
            }
    }
}

#define SPMVC_SWITCH(T, LOG)                                                                     \
    switch (LOG) {                                                                               \
    case 0: spmv_columns_body<T, 1>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;       \
    case 1: spmv_columns_body<T, 2>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;       \
    case 2: spmv_columns_body<T, 4>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;       \
    case 3: spmv_columns_body<T, 8>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;       \
    case 4: spmv_columns_body<T, 16>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;      \
    default: spmv_columns_body<T, 32>(row_ptr, col, val, nrows, p, kw, alpha, beta); break;     \
    }

#define SPMVC_INSTANTIATE(T, SUFFIX)                                                             \
    extern "C" __global__ void __launch_bounds__(SPMVC_THREADS) spmv_columns_##SUFFIX(           \
        const u32* row_ptr, const u32* col, const T* val, u32 nrows, const ColumnPtrs<T> p,     \
        u32 kw, T alpha, T beta, u32 log_group) {                                                \
        SPMVC_SWITCH(T, log_group)                                                               \
    }

SPMVC_INSTANTIATE(float, f32)
SPMVC_INSTANTIATE(double, f64)
