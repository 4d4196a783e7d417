// Shared definitions for every kernel source. Spliced in by the Rust side (gpu::kernels):
// kernels include no CUDA or standard headers, so that NVRTC alone (as in CI) compiles them.
#pragma once

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define FULL_MASK 0xffffffffu

// X(T, suffix) for each element type of the scans and segmented reductions (the Rust side's
// ScanElem: f32, f64, i32, u32).
#define FOR_SCAN_ELEMS(X) X(float, f32) X(double, f64) X(int, i32) X(u32, u32)

// A flag in global memory read with acquire and written with release semantics at GPU scope
// (the producer/consumer handshakes of the sync-free triangular solve and level analysis).
__device__ __forceinline__ u32 ld_acquire_u32(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_u32(u32* p, u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The next ticket of the counter *c for the whole warp: lane 0 draws it, every lane returns it
// (the warp-per-row loops that take rows in the order the counter hands them out).
__device__ __forceinline__ u32 warp_ticket(u32* c) {
    u32 t = 0;
    if ((threadIdx.x & 31u) == 0) t = atomicAdd(c, 1u);
    return __shfl_sync(FULL_MASK, t, 0);
}

// First index in [lo, hi) whose column is >= j (col sorted within the range).
__device__ __forceinline__ u32 lower_bound_u32(const u32* __restrict__ col, u32 lo, u32 hi, u32 j) {
    while (lo < hi) {
        const u32 m = (lo + hi) >> 1;
        if (col[m] < j) lo = m + 1; else hi = m;
    }
    return lo;
}

// Binary operators used by scans and reductions. Each has an identity for the value type T.
struct OpPlus {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
    template <typename T> __device__ __forceinline__ static T identity() { return T(0); }
};
struct OpMax {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
    template <typename T> __device__ __forceinline__ static T identity();
};
struct OpMin {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a < b ? a : b; }
    template <typename T> __device__ __forceinline__ static T identity();
};
template <> __device__ __forceinline__ float OpMax::identity<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double OpMax::identity<double>() { return -__longlong_as_double(0x7ff0000000000000ll); }
template <> __device__ __forceinline__ int OpMax::identity<int>() { return (int)0x80000000; }
template <> __device__ __forceinline__ unsigned int OpMax::identity<unsigned int>() { return 0u; }
template <> __device__ __forceinline__ float OpMin::identity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double OpMin::identity<double>() { return __longlong_as_double(0x7ff0000000000000ll); }
template <> __device__ __forceinline__ int OpMin::identity<int>() { return 0x7fffffff; }
template <> __device__ __forceinline__ unsigned int OpMin::identity<unsigned int>() { return 0xffffffffu; }
