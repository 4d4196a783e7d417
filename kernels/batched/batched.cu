// Batched iterative solves of many independent small sparse systems: one thread block per
// system, the whole solve (every iteration, its dot products and its convergence test) inside
// one kernel launch, so a batch of 10^4 systems costs one launch instead of 10^4 solves of a few
// hundred launches each.
//
// Layout: the systems' CSR arrays are concatenated. sys_ptr[s]..sys_ptr[s+1] are system s's
// rows in the global row_ptr (whose values are global entry offsets); column indices are local
// to the system; b, x and the per-system outputs follow the same row numbering.
//
// A grid of resident blocks loops over the systems (block i solves systems i, i + grid, ...).
// Work vectors live in dynamic shared memory when they fit (the host decides, `use_smem`),
// else in a global workspace of `nvec * nmax` elements per block; the code addresses both
// through the same generic pointer. The first BATCH_RED slots of shared memory are the
// block-reduction buffer (and GMRES's small Hessenberg/Givens arrays after it).
//
// Reductions sum each warp's partial (xor shuffles) and then the warps' partials in warp
// order, so every result is reproducible run to run. Status codes (per system):
// 0 converged, 1 not converged within max_iters, 2 breakdown, 3 NaN/Inf, 4 zero diagonal
// (Jacobi impossible).
#include "common.cuh"

// BATCH_RED: reduction slots (up to 4 values x 32 warps), a -D define from the Rust side.
#ifndef BATCH_RED
#error "BATCH_RED comes from the Rust side as a -D define (batched::gpu::RED_SLOTS)"
#endif

enum { ST_CONVERGED = 0, ST_MAXITER = 1, ST_BREAKDOWN = 2, ST_NONFINITE = 3, ST_ZERODIAG = 4 };

template <typename T, int NV>
__device__ __forceinline__ void block_sum(T (&v)[NV], T* red) {
#pragma unroll
    for (int i = 0; i < NV; ++i)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v[i] += __shfl_xor_sync(FULL_MASK, v[i], o);
    const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31u, nw = blockDim.x >> 5;
    __syncthreads(); // every thread has read the previous reduction's result
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < NV; ++i) red[i * 32 + warp] = v[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        T s = T(0);
        for (u32 w = 0; w < nw; ++w) s += red[i * 32 + w];
        v[i] = s;
    }
}

template <typename T> __device__ __forceinline__ bool finite(T v) { return isfinite(v); }

// out = A * in for one system (thread per row).
template <typename T>
__device__ __forceinline__ void sys_spmv(const u32* __restrict__ rp, const u32* __restrict__ col,
                                         const T* __restrict__ val, u32 n, const T* in, T* out) {
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        T s = T(0);
        for (u32 p = rp[i]; p < rp[i + 1]; ++p) s += val[p] * in[col[p]];
        out[i] = s;
    }
}

// dinv = 1/diag (Jacobi) or 1; returns through the reduction whether a diagonal entry is zero.
template <typename T>
__device__ __forceinline__ bool sys_dinv(const u32* rp, const u32* col, const T* val, u32 n,
                                         u32 precond, T* dinv, T* red) {
    T bad[1] = {T(0)};
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        T d = T(0);
        for (u32 p = rp[i]; p < rp[i + 1]; ++p)
            if (col[p] == i) d += val[p];
        if (precond) {
            if (d == T(0) || !isfinite(d)) bad[0] += T(1);
            dinv[i] = T(1) / d;
        } else {
            dinv[i] = T(1);
        }
    }
    block_sum<T, 1>(bad, red);
    return bad[0] != T(0);
}

struct BatchArgs {
    u32 nsys, nmax, use_smem, precond, max_iters, restart;
    double rel_tol, abs_tol;
};

// Common prologue: the system's arrays and its vectors.
#define BATCH_PROLOGUE(NVEC)                                                                       \
    extern __shared__ __align__(16) unsigned char batch_smem[];                                    \
    T* red = reinterpret_cast<T*>(batch_smem);                                                     \
    if (sys >= args.nsys) return;                                                                  \
    const u32 r0 = sys_ptr[sys], n = sys_ptr[sys + 1] - r0;                                        \
    const u32* rp = row_ptr + r0;                                                                  \
    const T* bs = b + r0;                                                                          \
    T* xs = x + r0;                                                                                \
    T* vecs = args.use_smem ? red + BATCH_RED + SMALL                                             \
                            : work + (u64)blockIdx.x * (u64)(NVEC) * (u64)args.nmax;               \
    const u32 nm = args.nmax;                                                                      \
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) xs[i] = T(0); /* the guess is zero */        \
    (void)nm;

#define BATCH_FINISH(STATUS, IT)                                                                   \
    {                                                                                              \
        /* true residual ||b - A x|| / ||b|| into resid */                                         \
        T acc[2] = {T(0), T(0)};                                                                   \
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {                                        \
            T s = T(0);                                                                            \
            for (u32 p = rp[i]; p < rp[i + 1]; ++p) s += val[p] * xs[col[p]];                      \
            const T d = bs[i] - s;                                                                 \
            acc[0] += d * d;                                                                       \
            acc[1] += bs[i] * bs[i];                                                                \
        }                                                                                          \
        block_sum<T, 2>(acc, red);                                                                 \
        if (threadIdx.x == 0) {                                                                    \
            status[sys] = (STATUS);                                                                \
            iters[sys] = (IT);                                                                     \
            resid[sys] = acc[1] > T(0) ? sqrt(acc[0] / acc[1]) : sqrt(acc[0]);                     \
        }                                                                                          \
        return;                                                                                    \
    }

// ---- Preconditioned CG (Jacobi or none). Vectors: r z p q dinv. ------------------------------
template <typename T>
__device__ void batch_cg(u32 sys, const u32* __restrict__ sys_ptr, const u32* __restrict__ row_ptr,
                         const u32* __restrict__ col, const T* __restrict__ val,
                         const T* __restrict__ b, T* __restrict__ x, T* __restrict__ work,
                         BatchArgs args, u32* status, u32* iters, T* resid) {
    const u32 SMALL = 0;
    BATCH_PROLOGUE(5)
    T* r = vecs;
    T* z = r + nm;
    T* p = z + nm;
    T* q = p + nm;
    T* dinv = q + nm;
    if (sys_dinv(rp, col, val, n, args.precond, dinv, red)) BATCH_FINISH(ST_ZERODIAG, 0)
    T s2[2] = {T(0), T(0)}; // (b,b), (r,z)
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        const T bi = bs[i];
        xs[i] = T(0);
        r[i] = bi;
        const T zi = dinv[i] * bi;
        z[i] = zi;
        p[i] = zi;
        s2[0] += bi * bi;
        s2[1] += bi * zi;
    }
    block_sum<T, 2>(s2, red);
    if (!finite(s2[0]) || !finite(s2[1])) BATCH_FINISH(ST_NONFINITE, 0)
    const T tol = fmax((T)args.rel_tol * sqrt(s2[0]), (T)args.abs_tol);
    T rz = s2[1];
    if (sqrt(s2[0]) <= tol) BATCH_FINISH(ST_CONVERGED, 0)
    for (u32 it = 1; it <= args.max_iters; ++it) {
        __syncthreads(); // p complete
        sys_spmv(rp, col, val, n, p, q);
        T pq[1] = {T(0)};
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) pq[0] += p[i] * q[i];
        block_sum<T, 1>(pq, red);
        if (!finite(pq[0])) BATCH_FINISH(ST_NONFINITE, it)
        if (!(pq[0] > T(0))) BATCH_FINISH(ST_BREAKDOWN, it)
        const T alpha = rz / pq[0];
        T rr[2] = {T(0), T(0)}; // (r,r), (r,z)
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            xs[i] += alpha * p[i];
            const T ri = r[i] - alpha * q[i];
            r[i] = ri;
            const T zi = dinv[i] * ri;
            z[i] = zi;
            rr[0] += ri * ri;
            rr[1] += ri * zi;
        }
        block_sum<T, 2>(rr, red);
        if (!finite(rr[0])) BATCH_FINISH(ST_NONFINITE, it)
        if (sqrt(rr[0]) <= tol) BATCH_FINISH(ST_CONVERGED, it)
        const T beta = rr[1] / rz;
        rz = rr[1];
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) p[i] = z[i] + beta * p[i];
    }
    BATCH_FINISH(ST_MAXITER, args.max_iters)
}

// ---- BiCGSTAB, right-preconditioned. Vectors: r rh p v s t ph sh dinv. ----------------------
template <typename T>
__device__ void batch_bicgstab(u32 sys, const u32* __restrict__ sys_ptr, const u32* __restrict__ row_ptr,
                               const u32* __restrict__ col, const T* __restrict__ val,
                               const T* __restrict__ b, T* __restrict__ x, T* __restrict__ work,
                               BatchArgs args, u32* status, u32* iters, T* resid) {
    const u32 SMALL = 0;
    BATCH_PROLOGUE(9)
    T* r = vecs;
    T* rh = r + nm;
    T* p = rh + nm;
    T* v = p + nm;
    T* s = v + nm;
    T* t = s + nm;
    T* ph = t + nm;
    T* sh = ph + nm;
    T* dinv = sh + nm;
    if (sys_dinv(rp, col, val, n, args.precond, dinv, red)) BATCH_FINISH(ST_ZERODIAG, 0)
    T s1[1] = {T(0)};
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        const T bi = bs[i];
        xs[i] = T(0);
        r[i] = bi;
        rh[i] = bi;
        p[i] = T(0);
        v[i] = T(0);
        s1[0] += bi * bi;
    }
    block_sum<T, 1>(s1, red);
    if (!finite(s1[0])) BATCH_FINISH(ST_NONFINITE, 0)
    const T tol = fmax((T)args.rel_tol * sqrt(s1[0]), (T)args.abs_tol);
    if (sqrt(s1[0]) <= tol) BATCH_FINISH(ST_CONVERGED, 0)
    T rho = T(1), alpha = T(1), omega = T(1), rho_new = s1[0]; // (rh, r) = (b, b) at start
    for (u32 it = 1; it <= args.max_iters; ++it) {
        if (rho_new == T(0)) BATCH_FINISH(ST_BREAKDOWN, it)
        const T beta = (rho_new / rho) * (alpha / omega);
        rho = rho_new;
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            const T pi = r[i] + beta * (p[i] - omega * v[i]);
            p[i] = pi;
            ph[i] = dinv[i] * pi;
        }
        __syncthreads();
        sys_spmv(rp, col, val, n, ph, v);
        T rv[1] = {T(0)};
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) rv[0] += rh[i] * v[i];
        block_sum<T, 1>(rv, red);
        if (!finite(rv[0])) BATCH_FINISH(ST_NONFINITE, it)
        if (rv[0] == T(0)) BATCH_FINISH(ST_BREAKDOWN, it)
        alpha = rho / rv[0];
        T ss[1] = {T(0)};
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            const T si = r[i] - alpha * v[i];
            s[i] = si;
            sh[i] = dinv[i] * si;
            ss[0] += si * si;
        }
        block_sum<T, 1>(ss, red);
        if (sqrt(ss[0]) <= tol) {
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) xs[i] += alpha * ph[i];
            __syncthreads();
            BATCH_FINISH(ST_CONVERGED, it)
        }
        sys_spmv(rp, col, val, n, sh, t);
        T tt[2] = {T(0), T(0)}; // (t,t), (t,s)
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            tt[0] += t[i] * t[i];
            tt[1] += t[i] * s[i];
        }
        block_sum<T, 2>(tt, red);
        if (!finite(tt[0]) || !finite(tt[1])) BATCH_FINISH(ST_NONFINITE, it)
        if (tt[0] == T(0)) BATCH_FINISH(ST_BREAKDOWN, it)
        omega = tt[1] / tt[0];
        T rr[2] = {T(0), T(0)}; // (r,r), (rh,r)
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            xs[i] += alpha * ph[i] + omega * sh[i];
            const T ri = s[i] - omega * t[i];
            r[i] = ri;
            rr[0] += ri * ri;
            rr[1] += rh[i] * ri;
        }
        block_sum<T, 2>(rr, red);
        if (!finite(rr[0])) BATCH_FINISH(ST_NONFINITE, it)
        if (sqrt(rr[0]) <= tol) BATCH_FINISH(ST_CONVERGED, it)
        if (omega == T(0)) BATCH_FINISH(ST_BREAKDOWN, it)
        rho_new = rr[1];
    }
    BATCH_FINISH(ST_MAXITER, args.max_iters)
}

// ---- GMRES(m), right-preconditioned, modified Gram-Schmidt, Givens rotations. ---------------
// Vectors: dinv w V[0..m]. Shared small arrays after the reduction slots: H (m+1)*m, cs m,
// sn m, g m+1, y m.
template <typename T>
__device__ void batch_gmres(u32 sys, const u32* __restrict__ sys_ptr, const u32* __restrict__ row_ptr,
                            const u32* __restrict__ col, const T* __restrict__ val,
                            const T* __restrict__ b, T* __restrict__ x, T* __restrict__ work,
                            BatchArgs args, u32* status, u32* iters, T* resid) {
    const u32 m = args.restart;
    const u32 SMALL = (m + 1) * m + 4 * m + 1;
    BATCH_PROLOGUE(args.restart + 3)
    T* H = red + BATCH_RED;
    T* cs = H + (m + 1) * m;
    T* sn = cs + m;
    T* g = sn + m;
    T* y = g + m + 1;
    T* dinv = vecs;
    T* w = dinv + nm;
    T* V = w + nm;
    if (sys_dinv(rp, col, val, n, args.precond, dinv, red)) BATCH_FINISH(ST_ZERODIAG, 0)
    T s1[1] = {T(0)};
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        xs[i] = T(0);
        V[i] = bs[i];
        s1[0] += bs[i] * bs[i];
    }
    block_sum<T, 1>(s1, red);
    if (!finite(s1[0])) BATCH_FINISH(ST_NONFINITE, 0)
    const T bnorm = sqrt(s1[0]);
    const T tol = fmax((T)args.rel_tol * bnorm, (T)args.abs_tol);
    if (bnorm <= tol) BATCH_FINISH(ST_CONVERGED, 0)
    T beta = bnorm; // ||r|| with r in V[0]
    u32 it = 0;
    T last_cycle_start = beta;
    while (true) {
        // V[0] = r / beta
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) V[i] /= beta;
        if (threadIdx.x == 0) {
            g[0] = beta;
            for (u32 k = 1; k <= m; ++k) g[k] = T(0);
        }
        u32 j = 0;
        bool done = false;
        T est = beta;
        for (; j < m && it < args.max_iters; ++j) {
            ++it;
            T* vj = V + (u64)j * nm;
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) w[i] = dinv[i] * vj[i];
            __syncthreads();
            T* vn = V + (u64)(j + 1) * nm;
            sys_spmv(rp, col, val, n, w, vn);
            for (u32 k = 0; k <= j; ++k) {
                const T* vk = V + (u64)k * nm;
                T h[1] = {T(0)};
                for (u32 i = threadIdx.x; i < n; i += blockDim.x) h[0] += vn[i] * vk[i];
                block_sum<T, 1>(h, red);
                for (u32 i = threadIdx.x; i < n; i += blockDim.x) vn[i] -= h[0] * vk[i];
                if (threadIdx.x == 0) H[k * m + j] = h[0];
            }
            T hn[1] = {T(0)};
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) hn[0] += vn[i] * vn[i];
            block_sum<T, 1>(hn, red);
            const T hnext = sqrt(hn[0]);
            if (!finite(hnext)) BATCH_FINISH(ST_NONFINITE, it)
            if (hnext > T(0))
                for (u32 i = threadIdx.x; i < n; i += blockDim.x) vn[i] /= hnext;
            if (threadIdx.x == 0) {
                H[(j + 1) * m + j] = hnext;
                for (u32 k = 0; k < j; ++k) { // previous rotations on column j
                    const T a = H[k * m + j], c = H[(k + 1) * m + j];
                    H[k * m + j] = cs[k] * a + sn[k] * c;
                    H[(k + 1) * m + j] = -sn[k] * a + cs[k] * c;
                }
                const T a = H[j * m + j], c = H[(j + 1) * m + j];
                const T rr = sqrt(a * a + c * c);
                cs[j] = rr > T(0) ? a / rr : T(1);
                sn[j] = rr > T(0) ? c / rr : T(0);
                H[j * m + j] = rr;
                H[(j + 1) * m + j] = T(0);
                g[j + 1] = -sn[j] * g[j];
                g[j] = cs[j] * g[j];
            }
            __syncthreads();
            est = fabs(g[j + 1]);
            if (H[j * m + j] == T(0)) BATCH_FINISH(ST_BREAKDOWN, it)
            if (est <= tol || hnext == T(0)) {
                ++j;
                done = true;
                break;
            }
        }
        // y = H[0..j, 0..j]^-1 g; x += M^-1 V y
        if (threadIdx.x == 0) {
            for (int k = (int)j - 1; k >= 0; --k) {
                T s = g[k];
                for (u32 l = k + 1; l < j; ++l) s -= H[k * m + l] * y[l];
                y[k] = s / H[k * m + k];
            }
        }
        __syncthreads();
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            T s = T(0);
            for (u32 k = 0; k < j; ++k) s += y[k] * V[(u64)k * nm + i];
            xs[i] += dinv[i] * s;
        }
        __syncthreads();
        // true residual into V[0]
        T rr[1] = {T(0)};
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            T s = T(0);
            for (u32 p = rp[i]; p < rp[i + 1]; ++p) s += val[p] * xs[col[p]];
            const T ri = bs[i] - s;
            V[i] = ri;
            rr[0] += ri * ri;
        }
        block_sum<T, 1>(rr, red);
        beta = sqrt(rr[0]);
        if (!finite(beta)) BATCH_FINISH(ST_NONFINITE, it)
        if (beta <= tol) BATCH_FINISH(ST_CONVERGED, it)
        if (it >= args.max_iters) BATCH_FINISH(ST_MAXITER, it)
        // A whole cycle without progress: stagnation (reported as breakdown).
        if (!done && !(beta < last_cycle_start * T(0.999999))) BATCH_FINISH(ST_BREAKDOWN, it)
        last_cycle_start = beta;
        (void)est;
    }
}

#define BATCH_INSTANTIATE(T, SUFFIX)                                                               \
    extern "C" __global__ void batch_cg_##SUFFIX(const u32* sys_ptr, const u32* row_ptr,          \
                                                 const u32* col, const T* val, const T* b, T* x,   \
                                                 T* work, BatchArgs args, u32* status,             \
                                                 u32* iters, T* resid) {                           \
        for (u32 sys = blockIdx.x; sys < args.nsys; sys += gridDim.x) {                          \
            batch_cg<T>(sys, sys_ptr, row_ptr, col, val, b, x, work, args, status, iters, resid);    \
            __syncthreads(); /* the next system reuses the shared memory */                        \
        }           \
    }                                                                                              \
    extern "C" __global__ void batch_bicgstab_##SUFFIX(const u32* sys_ptr, const u32* row_ptr,    \
                                                       const u32* col, const T* val, const T* b,   \
                                                       T* x, T* work, BatchArgs args,              \
                                                       u32* status, u32* iters, T* resid) {        \
        for (u32 sys = blockIdx.x; sys < args.nsys; sys += gridDim.x) {                          \
            batch_bicgstab<T>(sys, sys_ptr, row_ptr, col, val, b, x, work, args, status, iters, resid);    \
            __syncthreads(); /* the next system reuses the shared memory */                        \
        }     \
    }                                                                                              \
    extern "C" __global__ void batch_gmres_##SUFFIX(const u32* sys_ptr, const u32* row_ptr,       \
                                                    const u32* col, const T* val, const T* b,      \
                                                    T* x, T* work, BatchArgs args, u32* status,    \
                                                    u32* iters, T* resid) {                        \
        for (u32 sys = blockIdx.x; sys < args.nsys; sys += gridDim.x) {                          \
            batch_gmres<T>(sys, sys_ptr, row_ptr, col, val, b, x, work, args, status, iters, resid);    \
            __syncthreads(); /* the next system reuses the shared memory */                        \
        }        \
    }

BATCH_INSTANTIATE(float, f32)
BATCH_INSTANTIATE(double, f64)
