// Assembly kernels of the Kass–Miller implicit shallow-water step (examples/shallow_water.rs):
// the tridiagonal systems of one alternating-direction sweep, built on the GPU so that a
// simulation step never leaves the device. The grid is n x n, row-major (h[i*n + j], i = row).
//
// Kass & Miller (1990): with depth e = max(h - ground, 0), one implicit 1-D step along a line is
//   h_k - lam * [(e_{k-1} + e_k)(h_{k-1} - h_k) + (e_k + e_{k+1})(h_{k+1} - h_k)] = rhs_k,
// lam = g dt^2 / (2 dx^2): lower = -lam (e_{k-1} + e_k), upper = -lam (e_k + e_{k+1}),
// diag = 1 - lower - upper (a symmetric, diagonally dominant M-matrix: stable for any dt).
// The wall at each end reflects (no flux term there).
#include "common.cuh"

__device__ __forceinline__ float sw_depth(const float* h, const float* ground, u32 idx) {
    float e = h[idx] - ground[idx];
    return e > 0.0f ? e : 0.0f;
}

// Row sweep: system i = row i, element j (row-major output, coalesced).
// rhs = h1 + (1 - tau)(h1 - h0): the second-order time term with Kass–Miller's damping.
extern "C" __global__ void sw_rows_f32(const float* h1, const float* h0, const float* ground, u32 n, float lam,
                                       float tau, float* a, float* b, float* c, float* d) {
    const u32 idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * n) return;
    const u32 j = idx % n;
    const float e = sw_depth(h1, ground, idx);
    const float lo = j > 0 ? -lam * (sw_depth(h1, ground, idx - 1) + e) : 0.0f;
    const float up = j + 1 < n ? -lam * (e + sw_depth(h1, ground, idx + 1)) : 0.0f;
    a[idx] = lo;
    c[idx] = up;
    b[idx] = 1.0f - lo - up;
    d[idx] = h1[idx] + (1.0f - tau) * (h1[idx] - h0[idx]);
}

// Column sweep: system j = column j, element i, written column-major (out index j*n + i, the
// writes coalesced); the right-hand side is the row sweep's result hx (row-major), read with a
// stride of n (served from L2: a 512^2 f32 field is 1 MiB). Depths come from h1 as in the row sweep.
extern "C" __global__ void sw_cols_f32(const float* hx, const float* h1, const float* ground, u32 n, float lam,
                                       float* a, float* b, float* c, float* d) {
    const u32 o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n * n) return;
    const u32 j = o / n, i = o % n;
    const u32 idx = i * n + j;
    const float e = sw_depth(h1, ground, idx);
    const float lo = i > 0 ? -lam * (sw_depth(h1, ground, idx - n) + e) : 0.0f;
    const float up = i + 1 < n ? -lam * (e + sw_depth(h1, ground, idx + n)) : 0.0f;
    a[o] = lo;
    c[o] = up;
    b[o] = 1.0f - lo - up;
    d[o] = hx[idx];
}

// out[i*n + j] = in[j*n + i]: the column sweep's result back to row-major, through a 32x32
// shared-memory tile (33 columns so that the transposed reads hit 32 different banks).
extern "C" __global__ void sw_transpose_f32(const float* in, u32 n, float* out) {
    __shared__ float tile[32][33];
    const u32 bx = blockIdx.x * 32, by = blockIdx.y * 32;
    for (u32 r = threadIdx.y; r < 32; r += blockDim.y) {
        const u32 row = by + r, col = bx + threadIdx.x;
        if (row < n && col < n) tile[r][threadIdx.x] = in[row * n + col];
    }
    __syncthreads();
    for (u32 r = threadIdx.y; r < 32; r += blockDim.y) {
        const u32 row = bx + r, col = by + threadIdx.x;
        if (row < n && col < n) out[row * n + col] = tile[threadIdx.x][r];
    }
}
