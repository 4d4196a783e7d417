// Sparse triangular solves and incomplete factorizations (ILU(0), IC(0)) on a level schedule.
//
// Every solve reads one triangle of a CSR matrix through per-row ranges: row i's off-diagonal
// entries inside the triangle are [start[i], end[i]), its diagonal entry is val[diag[i]] (diag is
// null for a unit diagonal). Rows are visited in `order` (rows sorted by dependency level;
// level l is order[level_ptr[l] .. level_ptr[l+1]]).
//
// Two solve kernels:
//  - sptrsv_levels: levels lo..hi of one launch. A launch of one level spreads that level's rows
//    over the grid; a launch of several (narrow) levels runs in one block and separates levels by
//    __syncthreads, which makes the x values written by one level visible to the whole block
//    (same SM, so the same L1) before the next level reads them.
//  - sptrsv_syncfree: one launch for the whole solve (Liu et al. 2016). Each warp takes the next
//    row in level order from a global counter, spins on the ready flags of the columns it reads,
//    and publishes its x with a release store of its own flag. Why it cannot deadlock: a warp
//    waits only on rows earlier in `order` (a row's dependencies have lower levels), and every such
//    row was taken by a warp that already executed its atomicAdd, i.e. a warp that is resident
//    and running; by induction on the position in `order` every wait ends. Flags are 0 before a
//    solve (the host queues a memset of flags and counter before each launch).
//
// Memory ordering of the sync-free kernel: the producer writes x[i], then st.release.gpu of
// flag[i]; the consumer's ld.acquire.gpu of flag[j] that sees 1 orders its later load of x[j]
// after the producer's write (PTX memory model, sm_70+). x[j] is then read with a volatile load
// so that no stale L1 line from before the flag could be used.
//
// Element types: every kernel is written once and instantiated for float, double, cfloat and
// cdouble (complex.cuh): `*` is the complex product, the IC(0) factor of a Hermitian matrix is
// A ~ L L^H (conj_ in its row updates; its pivot is real), and IC's upper solve reads L^H,
// gathered with gather_conj. The pivot tests compare moduli, in double, with the row's largest
// modulus (rowmax, double for every element type).

#include "common.cuh"
#include "complex.cuh"
#include "solvers/cols.cuh"

#ifndef SPTRSV_THREADS
#error "SPTRSV_THREADS comes from the Rust side as a -D define (sparse::triangular::gpu::THREADS)"
#endif

// Sum over the `g` lanes of each aligned group of a warp (g a power of two ≤ 32); lane 0 of the
// group holds the total. Every lane of the warp must call it.
template <typename T> __device__ __forceinline__ T group_sum(T v, u32 g) {
    for (u32 off = g >> 1; off > 0; off >>= 1) v += __shfl_down_sync(FULL_MASK, v, off, g);
    return v;
}

template <typename T> __device__ __forceinline__ T warp_allsum(T v) {
    for (u32 off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(FULL_MASK, v, off);
    return v;
}

// Level-by-level solve, one level of the launch spread over the grid (a wide level): `g` lanes
// per row. The loop condition over rows is warp-uniform (it depends on the warp's first row), so
// the shuffles of group_sum always see the whole warp.
template <typename T>
__device__ __forceinline__ void sptrsv_wide(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                            u32 l, const u32* __restrict__ start, const u32* __restrict__ end,
                                            const u32* __restrict__ diag, const u32* __restrict__ col,
                                            const T* __restrict__ val, const T* __restrict__ b, T* x, u32 g) {
    const u32 lane_w = threadIdx.x & 31u;
    const u32 lane = lane_w & (g - 1);
    const u32 rows_per_warp = 32u / g;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps * rows_per_warp;
    const u32 b0 = level_ptr[l];
    const u32 w = level_ptr[l + 1] - b0;
    for (u32 base = warp_g * rows_per_warp; base < w; base += stride) {
        const u32 r = base + lane_w / g;
        const bool active = r < w;
        T s = T(0);
        u32 row = 0;
        if (active) {
            row = order[b0 + r];
            const u32 e = end[row];
            for (u32 k = start[row] + lane; k < e; k += g) s += val[k] * x[col[k]];
        }
        s = group_sum(s, g);
        if (active && lane == 0) {
            T v = b[row] - s;
            if (diag) v = v / val[diag[row]];
            x[row] = v;
        }
    }
}

// One row's metadata and first chunk of entries, loaded before the barrier that precedes its
// level (none of it depends on x), so that after the barrier only the x reads, the reduction
// and the store remain on the critical path.
template <typename T> struct RowAhead {
    u32 row, k, e, c0;
    T v0, d, bi;
    bool active;
};

template <typename T>
__device__ __forceinline__ RowAhead<T> row_ahead(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                                 u32 l, const u32* __restrict__ start, const u32* __restrict__ end,
                                                 const u32* __restrict__ diag, const u32* __restrict__ col,
                                                 const T* __restrict__ val, const T* __restrict__ b, u32 g) {
    RowAhead<T> a;
    const u32 b0 = level_ptr[l];
    const u32 w = level_ptr[l + 1] - b0;
    const u32 r = threadIdx.x / g;
    a.active = r < w;
    a.row = 0; a.k = 0; a.e = 0; a.c0 = 0; a.v0 = T(0); a.d = T(1); a.bi = T(0);
    if (a.active) {
        a.row = order[b0 + r];
        a.k = start[a.row] + (threadIdx.x & (g - 1));
        a.e = end[a.row];
        if (a.k < a.e) { a.c0 = col[a.k]; a.v0 = val[a.k]; }
        if (diag) a.d = val[diag[a.row]];
        a.bi = b[a.row];
    }
    return a;
}

// A run of narrow levels lo..hi in one block (each level has at most blockDim.x / g rows: one
// row per group of g lanes). With SMEM, x lives in shared memory for the run (copied in at the
// start; rows solved here are written to both), so the dependent reads are shared-memory reads.
// Levels are separated by __syncthreads, which also makes the global and shared writes of one
// level visible to the whole block before the next level reads them.
template <typename T, bool SMEM>
__device__ __forceinline__ void sptrsv_run(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                           u32 lo, u32 hi, u32 n, const u32* __restrict__ start,
                                           const u32* __restrict__ end, const u32* __restrict__ diag,
                                           const u32* __restrict__ col, const T* __restrict__ val,
                                           const T* __restrict__ b, T* x, u32 g) {
    extern __shared__ __align__(16) unsigned char sptrsv_smem[];
    T* xs = reinterpret_cast<T*>(sptrsv_smem);
    T* xr = SMEM ? xs : x;
    if (SMEM) {
        for (u32 i = threadIdx.x; i < n; i += blockDim.x) xs[i] = x[i];
    }
    const u32 lane = threadIdx.x & (g - 1);
    RowAhead<T> a = row_ahead(order, level_ptr, lo, start, end, diag, col, val, b, g);
    __syncthreads();
    for (u32 l = lo; l < hi; ++l) {
        T s = T(0);
        if (a.active && a.k < a.e) {
            s = a.v0 * xr[a.c0];
            for (u32 k = a.k + g; k < a.e; k += g) s += val[k] * xr[col[k]];
        }
        s = group_sum(s, g);
        if (a.active && lane == 0) {
            const T v = (a.bi - s) / a.d;
            if (SMEM) xs[a.row] = v;
            x[a.row] = v;
        }
        if (l + 1 < hi) a = row_ahead(order, level_ptr, l + 1, start, end, diag, col, val, b, g);
        __syncthreads();
    }
}

// Synchronization-free solve: a warp per row. flags[0..n) are the rows' ready flags and flags[n]
// is the row counter; all zero at launch.
template <typename T>
__device__ __forceinline__ void sptrsv_syncfree(u32 n, const u32* __restrict__ order, const u32* __restrict__ start,
                                                const u32* __restrict__ end, const u32* __restrict__ diag,
                                                const u32* __restrict__ col, const T* __restrict__ val,
                                                const T* __restrict__ b, T* x, u32* flags) {
    const u32 lane = threadIdx.x & 31u;
    for (;;) {
        const u32 idx = warp_ticket(&flags[n]);
        if (idx >= n) return;
        const u32 row = order[idx];
        const u32 e = end[row];
        T s = T(0);
        for (u32 k = start[row] + lane; k < e; k += 32) {
            const u32 j = col[k];
            while (ld_acquire_u32(&flags[j]) == 0u) {
            }
            s += val[k] * ld_volatile(&x[j]);
        }
        s = warp_allsum(s);
        if (lane == 0) {
            T v = b[row] - s;
            if (diag) v = v / val[diag[row]];
            x[row] = v;
            __threadfence();
            st_release_u32(&flags[row], 1u);
        }
        __syncwarp();
    }
}

// First index t in [lo, hi) with col[t] == j, or hi (col sorted within the range).
__device__ __forceinline__ u32 find_col(const u32* __restrict__ col, u32 lo, u32 hi, u32 j) {
    const u32 a = lower_bound_u32(col, lo, hi, j);
    return (a < hi && col[a] == j) ? a : hi;
}

__device__ __forceinline__ bool pivot_bad(double p, double rowmax, double tol) {
    return !(fabs(p) > tol * rowmax) || !isfinite(p);
}

// The pivot test of a real or complex pivot: its modulus against the row's largest modulus,
// and every part finite.
__device__ __forceinline__ bool pivot_bad(float p, double rowmax, double tol) {
    return pivot_bad((double)p, rowmax, tol);
}
template <typename C> __device__ __forceinline__ bool pivot_bad(C p, double rowmax, double tol) {
    const double re = p.re, im = p.im;
    return pivot_bad(sqrt(re * re + im * im), rowmax, tol) || !isfinite(im);
}

// Row i of a factorization kept in shared memory while the warp eliminates it: `cache` entries
// per warp (values, then column indices), or none (cache = 0, or a longer row: work in place in
// global memory). Every read and write of row i in the elimination loop then costs a shared
// memory access instead of an L2 round trip (row i is written by its own lanes, so global reads
// of it would miss in L1), and the binary searches run in shared memory.
template <typename T> struct RowCache {
    T* v;
    const u32* c;
    bool cached;
};

template <typename T>
__device__ __forceinline__ RowCache<T> cache_row(unsigned char* smem, u32 cache, u32 warps, const u32* __restrict__ col,
                                                 T* val, u32 ri, u32 len) {
    const u32 lane = threadIdx.x & 31u;
    const u32 wib = threadIdx.x >> 5;
    RowCache<T> rc;
    rc.cached = len <= cache;
    if (rc.cached) {
        T* cv = reinterpret_cast<T*>(smem) + wib * cache;
        u32* cc = reinterpret_cast<u32*>(reinterpret_cast<T*>(smem) + warps * cache) + wib * cache;
        for (u32 t = lane; t < len; t += 32) {
            cv[t] = val[ri + t];
            cc[t] = col[ri + t];
        }
        __syncwarp();
        rc.v = cv;
        rc.c = cc;
    } else {
        rc.v = val + ri;
        rc.c = col + ri;
    }
    return rc;
}

template <typename T>
__device__ __forceinline__ void uncache_row(const RowCache<T>& rc, T* val, u32 ri, u32 len) {
    __syncwarp();
    if (rc.cached) {
        for (u32 t = threadIdx.x & 31u; t < len; t += 32) val[ri + t] = rc.v[t];
    }
    __syncwarp();
}

// Loads of another row's factor values: a plain load in the level kernels (the row was finished by
// an earlier launch or before a __syncthreads of this block), an L2 load (ld.global.cg) in the
// sync-free kernels, where the row was finished during this launch by a warp that may run on
// another SM, so an L1 line from before its ready word could be stale.
template <bool SYNC, typename T> __device__ __forceinline__ T ld_row(const T* p) {
    if (SYNC) return __ldcg(p);
    return *p;
}

// Sync-free factorization: the warp waits until row k is final (its ready word is set).
template <bool SYNC> __device__ __forceinline__ void wait_row(const u32* ready, u32 k) {
    if (SYNC) {
        while (ld_acquire_u32(&ready[k]) == 0u) {
        }
    }
}

// Sync-free factorization: publishes row i after every lane's writes of it (each lane fences
// its own writes, the warp converges, lane 0 releases the ready word).
template <bool SYNC> __device__ __forceinline__ void publish_row(u32* ready, u32 i) {
    if (SYNC) {
        __threadfence();
        __syncwarp();
        if ((threadIdx.x & 31u) == 0) st_release_u32(&ready[i], 1u);
        __syncwarp();
    }
}

// ILU(0), IKJ variant, of row i by one warp. Every row k < i stored in row i is final (earlier
// level; with SYNC the warp waits for it). The loads of step p + 1 (the pivot row k's diagonal,
// its first chunk of upper entries) do not depend on row i's updates and are issued before step
// p's work, so their latency overlaps it.
template <typename T, bool SYNC>
__device__ __forceinline__ void ilu0_row(u32 i, unsigned char* smem, u32 warps, const u32* __restrict__ row_ptr,
                                         const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                         const double* __restrict__ rowmax, double tol, u32* bad, u32 cache,
                                         u32* ready) {
    const u32 lane = threadIdx.x & 31u;
    const u32 ri = row_ptr[i], ei = row_ptr[i + 1];
    const u32 len = ei - ri, dl = diag[i] - ri;
    const RowCache<T> rc = cache_row(smem, cache, warps, col, val, ri, len);
    // Step p's pivot row k: its diagonal value, its end, and this lane's first entry.
    u32 ek = 0, q = 0, cq = 0;
    T piv = T(1), vq = T(0);
    auto fetch = [&](u32 p, u32& ek_, u32& q_, u32& cq_, T& piv_, T& vq_) {
        const u32 k = rc.c[p];
        wait_row<SYNC>(ready, k);
        const u32 dk = diag[k];
        ek_ = row_ptr[k + 1];
        piv_ = ld_row<SYNC>(val + dk);
        q_ = dk + 1 + lane;
        if (q_ < ek_) {
            cq_ = col[q_];
            vq_ = ld_row<SYNC>(val + q_);
        }
    };
    if (dl > 0) fetch(0, ek, q, cq, piv, vq);
    for (u32 p = 0; p < dl; ++p) {
        u32 ek2 = 0, q2 = 0, cq2 = 0;
        T piv2 = T(1), vq2 = T(0);
        if (p + 1 < dl) fetch(p + 1, ek2, q2, cq2, piv2, vq2);
        const T lik = rc.v[p] / piv;
        __syncwarp();
        if (lane == 0) rc.v[p] = lik;
        if (q < ek) {
            const u32 t = find_col(rc.c, p + 1, len, cq);
            if (t < len) rc.v[t] -= lik * vq;
            for (u32 qq = q + 32; qq < ek; qq += 32) {
                const u32 t2 = find_col(rc.c, p + 1, len, col[qq]);
                if (t2 < len) rc.v[t2] -= lik * ld_row<SYNC>(val + qq);
            }
        }
        __syncwarp();
        ek = ek2; q = q2; cq = cq2; piv = piv2; vq = vq2;
    }
    const T u = rc.v[dl];
    uncache_row(rc, val, ri, len);
    if (lane == 0 && pivot_bad(u, rowmax[i], tol)) atomicMin(bad, i);
    publish_row<SYNC>(ready, i);
}

// IC(0) of row i (lower triangle, diagonal last) by one warp, left-looking; row i in shared
// memory as for ILU(0). Every row k < i stored in row i is final (with SYNC the warp waits).
template <typename T, bool SYNC>
__device__ __forceinline__ void ic0_row(u32 i, unsigned char* smem, u32 warps, const u32* __restrict__ row_ptr,
                                        const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                        const double* __restrict__ rowmax, double tol, u32* bad, u32 cache,
                                        u32* ready) {
    const u32 lane = threadIdx.x & 31u;
    const u32 ri = row_ptr[i], len = row_ptr[i + 1] - ri, dl = diag[i] - ri;
    const RowCache<T> rc = cache_row(smem, cache, warps, col, val, ri, len);
    for (u32 p = 0; p < dl; ++p) {
        const u32 k = rc.c[p];
        wait_row<SYNC>(ready, k);
        T part = T(0);
        const u32 dk = diag[k];
        for (u32 q = row_ptr[k] + lane; q < dk; q += 32) {
            const u32 t = find_col(rc.c, 0, p, col[q]);
            if (t < p) part += rc.v[t] * conj_(ld_row<SYNC>(val + q));
        }
        part = warp_allsum(part);
        const T v = (rc.v[p] - part) / ld_row<SYNC>(val + dk);
        __syncwarp();
        if (lane == 0) rc.v[p] = v;
        __syncwarp();
    }
    typedef typename real_of<T>::type R;
    R sq = R(0);
    for (u32 p = lane; p < dl; p += 32) sq += abs2_(rc.v[p]);
    sq = warp_allsum(sq);
    // The pivot of a Hermitian A is real: the imaginary part of the diagonal (rounding) is
    // dropped, as on the host.
    const R piv = re_(rc.v[dl]) - sq;
    __syncwarp();
    if (lane == 0) rc.v[dl] = T(sqrt(piv));
    uncache_row(rc, val, ri, len);
    if (lane == 0 && (pivot_bad((double)piv, rowmax[i], tol) || piv < R(0))) atomicMin(bad, i);
    publish_row<SYNC>(ready, i);
}

// A factorization (ILU: IC = false; IC(0): IC = true) level by level, levels lo..hi of the lower
// solve's schedule, a warp per row. Rows of earlier levels are final (earlier launch, or
// __syncthreads in a one-block group).
template <typename T, bool IC>
__device__ __forceinline__ void factor_levels(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                              u32 lo, u32 hi, const u32* __restrict__ row_ptr,
                                              const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                              const double* __restrict__ rowmax, double tol, u32* bad, u32 cache) {
    extern __shared__ __align__(16) unsigned char fact_smem[];
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps;
    for (u32 l = lo; l < hi; ++l) {
        const u32 b0 = level_ptr[l];
        const u32 w = level_ptr[l + 1] - b0;
        for (u32 r = warp_g; r < w; r += stride) {
            const u32 i = order[b0 + r];
            if (IC) ic0_row<T, false>(i, fact_smem, warps, row_ptr, col, diag, val, rowmax, tol, bad, cache, nullptr);
            else ilu0_row<T, false>(i, fact_smem, warps, row_ptr, col, diag, val, rowmax, tol, bad, cache, nullptr);
        }
        if (hi - lo > 1) __syncthreads();
    }
}

// The whole factorization in one launch, synchronization-free: each warp takes the next row of
// `order` (the lower solve's level order, a topological order of the rows) from the ticket counter
// ready[n], waits on the ready words of the pivot rows it reads (wait_row) and publishes its row
// (publish_row). It cannot deadlock for the reason the sync-free solve cannot (see the top of this
// file): a row waits only on rows earlier in `order`, taken by warps already running.
// ready[0..n] and the counter are zero at launch. A bad pivot still publishes its row (the later
// rows finish with meaningless values; the host reads the smallest bad row and reports it).
template <typename T, bool IC>
__device__ __forceinline__ void factor_syncfree(u32 n, const u32* __restrict__ order, const u32* __restrict__ row_ptr,
                                                const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                                const double* __restrict__ rowmax, double tol, u32* bad, u32 cache,
                                                u32* ready) {
    extern __shared__ __align__(16) unsigned char fact_smem[];
    const u32 warps = blockDim.x >> 5;
    for (;;) {
        const u32 t = warp_ticket(&ready[n]);
        if (t >= n) return;
        const u32 i = order[t];
        if (IC) ic0_row<T, true>(i, fact_smem, warps, row_ptr, col, diag, val, rowmax, tol, bad, cache, ready);
        else ilu0_row<T, true>(i, fact_smem, warps, row_ptr, col, diag, val, rowmax, tol, bad, cache, ready);
    }
}

// One Jacobi sweep on the triangle, every row in parallel (g lanes per row, warp-uniform loop).
template <typename T>
__device__ __forceinline__ void sptrsv_jacobi(u32 n, const u32* __restrict__ start, const u32* __restrict__ end,
                                              const u32* __restrict__ diag, const u32* __restrict__ col,
                                              const T* __restrict__ val, const T* __restrict__ b,
                                              const T* __restrict__ x_in, T* __restrict__ x_out, u32 g) {
    const u32 lane_w = threadIdx.x & 31u;
    const u32 lane = lane_w & (g - 1);
    const u32 rows_per_warp = 32u / g;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps * rows_per_warp;
    for (u32 base = warp_g * rows_per_warp; base < n; base += stride) {
        const u32 row = base + lane_w / g;
        const bool active = row < n;
        T s = T(0);
        if (active && x_in) {
            const u32 e = end[row];
            for (u32 k = start[row] + lane; k < e; k += g) s += val[k] * x_in[col[k]];
        }
        s = group_sum(s, g);
        if (active && lane == 0) {
            T v = b[row] - s;
            if (diag) v = v / val[diag[row]];
            x_out[row] = v;
        }
    }
}

// ---- Jacobi sweeps in one cooperative launch ----------------------------------------------------
//
// A sweep of a small triangle is a few microseconds of latency (a launch, one pass of dependent
// loads): ten separate launches per application cost ten such ramps. The fused kernels run every
// sweep of one triangle (sptrsv_jacobi_fused) or of both triangles of a factor (ilu_apply_sweeps)
// in one launch, separated by grid barriers. Each thread handles the same rows with the same
// lanes in every sweep, in the same order as sptrsv_jacobi, so the result equals the separate
// launches' bit for bit. Rows' ranges, columns and values never change in the kernel (read-only
// loads, L1-resident from the second sweep on); vectors written in the kernel by other blocks
// (the previous sweep's x, the lower result that the upper triangle reads as b) are read with
// ld.global.cg (L2, never a stale L1 line), after the barrier that orders them.

__device__ __forceinline__ u32 sweep_atom_add_release(u32* p, u32 v) {
    u32 old;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}

// Every block of the (co-resident, cooperatively launched) grid waits here until all have
// arrived; what a block wrote before is visible to every block after. The word's top bit flips
// once per barrier: block 0 adds 2^31 - (G - 1) and the others 1, so the G arrivals add exactly
// 2^31 and the low bits return to 0; a block waits until the top bit differs from the value it
// saw on arrival. The word needs no reset between barriers or launches.
__device__ __forceinline__ void sweep_grid_barrier(u32* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const u32 inc = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        const u32 old = sweep_atom_add_release(bar, inc);
        while (((ld_acquire_u32(bar) ^ old) & 0x80000000u) == 0) {}
    }
    __syncthreads();
}

// One triangle's sweeps: x = D^-1 (b - N x) from x = D^-1 b, `sweeps` times. b[bmap[i]] is row
// i's right-hand side (bmap null: b[i]). Sweep j (0..=sweeps) writes x when (sweeps - j) is even,
// else scratch, so the last writes x; with omap, a final pass writes out[j] = x[omap[j]]. Ends
// with every block past a barrier after its last write (the caller may read x at once).
template <typename T>
__device__ __forceinline__ void jacobi_sweeps_grid(u32 n, const u32* __restrict__ start, const u32* __restrict__ end,
                                                   const u32* __restrict__ diag, const u32* __restrict__ col,
                                                   const T* __restrict__ val, const T* b, const u32* __restrict__ bmap,
                                                   u32 sweeps, T* x, T* scratch, const u32* __restrict__ omap,
                                                   T* out, u32 g, u32* bar) {
    const u32 lane_w = threadIdx.x & 31u;
    const u32 lane = lane_w & (g - 1);
    const u32 rows_per_warp = 32u / g;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps * rows_per_warp;
    for (u32 j = 0; j <= sweeps; ++j) {
        T* x_out = ((sweeps - j) & 1u) == 0 ? x : scratch;
        const T* x_in = j == 0 ? nullptr : (x_out == x ? scratch : x);
        for (u32 base = warp_g * rows_per_warp; base < n; base += stride) {
            const u32 row = base + lane_w / g;
            const bool active = row < n;
            T s = T(0);
            if (active && x_in) {
                const u32 e = end[row];
                for (u32 k = start[row] + lane; k < e; k += g) s += val[k] * __ldcg(x_in + col[k]);
            }
            s = group_sum(s, g);
            if (active && lane == 0) {
                T v = __ldcg(b + (bmap ? bmap[row] : row)) - s;
                if (diag) v = v / val[diag[row]];
                x_out[row] = v;
            }
        }
        sweep_grid_barrier(bar);
    }
    if (omap) {
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
            out[i] = __ldcg(x + omap[i]);
        sweep_grid_barrier(bar);
    }
}

#define SPTRSV_ENTRIES(T, SUF)                                                                          \
    /* A one-block launch runs levels lo..hi as a run (x in shared memory when smem != 0); a      \
       launch of several blocks is one wide level (hi = lo + 1). */                                 \
    extern "C" __global__ void __launch_bounds__(1024) sptrsv_levels_##SUF(                             \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, u32 n, u32 smem, const u32* start,     \
        const u32* end, const u32* diag, const u32* col, const T* val, const T* b, T* x, u32 g) {       \
        if (gridDim.x > 1) sptrsv_wide<T>(order, level_ptr, lo, start, end, diag, col, val, b, x, g);   \
        else if (smem) sptrsv_run<T, true>(order, level_ptr, lo, hi, n, start, end, diag, col, val, b, x, g); \
        else sptrsv_run<T, false>(order, level_ptr, lo, hi, n, start, end, diag, col, val, b, x, g);   \
    }                                                                                                   \
    /* One Jacobi sweep x_out = D^-1 (b - N x_in) on the triangle (x_in null: x_out = D^-1 b). */   \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) sptrsv_jacobi_##SUF(                  \
        u32 n, const u32* start, const u32* end, const u32* diag, const u32* col, const T* val,        \
        const T* b, const T* x_in, T* x_out, u32 g) {                                                   \
        sptrsv_jacobi<T>(n, start, end, diag, col, val, b, x_in, x_out, g);                             \
    }                                                                                                   \
    /* Every sweep of one triangle in one cooperative launch (see jacobi_sweeps_grid). */            \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) sptrsv_jacobi_fused_##SUF(            \
        u32 n, const u32* start, const u32* end, const u32* diag, const u32* col, const T* val,        \
        const T* b, const u32* bmap, u32 sweeps, T* x, T* scratch, const u32* omap, T* out, u32 g,     \
        u32* bar) {                                                                                     \
        jacobi_sweeps_grid<T>(n, start, end, diag, col, val, b, bmap, sweeps, x, scratch, omap, out, g, \
                              bar);                                                                     \
    }                                                                                                   \
    /* A whole swept application z = U^-1 (L^-1 r) in one cooperative launch: the lower sweeps    \
       write t (reading r through bmap), the upper sweeps read t and write y (then z = y[omap]   \
       when omap is given, else y is z). */                                                         \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) ilu_apply_sweeps_##SUF(                \
        u32 n, const u32* l_start, const u32* l_end, const u32* l_diag, const u32* l_col,              \
        const T* l_val, u32 l_sweeps, u32 l_g, const u32* u_start, const u32* u_end, const u32* u_diag, \
        const u32* u_col, const T* u_val, u32 u_sweeps, u32 u_g, const T* r, const u32* bmap, T* t,    \
        T* scratch, T* y, const u32* omap, T* z, u32* bar) {                                           \
        jacobi_sweeps_grid<T>(n, l_start, l_end, l_diag, l_col, l_val, r, bmap, l_sweeps, t, scratch,   \
                              nullptr, nullptr, l_g, bar);                                              \
        jacobi_sweeps_grid<T>(n, u_start, u_end, u_diag, u_col, u_val, t, nullptr, u_sweeps, y, scratch, \
                              omap, z, u_g, bar);                                                       \
    }                                                                                                   \
    /* ilu_apply_sweeps for several columns in one cooperative launch (solvers/cols.cuh): column \
       c's blocks (blockIdx.y == c) sweep its own vectors and meet at its own barrier word, and a \
       row's sum is the same lanes' as in the one-column launch (it does not depend on the grid), \
       so each column gets the one-column result bit for bit. Column pointers: 0 r, 1 t,          \
       2 scratch, 3 y, 4 z (y is z without omap), 5 the barrier word. */                         \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) ilu_apply_sweeps_cols_##SUF(           \
        u32 n, const u32* l_start, const u32* l_end, const u32* l_diag, const u32* l_col,              \
        const T* l_val, u32 l_sweeps, u32 l_g, const u32* u_start, const u32* u_end, const u32* u_diag, \
        const u32* u_col, const T* u_val, u32 u_sweeps, u32 u_g, const u32* bmap, const u32* omap,     \
        const ColTab tab) {                                                                             \
        T* t = COL(T, 1);                                                                               \
        T* scratch = COL(T, 2);                                                                         \
        u32* bar = COL(u32, 5);                                                                         \
        jacobi_sweeps_grid<T>(n, l_start, l_end, l_diag, l_col, l_val, COL(const T, 0), bmap, l_sweeps, \
                              t, scratch, nullptr, nullptr, l_g, bar);                                  \
        jacobi_sweeps_grid<T>(n, u_start, u_end, u_diag, u_col, u_val, t, nullptr, u_sweeps, COL(T, 3), \
                              scratch, omap, COL(T, 4), u_g, bar);                                      \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) sptrsv_syncfree_##SUF(                 \
        u32 n, const u32* order, const u32* start, const u32* end, const u32* diag, const u32* col,     \
        const T* val, const T* b, T* x, u32* flags) {                                                   \
        sptrsv_syncfree<T>(n, order, start, end, diag, col, val, b, x, flags);                          \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) ilu0_levels_##SUF(                               \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, const u32* row_ptr, const u32* col,     \
        const u32* diag, T* val, const double* rowmax, double tol, u32* bad, u32 cache) {                    \
        factor_levels<T, false>(order, level_ptr, lo, hi, row_ptr, col, diag, val, rowmax, tol, bad, cache); \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) ic0_levels_##SUF(                                \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, const u32* row_ptr, const u32* col,     \
        const u32* diag, T* val, const double* rowmax, double tol, u32* bad, u32 cache) {                    \
        factor_levels<T, true>(order, level_ptr, lo, hi, row_ptr, col, diag, val, rowmax, tol, bad, cache); \
    }                                                                                                   \
    /* The whole factorization in one launch (see factor_syncfree); ready has n + 1 zero words. */   \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) ilu0_syncfree_##SUF(                   \
        u32 n, const u32* order, const u32* row_ptr, const u32* col, const u32* diag, T* val,           \
        const double* rowmax, double tol, u32* bad, u32 cache, u32* ready) {                                 \
        factor_syncfree<T, false>(n, order, row_ptr, col, diag, val, rowmax, tol, bad, cache, ready);  \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) ic0_syncfree_##SUF(                    \
        u32 n, const u32* order, const u32* row_ptr, const u32* col, const u32* diag, T* val,           \
        const double* rowmax, double tol, u32* bad, u32 cache, u32* ready) {                                 \
        factor_syncfree<T, true>(n, order, row_ptr, col, diag, val, rowmax, tol, bad, cache, ready);   \
    }                                                                                                   \
    extern "C" __global__ void gather_##SUF(const u32* map, const T* src, T* dst, u32 n) {              \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)         \
            dst[i] = src[map[i]];                                                                       \
    }                                                                                                   \
    /* dst = conj(src[map]): IC's L^H from L (the plain gather for real types). */                  \
    extern "C" __global__ void gather_conj_##SUF(const u32* map, const T* src, T* dst, u32 n) {         \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)         \
            dst[i] = conj_(src[map[i]]);                                                                \
    }

SPTRSV_ENTRIES(float, f32)
SPTRSV_ENTRIES(double, f64)
SPTRSV_ENTRIES(cfloat, c64)
SPTRSV_ENTRIES(cdouble, c128)
