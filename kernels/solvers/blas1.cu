// Fused vector steps of the iterative solvers (CG, PCG, BiCGSTAB): src/solvers/gpu.rs launches
// them, src/solvers/recur.rs is the reference for the scalar recurrences in the last blocks.
//
// Scalars never leave the device. Every reduction kernel writes one partial sum per block, and
// the last block to finish (an atomic ticket; the "threadFenceReduction" pattern) sums the
// partials in block order -- so the result is deterministic for a given grid size -- and then
// computes alpha, beta, omega, the convergence and breakdown tests, and the status word. The
// next kernel reads its coefficients from the slots. Every kernel returns at once when the status
// is set, so the host checks the status only every k iterations.
//
// Grid: a fixed number of blocks (a multiple of the SM count, chosen on the host) striding over
// the vector; the partial-sum buffer holds NRED * gridDim.x values.
#include "common.cuh"

#ifndef SOLVER_THREADS
#define SOLVER_THREADS 256
#endif

// Slot numbers: must match solvers::recur::Slot.
#define S_STATUS 0
#define S_STATUS_ITER 1
#define S_THRESH 2
#define S_RHO 3
#define S_RR 4
#define S_ALPHA 5
#define S_BETA 6
#define S_OMEGA 7
#define S_PQ 8
#define S_TS 9
#define S_TT 10
#define S_RR0 11
#define S_DOT 12
// The iteration that the kernels' `it` argument counts from (solvers::recur::Slot::IterBase): the
// entry points add it to their `it`, so a CUDA graph captured once with relative iteration
// numbers replays at any base (src/solvers/gpu.rs sets it before each block). 0 outside graphs.
#define S_ITER_BASE 13

// Status codes: must match solvers::recur::Status.
#define ST_CONVERGED 1
#define ST_BREAKDOWN_PQ 2
#define ST_BREAKDOWN_RHO 3
#define ST_BREAKDOWN_RV 4
#define ST_BREAKDOWN_OMEGA 5
#define ST_NONFINITE 6
#define ST_STAGNATED 7
#define ST_BREAKDOWN_ARNOLDI 8

// Fuse modes (solvers::Fuse): 0 identity (z is r), 1 Jacobi (z = dinv * r written here),
// 2 separate preconditioner (z given, or rho left to cg_rho).
#define FUSE_IDENTITY 0
#define FUSE_JACOBI 1
#define FUSE_SEPARATE 2

template <typename T> __device__ __forceinline__ bool finite_(T x) { return (x - x) == T(0); }
__device__ __forceinline__ float eps_(float) { return 1.1920929e-07f; }
__device__ __forceinline__ double eps_(double) { return 2.220446049250313e-16; }

// A volatile read: a value that another block of the same launch wrote (L2, never a stale L1 line).
template <typename T> __device__ __forceinline__ T ld_(const T* p) { return *(const volatile T*)p; }

template <typename T> __device__ __forceinline__ u32 iter_base_(const T* s) {
    return u32(s[S_ITER_BASE]);
}

template <typename T> __device__ __forceinline__ void stop_(T* s, int status, u32 it) {
    s[S_STATUS] = T(status);
    s[S_STATUS_ITER] = T(it);
}

// Sum of K values over the block, valid in thread 0. Shuffles within each warp, then warp 0
// sums the per-warp results from shared memory: a fixed order, so deterministic.
template <int K, typename T>
__device__ __forceinline__ void block_sum(T (&v)[K], T (*smem)[32]) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] += __shfl_down_sync(FULL_MASK, v[k], o);
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) smem[k][warp] = v[k];
    __syncthreads();
    if (warp == 0) {
        const u32 nwarps = blockDim.x >> 5;
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = lane < nwarps ? smem[k][lane] : T(0);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int k = 0; k < K; ++k) v[k] += __shfl_down_sync(FULL_MASK, v[k], o);
    }
}

// The last block's part of a grid-wide sum: the K totals of the gridDim.x partials per value,
// summed in block order (deterministic), into thread 0's v.
template <int K, typename T>
__device__ __forceinline__ void sum_partials(T (&v)[K], const T* partials, T (*smem)[32]) {
    T acc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = T(0);
    // volatile: read the other blocks' partials from L2, not from a stale L1 line.
    const volatile T* vp = partials;
    for (u32 b = threadIdx.x; b < gridDim.x; b += blockDim.x)
#pragma unroll
        for (int k = 0; k < K; ++k) acc[k] += vp[k * gridDim.x + b];
    block_sum<K>(acc, smem);
    if (threadIdx.x == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = acc[k];
}

// Grid-wide sum of K values per thread. Returns true in the last block to finish, where thread 0
// then holds the totals in v. Resets the ticket for the next kernel.
template <int K, typename T>
__device__ __forceinline__ bool grid_sum(T (&v)[K], T* partials, u32* ticket) {
    __shared__ T smem[K][32];
    __shared__ bool last;
    block_sum<K>(v, smem);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) partials[k * gridDim.x + blockIdx.x] = v[k];
        // Make this block's partials visible device-wide before taking a ticket.
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    // Also orders warp 0's reads of smem above before the second block_sum's writes.
    __syncthreads();
    if (!last) return false;
    __threadfence();
    sum_partials<K>(v, partials, smem);
    if (threadIdx.x == 0) *ticket = 0;
    return true;
}

#define GRID_STRIDE(i, n) for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// ---- recurrences (mirror of solvers::recur) -------------------------------------------------

template <typename T> __device__ bool test_rr_(T* s, T* hist, T rr, u32 it) {
    s[S_RR] = rr;
    if (hist) hist[it] = rr;  // null in the fused kernels' blocks other than block 0
    if (!finite_(rr)) { stop_(s, ST_NONFINITE, it); return true; }
    if (rr <= s[S_THRESH]) { stop_(s, ST_CONVERGED, it); return true; }
    return false;
}

template <typename T> __device__ void cg_rho_(T* s, T rz, u32 it) {
    if (!finite_(rz)) { stop_(s, ST_NONFINITE, it); return; }
    s[S_BETA] = rz / s[S_RHO];
    s[S_RHO] = rz;
}

// ---- kernels ----------------------------------------------------------------------------------

// dot = x.y into S_DOT (setup and final checks only).
template <typename T>
__device__ void dot_(const T* x, const T* y, u32 n, T* s, T* partials, u32* ticket) {
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) v[0] += x[i] * y[i];
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0) s[S_DOT] = v[0];
}

// Start: |r|^2 and rho = r.z (z by mode); recur::start.
template <typename T>
__device__ void cg_start_(const T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials,
                          u32* ticket, T* hist, u32 it) {
    T v[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        const T ri = r[i];
        v[0] += ri * ri;
        if (mode == FUSE_JACOBI) {
            const T zi = dinv[i] * ri;
            z[i] = zi;
            v[1] += ri * zi;
        } else if (mode == FUSE_SEPARATE) {
            v[1] += ri * z[i];
        }
    }
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0) {
        const T rr = v[0], rz = mode == FUSE_IDENTITY ? v[0] : v[1];
        s[S_RHO] = rz;
        s[S_RR0] = rr;
        s[S_ALPHA] = T(1);
        s[S_OMEGA] = T(1);
        s[S_BETA] = T(0);
        if (!finite_(rz)) { stop_(s, ST_NONFINITE, it); return; }
        test_rr_(s, hist, rr, it);
    }
}

// CG: alpha = rho / pq; breakdown when pq <= 0.
template <typename T> __device__ void cg_alpha_rec_(T* s, T pq, u32 it) {
    s[S_PQ] = pq;
    if (!finite_(pq)) { s[S_ALPHA] = T(0); stop_(s, ST_NONFINITE, it); }
    else if (pq <= T(0)) { s[S_ALPHA] = T(0); stop_(s, ST_BREAKDOWN_PQ, it); }
    else s[S_ALPHA] = s[S_RHO] / pq;
}

// CG: |r|^2 test; beta, rho from rz (by mode).
template <typename T> __device__ void cg_update_r_rec_(T* s, T* hist, T rr, T rz, u32 mode, u32 it) {
    if (test_rr_(s, hist, rr, it)) return;
    if (mode == FUSE_IDENTITY) cg_rho_(s, rr, it);
    else if (mode == FUSE_JACOBI) cg_rho_(s, rz, it);
}

// CG: pq = p.q; alpha = rho / pq; breakdown when pq <= 0.
template <typename T>
__device__ void cg_alpha_(const T* p, const T* q, u32 n, T* s, T* partials, u32* ticket, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) v[0] += p[i] * q[i];
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0) cg_alpha_rec_(s, v[0], it);
}

// CG: r -= alpha q (and z = dinv r); |r|^2, r.z; convergence; beta, rho.
template <typename T>
__device__ void cg_update_r_(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s,
                             T* partials, u32* ticket, T* hist, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    const T alpha = s[S_ALPHA];
    T v[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        const T ri = r[i] - alpha * q[i];
        r[i] = ri;
        v[0] += ri * ri;
        if (mode == FUSE_JACOBI) {
            const T zi = dinv[i] * ri;
            z[i] = zi;
            v[1] += ri * zi;
        }
    }
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0)
        cg_update_r_rec_(s, hist, v[0], v[1], mode, it);
}

// PCG with a separate preconditioner: rz = r.z; beta, rho.
template <typename T>
__device__ void cg_rho_k_(const T* r, const T* z, u32 n, T* s, T* partials, u32* ticket, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) v[0] += r[i] * z[i];
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0) cg_rho_(s, v[0], it);
}

// CG: x += alpha p; p = z + beta p. Also runs in the iteration that set the status (the
// converging iteration's x update is deferred to here).
template <typename T>
__device__ void cg_update_xp_(T* x, T* p, const T* z, u32 n, const T* s, u32 it) {
    if (s[S_STATUS] != T(0) && s[S_STATUS_ITER] != T(it)) return;
    const T alpha = s[S_ALPHA], beta = s[S_BETA];
    GRID_STRIDE(i, n) {
        const T pi = p[i];
        x[i] += alpha * pi;
        p[i] = z[i] + beta * pi;
    }
}

// BiCGSTAB: p = r + beta (p - omega v) (and phat = dinv p).
template <typename T>
__device__ void bicg_p_(const T* r, const T* v, T* p, const T* dinv, T* phat, u32 n, u32 mode,
                        const T* s) {
    if (s[S_STATUS] != T(0)) return;
    const T beta = s[S_BETA], omega = s[S_OMEGA];
    GRID_STRIDE(i, n) {
        const T pi = r[i] + beta * (p[i] - omega * v[i]);
        p[i] = pi;
        if (mode == FUSE_JACOBI) phat[i] = dinv[i] * pi;
    }
}

// BiCGSTAB: alpha = rho / rv.
template <typename T> __device__ void bicg_alpha_rec_(T* s, T rv, u32 it) {
    s[S_PQ] = rv;
    const T alpha = s[S_RHO] / rv;
    if (!finite_(rv)) stop_(s, ST_NONFINITE, it);
    else if (rv == T(0) || !finite_(alpha)) stop_(s, ST_BREAKDOWN_RV, it);
    else s[S_ALPHA] = alpha;
}

// BiCGSTAB: omega = ts / tt (0 when t = 0).
template <typename T> __device__ void bicg_omega_rec_(T* s, T ts, T tt, u32 it) {
    s[S_TS] = ts;
    s[S_TT] = tt;
    if (!finite_(ts) || !finite_(tt)) stop_(s, ST_NONFINITE, it);
    else s[S_OMEGA] = tt > T(0) ? ts / tt : T(0);
}

// BiCGSTAB: |r|^2 test, breakdown tests, beta and rho from rr = |r|^2 and rho = rhat.r.
template <typename T> __device__ void bicg_update_rec_(T* s, T* hist, T rr, T rho, T omega, u32 it) {
    if (test_rr_(s, hist, rr, it)) return;
    if (!finite_(rho)) stop_(s, ST_NONFINITE, it);
    else if (omega == T(0)) stop_(s, ST_BREAKDOWN_OMEGA, it);
    else if (rho * rho <= eps_(T(0)) * eps_(T(0)) * s[S_RR0] * rr) stop_(s, ST_BREAKDOWN_RHO, it);
    else {
        s[S_BETA] = (rho / s[S_RHO]) * (s[S_ALPHA] / omega);
        s[S_RHO] = rho;
    }
}

// BiCGSTAB: rv = rhat.v; alpha = rho / rv.
template <typename T>
__device__ void bicg_alpha_(const T* rhat, const T* v, u32 n, T* s, T* partials, u32* ticket,
                            u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T a[1] = {T(0)};
    GRID_STRIDE(i, n) a[0] += rhat[i] * v[i];
    if (grid_sum<1>(a, partials, ticket) && threadIdx.x == 0) bicg_alpha_rec_(s, a[0], it);
}

// BiCGSTAB: s = r - alpha v (and shat = dinv s).
template <typename T>
__device__ void bicg_s_(const T* r, const T* v, T* sv, const T* dinv, T* shat, u32 n, u32 mode,
                        const T* s) {
    if (s[S_STATUS] != T(0)) return;
    const T alpha = s[S_ALPHA];
    GRID_STRIDE(i, n) {
        const T si = r[i] - alpha * v[i];
        sv[i] = si;
        if (mode == FUSE_JACOBI) shat[i] = dinv[i] * si;
    }
}

// BiCGSTAB: ts = t.s, tt = t.t; omega = ts / tt (0 when t = 0).
template <typename T>
__device__ void bicg_omega_(const T* t, const T* sv, u32 n, T* s, T* partials, u32* ticket,
                            u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T a[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        const T ti = t[i];
        a[0] += ti * sv[i];
        a[1] += ti * ti;
    }
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0) bicg_omega_rec_(s, a[0], a[1], it);
}

// BiCGSTAB: x += alpha phat + omega shat; r = s - omega t; |r|^2, rhat.r; tests; beta, rho.
template <typename T>
__device__ void bicg_update_(T* x, const T* phat, const T* shat, const T* sv, const T* t, T* r,
                             const T* rhat, u32 n, T* s, T* partials, u32* ticket, T* hist,
                             u32 it) {
    if (s[S_STATUS] != T(0)) return;
    const T alpha = s[S_ALPHA], omega = s[S_OMEGA];
    T a[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        x[i] += alpha * phat[i] + omega * shat[i];
        const T ri = sv[i] - omega * t[i];
        r[i] = ri;
        a[0] += ri * ri;
        a[1] += rhat[i] * ri;
    }
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0)
        bicg_update_rec_(s, hist, a[0], a[1], omega, it);
}

// Elementwise kernels for setup: r = b - ax; z = d * r; y = x (copy done by memcpy); v = 0.
template <typename T> __device__ void residual_(const T* b, const T* ax, T* r, u32 n) {
    GRID_STRIDE(i, n) r[i] = b[i] - ax[i];
}
template <typename T> __device__ void scale_(const T* d, const T* r, T* z, u32 n) {
    GRID_STRIDE(i, n) z[i] = d[i] * r[i];
}

// ---- entry points -----------------------------------------------------------------------------

#define SOLVER_ENTRIES(T, SUF)                                                                       \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_dot_##SUF(                   \
        const T* x, const T* y, u32 n, T* s, T* partials, u32* ticket) {                            \
        dot_<T>(x, y, n, s, partials, ticket);                                                      \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_start_##SUF(              \
        const T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials, u32* ticket, T* hist,  \
        u32 it) {                                                                                   \
        it += iter_base_(s);                                                                        \
        cg_start_<T>(r, dinv, z, n, mode, s, partials, ticket, hist, it);                           \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_alpha_##SUF(              \
        const T* p, const T* q, u32 n, T* s, T* partials, u32* ticket, u32 it) {                    \
        it += iter_base_(s);                                                                        \
        cg_alpha_<T>(p, q, n, s, partials, ticket, it);                                             \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_update_r_##SUF(           \
        const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials, u32* ticket,     \
        T* hist, u32 it) {                                                                          \
        it += iter_base_(s);                                                                        \
        cg_update_r_<T>(q, r, dinv, z, n, mode, s, partials, ticket, hist, it);                     \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_rho_##SUF(                \
        const T* r, const T* z, u32 n, T* s, T* partials, u32* ticket, u32 it) {                    \
        it += iter_base_(s);                                                                        \
        cg_rho_k_<T>(r, z, n, s, partials, ticket, it);                                             \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_update_xp_##SUF(          \
        T* x, T* p, const T* z, u32 n, const T* s, u32 it) {                                        \
        it += iter_base_(s);                                                                        \
        cg_update_xp_<T>(x, p, z, n, s, it);                                                        \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_p_##SUF(                \
        const T* r, const T* v, T* p, const T* dinv, T* phat, u32 n, u32 mode, const T* s) {        \
        bicg_p_<T>(r, v, p, dinv, phat, n, mode, s);                                                \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_alpha_##SUF(            \
        const T* rhat, const T* v, u32 n, T* s, T* partials, u32* ticket, u32 it) {                 \
        it += iter_base_(s);                                                                        \
        bicg_alpha_<T>(rhat, v, n, s, partials, ticket, it);                                        \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_s_##SUF(                \
        const T* r, const T* v, T* sv, const T* dinv, T* shat, u32 n, u32 mode, const T* s) {       \
        bicg_s_<T>(r, v, sv, dinv, shat, n, mode, s);                                               \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_omega_##SUF(            \
        const T* t, const T* sv, u32 n, T* s, T* partials, u32* ticket, u32 it) {                   \
        it += iter_base_(s);                                                                        \
        bicg_omega_<T>(t, sv, n, s, partials, ticket, it);                                          \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_update_##SUF(           \
        T* x, const T* phat, const T* shat, const T* sv, const T* t, T* r, const T* rhat, u32 n,    \
        T* s, T* partials, u32* ticket, T* hist, u32 it) {                                          \
        it += iter_base_(s);                                                                        \
        bicg_update_<T>(x, phat, shat, sv, t, r, rhat, n, s, partials, ticket, hist, it);           \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_residual_##SUF(             \
        const T* b, const T* ax, T* r, u32 n) {                                                     \
        residual_<T>(b, ax, r, n);                                                                  \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_scale_##SUF(                \
        const T* d, const T* r, T* z, u32 n) {                                                      \
        scale_<T>(d, r, z, n);                                                                      \
    }

SOLVER_ENTRIES(float, f32)
SOLVER_ENTRIES(double, f64)

// ---- axpy and the Chebyshev preconditioner's step (host scalars; no status) -------------------

template <typename T> __device__ void axpy_(T alpha, const T* x, T* y, u32 n) {
    GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

// ---- The backend's core vector operations (host scalars; no status) ---------------------------
//
// z = a x + b y + c z, each term present when its vector is (x, y non-null; z read only when
// c != 0, so z need not be initialised then), summed left to right: axpby, axpbypcz, scal.
template <typename T>
__device__ void lincomb_(T a, const T* x, T b, const T* y, T c, T* z, u32 n) {
    GRID_STRIDE(i, n) {
        T v = T(0);
        bool any = false;
        if (x) {
            v = a * x[i];
            any = true;
        }
        if (y) {
            const T t = b * y[i];
            v = any ? v + t : t;
            any = true;
        }
        if (c != T(0)) {
            const T t = c * z[i];
            v = any ? v + t : t;
        }
        z[i] = v;
    }
}

// z = a (x o y) + b z (z read only when b != 0).
template <typename T> __device__ void vmul_(T a, const T* x, const T* y, T b, T* z, u32 n) {
    GRID_STRIDE(i, n) {
        const T v = a * (x[i] * y[i]);
        z[i] = b != T(0) ? v + b * z[i] : v;
    }
}

template <typename T> __device__ void fill_(T a, T* z, u32 n) { GRID_STRIDE(i, n) z[i] = a; }

#define VECTOR_ENTRIES(T, SUF)                                                                      \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_lincomb_##SUF(             \
        T a, const T* x, T b, const T* y, T c, T* z, u32 n) {                                       \
        lincomb_<T>(a, x, b, y, c, z, n);                                                           \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_vmul_##SUF(                \
        T a, const T* x, const T* y, T b, T* z, u32 n) {                                            \
        vmul_<T>(a, x, y, b, z, n);                                                                 \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_fill_##SUF(T a, T* z,      \
                                                                                    u32 n) {       \
        fill_<T>(a, z, n);                                                                          \
    }

VECTOR_ENTRIES(float, f32)
VECTOR_ENTRIES(double, f64)

// first: res = D^-1 t; d = c2 res; z = d.   else: res -= D^-1 t; d = c1 d + c2 res; z += d.
template <typename T>
__device__ void poly_step_(const T* t, const T* dinv, T* res, T* d, T* z, u32 n, u32 first, T c1,
                           T c2) {
    GRID_STRIDE(i, n) {
        const T ti = dinv ? dinv[i] * t[i] : t[i];
        if (first) {
            const T di = c2 * ti;
            res[i] = ti;
            d[i] = di;
            z[i] = di;
        } else {
            const T ri = res[i] - ti;
            const T di = c1 * d[i] + c2 * ri;
            res[i] = ri;
            d[i] = di;
            z[i] += di;
        }
    }
}

// ---- GMRES (mirror of solvers::recur::{GmresLayout, gmres_start, gmres_column}) ---------------
//
// The basis is a table of m + 1 device pointers (vptr). Small arrays at the offsets below.

#ifndef GMRES_MAX_COLS
#define GMRES_MAX_COLS 256
#endif

struct GmresLay {
    u32 m;
    __device__ u32 hess() const { return 0; }
    __device__ u32 rmat() const { return (m + 1) * m; }
    __device__ u32 cs() const { return 2 * (m + 1) * m; }
    __device__ u32 sn() const { return cs() + m; }
    __device__ u32 g() const { return sn() + m; }
    __device__ u32 y() const { return g() + m + 1; }
    __device__ u32 c1() const { return y() + m; }
    __device__ u32 c2() const { return c1() + m + 1; }
    __device__ u32 beta2() const { return c2() + m + 1; }
    __device__ u32 scale() const { return beta2() + 1; }
};

template <typename T> __device__ void gmres_start_rec_(T* s, T* small, GmresLay L, T* hist, T rr, u32 it) {
    const T beta = sqrt(rr > T(0) ? rr : T(0));
    for (u32 i = 0; i <= L.m; ++i) small[L.g() + i] = T(0);
    small[L.g()] = beta;
    small[L.beta2()] = rr;
    small[L.scale()] = beta > T(0) ? T(1) / beta : T(0);
    test_rr_(s, hist, rr, it);
}

template <typename T>
__device__ void gmres_column_rec_(T* s, T* small, GmresLay L, T* hist, u32 j, T ww, u32 it) {
    const u32 ld = L.m + 1;
    const T hnext = sqrt(ww > T(0) ? ww : T(0));
    for (u32 i = 0; i <= j; ++i) {
        // volatile: in the fused Arnoldi kernel another block wrote them in this launch.
        const T h = ld_(small + L.c1() + i) + ld_(small + L.c2() + i);
        small[L.hess() + j * ld + i] = h;
        small[L.rmat() + j * ld + i] = h;
    }
    small[L.hess() + j * ld + j + 1] = hnext;
    for (u32 i = 0; i < j; ++i) {
        const T c = small[L.cs() + i], sn = small[L.sn() + i];
        const T a = small[L.rmat() + j * ld + i], b = small[L.rmat() + j * ld + i + 1];
        small[L.rmat() + j * ld + i] = c * a + sn * b;
        small[L.rmat() + j * ld + i + 1] = c * b - sn * a;
    }
    const T a = small[L.rmat() + j * ld + j];
    const T d = sqrt(a * a + hnext * hnext);
    small[L.scale()] = hnext > T(0) ? T(1) / hnext : T(0);
    if (!finite_(d) || !finite_(a)) { stop_(s, ST_NONFINITE, it); return; }
    if (d == T(0)) { stop_(s, ST_BREAKDOWN_ARNOLDI, it); return; }
    const T c = a / d, sn = hnext / d;
    small[L.cs() + j] = c;
    small[L.sn() + j] = sn;
    small[L.rmat() + j * ld + j] = d;
    small[L.rmat() + j * ld + j + 1] = T(0);
    const T gj = small[L.g() + j];
    small[L.g() + j] = c * gj;
    small[L.g() + j + 1] = -sn * gj;
    const T rr = sn * sn * gj * gj;
    if (test_rr_(s, hist, rr, it)) return;
    if (j + 1 == L.m && rr >= (T(1) - eps_(T(0))) * small[L.beta2()]) stop_(s, ST_STAGNATED, it);
}

// Start of a cycle: |r|^2, then the recurrence (v0 = r / |r| is gmres_scale's job).
template <typename T>
__device__ void gmres_start_(const T* r, u32 n, T* s, T* small, u32 m, T* partials, u32* ticket,
                             T* hist, u32 it) {
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) v[0] += r[i] * r[i];
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0)
        gmres_start_rec_(s, small, GmresLay{m}, hist, v[0], it);
}

// dst = small[scale] * src (in place when src is null), unless the status is set.
template <typename T>
__device__ void gmres_scale_(const T* src, T* dst, u32 n, const T* s, const T* small, u32 m) {
    if (s[S_STATUS] != T(0)) return;
    const T f = small[GmresLay{m}.scale()];
    if (src) {
        GRID_STRIDE(i, n) dst[i] = f * src[i];
    } else {
        GRID_STRIDE(i, n) dst[i] *= f;
    }
}

// Block of dot products c[k] = V[k].w, k < nv: grid (gx, nv); block (bx, k) sums its share of
// vector k, and the last block to finish sums each k's gx partials in block order
// (deterministic) into small[out + k].
template <typename T>
__device__ void gmres_dots_(const unsigned long long* vptr, const T* w, u32 n, u32 nv, const T* s,
                            T* small, u32 out, T* partials, u32* ticket) {
    if (s[S_STATUS] != T(0)) return;
    __shared__ T smem[1][32];
    __shared__ bool last;
    const u32 k = blockIdx.y, gx = gridDim.x;
    const T* vk = reinterpret_cast<const T*>(vptr[k]);
    T v[1] = {T(0)};
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gx * blockDim.x) v[0] += vk[i] * w[i];
    block_sum<1>(v, smem);
    if (threadIdx.x == 0) {
        partials[k * gx + blockIdx.x] = v[0];
        __threadfence();
        last = atomicAdd(ticket, 1u) == gx * nv - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile T* vp = partials;
    for (u32 c = threadIdx.x; c < nv; c += blockDim.x) {
        T acc = T(0);
        for (u32 b = 0; b < gx; ++b) acc += vp[c * gx + b];
        small[out + c] = acc;
    }
    if (threadIdx.x == 0) *ticket = 0;
}

// w -= sum_k small[coef + k] V[k], k < nv. With final != 0 also |w|^2, and the last block runs
// the column recurrence (Givens rotations, residual estimate, tests) for column nv - 1.
template <typename T>
__device__ void gmres_update_(const unsigned long long* vptr, T* w, u32 n, u32 nv, T* s, T* small,
                              u32 m, u32 coef, u32 final_, T* partials, u32* ticket, T* hist,
                              u32 it) {
    if (s[S_STATUS] != T(0)) return;
    __shared__ T c[GMRES_MAX_COLS];
    __shared__ const T* vs[GMRES_MAX_COLS];
    for (u32 k = threadIdx.x; k < nv; k += blockDim.x) {
        c[k] = small[coef + k];
        vs[k] = reinterpret_cast<const T*>(vptr[k]);
    }
    __syncthreads();
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) {
        T acc = w[i];
        for (u32 k = 0; k < nv; ++k) acc -= c[k] * vs[k][i];
        w[i] = acc;
        v[0] += acc * acc;
    }
    if (!final_) return;
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0)
        gmres_column_rec_(s, small, GmresLay{m}, hist, nv - 1, v[0], it);
}

// One thread: back substitution R y = g on the leading k x k block.
template <typename T> __device__ void gmres_solve_y_(T* small, u32 m, u32 k) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const GmresLay L{m};
    const u32 ld = m + 1;
    for (int i = int(k) - 1; i >= 0; --i) {
        T acc = small[L.g() + i];
        for (u32 c = i + 1; c < k; ++c) acc -= small[L.rmat() + c * ld + i] * small[L.y() + c];
        small[L.y() + i] = acc / small[L.rmat() + i * ld + i];
    }
}

// u = sum_k y[k] V[k], k < ncols.
template <typename T>
__device__ void gmres_combine_(const unsigned long long* vptr, T* u, u32 n, u32 ncols,
                               const T* small, u32 m) {
    __shared__ T y[GMRES_MAX_COLS];
    __shared__ const T* vs[GMRES_MAX_COLS];
    for (u32 k = threadIdx.x; k < ncols; k += blockDim.x) {
        y[k] = small[GmresLay{m}.y() + k];
        vs[k] = reinterpret_cast<const T*>(vptr[k]);
    }
    __syncthreads();
    GRID_STRIDE(i, n) {
        T acc = T(0);
        for (u32 k = 0; k < ncols; ++k) acc += y[k] * vs[k][i];
        u[i] = acc;
    }
}

#define KRYLOV_ENTRIES(T, SUF)                                                                       \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_axpy_##SUF(                  \
        T alpha, const T* x, T* y, u32 n) {                                                         \
        axpy_<T>(alpha, x, y, n);                                                                   \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_poly_step_##SUF(             \
        const T* t, const T* dinv, T* res, T* d, T* z, u32 n, u32 first, T c1, T c2) {              \
        poly_step_<T>(t, dinv, res, d, z, n, first, c1, c2);                                        \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_start_##SUF(           \
        const T* r, u32 n, T* s, T* small, u32 m, T* partials, u32* ticket, T* hist, u32 it) {      \
        it += iter_base_(s);                                                                        \
        gmres_start_<T>(r, n, s, small, m, partials, ticket, hist, it);                             \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_scale_##SUF(           \
        const T* src, T* dst, u32 n, const T* s, const T* small, u32 m) {                           \
        gmres_scale_<T>(src, dst, n, s, small, m);                                                  \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_dots_##SUF(            \
        const unsigned long long* vptr, const T* w, u32 n, u32 nv, const T* s, T* small, u32 out,   \
        T* partials, u32* ticket) {                                                                 \
        gmres_dots_<T>(vptr, w, n, nv, s, small, out, partials, ticket);                            \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_update_##SUF(          \
        const unsigned long long* vptr, T* w, u32 n, u32 nv, T* s, T* small, u32 m, u32 coef,       \
        u32 final_, T* partials, u32* ticket, T* hist, u32 it) {                                    \
        it += iter_base_(s);                                                                        \
        gmres_update_<T>(vptr, w, n, nv, s, small, m, coef, final_, partials, ticket, hist, it);    \
    }                                                                                               \
    /* s[S_ITER_BASE] <- v (add = 0) or += v (add = 1, the last node of a captured block). */     \
    extern "C" __global__ void solver_iter_base_##SUF(T* s, u32 v, u32 add) {                       \
        if (threadIdx.x == 0 && blockIdx.x == 0)                                                    \
            s[S_ITER_BASE] = T((add ? iter_base_(s) : 0u) + v);                                     \
    }                                                                                               \
    extern "C" __global__ void solver_gmres_solve_y_##SUF(T* small, u32 m, u32 k) {                 \
        gmres_solve_y_<T>(small, m, k);                                                             \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_combine_##SUF(         \
        const unsigned long long* vptr, T* u, u32 n, u32 ncols, const T* small, u32 m) {            \
        gmres_combine_<T>(vptr, u, n, ncols, small, m);                                             \
    }

KRYLOV_ENTRIES(float, f32)
KRYLOV_ENTRIES(double, f64)

// ---- small-system path: one launch per step of several reductions (src/solvers/gpu.rs) ---------
//
// On systems of a few thousand rows an iteration's kernels are short and dependent, so their
// number sets the time per iteration (each costs ~2-3 us of launch and drain even inside a CUDA
// graph, and a reduction's last-block epilogue ~2 us more). The kernels below do the work of
// several of the kernels above in one launch: where those end (a reduction whose last block
// computes alpha, omega, beta, ...), these meet at a grid barrier, after which EVERY block sums
// the partials itself (in the same block order, so every block gets the same totals, bit for
// bit) and runs the recurrence on its own shared-memory copy of the slots; block 0 also writes
// the slots and the history back for the host and the next kernels. No block waits for another
// block's epilogue: the barrier is one atomic arrival and one wait.
//
// They are launched cooperatively (every block resident at once; the driver refuses a grid that
// cannot be) over the same grid as the separate kernels, each thread touching the same elements
// in the same order, with the same reductions and recurrences: for a given grid their results
// equal those of the separate kernels bit for bit. Only scalars cross blocks (each thread's
// vector elements are its own from one pass to the next).

__device__ __forceinline__ u32 atom_add_release_(u32* p, u32 v) {
    u32 old;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ u32 ld_acquire_(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Every block of the (co-resident) grid waits here until all have arrived; what a block wrote
// before is visible to every block after. The word's top bit flips once per barrier: block 0
// adds 2^31 - (G - 1) and the others 1, so the G arrivals add exactly 2^31 and the low bits come
// back to 0. The top bit changes only with the last arrival (the low bits are 0 at the start of
// every barrier), so a block waits until it differs from the value it saw when it arrived; the
// word needs no reset between barriers or launches, whatever their grid sizes.
__device__ __forceinline__ void grid_barrier_(u32* bar) {
    __syncthreads();  // the block's writes happen before thread 0's release
    if (threadIdx.x == 0) {
        const u32 inc = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        const u32 old = atom_add_release_(bar, inc);
        while (((ld_acquire_(bar) ^ old) & 0x80000000u) == 0) {}
    }
    __syncthreads();
}

// Grid-wide sum of K values per thread, in every block: thread 0 of each block ends with the
// totals (the partials summed in block order, as grid_sum's last block does). Partials are
// double-buffered by `phase` (a block may write the next barrier's partial while a slower one
// still reads this one's; not two barriers ahead, since it cannot pass the next barrier before
// the slower block arrives there): 2 * K * gridDim.x entries.
template <int K, typename T>
__device__ __forceinline__ void grid_allsum(T (&v)[K], T* partials, u32* bar, u32& phase) {
    __shared__ T smem[K][32];
    block_sum<K>(v, smem);
    T* part = partials + (phase++ & 1u) * K * gridDim.x;
    if (threadIdx.x == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) part[k * gridDim.x + blockIdx.x] = v[k];
    grid_barrier_(bar);
    sum_partials<K>(v, part, smem);
}

// The block's copy of the slots (loaded at entry, read and written by the recurrences) and the
// history pointer its recurrences write (block 0's only).
template <typename T> struct LocalSlots {
    T* s;     // shared memory, NSLOTS_K values
    T* hist;  // block 0: the history; others: null
};
#define NSLOTS_K 16

template <typename T> __device__ __forceinline__ void load_slots_(T* ls, const T* s) {
    if (threadIdx.x < NSLOTS_K) ls[threadIdx.x] = s[threadIdx.x];
    __syncthreads();
}
// Block 0 writes the slots back (every exit of a fused kernel's body goes through this).
template <typename T> __device__ __forceinline__ void publish_slots_(const T* ls, T* s) {
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < NSLOTS_K) s[threadIdx.x] = ls[threadIdx.x];
}

// The CG and BiCGSTAB kernels below hold one element per thread (the host launches
// ceil(n / blockDim) <= SM-count blocks, so n <= gridDim.x * blockDim.x): every vector value an
// element needs is loaded at entry, in parallel with the slots, and kept in registers across the
// barriers, so each barrier is followed by arithmetic, not by another round trip to memory.
// The expressions are those of the separate kernels (a thread without an element contributes 0).
#define ONE_ELEMENT(i, has, n)                                                                     \
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;                                          \
    const bool has = i < (n)

// CG, one launch for cg_alpha, cg_update_r and cg_update_xp (modes identity and Jacobi).
template <typename T>
__device__ void cg_fused_(T* x, T* p, const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode,
                          T* s, const T* sg, T* hist, T* partials, u32* bar, u32 it) {
    ONE_ELEMENT(i, has, n);
    T pi = T(0), qi = T(0), ri = T(0), xi = T(0), di = T(0);
    if (has) {
        pi = p[i];
        qi = q[i];
        ri = r[i];
        xi = x[i];
        if (mode == FUSE_JACOBI) di = dinv[i];
    }
    load_slots_(s, sg);
    if (s[S_STATUS] != T(0)) return;
    u32 phase = 0;
    T pq[1] = {T(0)};
    if (has) pq[0] += pi * qi;
    grid_allsum<1>(pq, partials, bar, phase);
    if (threadIdx.x == 0) cg_alpha_rec_(s, pq[0], it);
    __syncthreads();
    // A breakdown in this iteration skips r's update; x and p are updated as cg_update_xp does.
    T zi = ri;
    if (s[S_STATUS] == T(0)) {
        const T alpha = s[S_ALPHA];
        T v[2] = {T(0), T(0)};
        if (has) {
            ri = ri - alpha * qi;
            r[i] = ri;
            v[0] += ri * ri;
            zi = ri;
            if (mode == FUSE_JACOBI) {
                zi = di * ri;
                z[i] = zi;
                v[1] += ri * zi;
            }
        }
        grid_allsum<2>(v, partials, bar, phase);
        if (threadIdx.x == 0) cg_update_r_rec_(s, hist, v[0], v[1], mode, it);
        __syncthreads();
    } else if (mode == FUSE_JACOBI && has) {
        zi = z[i];  // cg_update_xp reads the z of the previous iteration
    }
    // Set in this iteration (it was clear at entry): x's update still runs.
    const T alpha = s[S_ALPHA], beta = s[S_BETA];
    if (has) {
        xi += alpha * pi;
        x[i] = xi;
        p[i] = zi + beta * pi;
    }
}

// BiCGSTAB, one launch for bicg_alpha and bicg_s.
template <typename T>
__device__ void bicg_alpha_s_(const T* rhat, const T* r, const T* v, T* sv, const T* dinv,
                              T* shat, u32 n, u32 mode, T* s, const T* sg, T* partials, u32* bar,
                              u32 it) {
    ONE_ELEMENT(i, has, n);
    T rhi = T(0), vi = T(0), ri = T(0), di = T(0);
    if (has) {
        rhi = rhat[i];
        vi = v[i];
        ri = r[i];
        if (mode == FUSE_JACOBI) di = dinv[i];
    }
    load_slots_(s, sg);
    if (s[S_STATUS] != T(0)) return;
    u32 phase = 0;
    T a[1] = {T(0)};
    if (has) a[0] += rhi * vi;
    grid_allsum<1>(a, partials, bar, phase);
    if (threadIdx.x == 0) bicg_alpha_rec_(s, a[0], it);
    __syncthreads();
    if (s[S_STATUS] != T(0) || !has) return;
    const T alpha = s[S_ALPHA];
    const T si = ri - alpha * vi;
    sv[i] = si;
    if (mode == FUSE_JACOBI) shat[i] = di * si;
}

// BiCGSTAB, one launch for bicg_omega, bicg_update and the next iteration's bicg_p. phat is
// p-hat: read by x's update (p itself in identity mode), and overwritten with dinv p in Jacobi
// mode (a separate preconditioner computes it in the next iteration).
template <typename T>
__device__ void bicg_update_p_(T* x, const T* shat, const T* sv, const T* t, T* r, const T* rhat,
                               T* p, const T* v, const T* dinv, T* phat, u32 n, u32 mode, T* s,
                               const T* sg, T* hist, T* partials, u32* bar, u32 it) {
    ONE_ELEMENT(i, has, n);
    T ti = T(0), si = T(0), xi = T(0), phi = T(0), shi = T(0), rhi = T(0), pi = T(0), vi = T(0),
      di = T(0);
    if (has) {
        ti = t[i];
        si = sv[i];
        xi = x[i];
        pi = p[i];
        phi = mode == FUSE_IDENTITY ? pi : phat[i];
        shi = shat[i];
        rhi = rhat[i];
        vi = v[i];
        if (mode == FUSE_JACOBI) di = dinv[i];
    }
    load_slots_(s, sg);
    if (s[S_STATUS] != T(0)) return;
    u32 phase = 0;
    T a[2] = {T(0), T(0)};
    if (has) {
        a[0] += ti * si;
        a[1] += ti * ti;
    }
    grid_allsum<2>(a, partials, bar, phase);
    if (threadIdx.x == 0) bicg_omega_rec_(s, a[0], a[1], it);
    __syncthreads();
    if (s[S_STATUS] != T(0)) return;
    const T alpha = s[S_ALPHA], omega = s[S_OMEGA];
    a[0] = a[1] = T(0);
    T ri = T(0);
    if (has) {
        xi += alpha * phi + omega * shi;
        x[i] = xi;
        ri = si - omega * ti;
        r[i] = ri;
        a[0] += ri * ri;
        a[1] += rhi * ri;
    }
    grid_allsum<2>(a, partials, bar, phase);
    if (threadIdx.x == 0) bicg_update_rec_(s, hist, a[0], a[1], omega, it);
    __syncthreads();
    if (s[S_STATUS] != T(0) || !has) return;
    const T beta = s[S_BETA];
    pi = ri + beta * (pi - omega * vi);
    p[i] = pi;
    if (mode == FUSE_JACOBI) phat[i] = di * pi;
}

#define ARNOLDI_WARPS (SOLVER_THREADS / 32)
// Basis vectors whose loads one thread keeps in flight in the fused Arnoldi step.
#define ARNOLDI_BATCH 8

// GMRES, one launch for column j's CGS2 (gmres_dots, gmres_update twice), the column recurrence
// and gmres_scale. Every block computes the coefficients c itself (each k's partials in block
// order, as gmres_dots' last block); block 0 writes them to small and runs the column recurrence
// (Givens rotations on the small arrays: once, not in every block). The others scale v_{j+1}
// by 1/|w| computed from the same total, as the recurrence does; when the recurrence sets the
// status, v_{j+1} is scaled although gmres_scale would not have, which nothing reads (the
// correction uses v_0 ... v_j, a restart rebuilds the basis). Partials: 2 * nv * gridDim.x.
template <typename T>
__device__ void gmres_arnoldi_(const unsigned long long* vptr, u32 n, u32 j, T* s, T* small, u32 m,
                               T* partials, u32* bar, T* hist, u32 it) {
    __shared__ T c[GMRES_MAX_COLS];
    __shared__ const T* vs[GMRES_MAX_COLS];
    __shared__ T wsum[GMRES_MAX_COLS][ARNOLDI_WARPS];
    const GmresLay L{m};
    const u32 nv = j + 1, G = gridDim.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 phase = 0;
    // The pointer table and the status in one round trip.
    T* w = reinterpret_cast<T*>(vptr[j + 1]);
    for (u32 k = threadIdx.x; k < nv; k += blockDim.x) vs[k] = reinterpret_cast<const T*>(vptr[k]);
    const bool stopped = s[S_STATUS] != T(0);
    __syncthreads();
    if (stopped) return;
    T ww[1] = {T(0)};
    for (u32 pass = 0; pass < 2; ++pass) {
        const u32 coef = pass == 0 ? L.c1() : L.c2();
        // Block partials of c[k] = V[k].w, as gmres_dots (each k's block sum is block_sum's tree).
        for (u32 k0 = 0; k0 < nv; k0 += ARNOLDI_BATCH) {
            T acc[ARNOLDI_BATCH];
#pragma unroll
            for (int q = 0; q < ARNOLDI_BATCH; ++q) acc[q] = T(0);
            GRID_STRIDE(i, n) {
                const T wi = w[i];
#pragma unroll
                for (int q = 0; q < ARNOLDI_BATCH; ++q)
                    if (k0 + q < nv) acc[q] += vs[k0 + q][i] * wi;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int q = 0; q < ARNOLDI_BATCH; ++q) acc[q] += __shfl_down_sync(FULL_MASK, acc[q], o);
            if (lane == 0)
#pragma unroll
                for (int q = 0; q < ARNOLDI_BATCH; ++q)
                    if (k0 + q < nv) wsum[k0 + q][warp] = acc[q];
        }
        __syncthreads();
        T* part = partials + (phase++ & 1u) * nv * G;
        for (u32 k = warp; k < nv; k += ARNOLDI_WARPS) {
            T x = lane < ARNOLDI_WARPS ? wsum[k][lane] : T(0);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(FULL_MASK, x, o);
            if (lane == 0) part[k * G + blockIdx.x] = x;
        }
        grid_barrier_(bar);
        // Every block: each k's G partials in block order, as gmres_dots' last block.
        const volatile T* vp = part;
        for (u32 k = threadIdx.x; k < nv; k += blockDim.x) {
            T acc = T(0);
            for (u32 b = 0; b < G; ++b) acc += vp[k * G + b];
            c[k] = acc;
            if (blockIdx.x == 0) small[coef + k] = acc;
        }
        __syncthreads();
        // w -= V c, as gmres_update (the same order of subtractions).
        GRID_STRIDE(i, n) {
            T acc = w[i];
#pragma unroll 8
            for (u32 k = 0; k < nv; ++k) acc -= c[k] * vs[k][i];
            w[i] = acc;
            if (pass == 1) ww[0] += acc * acc;
        }
        __syncthreads();  // c is rewritten by the next pass
    }
    grid_allsum<1>(ww, partials, bar, phase);
    if (blockIdx.x == 0 && threadIdx.x == 0) gmres_column_rec_(s, small, L, hist, j, ww[0], it);
    // v_{j+1} = w / |w| with gmres_column_rec_'s factor.
    __shared__ T f;
    if (threadIdx.x == 0) {
        const T hnext = sqrt(ww[0] > T(0) ? ww[0] : T(0));
        f = hnext > T(0) ? T(1) / hnext : T(0);
    }
    __syncthreads();
    const T fs = f;
    GRID_STRIDE(i, n) w[i] *= fs;
}

// The entry points give the bodies the block's copy of the slots (which a body loads once it has
// issued its vector loads, so the two round trips overlap) and let block 0 write it back. bar[0] is
// the separate kernels' ticket (0 between launches), bar[1] the barrier word.
#define FUSED_ENTRIES(T, SUF)                                                                       \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_fused_##SUF(              \
        T* x, T* p, const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials,      \
        u32* bar, T* hist, u32 it) {                                                                \
        __shared__ T ls[NSLOTS_K];                                                                  \
        it += iter_base_(s);                                                                        \
        cg_fused_<T>(x, p, q, r, dinv, z, n, mode, ls, s, blockIdx.x == 0 ? hist : nullptr,         \
                     partials, bar + 1, it);                                                        \
        publish_slots_(ls, s);                                                                      \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_alpha_s_##SUF(          \
        const T* rhat, const T* r, const T* v, T* sv, const T* dinv, T* shat, u32 n, u32 mode,      \
        T* s, T* partials, u32* bar, u32 it) {                                                      \
        __shared__ T ls[NSLOTS_K];                                                                  \
        it += iter_base_(s);                                                                        \
        bicg_alpha_s_<T>(rhat, r, v, sv, dinv, shat, n, mode, ls, s, partials, bar + 1, it);        \
        publish_slots_(ls, s);                                                                      \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_update_p_##SUF(         \
        T* x, const T* shat, const T* sv, const T* t, T* r, const T* rhat, T* p, const T* v,        \
        const T* dinv, T* phat, u32 n, u32 mode, T* s, T* partials, u32* bar, T* hist, u32 it) {    \
        __shared__ T ls[NSLOTS_K];                                                                  \
        it += iter_base_(s);                                                                        \
        bicg_update_p_<T>(x, shat, sv, t, r, rhat, p, v, dinv, phat, n, mode, ls, s,                \
                          blockIdx.x == 0 ? hist : nullptr, partials, bar + 1, it);                 \
        publish_slots_(ls, s);                                                                      \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_arnoldi_##SUF(         \
        const unsigned long long* vptr, u32 n, u32 j, T* s, T* small, u32 m, T* partials, u32* bar, \
        T* hist, u32 it) {                                                                          \
        it += iter_base_(s);                                                                        \
        gmres_arnoldi_<T>(vptr, n, j, s, small, m, partials, bar + 1, hist, it);                    \
    }

FUSED_ENTRIES(float, f32)
FUSED_ENTRIES(double, f64)
