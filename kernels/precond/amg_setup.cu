// The GPU setup of smoothed-aggregation AMG (src/precond/amg/device.rs): the per-level smoother
// scalings, the Lanczos estimate of rho(D^-1 A), and prolongator smoothing. The graph phases
// (strength, aggregation, tentative prolongator) are in sparse/aggregate.cu and the products in
// sparse/spgemm.cu.
//
// Where the CPU setup (precond/amg/setup.rs) defines a value, the arithmetic here is the same
// operation sequence with explicit round-to-nearest intrinsics (no FMA contraction), so the GPU
// hierarchy equals the CPU one wherever the inputs are equal. The Lanczos vectors are doubles
// (as on the CPU); their dot products are block partial sums in a fixed grid, summed by the last
// block to finish in block order, so the estimate is reproducible run to run (not bitwise the
// CPU's). The Lanczos scalars (alpha, beta, the step count, a stop flag, rho) stay in a small
// device array, so the whole estimate is queued without a host round trip; rho is the largest
// |eigenvalue| of the tridiagonal matrix by Sturm bisection in one thread, and prolongator
// smoothing reads it from there.

#include "common.cuh"

// Shared with src/precond/amg/device.rs (KernelSource::constants, passed as -D): threads per
// block, the most blocks of a reduction, and the Lanczos scalars' slots after alpha and beta.
#ifndef AMG_BLOCK
#error "AMG_BLOCK must be defined by the host (KernelSource::constants)"
#endif
#ifndef AMG_APPLY_BLOCKS
#error "AMG_APPLY_BLOCKS must be defined by the host (KernelSource::constants)"
#endif
#ifndef AMG_DOT_BLOCKS
#error "AMG_DOT_BLOCKS must be defined by the host (KernelSource::constants)"
#endif
#if !defined(AMG_SC_M_SLOT) || !defined(AMG_SC_STOP_SLOT) || !defined(AMG_SC_NV_SLOT) || \
    !defined(AMG_SC_RHO_SLOT) || !defined(AMG_SC_SLOTS)
#error "the AMG_SC_* slots must be defined by the host (KernelSource::constants)"
#endif

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
                                           const T* __restrict__ inv_diag, double omega,
                                           const double* __restrict__ rho, const u32* __restrict__ tp,
                                           const T* __restrict__ tval, const u32* __restrict__ pos) {
    // The host setup's T::of_f64(-(omega / rho)).
    const T neg_w = (T)(-__ddiv_rn(omega, *rho));
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const T sc = amg_mul(neg_w, inv_diag[i]);
        for (u32 k = pp[i]; k < pp[i + 1]; ++k) pval[k] = amg_mul(pval[k], sc);
        for (u32 k = tp[i]; k < tp[i + 1]; ++k) pval[pos[k]] = amg_add(pval[pos[k]], tval[k]);
    }
}

// P = (I - omega/rho * D^-1 A) T on P's known pattern (pp, pcol: the pattern of A*T), in one
// pass that reads A, T and D^-1: a group of G lanes per row i accumulates (A*T)_ik in row i of
// pval — for each entry a_ij of A's row in stored order, the lanes take the entries of T's row j
// (one each, G at a time) and add a_ij * t_jc at c's position (binary search in P's sorted row),
// with a group barrier between consecutive j: every entry is the sum of its products in A's row
// order, rounded as round(acc + round(a * t)) — the SpGEMM's and the CPU's order and rounding.
// Then the row is scaled by -omega/rho * d_i^-1 and T's row added at tpos, as amg_smooth does
// with the product's values; with rpos, the row is also written into R = P^T's values (where
// each entry of P sits in R). G: the level's candidates' count rounded up to a power of two
// (2 to 32). A product whose column is not in the row (never, for the pattern of A*T) is
// skipped.
template <typename T, int G>
__device__ __forceinline__ void amg_smooth_fused(const u32* __restrict__ arp, const u32* __restrict__ acol,
                                                 const T* __restrict__ aval, u32 n,
                                                 const u32* __restrict__ tp, const u32* __restrict__ tcol,
                                                 const T* __restrict__ tval, const u32* __restrict__ tpos,
                                                 const u32* __restrict__ pp, const u32* __restrict__ pcol,
                                                 T* __restrict__ pval, const T* __restrict__ inv_diag,
                                                 double omega, const double* __restrict__ rho,
                                                 const u32* __restrict__ rpos, T* __restrict__ rval) {
    const T neg_w = (T)(-__ddiv_rn(omega, *rho));
    const u32 lane = threadIdx.x & (G - 1);
    const unsigned gmask = G == 32 ? FULL_MASK : (((1u << G) - 1u) << ((threadIdx.x & 31u) & ~(u32)(G - 1)));
    const u32 stride = gridDim.x * (blockDim.x / G);
    for (u32 i = blockIdx.x * (blockDim.x / G) + threadIdx.x / G; i < n; i += stride) {
        const u32 p0 = pp[i], p1 = pp[i + 1];
        for (u32 k = p0 + lane; k < p1; k += G) pval[k] = (T)0;
        __syncwarp(gmask);
        for (u32 e = arp[i]; e < arp[i + 1]; ++e) {
            const u32 j = acol[e];
            const T a = aval[e];
            for (u32 q = tp[j] + lane; q < tp[j + 1]; q += G) {
                const u32 c = tcol[q];
                u32 lo = p0, hi = p1;
                while (lo < hi) {
                    const u32 mid = lo + ((hi - lo) >> 1);
                    if (pcol[mid] < c) lo = mid + 1; else hi = mid;
                }
                if (lo < p1 && pcol[lo] == c) pval[lo] = amg_add(pval[lo], amg_mul(a, tval[q]));
            }
            __syncwarp(gmask);
        }
        const T sc = amg_mul(neg_w, inv_diag[i]);
        for (u32 k = p0 + lane; k < p1; k += G) pval[k] = amg_mul(pval[k], sc);
        __syncwarp(gmask);
        for (u32 q = tp[i] + lane; q < tp[i + 1]; q += G) pval[tpos[q]] = amg_add(pval[tpos[q]], tval[q]);
        if (rpos != nullptr) {
            __syncwarp(gmask);
            for (u32 k = p0 + lane; k < p1; k += G) rval[rpos[k]] = pval[k];
        }
        __syncwarp(gmask);
    }
}

// out = w * in (the damped-Jacobi smoother's scaling).
template <typename T>
__device__ __forceinline__ void amg_scaled(T* __restrict__ out, const T* __restrict__ in, T w, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = amg_mul(w, in[i]);
}

// ---- The Lanczos estimate without host round trips -------------------------------------------
//
// scal (doubles, 2*steps + AMG_SC_SLOTS): alpha[0..steps), beta[0..steps), then the number of
// alphas, the stop flag, |v0| and rho (at the AMG_SC_*_SLOT offsets). Each reduction kernel writes its block's partial, and the last block
// to arrive (a ticket counter, reset by that block for the next kernel) sums the partials in
// block order with one warp (lane l takes blocks l, l+32, ...; then a fixed shuffle tree).

#define AMG_SC_M(steps) (2 * (steps) + AMG_SC_M_SLOT)
#define AMG_SC_STOP(steps) (2 * (steps) + AMG_SC_STOP_SLOT)
#define AMG_SC_NV(steps) (2 * (steps) + AMG_SC_NV_SLOT)
#define AMG_SC_RHO(steps) (2 * (steps) + AMG_SC_RHO_SLOT)

// The block's sum of acc (every thread's value) in thread 0; a fixed order.
__device__ __forceinline__ double amg_block_total(double acc) {
    __shared__ double sh[AMG_BLOCK / 32];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = acc;
    __syncthreads();
    double t = 0.0;
    if (threadIdx.x == 0)
        for (int w = 0; w < AMG_BLOCK / 32; ++w) t += sh[w];
    return t;
}

// Writes the block's total; true (in every thread of the block) for the last block to finish,
// whose warp 0 then reads every partial.
__device__ __forceinline__ bool amg_arrive(double total, double* partials, u32* ticket) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = total;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    return last;
}

// In the last block: the sum of partials[0..gridDim.x) in a fixed order, in lane 0 of warp 0
// (the other threads return 0); resets the ticket.
__device__ __forceinline__ double amg_sum_partials(const double* partials, u32* ticket) {
    double t = 0.0;
    if (threadIdx.x < 32) {
        __threadfence();
        for (u32 b = threadIdx.x; b < gridDim.x; b += 32) t += __ldcg(partials + b);
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(FULL_MASK, t, o);
        if (threadIdx.x == 0) *ticket = 0;
    }
    return threadIdx.x == 0 ? t : 0.0;
}

// In the last block, all of its threads: the sum of partials[0..gridDim.x) in a fixed order (each
// thread a strided share, then the block's tree), in thread 0 (the others return 0); resets the
// ticket. For grids too large for one warp to read.
__device__ __forceinline__ double amg_sum_partials_block(const double* partials, u32* ticket) {
    __threadfence();
    double t = 0.0;
    for (u32 b = threadIdx.x; b < gridDim.x; b += blockDim.x) t += __ldcg(partials + b);
    t = amg_block_total(t);
    if (threadIdx.x == 0) *ticket = 0;
    return t;
}

// The start vector (as amg_lanczos_start) and |v|^2 -> scal[NV] = |v|; clears the scalars.
extern "C" __global__ void __launch_bounds__(AMG_BLOCK)
    amg_lanczos_start_dot(double* __restrict__ v, u32 n, double* partials, u32* ticket, double* scal, u32 steps) {
    double acc = 0.0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double x = (double)(amg_mix64((u64)i ^ 0x5EEDull) >> 11) / 9007199254740992.0 + 0.5;
        v[i] = x;
        acc += x * x;
    }
    const double tot = amg_block_total(acc);
    if (amg_arrive(tot, partials, ticket)) {
        const double s = amg_sum_partials(partials, ticket);
        if (threadIdx.x == 0) {
            for (u32 j = 0; j < 2 * steps + AMG_SC_SLOTS; ++j) scal[j] = 0.0;
            scal[AMG_SC_NV(steps)] = sqrt(s);
        }
    }
}

// v <- v / |v|
extern "C" __global__ void amg_lanczos_normalize(double* __restrict__ v, u32 n, const double* __restrict__ scal,
                                                 u32 steps) {
    const double nv = scal[AMG_SC_NV(steps)];
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = v[i] / nv;
}

// Step k: y = D^-1/2 A D^-1/2 v and alpha[k] = y.v (nothing once stopped).
//
// A group of `lanes` threads (a power of two up to 32, from the level's mean row length) per row,
// `32 / lanes` rows per warp per pass; the pass loop is uniform across the warp (the shuffles).
// Each lane issues the loads of up to AMG_APPLY_UNROLL of its entries before the first
// multiply-add, so a 7-point row (one lane) or a 27-point row (four lanes) has all its loads in
// flight, as the SpMV's row kernel does: the latency of the row pointer -> column -> gather
// chain is paid once per row instead of once per entry (8 lanes per row with one entry each left
// a stencil level at a third of the SpMV's bandwidth). Each lane sums its entries left to right,
// then the group's tree: a fixed order, reproducible run to run. Launched on up to
// AMG_APPLY_BLOCKS blocks.
#define AMG_APPLY_UNROLL 8
template <typename T>
__device__ __forceinline__ void amg_lanczos_apply_dot(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                      const T* __restrict__ val, u32 n, const double* __restrict__ s,
                                                      const double* __restrict__ v, double* __restrict__ y,
                                                      double* partials, u32* ticket, double* scal, u32 steps, u32 k,
                                                      u32 lanes) {
    if (scal[AMG_SC_STOP(steps)] != 0.0) return;
    const u32 lane = threadIdx.x & 31, sub = lane & (lanes - 1);
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 nwarps = ((u64)gridDim.x * blockDim.x) >> 5;
    const u64 rows_per_warp = 32 / lanes;
    double dot = 0.0;
    for (u64 r0 = warp * rows_per_warp; r0 < n; r0 += nwarps * rows_per_warp) {
        const u64 i = r0 + lane / lanes;
        double acc = 0.0;
        if (i < n) {
            const u64 end = __ldg(rp + i + 1);
            u64 p = (u64)__ldg(rp + i) + sub;
            for (; p + (u64)(AMG_APPLY_UNROLL - 1) * lanes < end; p += (u64)AMG_APPLY_UNROLL * lanes) {
                u32 c[AMG_APPLY_UNROLL];
                T a[AMG_APPLY_UNROLL];
#pragma unroll
                for (int j = 0; j < AMG_APPLY_UNROLL; ++j) {
                    c[j] = __ldg(col + p + (u64)j * lanes);
                    a[j] = __ldg(val + p + (u64)j * lanes);
                }
#pragma unroll
                for (int j = 0; j < AMG_APPLY_UNROLL; ++j) acc += (double)a[j] * __ldg(s + c[j]) * __ldg(v + c[j]);
            }
            if (p < end) {
                u32 c[AMG_APPLY_UNROLL - 1];
                T a[AMG_APPLY_UNROLL - 1];
#pragma unroll
                for (int j = 0; j < AMG_APPLY_UNROLL - 1; ++j) {
                    const u64 q = p + (u64)j * lanes;
                    c[j] = q < end ? __ldg(col + q) : 0u;
                    a[j] = q < end ? __ldg(val + q) : T(0);
                }
#pragma unroll
                for (int j = 0; j < AMG_APPLY_UNROLL - 1; ++j)
                    if (p + (u64)j * lanes < end) acc += (double)a[j] * __ldg(s + c[j]) * __ldg(v + c[j]);
            }
        }
        for (u32 o = lanes >> 1; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
        if (i < n && sub == 0) {
            const double yi = s[i] * acc;
            y[i] = yi;
            dot += yi * v[i];
        }
    }
    const double tot = amg_block_total(dot);
    if (amg_arrive(tot, partials, ticket)) {
        const double a = amg_sum_partials_block(partials, ticket);
        if (threadIdx.x == 0) {
            scal[k] = a;
            scal[AMG_SC_M(steps)] = (double)(k + 1);
        }
    }
}

// Step k: w <- w - alpha[k] v - beta[k-1] vp and beta[k] = |w|, or the stop flag when |w| is
// not finite or below 1e-12 |alpha[k]| (the host loop's test).
extern "C" __global__ void __launch_bounds__(AMG_BLOCK)
    amg_lanczos_orth_dot(double* __restrict__ w, const double* __restrict__ v, const double* __restrict__ vp, u32 n,
                         double* partials, u32* ticket, double* scal, u32 steps, u32 k) {
    if (scal[AMG_SC_STOP(steps)] != 0.0) return;
    const double al = scal[k];
    const double bp = k > 0 ? scal[steps + k - 1] : 0.0;
    double acc = 0.0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const double x = w[i] - (al * v[i] + bp * vp[i]);
        w[i] = x;
        acc += x * x;
    }
    const double tot = amg_block_total(acc);
    if (amg_arrive(tot, partials, ticket)) {
        const double ss = amg_sum_partials(partials, ticket);
        if (threadIdx.x == 0) {
            const double bt = sqrt(ss);
            if (isnan(bt) || bt <= 1e-12 * fmax(fabs(al), 1e-300))
                scal[AMG_SC_STOP(steps)] = 1.0;
            else
                scal[steps + k] = bt;
        }
    }
}

// Step k: v <- w / beta[k] (nothing once stopped).
extern "C" __global__ void amg_lanczos_next_dev(double* __restrict__ v, const double* __restrict__ w,
                                                const double* __restrict__ scal, u32 steps, u32 k, u32 n) {
    if (scal[AMG_SC_STOP(steps)] != 0.0) return;
    const double bt = scal[steps + k];
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v[i] = w[i] / bt;
}

// Eigenvalues of the m x m tridiagonal matrix (alpha, beta) below x (Sturm count of the LDL^T
// pivots).
__device__ int amg_sturm(const double* alpha, const double* beta, int m, double x) {
    int c = 0;
    double d = 1.0;
    for (int i = 0; i < m; ++i) {
        const double b2 = i > 0 ? beta[i - 1] * beta[i - 1] : 0.0;
        d = alpha[i] - x - (i > 0 ? b2 / d : 0.0);
        if (d == 0.0) d = -1e-300;
        if (d < 0.0) ++c;
    }
    return c;
}

// rho = the largest |eigenvalue| of the Lanczos tridiagonal matrix (1 when that is not positive
// and finite, as setup.rs: ritz_max), by multisection from Gershgorin's bounds: each of the 32
// lanes of one warp counts the eigenvalues below its point of the interval, and the interval
// shrinks 33-fold per step until it cannot shrink (about 11 steps for double precision).
// Returns in every lane the smallest x with at least `want` eigenvalues below it.
__device__ double amg_multisect(const double* alpha, const double* beta, int m, double lo, double hi, int want) {
    const int lane = threadIdx.x & 31;
    for (int it = 0; it < 64; ++it) {
        const double w = (hi - lo) / 33.0;
        const double x = lo + w * (lane + 1);
        const bool enough = x > lo && x < hi && amg_sturm(alpha, beta, m, x) >= want;
        const unsigned ok = __ballot_sync(FULL_MASK, enough || x >= hi);
        // The first lane whose point has enough eigenvalues below it bounds from above, the
        // lane before it from below; none: the answer lies above the last point.
        const int first = __ffs(ok) - 1;
        const double nhi = first >= 0 ? fmin(hi, lo + w * (first + 1)) : hi;
        const double nlo = first < 0 ? lo + w * 32 : (first > 0 ? lo + w * first : lo);
        if (!(nhi < hi || nlo > lo)) break;
        lo = nlo;
        hi = nhi;
    }
    return hi;
}

extern "C" __global__ void amg_lanczos_ritz(double* scal, u32 steps) {
    if (blockIdx.x != 0 || threadIdx.x >= 32) return;
    const int m = (int)scal[AMG_SC_M(steps)];
    const double* alpha = scal;
    const double* beta = scal + steps;
    double rho = 0.0;
    if (m > 0) {
        double lo = alpha[0], hi = alpha[0];
        for (int i = 0; i < m; ++i) {
            const double r = (i > 0 ? fabs(beta[i - 1]) : 0.0) + (i + 1 < m ? fabs(beta[i]) : 0.0);
            lo = fmin(lo, alpha[i] - r);
            hi = fmax(hi, alpha[i] + r);
        }
        if (isfinite(lo) && isfinite(hi)) {
            // Widen by a few ulps so that the eigenvalues lie strictly inside.
            const double pad = 1e-12 * fmax(fabs(lo), fabs(hi)) + 1e-300;
            lo -= pad;
            hi += pad;
            const double lmax = amg_multisect(alpha, beta, m, lo, hi, m);
            const double lmin = amg_multisect(alpha, beta, m, lo, hi, 1);
            rho = fmax(fabs(lmax), fabs(lmin));
        }
    }
    if (threadIdx.x == 0) scal[AMG_SC_RHO(steps)] = (rho > 0.0 && isfinite(rho)) ? rho : 1.0;
}

// ---- Checks of the fine matrix and its pattern fingerprint ------------------------------------
//
// bad[0]: the lowest row whose columns are not strictly increasing or reach n; bad[1]: the
// lowest row with a non-finite value; bad[2]: the lowest row whose diagonal entry is missing,
// not positive or not finite (all 0xffffffff when none). *hash: the wrapping sum over the entries
// of mix64(i << 32 | j): with sorted rows, equal row counts and entry counts, equal sums mean
// the same pattern up to a 64-bit hash collision.
template <typename T>
__device__ __forceinline__ void amg_check_fine(const u32* __restrict__ rp, const u32* __restrict__ col,
                                               const T* __restrict__ val, u32 n, u32* bad,
                                               unsigned long long* hash) {
    unsigned long long h = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        bool sorted = true, finite = true, diag = false;
        u32 prev = 0;
        for (u32 k = rp[i]; k < rp[i + 1]; ++k) {
            const u32 c = col[k];
            if (c >= n || (k > rp[i] && c <= prev)) sorted = false;
            prev = c;
            const double v = (double)val[k];
            if (!isfinite(v)) finite = false;
            if (c == i && v > 0.0 && isfinite(v)) diag = true;
            h += amg_mix64(((u64)i << 32) | c);
        }
        if (!sorted) atomicMin(bad, i);
        if (!finite) atomicMin(bad + 1, i);
        if (!diag) atomicMin(bad + 2, i);
    }
    for (int o = 16; o > 0; o >>= 1) h += __shfl_xor_sync(FULL_MASK, h, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(hash, h);
}

// pos[k] = where entry k of P (row i, column j) sits in row j of R = P^T (binary search; R's
// rows sorted): the map a numeric re-setup uses to refresh R's values without a new transpose.
extern "C" __global__ void amg_transpose_positions(const u32* __restrict__ pp, const u32* __restrict__ pcol, u32 n,
                                                   const u32* __restrict__ rp, const u32* __restrict__ rcol,
                                                   u32* __restrict__ pos) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        for (u32 k = pp[i]; k < pp[i + 1]; ++k) {
            const u32 j = pcol[k];
            u32 lo = rp[j], hi = rp[j + 1];
            while (lo < hi) {
                const u32 mid = lo + ((hi - lo) >> 1);
                if (rcol[mid] < i) lo = mid + 1; else hi = mid;
            }
            pos[k] = lo;
        }
    }
}

#define AMG_TYPED(T, S)                                                                                     \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_level_scales_##S(                          \
        const u32* rp, const u32* col, const T* val, u32 n, T* inv_diag, T* inv_l1, double* s) {           \
        amg_level_scales<T>(rp, col, val, n, inv_diag, inv_l1, s);                                          \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_smooth_##S(                                \
        const u32* pp, T* pval, u32 n, const T* inv_diag, double omega, const double* rho, const u32* tp,  \
        const T* tval, const u32* pos) {                                                                    \
        amg_smooth<T>(pp, pval, n, inv_diag, omega, rho, tp, tval, pos);                                    \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_lanczos_apply_dot_##S(                     \
        const u32* rp, const u32* col, const T* val, u32 n, const double* s, const double* v, double* y,    \
        double* partials, u32* ticket, double* scal, u32 steps, u32 k, u32 lanes) {                         \
        amg_lanczos_apply_dot<T>(rp, col, val, n, s, v, y, partials, ticket, scal, steps, k, lanes);        \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_check_fine_##S(                            \
        const u32* rp, const u32* col, const T* val, u32 n, u32* bad, unsigned long long* hash) {           \
        amg_check_fine<T>(rp, col, val, n, bad, hash);                                                      \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_scaled_##S(T* out, const T* in, T w, u32 n) { \
        amg_scaled<T>(out, in, w, n);                                                                       \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_scatter_##S(const T* in, const u32* pos,    \
                                                                           T* out, u32 nnz) {               \
        for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += gridDim.x * blockDim.x)           \
            out[pos[k]] = in[k];                                                                            \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_gather_##S(const T* in, const u32* pos,     \
                                                                          T* out, u32 nnz) {                \
        for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += gridDim.x * blockDim.x)           \
            out[k] = in[pos[k]];                                                                            \
    }

AMG_TYPED(float, f32)
AMG_TYPED(double, f64)

// The fused smoothing's entry points: amg_smooth_fused_g{G}_{f32,f64}, G lanes per row.
#define AMG_SMOOTH_FUSED(T, S, G)                                                                           \
    extern "C" __global__ void __launch_bounds__(AMG_BLOCK) amg_smooth_fused_g##G##_##S(                   \
        const u32* arp, const u32* acol, const T* aval, u32 n, const u32* tp, const u32* tcol, const T* tval, \
        const u32* tpos, const u32* pp, const u32* pcol, T* pval, const T* inv_diag, double omega,         \
        const double* rho, const u32* rpos, T* rval) {                                                      \
        amg_smooth_fused<T, G>(arp, acol, aval, n, tp, tcol, tval, tpos, pp, pcol, pval, inv_diag, omega,   \
                               rho, rpos, rval);                                                            \
    }
#define AMG_SMOOTH_FUSED_ALL(T, S)                                                                          \
    AMG_SMOOTH_FUSED(T, S, 2)                                                                               \
    AMG_SMOOTH_FUSED(T, S, 4)                                                                               \
    AMG_SMOOTH_FUSED(T, S, 8)                                                                               \
    AMG_SMOOTH_FUSED(T, S, 16)                                                                              \
    AMG_SMOOTH_FUSED(T, S, 32)

AMG_SMOOTH_FUSED_ALL(float, f32)
AMG_SMOOTH_FUSED_ALL(double, f64)
