// BiCGSTAB: the separate steps and, for small systems, the fused steps bicg_alpha_s and
// bicg_update_p (cooperative launches; see solvers/reduce.cuh's grid barrier).
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/steps.cuh"
#include "solvers/cols.cuh"

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

// BiCGSTAB: rv = rhat^H v; alpha = rho / rv.
template <typename T>
__device__ void bicg_alpha_(const T* rhat, const T* v, u32 n, T* s, T* partials, u32* ticket,
                            u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T a[1] = {T(0)};
    GRID_STRIDE(i, n) dotc_(a[0], rhat[i], v[i]);
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

// BiCGSTAB: ts = t^H s, tt = t^H t; omega = ts / tt (0 when t = 0).
template <typename T>
__device__ void bicg_omega_(const T* t, const T* sv, u32 n, T* s, T* partials, u32* ticket,
                            u32 it) {
    if (s[S_STATUS] != T(0)) return;
    T a[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        const T ti = t[i];
        dotc_(a[0], ti, sv[i]);
        dotc_(a[1], ti, ti);
    }
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0) bicg_omega_rec_(s, a[0], a[1], it);
}

// BiCGSTAB: x += alpha phat + omega shat; r = s - omega t; |r|^2, rhat.r; tests; beta, rho.
template <typename T>
__device__ void bicg_update_(T* x, const T* phat, const T* shat, const T* sv, const T* t, T* r,
                             const T* rhat, u32 n, T* s, T* partials, u32* ticket, T* hist,
                             u32 it) {
    if (s[S_STATUS] != T(0)) return;
    const T omega = s[S_OMEGA];
    T a[2] = {T(0), T(0)};
    bicg_update_loop_(x, phat, shat, sv, t, r, rhat, n, s[S_ALPHA], omega, a);
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0)
        bicg_update_rec_(s, hist, a[0], a[1], omega, it);
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
    if (has) dotc_(a[0], rhi, vi);
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
        dotc_(a[0], ti, si);
        dotc_(a[1], ti, ti);
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
        dotc_(a[0], ri, ri);
        dotc_(a[1], rhi, ri);
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

// The fused entry points give the bodies the block's copy of the slots (which a body loads once
// it has issued its vector loads, so the two round trips overlap) and let block 0 write it back.
// bar[0] is the separate kernels' ticket (0 between launches), bar[1] the barrier word.
#define BICGSTAB_ENTRIES(T, SUF)                                                                     \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_p_##SUF(                \
        const T* r, const T* v, T* p, const T* dinv, T* phat, u32 n, u32 mode, const T* s) {         \
        bicg_p_<T>(r, v, p, dinv, phat, n, mode, s);                                                 \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_alpha_##SUF(            \
        const T* rhat, const T* v, u32 n, T* s, T* partials, u32* ticket, u32 it) {                  \
        it += iter_base_(s);                                                                         \
        bicg_alpha_<T>(rhat, v, n, s, partials, ticket, it);                                         \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_s_##SUF(                \
        const T* r, const T* v, T* sv, const T* dinv, T* shat, u32 n, u32 mode, const T* s) {        \
        bicg_s_<T>(r, v, sv, dinv, shat, n, mode, s);                                                \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_omega_##SUF(            \
        const T* t, const T* sv, u32 n, T* s, T* partials, u32* ticket, u32 it) {                    \
        it += iter_base_(s);                                                                         \
        bicg_omega_<T>(t, sv, n, s, partials, ticket, it);                                           \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_update_##SUF(           \
        T* x, const T* phat, const T* shat, const T* sv, const T* t, T* r, const T* rhat, u32 n,     \
        T* s, T* partials, u32* ticket, T* hist, u32 it) {                                           \
        it += iter_base_(s);                                                                         \
        bicg_update_<T>(x, phat, shat, sv, t, r, rhat, n, s, partials, ticket, hist, it);            \
    }

// The fused small-system steps: real types only (complex systems run the separate steps).
#define BICGSTAB_ENTRIES_FUSED(T, SUF)                                                             \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_alpha_s_##SUF(          \
        const T* rhat, const T* r, const T* v, T* sv, const T* dinv, T* shat, u32 n, u32 mode,       \
        T* s, T* partials, u32* bar, u32 it) {                                                       \
        __shared__ T ls[NSLOTS_K];                                                                   \
        it += iter_base_(s);                                                                         \
        bicg_alpha_s_<T>(rhat, r, v, sv, dinv, shat, n, mode, ls, s, partials, bar + 1, it);         \
        publish_slots_(ls, s);                                                                       \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_bicg_update_p_##SUF(         \
        T* x, const T* shat, const T* sv, const T* t, T* r, const T* rhat, T* p, const T* v,         \
        const T* dinv, T* phat, u32 n, u32 mode, T* s, T* partials, u32* bar, T* hist, u32 it) {     \
        __shared__ T ls[NSLOTS_K];                                                                   \
        it += iter_base_(s);                                                                         \
        bicg_update_p_<T>(x, shat, sv, t, r, rhat, p, v, dinv, phat, n, mode, ls, s,                 \
                          blockIdx.x == 0 ? hist : nullptr, partials, bar + 1, it);                  \
        publish_slots_(ls, s);                                                                       \
    }

// The block steps (solvers/cols.cuh): each column's blocks run the step above on its own
// buffers. Column pointers: 0 x, 1 r, 2 r-hat, 3 p, 4 v, 5 s, 6 t, 7 p-hat, 8 s-hat (both null
// without a preconditioner: p and s stand for them), 9 slots, 10 partials, 11 ticket (the fused
// steps' barrier word follows it), 12 history; mode and dinv are shared by the columns.
#define BICG_PHAT(T) (tab.p[blockIdx.y][7] ? COL(T, 7) : COL(T, 3))
#define BICG_SHAT(T) (tab.p[blockIdx.y][8] ? COL(T, 8) : COL(T, 5))
#define BICGSTAB_BLOCK_ENTRIES(T, SUF)                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_p_##SUF(                 \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        bicg_p_<T>(COL(T, 1), COL(T, 4), COL(T, 3), dinv, COL(T, 7), n, mode, COL(T, 9));            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_alpha_##SUF(             \
        const ColTab tab, u32 n) {                                                                   \
        T* s = COL(T, 9);                                                                            \
        bicg_alpha_<T>(COL(T, 2), COL(T, 4), n, s, COL(T, 10), COL(u32, 11), COL_IT + iter_base_(s)); \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_s_##SUF(                 \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        bicg_s_<T>(COL(T, 1), COL(T, 4), COL(T, 5), dinv, COL(T, 8), n, mode, COL(T, 9));            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_omega_##SUF(             \
        const ColTab tab, u32 n) {                                                                   \
        T* s = COL(T, 9);                                                                            \
        bicg_omega_<T>(COL(T, 6), COL(T, 5), n, s, COL(T, 10), COL(u32, 11), COL_IT + iter_base_(s)); \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_update_##SUF(            \
        const ColTab tab, u32 n) {                                                                   \
        T* s = COL(T, 9);                                                                            \
        bicg_update_<T>(COL(T, 0), BICG_PHAT(T), BICG_SHAT(T), COL(T, 5), COL(T, 6), COL(T, 1),      \
                        COL(T, 2), n, s, COL(T, 10), COL(u32, 11), COL(T, 12),                       \
                        COL_IT + iter_base_(s));                                                     \
    }

// The fused block steps: cooperative launches whose columns meet at their own barrier words.
#define BICGSTAB_BLOCK_ENTRIES_FUSED(T, SUF)                                                         \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_alpha_s_##SUF(           \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        __shared__ T ls[NSLOTS_K];                                                                   \
        T* s = COL(T, 9);                                                                            \
        const u32 it = COL_IT + iter_base_(s);                                                       \
        bicg_alpha_s_<T>(COL(T, 2), COL(T, 1), COL(T, 4), COL(T, 5), dinv, COL(T, 8), n, mode, ls,   \
                         s, COL(T, 10), COL(u32, 11) + 1, it);                                       \
        publish_slots_(ls, s);                                                                       \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_bicg_update_p_##SUF(          \
        const ColTab tab, u32 n, u32 mode, const T* dinv) {                                          \
        __shared__ T ls[NSLOTS_K];                                                                   \
        T* s = COL(T, 9);                                                                            \
        const u32 it = COL_IT + iter_base_(s);                                                       \
        bicg_update_p_<T>(COL(T, 0), BICG_SHAT(T), COL(T, 5), COL(T, 6), COL(T, 1), COL(T, 2),      \
                          COL(T, 3), COL(T, 4), dinv, COL(T, 7), n, mode, ls, s,                     \
                          blockIdx.x == 0 ? COL(T, 12) : nullptr, COL(T, 10), COL(u32, 11) + 1, it);  \
        publish_slots_(ls, s);                                                                       \
    }

BICGSTAB_ENTRIES(float, f32)
BICGSTAB_ENTRIES(double, f64)
BICGSTAB_ENTRIES(cfloat, c64)
BICGSTAB_ENTRIES(cdouble, c128)
BICGSTAB_ENTRIES_FUSED(float, f32)
BICGSTAB_ENTRIES_FUSED(double, f64)
BICGSTAB_BLOCK_ENTRIES(float, f32)
BICGSTAB_BLOCK_ENTRIES(double, f64)
BICGSTAB_BLOCK_ENTRIES(cfloat, c64)
BICGSTAB_BLOCK_ENTRIES(cdouble, c128)
BICGSTAB_BLOCK_ENTRIES_FUSED(float, f32)
BICGSTAB_BLOCK_ENTRIES_FUSED(double, f64)
