// The GPU setup of smoothed-aggregation AMG (src/precond/amg/device.rs): the per-level smoother
// scalings, the Lanczos estimate of rho(D^-1 A), and prolongator smoothing. The graph phases
// (strength, aggregation, tentative prolongator) are in sparse/aggregate.cu and the products in
// sparse/spgemm.cu.
//
// Where the CPU setup (precond/amg/setup.rs) defines a value, the arithmetic here is the same
// operation sequence with explicit round-to-nearest intrinsics (no FMA contraction), so the GPU
// hierarchy equals the CPU one wherever the inputs are equal. The Lanczos vectors are doubles
// (as on the CPU); their dot products are block partial sums in a fixed grid, summed on the
// host in block order, so the estimate is reproducible run to run (not bitwise the CPU's).

#include "common.cuh"

#define AMG_BLOCK 256
#define AMG_DOT_BLOCKS 1024

__device__ __forceinline__ float amg_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double amg_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float amg_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double amg_add(double a, double b) { return __dadd_rn(a, b); }

// SplitMix64's output function (as crate::sparse::splitmix64).
__device__ __forceinline__ u64 amg_mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Per row i: inv_diag = 1/a_ii (0 when a_ii is 0 or not stored), inv_l1 = 1/sum_j |a_ij| summed
// in double in stored order (0 for a zero row), s = sqrt(max(inv_diag, 0)) in double.
template <typename T>
__device__ __forceinline__ void amg_level_scales(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                 const T* __restrict__ val, u32 n, T* __restrict__ inv_diag,
                                                 T* __restrict__ inv_l1, double* __restrict__ s) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        T d = T(0);
        double l1 = 0.0;
        for (u32 k = rp[i]; k < rp[i + 1]; ++k) {
            const T v = val[k];
            if (col[k] == i) d = v;
            l1 = __dadd_rn(l1, fabs((double)v));
        }
        const T id = d != T(0) ? T(1) / d : T(0);
        inv_diag[i] = id;
        inv_l1[i] = l1 > 0.0 ? (T)(1.0 / l1) : T(0);
        const double idd = (double)id;
        s[i] = sqrt(idd > 0.0 ? idd : 0.0);
    }
}

// y_i = s_i * sum_j a_ij * s_j * v_j: the operator D^-1/2 A D^-1/2 of the Lanczos iteration.
// Eight lanes per row, four rows per warp per step; the loop is uniform across the warp.
template <typename T>
__device__ __forceinline__ void amg_lanczos_apply(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                  const T* __restrict__ val, u32 n, const double* __restrict__ s,
                                                  const double* __restrict__ v, double* __restrict__ y) {
    const u32 lane = threadIdx.x & 31, sub = lane & 7;
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 r0 = warp * 4; r0 < n; r0 += nwarps * 4) {
        const u64 i = r0 + (lane >> 3);
        double acc = 0.0;
        if (i < n) {
            for (u32 k = rp[i] + sub; k < rp[i + 1]; k += 8) {
                const u32 c = col[k];
                acc += (double)val[k] * s[c] * v[c];
            }
        }
        acc += __shfl_xor_sync(FULL_MASK, acc, 4);
        acc += __shfl_xor_sync(FULL_MASK, acc, 2);
        acc += __shfl_xor_sync(FULL_MASK, acc, 1);
        if (i < n && sub == 0) y[i] = s[i] * acc;
    }
}

// partials[block] = sum over the block's grid-stride elements of x_i * y_i (fixed grid of
// AMG_DOT_BLOCKS blocks: the host sums the partials in block order).
__device__ __forceinline__ void amg_dot_partials(const double* __restrict__ x, const double* __restrict__ y, u32 n,
                                                 double* __restrict__ partials) {
    __shared__ double sh[AMG_BLOCK / 32];
    double acc = 0.0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += x[i] * y[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int w = 0; w < AMG_BLOCK / 32; ++w) t += sh[w];
        partials[blockIdx.x] = t;
    }
}

extern "C" __global__ void __launch_bounds__(AMG_BLOCK)
    amg_dot(const double* __restrict__ x, const double* __restrict__ y, u32 n, double* __restrict__ partials) {
    amg_dot_partials(x, y, n, partials);
}

// The Lanczos start vector of spectral_radius in setup.rs: (mix(i ^ 0x5EED) >> 11) / 2^53 + 0.5.
extern "C" __global__ void amg_lanczos_start(double* __restrict__ v, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v[i] = (double)(amg_mix64((u64)i ^ 0x5EEDull) >> 11) / 9007199254740992.0 + 0.5;
}

// w <- w - alpha*v - beta*vp
extern "C" __global__ void amg_lanczos_orth(double* __restrict__ w, const double* __restrict__ v,
                                            const double* __restrict__ vp, double alpha, double beta, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        w[i] -= alpha * v[i] + beta * vp[i];
}

// v <- w / beta (v may alias nothing else)
extern "C" __global__ void amg_lanczos_next(double* __restrict__ v, const double* __restrict__ w, double beta, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = w[i] / beta;
}

// v <- v / norm
extern "C" __global__ void amg_scale_double(double* __restrict__ v, double norm, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = v[i] / norm;
}

// pos[k] = where entry k of T sits in the row of the pattern (pp, pcol) (binary search; both
// rows sorted); *bad = the lowest row whose entry is missing (stays 0xffffffff otherwise).
extern "C" __global__ void amg_t_positions(const u32* __restrict__ tp, const u32* __restrict__ tcol, u32 n,
                                           const u32* __restrict__ pp, const u32* __restrict__ pcol,
                                           u32* __restrict__ pos, u32* __restrict__ bad) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        for (u32 k = tp[i]; k < tp[i + 1]; ++k) {
            const u32 c = tcol[k];
            u32 lo = pp[i], hi = pp[i + 1];
            while (lo < hi) {
                const u32 mid = lo + ((hi - lo) >> 1);
                if (pcol[mid] < c) lo = mid + 1; else hi = mid;
            }
            if (lo < pp[i + 1] && pcol[lo] == c) pos[k] = lo;
            else atomicMin(bad, i);
        }
    }
}

// P = (I - w D^-1 A) T on the pattern of A*T, in place of the values of A*T: row i scaled by
// round(-w * inv_diag_i), then T's entries added at their positions (setup.rs:
// smooth_prolongator, the same two roundings per entry).
template <typename T>
__device__ __forceinline__ void amg_smooth(const u32* __restrict__ pp, T* __restrict__ pval, u32 n,
                                           const T* __restrict__ inv_diag, T neg_w, const u32* __restrict__ tp,
                                           const T* __restrict__ tval, const u32* __restrict__ pos) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const T sc = amg_mul(neg_w, inv_diag[i]);
        for (u32 k = pp[i]; k < pp[i + 1]; ++k) pval[k] = amg_mul(pval[k], sc);
        for (u32 k = tp[i]; k < tp[i + 1]; ++k) pval[pos[k]] = amg_add(pval[pos[k]], tval[k]);
    }
}

// out = w * in (the damped-Jacobi smoother's scaling).
template <typename T>
__device__ __forceinline__ void amg_scaled(T* __restrict__ out, const T* __restrict__ in, T w, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = amg_mul(w, in[i]);
}

#define AMG_TYPED(T, S)                                                                                     \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_level_scales_##S(                          \
        const u32* rp, const u32* col, const T* val, u32 n, T* inv_diag, T* inv_l1, double* s) {           \
        amg_level_scales<T>(rp, col, val, n, inv_diag, inv_l1, s);                                          \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_lanczos_apply_##S(                         \
        const u32* rp, const u32* col, const T* val, u32 n, const double* s, const double* v, double* y) { \
        amg_lanczos_apply<T>(rp, col, val, n, s, v, y);                                                     \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_smooth_##S(                                \
        const u32* pp, T* pval, u32 n, const T* inv_diag, T neg_w, const u32* tp, const T* tval,           \
        const u32* pos) {                                                                                   \
        amg_smooth<T>(pp, pval, n, inv_diag, neg_w, tp, tval, pos);                                         \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_scaled_##S(T* out, const T* in, T w, u32 n) { \
        amg_scaled<T>(out, in, w, n);                                                                       \
    }

AMG_TYPED(float, f32)
AMG_TYPED(double, f64)
