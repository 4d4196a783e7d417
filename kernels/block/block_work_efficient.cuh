// The work-efficient scan and segmented scan of Sengupta, Harris, Zhang and Owens (2007),
// as the paper runs it: one block of THREADS threads scans 2*THREADS elements in shared memory
// with the balanced-tree reduce (up-sweep, Algorithms 1 and 3) and down-sweep (Algorithms 2 and
// 4), and shared-memory indices padded with CONFLICT_FREE_OFFSET against bank conflicts
// (Harris, Sengupta and Owens, GPU Gems 3 ch. 39).
//
// Segmented: x holds partial sums, f the partial-OR tree (initially the head flags), fi the
// original flags. Where we depart from the paper's text:
//  * Algorithm 3 as printed starts the up-sweep at d = 1; the d = 0 level is needed (pairs of
//    leaves), so we start at d = 0 as Algorithm 1 does.
//  * Multi-block (Algorithm 5): the paper saves the partial-sum and partial-OR trees to global
//    memory after the reduce, scans the block sums, then reloads the trees and runs the
//    down-sweep with the block's carry at the root. We run the down-sweep at once with the
//    identity at the root, and afterwards add the block's carry to the elements before the
//    block's first head flag: the carry reaches exactly those elements through the tree, so the
//    results are the same, without writing and re-reading the trees.
//  * The block sums are scanned by one block looping over them (spine_scan) instead of a
//    recursive launch; the result is the same.
#pragma once
#include "common.cuh"
#include "warp/warp_reduce.cuh"
#include "block/block_load_store.cuh"

#define WE_LOG_NUM_BANKS 5
#define CONFLICT_FREE_OFFSET(i) ((i) >> WE_LOG_NUM_BANKS)

template <typename T, int THREADS> struct WeStorage {
    T x[2 * THREADS + (2 * THREADS >> WE_LOG_NUM_BANKS)];
    unsigned char f[2 * THREADS + (2 * THREADS >> WE_LOG_NUM_BANKS)];
    unsigned char fi[2 * THREADS + 1];
    u32 first;
};

// Block-local scan of logical elements blockIdx.x*2*THREADS ..; writes the block-local result to
// out, the block's (OR flag, segmented sum) to the spine, and the block-local index of its
// first head flag (2*THREADS if none) to first_head.
template <typename T, typename Op, bool SEG, int THREADS>
__device__ __forceinline__ void we_block(const T* __restrict__ in, const u32* __restrict__ flags,
                                         T* __restrict__ out, long long n, bool bwd, bool excl,
                                         u32* spine_f, T* spine_v, u32* first_head,
                                         WeStorage<T, THREADS>& s) {
    const Op op;
    const T id = Op::template identity<T>();
    const int B = 2 * THREADS;
    const int tid = (int)threadIdx.x;
    const long long base = (long long)blockIdx.x * B;
    const int ai = tid, bi = tid + THREADS;
    const long long ja = base + ai, jb = base + bi;
    const T xa = ja < n ? in[bwd ? n - 1 - ja : ja] : id;
    const T xb = jb < n ? in[bwd ? n - 1 - jb : jb] : id;
    const u32 fa = (SEG && ja < n) ? logical_flags(flags, n, ja, 1, bwd) : 0u;
    const u32 fb = (SEG && jb < n) ? logical_flags(flags, n, jb, 1, bwd) : 0u;
    if (tid == 0) {
        s.first = B;
        s.fi[B] = 0;
    }
    s.x[ai + CONFLICT_FREE_OFFSET(ai)] = xa;
    s.x[bi + CONFLICT_FREE_OFFSET(bi)] = xb;
    if (SEG) {
        s.f[ai + CONFLICT_FREE_OFFSET(ai)] = (unsigned char)fa;
        s.f[bi + CONFLICT_FREE_OFFSET(bi)] = (unsigned char)fb;
        s.fi[ai] = (unsigned char)fa;
        s.fi[bi] = (unsigned char)fb;
    }
    __syncthreads();
    if (SEG) {
        if (fa) atomicMin(&s.first, (u32)ai);
        else if (fb) atomicMin(&s.first, (u32)bi);
    }
    // Reduce (up-sweep): Algorithm 1 / Algorithm 3.
    int offset = 1;
    for (int d = B >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (tid < d) {
            int l = offset * (2 * tid + 1) - 1;
            int r = offset * (2 * tid + 2) - 1;
            l += CONFLICT_FREE_OFFSET(l);
            r += CONFLICT_FREE_OFFSET(r);
            if (SEG) {
                if (!s.f[r]) s.x[r] = op(s.x[l], s.x[r]);
                s.f[r] = s.f[l] | s.f[r];
            } else {
                s.x[r] = op(s.x[l], s.x[r]);
            }
        }
        offset <<= 1;
    }
    __syncthreads();
    if (tid == 0) {
        const int root = B - 1 + CONFLICT_FREE_OFFSET(B - 1);
        spine_v[blockIdx.x] = s.x[root];
        spine_f[blockIdx.x] = SEG ? (u32)s.f[root] : 0u;
        first_head[blockIdx.x] = s.first;
        s.x[root] = id;  // Algorithm 2/4 line 1 (the identity, 0 for +)
    }
    // Down-sweep: Algorithm 2 / Algorithm 4.
    for (int d = 1; d < B; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (tid < d) {
            const int l0 = offset * (2 * tid + 1) - 1;
            const int r0 = offset * (2 * tid + 2) - 1;
            const int l = l0 + CONFLICT_FREE_OFFSET(l0);
            const int r = r0 + CONFLICT_FREE_OFFSET(r0);
            const T t = s.x[l];
            s.x[l] = s.x[r];
            if (SEG) {
                if (s.fi[l0 + 1]) s.x[r] = id;        // a segment starts the right subtree
                else if (s.f[l]) s.x[r] = t;          // one starts inside the left subtree
                else s.x[r] = op(s.x[r], t);
                s.f[l] = 0;                           // line 12: unset the partial-OR flag
            } else {
                s.x[r] = op(s.x[r], t);
            }
        }
    }
    __syncthreads();
    // The tree holds the exclusive scan; inclusive adds the element itself (the paper's
    // "inclusive = exclusive + input"), restarting at heads.
    const T ea = s.x[ai + CONFLICT_FREE_OFFSET(ai)];
    const T eb = s.x[bi + CONFLICT_FREE_OFFSET(bi)];
    const T ra = excl ? ea : (fa ? xa : op(ea, xa));
    const T rb = excl ? eb : (fb ? xb : op(eb, xb));
    if (ja < n) out[bwd ? n - 1 - ja : ja] = ra;
    if (jb < n) out[bwd ? n - 1 - jb : jb] = rb;
}

// Adds block blockIdx.x + 1's carry (the exclusive scan of the block sums) to its elements
// before its first head flag.
template <typename T, typename Op, int THREADS>
__device__ __forceinline__ void we_fixup(T* out, long long n, bool bwd, const T* __restrict__ spine_v,
                                         const u32* __restrict__ first_head) {
    const Op op;
    const int B = 2 * THREADS;
    const u32 b = blockIdx.x + 1;
    const T carry = spine_v[b];
    const u32 fh = first_head[b];
    const long long base = (long long)b * B;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const int l = (int)threadIdx.x + k * THREADS;
        const long long j = base + l;
        if ((u32)l < fh && j < n) {
            T* p = out + (bwd ? n - 1 - j : j);
            *p = op(carry, *p);
        }
    }
}
