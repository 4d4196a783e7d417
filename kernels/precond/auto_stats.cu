// The automatic choice's matrix statistics on the device (segsparse::precond::auto::gpu), the
// same as the host's two passes (precond/auto/cpu.rs) on a GpuCsr:
//   auto_row_scale_T: s_i = max_j |a_ij|, one thread per row;
//   auto_stats_T:     one thread per row: the diagonal (missing or zero, negative, not positive,
//                     min and max magnitude), the off-diagonal signs against the diagonal's,
//                     the dominance |a_ii| / sum_{j!=i} |a_ij|, non-finite values, rows whose
//                     columns are not strictly increasing, and the worst symmetry violation
//                     |a_ij - a_ji| / max(s_i, s_j) with a_ji found by binary search in row j
//                     (0 when not stored). Each block reduces its threads' fields and writes
//                     one row of AUTO_STATS_FIELDS doubles to `partials`; the host merges the
//                     blocks. Every field is a count (exact in a double below 2^53), a minimum
//                     or a maximum, so the result does not depend on the grid.
// The binary search assumes sorted rows: a matrix with any unsorted row (counted) is measured
// again on the host by the caller, from a sorted copy.
#include "common.cuh"

#if !defined(AUTO_STATS_BLOCK) || !defined(AUTO_STATS_FIELDS)
#error "AUTO_STATS_BLOCK and AUTO_STATS_FIELDS must be defined by the host (KernelSource::constants)"
#endif
#if AUTO_STATS_FIELDS != 11 || (AUTO_STATS_BLOCK % 32) != 0 || AUTO_STATS_BLOCK > 1024
#error "auto_stats.cu reduces 11 fields over a block of whole warps"
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

template <typename T>
__device__ __forceinline__ void row_scale_body(const u32* __restrict__ rp, const T* __restrict__ val, u32 n,
                                               double* __restrict__ s) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        double m = 0.0;
        for (u32 p = rp[i]; p < rp[i + 1]; ++p) m = fmax(m, fabs((double)val[p]));
        s[i] = m;
    }
}

template <typename T>
__device__ __forceinline__ void stats_body(const u32* __restrict__ rp, const u32* __restrict__ col,
                                           const T* __restrict__ val, u32 n, const double* __restrict__ s,
                                           double* __restrict__ partials) {
    double f[AUTO_STATS_FIELDS];
    for (int k = 0; k < AUTO_STATS_FIELDS; ++k) f[k] = 0.0;
    f[F_DMIN] = inf_();
    f[F_MINDOM] = inf_();
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const u32 lo = rp[i], hi = rp[i + 1];
        double d = 0.0;
        bool sorted = true;
        for (u32 p = lo; p < hi; ++p) {
            if (p > lo && col[p] <= col[p - 1]) sorted = false;
            if (col[p] == i) d = (double)val[p];
        }
        if (!sorted) f[F_UNSORTED] += 1.0;
        if (d == 0.0) f[F_MISSING] += 1.0;
        if (d < 0.0) f[F_NEGATIVE] += 1.0;
        if (!(d > 0.0)) f[F_NONPOSITIVE] += 1.0;
        f[F_DMIN] = fmin(f[F_DMIN], fabs(d));
        f[F_DMAX] = fmax(f[F_DMAX], fabs(d));
        const double si = s[i];
        double off = 0.0;
        for (u32 p = lo; p < hi; ++p) {
            const double x = (double)val[p];
            if (!isfinite(x)) f[F_NONFINITE] += 1.0;
            const u32 j = col[p];
            if (j == i) continue;
            off += fabs(x);
            if (x != 0.0) {
                f[F_OFFDIAG] += 1.0;
                if ((x < 0.0) != (d < 0.0)) f[F_OPPOSITE] += 1.0;
            }
            const double y = partner_(rp, col, val, j, i);
            const double size = fmax(si, s[j]);
            const double r = size > 0.0 ? fabs(x - y) / size : 0.0;
            if (r > f[F_ASYM]) f[F_ASYM] = r;
        }
        if (off > 0.0) f[F_MINDOM] = fmin(f[F_MINDOM], fabs(d) / off);
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
            partials[(u64)blockIdx.x * AUTO_STATS_FIELDS + k] = v;
        }
    }
}

#define AUTO_STATS(T, S)                                                                                   \
    extern "C" __global__ void auto_row_scale_##S(const u32* rp, const T* val, u32 n, double* s) {        \
        row_scale_body<T>(rp, val, n, s);                                                                  \
    }                                                                                                      \
    extern "C" __global__ void __launch_bounds__(AUTO_STATS_BLOCK)                                         \
        auto_stats_##S(const u32* rp, const u32* col, const T* val, u32 n, const double* s, double* part) { \
        stats_body<T>(rp, col, val, n, s, part);                                                           \
    }
AUTO_STATS(float, f32)
AUTO_STATS(double, f64)
