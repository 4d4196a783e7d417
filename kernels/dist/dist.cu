// Distributed solver steps (backend::nccl): the solvers' slots, status codes, grid_sum and
// recurrence functions (solvers/reduce.cuh, solvers/recur.cuh) on all-reduced sums.
//
// A single-GPU reduction step computes its sums and, in its last block, the recurrence. With
// several ranks the sums are partial: each step here is split in three, all queued on the
// rank's stream with no host round-trip:
//   1. a local kernel: the step's vector work and its (at most two) local sums, written by the
//      last block to red[0..2];
//   2. ncclAllReduce(red, sum) over the ranks (one all-reduce per step: the step's sums batched);
//   3. dist_finish: one thread applies the recurrence of backend::recur to the global sums.
// Every rank holds identical slots, so every rank skips (or runs) the same steps and the
// collectives always match. A stopped solve still runs steps 2 and 3 (on stale sums that the
// recurrence ignores), so the ranks' NCCL calls stay paired.

#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/steps.cuh"

// The step kinds of dist_finish (DIST_START ... DIST_DOT) are -D defines from the Rust side
// (backend::nccl::ops::Kind).
#if !defined(DIST_START) || !defined(DIST_CG_ALPHA) || !defined(DIST_CG_UPDATE_R) ||              \
    !defined(DIST_CG_RHO) || !defined(DIST_BICG_ALPHA) || !defined(DIST_BICG_OMEGA) ||            \
    !defined(DIST_BICG_UPDATE) || !defined(DIST_DOT)
#error "the dist_finish step kinds come from the Rust side as -D defines (backend::nccl::ops::Kind)"
#endif

// red = (a.b, c.d); c may be null (then red[1] = 0). gate: return at once when the status is set.
template <typename T>
__device__ void dist_dot2_(const T* a, const T* b, const T* c, const T* d, u32 n, T* red,
                           T* partials, u32* ticket, const T* s, u32 gate) {
    if (gate && s[S_STATUS] != T(0)) return;
    T v[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        v[0] += a[i] * b[i];
        if (c) v[1] += c[i] * d[i];
    }
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0) {
        red[0] = v[0];
        red[1] = v[1];
    }
}

// CG: r -= alpha q (and z = dinv r in Jacobi mode); red = (|r|^2, r.z).
template <typename T>
__device__ void dist_cg_update_r_(const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode,
                                  const T* s, T* red, T* partials, u32* ticket) {
    if (s[S_STATUS] != T(0)) return;
    T v[2] = {T(0), T(0)};
    cg_update_r_loop_(q, r, dinv, z, n, mode, s[S_ALPHA], v);
    if (grid_sum<2>(v, partials, ticket) && threadIdx.x == 0) {
        red[0] = v[0];
        red[1] = v[1];
    }
}

// BiCGSTAB: x += alpha phat + omega shat; r = s - omega t; red = (|r|^2, rhat.r).
template <typename T>
__device__ void dist_bicg_update_(T* x, const T* phat, const T* shat, const T* sv, const T* t,
                                  T* r, const T* rhat, u32 n, const T* s, T* red, T* partials,
                                  u32* ticket) {
    if (s[S_STATUS] != T(0)) return;
    T a[2] = {T(0), T(0)};
    bicg_update_loop_(x, phat, shat, sv, t, r, rhat, n, s[S_ALPHA], s[S_OMEGA], a);
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0) {
        red[0] = a[0];
        red[1] = a[1];
    }
}

// The recurrence of step `kind` on the all-reduced sums (one thread): the functions that the
// single-GPU kernels' last blocks run (solvers/recur.cuh, mirror of backend::recur).
template <typename T>
__device__ void dist_finish_(u32 kind, u32 mode, const T* red, T* s, T* hist, u32 it) {
    const T r0 = red[0], r1 = red[1];
    if (kind == DIST_DOT) { s[S_DOT] = r0; return; }
    if (kind == DIST_START) {
        start_rec_(s, hist, r0, mode == FUSE_IDENTITY ? r0 : r1, it);
        return;
    }
    if (s[S_STATUS] != T(0)) return;
    switch (kind) {
    case DIST_CG_ALPHA: cg_alpha_rec_(s, r0, it); break;
    case DIST_CG_UPDATE_R: cg_update_r_rec_(s, hist, r0, r1, mode, it); break;
    case DIST_CG_RHO: cg_rho_(s, r0, it); break;
    case DIST_BICG_ALPHA: bicg_alpha_rec_(s, r0, it); break;
    case DIST_BICG_OMEGA: bicg_omega_rec_(s, r0, r1, it); break;
    case DIST_BICG_UPDATE: bicg_update_rec_(s, hist, r0, r1, s[S_OMEGA], it); break;
    }
}

// Halo exchange kernels: sendbuf[k] = x[idx[k]], and y[rows[k]] += (A_oh halo)[k] for the
// compressed boundary block (one thread per boundary row: a slab decomposition of a stencil has
// one or two halo entries per boundary row).
template <typename T> __device__ void dist_gather_(const T* x, const u32* idx, T* out, u32 n) {
    GRID_STRIDE(k, n) out[k] = x[idx[k]];
}
template <typename T>
__device__ void dist_boundary_(const u32* rows, const u32* ptr, const u32* cols, const T* vals,
                               const T* halo, T* y, u32 nb) {
    GRID_STRIDE(k, nb) {
        T acc = T(0);
        for (u32 j = ptr[k]; j < ptr[k + 1]; ++j) acc += vals[j] * halo[cols[j]];
        y[rows[k]] += acc;
    }
}

#define DIST_ENTRIES(T, SUF)                                                                         \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) dist_dot2_##SUF(                    \
        const T* a, const T* b, const T* c, const T* d, u32 n, T* red, T* partials, u32* ticket,    \
        const T* s, u32 gate) {                                                                     \
        dist_dot2_<T>(a, b, c, d, n, red, partials, ticket, s, gate);                               \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) dist_cg_update_r_##SUF(             \
        const T* q, T* r, const T* dinv, T* z, u32 n, u32 mode, const T* s, T* red, T* partials,    \
        u32* ticket) {                                                                              \
        dist_cg_update_r_<T>(q, r, dinv, z, n, mode, s, red, partials, ticket);                     \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) dist_bicg_update_##SUF(             \
        T* x, const T* phat, const T* shat, const T* sv, const T* t, T* r, const T* rhat, u32 n,    \
        const T* s, T* red, T* partials, u32* ticket) {                                             \
        dist_bicg_update_<T>(x, phat, shat, sv, t, r, rhat, n, s, red, partials, ticket);           \
    }                                                                                               \
    extern "C" __global__ void dist_finish_##SUF(u32 kind, u32 mode, const T* red, T* s, T* hist,   \
                                                 u32 it) {                                          \
        dist_finish_<T>(kind, mode, red, s, hist, it);                                              \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) dist_gather_##SUF(                  \
        const T* x, const u32* idx, T* out, u32 n) {                                                \
        dist_gather_<T>(x, idx, out, n);                                                            \
    }                                                                                               \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) dist_boundary_##SUF(                \
        const u32* rows, const u32* ptr, const u32* cols, const T* vals, const T* halo, T* y,       \
        u32 nb) {                                                                                   \
        dist_boundary_<T>(rows, ptr, cols, vals, halo, y, nb);                                      \
    }

DIST_ENTRIES(float, f32)
DIST_ENTRIES(double, f64)
