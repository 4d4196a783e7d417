// The runtime's self-test kernel: out[i] = i * scale, for i < n (any grid size).
#include "common.cuh"

extern "C" __global__ void selftest_iota_u32(u32* out, u32 n, u32 scale) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[i] = i * scale;
    }
}
