// Distributed solver steps (src/dist/nccl.rs). This text is appended to solvers/blas1.cu, whose
// slots, status codes, grid_sum and recurrence functions it uses.
//
// A single-GPU reduction step computes its sums and, in its last block, the recurrence. With
// several ranks the sums are partial: each step here is split in three, all queued on the
// rank's stream with no host round-trip:
//   1. a local kernel: the step's vector work and its (at most two) local sums, written by the
//      last block to red[0..2];
//   2. ncclAllReduce(red, sum) over the ranks (one all-reduce per step: the step's sums batched);
//   3. dist_finish: one thread applies the recurrence of solvers::recur to the global sums.
// Every rank holds identical slots, so every rank skips (or runs) the same steps and the
// collectives always match. A stopped solve still runs steps 2 and 3 (on stale sums that the
// recurrence ignores), so the ranks' NCCL calls stay paired.

#define DIST_START 0
#define DIST_CG_ALPHA 1
#define DIST_CG_UPDATE_R 2
#define DIST_CG_RHO 3
#define DIST_BICG_ALPHA 4
#define DIST_BICG_OMEGA 5
#define DIST_BICG_UPDATE 6
#define DIST_DOT 7

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
    const T alpha = s[S_ALPHA], omega = s[S_OMEGA];
    T a[2] = {T(0), T(0)};
    GRID_STRIDE(i, n) {
        x[i] += alpha * phat[i] + omega * shat[i];
        const T ri = sv[i] - omega * t[i];
        r[i] = ri;
        a[0] += ri * ri;
        a[1] += rhat[i] * ri;
    }
    if (grid_sum<2>(a, partials, ticket) && threadIdx.x == 0) {
        red[0] = a[0];
        red[1] = a[1];
    }
}

// The recurrence of step `kind` on the all-reduced sums (one thread). Mirrors solvers::recur,
// like the last blocks of blas1.cu.
template <typename T>
__device__ void dist_finish_(u32 kind, u32 mode, const T* red, T* s, T* hist, u32 it) {
    const T r0 = red[0], r1 = red[1];
    if (kind == DIST_DOT) { s[S_DOT] = r0; return; }
    if (kind == DIST_START) {
        const T rz = mode == FUSE_IDENTITY ? r0 : r1;
        s[S_RHO] = rz;
        s[S_RR0] = r0;
        s[S_ALPHA] = T(1);
        s[S_OMEGA] = T(1);
        s[S_BETA] = T(0);
        if (!finite_(rz)) { stop_(s, ST_NONFINITE, it); return; }
        test_rr_(s, hist, r0, it);
        return;
    }
    if (s[S_STATUS] != T(0)) return;
    switch (kind) {
    case DIST_CG_ALPHA:
        s[S_PQ] = r0;
        if (!finite_(r0)) { s[S_ALPHA] = T(0); stop_(s, ST_NONFINITE, it); }
        else if (r0 <= T(0)) { s[S_ALPHA] = T(0); stop_(s, ST_BREAKDOWN_PQ, it); }
        else s[S_ALPHA] = s[S_RHO] / r0;
        break;
    case DIST_CG_UPDATE_R:
        if (test_rr_(s, hist, r0, it)) return;
        if (mode == FUSE_IDENTITY) cg_rho_(s, r0, it);
        else if (mode == FUSE_JACOBI) cg_rho_(s, r1, it);
        break;
    case DIST_CG_RHO:
        cg_rho_(s, r0, it);
        break;
    case DIST_BICG_ALPHA: {
        s[S_PQ] = r0;
        const T alpha = s[S_RHO] / r0;
        if (!finite_(r0)) stop_(s, ST_NONFINITE, it);
        else if (r0 == T(0) || !finite_(alpha)) stop_(s, ST_BREAKDOWN_RV, it);
        else s[S_ALPHA] = alpha;
        break;
    }
    case DIST_BICG_OMEGA:
        s[S_TS] = r0;
        s[S_TT] = r1;
        if (!finite_(r0) || !finite_(r1)) stop_(s, ST_NONFINITE, it);
        else s[S_OMEGA] = r1 > T(0) ? r0 / r1 : T(0);
        break;
    case DIST_BICG_UPDATE: {
        const T omega = s[S_OMEGA];
        if (test_rr_(s, hist, r0, it)) return;
        if (!finite_(r1)) stop_(s, ST_NONFINITE, it);
        else if (omega == T(0)) stop_(s, ST_BREAKDOWN_OMEGA, it);
        else if (r1 * r1 <= eps_(T(0)) * eps_(T(0)) * s[S_RR0] * r0) stop_(s, ST_BREAKDOWN_RHO, it);
        else {
            s[S_BETA] = (r1 / s[S_RHO]) * (s[S_ALPHA] / omega);
            s[S_RHO] = r1;
        }
        break;
    }
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
