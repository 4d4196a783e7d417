// The complex core of the GPU backend (backend::gpu_complex launches them): the vector
// operations with host coefficients, the inner products xᴴy and xᵀy, and GMRES's block
// Gram-Schmidt (all coefficients of a basis in one launch, then one launch that subtracts them).
//
// Reductions are deterministic: a fixed grid writes one partial per block and part (real,
// imaginary), summed in block order (solvers/reduce.cuh's block_sum and grid_sum over the two
// real parts).
#include "common.cuh"
#include "complex.cuh"
#include "solvers/reduce.cuh"

#ifndef SOLVER_THREADS
#error "SOLVER_THREADS must be defined (-D, from the Rust side)"
#endif

// z = a x + b y + c z, each term present when its vector is (x, y non-null; z read only when
// c != 0), summed left to right: axpby, axpbypcz, scal.
template <typename C>
__device__ void clincomb_(C a, const C* x, C b, const C* y, C c, C* z, u32 n) {
    GRID_STRIDE(i, n) {
        C v = czero<C>();
        bool any = false;
        if (x) {
            v = cmul(a, x[i]);
            any = true;
        }
        if (y) {
            const C t = cmul(b, y[i]);
            v = any ? cadd(v, t) : t;
            any = true;
        }
        if (cnonzero(c)) {
            const C t = cmul(c, z[i]);
            v = any ? cadd(v, t) : t;
        }
        z[i] = v;
    }
}

// z = a (x o y) + b z (z read only when b != 0).
template <typename C> __device__ void cvmul_(C a, const C* x, const C* y, C b, C* z, u32 n) {
    GRID_STRIDE(i, n) {
        const C v = cmul(a, cmul(x[i], y[i]));
        z[i] = cnonzero(b) ? cadd(v, cmul(b, z[i])) : v;
    }
}

template <typename C> __device__ void cfill_(C a, C* z, u32 n) { GRID_STRIDE(i, n) z[i] = a; }

// out[0] = xᴴy (conj != 0) or xᵀy, summed per block, then over the blocks in block order.
template <typename C>
__device__ void cdot_(const C* x, const C* y, u32 n, u32 conj, C* out,
                      typename real_of<C>::type* partials, u32* ticket) {
    typedef typename real_of<C>::type R;
    C acc = czero<C>();
    if (conj) {
        GRID_STRIDE(i, n) cfma_conj(acc, x[i], y[i]);
    } else {
        GRID_STRIDE(i, n) cfma(acc, x[i], y[i]);
    }
    R v[2] = {acc.re, acc.im};
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0) out[0] = cmake<C>(v[0], v[1]);
}

// Block Gram-Schmidt, first half: for every basis vector i < cols (blockIdx.y), each of the
// gridDim.x blocks sums v_iᴴw over its grid-stride share and writes its two partials to
// partials[(i * gridDim.x + blockIdx.x) * 2 + part].
template <typename C>
__device__ void cblock_dots_(const u64* basis, const C* w, u32 n,
                             typename real_of<C>::type* partials) {
    typedef typename real_of<C>::type R;
    __shared__ R smem[2][32];
    const C* v = reinterpret_cast<const C*>(basis[blockIdx.y]);
    C acc = czero<C>();
    GRID_STRIDE(e, n) cfma_conj(acc, v[e], w[e]);
    R s[2] = {acc.re, acc.im};
    block_sum<2>(s, smem);
    if (threadIdx.x == 0) {
        R* p = partials + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * 2;
        p[0] = s[0];
        p[1] = s[1];
    }
}

// Second half: block i sums the `parts` partials of basis vector i in block order into coef[i].
template <typename C>
__device__ void cblock_sum_(const typename real_of<C>::type* partials, u32 parts, C* coef) {
    typedef typename real_of<C>::type R;
    __shared__ R smem[2][32];
    const R* p = partials + (size_t)blockIdx.x * parts * 2;
    R s[2] = {0, 0};
    for (u32 b = threadIdx.x; b < parts; b += blockDim.x) {
        s[0] += p[2 * b];
        s[1] += p[2 * b + 1];
    }
    block_sum<2>(s, smem);
    if (threadIdx.x == 0) coef[blockIdx.x] = cmake<C>(s[0], s[1]);
}

// w = w - sum_i coef[i] v_i, over i = 0 .. cols-1 in order.
template <typename C>
__device__ void cblock_update_(const u64* basis, const C* coef, u32 cols, C* w, u32 n) {
    GRID_STRIDE(e, n) {
        C acc = w[e];
        for (u32 i = 0; i < cols; ++i) {
            const C* v = reinterpret_cast<const C*>(basis[i]);
            const C t = cmul(coef[i], v[e]);
            acc.re -= t.re;
            acc.im -= t.im;
        }
        w[e] = acc;
    }
}

#define CBLAS1_ENTRIES(C, SUF)                                                                     \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cvector_lincomb_##SUF(C a, const C* x, C b, const C* y, C c, C* z, u32 n) {                \
        clincomb_<C>(a, x, b, y, c, z, n);                                                         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cvector_vmul_##SUF(C a, const C* x, const C* y, C b, C* z, u32 n) {                        \
        cvmul_<C>(a, x, y, b, z, n);                                                               \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cvector_fill_##SUF(C a, C* z, u32 n) {                                                     \
        cfill_<C>(a, z, n);                                                                        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cvector_dot_##SUF(const C* x, const C* y, u32 n, u32 conj, C* out,                         \
                          real_of<C>::type* partials, u32* ticket) {                               \
        cdot_<C>(x, y, n, conj, out, partials, ticket);                                            \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cblock_dots_##SUF(const u64* basis, const C* w, u32 n, real_of<C>::type* partials) {       \
        cblock_dots_<C>(basis, w, n, partials);                                                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cblock_sum_##SUF(const real_of<C>::type* partials, u32 parts, C* coef) {                   \
        cblock_sum_<C>(partials, parts, coef);                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)                                   \
        cblock_update_##SUF(const u64* basis, const C* coef, u32 cols, C* w, u32 n) {              \
        cblock_update_<C>(basis, coef, cols, w, n);                                                \
    }

CBLAS1_ENTRIES(cfloat, c64)
CBLAS1_ENTRIES(cdouble, c128)
