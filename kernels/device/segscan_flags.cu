// Packed head flags (one bit per element, bit i%32 of word i/32) from CSR-style segment
// offsets: the bit of every offset < n is set (repeated offsets = empty segments set the same
// bit). The words must be zero beforehand. One thread per offset; atomicOr because neighbouring
// offsets share a word.
#include "common.cuh"

extern "C" __global__ void segscan_flags_from_offsets(const u32* __restrict__ offsets, u32 count,
                                                      u32* words, long long n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const u32 o = offsets[i];
        if ((long long)o < n) atomicOr(&words[o >> 5], 1u << (o & 31u));
    }
}
