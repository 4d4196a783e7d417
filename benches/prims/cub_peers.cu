// The peer harness: CUB's device-wide primitives timed on the same GPU, in the same call to the
// GPU machine, as segsparse's scan-bench and prims-bench (benches/prims/device.sh runs all three;
// merge.py joins their JSON into benches/results/scan-vs-cub.jsonl).
//
// Built on the GPU machine by benches/prims/run.sh: nvcc -arch=sm_90 -O3 (CUB is header-only and
// ships with the CUDA toolkit there). Prints ONE JSON object per measurement on stdout:
//   {"tool":"cub","op":"scan","variant":"inclusive","dtype":"f32","n":67108864,"segment":null,
//    "us":174.6,"device":"NVIDIA H200","cub_version":300000}
// Fields match what scan-bench/prims-bench print with --format json, so rows join on
// (op, variant, dtype, n, segment).
//
// Timing (the same protocol as scan-bench): temporary storage allocated once, outside the timed
// region; 3 warm-up calls; then `reps` samples of CUDA events around `batch` back-to-back calls
// (host launch overhead is hidden as in a pipeline), divided by the batch; the median sample is
// reported. Inputs are never modified by the timed calls (out-of-place APIs), so every call sees
// the same data.
//
// Data: values uniform in [-1, 1) (scans, reduce), [0, 1) for compaction (60 % kept: x < 0.6,
// flags are one byte per element as CUB wants them), keys uniform random 32/64-bit, all made on
// the device by a hash of the index. Segments: fixed lengths, or random lengths uniform in
// 0..=2048 (scan by key; empty segments have no elements to carry a key) and 0..=2000 (segmented
// reduce, empty segments included) as in scan-bench and prims-bench.
#include <cub/cub.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "cub-peers: %s:%d: %s: %s\n", __FILE__, __LINE__, #x,                \
                    cudaGetErrorString(e_));                                                    \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static int g_reps = 15, g_batch = 10;
static char g_device[256];

// ---------------------------------------------------------------- data on the device
__device__ __forceinline__ uint32_t hash32(uint64_t i, uint32_t seed) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 16);
}
template <typename T>
__global__ void fill_uniform(T* p, size_t n, uint32_t seed, double lo, double hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (T)(lo + (hi - lo) * (hash32(i, seed) * (1.0 / 4294967296.0)));
}
__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash32(i, seed) ^ (hash32(i, seed + 77u) << 16);
}
__global__ void fill_u64(uint64_t* p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = ((uint64_t)(hash32(i, seed) ^ (hash32(i, seed + 5u) << 16)) << 32) |
               (uint64_t)(hash32(i, seed + 9u) ^ (hash32(i, seed + 13u) << 16));
}
__global__ void flags_less(const float* x, unsigned char* f, size_t n, float c) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        f[i] = x[i] < c ? 1 : 0;
}
static const int FILL_BLOCKS = 4096, FILL_THREADS = 256;

template <typename T> static T* dalloc(size_t n) {
    T* p = nullptr;
    CK(cudaMalloc(&p, n * sizeof(T) + 16));
    return p;
}

// ---------------------------------------------------------------- timing and output
template <typename F> static double time_us(F f) {
    for (int i = 0; i < 3; ++i) CK(f());
    CK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<double> t;
    for (int r = 0; r < g_reps; ++r) {
        CK(cudaEventRecord(a));
        for (int k = 0; k < g_batch; ++k) CK(f());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0.f;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0 / g_batch);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static std::string seg_json(long long len) {  // len < 0: random
    if (len < 0) return "\"random\"";
    if (len == 0) return "null";
    return std::to_string(len);
}

static void emit(const char* op, const char* variant, const char* dtype, size_t n, const std::string& seg,
                 double us, const char* api) {
    printf("{\"tool\":\"cub\",\"op\":\"%s\",\"variant\":\"%s\",\"dtype\":\"%s\",\"n\":%zu,\"segment\":%s,"
           "\"us\":%.3f,\"device\":\"%s\",\"cub_version\":%d,\"api\":\"%s\",\"reps\":%d,\"batch\":%d}\n",
           op, variant, dtype, n, seg.c_str(), us, g_device, (int)CUB_VERSION, api, g_reps, g_batch);
    fflush(stdout);
}

// Reusable temporary storage: grown when a call needs more (outside any timed region).
struct Temp {
    void* p = nullptr;
    size_t bytes = 0;
    void* get(size_t need) {
        if (need > bytes) {
            if (p) CK(cudaFree(p));
            CK(cudaMalloc(&p, need));
            bytes = need;
        }
        return p;
    }
};
static Temp g_temp;

// CUB's two-phase call: `call(tmp, bytes)` with tmp = nullptr asks for the temporary storage,
// then the call is timed with storage from g_temp, and the measurement printed.
template <typename F>
static void measure(const char* op, const char* variant, const char* dtype, size_t n, const std::string& seg,
                    const char* api, F call) {
    size_t bytes = 0;
    CK(call(nullptr, bytes));
    void* tmp = g_temp.get(bytes);
    emit(op, variant, dtype, n, seg, time_us([&] { return call(tmp, bytes); }), api);
}

// ---------------------------------------------------------------- copy (the roofline)
static void bench_copy() {
    const size_t n = (size_t)1 << 27;  // 512 MiB of f32, as scan-bench's copy bandwidth
    float* a = dalloc<float>(n);
    float* b = dalloc<float>(n);
    CK(cudaMemset(a, 0, n * 4));
    double us = time_us([&] { return cudaMemcpyAsync(b, a, n * 4, cudaMemcpyDeviceToDevice); });
    emit("copy", "memcpy", "f32", n, "null", us, "cudaMemcpyAsync");
    CK(cudaFree(a));
    CK(cudaFree(b));
}

// ---------------------------------------------------------------- scan
template <typename T> static void bench_scan(const char* dtype, const std::vector<int>& lgs) {
    for (int lg : lgs) {
        const int n = 1 << lg;
        T* in = dalloc<T>(n);
        T* out = dalloc<T>(n);
        fill_uniform<T><<<FILL_BLOCKS, FILL_THREADS>>>(in, n, 1u, -1.0, 1.0);
        CK(cudaGetLastError());
        measure("scan", "inclusive", dtype, n, "null", "DeviceScan::InclusiveSum",
                [&](void* t, size_t& b) { return cub::DeviceScan::InclusiveSum(t, b, in, out, n); });
        measure("scan", "exclusive", dtype, n, "null", "DeviceScan::ExclusiveSum",
                [&](void* t, size_t& b) { return cub::DeviceScan::ExclusiveSum(t, b, in, out, n); });
        CK(cudaFree(in));
        CK(cudaFree(out));
    }
}

// Segment offsets (m + 1 entries) for fixed length `len`, or random lengths 0..=maxlen (len < 0).
static std::vector<int> make_offsets(size_t n, long long len, int maxlen, std::mt19937_64& rng) {
    std::vector<int> o{0};
    size_t at = 0;
    std::uniform_int_distribution<int> d(0, maxlen);
    while (at < n) {
        size_t l = len < 0 ? (size_t)d(rng) : (size_t)len;
        at = std::min(n, at + l);
        o.push_back((int)at);
    }
    return o;
}

// ---------------------------------------------------------------- segmented scan (scan by key)
static void bench_segscan(const std::vector<int>& lgs, std::mt19937_64& rng) {
    for (int lg : lgs) {
        const int n = 1 << lg;
        float* in = dalloc<float>(n);
        float* out = dalloc<float>(n);
        uint32_t* keys = dalloc<uint32_t>(n);
        fill_uniform<float><<<FILL_BLOCKS, FILL_THREADS>>>(in, n, 2u, -1.0, 1.0);
        CK(cudaGetLastError());
        std::vector<uint32_t> hk(n);
        for (long long len : {32LL, 1024LL, 65536LL, -1LL}) {
            std::vector<int> o = make_offsets(n, len, 2048, rng);
            for (size_t s = 0; s + 1 < o.size(); ++s)
                for (int i = o[s]; i < o[s + 1]; ++i) hk[i] = (uint32_t)s;
            CK(cudaMemcpy(keys, hk.data(), (size_t)n * 4, cudaMemcpyHostToDevice));
            measure("segscan", "inclusive", "f32", n, seg_json(len), "DeviceScan::InclusiveScanByKey",
                    [&](void* t, size_t& b) {
                        return cub::DeviceScan::InclusiveScanByKey(t, b, keys, in, out, cuda::std::plus<float>{}, n);
                    });
        }
        CK(cudaFree(in));
        CK(cudaFree(out));
        CK(cudaFree(keys));
    }
}

// ---------------------------------------------------------------- segmented reduce
static void bench_segreduce(int lg, std::mt19937_64& rng) {
    const size_t n = (size_t)1 << lg;
    float* in = dalloc<float>(n);
    fill_uniform<float><<<FILL_BLOCKS, FILL_THREADS>>>(in, n, 3u, -1.0, 1.0);
    CK(cudaGetLastError());
    for (long long len : {1LL, 32LL, 100LL, 1024LL, 65536LL, -1LL}) {
        std::vector<int> o = make_offsets(n, len, 2000, rng);
        const int m = (int)o.size() - 1;
        int* offs = dalloc<int>(o.size());
        float* out = dalloc<float>(m);
        CK(cudaMemcpy(offs, o.data(), o.size() * 4, cudaMemcpyHostToDevice));
        measure("segreduce", "plus", "f32", n, seg_json(len), "DeviceSegmentedReduce::Sum",
                [&](void* t, size_t& b) { return cub::DeviceSegmentedReduce::Sum(t, b, in, out, m, offs, offs + 1); });
        CK(cudaFree(offs));
        CK(cudaFree(out));
    }
    CK(cudaFree(in));
}

// ---------------------------------------------------------------- radix sort
template <typename K> static void fill_keys(K* p, size_t n, uint32_t seed);
template <> void fill_keys<uint32_t>(uint32_t* p, size_t n, uint32_t seed) { fill_u32<<<FILL_BLOCKS, FILL_THREADS>>>(p, n, seed); }
template <> void fill_keys<uint64_t>(uint64_t* p, size_t n, uint32_t seed) { fill_u64<<<FILL_BLOCKS, FILL_THREADS>>>(p, n, seed); }
template <> void fill_keys<float>(float* p, size_t n, uint32_t seed) {
    fill_uniform<float><<<FILL_BLOCKS, FILL_THREADS>>>(p, n, seed, -1e6, 1e6);
}

template <typename K> static void bench_sort_keys(const char* dtype, int lg) {
    const int n = 1 << lg;
    K* in = dalloc<K>(n);
    K* out = dalloc<K>(n);
    fill_keys<K>(in, n, 4u);
    CK(cudaGetLastError());
    measure("sort", "keys", dtype, n, "null", "DeviceRadixSort::SortKeys",
            [&](void* t, size_t& b) { return cub::DeviceRadixSort::SortKeys(t, b, in, out, n); });
    CK(cudaFree(in));
    CK(cudaFree(out));
}

static void bench_sort_pairs(int lg) {
    const int n = 1 << lg;
    uint32_t* kin = dalloc<uint32_t>(n);
    uint32_t* kout = dalloc<uint32_t>(n);
    uint32_t* vin = dalloc<uint32_t>(n);
    uint32_t* vout = dalloc<uint32_t>(n);
    fill_u32<<<FILL_BLOCKS, FILL_THREADS>>>(kin, n, 5u);
    fill_u32<<<FILL_BLOCKS, FILL_THREADS>>>(vin, n, 6u);
    CK(cudaGetLastError());
    measure("sort", "pairs", "u32", n, "null", "DeviceRadixSort::SortPairs", [&](void* t, size_t& b) {
        return cub::DeviceRadixSort::SortPairs(t, b, kin, kout, vin, vout, n);
    });
    CK(cudaFree(kin));
    CK(cudaFree(kout));
    CK(cudaFree(vin));
    CK(cudaFree(vout));
}

// ---------------------------------------------------------------- compaction (select)
struct LessThan {
    float c;
    __host__ __device__ bool operator()(const float& x) const { return x < c; }
};

static void bench_compact(const std::vector<int>& lgs) {
    for (int lg : lgs) {
        const int n = 1 << lg;
        float* in = dalloc<float>(n);
        float* out = dalloc<float>(n);
        unsigned char* flags = dalloc<unsigned char>(n);
        int* count = dalloc<int>(1);
        fill_uniform<float><<<FILL_BLOCKS, FILL_THREADS>>>(in, n, 8u, 0.0, 1.0);
        flags_less<<<FILL_BLOCKS, FILL_THREADS>>>(in, flags, n, 0.6f);
        CK(cudaGetLastError());
        measure("compact", "flagged", "f32", n, "null", "DeviceSelect::Flagged",
                [&](void* t, size_t& b) { return cub::DeviceSelect::Flagged(t, b, in, flags, out, count, n); });
        const LessThan pred{0.6f};
        measure("compact", "if", "f32", n, "null", "DeviceSelect::If",
                [&](void* t, size_t& b) { return cub::DeviceSelect::If(t, b, in, out, count, n, pred); });
        int host_count = 0;
        CK(cudaMemcpy(&host_count, count, 4, cudaMemcpyDeviceToHost));
        fprintf(stderr, "cub-peers: select 2^%d kept %d (%.1f %%)\n", lg, host_count, 100.0 * host_count / n);
        CK(cudaFree(in));
        CK(cudaFree(out));
        CK(cudaFree(flags));
        CK(cudaFree(count));
    }
}

int main(int argc, char** argv) {
    bool quick = false;
    std::string only;  // empty: everything; "sort": the radix sorts (and the copy) only
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = std::max(1, atoi(argv[++i]));
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) g_batch = std::max(1, atoi(argv[++i]));
        else {
            fprintf(stderr,
                    "cub-peers: CUB's scan, scan-by-key, segmented reduce, radix sort and select timed "
                    "with CUDA events; one JSON object per line.\nusage: cub-peers [--quick] [--reps N] "
                    "[--batch N] [--only sort|scan|segreduce]\n");
            return 2;
        }
    }
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        fprintf(stderr, "cub-peers: no CUDA device is available.\n");
        return 1;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    snprintf(g_device, sizeof g_device, "%s", prop.name);
    std::mt19937_64 rng(11);
    bench_copy();
    const bool all = only.empty();
    std::vector<int> scan_lgs = quick ? std::vector<int>{20, 26} : std::vector<int>{20, 24, 26, 28};
    if (all || only == "scan") {
        bench_scan<float>("f32", scan_lgs);
        bench_scan<double>("f64", scan_lgs);
    }
    if (all) bench_segscan(quick ? std::vector<int>{26} : std::vector<int>{20, 24, 26}, rng);
    if (all || only == "segreduce") bench_segreduce(26, rng);
    if (all || only == "sort") {
        // u32 keys and u32 key-value pairs over the issue's range 2^22..2^28.
        for (int lg : quick ? std::vector<int>{24} : std::vector<int>{22, 24, 26, 28}) {
            bench_sort_keys<uint32_t>("u32", lg);
            bench_sort_pairs(lg);
        }
        bench_sort_keys<float>("f32", 24);
        bench_sort_keys<uint64_t>("u64", 24);
    }
    if (all) bench_compact(quick ? std::vector<int>{26} : std::vector<int>{20, 24, 26});
    g_temp.get(0);
    return 0;
}
