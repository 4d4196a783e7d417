// Vector loops that a single-GPU solver step and its distributed counterpart (dist/dist.cu)
// share: each updates its vectors and leaves this thread's share of the step's sums in `v`;
// the caller reduces them (grid_sum, then the recurrence in the last block, or the all-reduce).
#include "common.cuh"
#include "solvers/reduce.cuh"
#include "solvers/recur.cuh"

// CG: r -= alpha q (and z = dinv r in Jacobi mode); v = (|r|^2, r^H z), or r^T z when
// `bilinear` (COCG; also r^T r without a preconditioner).
template <typename T>
__device__ __forceinline__ void cg_update_r_loop_(const T* q, T* r, const T* dinv, T* z, u32 n,
                                                  u32 mode, T alpha, T (&v)[2],
                                                  bool bilinear = false) {
    GRID_STRIDE(i, n) {
        const T ri = r[i] - alpha * q[i];
        r[i] = ri;
        dotc_(v[0], ri, ri);
        if (mode == FUSE_JACOBI) {
            const T zi = dinv[i] * ri;
            z[i] = zi;
            form_acc_(v[1], ri, zi, bilinear);
        } else if (mode == FUSE_IDENTITY && bilinear) {
            v[1] += ri * ri;
        }
    }
}

// BiCGSTAB: x += alpha phat + omega shat; r = s - omega t; v = (|r|^2, rhat^H r).
template <typename T>
__device__ __forceinline__ void bicg_update_loop_(T* x, const T* phat, const T* shat, const T* sv,
                                                  const T* t, T* r, const T* rhat, u32 n, T alpha,
                                                  T omega, T (&v)[2]) {
    GRID_STRIDE(i, n) {
        x[i] += alpha * phat[i] + omega * shat[i];
        const T ri = sv[i] - omega * t[i];
        r[i] = ri;
        dotc_(v[0], ri, ri);
        dotc_(v[1], rhat[i], ri);
    }
}
