// BLAS-1 steps of the solvers (dot product into a slot, residual, diagonal scaling, axpy), the
// iteration-base setter of captured CUDA graphs, and the backend's core vector operations
// (backend::gpu launches them; the reductions are solvers/reduce.cuh's).
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/cols.cuh"

// dot = x^H y (x^T y when `bilinear`) into S_DOT (setup, final checks, COCG's defaults).
template <typename T>
__device__ void dot_(const T* x, const T* y, u32 n, T* s, T* partials, u32* ticket,
                     bool bilinear) {
    T v[1] = {T(0)};
    GRID_STRIDE(i, n) form_acc_(v[0], x[i], y[i], bilinear);
    if (grid_sum<1>(v, partials, ticket) && threadIdx.x == 0) s[S_DOT] = v[0];
}

// Elementwise kernels for setup: r = b - ax; z = d * r; y = x (copy done by memcpy); v = 0.
template <typename T> __device__ void residual_(const T* b, const T* ax, T* r, u32 n) {
    GRID_STRIDE(i, n) r[i] = b[i] - ax[i];
}
template <typename T> __device__ void scale_(const T* d, const T* r, T* z, u32 n) {
    GRID_STRIDE(i, n) z[i] = d[i] * r[i];
}

template <typename T> __device__ void axpy_(T alpha, const T* x, T* y, u32 n) {
    GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

// ---- The backend's core vector operations (host scalars; no status) ---------------------------
//
// z = a x + b y + c z, each term present when its vector is (x, y non-null; z read only when
// c != 0, so z need not be initialised then), summed left to right: axpby, axpbypcz, scal.
template <typename T>
__device__ void lincomb_(T a, const T* x, T b, const T* y, T c, T* z, u32 n) {
    GRID_STRIDE(i, n) {
        T v = T(0);
        bool any = false;
        if (x) {
            v = a * x[i];
            any = true;
        }
        if (y) {
            const T t = b * y[i];
            v = any ? v + t : t;
            any = true;
        }
        if (c != T(0)) {
            const T t = c * z[i];
            v = any ? v + t : t;
        }
        z[i] = v;
    }
}

// z = a (x o y) + b z (z read only when b != 0).
template <typename T> __device__ void vmul_(T a, const T* x, const T* y, T b, T* z, u32 n) {
    GRID_STRIDE(i, n) {
        const T v = a * (x[i] * y[i]);
        z[i] = b != T(0) ? v + b * z[i] : v;
    }
}

template <typename T> __device__ void fill_(T a, T* z, u32 n) { GRID_STRIDE(i, n) z[i] = a; }

#define BLAS1_ENTRIES(T, SUF)                                                                        \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_dot_##SUF(                   \
        const T* x, const T* y, u32 n, T* s, T* partials, u32* ticket) {                             \
        dot_<T>(x, y, n, s, partials, ticket, false);                                                \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_dotu_##SUF(                  \
        const T* x, const T* y, u32 n, T* s, T* partials, u32* ticket) {                             \
        dot_<T>(x, y, n, s, partials, ticket, true);                                                 \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_residual_##SUF(              \
        const T* b, const T* ax, T* r, u32 n) {                                                      \
        residual_<T>(b, ax, r, n);                                                                   \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_scale_##SUF(                 \
        const T* d, const T* r, T* z, u32 n) {                                                       \
        scale_<T>(d, r, z, n);                                                                       \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_axpy_##SUF(                  \
        T alpha, const T* x, T* y, u32 n) {                                                          \
        axpy_<T>(alpha, x, y, n);                                                                    \
    }                                                                                                \
    /* s[S_ITER_BASE] <- v (add = 0) or += v (add = 1, the last node of a captured block). */        \
    extern "C" __global__ void solver_iter_base_##SUF(T* s, u32 v, u32 add) {                        \
        if (threadIdx.x == 0 && blockIdx.x == 0)                                                     \
            s[S_ITER_BASE] = T((add ? iter_base_(s) : 0u) + v);                                      \
    }

BLAS1_ENTRIES(float, f32)
BLAS1_ENTRIES(double, f64)
BLAS1_ENTRIES(cfloat, c64)
BLAS1_ENTRIES(cdouble, c128)

#define VECTOR_ENTRIES(T, SUF)                                                                       \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_lincomb_##SUF(               \
        T a, const T* x, T b, const T* y, T c, T* z, u32 n) {                                        \
        lincomb_<T>(a, x, b, y, c, z, n);                                                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_vmul_##SUF(                  \
        T a, const T* x, const T* y, T b, T* z, u32 n) {                                             \
        vmul_<T>(a, x, y, b, z, n);                                                                  \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_fill_##SUF(T a, T* z,        \
                                                                                    u32 n) {         \
        fill_<T>(a, z, n);                                                                           \
    }

VECTOR_ENTRIES(float, f32)
VECTOR_ENTRIES(double, f64)
VECTOR_ENTRIES(cfloat, c64)
VECTOR_ENTRIES(cdouble, c128)

// Between the working type T and a narrower one V (double and float: suffix f64b32): y = V(x),
// rounded to nearest, and y = T(x), exact. A preconditioner of f32 work under f64 vectors
// (precond::Narrowed) takes its residual through the first and gives its correction back
// through the second.
#define CONVERT_ENTRIES(T, V, SUF)                                                                   \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_narrow_##SUF(                \
        const T* x, V* y, u32 n) {                                                                   \
        GRID_STRIDE(i, n) y[i] = V(x[i]);                                                            \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) vector_widen_##SUF(                 \
        const V* x, T* y, u32 n) {                                                                   \
        GRID_STRIDE(i, n) y[i] = T(x[i]);                                                            \
    }

CONVERT_ENTRIES(double, float, f64b32)

// How f32 storage would represent the values (the host's F32Fit, segsparse::spmv::mixed):
// out[0] = the largest |v - fl32(v)| / |v| over the finite nonzero values, as the bits of a
// non-negative double (ordered as u64, so atomicMax keeps the largest); out[1] = the least
// position of a finite nonzero value beyond f32's range or below its smallest normal number
// (the host sets 2^64 - 1 before, and reads the value there to say which). Zeros and non-finite
// values pass, as on the host. Each block reduces its threads' two fields in shared memory and
// makes one atomic of each.
extern "C" __global__ void __launch_bounds__(SOLVER_THREADS)
    vector_f32_fit(const double* __restrict__ val, u64 n, u64* out) {
    u64 worst = 0, bad = ~0ull;
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (u64)gridDim.x * blockDim.x) {
        const double v = val[k];
        if (v == 0.0 || !isfinite(v)) continue;
        const double m = fabs(v);
        if (m > 3.4028234663852886e38 || m < 1.1754943508222875e-38) {  // f32::MAX, f32::MIN_POSITIVE
            bad = k < bad ? k : bad;
            continue;
        }
        const double r = (double)__double2float_rn(v);
        if (r != v) {
            const u64 e = (u64)__double_as_longlong(fabs(r - v) / m);
            worst = e > worst ? e : worst;
        }
    }
    __shared__ u64 s_worst[SOLVER_THREADS / 32], s_bad[SOLVER_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) {
        const u64 w = __shfl_down_sync(FULL_MASK, worst, o), b = __shfl_down_sync(FULL_MASK, bad, o);
        worst = w > worst ? w : worst;
        bad = b < bad ? b : bad;
    }
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        s_worst[warp] = worst;
        s_bad[warp] = bad;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (u32 w = 1; w < blockDim.x / 32; ++w) {
            worst = s_worst[w] > worst ? s_worst[w] : worst;
            bad = s_bad[w] < bad ? s_bad[w] : bad;
        }
        if (worst != 0) atomicMax(&out[0], worst);
        if (bad != ~0ull) atomicMin(&out[1], bad);
    }
}

// The block steps of several columns (solvers/cols.cuh), each column's blocks on its own vectors:
//  - block_read_slots: column c's NSLOTS slots (pointer 0) to out[(first + c) * NSLOTS ...], so
//    that one download reads the status of every running column;
//  - block_axpy: y += alpha x (pointers 0 x, 1 y); block_scale: z = d o r (0 r, 1 z; d shared);
//    block_copy: dst = src (0 src, 1 dst). The same elements per thread as the one-column kernels.
#define BLOCK_VECTOR_ENTRIES(T, SUF)                                                                 \
    extern "C" __global__ void block_read_slots_##SUF(const ColTab tab, T* out, u32 first) {         \
        if (threadIdx.x < NSLOTS_K)                                                                  \
            out[(u64)(first + blockIdx.y) * NSLOTS_K + threadIdx.x] = COL(T, 0)[threadIdx.x];        \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_axpy_##SUF(                   \
        const ColTab tab, u32 n, T alpha) {                                                          \
        axpy_<T>(alpha, COL(const T, 0), COL(T, 1), n);                                              \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_scale_##SUF(                  \
        const ColTab tab, u32 n, const T* d) {                                                       \
        scale_<T>(d, COL(const T, 0), COL(T, 1), n);                                                 \
    }                                                                                                \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_copy_##SUF(                   \
        const ColTab tab, u32 n) {                                                                   \
        const T* src = COL(const T, 0);                                                              \
        T* dst = COL(T, 1);                                                                          \
        GRID_STRIDE(i, n) dst[i] = src[i];                                                           \
    }

BLOCK_VECTOR_ENTRIES(float, f32)
BLOCK_VECTOR_ENTRIES(double, f64)
BLOCK_VECTOR_ENTRIES(cfloat, c64)
BLOCK_VECTOR_ENTRIES(cdouble, c128)
