// The automatic choice's matrix statistics on the device (segsparse::precond::auto::gpu), the
// same as the host's two passes (precond/auto/cpu.rs) on a GpuCsr:
//   auto_row_scale_T: s_i = max_j |a_ij|;
//   auto_stats_T:     per row: the diagonal (missing or zero, negative, not positive, min and
//                     max magnitude), the off-diagonal signs against the diagonal's, the
//                     dominance |a_ii| / sum_{j!=i} |a_ij|, a negative row sum (sum_j a_ij <
//                     -tol * s_i under a positive diagonal), non-finite values, rows whose
//                     columns are not strictly increasing, and the worst symmetry violation
//                     |a_ij - a_ji| / max(s_i, s_j) with a_ji found by binary search in row j
//                     (0 when not stored). Each block reduces its threads' fields and writes
//                     one row of AUTO_STATS_FIELDS doubles to `partials`; the host merges the
//                     blocks. Every field is a count (exact in a double below 2^53), a minimum
//                     or a maximum, so the result does not depend on the grid.
// Three row lengths, three walkers:
//   - at most AUTO_STATS_WARP entries: one thread per row;
//   - up to AUTO_STATS_LONG (3-D elasticity's and vector P2 elements' 81): by the
//     warp that holds the row, in turn with the warp's other such rows, the entries strided over
//     the lanes (warp_rows_);
//   - longer (a hub of a power-law graph: tens of thousands) by a whole block, its entries
//     strided over the threads, so that no thread walks a hub alone: auto_row_scale_T after its
//     tile's other rows; auto_stats_T in a second pass (`pass` 1) over the list of long rows
//     that its first pass made, one block per row spread over the grid (hubs are often
//     neighbours in the row order, and one block walking a tile of them would hold the kernel).
// Pass p writes its blocks' partials at row p * gridDim.x. The two sums of a row walked by a
// warp or a block (|off-diagonal| and the signed row sum) are added per lane in the row's order,
// then over the warp in a shuffle tree and over the block's warps in order (warp_sum2_,
// block_sum2_), an order that the host follows for rows of those lengths: the statistics stay
// equal to the host's bit for bit.
// The binary search assumes sorted rows: a matrix with any unsorted row (counted) is measured
// again on the host by the caller, from a sorted copy.
#include "common.cuh"

#if !defined(AUTO_STATS_BLOCK) || !defined(AUTO_STATS_FIELDS) || !defined(AUTO_STATS_WARP) || !defined(AUTO_STATS_LONG)
#error "AUTO_STATS_BLOCK, AUTO_STATS_FIELDS, AUTO_STATS_WARP and AUTO_STATS_LONG must be defined by the host (KernelSource::constants)"
#endif
#if AUTO_STATS_WARP < 32 || AUTO_STATS_LONG < AUTO_STATS_WARP
#error "auto_stats.cu walks rows of AUTO_STATS_WARP + 1 .. AUTO_STATS_LONG entries (at least 33) by a warp of 32"
#endif
#if AUTO_STATS_FIELDS != 12 || (AUTO_STATS_BLOCK % 32) != 0 || AUTO_STATS_BLOCK > 1024
#error "auto_stats.cu reduces 12 fields over a block of whole warps"
#endif

// Field slots of a block's partial (the host's order in precond/auto/gpu.rs).
#define F_MISSING 0
#define F_NEGATIVE 1
#define F_NONPOSITIVE 2
#define F_DMIN 3
#define F_DMAX 4
#define F_OPPOSITE 5
#define F_OFFDIAG 6
#define F_MINDOM 7
#define F_ASYM 8
#define F_NONFINITE 9
#define F_UNSORTED 10
#define F_NEGSUM 11

__device__ __forceinline__ double inf_() { return __longlong_as_double(0x7ff0000000000000ll); }

// fmin/fmax drop a NaN operand, as the host's f64::min/max do.
__device__ __forceinline__ double red_(int f, double a, double b) {
    if (f == F_DMIN || f == F_MINDOM) return fmin(a, b);
    if (f == F_DMAX || f == F_ASYM) return fmax(a, b);
    return a + b;
}

template <typename T>
__device__ __forceinline__ double partner_(const u32* __restrict__ rp, const u32* __restrict__ col,
                                           const T* __restrict__ val, u32 j, u32 i) {
    u32 lo = rp[j];
    const u32 end = rp[j + 1];
    u32 hi = end;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        if (col[mid] < i) lo = mid + 1; else hi = mid;
    }
    return (lo < end && col[lo] == i) ? (double)val[lo] : 0.0;
}

// The rows of a warp that lane l marks with `mine` (lane l holds row `i`), each walked by the
// whole warp in turn, in lane order: `row(r)` is called by every lane. Every lane of the warp
// must call this (a warp-uniform loop around it).
template <typename Row>
__device__ __forceinline__ void warp_rows_(bool mine, u32 i, Row row) {
    u32 mask = __ballot_sync(FULL_MASK, mine);
    while (mask != 0u) {
        const int l = __ffs(mask) - 1;
        mask &= mask - 1u;
        row(__shfl_sync(FULL_MASK, i, l));
    }
}

// The tile loop of auto_row_scale_T: `short_row(i)` for each row of the tile of at most
// AUTO_STATS_WARP entries, `medium_row(i)` called by every lane of the row's warp for each row
// of at most AUTO_STATS_LONG (warp_rows_), then `long_row(i, lo, hi)` called by every thread of
// the block for each longer one (the block synchronises around each). Every thread runs the
// same number of tiles.
template <typename Short, typename Medium, typename Long>
__device__ __forceinline__ void tiles_(const u32* __restrict__ rp, u32 n, Short short_row, Medium medium_row,
                                       Long long_row) {
    __shared__ u32 long_rows[AUTO_STATS_BLOCK];
    __shared__ u32 long_count;
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += (u64)gridDim.x * blockDim.x) {
        if (threadIdx.x == 0) long_count = 0;
        __syncthreads();
        const u64 i = base + threadIdx.x;
        bool medium = false;
        if (i < n) {
            const u32 len = rp[i + 1] - rp[i];
            if (len > AUTO_STATS_LONG) {
                long_rows[atomicAdd(&long_count, 1u)] = (u32)i;
            } else if (len > AUTO_STATS_WARP) {
                medium = true;
            } else {
                short_row((u32)i);
            }
        }
        warp_rows_(medium, (u32)i, medium_row);
        __syncthreads();
        const u32 count = long_count;
        for (u32 k = 0; k < count; ++k) {
            const u32 r = long_rows[k];
            long_row(r, rp[r], rp[r + 1]);
            __syncthreads();
        }
        __syncthreads();
    }
}

// The maximum of `v` over the block (every thread gets it).
__device__ __forceinline__ double block_max_(double v) {
    __shared__ double warp_m[AUTO_STATS_BLOCK / 32];
    __shared__ double all_m;
    for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(FULL_MASK, v, o));
    if ((threadIdx.x & 31) == 0) warp_m[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double m = warp_m[0];
        for (u32 w = 1; w < blockDim.x / 32; ++w) m = fmax(m, warp_m[w]);
        all_m = m;
    }
    __syncthreads();
    return all_m;
}

template <typename T>
__device__ __forceinline__ void row_scale_body(const u32* __restrict__ rp, const T* __restrict__ val, u32 n,
                                               double* __restrict__ s) {
    tiles_(
        rp, n,
        [&](u32 i) {
            double m = 0.0;
            for (u32 p = rp[i]; p < rp[i + 1]; ++p) m = fmax(m, fabs((double)val[p]));
            s[i] = m;
        },
        [&](u32 i) {
            const u32 lane = threadIdx.x & 31u;
            double m = 0.0;
            for (u32 p = rp[i] + lane; p < rp[i + 1]; p += 32u) m = fmax(m, fabs((double)val[p]));
            for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(FULL_MASK, m, o));
            if (lane == 0) s[i] = m;
        },
        [&](u32 i, u32 lo, u32 hi) {
            double m = 0.0;
            for (u32 p = lo + threadIdx.x; p < hi; p += blockDim.x) m = fmax(m, fabs((double)val[p]));
            m = block_max_(m);
            if (threadIdx.x == 0) s[i] = m;
        });
}

// The sums `a` and `b` over the warp, in lane 0 (the others keep partial values): lane l adds
// lane l + o for o = 16, 8, 4, 2, 1. precond/auto/cpu.rs adds a medium row's sums in this order.
__device__ __forceinline__ void warp_sum2_(double& a, double& b) {
    for (int o = 16; o > 0; o >>= 1) {
        a = a + __shfl_down_sync(FULL_MASK, a, o);
        b = b + __shfl_down_sync(FULL_MASK, b, o);
    }
}

// The sums `a` and `b` over the block, in thread 0 (the others keep partial values): each warp
// by a shuffle tree (lane l adds lane l + o for o = 16, 8, 4, 2, 1), then thread 0 adds the
// warps in order. precond/auto/cpu.rs adds a long row's sums in this order too.
__device__ __forceinline__ void block_sum2_(double& a, double& b) {
    __shared__ double warp_a[AUTO_STATS_BLOCK / 32], warp_b[AUTO_STATS_BLOCK / 32];
    warp_sum2_(a, b);
    if ((threadIdx.x & 31) == 0) {
        warp_a[threadIdx.x >> 5] = a;
        warp_b[threadIdx.x >> 5] = b;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / 32; ++w) {
            a = a + warp_a[w];
            b = b + warp_b[w];
        }
    }
    __syncthreads();
}

// The fields of one row from its diagonal `d` and its two sums, added by the calling thread.
__device__ __forceinline__ void row_fields_(double* f, double d, double off, double sum, double si, double tol,
                                            bool sorted) {
    if (!sorted) f[F_UNSORTED] += 1.0;
    if (d == 0.0) f[F_MISSING] += 1.0;
    if (d < 0.0) f[F_NEGATIVE] += 1.0;
    if (!(d > 0.0)) f[F_NONPOSITIVE] += 1.0;
    f[F_DMIN] = fmin(f[F_DMIN], fabs(d));
    f[F_DMAX] = fmax(f[F_DMAX], fabs(d));
    if (off > 0.0) f[F_MINDOM] = fmin(f[F_MINDOM], fabs(d) / off);
    if (d > 0.0 && sum < -tol * si) f[F_NEGSUM] += 1.0;
}

// The fields of entry p (column j != i, value x) of row i with diagonal d.
template <typename T>
__device__ __forceinline__ void entry_fields_(double* f, const u32* __restrict__ rp, const u32* __restrict__ col,
                                              const T* __restrict__ val, const double* __restrict__ s, u32 i,
                                              u32 j, double x, double d, double si) {
    if (x != 0.0) {
        f[F_OFFDIAG] += 1.0;
        if ((x < 0.0) != (d < 0.0)) f[F_OPPOSITE] += 1.0;
    }
    const double y = partner_(rp, col, val, j, i);
    const double size = fmax(si, s[j]);
    const double r = size > 0.0 ? fabs(x - y) / size : 0.0;
    if (r > f[F_ASYM]) f[F_ASYM] = r;
}

// The entries lo + first, lo + first + stride, ... below hi of row i (diagonal d): their fields
// into f, their |off-diagonal| and signed sums added to `off` and `sum` in that order (a thread
// walks a short row with stride 1, a warp's lane a medium one with 32, a block's thread a long
// one with the block's width).
template <typename T>
__device__ __forceinline__ void row_entries_(double* f, const u32* __restrict__ rp, const u32* __restrict__ col,
                                             const T* __restrict__ val, const double* __restrict__ s, u32 i,
                                             u32 lo, u32 hi, u32 first, u32 stride, double d, double si,
                                             double& off, double& sum) {
    for (u32 p = lo + first; p < hi; p += stride) {
        const double x = (double)val[p];
        if (!isfinite(x)) f[F_NONFINITE] += 1.0;
        sum = sum + x;
        const u32 j = col[p];
        if (j == i) continue;
        off = off + fabs(x);
        entry_fields_<T>(f, rp, col, val, s, i, j, x, d, si);
    }
}

template <typename T>
__device__ __forceinline__ void stats_body(const u32* __restrict__ rp, const u32* __restrict__ col,
                                           const T* __restrict__ val, u32 n, const double* __restrict__ s,
                                           double tol, u32* __restrict__ long_rows, u32* __restrict__ long_count,
                                           u32 pass, double* __restrict__ partials) {
    double f[AUTO_STATS_FIELDS];
    for (int k = 0; k < AUTO_STATS_FIELDS; ++k) f[k] = 0.0;
    f[F_DMIN] = inf_();
    f[F_MINDOM] = inf_();
    __shared__ double long_d;
    __shared__ int long_unsorted;
    if (pass == 0) {
        // One thread per short row, the row's warp for a medium one; a long row goes to the list
        // for pass 1. The loop is warp-uniform (the warp walks its medium rows together).
        const u32 lane = threadIdx.x & 31u;
        for (u64 base = (u64)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); base < n;
             base += (u64)gridDim.x * blockDim.x) {
            const u64 i = base + lane;
            bool medium = false;
            if (i < n) {
                const u32 lo = rp[i], hi = rp[i + 1];
                if (hi - lo > AUTO_STATS_LONG) {
                    long_rows[atomicAdd(long_count, 1u)] = (u32)i;
                } else if (hi - lo > AUTO_STATS_WARP) {
                    medium = true;
                } else {
                    double d = 0.0;
                    bool sorted = true;
                    for (u32 p = lo; p < hi; ++p) {
                        if (p > lo && col[p] <= col[p - 1]) sorted = false;
                        if (col[p] == i) d = (double)val[p];
                    }
                    const double si = s[i];
                    double off = 0.0, sum = 0.0;
                    row_entries_<T>(f, rp, col, val, s, (u32)i, lo, hi, 0u, 1u, d, si, off, sum);
                    row_fields_(f, d, off, sum, si, tol, sorted);
                }
            }
            warp_rows_(medium, (u32)i, [&](u32 r) {
                const u32 lo = rp[r], hi = rp[r + 1];
                double d = 0.0;
                bool unsorted = false, found = false;
                for (u32 p = lo + lane; p < hi; p += 32u) {
                    if (p > lo && col[p] <= col[p - 1]) unsorted = true;
                    if (col[p] == r) {
                        d = (double)val[p];
                        found = true;
                    }
                }
                // One lane holds the diagonal of a sorted row; an unsorted row is measured
                // again on the host.
                const u32 has = __ballot_sync(FULL_MASK, found);
                d = __shfl_sync(FULL_MASK, d, has != 0u ? __ffs(has) - 1 : 0);
                if (has == 0u) d = 0.0;
                unsorted = __any_sync(FULL_MASK, unsorted);
                const double si = s[r];
                double off = 0.0, sum = 0.0;
                row_entries_<T>(f, rp, col, val, s, r, lo, hi, lane, 32u, d, si, off, sum);
                warp_sum2_(off, sum);
                if (lane == 0) row_fields_(f, d, off, sum, si, tol, !unsorted);
            });
        }
    } else {
        // The long rows, one block each, spread over the grid (a power-law graph's hubs are
        // often neighbours in the row order).
        const u32 count = *long_count;
        for (u32 k = blockIdx.x; k < count; k += gridDim.x) {
            const u32 i = long_rows[k];
            const u32 lo = rp[i], hi = rp[i + 1];
            if (threadIdx.x == 0) {
                long_d = 0.0;
                long_unsorted = 0;
            }
            __syncthreads();
            for (u32 p = lo + threadIdx.x; p < hi; p += blockDim.x) {
                if (p > lo && col[p] <= col[p - 1]) atomicOr(&long_unsorted, 1);
                // One writer in a sorted row; an unsorted row is measured again on the host.
                if (col[p] == i)
                    atomicExch(reinterpret_cast<unsigned long long*>(&long_d),
                               (unsigned long long)__double_as_longlong((double)val[p]));
            }
            __syncthreads();
            const double d = long_d, si = s[i];
            double off = 0.0, sum = 0.0;
            row_entries_<T>(f, rp, col, val, s, i, lo, hi, threadIdx.x, blockDim.x, d, si, off, sum);
            block_sum2_(off, sum);
            if (threadIdx.x == 0) row_fields_(f, d, off, sum, si, tol, long_unsorted == 0);
            __syncthreads();
        }
    }
    // Warp, then block: lane 0 of each warp leaves its fields in shared memory, thread 0 merges
    // the warps in order.
    __shared__ double warp_f[AUTO_STATS_BLOCK / 32][AUTO_STATS_FIELDS];
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int k = 0; k < AUTO_STATS_FIELDS; ++k) {
        double v = f[k];
        for (int o = 16; o > 0; o >>= 1) v = red_(k, v, __shfl_down_sync(FULL_MASK, v, o));
        if (lane == 0) warp_f[warp][k] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int k = 0; k < AUTO_STATS_FIELDS; ++k) {
            double v = warp_f[0][k];
            for (u32 w = 1; w < blockDim.x / 32; ++w) v = red_(k, v, warp_f[w][k]);
            partials[((u64)pass * gridDim.x + blockIdx.x) * AUTO_STATS_FIELDS + k] = v;
        }
    }
}

// The inverse diagonal for Jacobi, on the device: inv_i = 1 / a_ii, found by binary search in
// row i (sorted rows; an unsorted row may miss its diagonal and is then reported). A row whose
// diagonal is not stored, zero or not finite gets 0 and lowers `bad` (set to 0xffffffff by the
// host) to the least such row, which the host reports as the host's Jacobi does.
template <typename T>
__device__ __forceinline__ void inverse_diagonal_body(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                      const T* __restrict__ val, u32 n, T* __restrict__ inv,
                                                      u32* bad) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u32 lo = rp[i];
        const u32 end = rp[i + 1];
        u32 hi = end;
        while (lo < hi) {
            const u32 mid = (lo + hi) >> 1;
            if (col[mid] < (u32)i) lo = mid + 1; else hi = mid;
        }
        const T d = (lo < end && col[lo] == (u32)i) ? val[lo] : (T)0;
        const bool ok = d != (T)0 && isfinite((double)d);
        inv[i] = ok ? (T)1 / d : (T)0;
        if (!ok) atomicMin(bad, (u32)i);
    }
}

#define AUTO_STATS(T, S)                                                                                   \
    extern "C" __global__ void __launch_bounds__(AUTO_STATS_BLOCK)                                         \
        auto_row_scale_##S(const u32* rp, const T* val, u32 n, double* s) {                               \
        row_scale_body<T>(rp, val, n, s);                                                                  \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(AUTO_STATS_BLOCK)                                         \
        auto_stats_##S(const u32* rp, const u32* col, const T* val, u32 n, const double* s, double tol,    \
                       u32* long_rows, u32* long_count, u32 pass, double* part) {                          \
        stats_body<T>(rp, col, val, n, s, tol, long_rows, long_count, pass, part);                         \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(AUTO_STATS_BLOCK)                                         \
        auto_inverse_diagonal_##S(const u32* rp, const u32* col, const T* val, u32 n, T* inv, u32* bad) {  \
        inverse_diagonal_body<T>(rp, col, val, n, inv, bad);                                               \
    }
AUTO_STATS(float, f32)
AUTO_STATS(double, f64)
