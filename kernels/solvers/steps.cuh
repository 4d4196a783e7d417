// Vector loops that a single-GPU solver step and its distributed counterpart (dist/dist.cu)
// share: each updates its vectors and leaves this thread's share of the step's sums in `v`;
// the caller reduces them (grid_sum, then the recurrence in the last block, or the all-reduce).
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"

// CG: r -= alpha q (and z = dinv r in Jacobi mode); v = (|r|^2, r.z).
template <typename T>
__device__ __forceinline__ void cg_update_r_loop_(const T* q, T* r, const T* dinv, T* z, u32 n,
                                                  u32 mode, T alpha, T (&v)[2]) {
    GRID_STRIDE(i, n) {
        const T ri = r[i] - alpha * q[i];
        r[i] = ri;
        v[0] += ri * ri;
        if (mode == FUSE_JACOBI) {
            const T zi = dinv[i] * ri;
            z[i] = zi;
            v[1] += ri * zi;
        }
    }
}

// BiCGSTAB: x += alpha phat + omega shat; r = s - omega t; v = (|r|^2, rhat.r).
template <typename T>
__device__ __forceinline__ void bicg_update_loop_(T* x, const T* phat, const T* shat, const T* sv,
                                                  const T* t, T* r, const T* rhat, u32 n, T alpha,
                                                  T omega, T (&v)[2]) {
    GRID_STRIDE(i, n) {
        x[i] += alpha * phat[i] + omega * shat[i];
        const T ri = sv[i] - omega * t[i];
        r[i] = ri;
        v[0] += ri * ri;
        v[1] += rhat[i] * ri;
    }
}
