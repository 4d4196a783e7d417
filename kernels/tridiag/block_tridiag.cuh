// Block- and thread-level building blocks of the tridiagonal solvers (src/tridiag/gpu.rs).
//
// An equation is row i of T x = d: a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i. Every routine here
// eliminates WITHOUT pivoting, which is stable for diagonally dominant (or SPD) matrices; each
// division checks its pivot and records the row of the first tiny one in a device flag
// (atomicMin), which the host reads once after the whole solve: no per-step host sync.
//
// Shared-memory arrays use a padded index P(i) = i + i/32, so that the threads of a warp that
// walk their own runs of consecutive rows (stride M) land in different banks (for M = 8 or 16,
// f32: 32 distinct banks; f64 accesses are two 4-byte banks each and see at most 2-way
// conflicts).
#pragma once
#include "common.cuh"

#define TRI_PAD(i) ((i) + ((i) >> 5))

template <typename T> struct TriEps;
template <> struct TriEps<float> { __device__ __forceinline__ static float v() { return 1.1920929e-07f; } };
template <> struct TriEps<double> { __device__ __forceinline__ static double v() { return 2.220446049250313e-16; } };

template <typename T> __device__ __forceinline__ T tri_abs(T x) { return x < T(0) ? -x : x; }

// True when the pivot p is zero, tiny against `scale` (the magnitude of the row it belongs to),
// or not a number. Written as !(|p| > eps * scale) so that NaN counts as tiny.
template <typename T> __device__ __forceinline__ bool tri_tiny(T p, T scale) {
    return !(tri_abs(p) > TriEps<T>::v() * scale);
}

__device__ __forceinline__ void tri_flag(u32* flag, u32 row) { atomicMin(flag, row); }

template <typename T> struct TriEq {
    T a, b, c, d;
};

template <typename T> __device__ __forceinline__ TriEq<T> tri_identity() {
    TriEq<T> e;
    e.a = T(0); e.b = T(1); e.c = T(0); e.d = T(0);
    return e;
}

// A system of n equations held in shared memory (padded index).
template <typename T> struct TriSmem {
    T* a; T* b; T* c; T* d;
    __device__ __forceinline__ TriEq<T> load(u32 i) const {
        u32 p = TRI_PAD(i);
        TriEq<T> e; e.a = a[p]; e.b = b[p]; e.c = c[p]; e.d = d[p];
        return e;
    }
    __device__ __forceinline__ void store(u32 i, const TriEq<T>& e) const {
        u32 p = TRI_PAD(i);
        a[p] = e.a; b[p] = e.b; c[p] = e.c; d[p] = e.d;
    }
};

// Eliminates x_{i-s} and x_{i+s} from equation e using its neighbours l (row i-s) and r (row
// i+s): the step shared by cyclic reduction and PCR. Flags the pivots l.b and r.b.
template <typename T, typename RowOf>
__device__ __forceinline__ TriEq<T> tri_combine(const TriEq<T>& e, const TriEq<T>& l, const TriEq<T>& r,
                                                u32 il, u32 ir, bool has_l, bool has_r, u32* flag, RowOf row_of) {
    T k1 = T(0), k2 = T(0);
    // On a tiny pivot the division is skipped (k = 0): the result is wrong anyway, but no
    // inf/NaN spreads to other equations, so the flag names the row where the trouble arose.
    if (has_l) {
        if (tri_tiny(l.b, tri_abs(l.a) + tri_abs(l.c))) tri_flag(flag, row_of(il));
        else k1 = e.a / l.b;
    }
    if (has_r) {
        if (tri_tiny(r.b, tri_abs(r.a) + tri_abs(r.c))) tri_flag(flag, row_of(ir));
        else k2 = e.c / r.b;
    }
    TriEq<T> o;
    o.a = -l.a * k1;
    o.b = e.b - l.c * k1 - r.a * k2;
    o.c = -r.c * k2;
    o.d = e.d - l.d * k1 - r.d * k2;
    return o;
}

// TRI_PCR_PER_THREAD (equations PCR keeps per thread in registers) and TRI_MAX_THREADS (threads
// per block of the per-block solver, its launch bounds) are -D defines from the Rust side.
#if !defined(TRI_PCR_PER_THREAD) || !defined(TRI_MAX_THREADS)
#error "TRI_PCR_PER_THREAD and TRI_MAX_THREADS come from the Rust side as -D defines (tridiag)"
#endif
#ifndef TRI_LOAD_UNROLL
#define TRI_LOAD_UNROLL 8     // global loads a thread keeps in flight while staging a tile
#endif

// Copies rows [0, n) of a system (global offset off) into shared memory, TRI_LOAD_UNROLL rows
// per thread per round: every load of a round is issued before any is stored, so a thread
// keeps 4 * TRI_LOAD_UNROLL loads in flight instead of waiting a full memory latency per row
// (a plain strided loop serialised on that latency and cost more than the whole solve).
// a_0, c_{n-1} and the couplings between systems of sys_n rows (in the global numbering
// g0 + i) read as zero. Ends with a barrier.
template <typename T>
__device__ __forceinline__ void tri_stage(const TriSmem<T>& s, const T* __restrict__ ga, const T* __restrict__ gb,
                                          const T* __restrict__ gc, const T* __restrict__ gd, u64 off, u32 n,
                                          u64 g0, u64 total, u32 sys_n) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    // Row numbers fit 32 bits (the host limits a solve to 2^31 rows). A 32-bit modulo by the
    // run-time sys_n costs ~20 instructions per row, so it is skipped when the staged rows
    // belong to one system (the per-block solver's usual case, and every reduced level).
    const u32 gs = (u32)g0, tot = (u32)total;
    const bool one_system = sys_n >= tot;
    for (u32 base = tid; base < n; base += nt * TRI_LOAD_UNROLL) {
        T va[TRI_LOAD_UNROLL], vb[TRI_LOAD_UNROLL], vc[TRI_LOAD_UNROLL], vd[TRI_LOAD_UNROLL];
#pragma unroll
        for (u32 u = 0; u < TRI_LOAD_UNROLL; ++u) {
            const u32 i = base + u * nt;
            if (i < n) {
                va[u] = ga[off + i];
                vb[u] = gb[off + i];
                vc[u] = gc[off + i];
                vd[u] = gd[off + i];
            }
        }
#pragma unroll
        for (u32 u = 0; u < TRI_LOAD_UNROLL; ++u) {
            const u32 i = base + u * nt;
            if (i < n) {
                const u32 g = gs + i;
                const u32 r = one_system ? g : g % sys_n;
                const u32 p = TRI_PAD(i);
                s.a[p] = r == 0 ? T(0) : va[u];
                s.b[p] = vb[u];
                s.c[p] = (r == sys_n - 1 || g + 1 == tot) ? T(0) : vc[u];
                s.d[p] = vd[u];
            }
        }
    }
    __syncthreads();
}

// Solves the n-equation system in shared memory in place (on return s.d holds x) with all
// threads of the block: cyclic reduction (the paper's reduce phase, Figure 4) while the active
// subsystem has more than cr_stop equations, parallel cyclic reduction on what is left, then CR
// back substitution (the down-sweep). cr_stop = 1 is pure CR, cr_stop >= n pure PCR (PCR holds
// TRI_PCR_PER_THREAD equations per thread, so cr_stop is lowered to that times blockDim). Works for
// any n: the system is padded virtually to a power of two with identity rows (a = c = 0,
// b = 1, d = 0); the coupling to a padded row is zero because c_{n-1} = 0 and a_0 = 0 are
// enforced on load, and elimination keeps those couplings zero.
// Requires s.a[0] = 0 and s.c[n-1] = 0. row_of maps an equation index to the row reported in
// the pivot flag. Starts and ends with the block synchronised.
template <typename T, typename RowOf>
__device__ void block_cr_pcr(const TriSmem<T>& s, u32 n, u32 cr_stop, u32* flag, RowOf row_of) {
    const u32 tid = threadIdx.x, nt = blockDim.x;
    u32 p2 = 1;
    while (p2 < n) p2 <<= 1;
    // PCR holds at most TRI_PCR_PER_THREAD equations per thread.
    if (cr_stop > TRI_PCR_PER_THREAD * nt) cr_stop = TRI_PCR_PER_THREAD * nt;
    if (cr_stop < 1) cr_stop = 1;

    // Forward reduction. At stride st the active equations are i = st*k + st - 1; the level
    // updates i = 2st*k + 2st - 1 from i - st and i + st, which this level does not write.
    u32 st = 1, m = p2;
    while (m > cr_stop) {
        const u32 half = m >> 1;
        for (u32 k = tid; k < half; k += nt) {
            const u32 i = 2 * st * k + 2 * st - 1;
            if (i < n) {
                const bool hr = i + st < n;
                TriEq<T> e = s.load(i), l = s.load(i - st);
                TriEq<T> r = hr ? s.load(i + st) : tri_identity<T>();
                s.store(i, tri_combine(e, l, r, i - st, i + st, true, hr, flag, row_of));
            }
        }
        __syncthreads();
        st <<= 1;
        m = half;
    }

    // PCR on the m equations i = st*k + st - 1: log2(m) steps, each reads every equation's
    // neighbours at distance delta and writes all of them, so reads and writes are separated by
    // barriers (results wait in registers).
    for (u32 delta = st; delta < m * st; delta <<= 1) {
        TriEq<T> res[TRI_PCR_PER_THREAD];
#pragma unroll
        for (u32 j = 0; j < TRI_PCR_PER_THREAD; ++j) {
            const u32 k = tid + j * nt;
            const u32 i = st * k + st - 1;
            if (k < m && i < n) {
                const bool hl = i >= delta, hr = i + delta < n;
                TriEq<T> e = s.load(i);
                TriEq<T> l = hl ? s.load(i - delta) : tri_identity<T>();
                TriEq<T> r = hr ? s.load(i + delta) : tri_identity<T>();
                res[j] = tri_combine(e, l, r, i - delta, i + delta, hl, hr, flag, row_of);
            }
        }
        __syncthreads();
#pragma unroll
        for (u32 j = 0; j < TRI_PCR_PER_THREAD; ++j) {
            const u32 k = tid + j * nt;
            const u32 i = st * k + st - 1;
            if (k < m && i < n) s.store(i, res[j]);
        }
        __syncthreads();
    }
    // Every subsystem equation is now decoupled: x_i = d_i / b_i.
    for (u32 k = tid; k < m; k += nt) {
        const u32 i = st * k + st - 1;
        if (i < n) {
            const u32 p = TRI_PAD(i);
            const T b = s.b[p];
            const bool bad = tri_tiny(b, tri_abs(s.a[p]) + tri_abs(s.c[p]));
            if (bad) tri_flag(flag, row_of(i));
            s.d[p] = bad ? T(0) : s.d[p] / b;
        }
    }
    __syncthreads();

    // Back substitution, level by level: at stride st the equations i = 2st*k + st - 1 take
    // x_{i-st} and x_{i+st}, solved one level up (their d already holds x).
    while (st > 1) {
        st >>= 1;
        for (u32 k = tid; k * 2 * st + st - 1 < n; k += nt) {
            const u32 i = 2 * st * k + st - 1;
            const u32 p = TRI_PAD(i);
            const T xl = i >= st ? s.d[TRI_PAD(i - st)] : T(0);
            const T xr = i + st < n ? s.d[TRI_PAD(i + st)] : T(0);
            const T b = s.b[p];
            const bool bad = tri_tiny(b, tri_abs(s.a[p]) + tri_abs(s.c[p]));
            if (bad) tri_flag(flag, row_of(i));
            s.d[p] = bad ? T(0) : (s.d[p] - s.a[p] * xl - s.c[p] * xr) / b;
        }
        __syncthreads();
    }
}

// The partition step of one thread on its run of L >= 1 consecutive rows (indices first ..
// first+L-1 of the arrays a, c, d with b, all padded): eliminates the run's interior so that
// every row refers only to the run's first and last unknowns and to the neighbouring runs:
//   row 0:      a_0 x_{prev last} + x_0 + c_0 x_{L-1} = d_0
//   row j:      a_j x_0 + x_j + c_j x_{L-1} = d_j          (0 < j < L-1)
//   row L-1:    a_{L-1} x_0 + x_{L-1} + c_{L-1} x_{next first} = d_{L-1}
// (rows normalised, b = 1 implied). Rows 0 and L-1 of all runs form a tridiagonal system of
// twice the number of runs. Forward and backward sweeps as in the partition ("Thomas-PCR")
// method; no pivoting, each pivot checked. row0 is the global row of index first.
// Returns the two reduced equations (for L = 1: the row and an identity equation; valid
// because only the very last run of a system can be that short, and its c is 0).
template <typename T>
__device__ __forceinline__ void thread_partition(T* a, T* b, T* c, T* d, u32 first, u32 L, u32 row0, u32* flag,
                                                 TriEq<T>& top, TriEq<T>& bot) {
#define P_(j) TRI_PAD(first + (j))
    // Normalise rows 0 and 1.
    for (u32 j = 0; j < 2 && j < L; ++j) {
        const u32 p = P_(j);
        const T bj = b[p];
        const bool bad = tri_tiny(bj, tri_abs(a[p]) + tri_abs(c[p]));
        if (bad) tri_flag(flag, row0 + j);
        const T r = bad ? T(0) : T(1) / bj;  // skip a bad division: no NaN spreads
        a[p] *= r; c[p] *= r; d[p] *= r;
    }
    // Forward: rows j >= 2 refer to x_0 instead of x_{j-1}.
    T am = a[P_(1 < L ? 1 : 0)], cm = c[P_(1 < L ? 1 : 0)], dm = d[P_(1 < L ? 1 : 0)];
    for (u32 j = 2; j < L; ++j) {
        const u32 p = P_(j);
        const T aj = a[p], bj = b[p], cj = c[p];
        const T piv = bj - aj * cm;
        const bool bad = tri_tiny(piv, tri_abs(aj) + tri_abs(bj) + tri_abs(cj));
        if (bad) tri_flag(flag, row0 + j);
        const T r = bad ? T(0) : T(1) / piv;
        dm = r * (d[p] - aj * dm);
        am = -r * aj * am;
        cm = r * cj;
        a[p] = am; c[p] = cm; d[p] = dm;
    }
    if (L >= 3) {
        // Backward: rows L-3 .. 1 refer to x_{L-1} instead of x_{j+1}.
        T an = a[P_(L - 2)], cn = c[P_(L - 2)], dn = d[P_(L - 2)];
        for (u32 j = L - 3; j >= 1; --j) {
            const u32 p = P_(j);
            const T cj = c[p];
            dn = d[p] - cj * dn;
            an = a[p] - cj * an;
            cn = -cj * cn;
            a[p] = an; c[p] = cn; d[p] = dn;
        }
        // Row 0: eliminate x_1 with the (now reduced) row 1.
        const u32 p0 = P_(0), p1 = P_(1);
        const T c0 = c[p0];
        const T piv = T(1) - c0 * a[p1];
        const bool bad = tri_tiny(piv, T(1) + tri_abs(c0 * a[p1]));
        if (bad) tri_flag(flag, row0);
        const T r = bad ? T(0) : T(1) / piv;
        d[p0] = r * (d[p0] - c0 * d[p1]);
        a[p0] = r * a[p0];
        c[p0] = -r * c0 * c[p1];
    }
    top.a = a[P_(0)]; top.b = T(1); top.c = c[P_(0)]; top.d = d[P_(0)];
    if (L >= 2) {
        bot.a = a[P_(L - 1)]; bot.b = T(1); bot.c = c[P_(L - 1)]; bot.d = d[P_(L - 1)];
    } else {
        bot = tri_identity<T>();
    }
#undef P_
}
