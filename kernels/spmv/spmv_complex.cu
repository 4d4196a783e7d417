// Complex CSR SpMV, y <- alpha*A*x + beta*y, for interleaved complex values (re, im: C99
// _Complex, CuPy's complex64/complex128, cuSPARSE's CUDA_C_32F/CUDA_C_64F). Host side:
// src/spmv/gpu/complex.rs, which picks the kernel per matrix (`Auto`).
//
// The mappings of rows to threads:
//  - spmv_crows_*: one thread per row;
//  - spmv_cwarpW_*: W lanes per row (W = 8 or 32), strided over the row's entries, then a
//    shuffle reduction of the real and imaginary parts (longer or uneven rows);
//  - spmv_cwarp4_* / spmv_cwarp2_*: 4 lanes with 2 entries each, or 2 lanes with 4 entries each,
//    every load of a step issued before the first product (short rows: stencils, meshes). A
//    lane with several independent loads in flight is what the 8-lane kernel lacks there: on an
//    H100 the c128 7-point stencil (10^6 rows) ran at 59 % of DRAM throughput with 8 lanes and
//    one entry each (30.8 cycles per issued instruction) and at 80 % with 4 lanes and two.
// beta = 0 does not read y (BLAS's rule); alpha = 0 is handled on the host.

#include "common.cuh"
#include "complex.cuh"

// alpha*sum + beta*y[r], y not read when beta = 0.
template <typename C>
__device__ __forceinline__ void store_row(C* y, u32 r, C sum, C alpha, C beta) {
    C v = cmul(alpha, sum);
    if (beta.re != 0 || beta.im != 0) {
        const C old = y[r];
        cfma(v, beta, old);
    }
    y[r] = v;
}

template <typename C>
__device__ __forceinline__ void crows(const u32* __restrict__ row_ptr, const u32* __restrict__ col,
                                      const C* __restrict__ val, const C* __restrict__ x,
                                      C* __restrict__ y, C alpha, C beta, u32 nrows) {
    const u32 r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrows) return;
    const u32 a = __ldg(row_ptr + r), b = __ldg(row_ptr + r + 1);
    C sum;
    sum.re = 0;
    sum.im = 0;
    for (u32 k = a; k < b; ++k) cfma(sum, ldg_c(val + k), ldg_c(x + __ldg(col + k)));
    store_row(y, r, sum, alpha, beta);
}

// How a row's entries (column index and value) are read: through the read-only cache, or
// streamed (read once: evict-first, keeping L2 for x).
struct EntriesCached {
    static __device__ __forceinline__ u32 col(const u32* p) { return __ldg(p); }
    template <typename C> static __device__ __forceinline__ C val(const C* p) { return ldg_c(p); }
};
struct EntriesStreamed {
    static __device__ __forceinline__ u32 col(const u32* p) { return __ldcs(p); }
    template <typename C> static __device__ __forceinline__ C val(const C* p) { return ldcs_c(p); }
};

// W lanes per row, each with P entries of a step in flight: lane l of a step starting at k0 takes
// entries k0 + l, k0 + l + W, ..., so each load instruction of the group reads W consecutive
// entries (P = 1: lane l takes every W-th entry from l). The row is summed in a fixed order
// (deterministic run to run). With P > 1 a lane past the row's end adds 0·x[0], which keeps the
// P loads of a step unconditional; with P = 1 it adds nothing.
template <typename C, int W, int P, typename L>
__device__ __forceinline__ void cwarp(const u32* __restrict__ row_ptr, const u32* __restrict__ col,
                                      const C* __restrict__ val, const C* __restrict__ x,
                                      C* __restrict__ y, C alpha, C beta, u32 nrows) {
    const u32 g = (u32)(((unsigned long long)blockIdx.x * blockDim.x + threadIdx.x) / W);
    const u32 lane = threadIdx.x % W;
    // Whole groups leave together, so the shuffles below see all W lanes of a group.
    if (g >= nrows) return;
    const u32 a = __ldg(row_ptr + g), b = __ldg(row_ptr + g + 1);
    C sum = czero<C>();
    for (u32 k0 = a; k0 < b; k0 += W * P) {
        if (P == 1 && k0 + lane >= b) break;
        u32 c[P];
        C v[P];
#pragma unroll
        for (int i = 0; i < P; ++i) {
            const u32 k = k0 + lane + (u32)i * W;
            const bool in = k < b;
            c[i] = in ? L::col(col + k) : 0u;
            v[i] = in ? L::template val<C>(val + k) : czero<C>();
        }
        C xv[P];
#pragma unroll
        for (int i = 0; i < P; ++i) xv[i] = ldg_c(x + c[i]);
#pragma unroll
        for (int i = 0; i < P; ++i) cfma(sum, v[i], xv[i]);
    }
    const unsigned mask = (0xffffffffu >> (32 - W)) << (threadIdx.x & 31u & ~(W - 1u));
#pragma unroll
    for (int o = W / 2; o > 0; o /= 2) {
        sum.re += __shfl_down_sync(mask, sum.re, o, W);
        sum.im += __shfl_down_sync(mask, sum.im, o, W);
    }
    if (lane == 0) store_row(y, g, sum, alpha, beta);
}

// An entry point NAME(row_ptr, col, val, x, y, alpha, beta, nrows) of the row mapping given after
// C (a template with its arguments).
#define SPMV_COMPLEX_ENTRY(NAME, C, ...)                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                              \
        NAME(const u32* __restrict__ row_ptr, const u32* __restrict__ col,                         \
             const C* __restrict__ val, const C* __restrict__ x, C* __restrict__ y, C alpha,       \
             C beta, u32 nrows) {                                                                  \
        __VA_ARGS__(row_ptr, col, val, x, y, alpha, beta, nrows);                                  \
    }

#define SPMV_COMPLEX_ENTRIES(C, SUFFIX)                                                            \
    SPMV_COMPLEX_ENTRY(spmv_crows_##SUFFIX, C, crows<C>)                                           \
    SPMV_COMPLEX_ENTRY(spmv_cwarp8_##SUFFIX, C, cwarp<C, 8, 1, EntriesCached>)                     \
    SPMV_COMPLEX_ENTRY(spmv_cwarp32_##SUFFIX, C, cwarp<C, 32, 1, EntriesCached>)                   \
    SPMV_COMPLEX_ENTRY(spmv_cwarp4_##SUFFIX, C, cwarp<C, 4, 2, EntriesStreamed>)                   \
    SPMV_COMPLEX_ENTRY(spmv_cwarp2_##SUFFIX, C, cwarp<C, 2, 4, EntriesStreamed>)                   \
    extern "C" __global__ void spmv_cscale_##SUFFIX(C* y, C beta, u32 n) {                         \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {  \
            C v;                                                                                   \
            v.re = 0;                                                                              \
            v.im = 0;                                                                              \
            if (beta.re != 0 || beta.im != 0) v = cmul(beta, y[i]);                                \
            y[i] = v;                                                                              \
        }                                                                                          \
    }

SPMV_COMPLEX_ENTRIES(cfloat, c64)
SPMV_COMPLEX_ENTRIES(cdouble, c128)
