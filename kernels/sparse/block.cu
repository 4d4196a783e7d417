// Block-structured sparse products (host side: src/sparse/gpu/block.rs, which documents the
// method). A matrix with rb×cb blocks is seen through its block pattern (bptr, bcol: one entry
// per stored block) and its values in the closed layout: the CSR arrays of the matrix with every
// block of the pattern stored whole, which is row-major CSR of the padded matrix. Block row I's
// values start at bptr[I]·rb·cb; its scalar row a at that + a·m·cb, where m is the row's block
// count; block q of the row (q-th in order) at that + q·cb.
#include "common.cuh"

// Block columns of block row I: the sorted union of col/cb over the rows I·rb .. I·rb+rb-1
// (each sorted). count != 0: the number into cnt[I]; else written at out[off[I]..].
__device__ __forceinline__ void block_union_row(const u32* __restrict__ rp, const u32* __restrict__ col, u32 nrows,
                                                u32 rb, u32 cb, u32 I, u32* out, u32* cnt) {
    u32 p[BLOCK_MAX], e[BLOCK_MAX];
#pragma unroll
    for (u32 a = 0; a < BLOCK_MAX; ++a) {
        const u32 i = I * rb + a;
        const bool on = a < rb && i < nrows;
        p[a] = on ? rp[i] : 0;
        e[a] = on ? rp[i + 1] : 0;
    }
    u32 n = 0;
    while (true) {
        u32 lo = 0xffffffffu;
#pragma unroll
        for (u32 a = 0; a < BLOCK_MAX; ++a)
            if (p[a] < e[a]) lo = min(lo, col[p[a]] / cb);
        if (lo == 0xffffffffu) break;
        if (out) out[n] = lo;
        ++n;
#pragma unroll
        for (u32 a = 0; a < BLOCK_MAX; ++a)
            while (p[a] < e[a] && col[p[a]] / cb == lo) ++p[a];
    }
    if (cnt) *cnt = n;
}

extern "C" __global__ void block_pattern_count(const u32* __restrict__ rp, const u32* __restrict__ col,
                                               u32 nrows, u32 rb, u32 cb, u32 nb, u32* cnt) {
    for (u32 I = blockIdx.x * blockDim.x + threadIdx.x; I < nb; I += gridDim.x * blockDim.x)
        block_union_row(rp, col, nrows, rb, cb, I, nullptr, cnt + I);
}

extern "C" __global__ void block_pattern_fill(const u32* __restrict__ rp, const u32* __restrict__ col,
                                              u32 nrows, u32 rb, u32 cb, u32 nb, const u32* __restrict__ bptr,
                                              u32* bcol) {
    for (u32 I = blockIdx.x * blockDim.x + threadIdx.x; I < nb; I += gridDim.x * blockDim.x)
        block_union_row(rp, col, nrows, rb, cb, I, bcol + bptr[I], nullptr);
}

// pos[e]: where entry e of the scalar matrix sits in the closed layout of its block pattern.
extern "C" __global__ void block_positions(const u32* __restrict__ rp, const u32* __restrict__ col, u32 nrows,
                                           u32 rb, u32 cb, const u32* __restrict__ bptr,
                                           const u32* __restrict__ bcol, u32* pos) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < nrows; i += gridDim.x * blockDim.x) {
        const u32 I = i / rb, a = i % rb;
        const u32 b0 = bptr[I], m = bptr[I + 1] - b0;
        const u32 base = b0 * rb * cb + a * m * cb;
        u32 q = b0;
        for (u32 p = rp[i]; p < rp[i + 1]; ++p) {
            const u32 c = col[p], J = c / cb;
            while (bcol[q] < J) ++q;
            pos[p] = base + (q - b0) * cb + c % cb;
        }
    }
}

// The scalar pattern of the closed layout: row_ptr (nrows + 1) and col.
extern "C" __global__ void block_expand(const u32* __restrict__ bptr, const u32* __restrict__ bcol, u32 nb,
                                        u32 rb, u32 cb, u32* rp, u32* col) {
    const u32 nrows = nb * rb;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i <= nrows; i += gridDim.x * blockDim.x) {
        if (i == nrows) {
            rp[i] = bptr[nb] * rb * cb;
            continue;
        }
        const u32 I = i / rb, a = i % rb;
        const u32 b0 = bptr[I], m = bptr[I + 1] - b0;
        const u32 base = b0 * rb * cb + a * m * cb;
        rp[i] = base;
        for (u32 q = 0; q < m; ++q) {
            const u32 J = bcol[b0 + q];
            for (u32 b = 0; b < cb; ++b) col[base + q * cb + b] = J * cb + b;
        }
    }
}

__device__ __forceinline__ float block_fma(float acc, float a, float b) { return __fadd_rn(acc, __fmul_rn(a, b)); }
__device__ __forceinline__ double block_fma(double acc, double a, double b) { return __dadd_rn(acc, __dmul_rn(a, b)); }

// Block SpGEMM, numeric: C = A·B with A r×k blocks, B k×c blocks, C r×c blocks, all in the
// closed layout; C's block pattern (cptr, ccol) from the symbolic product of the block patterns.
// A warp takes ra consecutive rows of one block row I of C (ng = ceil(r/ra) warps per block
// row): it clears their accumulator (in shared memory, cap entries per warp, when the rows fit,
// else C's own rows), then takes A's blocks of row I in order; for each, the block's rows go to
// shared memory and the lanes take the blocks J of B's block row K (L lanes per block, each
// every L-th column b of it, L = min(c, 32 / blocks in the row) so that short rows keep the
// lanes busy), find J in C's row by binary search (once per lane and block), and add the
// products to the warp's entries of column b of block J, kk in order. So each entry
// of C is the sum of its products in A's scalar row order, rounded as round(acc + round(a·b))
// like the scalar SpGEMM: on the entries of the scalar product it equals it bit for bit; the
// entries that only the padding reaches are +0.
template <typename T>
__device__ void bspgemm_numeric_(u32 nbr, u32 r, u32 k, u32 c, u32 ra, u32 cap, const u32* __restrict__ aptr,
                                 const u32* __restrict__ acol, const T* __restrict__ aval,
                                 const u32* __restrict__ bptr, const u32* __restrict__ bcol,
                                 const T* __restrict__ bval, const u32* __restrict__ cptr,
                                 const u32* __restrict__ ccol, T* cval) {
    __shared__ T sa[BLOCK_WARPS][BLOCK_MAX * BLOCK_MAX];
    extern __shared__ __align__(16) unsigned char block_smem[];
    const u32 lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const u32 warps = gridDim.x * BLOCK_WARPS;
    const u32 ng = (r + ra - 1) / ra;
    T* sacc = reinterpret_cast<T*>(block_smem) + (size_t)w * cap;
    for (u32 u = blockIdx.x * BLOCK_WARPS + w; u < nbr * ng; u += warps) {
        const u32 I = u / ng, alo = (u - I * ng) * ra;
        const u32 nr = min(r, alo + ra) - alo;
        const u32 c0 = cptr[I], mc = cptr[I + 1] - c0;
        const u32 rc = mc * c;
        T* crow = cval + (size_t)c0 * r * c + (size_t)alo * rc;
        const bool shared = nr * rc <= cap;
        T* acc = shared ? sacc : crow;
        for (u32 t = lane; t < nr * rc; t += 32) acc[t] = T(0);
        const u32 a0 = aptr[I], ma = aptr[I + 1] - a0;
        const T* arow = aval + (size_t)a0 * r * k + (size_t)alo * ma * k;
        __syncwarp();
        for (u32 q = 0; q < ma; ++q) {
            const u32 K = acol[a0 + q];
            for (u32 t = lane; t < nr * k; t += 32) {
                const u32 a = t / k, kk = t - a * k;
                sa[w][t] = arow[a * ma * k + q * k + kk];
            }
            __syncwarp();
            const u32 b0 = bptr[K], mb = bptr[K + 1] - b0;
            const u32 items = mb * c;
            const T* brow = bval + (size_t)b0 * k * c;
            // L lanes per block of B's row, each taking every L-th of its c columns: one search
            // of the block's position in C's row per lane (not per column), as many lanes busy
            // as the row's blocks allow. Each entry of C is still written by one lane per q.
            const u32 per = 32u / (mb > 0 ? mb : 1u);
            const u32 L = per < 1u ? 1u : (per > c ? c : per);
            for (u32 it = lane; it < mb * L; it += 32) {
                const u32 j = it / L, g0 = it - j * L;
                const u32 J = bcol[b0 + j];
                u32 lo = 0, hi = mc;
                while (hi - lo > 1) {
                    const u32 mid = (lo + hi) >> 1;
                    if (ccol[c0 + mid] <= J) lo = mid; else hi = mid;
                }
                for (u32 b = g0; b < c; b += L) {
                    const u32 bi = j * c + b;
                    T bv[BLOCK_MAX];
#pragma unroll
                    for (u32 kk = 0; kk < BLOCK_MAX; ++kk)
                        if (kk < k) bv[kk] = brow[kk * items + bi];
                    T* out = acc + lo * c + b;
                    for (u32 a = 0; a < nr; ++a) {
                        T x = out[a * rc];
#pragma unroll
                        for (u32 kk = 0; kk < BLOCK_MAX; ++kk)
                            if (kk < k) x = block_fma(x, sa[w][a * k + kk], bv[kk]);
                        out[a * rc] = x;
                    }
                }
            }
            __syncwarp();
        }
        if (shared) {
            for (u32 t = lane; t < nr * rc; t += 32) crow[t] = sacc[t];
            __syncwarp();
        }
    }
}

#define BLOCK_TYPED(T, S)                                                                                  \
    extern "C" __global__ void __launch_bounds__(BLOCK_WARPS * 32)                                         \
        bspgemm_numeric_##S(u32 nbr, u32 r, u32 k, u32 c, u32 ra, u32 cap, const u32* aptr, const u32* acol, \
                            const T* aval, const u32* bptr, const u32* bcol, const T* bval,               \
                            const u32* cptr, const u32* ccol, T* cval) {                                   \
        bspgemm_numeric_<T>(nbr, r, k, c, ra, cap, aptr, acol, aval, bptr, bcol, bval, cptr, ccol, cval);  \
    }                                                                                                      \
    /* out[pos[e]] = val[e] (the closed layout's padding cleared first by the caller). */                  \
    extern "C" __global__ void block_scatter_##S(const T* __restrict__ val, const u32* __restrict__ pos,   \
                                                 u32 nnz, T* out) {                                        \
        for (u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < nnz; e += gridDim.x * blockDim.x)          \
            out[pos[e]] = val[e];                                                                          \
    }
BLOCK_TYPED(float, f32)
BLOCK_TYPED(double, f64)
