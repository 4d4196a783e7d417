// Deterministic grid-wide reductions of the solver kernels (kernels/solvers/*.cu, dist/dist.cu).
//
// Every reduction kernel writes one partial sum per block, and the last block to finish (an
// atomic ticket; the "threadFenceReduction" pattern) sums the partials in block order -- so the
// result is deterministic for a given grid size -- and then runs the step's recurrence
// (solvers/recur.cuh). The fused small-system kernels meet at a grid barrier instead, after which
// every block sums the partials itself in the same order (grid_allsum).
//
// Grid: a fixed number of blocks (a multiple of the SM count, chosen on the host) striding over
// the vector; the partial-sum buffer holds NRED * gridDim.x values.
//
// T is a real type (float, double) or an interleaved complex one (cfloat, cdouble: complex.cuh
// gives them the arithmetic, the shuffles and ld_).
#include "common.cuh"
#include "complex.cuh"

// A volatile read: a value that another block of the same launch wrote (L2, never a stale L1 line).
template <typename T> __device__ __forceinline__ T ld_(const T* p) { return *(const volatile T*)p; }

// Sum of K values over each warp by a shuffle-down tree, valid in lane 0 (a fixed order).
template <int K, typename T>
__device__ __forceinline__ void warp_sum_down(T (&v)[K]) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] += __shfl_down_sync(FULL_MASK, v[k], o);
}

// Sum of K values over the block, valid in thread 0. Shuffles within each warp, then warp 0
// sums the per-warp results from shared memory: a fixed order, so deterministic.
template <int K, typename T>
__device__ __forceinline__ void block_sum(T (&v)[K], T (*smem)[32]) {
    const u32 lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    warp_sum_down<K>(v);
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) smem[k][warp] = v[k];
    __syncthreads();
    if (warp == 0) {
        const u32 nwarps = blockDim.x >> 5;
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = lane < nwarps ? smem[k][lane] : T(0);
        warp_sum_down<K>(v);
    }
}

// The last block's part of a grid-wide sum: the K totals of the gridDim.x partials per value,
// summed in block order (deterministic), into thread 0's v.
template <int K, typename T>
__device__ __forceinline__ void sum_partials(T (&v)[K], const T* partials, T (*smem)[32]) {
    T acc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = T(0);
    // ld_: read the other blocks' partials from L2, not from a stale L1 line.
    for (u32 b = threadIdx.x; b < gridDim.x; b += blockDim.x)
#pragma unroll
        for (int k = 0; k < K; ++k) acc[k] += ld_(partials + k * gridDim.x + b);
    block_sum<K>(acc, smem);
    if (threadIdx.x == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = acc[k];
}

// Grid-wide sum of K values per thread. Returns true in the last block to finish, where thread 0
// then holds the totals in v. Resets the ticket for the next kernel.
template <int K, typename T>
__device__ __forceinline__ bool grid_sum(T (&v)[K], T* partials, u32* ticket) {
    __shared__ T smem[K][32];
    __shared__ bool last;
    block_sum<K>(v, smem);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) partials[k * gridDim.x + blockIdx.x] = v[k];
        // Make this block's partials visible device-wide before taking a ticket.
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    // Also orders warp 0's reads of smem above before the second block_sum's writes.
    __syncthreads();
    if (!last) return false;
    __threadfence();
    sum_partials<K>(v, partials, smem);
    if (threadIdx.x == 0) *ticket = 0;
    return true;
}

#define GRID_STRIDE(i, n) for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

// ---- the small-system path: one launch per step of several reductions ------------------------
//
// On systems of a few thousand rows an iteration's kernels are short and dependent, so their
// number sets the time per iteration (each costs ~2-3 us of launch and drain even inside a CUDA
// graph, and a reduction's last-block epilogue ~2 us more). The fused kernels (cg_fused,
// bicg_alpha_s, bicg_update_p, gmres_arnoldi) do the work of several separate kernels in one
// launch: where those end (a reduction whose last block computes alpha, omega, beta, ...), these
// meet at a grid barrier, after which EVERY block sums the partials itself (in the same block
// order, so every block gets the same totals, bit for bit) and runs the recurrence on its own
// shared-memory copy of the slots; block 0 also writes the slots and the history back for the
// host and the next kernels. No block waits for another block's epilogue: the barrier is one
// atomic arrival and one wait.
//
// They are launched cooperatively (every block resident at once; the driver refuses a grid that
// cannot be) over the same grid as the separate kernels, each thread touching the same elements
// in the same order, with the same reductions and recurrences: for a given grid their results
// equal those of the separate kernels bit for bit. Only scalars cross blocks (each thread's
// vector elements are its own from one pass to the next).

__device__ __forceinline__ u32 atom_add_release_(u32* p, u32 v) {
    u32 old;
    asm volatile("atom.add.release.gpu.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ u32 ld_acquire_(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Every block of the (co-resident) grid waits here until all have arrived; what a block wrote
// before is visible to every block after. The word's top bit flips once per barrier: block 0
// adds 2^31 - (G - 1) and the others 1, so the G arrivals add exactly 2^31 and the low bits come
// back to 0. The top bit changes only with the last arrival (the low bits are 0 at the start of
// every barrier), so a block waits until it differs from the value it saw when it arrived; the
// word needs no reset between barriers or launches, whatever their grid sizes.
__device__ __forceinline__ void grid_barrier_(u32* bar) {
    __syncthreads();  // the block's writes happen before thread 0's release
    if (threadIdx.x == 0) {
        const u32 inc = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
        const u32 old = atom_add_release_(bar, inc);
        while (((ld_acquire_(bar) ^ old) & 0x80000000u) == 0) {}
    }
    __syncthreads();
}

// Grid-wide sum of K values per thread, in every block: thread 0 of each block ends with the
// totals (the partials summed in block order, as grid_sum's last block does). Partials are
// double-buffered by `phase` (a block may write the next barrier's partial while a slower one
// still reads this one's; not two barriers ahead, since it cannot pass the next barrier before
// the slower block arrives there): 2 * K * gridDim.x entries.
template <int K, typename T>
__device__ __forceinline__ void grid_allsum(T (&v)[K], T* partials, u32* bar, u32& phase) {
    __shared__ T smem[K][32];
    block_sum<K>(v, smem);
    T* part = partials + (phase++ & 1u) * K * gridDim.x;
    if (threadIdx.x == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) part[k * gridDim.x + blockIdx.x] = v[k];
    grid_barrier_(bar);
    sum_partials<K>(v, part, smem);
}


// The CG and BiCGSTAB kernels below hold one element per thread (the host launches
// ceil(n / blockDim) <= SM-count blocks, so n <= gridDim.x * blockDim.x): every vector value an
// element needs is loaded at entry, in parallel with the slots, and kept in registers across the
// barriers, so each barrier is followed by arithmetic, not by another round trip to memory.
// The expressions are those of the separate kernels (a thread without an element contributes 0).
#define ONE_ELEMENT(i, has, n)                                                                     \
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;                                          \
    const bool has = i < (n)
