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
// 0 converged, 1 not converged within max_iters, 2 breakdown, 3 NaN/Inf, 4 zero diagonal or
// pivot (Jacobi or ILU(0) impossible).
//
// ILU(0): batch_ilu0_factor factors every system (one thread per system, Saad's IKJ variant on
// the system's own pattern, sorted column indices) into `lu` (the strict lower part is L with a
// unit diagonal, the rest U) and records each row's diagonal position. The solve kernels apply
// z = U^-1 L^-1 r inside the block: each thread substitutes its rows in order (the lower solve
// upwards, the upper solve downwards) and waits on a per-row flag for the rows it reads; a row's
// flag is set to the solve's epoch after its value is written, so no flag is ever reset. The
// lowest unfinished row always has its inputs, so the block cannot deadlock (independent thread
// scheduling, sm_70 and later).
#include "common.cuh"

// BATCH_RED: reduction slots (up to 4 values x 32 warps), a -D define from the Rust side.
#ifndef BATCH_RED
#error "BATCH_RED comes from the Rust side as a -D define (batched::gpu::RED_SLOTS)"
#endif
// The preconditioner codes of BatchArgs::precond (batched::gpu::PRECOND_*).
#ifndef BATCH_PRECOND_JACOBI
#error "BATCH_PRECOND_JACOBI comes from the Rust side as a -D define"
#endif
#ifndef BATCH_PRECOND_ILU0
#error "BATCH_PRECOND_ILU0 comes from the Rust side as a -D define"
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

// ILU(0) factor of one system, by one thread: lu = val on entry, then row by row
// a_ik <- a_ik / u_kk and a_ij <- a_ij - a_ik * u_kj for j > k stored in both rows. Records
// each row's diagonal position in dpos (global entry index). Returns false on a missing
// diagonal entry, or a pivot that is not finite or at most pivot_tol x the row's largest |a_ij|.
template <typename T>
__device__ bool sys_ilu0_factor(const u32* __restrict__ rp, const u32* __restrict__ col,
                                const T* __restrict__ val, u32 n, T* __restrict__ lu,
                                u32* __restrict__ dpos, double pivot_tol) {
    for (u32 p = rp[0]; p < rp[n]; ++p) lu[p] = val[p];
    for (u32 i = 0; i < n; ++i) {
        const u32 e = rp[i + 1];
        u32 p = rp[i];
        T rowmax = T(0);
        for (u32 q = p; q < e; ++q) rowmax = fmax(rowmax, fabs(val[q]));
        for (; p < e && col[p] < i; ++p) {
            const u32 k = col[p];
            const u32 dk = dpos[k];
            const T lik = lu[p] / lu[dk];
            lu[p] = lik;
            u32 a = p + 1, c = dk + 1;
            const u32 ek = rp[k + 1];
            while (a < e && c < ek) {
                if (col[a] == col[c]) {
                    lu[a] -= lik * lu[c];
                    ++a;
                    ++c;
                } else if (col[a] < col[c]) {
                    ++a;
                } else {
                    ++c;
                }
            }
        }
        if (p == e || col[p] != i) return false;
        dpos[i] = p;
        const T piv = lu[p];
        if (!isfinite(piv) || !(fabs(piv) > (T)pivot_tol * rowmax)) return false;
    }
    return true;
}

// out = U^-1 L^-1 in for one system with the factor of sys_ilu0_factor (see the file comment).
// `flags` holds n words; `epoch` advances by two per call (the same on every thread).
template <typename T>
__device__ void sys_ilu0_apply(const u32* __restrict__ rp, const u32* __restrict__ col,
                               const T* __restrict__ lu, const u32* __restrict__ dp, u32 n,
                               const T* in, T* out_, volatile u32* flags, u32& epoch) {
    volatile T* out = out_;
    __syncthreads(); // `in` complete, earlier readers of `out` done
    const u32 lo = ++epoch;
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        T s = in[i];
        for (u32 p = rp[i]; p < dp[i]; ++p) {
            const u32 j = col[p];
            while (flags[j] != lo) {
            }
            __threadfence_block();
            s -= lu[p] * out[j];
        }
        out[i] = s;
        __threadfence_block();
        flags[i] = lo;
    }
    __syncthreads();
    const u32 up = ++epoch;
    for (u32 t = threadIdx.x; t < n; t += blockDim.x) {
        const u32 i = n - 1 - t;
        const u32 d = dp[i];
        T s = out[i];
        for (u32 p = d + 1; p < rp[i + 1]; ++p) {
            const u32 j = col[p];
            while (flags[j] != up) {
            }
            __threadfence_block();
            s -= lu[p] * out[j];
        }
        out[i] = s / lu[d];
        __threadfence_block();
        flags[i] = up;
    }
    __syncthreads();
}

// The preconditioner's setup for one system: Jacobi's inverse diagonal into `dinv`, or (ILU(0))
// the flags in the same slot cleared. True when the preconditioner cannot be applied (a zero
// diagonal entry, or a failed factor recorded in status[sys] by batch_ilu0_factor).
template <typename T>
__device__ __forceinline__ bool sys_precond_setup(const u32* rp, const u32* col, const T* val,
                                                  u32 n, u32 precond, T* dinv, T* red,
                                                  const u32* status, u32 sys) {
    if (precond == BATCH_PRECOND_ILU0) {
        u32* flags = reinterpret_cast<u32*>(dinv);
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) flags[i] = 0u;
        return status[sys] != 0u; // read by every thread before BATCH_FINISH writes it
    }
    return sys_dinv(rp, col, val, n, precond == BATCH_PRECOND_JACOBI, dinv, red);
}

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
    const bool ilu = args.precond == BATCH_PRECOND_ILU0;                                           \
    const u32* dps = dpos + r0;                                                                    \
    u32 epoch = 0;                                                                                 \
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
                         BatchArgs args, const T* __restrict__ lu, const u32* __restrict__ dpos,
                         u32* status, u32* iters, T* resid) {
    const u32 SMALL = 0;
    BATCH_PROLOGUE(5)
    T* r = vecs;
    T* z = r + nm;
    T* p = z + nm;
    T* q = p + nm;
    T* dinv = q + nm;
    volatile u32* flags = reinterpret_cast<volatile u32*>(dinv);
    if (sys_precond_setup(rp, col, val, n, args.precond, dinv, red, status, sys))
        BATCH_FINISH(ST_ZERODIAG, 0)
    T s2[2] = {T(0), T(0)}; // (b,b), (r,z)
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        const T bi = bs[i];
        xs[i] = T(0);
        r[i] = bi;
        s2[0] += bi * bi;
        if (!ilu) {
            const T zi = dinv[i] * bi;
            z[i] = zi;
            p[i] = zi;
            s2[1] += bi * zi;
        }
    }
    if (ilu) {
        sys_ilu0_apply(rp, col, lu, dps, n, r, z, flags, epoch);
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
            p[i] = z[i];
            s2[1] += r[i] * z[i];
        }
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
            rr[0] += ri * ri;
            if (!ilu) {
                const T zi = dinv[i] * ri;
                z[i] = zi;
                rr[1] += ri * zi;
            }
        }
        if (ilu) {
            sys_ilu0_apply(rp, col, lu, dps, n, r, z, flags, epoch);
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) rr[1] += r[i] * z[i];
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
                               BatchArgs args, const T* __restrict__ lu, const u32* __restrict__ dpos,
                         u32* status, u32* iters, T* resid) {
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
    volatile u32* flags = reinterpret_cast<volatile u32*>(dinv);
    if (sys_precond_setup(rp, col, val, n, args.precond, dinv, red, status, sys))
        BATCH_FINISH(ST_ZERODIAG, 0)
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
            if (!ilu) ph[i] = dinv[i] * pi;
        }
        if (ilu) sys_ilu0_apply(rp, col, lu, dps, n, p, ph, flags, epoch);
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
            if (!ilu) sh[i] = dinv[i] * si;
            ss[0] += si * si;
        }
        block_sum<T, 1>(ss, red);
        if (sqrt(ss[0]) <= tol) {
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) xs[i] += alpha * ph[i];
            __syncthreads();
            BATCH_FINISH(ST_CONVERGED, it)
        }
        if (ilu) sys_ilu0_apply(rp, col, lu, dps, n, s, sh, flags, epoch);
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
                            BatchArgs args, const T* __restrict__ lu, const u32* __restrict__ dpos,
                         u32* status, u32* iters, T* resid) {
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
    volatile u32* flags = reinterpret_cast<volatile u32*>(dinv);
    if (sys_precond_setup(rp, col, val, n, args.precond, dinv, red, status, sys))
        BATCH_FINISH(ST_ZERODIAG, 0)
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
            if (ilu)
                sys_ilu0_apply(rp, col, lu, dps, n, vj, w, flags, epoch);
            else
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
        if (ilu) { // x += U^-1 L^-1 (V y), through w and the unused V[j]
            T* vt = V + (u64)j * nm;
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
                T s = T(0);
                for (u32 k = 0; k < j; ++k) s += y[k] * V[(u64)k * nm + i];
                w[i] = s;
            }
            sys_ilu0_apply(rp, col, lu, dps, n, w, vt, flags, epoch);
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) xs[i] += vt[i];
        } else {
            for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
                T s = T(0);
                for (u32 k = 0; k < j; ++k) s += y[k] * V[(u64)k * nm + i];
                xs[i] += dinv[i] * s;
            }
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

// One solver entry point: a resident grid loops over the systems.
#define BATCH_ENTRY(NAME, T, SUFFIX)                                                               \
    extern "C" __global__ void NAME##_##SUFFIX(                                                    \
        const u32* sys_ptr, const u32* row_ptr, const u32* col, const T* val, const T* b, T* x,    \
        T* work, BatchArgs args, const T* lu, const u32* dpos, u32* status, u32* iters,            \
        T* resid) {                                                                                \
        for (u32 sys = blockIdx.x; sys < args.nsys; sys += gridDim.x) {                            \
            NAME<T>(sys, sys_ptr, row_ptr, col, val, b, x, work, args, lu, dpos, status, iters,    \
                    resid);                                                                        \
            __syncthreads(); /* the next system reuses the shared memory */                        \
        }                                                                                          \
    }

// ILU(0) factors of every system, one thread per system; a failed system gets ST_ZERODIAG in
// status (zero on entry), which its solve then reports.
#define BATCH_INSTANTIATE(T, SUFFIX)                                                               \
    BATCH_ENTRY(batch_cg, T, SUFFIX)                                                               \
    BATCH_ENTRY(batch_bicgstab, T, SUFFIX)                                                         \
    BATCH_ENTRY(batch_gmres, T, SUFFIX)                                                            \
    extern "C" __global__ void batch_ilu0_factor_##SUFFIX(const u32* sys_ptr, const u32* row_ptr,  \
                                                          const u32* col, const T* val, T* lu,     \
                                                          u32* dpos, u32* status, u32 nsys,        \
                                                          double pivot_tol) {                      \
        for (u32 sys = blockIdx.x * blockDim.x + threadIdx.x; sys < nsys;                          \
             sys += gridDim.x * blockDim.x) {                                                      \
            const u32 r0 = sys_ptr[sys], n = sys_ptr[sys + 1] - r0;                                \
            if (!sys_ilu0_factor<T>(row_ptr + r0, col, val, n, lu, dpos + r0, pivot_tol))          \
                status[sys] = ST_ZERODIAG;                                                         \
        }                                                                                          \
    }

BATCH_INSTANTIATE(float, f32)
BATCH_INSTANTIATE(double, f64)
