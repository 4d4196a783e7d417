// Shared definitions for every kernel source. Spliced in by the Rust side (gpu::kernels):
// kernels include no CUDA or standard headers, so that NVRTC alone (as in CI) compiles them.
#pragma once

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define FULL_MASK 0xffffffffu

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
