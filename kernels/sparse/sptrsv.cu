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

#include "common.cuh"

#ifndef SPTRSV_THREADS
#define SPTRSV_THREADS 256
#endif

__device__ __forceinline__ u32 ld_acquire_u32(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_u32(u32* p, u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

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

// Level-by-level solve: `g` lanes per row. The loop condition over rows is warp-uniform (it
// depends on the warp's first row), so the shuffles of group_sum always see the whole warp.
template <typename T>
__device__ __forceinline__ void sptrsv_levels(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                              u32 lo, u32 hi, const u32* __restrict__ start,
                                              const u32* __restrict__ end, const u32* __restrict__ diag,
                                              const u32* __restrict__ col, const T* __restrict__ val,
                                              const T* __restrict__ b, T* x, u32 g) {
    const u32 lane_w = threadIdx.x & 31u;
    const u32 lane = lane_w & (g - 1);
    const u32 rows_per_warp = 32u / g;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps * rows_per_warp;
    for (u32 l = lo; l < hi; ++l) {
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
                if (diag) v /= val[diag[row]];
                x[row] = v;
            }
        }
        if (hi - lo > 1) __syncthreads();
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
        u32 idx = 0;
        if (lane == 0) idx = atomicAdd(&flags[n], 1u);
        idx = __shfl_sync(FULL_MASK, idx, 0);
        if (idx >= n) return;
        const u32 row = order[idx];
        const u32 e = end[row];
        T s = T(0);
        for (u32 k = start[row] + lane; k < e; k += 32) {
            const u32 j = col[k];
            while (ld_acquire_u32(&flags[j]) == 0u) {
            }
            s += val[k] * *((volatile T*)&x[j]);
        }
        s = warp_allsum(s);
        if (lane == 0) {
            T v = b[row] - s;
            if (diag) v /= val[diag[row]];
            x[row] = v;
            __threadfence();
            st_release_u32(&flags[row], 1u);
        }
        __syncwarp();
    }
}

// First index t in [lo, hi) with col[t] == j, or hi (col sorted within the range).
__device__ __forceinline__ u32 find_col(const u32* __restrict__ col, u32 lo, u32 hi, u32 j) {
    u32 a = lo, bnd = hi;
    while (a < bnd) {
        const u32 m = (a + bnd) >> 1;
        if (col[m] < j) a = m + 1; else bnd = m;
    }
    return (a < hi && col[a] == j) ? a : hi;
}

__device__ __forceinline__ bool pivot_bad(double p, double rowmax, double tol) {
    return !(fabs(p) > tol * rowmax) || !isfinite(p);
}

// ILU(0), IKJ variant, a warp per row, levels lo..hi (of the lower solve's schedule). Rows of
// earlier levels are final (earlier launch, or __syncthreads in a one-block group).
template <typename T>
__device__ __forceinline__ void ilu0_levels(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                            u32 lo, u32 hi, const u32* __restrict__ row_ptr,
                                            const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                            const T* __restrict__ rowmax, double tol, u32* bad) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps;
    for (u32 l = lo; l < hi; ++l) {
        const u32 b0 = level_ptr[l];
        const u32 w = level_ptr[l + 1] - b0;
        for (u32 r = warp_g; r < w; r += stride) {
            const u32 i = order[b0 + r];
            const u32 ri = row_ptr[i], di = diag[i], ei = row_ptr[i + 1];
            for (u32 p = ri; p < di; ++p) {
                const u32 k = col[p];
                const T lik = val[p] / val[diag[k]];
                __syncwarp();
                if (lane == 0) val[p] = lik;
                const u32 ek = row_ptr[k + 1];
                for (u32 q = diag[k] + 1 + lane; q < ek; q += 32) {
                    const u32 t = find_col(col, p + 1, ei, col[q]);
                    if (t < ei) val[t] -= lik * val[q];
                }
                __syncwarp();
            }
            if (lane == 0 && pivot_bad((double)val[di], (double)rowmax[i], tol)) atomicMin(bad, i);
        }
        if (hi - lo > 1) __syncthreads();
    }
}

// IC(0) on the lower triangle (diagonal last in each row), a warp per row, left-looking.
template <typename T>
__device__ __forceinline__ void ic0_levels(const u32* __restrict__ order, const u32* __restrict__ level_ptr,
                                           u32 lo, u32 hi, const u32* __restrict__ row_ptr,
                                           const u32* __restrict__ col, const u32* __restrict__ diag, T* val,
                                           const T* __restrict__ rowmax, double tol, u32* bad) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = blockDim.x >> 5;
    const u32 warp_g = blockIdx.x * warps + (threadIdx.x >> 5);
    const u32 stride = gridDim.x * warps;
    for (u32 l = lo; l < hi; ++l) {
        const u32 b0 = level_ptr[l];
        const u32 w = level_ptr[l + 1] - b0;
        for (u32 r = warp_g; r < w; r += stride) {
            const u32 i = order[b0 + r];
            const u32 ri = row_ptr[i], di = diag[i];
            for (u32 p = ri; p < di; ++p) {
                const u32 k = col[p];
                T part = T(0);
                const u32 dk = diag[k];
                for (u32 q = row_ptr[k] + lane; q < dk; q += 32) {
                    const u32 t = find_col(col, ri, p, col[q]);
                    if (t < p) part += val[t] * val[q];
                }
                part = warp_allsum(part);
                const T v = (val[p] - part) / val[dk];
                __syncwarp();
                if (lane == 0) val[p] = v;
                __syncwarp();
            }
            T sq = T(0);
            for (u32 p = ri + lane; p < di; p += 32) sq += val[p] * val[p];
            sq = warp_allsum(sq);
            const T piv = val[di] - sq;
            __syncwarp();
            if (lane == 0) {
                if (pivot_bad((double)piv, (double)rowmax[i], tol) || piv < T(0)) atomicMin(bad, i);
                val[di] = sqrt(piv);
            }
        }
        if (hi - lo > 1) __syncthreads();
    }
}

#define SPTRSV_ENTRIES(T, SUF)                                                                          \
    extern "C" __global__ void __launch_bounds__(1024) sptrsv_levels_##SUF(                             \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, const u32* start, const u32* end,       \
        const u32* diag, const u32* col, const T* val, const T* b, T* x, u32 g) {                       \
        sptrsv_levels<T>(order, level_ptr, lo, hi, start, end, diag, col, val, b, x, g);                \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(SPTRSV_THREADS) sptrsv_syncfree_##SUF(                 \
        u32 n, const u32* order, const u32* start, const u32* end, const u32* diag, const u32* col,     \
        const T* val, const T* b, T* x, u32* flags) {                                                   \
        sptrsv_syncfree<T>(n, order, start, end, diag, col, val, b, x, flags);                          \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) ilu0_levels_##SUF(                               \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, const u32* row_ptr, const u32* col,     \
        const u32* diag, T* val, const T* rowmax, double tol, u32* bad) {                               \
        ilu0_levels<T>(order, level_ptr, lo, hi, row_ptr, col, diag, val, rowmax, tol, bad);            \
    }                                                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) ic0_levels_##SUF(                                \
        const u32* order, const u32* level_ptr, u32 lo, u32 hi, const u32* row_ptr, const u32* col,     \
        const u32* diag, T* val, const T* rowmax, double tol, u32* bad) {                               \
        ic0_levels<T>(order, level_ptr, lo, hi, row_ptr, col, diag, val, rowmax, tol, bad);             \
    }                                                                                                   \
    extern "C" __global__ void gather_##SUF(const u32* map, const T* src, T* dst, u32 n) {              \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)         \
            dst[i] = src[map[i]];                                                                       \
    }

SPTRSV_ENTRIES(float, f32)
SPTRSV_ENTRIES(double, f64)
