// The conjugate transpose of a complex CSR matrix on the device (host side:
// src/sparse/gpu/adjoint.rs): the structure of the transpose comes from sparse/spgemm.cu's
// pattern kernels and a stable sort by column; this gathers the values through the sort's
// permutation, conjugated.
#include "common.cuh"
#include "complex.cuh"

// tcol[q] = rows[perm[q]], tval[q] = conj(val[perm[q]]).
template <typename C>
__device__ void conj_gather_(const u32* __restrict__ perm, const u32* __restrict__ rows,
                             const C* __restrict__ val, u32 nnz, u32* tcol, C* tval) {
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < nnz; q += gridDim.x * blockDim.x) {
        const u32 p = perm[q];
        tcol[q] = rows[p];
        tval[q] = cconj(val[p]);
    }
}

#define ADJOINT_ENTRIES(C, SUF)                                                                    \
    extern "C" __global__ void sparse_conj_gather_##SUF(const u32* perm, const u32* rows,          \
                                                        const C* val, u32 nnz, u32* tcol,          \
                                                        C* tval) {                                 \
        conj_gather_<C>(perm, rows, val, nnz, tcol, tval);                                         \
    }

ADJOINT_ENTRIES(cfloat, c64)
ADJOINT_ENTRIES(cdouble, c128)
