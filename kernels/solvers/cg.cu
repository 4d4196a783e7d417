// Conjugate gradients: the separate steps (each ending in a reduction whose last block runs the
// recurrence of solvers/recur.cuh) and, for small systems, the fused step cg_fused (one
// cooperative launch for cg_alpha, cg_update_r and cg_update_xp; see solvers/reduce.cuh's grid
// barrier and backend::gpu's "Small systems").
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/steps.cuh"
#include "solvers/cols.cuh"

// Start: |r|^2 and rho = r^H z (z by mode; r^T z in COCG); recur::start.
template <typename T>
__device__ void cg_start_(const T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials,
                          u32* ticket, T* hist, u32 it) {
    const bool bil = is_complex_<T>::value && bilinear_(s);
    T v[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        const T ri = r[i];
        dotc_(v[0], ri, ri);
        if (mode == FUSE_JACOBI) {
            const T zi = dinv[i] * ri;
            z[i] = zi;
            form_acc_(v[1], ri, zi, bil);
        } else if (mode == FUSE_SEPARATE) {
            form_acc_(v[1], ri, z[i], bil);
        } else if (bil) {
            v[1] += ri * ri;
        }
    }
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0) {
        const T rr = v[0], rz = mode == FUSE_IDENTITY && !bil ? v[0] : v[1];
        start_rec_(s, hist, rr, rz, it);
    }
}

// CG: pq = p.q; alpha = rho / pq; breakdown when pq <= 0.
template <typename T>
__device__ void cg_alpha_(const T* p, const T* q, u32 n, T* s, T* partials, u32* ticket, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    const bool bil = is_complex_<T>::value && bilinear_(s);
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) form_acc_(v[0], p[i], q[i], bil);
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0) cg_alpha_rec_(s, v[0], it);
}

// CG: r -= alpha q (and z = dinv r); |r|^2, r.z; convergence; beta, rho.
template <typename T>
__device__ void cg_update_r_(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s,
                             T* partials, u32* ticket, T* hist, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T v[2] = {T(0), T(0)};
    cg_update_r_loop_(q, r, dinv, z, n, mode, s[S_ALPHA], v, is_complex_<T>::value && bilinear_(s));
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0)
        cg_update_r_rec_(s, hist, v[0], v[1], mode, it);
}

// PCG with a separate preconditioner: rz = r.z; beta, rho.
template <typename T>
__device__ void cg_rho_k_(const T* r, const T* z, u32 n, T* s, T* partials, u32* ticket, u32 it) {
    if (s[S_STATUS] != T(0)) return;
    const bool bil = is_complex_<T>::value && bilinear_(s);
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) form_acc_(v[0], r[i], z[i], bil);
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

// The fused entry points give the bodies the block's copy of the slots (which a body loads once
// it has issued its vector loads, so the two round trips overlap) and let block 0 write it back.
// bar[0] is the separate kernels' ticket (0 between launches), bar[1] the barrier word.
#define CG_ENTRIES(T, SUF)                                                                           \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_start_##SUF(              \
        const T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials, u32* ticket, T* hist,   \
        u32 it) {                                                                                    \
        it += iter_base_(s);                                                                         \
        cg_start_<T>(r, dinv, z, n, mode, s, partials, ticket, hist, it);                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_alpha_##SUF(              \
        const T* p, const T* q, u32 n, T* s, T* partials, u32* ticket, u32 it) {                     \
        it += iter_base_(s);                                                                         \
        cg_alpha_<T>(p, q, n, s, partials, ticket, it);                                              \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_update_r_##SUF(           \
        const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials, u32* ticket,      \
        T* hist, u32 it) {                                                                           \
        it += iter_base_(s);                                                                         \
        cg_update_r_<T>(q, r, dinv, z, n, mode, s, partials, ticket, hist, it);                      \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_rho_##SUF(                \
        const T* r, const T* z, u32 n, T* s, T* partials, u32* ticket, u32 it) {                     \
        it += iter_base_(s);                                                                         \
        cg_rho_k_<T>(r, z, n, s, partials, ticket, it);                                              \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_update_xp_##SUF(          \
        T* x, T* p, const T* z, u32 n, const T* s, u32 it) {                                         \
        it += iter_base_(s);                                                                         \
        cg_update_xp_<T>(x, p, z, n, s, it);                                                         \
    }

// The fused small-system steps: real types only (complex systems run the separate steps).
#define CG_ENTRIES_FUSED(T, SUF)                                                                   \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_cg_fused_##SUF(              \
        T* x, T* p, const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, T* s, T* partials,       \
        u32* bar, T* hist, u32 it) {                                                                 \
        __shared__ T ls[NSLOTS_K];                                                                   \
        it += iter_base_(s);                                                                         \
        cg_fused_<T>(x, p, q, r, dinv, z, n, mode, ls, s, blockIdx.x == 0 ? hist : nullptr,          \
                     partials, bar + 1, it);                                                         \
        publish_slots_(ls, s);                                                                       \
    }

// The block steps (solvers/cols.cuh): each column's blocks run the step above on its own
// buffers. Column pointers: 0 x, 1 p, 2 q, 3 r, 4 z (Jacobi's, or a separate preconditioner's;
// null without), 5 slots, 6 partials, 7 ticket (the fused step's barrier word follows it),
// 8 history; dinv is shared by the columns.
#define CG_BLOCK_ENTRIES(T, SUF)                                                                     \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_cg_alpha_##SUF(               \
        const ColTab tab, u32 n) {                                                                   \
        T* s = COL(T, 5);                                                                            \
        cg_alpha_<T>(COL(T, 1), COL(T, 2), n, s, COL(T, 6), COL(u32, 7), COL_IT + iter_base_(s));    \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_cg_update_r_##SUF(            \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        T* s = COL(T, 5);                                                                            \
        cg_update_r_<T>(COL(T, 2), COL(T, 3), dinv, COL(T, 4), n, mode, s, COL(T, 6), COL(u32, 7),   \
                        COL(T, 8), COL_IT + iter_base_(s));                                          \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_cg_rho_##SUF(                 \
        const ColTab tab, u32 n) {                                                                   \
        T* s = COL(T, 5);                                                                            \
        cg_rho_k_<T>(COL(T, 3), COL(T, 4), n, s, COL(T, 6), COL(u32, 7), COL_IT + iter_base_(s));    \
    }                                                                                                \
    /* z is r when the column has no z (no preconditioner). */                                      \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_cg_update_xp_##SUF(           \
        const ColTab tab, u32 n) {                                                                   \
        const T* s = COL(T, 5);                                                                      \
        const T* z = tab.p[blockIdx.y][4] ? COL(T, 4) : COL(T, 3);                                   \
        cg_update_xp_<T>(COL(T, 0), COL(T, 1), z, n, s, COL_IT + iter_base_(s));                     \
    }

// The fused block step: a cooperative launch whose columns meet at their own barrier words.
#define CG_BLOCK_ENTRIES_FUSED(T, SUF)                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_cg_fused_##SUF(               \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        __shared__ T ls[NSLOTS_K];                                                                   \
        T* s = COL(T, 5);                                                                            \
        const u32 it = COL_IT + iter_base_(s);                                                       \
        cg_fused_<T>(COL(T, 0), COL(T, 1), COL(T, 2), COL(T, 3), dinv, COL(T, 4), n, mode, ls, s,    \
                     blockIdx.x == 0 ? COL(T, 8) : nullptr, COL(T, 6), COL(u32, 7) + 1, it);        \
        publish_slots_(ls, s);                                                                       \
    }

CG_ENTRIES(float, f32)
CG_ENTRIES(double, f64)
CG_ENTRIES(cfloat, c64)
CG_ENTRIES(cdouble, c128)
CG_ENTRIES_FUSED(float, f32)
CG_ENTRIES_FUSED(double, f64)
CG_BLOCK_ENTRIES(float, f32)
CG_BLOCK_ENTRIES(double, f64)
CG_BLOCK_ENTRIES(cfloat, c64)
CG_BLOCK_ENTRIES(cdouble, c128)
CG_BLOCK_ENTRIES_FUSED(float, f32)
CG_BLOCK_ENTRIES_FUSED(double, f64)
