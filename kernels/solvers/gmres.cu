// GMRES(m): the cycle start, the block Gram-Schmidt dots and updates with the column recurrence
// (Givens rotations, residual estimate), the least-squares solve and the correction, and, for
// small systems, the fused Arnoldi step gmres_arnoldi (a cooperative launch).
//
// The basis may be stored narrower than the working type (V = float under T = double: the
// entry points with the suffix f64b32). Each stored value is widened exactly before it is used,
// so the dots, the updates and the correction compute in T what they compute for a T basis
// holding the rounded vectors; gmres_store writes a new basis vector rounded to V and, beside
// it, its widened copy `cur` that the operator is applied to next (so that A is applied to the
// vector the basis holds).
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/cols.cuh"

// ---- GMRES (mirror of backend::recur::{GmresLayout, gmres_start, gmres_column}) ---------------
//
// The basis is a table of m + 1 device pointers (vptr). Small arrays at the offsets below.

#ifndef GMRES_MAX_COLS
#error "GMRES_MAX_COLS comes from the Rust side as a -D define (backend::gpu::SOLVER_CONSTANTS)"
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

// (T real or complex: |r|^2, the norms and the rotations' sines are real values, the cosines
// complex, [conj(c) s; -s c] as in backend::recur.)
template <typename T> __device__ void gmres_start_rec_(T* s, T* small, GmresLay L, T* hist, T rr, u32 it) {
    typedef typename real_of<T>::type R;
    const R rrr = re_(rr);
    const R beta = sqrt(rrr > R(0) ? rrr : R(0));
    for (u32 i = 0; i <= L.m; ++i) small[L.g() + i] = T(0);
    small[L.g()] = T(beta);
    small[L.beta2()] = rr;
    small[L.scale()] = beta > R(0) ? T(R(1) / beta) : T(0);
    test_rr_(s, hist, rr, it);
}

template <typename T>
__device__ void gmres_column_rec_(T* s, T* small, GmresLay L, T* hist, u32 j, T ww, u32 it) {
    typedef typename real_of<T>::type R;
    const u32 ld = L.m + 1;
    const R wwr = re_(ww);
    const R hnext = sqrt(wwr > R(0) ? wwr : R(0));
    for (u32 i = 0; i <= j; ++i) {
        // volatile: in the fused Arnoldi kernel another block wrote them in this launch.
        const T h = ld_(small + L.c1() + i) + ld_(small + L.c2() + i);
        small[L.hess() + j * ld + i] = h;
        small[L.rmat() + j * ld + i] = h;
    }
    small[L.hess() + j * ld + j + 1] = T(hnext);
    for (u32 i = 0; i < j; ++i) {
        const T c = small[L.cs() + i], sn = small[L.sn() + i];
        const T a = small[L.rmat() + j * ld + i], b = small[L.rmat() + j * ld + i + 1];
        small[L.rmat() + j * ld + i] = conj_(c) * a + sn * b;
        small[L.rmat() + j * ld + i + 1] = c * b - sn * a;
    }
    const T a = small[L.rmat() + j * ld + j];
    const R d = sqrt(abs2_(a) + hnext * hnext);
    small[L.scale()] = hnext > R(0) ? T(R(1) / hnext) : T(0);
    if (!finite_(d) || !finite_(a)) { stop_(s, ST_NONFINITE, it); return; }
    if (d == R(0)) { stop_(s, ST_BREAKDOWN_ARNOLDI, it); return; }
    const T c = a / T(d), sn = T(hnext / d);
    small[L.cs() + j] = c;
    small[L.sn() + j] = sn;
    small[L.rmat() + j * ld + j] = T(d);
    small[L.rmat() + j * ld + j + 1] = T(0);
    const T gj = small[L.g() + j];
    small[L.g() + j] = conj_(c) * gj;
    small[L.g() + j + 1] = -sn * gj;
    const T rr = T(re_(sn * sn * gj * conj_(gj)));
    if (test_rr_(s, hist, rr, it)) return;
    if (j + 1 == L.m && re_(rr) >= (R(1) - eps_(R(0))) * re_(small[L.beta2()]))
        stop_(s, ST_STAGNATED, it);
}

// Start of a cycle: |r|^2, then the recurrence (v0 = r / |r| is gmres_scale's job).
template <typename T>
__device__ void gmres_start_(const T* r, u32 n, T* s, T* small, u32 m, T* partials, u32* ticket,
                             T* hist, u32 it) {
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) dotc_(v[0], r[i], r[i]);
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

// A basis stored narrower (V = float under T = double) is read two rows per load (a float2 of
// the basis beside a double2 of w), so that a thread keeps as many bytes in flight as with an
// f64 basis; without it the f32 basis kernels stalled on their loads at 36-41 % of DRAM peak
// (Nsight Compute, H200). Every vector is an allocation of its own (aligned), the pairs start
// at even rows, and the last row of an odd n is read alone.
template <typename T, typename V> struct PairRows { static constexpr bool on = false; };
template <> struct PairRows<double, float> { static constexpr bool on = true; };

// Block of inner products c[k] = V[k]^H w, k < nv: grid (gx, ceil(nv / GMRES_DOTS_BATCH), the
// batch a -D define of the backend); block
// (bx, q) sums its share of the vectors q·BATCH … q·BATCH + BATCH - 1 against one read of w, and
// the last block to finish sums each k's gx partials (a fixed order: deterministic) into
// small[out + k].
template <typename T, typename V = T>
__device__ void gmres_dots_(const unsigned long long* vptr, const T* w, u32 n, u32 nv, const T* s,
                            T* small, u32 out, T* partials, u32* ticket) {
    if (s[S_STATUS] != T(0)) return;
    __shared__ T smem[GMRES_DOTS_BATCH][32];
    __shared__ const V* vs[GMRES_DOTS_BATCH];
    __shared__ bool last;
    const u32 k0 = blockIdx.y * GMRES_DOTS_BATCH, gx = gridDim.x;
    const u32 nk = nv - k0 < GMRES_DOTS_BATCH ? nv - k0 : GMRES_DOTS_BATCH;
    if (threadIdx.x < nk) vs[threadIdx.x] = reinterpret_cast<const V*>(vptr[k0 + threadIdx.x]);
    __syncthreads();
    T v[GMRES_DOTS_BATCH];
#pragma unroll
    for (int q = 0; q < GMRES_DOTS_BATCH; ++q) v[q] = T(0);
    if constexpr (PairRows<T, V>::on) {
        const u32 np = n / 2;
        for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < np; p += gx * blockDim.x) {
            const double2 wp = reinterpret_cast<const double2*>(w)[p];
#pragma unroll
            for (int q = 0; q < GMRES_DOTS_BATCH; ++q)
                if (q < nk) {
                    const float2 vp = reinterpret_cast<const float2*>(vs[q])[p];
                    dotc_(v[q], T(vp.x), wp.x);
                    dotc_(v[q], T(vp.y), wp.y);
                }
        }
        if ((n & 1u) && blockIdx.x == 0 && threadIdx.x == 0) {
            const T wi = w[n - 1];
#pragma unroll
            for (int q = 0; q < GMRES_DOTS_BATCH; ++q)
                if (q < nk) dotc_(v[q], T(vs[q][n - 1]), wi);
        }
    } else {
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gx * blockDim.x) {
            const T wi = w[i];
#pragma unroll
            for (int q = 0; q < GMRES_DOTS_BATCH; ++q)
                if (q < nk) dotc_(v[q], T(vs[q][i]), wi);
        }
    }
    block_sum<GMRES_DOTS_BATCH>(v, smem);
    if (threadIdx.x == 0) {
        for (u32 q = 0; q < nk; ++q) partials[(k0 + q) * gx + blockIdx.x] = v[q];
        __threadfence();
        last = atomicAdd(ticket, 1u) == gx * gridDim.y - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // One warp per vector: each lane sums every 32nd partial in block order, then the warp's
    // shuffle tree (a fixed order: deterministic); the gx loads of a vector stay in flight
    // together instead of one serial chain.
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (u32 c = warp; c < nv; c += blockDim.x >> 5) {
        T acc[1] = {T(0)};
        for (u32 b = lane; b < gx; b += 32) acc[0] += ld_(partials + c * gx + b);
        warp_sum_down<1>(acc);
        if (lane == 0) small[out + c] = acc[0];
    }
    if (threadIdx.x == 0) *ticket = 0;
}

// w -= sum_k small[coef + k] V[k], k < nv. With final != 0 also |w|^2, and the last block runs
// the column recurrence (Givens rotations, residual estimate, tests) for column nv - 1.
template <typename T, typename V = T>
__device__ void gmres_update_(const unsigned long long* vptr, T* w, u32 n, u32 nv, T* s, T* small,
                              u32 m, u32 coef, u32 final_, T* partials, u32* ticket, T* hist,
                              u32 it) {
    if (s[S_STATUS] != T(0)) return;
    __shared__ T c[GMRES_MAX_COLS];
    __shared__ const V* vs[GMRES_MAX_COLS];
    for (u32 k = threadIdx.x; k < nv; k += blockDim.x) {
        c[k] = small[coef + k];
        vs[k] = reinterpret_cast<const V*>(vptr[k]);
    }
    __syncthreads();
    T v[1] = {T(0)};
    if constexpr (PairRows<T, V>::on) {
        const u32 np = n / 2;
        GRID_STRIDE(p, np) {
            double2 acc = reinterpret_cast<const double2*>(w)[p];
#pragma unroll 8
            for (u32 k = 0; k < nv; ++k) {
                const float2 vp = reinterpret_cast<const float2*>(vs[k])[p];
                acc.x -= c[k] * T(vp.x);
                acc.y -= c[k] * T(vp.y);
            }
            reinterpret_cast<double2*>(w)[p] = acc;
            dotc_(v[0], acc.x, acc.x);
            dotc_(v[0], acc.y, acc.y);
        }
        if ((n & 1u) && blockIdx.x == 0 && threadIdx.x == 0) {
            T acc = w[n - 1];
            for (u32 k = 0; k < nv; ++k) acc -= c[k] * T(vs[k][n - 1]);
            w[n - 1] = acc;
            dotc_(v[0], acc, acc);
        }
    } else {
        GRID_STRIDE(i, n) {
            T acc = w[i];
            // Unrolled: eight basis loads in flight per thread (the subtractions keep their order).
#pragma unroll 8
            for (u32 k = 0; k < nv; ++k) acc -= c[k] * T(vs[k][i]);
            w[i] = acc;
            dotc_(v[0], acc, acc);
        }
    }
    if (!final_) return;
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0)
        gmres_column_rec_(s, small, GmresLay{m}, hist, nv - 1, v[0], it);
}

// One thread: back substitution R y = g on the leading k x k block; a pivot that is zero to
// working precision (|R[i,i]| <= eps max |R[c,c]|) gives y[i] = 0 (recur::gmres_solve_y).
template <typename T> __device__ void gmres_solve_y_(T* small, u32 m, u32 k) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    typedef typename real_of<T>::type R;
    const GmresLay L{m};
    const u32 ld = m + 1;
    R big = R(0);
    for (u32 i = 0; i < k; ++i) {
        const R p = sqrt(abs2_(small[L.rmat() + i * ld + i]));
        if (p > big) big = p;
    }
    for (int i = int(k) - 1; i >= 0; --i) {
        const T pivot = small[L.rmat() + i * ld + i];
        if (sqrt(abs2_(pivot)) <= eps_(R(0)) * big) {
            small[L.y() + i] = T(0);
            continue;
        }
        T acc = small[L.g() + i];
        for (u32 c = i + 1; c < k; ++c) acc -= small[L.rmat() + c * ld + i] * small[L.y() + c];
        small[L.y() + i] = acc / pivot;
    }
}

// u = sum_k y[k] V[k], k < ncols.
template <typename T, typename V = T>
__device__ void gmres_combine_(const unsigned long long* vptr, T* u, u32 n, u32 ncols,
                               const T* small, u32 m) {
    __shared__ T y[GMRES_MAX_COLS];
    __shared__ const V* vs[GMRES_MAX_COLS];
    for (u32 k = threadIdx.x; k < ncols; k += blockDim.x) {
        y[k] = small[GmresLay{m}.y() + k];
        vs[k] = reinterpret_cast<const V*>(vptr[k]);
    }
    __syncthreads();
    GRID_STRIDE(i, n) {
        T acc = T(0);
#pragma unroll 8
        for (u32 k = 0; k < ncols; ++k) acc += y[k] * T(vs[k][i]);
        u[i] = acc;
    }
}

// A new basis vector of a narrower basis: dst = V(small[scale] * src) and cur = T(dst) (the
// stored vector widened, which the operator reads next), unless the status is set.
template <typename T, typename V>
__device__ void gmres_store_(const T* src, V* dst, T* cur, u32 n, const T* s, const T* small,
                             u32 m) {
    if (s[S_STATUS] != T(0)) return;
    const T f = small[GmresLay{m}.scale()];
    GRID_STRIDE(i, n) {
        const V v = V(f * src[i]);
        dst[i] = v;
        cur[i] = T(v);
    }
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
            warp_sum_down<ARNOLDI_BATCH>(acc);
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
        // Every block: each k's G partials in gmres_dots' last block's order (a warp per k,
        // every 32nd partial per lane, then the shuffle tree), so that both paths agree bit
        // for bit.
        const volatile T* vp = part;
        for (u32 k = warp; k < nv; k += ARNOLDI_WARPS) {
            T acc[1] = {T(0)};
            for (u32 b = lane; b < G; b += 32) acc[0] += vp[k * G + b];
            warp_sum_down<1>(acc);
            if (lane == 0) {
                c[k] = acc[0];
                if (blockIdx.x == 0) small[coef + k] = acc[0];
            }
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

// gmres_arnoldi's bar[0] is the separate kernels' ticket (0 between launches), bar[1] the
// barrier word.
#define GMRES_ENTRIES(T, SUF)                                                                        \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_start_##SUF(           \
        const T* r, u32 n, T* s, T* small, u32 m, T* partials, u32* ticket, T* hist, u32 it) {       \
        it += iter_base_(s);                                                                         \
        gmres_start_<T>(r, n, s, small, m, partials, ticket, hist, it);                              \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_scale_##SUF(           \
        const T* src, T* dst, u32 n, const T* s, const T* small, u32 m) {                            \
        gmres_scale_<T>(src, dst, n, s, small, m);                                                   \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_dots_##SUF(            \
        const unsigned long long* vptr, const T* w, u32 n, u32 nv, const T* s, T* small, u32 out,    \
        T* partials, u32* ticket) {                                                                  \
        gmres_dots_<T>(vptr, w, n, nv, s, small, out, partials, ticket);                             \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_update_##SUF(          \
        const unsigned long long* vptr, T* w, u32 n, u32 nv, T* s, T* small, u32 m, u32 coef,        \
        u32 final_, T* partials, u32* ticket, T* hist, u32 it) {                                     \
        it += iter_base_(s);                                                                         \
        gmres_update_<T>(vptr, w, n, nv, s, small, m, coef, final_, partials, ticket, hist, it);     \
    }                                                                                                \
    extern "C" __global__ void solver_gmres_solve_y_##SUF(T* small, u32 m, u32 k) {                  \
        gmres_solve_y_<T>(small, m, k);                                                              \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_combine_##SUF(         \
        const unsigned long long* vptr, T* u, u32 n, u32 ncols, const T* small, u32 m) {             \
        gmres_combine_<T>(vptr, u, n, ncols, small, m);                                              \
    }

// The steps of a basis stored in V under the working type T (gmres_start and gmres_solve_y are
// T's own: they do not read the basis).
#define GMRES_ENTRIES_STORED(T, V, SUF)                                                            \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_store_##SUF(           \
        const T* src, V* dst, T* cur, u32 n, const T* s, const T* small, u32 m) {                    \
        gmres_store_<T, V>(src, dst, cur, n, s, small, m);                                           \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_dots_##SUF(            \
        const unsigned long long* vptr, const T* w, u32 n, u32 nv, const T* s, T* small, u32 out,    \
        T* partials, u32* ticket) {                                                                  \
        gmres_dots_<T, V>(vptr, w, n, nv, s, small, out, partials, ticket);                          \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_update_##SUF(          \
        const unsigned long long* vptr, T* w, u32 n, u32 nv, T* s, T* small, u32 m, u32 coef,        \
        u32 final_, T* partials, u32* ticket, T* hist, u32 it) {                                     \
        it += iter_base_(s);                                                                         \
        gmres_update_<T, V>(vptr, w, n, nv, s, small, m, coef, final_, partials, ticket, hist, it);  \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_combine_##SUF(         \
        const unsigned long long* vptr, T* u, u32 n, u32 ncols, const T* small, u32 m) {             \
        gmres_combine_<T, V>(vptr, u, n, ncols, small, m);                                           \
    }

// The fused small-system steps: real types only (complex systems run the separate steps).
#define GMRES_ENTRIES_FUSED(T, SUF)                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_gmres_arnoldi_##SUF(         \
        const unsigned long long* vptr, u32 n, u32 j, T* s, T* small, u32 m, T* partials, u32* bar,  \
        T* hist, u32 it) {                                                                           \
        it += iter_base_(s);                                                                         \
        gmres_arnoldi_<T>(vptr, n, j, s, small, m, partials, bar + 1, hist, it);                     \
    }

// The fused Arnoldi step of several columns in one cooperative launch (solvers/cols.cuh): each
// column's blocks run gmres_arnoldi on its own basis and meet at its own barrier word. Column
// pointers: 0 the basis' pointer table, 1 slots, 2 small arrays, 3 partials, 4 ticket (the
// barrier word follows it), 5 history; the column's j in aux; m is shared.
#define GMRES_BLOCK_ENTRIES_FUSED(T, SUF)                                                          \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_gmres_arnoldi_##SUF(          \
        const ColTab tab, u32 n, u32 m) {                                                            \
        T* s = COL(T, 1);                                                                            \
        gmres_arnoldi_<T>(COL(const unsigned long long, 0), n, COL_AUX, s, COL(T, 2), m, COL(T, 3),  \
                          COL(u32, 4) + 1, COL(T, 5), COL_IT + iter_base_(s));                       \
    }

GMRES_ENTRIES(float, f32)
GMRES_ENTRIES(double, f64)
GMRES_ENTRIES(cfloat, c64)
GMRES_ENTRIES(cdouble, c128)
GMRES_ENTRIES_FUSED(float, f32)
GMRES_ENTRIES_FUSED(double, f64)
GMRES_ENTRIES_STORED(double, float, f64b32)
GMRES_BLOCK_ENTRIES_FUSED(float, f32)
GMRES_BLOCK_ENTRIES_FUSED(double, f64)
