// The scalar recurrences of the solvers (mirror of backend::recur), run by the last block of a
// reduction (or by every block of a fused kernel on its shared-memory copy of the slots).
//
// Scalars never leave the device: the recurrences compute alpha, beta, omega, the convergence and
// breakdown tests and the status word into the slots; the next kernel reads its coefficients
// from there. Every kernel returns at once when the status is set, so the host checks the status
// only every k iterations.
//
// The slot numbers (S_*), status codes (ST_*), fuse modes (FUSE_*: 0 identity, z is r; 1 Jacobi,
// z = dinv * r written by the kernel; 2 separate preconditioner, z given or rho left to cg_rho),
// the slot count NSLOTS_K and SOLVER_THREADS are -D defines from backend::gpu::SOLVER_CONSTANTS,
// which builds them from backend::recur::{Slot, Status} and the backend's own constants.
// S_ITER_BASE is the iteration that the kernels' `it` argument counts from: the entry points add
// it to their `it`, so a CUDA graph captured once with relative iteration numbers replays at any
// base (the GPU backend sets it before each block). 0 outside graphs.
//
// T is real (float, double) or complex (cfloat, cdouble), as in backend::recur: the slots hold T,
// |r|^2 and the status are real values held in T, comparisons take real parts (re_), and the
// CG family's products are x^H y, or x^T y when the slot S_FORM is set (COCG). For real types
// every such function is the identity, so the real recurrences are unchanged.
#include "common.cuh"
#include "complex.cuh"

#if !defined(SOLVER_THREADS) || !defined(NSLOTS_K) || !defined(S_STATUS) || !defined(S_ITER_BASE) || \
    !defined(ST_CONVERGED) || !defined(ST_BREAKDOWN_ARNOLDI) || !defined(FUSE_IDENTITY) ||          \
    !defined(FUSE_JACOBI) || !defined(FUSE_SEPARATE) || !defined(S_FORM)
#error "the solver constants come from the Rust side as -D defines (backend::gpu::SOLVER_CONSTANTS)"
#endif

template <typename T> __device__ __forceinline__ bool finite_(T x) { return (x - x) == T(0); }
__device__ __forceinline__ float eps_(float) { return 1.1920929e-07f; }
__device__ __forceinline__ double eps_(double) { return 2.220446049250313e-16; }

template <typename T> __device__ __forceinline__ u32 iter_base_(const T* s) {
    return u32(re_(s[S_ITER_BASE]));
}

// The CG family's form: x^T y (COCG) when set.
template <typename T> __device__ __forceinline__ bool bilinear_(const T* s) {
    return s[S_FORM] != T(0);
}

template <typename T> __device__ __forceinline__ void stop_(T* s, int status, u32 it) {
    s[S_STATUS] = T(status);
    s[S_STATUS_ITER] = T(it);
}

// ---- recurrences (mirror of backend::recur) -------------------------------------------------

template <typename T> __device__ bool test_rr_(T* s, T* hist, T rr, u32 it) {
    s[S_RR] = rr;
    if (hist) hist[it] = rr;  // null in the fused kernels' blocks other than block 0
    if (!finite_(rr)) { stop_(s, ST_NONFINITE, it); return true; }
    if (re_(rr) <= re_(s[S_THRESH])) { stop_(s, ST_CONVERGED, it); return true; }
    return false;
}

template <typename T> __device__ void cg_rho_(T* s, T rz, u32 it) {
    if (!finite_(rz)) { stop_(s, ST_NONFINITE, it); return; }
    s[S_BETA] = rz / s[S_RHO];
    s[S_RHO] = rz;
}

// Start (recur::start): rho, rr0, alpha = omega = 1, beta = 0; the rr test.
template <typename T> __device__ void start_rec_(T* s, T* hist, T rr, T rz, u32 it) {
    s[S_RHO] = rz;
    s[S_RR0] = rr;
    s[S_ALPHA] = T(1);
    s[S_OMEGA] = T(1);
    s[S_BETA] = T(0);
    if (!finite_(rz)) { stop_(s, ST_NONFINITE, it); return; }
    test_rr_(s, hist, rr, it);
}

// CG: alpha = rho / pq; breakdown when Re(pq) <= 0 (COCG: pq = 0).
template <typename T> __device__ void cg_alpha_rec_(T* s, T pq, u32 it) {
    typedef typename real_of<T>::type R;
    s[S_PQ] = pq;
    const bool broken = is_complex_<T>::value && bilinear_(s) ? pq == T(0) : re_(pq) <= R(0);
    if (!finite_(pq)) { s[S_ALPHA] = T(0); stop_(s, ST_NONFINITE, it); }
    else if (broken) { s[S_ALPHA] = T(0); stop_(s, ST_BREAKDOWN_PQ, it); }
    else s[S_ALPHA] = s[S_RHO] / pq;
}

// CG: |r|^2 test; beta, rho from rz (by mode; without a preconditioner rho is |r|^2, or r^T r
// in rz for complex COCG).
template <typename T> __device__ void cg_update_r_rec_(T* s, T* hist, T rr, T rz, u32 mode, u32 it) {
    if (test_rr_(s, hist, rr, it)) return;
    if (mode == FUSE_IDENTITY) cg_rho_(s, is_complex_<T>::value && bilinear_(s) ? rz : rr, it);
    else if (mode == FUSE_JACOBI) cg_rho_(s, rz, it);
}


// BiCGSTAB: alpha = rho / rv.
template <typename T> __device__ void bicg_alpha_rec_(T* s, T rv, u32 it) {
    s[S_PQ] = rv;
    const T alpha = s[S_RHO] / rv;
    if (!finite_(rv)) stop_(s, ST_NONFINITE, it);
    else if (rv == T(0) || !finite_(alpha)) stop_(s, ST_BREAKDOWN_RV, it);
    else s[S_ALPHA] = alpha;
}

// BiCGSTAB: omega = ts / tt (0 when t = 0).
template <typename T> __device__ void bicg_omega_rec_(T* s, T ts, T tt, u32 it) {
    typedef typename real_of<T>::type R;
    s[S_TS] = ts;
    s[S_TT] = tt;
    if (!finite_(ts) || !finite_(tt)) stop_(s, ST_NONFINITE, it);
    else s[S_OMEGA] = re_(tt) > R(0) ? ts / tt : T(0);
}

// BiCGSTAB: |r|^2 test, breakdown tests, beta and rho from rr = |r|^2 and rho = rhat.r.
template <typename T> __device__ void bicg_update_rec_(T* s, T* hist, T rr, T rho, T omega, u32 it) {
    if (test_rr_(s, hist, rr, it)) return;
    if (!finite_(rho)) stop_(s, ST_NONFINITE, it);
    else if (omega == T(0)) stop_(s, ST_BREAKDOWN_OMEGA, it);
    else if (abs2_(rho) <= eps_(re_(rr)) * eps_(re_(rr)) * re_(s[S_RR0]) * re_(rr))
        stop_(s, ST_BREAKDOWN_RHO, it);
    else {
        s[S_BETA] = (rho / s[S_RHO]) * (s[S_ALPHA] / omega);
        s[S_RHO] = rho;
    }
}


// The block's copy of the slots in the fused kernels (loaded at entry, read and written by the
// recurrences).
template <typename T> __device__ __forceinline__ void load_slots_(T* ls, const T* s) {
    if (threadIdx.x < NSLOTS_K) ls[threadIdx.x] = s[threadIdx.x];
    __syncthreads();
}
// Block 0 writes the slots back (every exit of a fused kernel's body goes through this).
template <typename T> __device__ __forceinline__ void publish_slots_(const T* ls, T* s) {
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < NSLOTS_K) s[threadIdx.x] = ls[threadIdx.x];
}
