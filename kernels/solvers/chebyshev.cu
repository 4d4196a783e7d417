// The Chebyshev preconditioner's step (host scalars; no status): backend::gpu's poly_step.
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"
#include "solvers/cols.cuh"

// first: res = D^-1 t; d = c2 res; z = d.   else: res -= D^-1 t; d = c1 d + c2 res; z += d.
template <typename T>
__device__ void poly_step_(const T* t, const T* dinv, T* res, T* d, T* z, u32 n, u32 first, T c1,
                           T c2) {
    GRID_STRIDE(i, n) {
        const T ti = dinv ? dinv[i] * t[i] : t[i];
        if (first) {
            const T di = c2 * ti;
            res[i] = ti;
            d[i] = di;
            z[i] = di;
        } else {
            const T ri = res[i] - ti;
            const T di = c1 * d[i] + c2 * ri;
            res[i] = ri;
            d[i] = di;
            z[i] += di;
        }
    }
}

#define CHEBYSHEV_ENTRIES(T, SUF)                                                                    \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) solver_poly_step_##SUF(             \
        const T* t, const T* dinv, T* res, T* d, T* z, u32 n, u32 first, T c1, T c2) {               \
        poly_step_<T>(t, dinv, res, d, z, n, first, c1, c2);                                         \
    }

// The step of several columns in one launch (solvers/cols.cuh): pointers 0 t, 1 res, 2 d, 3 z;
// dinv and the coefficients are shared.
#define CHEBYSHEV_BLOCK_ENTRIES(T, SUF)                                                              \
    extern "C" __global__ void __launch_bounds__(SOLVER_THREADS) block_poly_step_##SUF(              \
        const ColTab tab, u32 n, const T* dinv, u32 first, T c1, T c2) {                             \
        poly_step_<T>(COL(const T, 0), dinv, COL(T, 1), COL(T, 2), COL(T, 3), n, first, c1, c2);     \
    }

CHEBYSHEV_ENTRIES(float, f32)
CHEBYSHEV_ENTRIES(double, f64)
CHEBYSHEV_ENTRIES(cfloat, c64)
CHEBYSHEV_ENTRIES(cdouble, c128)
CHEBYSHEV_BLOCK_ENTRIES(float, f32)
CHEBYSHEV_BLOCK_ENTRIES(double, f64)
CHEBYSHEV_BLOCK_ENTRIES(cfloat, c64)
CHEBYSHEV_BLOCK_ENTRIES(cdouble, c128)
