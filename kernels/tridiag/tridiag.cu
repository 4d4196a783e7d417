// Tridiagonal solvers (host side: src/tridiag/gpu.rs). Entry points are type-suffixed and thin;
// the algorithms are in block_tridiag.cuh.
//
// Layout: lower a, diagonal b, upper c, right-hand side d, solution x, all of length batch * n,
// one system after another. a_0 and c_{n-1} of every system are ignored (read as 0), so a batch
// is also one block-diagonal system of batch * n rows: the multi-block kernels below solve a
// batch by zeroing the couplings at system boundaries (sys_n) and treating it as one system.
//
// Pivot flags: `flag` points at one u32 (initialised to 0xffffffff by the host); a kernel that
// meets a tiny pivot stores the smallest offending row there with atomicMin. The host reads it
// once after the whole solve.
#include "common.cuh"
#include "tridiag/block_tridiag.cuh"

#ifndef TRI_CHUNK  // rows per thread in the multi-block partition kernels
#error "TRI_CHUNK comes from the Rust side as a -D define (tridiag::MULTI_CHUNK)"
#endif

// --- One block per system: the whole system in shared memory ------------------------------------
//
// partition = 0: cyclic reduction / hybrid / PCR chosen by cr_stop (1: CR, >= n: PCR).
// partition = 1: each of q = min(blockDim, n/2) threads eliminates its run of n/q (or n/q + 1)
//                rows in place, the 2q run ends form a tridiagonal system solved by CR/PCR
//                (cr_stop again), and each thread back-fills its run's interior.
// Dynamic shared memory: 4 * np (+ 4 * rq when partitioning) elements, np = n + (n-1)/32,
// rq = 2q + (2q-1)/32.
template <typename T>
__device__ __forceinline__ void tridiag_block(const T* __restrict__ ga, const T* __restrict__ gb,
                                              const T* __restrict__ gc, const T* __restrict__ gd,
                                              T* __restrict__ gx, u32 n, u32 sys_n, u32 partition, u32 cr_stop,
                                              u32* flag) {
    extern __shared__ __align__(16) unsigned char tri_smem_raw[];
    T* sm = reinterpret_cast<T*>(tri_smem_raw);
    const u32 tid = threadIdx.x, nt = blockDim.x;
    const u32 np = TRI_PAD(n - 1) + 1;
    const TriSmem<T> s = {sm, sm + np, sm + 2 * np, sm + 3 * np};
    const u64 off = (u64)blockIdx.x * n;
    const u32 row_base = blockIdx.x * n;
    // Coalesced load; a_0 and c_{n-1} read as zero, and so are the couplings between the
    // systems of sys_n rows when a block holds several (the last level of a multi-block batch).
    tri_stage(s, ga, gb, gc, gd, off, n, 0, n, sys_n);
    if (!partition || n < 2) {
        block_cr_pcr(s, n, cr_stop, flag, [=](u32 i) { return row_base + i; });
    } else {
        const u32 q = min(nt, n / 2);
        const u32 M = n / q, rem = n % q;
        const u32 rq = TRI_PAD(2 * q - 1) + 1;
        T* rbase = sm + 4 * np;
        const TriSmem<T> r = {rbase, rbase + rq, rbase + 2 * rq, rbase + 3 * rq};
        const u32 first = tid * M + min(tid, rem), L = M + (tid < rem ? 1 : 0);
        if (tid < q) {
            TriEq<T> top, bot;
            thread_partition(s.a, s.b, s.c, s.d, first, L, row_base + first, flag, top, bot);
            r.store(2 * tid, top);
            r.store(2 * tid + 1, bot);
        }
        __syncthreads();
        block_cr_pcr(r, 2 * q, cr_stop, flag, [=](u32 k) {
            const u32 t = k >> 1;
            const u32 f = t * M + min(t, rem), l = M + (t < rem ? 1 : 0);
            return row_base + f + ((k & 1) ? l - 1 : 0);
        });
        if (tid < q) {
            const T x0 = r.d[TRI_PAD(2 * tid)], xl = r.d[TRI_PAD(2 * tid + 1)];
            for (u32 j = 1; j + 1 < L; ++j) {
                const u32 p = TRI_PAD(first + j);
                s.d[p] = s.d[p] - s.a[p] * x0 - s.c[p] * xl;
            }
            s.d[TRI_PAD(first)] = x0;
            s.d[TRI_PAD(first + L - 1)] = xl;
        }
        __syncthreads();
    }
    for (u32 i = tid; i < n; i += nt) gx[off + i] = s.d[TRI_PAD(i)];
}

// --- Multi-block partition method: systems larger than a block ----------------------------------
//
// Each thread owns TRI_CHUNK consecutive rows; a block's tile (blockDim * TRI_CHUNK rows) is
// staged through shared memory so that global loads and stores are coalesced. reduce writes the
// two end equations of every run (reduced system of 2 * ceil(n / TRI_CHUNK) equations, solved
// recursively); back re-reads the tile and, with the run's end unknowns known, solves each run's
// interior by Thomas. Recomputing instead of storing the eliminated coefficients costs one more
// read of the input but saves writing and re-reading three arrays.

// This block's tile staged in shared memory, and this thread's run in it: rows first ..
// first + L - 1 of the tile (global row g = tile0 + first; L = 0 when the thread has no rows).
template <typename T> struct TriRun {
    TriSmem<T> s;
    u64 tile0;
    u32 tile, first, L;
    u64 g;
};

template <typename T>
__device__ __forceinline__ TriRun<T> tri_stage_run(const T* __restrict__ ga, const T* __restrict__ gb,
                                                   const T* __restrict__ gc, const T* __restrict__ gd, u32 n,
                                                   u32 sys_n) {
    extern __shared__ __align__(16) unsigned char tri_smem_raw[];
    T* sm = reinterpret_cast<T*>(tri_smem_raw);
    TriRun<T> r;
    r.tile = blockDim.x * TRI_CHUNK;
    const u32 tp = TRI_PAD(r.tile - 1) + 1;
    r.s = {sm, sm + tp, sm + 2 * tp, sm + 3 * tp};
    r.tile0 = (u64)blockIdx.x * r.tile;
    const u32 rows = (u32)min((u64)r.tile, (u64)n - r.tile0);
    tri_stage(r.s, ga, gb, gc, gd, r.tile0, rows, r.tile0, (u64)n, sys_n);
    r.first = threadIdx.x * TRI_CHUNK;
    r.g = r.tile0 + r.first;
    r.L = r.g < n ? (u32)min((u64)TRI_CHUNK, (u64)n - r.g) : 0;
    return r;
}

template <typename T>
__device__ __forceinline__ void tridiag_part_reduce(const T* __restrict__ ga, const T* __restrict__ gb,
                                                    const T* __restrict__ gc, const T* __restrict__ gd, u32 n,
                                                    u32 sys_n, T* __restrict__ ra, T* __restrict__ rb,
                                                    T* __restrict__ rc, T* __restrict__ rd, u32* flag) {
    const TriRun<T> run = tri_stage_run(ga, gb, gc, gd, n, sys_n);
    const TriSmem<T>& s = run.s;
    const u32 first = run.first, L = run.L;
    const u64 g = run.g;
    if (L > 0) {
        TriEq<T> top, bot;
        thread_partition(s.a, s.b, s.c, s.d, first, L, (u32)g, flag, top, bot);
        const u64 q = g / TRI_CHUNK;
        ra[2 * q] = top.a; rb[2 * q] = top.b; rc[2 * q] = top.c; rd[2 * q] = top.d;
        ra[2 * q + 1] = bot.a; rb[2 * q + 1] = bot.b; rc[2 * q + 1] = bot.c; rd[2 * q + 1] = bot.d;
    }
}

template <typename T>
__device__ __forceinline__ void tridiag_part_back(const T* __restrict__ ga, const T* __restrict__ gb,
                                                  const T* __restrict__ gc, const T* __restrict__ gd, u32 n,
                                                  u32 sys_n, const T* __restrict__ rx, T* __restrict__ gx) {
    const TriRun<T> run = tri_stage_run(ga, gb, gc, gd, n, sys_n);
    const TriSmem<T>& s = run.s;
    const u32 first = run.first, L = run.L;
    const u64 g = run.g;
    if (L > 0) {
        const u64 q = g / TRI_CHUNK;
        const T x0 = rx[2 * q], xl = rx[2 * q + 1];
        if (L >= 3) {
            // Thomas on rows 1 .. L-2 with the known end unknowns moved to the right-hand side.
            // Its pivots are those the reduce kernel already checked.
#define P_(j) TRI_PAD(first + (j))
            T cp = T(0), dp = T(0);
            for (u32 j = 1; j + 1 < L; ++j) {
                const u32 p = P_(j);
                T dj = s.d[p];
                if (j == 1) dj -= s.a[p] * x0;
                if (j + 2 == L) dj -= s.c[p] * xl;
                const T aj = j == 1 ? T(0) : s.a[p];
                const T piv = s.b[p] - aj * cp;
                const T r = piv != T(0) ? T(1) / piv : T(0);  // flagged by the reduce kernel
                cp = s.c[p] * r;
                dp = (dj - aj * dp) * r;
                s.c[p] = cp;
                s.d[p] = dp;
            }
            T xn = dp;
            for (u32 j = L - 3; j >= 1; --j) {
                const u32 p = P_(j);
                xn = s.d[p] - s.c[p] * xn;
                s.d[p] = xn;
            }
#undef P_
        }
        s.d[TRI_PAD(first)] = x0;
        if (L >= 2) s.d[TRI_PAD(first + L - 1)] = xl;
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < run.tile; i += blockDim.x) {
        const u64 gi = run.tile0 + i;
        if (gi < n) gx[gi] = s.d[TRI_PAD(i)];
    }
}

// --- Multi-block cyclic reduction through global memory (the paper's form for long lines) ------
//
// One launch per level: reduce turns the m equations of a level into the m/2 odd ones (index
// 2k+1, compacted so the next level reads contiguous memory); back, after the level below is
// solved, takes x of the odd equations from it and solves the even ones.

template <typename T>
__device__ __forceinline__ TriEq<T> tri_load_global(const T* __restrict__ ga, const T* __restrict__ gb,
                                                    const T* __restrict__ gc, const T* __restrict__ gd, u32 i,
                                                    u32 m, u32 sys_n) {
    TriEq<T> e;
    const u32 r = i % sys_n;
    e.a = r == 0 ? T(0) : ga[i];
    e.b = gb[i];
    e.c = (r == sys_n - 1 || i == m - 1) ? T(0) : gc[i];
    e.d = gd[i];
    return e;
}

template <typename T>
__device__ __forceinline__ void tridiag_cr_reduce(const T* __restrict__ ga, const T* __restrict__ gb,
                                                  const T* __restrict__ gc, const T* __restrict__ gd, u32 m,
                                                  u32 sys_n, T* __restrict__ ra, T* __restrict__ rb,
                                                  T* __restrict__ rc, T* __restrict__ rd, u32* flag) {
    const u32 k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= m / 2) return;
    const u32 i = 2 * k + 1;
    const bool hr = i + 1 < m;
    const TriEq<T> e = tri_load_global(ga, gb, gc, gd, i, m, sys_n);
    const TriEq<T> l = tri_load_global(ga, gb, gc, gd, i - 1, m, sys_n);
    const TriEq<T> r = hr ? tri_load_global(ga, gb, gc, gd, i + 1, m, sys_n) : tri_identity<T>();
    const TriEq<T> o = tri_combine(e, l, r, i - 1, i + 1, true, hr, flag, [](u32 j) { return j; });
    ra[k] = o.a; rb[k] = o.b; rc[k] = o.c; rd[k] = o.d;
}

template <typename T>
__device__ __forceinline__ void tridiag_cr_back(const T* __restrict__ ga, const T* __restrict__ gb,
                                                const T* __restrict__ gc, const T* __restrict__ gd, u32 m,
                                                u32 sys_n, const T* __restrict__ xr, T* __restrict__ gx, u32* flag) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    if (i & 1) {
        gx[i] = xr[i >> 1];
        return;
    }
    const TriEq<T> e = tri_load_global(ga, gb, gc, gd, i, m, sys_n);
    const T xl = i >= 1 ? xr[(i - 1) >> 1] : T(0);
    const T xrr = i + 1 < m ? xr[(i + 1) >> 1] : T(0);
    const bool bad = tri_tiny(e.b, tri_abs(e.a) + tri_abs(e.c));
    if (bad) tri_flag(flag, i);
    gx[i] = bad ? T(0) : (e.d - e.a * xl - e.c * xrr) / e.b;
}

#define TRI_ENTRIES(T, S)                                                                                     \
    extern "C" __global__ void __launch_bounds__(TRI_MAX_THREADS) tridiag_block_##S(const T* a, const T* b, const T* c, const T* d, T* x, u32 n,  \
                                                 u32 sys_n, u32 partition, u32 cr_stop, u32* flag) {          \
        tridiag_block<T>(a, b, c, d, x, n, sys_n, partition, cr_stop, flag);                                  \
    }                                                                                                          \
    extern "C" __global__ void tridiag_part_reduce_##S(const T* a, const T* b, const T* c, const T* d, u32 n, \
                                                       u32 sys_n, T* ra, T* rb, T* rc, T* rd, u32* flag) {    \
        tridiag_part_reduce<T>(a, b, c, d, n, sys_n, ra, rb, rc, rd, flag);                                   \
    }                                                                                                          \
    extern "C" __global__ void tridiag_part_back_##S(const T* a, const T* b, const T* c, const T* d, u32 n,   \
                                                     u32 sys_n, const T* rx, T* x) {                          \
        tridiag_part_back<T>(a, b, c, d, n, sys_n, rx, x);                                                    \
    }                                                                                                          \
    extern "C" __global__ void tridiag_cr_reduce_##S(const T* a, const T* b, const T* c, const T* d, u32 m,   \
                                                     u32 sys_n, T* ra, T* rb, T* rc, T* rd, u32* flag) {      \
        tridiag_cr_reduce<T>(a, b, c, d, m, sys_n, ra, rb, rc, rd, flag);                                     \
    }                                                                                                          \
    extern "C" __global__ void tridiag_cr_back_##S(const T* a, const T* b, const T* c, const T* d, u32 m,     \
                                                   u32 sys_n, const T* xr, T* x, u32* flag) {                 \
        tridiag_cr_back<T>(a, b, c, d, m, sys_n, xr, x, flag);                                                \
    }

TRI_ENTRIES(float, f32)
TRI_ENTRIES(double, f64)
