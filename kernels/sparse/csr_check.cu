// Validating and converting CSR arrays on the device, as they arrive from the host in the
// caller's index and value types (segsparse::csr::check_gpu).
//
// Each checker writes the converted array (u32 indices; in place when the input is 32-bit) and
// records the first offending position of each kind of error with atomicMin into `err`
// (u64 slots, initialised to ~0 by the host, which builds the message from the host arrays):
//   err[0]  an indptr value outside [0, 2^32)
//   err[1]  an indices value outside [0, 2^32)
//   err[2]  indptr decreases: indptr[i + 1] < indptr[i], first such i
//   err[3]  a column >= ncols, first such entry
// indptr[0] != 0 and indptr[nrows] != nnz are read by the host from its own array (two values).
#include "common.cuh"

__device__ __forceinline__ bool out_of_u32(i32 v) { return v < 0; }
__device__ __forceinline__ bool out_of_u32(u32) { return false; }
__device__ __forceinline__ bool out_of_u32(i64 v) { return v < 0 || v > 0xffffffffll; }

template <typename I>
__device__ __forceinline__ void rowptr_body(const I* in, u64 n1, u32* out, u64* err) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n1; i += stride) {
        const I v = in[i];
        if (out_of_u32(v)) atomicMin(&err[0], i);
        if (i + 1 < n1 && in[i + 1] < v) atomicMin(&err[2], i);
        out[i] = (u32)v;
    }
}

template <typename I>
__device__ __forceinline__ void cols_body(const I* in, u64 nnz, u32 ncols, u32* out, u64* err) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < nnz; k += stride) {
        const I v = in[k];
        if (out_of_u32(v)) {
            atomicMin(&err[1], k);
        } else if ((u64)v >= (u64)ncols) {
            atomicMin(&err[3], k);
        }
        out[k] = (u32)v;
    }
}

// indptr of nrows + 1 entries (n1). For the 32-bit inputs `out` may be `in` itself: an element
// is rewritten with its own bits, so the neighbour read of another thread sees the same value.
extern "C" __global__ void csr_rowptr_i32(const i32* in, u64 n1, u32* out, u64* err) { rowptr_body(in, n1, out, err); }
extern "C" __global__ void csr_rowptr_u32(const u32* in, u64 n1, u32* out, u64* err) { rowptr_body(in, n1, out, err); }
extern "C" __global__ void csr_rowptr_i64(const i64* in, u64 n1, u32* out, u64* err) { rowptr_body(in, n1, out, err); }

extern "C" __global__ void csr_cols_i32(const i32* in, u64 nnz, u32 ncols, u32* out, u64* err) { cols_body(in, nnz, ncols, out, err); }
extern "C" __global__ void csr_cols_u32(const u32* in, u64 nnz, u32 ncols, u32* out, u64* err) { cols_body(in, nnz, ncols, out, err); }
extern "C" __global__ void csr_cols_i64(const i64* in, u64 nnz, u32 ncols, u32* out, u64* err) { cols_body(in, nnz, ncols, out, err); }

// Values in the other floating type (float32 <-> float64), converted as NumPy's astype does
// (round to nearest).
extern "C" __global__ void csr_values_f32_to_f64(const float* in, u64 n, double* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) out[k] = (double)in[k];
}
extern "C" __global__ void csr_values_f64_to_f32(const double* in, u64 n, float* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) out[k] = (float)in[k];
}
