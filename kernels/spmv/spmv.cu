// Sparse matrix-vector product y <- alpha*A*x + beta*y for CSR matrices (u32 indices).
//
// The algorithms (the Rust side, src/spmv/gpu.rs, chooses and launches them):
//
// 1. spmv_fused_* + spmv_fixup_*: nonzero-balanced segmented reduction. The nonzeros are cut into
//    tiles of SPMV_THREADS*SPMV_ITEMS consecutive entries, one tile per block; each thread owns
//    SPMV_ITEMS consecutive entries and their head flags (a packed bit per nonzero, set at every
//    row start, built once at upload - the head-flag representation of Sengupta et al. 2007
//    §2.2, one bit instead of one word). The entries of a full tile are loaded warp-striped (every
//    load instruction reads whole sectors) and their products handed to their owners through
//    shared memory, where they also wait out the block scan (see spmv_fused_tile); no product
//    array in global memory. A block-wide scan of (row starts, boundary flag, tail sum) triples
//    gives each thread the row index of its first entry and the partial sum carried into it;
//    rows that end inside a thread are written directly. A tile never waits for another: it
//    writes the sum of its last (open) row and, if its first row began in an earlier tile, that
//    row's part in this tile, to a small per-tile array; spmv_fixup (one warp per tile) then adds
//    the pieces of each row that crosses tiles in tile order. Deterministic, no product array, and a row of 10^6
//    entries costs what 10^6 entries in short rows cost.
//    Empty rows own no nonzero and so no head flag: matrices with empty rows carry a map from
//    segment (non-empty row) index to row index, and the thread that writes a row also writes
//    beta*y for the empty rows just before it (and after it, for the last non-empty row).
//
// 1b. spmv_lookback_*: the same tiles with the carry resolved by a decoupled look-back in one
//    launch (the previous default; its sum order for rows crossing 3+ tiles depends on timing).
//
// 2. spmv_rows_*: one thread per row with all loads of a short row in flight (stencils).
//
// 3. spmv_vector_*: a sub-warp of 2^k lanes per row (CSR-vector). One launch, no carries; wins
//    on small regular matrices (L2-resident: the shortest dependent chain).
//
// 4. The paper's four steps (Sengupta et al. 2007 §4.2): spmv_products_* (gather x and multiply),
//    the head flags (built at upload), a backward inclusive segmented sum scan (the crate's
//    segmented-scan primitive), and spmv_rowgather_* (y = alpha*product[rowPtr] + beta*y).
//
// Upload-time tables (spmv_mark_heads, spmv_head_counts, spmv_tile_tables) are built on the
// device from row_ptr.
//
// beta == 0 never reads y (so NaN or garbage in y does not propagate), in every kernel.
// Accumulation is in T: f32 products are summed in f32, as cuSPARSE does for CUDA_R_32F.
//
// Storage apart from the working precision: the fused, row and vector kernels take the value
// type V of the matrix apart from the type T of x, y and the sums. The mixed instantiations
// (suffix f32f64: values stored in float, x, y, products and sums in double; each value widened
// exactly before its product) read 4 bytes less per entry than f64 and compute what the f64
// kernel computes on the widened values (src/spmv/gpu/mixed.rs). They use the f32 tile of the
// matrix's structure tables (SPMV_ITEMS_F32 entries per thread), f64 products in shared memory.
#include "common.cuh"
#include "complex.cuh"
#include "spmv/spmv_scan.cuh"

// The element types this compile instantiates: bit 0 f32, bit 1 f64, bit 2 the complex fused
// kernels (c64 and c128), bit 3 f32 values under f64 vectors (f32f64, with the f64 fix-up and
// scale kernels they need). The runtime compiles one real type per module, so a first call
// compiles only the kernels of its type; the type-free structure kernels are in every module.
// Without the define every type is instantiated (the complex SpMV's module).
#ifndef SPMV_TYPES
#define SPMV_TYPES 15
#endif
#define SPMV_WITH_F32 ((SPMV_TYPES) & 1)
#define SPMV_WITH_F64 ((SPMV_TYPES) & 2)
#define SPMV_WITH_COMPLEX ((SPMV_TYPES) & 4)
#define SPMV_WITH_MIXED ((SPMV_TYPES) & 8)

#ifndef SPMV_THREADS
#define SPMV_THREADS 256
#endif
#ifndef SPMV_ITEMS_F32
#define SPMV_ITEMS_F32 8
#endif
#ifndef SPMV_ITEMS_F64
#define SPMV_ITEMS_F64 8
#endif
// Entries per thread of the complex (c64, c128) instantiations of the fused kernel: the same
// bytes per thread as f64 with 8 (c64) and 4 (c128) entries.
#ifndef SPMV_ITEMS_C64
#define SPMV_ITEMS_C64 8
#endif
#ifndef SPMV_ITEMS_C128
#define SPMV_ITEMS_C128 4
#endif
#ifndef SPMV_VECTOR_THREADS
#define SPMV_VECTOR_THREADS 256
#endif
// Blocks per SM the deterministic fused kernel must fit, per type (caps its registers:
// 65536 / (threads * blocks)); the look-back kernel has no cap.
#ifndef SPMV_MIN_BLOCKS_F32
#define SPMV_MIN_BLOCKS_F32 1
#endif
#ifndef SPMV_MIN_BLOCKS_F64
#define SPMV_MIN_BLOCKS_F64 1
#endif
#ifndef SPMV_ROWS_THREADS
#define SPMV_ROWS_THREADS 128
#endif
#ifndef ROW_UNROLL
#define ROW_UNROLL 8
#endif

// Look-back status of a tile: flag word = epoch * 4 + status. The epoch changes with every
// launch, so the status array never needs clearing between launches.
#define TILE_LOCAL 1u
#define TILE_INCLUSIVE 2u

// Per-tile bits of the deterministic fused kernel (tile_flag is reused as this table): the tile's
// first entry continues a row of an earlier tile; the tile contains a row boundary.
#define FIX_CONT 1u
#define FIX_BOUND 2u

template <typename T>
__device__ __forceinline__ T scaled_y(const T* y, u32 row, T beta) {
    // beta == 0 must not read y: 0 * NaN would be NaN.
    return beta == T(0) ? T(0) : beta * y[row];
}

// Loads of the matrix (row_ptr, col, val) and stores of y are streamed in the fused and vector
// kernels (not in the row kernel, see there): ld.global.cs /
// st.global.cs allocate their lines evict-first in L1 and L2. The matrix is read once per
// product and is 10-20x larger than x, so with default caching it pushes x out of L2 and the
// random x gathers of irregular matrices go to DRAM (ncu on powerlaw:5000000:2.2, f64: L2 hit
// rate 42%, L2 throughput 97%). x keeps the default policy (__ldg). SPMV_STREAM=0 restores
// default caching everywhere (A/B measurements).
#ifndef SPMV_STREAM
#define SPMV_STREAM 1
#endif
template <typename V> __device__ __forceinline__ V ld_stream(const V* p) {
#if SPMV_STREAM
    return __ldcs(p);
#else
    return __ldg(p);
#endif
}
template <typename T> __device__ __forceinline__ void st_stream(T* p, T v) {
#if SPMV_STREAM
    __stcs(p, v);
#else
    *p = v;
#endif
}

// Gathers of x in the fused and vector kernels. SPMV_XHINT selects their cache policy (tuning,
// sm_80+; SEGSPARSE_SPMV_XHINT): 0 = __ldg; 1 = L2 evict-last through a fractional cache policy
// (createpolicy + ld.global.nc.L2::cache_hint), so that x outlives the streamed matrix and y in
// L2; 2 = 1 without L1 allocation; 3 = no L1 allocation alone; 4 = a plain coherent load
// (ld.global, not the read-only path); 5 = ld.global.cg (cached in L2 only).
// The random gathers of irregular matrices are what reaches DRAM when x is not held in L2
// (benches/results/history/spmv.md).
#ifndef SPMV_XHINT
#define SPMV_XHINT 0
#endif
#if SPMV_XHINT != 0 && __CUDA_ARCH__ >= 800
__device__ __forceinline__ u64 x_policy() {
    u64 pol;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
#if SPMV_XHINT == 2
#define SPMV_XLD "ld.global.nc.L1::no_allocate.L2::cache_hint"
#else
#define SPMV_XLD "ld.global.nc.L2::cache_hint"
#endif
__device__ __forceinline__ float ld_x(const float* p) {
    float v;
#if SPMV_XHINT == 3
    asm("ld.global.nc.L1::no_allocate.f32 %0, [%1];" : "=f"(v) : "l"(p));
#elif SPMV_XHINT == 4
    asm("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
#elif SPMV_XHINT == 5
    asm("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
#else
    asm(SPMV_XLD ".f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(x_policy()));
#endif
    return v;
}
__device__ __forceinline__ double ld_x(const double* p) {
    double v;
#if SPMV_XHINT == 3
    asm("ld.global.nc.L1::no_allocate.f64 %0, [%1];" : "=d"(v) : "l"(p));
#elif SPMV_XHINT == 4
    asm("ld.global.f64 %0, [%1];" : "=d"(v) : "l"(p));
#elif SPMV_XHINT == 5
    asm("ld.global.cg.f64 %0, [%1];" : "=d"(v) : "l"(p));
#else
    asm(SPMV_XLD ".f64 %0, [%1], %2;" : "=d"(v) : "l"(p), "l"(x_policy()));
#endif
    return v;
}
#else
template <typename T> __device__ __forceinline__ T ld_x(const T* p) { return __ldg(p); }
#endif
// Complex x: one 8- or 16-byte read-only load (the cache hints above are for the real types).
__device__ __forceinline__ cfloat ld_x(const cfloat* p) { return __ldg(p); }
__device__ __forceinline__ cdouble ld_x(const cdouble* p) { return __ldg(p); }

// ---------------------------------------------------------------------------------------------
// Fused, nonzero-balanced, single-pass kernel.
// ---------------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void write_row(T* y, const u32* row_map, u32 has_map, u32 nsegs,
                                          u32 nrows, u32 seg, T sum, T alpha, T beta) {
    if (!has_map) {
        st_stream(y + seg, alpha * sum + scaled_y(y, seg, beta));
        return;
    }
    const u32 row = row_map[seg];
    // Empty rows between the previous non-empty row and this one get beta*y.
    const u32 first_empty = seg == 0 ? 0u : row_map[seg - 1] + 1u;
    for (u32 r = first_empty; r < row; ++r) y[r] = scaled_y(y, r, beta);
    y[row] = alpha * sum + scaled_y(y, row, beta);
    if (seg + 1 == nsegs) {
        for (u32 r = row + 1; r < nrows; ++r) y[r] = scaled_y(y, r, beta);
    }
}

// The fused kernel's load pattern, per element type (STRIPED; SPMV_STRIPED_F32/_F64,
// SEGSPARSE_SPMV_STRIPED): false = blocked, each thread loads its ITEMS consecutive entries with
// 16-byte vector loads, so one load instruction of a warp touches every sector of its span by
// halves (lanes 32 or 64 bytes apart); true = warp-striped for full tiles, lane l loading entries
// l, l+32, l+64, ... of its warp's 32*ITEMS (every load instruction reads whole sectors, 128 or
// 256 contiguous bytes), the products then passing through shared memory to the blocked order
// the scan needs. Measured on the H100 (powerlaw:4000000:2.0, f64, ncu): blocked 2.16 GB read
// from DRAM, striped 1.61 GB (cuSPARSE's csrmv_v3: 1.61 GB) for 0.78 GB of matrix, L2 read
// sectors 96.9 M -> 82.9 M; the time follows the bytes (747 -> 638 us, 0.87 -> 1.01x cuSPARSE).
// The extra bytes fit each streamed (evict-first) line being fetched twice when its sectors are
// requested by halves (an inference from these counters, not a per-request profile).
//
// SMEM_PROD (SPMV_SMEM_PROD_F32/_F64): every thread parks its ITEMS products in shared memory and
// re-reads them after the block scan instead of holding them in registers across it (f64: 58
// registers -> 48, and 40 without spills under a 6-blocks-per-SM bound).
#ifndef SPMV_STRIPED_F32
#define SPMV_STRIPED_F32 0
#endif
#ifndef SPMV_STRIPED_F64
#define SPMV_STRIPED_F64 0
#endif
#ifndef SPMV_SMEM_PROD_F32
#define SPMV_SMEM_PROD_F32 0
#endif
#ifndef SPMV_SMEM_PROD_F64
#define SPMV_SMEM_PROD_F64 0
#endif

// V: the stored value type; T: the type of x, y, the products and the sums (V == T except in
// the mixed instantiation, where each value is widened exactly before its product).
template <typename V, typename T, int ITEMS, int THREADS, bool LOOKBACK, bool STRIPED, bool SMEM_PROD>
__device__ __forceinline__ void spmv_fused_tile(
    const u32* __restrict__ col, const V* __restrict__ val, const u32* __restrict__ heads,
    const u32* __restrict__ tile_heads, const u32* __restrict__ row_map, u32 has_map, u32 nsegs,
    u32 nnz, u32 nrows, const T* __restrict__ x, T* y, T alpha, T beta, u32* tile_flag,
    T* tile_value, u32 epoch, BlockSegScanStorage<T, THREADS / 32>& scan_st, T& s_carry) {
    static_assert(ITEMS % 4 == 0 && ITEMS <= 28, "ITEMS must be a multiple of 4, at most 28");
    constexpr u32 TILE = (u32)THREADS * (u32)ITEMS;
    constexpr int VEC_COL = ITEMS / 4;                     // uint4 per thread for col
    constexpr int VEC_VAL = ITEMS * (int)sizeof(V) / 16;  // uint4 per thread for val
    const u32 tile = blockIdx.x;
    const u32 k0 = tile * TILE + threadIdx.x * (u32)ITEMS;
    const int nvalid = k0 >= nnz ? 0 : (nnz - k0 >= (u32)ITEMS ? ITEMS : (int)(nnz - k0));
    // A full tile takes the striped path (the same branch for the whole block).
    const bool striped = STRIPED && (tile + 1u) * TILE <= nnz;

    // ---- load entries and multiply (products in registers, or parked in shared memory)
    T prod[ITEMS];
    // Thread t's products at s_tr[t * (ITEMS + 1) + i]: the odd stride keeps the blocked reads
    // free of bank conflicts.
    __shared__ T s_tr[(STRIPED || SMEM_PROD) ? THREADS * (ITEMS + 1) : 1];
    T* const my_prod = s_tr + ((STRIPED || SMEM_PROD) ? threadIdx.x * (u32)(ITEMS + 1) : 0u);
    if (striped) {
        const u32 lane = threadIdx.x & 31u;
        const u32 wbase = tile * TILE + (threadIdx.x & ~31u) * (u32)ITEMS;
        T* ws = s_tr + (threadIdx.x & ~31u) * (u32)(ITEMS + 1);
        u32 c[ITEMS];
        V v[ITEMS];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) c[i] = ld_stream(col + wbase + (u32)i * 32u + lane);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) v[i] = ld_stream(val + wbase + (u32)i * 32u + lane);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const u32 e = (u32)i * 32u + lane;  // entry of the warp's span: thread e / ITEMS
            ws[(e / ITEMS) * (ITEMS + 1) + e % ITEMS] = T(v[i]) * ld_x(x + c[i]);
        }
        __syncwarp();
        if (!SMEM_PROD) {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) prod[i] = my_prod[i];
        }
    } else if (nvalid == ITEMS) {
        union { uint4 v[VEC_COL]; u32 c[ITEMS]; } cu;
        union { uint4 v[VEC_VAL]; V t[ITEMS]; } vu;
        const uint4* cp = reinterpret_cast<const uint4*>(col + k0);
        const uint4* vp = reinterpret_cast<const uint4*>(val + k0);
#pragma unroll
        for (int j = 0; j < VEC_COL; ++j) cu.v[j] = ld_stream(cp + j);
#pragma unroll
        for (int j = 0; j < VEC_VAL; ++j) vu.v[j] = ld_stream(vp + j);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) prod[i] = T(vu.t[i]) * ld_x(x + cu.c[i]);
    } else {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            prod[i] = i < nvalid ? T(ld_stream(val + k0 + i)) * ld_x(x + ld_stream(col + k0 + i)) : T(0);
        }
    }
    if (SMEM_PROD && !striped) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) my_prod[i] = prod[i];
    }
#define SPMV_PROD(i) (SMEM_PROD ? my_prod[i] : prod[i])

    // ---- head flags of the thread's entries, plus the one of the entry after them (a row
    // ends at item i exactly when item i+1 starts a row; bit nnz is a sentinel 1).
    u32 hb = 0, eb = 0;
    if (nvalid > 0) {
        const u32 w = k0 >> 5, sh = k0 & 31u;
        const u64 win = (u64)__ldg(heads + w) | ((u64)__ldg(heads + w + 1) << 32);
        const u32 bits = (u32)(win >> sh);
        const u32 mask = (nvalid == 32) ? 0xffffffffu : ((1u << nvalid) - 1u);
        hb = bits & mask;         // item i starts a row
        eb = (bits >> 1) & mask;  // item i ends a row
    }

    // ---- the thread's aggregate: row starts, whether any boundary, sum after the last end
    SegAgg<T> mine;
    mine.count = __popc(hb);
    mine.flag = (hb | eb) != 0u;
    {
        const int last_end = eb ? 31 - __clz(eb) : -1;
        T t = T(0);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (i > last_end) t += SPMV_PROD(i);
        mine.value = t;
    }

    SegAgg<T> agg;
    SegAgg<T> before = block_seg_scan_exclusive<T, THREADS>(mine, scan_st, &agg);

    if (!LOOKBACK) {
        // ---- deterministic carries: no waiting on other tiles. The tile publishes its tail
        // (the sum after its last boundary, which belongs to the row continuing into the next
        // tile) and, when its first entry continues a row from an earlier tile, the sum of its
        // entries up to that row's end ("head"). spmv_fixup adds them in tile order.
        const bool first_cont =
            tile > 0u && (__ldg(heads + ((tile * TILE) >> 5)) & 1u) == 0u;  // TILE % 32 == 0
        if (threadIdx.x == 0) {
            tile_value[tile] = agg.value;
            tile_flag[tile] = (first_cont ? FIX_CONT : 0u) | (agg.flag ? FIX_BOUND : 0u);
        }
        T run = before.value;
        // Only the threads before the tile's first boundary can still be in the carried row.
        bool carried = first_cont && !before.flag;
        u32 seg = __ldg(tile_heads + tile) + before.count - 1u;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            if ((hb >> i) & 1u) {
                ++seg;
                carried = false;
            }
            run += SPMV_PROD(i);
            if ((eb >> i) & 1u) {
                if (carried) {
                    tile_value[gridDim.x + tile] = run;  // the head part of the carried row
                    carried = false;
                } else {
                    write_row(y, row_map, has_map, nsegs, nrows, seg, run, alpha, beta);
                }
                run = T(0);
            }
        }
        return;
    }

    // ---- decoupled look-back across tiles (warp 0)
    // The first entry of the tile continues a row iff thread 0 saw no head at item 0.
    const bool first_is_head = (__ldg(heads + ((tile * TILE) >> 5)) & 1u) != 0u;  // TILE % 32 == 0
    if (threadIdx.x < 32) {
        const u32 lane = threadIdx.x;
        // Local tails live in tile_value[0, ntiles), inclusive ones in tile_value[ntiles, 2 ntiles):
        // a tile that upgrades LOCAL to INCLUSIVE never overwrites the value a reader that saw
        // LOCAL is about to load (the same split as CUB's ScanTileState for wide types).
        T* tile_incl = tile_value + gridDim.x;
        if (lane == 0) {
            // Publish this tile's tail: INCLUSIVE when a boundary inside the tile starts it.
            if (agg.flag) tile_incl[tile] = agg.value; else tile_value[tile] = agg.value;
            __threadfence();
            volatile u32* f = tile_flag + tile;
            *f = epoch * 4u + (agg.flag ? TILE_INCLUSIVE : TILE_LOCAL);
        }
        T carry = T(0);
        if (!first_is_head && tile > 0) {
            int pred = (int)tile - 1;
            // Fast path: the nearest predecessor almost always contains a row start and so is
            // INCLUSIVE; wait for it alone instead of for a window of 32.
            u32 fl0 = 0;
            T v0 = T(0);
            if (lane == 0) {
                volatile u32* f = tile_flag + pred;
                do { fl0 = *f; } while ((fl0 >> 2) != epoch);
                __threadfence();
                v0 = ld_volatile(((fl0 & 3u) == TILE_INCLUSIVE ? tile_incl : tile_value) + pred);
            }
            fl0 = __shfl_sync(FULL_MASK, fl0, 0);
            carry = __shfl_sync(FULL_MASK, v0, 0);
            bool done = (fl0 & 3u) == TILE_INCLUSIVE;
            pred -= 1;
            while (!done) {
                const int t = pred - (int)lane;
                u32 st = TILE_INCLUSIVE;
                T v = T(0);
                if (t >= 0) {
                    volatile u32* f = tile_flag + t;
                    u32 fl;
                    do { fl = *f; } while ((fl >> 2) != epoch);
                    st = fl & 3u;
                    __threadfence();
                    v = ld_volatile((st == TILE_INCLUSIVE ? tile_incl : tile_value) + t);
                }
                const u32 incl = __ballot_sync(FULL_MASK, st == TILE_INCLUSIVE);
                // Lanes up to and including the nearest INCLUSIVE predecessor contribute.
                const int stop = incl ? __ffs(incl) - 1 : 31;
                T mine_v = (int)lane <= stop ? v : T(0);
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) mine_v += __shfl_xor_sync(FULL_MASK, mine_v, off);
                carry += mine_v;
                done = incl != 0u;
                pred -= 32;
            }
            if (lane == 0 && !agg.flag) {
                // The whole tile lies inside one row: now its inclusive tail is known.
                tile_incl[tile] = carry + agg.value;
                __threadfence();
                volatile u32* f = tile_flag + tile;
                *f = epoch * 4u + TILE_INCLUSIVE;
            }
        }
        if (lane == 0) s_carry = carry;
    }
    __syncthreads();

    // ---- write the rows that end in this thread
    T run = before.value + (before.flag ? T(0) : s_carry);
    u32 seg = __ldg(tile_heads + tile) + before.count - 1u;  // wraps to the row of the carried entry
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if ((hb >> i) & 1u) ++seg;
        run += SPMV_PROD(i);
        if ((eb >> i) & 1u) {
            write_row(y, row_map, has_map, nsegs, nrows, seg, run, alpha, beta);
            run = T(0);
        }
    }
}

#undef SPMV_PROD

// NAME = spmv_fused (LOOKBACK = false: deterministic, finished by spmv_fixup) or
// spmv_lookback (LOOKBACK = true: the previous single-launch kernel, kept for comparison).
#define SPMV_FUSED_ENTRY(NAME, LOOKBACK, V, T, SUFFIX, ITEMS, MIN_BLOCKS, STRIPED, SMEM_PROD)    \
    extern "C" __global__ void __launch_bounds__(SPMV_THREADS, MIN_BLOCKS) NAME##_##SUFFIX(       \
        const u32* col, const V* val, const u32* heads, const u32* tile_heads,                     \
        const u32* row_map, u32 has_map, u32 nsegs, u32 nnz, u32 nrows, const T* x, T* y,          \
        T alpha, T beta, u32* tile_flag, T* tile_value, u32 epoch) {                               \
        __shared__ BlockSegScanStorage<T, SPMV_THREADS / 32> scan_st;                              \
        __shared__ T s_carry;                                                                      \
        spmv_fused_tile<V, T, ITEMS, SPMV_THREADS, LOOKBACK, (STRIPED) != 0, (SMEM_PROD) != 0>(    \
            col, val, heads, tile_heads, row_map, has_map, nsegs, nnz, nrows, x, y, alpha, beta,   \
            tile_flag, tile_value, epoch, scan_st, s_carry);                                       \
    }
#if SPMV_WITH_F32
SPMV_FUSED_ENTRY(spmv_fused, false, float, float, f32, SPMV_ITEMS_F32, SPMV_MIN_BLOCKS_F32,
                 SPMV_STRIPED_F32, SPMV_SMEM_PROD_F32)
SPMV_FUSED_ENTRY(spmv_lookback, true, float, float, f32, SPMV_ITEMS_F32, 1, SPMV_STRIPED_F32,
                 SPMV_SMEM_PROD_F32)
#endif
#if SPMV_WITH_F64
SPMV_FUSED_ENTRY(spmv_fused, false, double, double, f64, SPMV_ITEMS_F64, SPMV_MIN_BLOCKS_F64,
                 SPMV_STRIPED_F64, SPMV_SMEM_PROD_F64)
SPMV_FUSED_ENTRY(spmv_lookback, true, double, double, f64, SPMV_ITEMS_F64, 1, SPMV_STRIPED_F64,
                 SPMV_SMEM_PROD_F64)
#endif
#if SPMV_WITH_MIXED
// f32 values, f64 x, y and sums: the f32 tile (the matrix's structure tables are those of its
// f32 upload), striped 4-byte value loads as in f32 (whole sectors per instruction), the f64
// register cap and f64 products parked in shared memory as in f64.
SPMV_FUSED_ENTRY(spmv_fused, false, float, double, f32f64, SPMV_ITEMS_F32, SPMV_MIN_BLOCKS_F64,
                 SPMV_STRIPED_F32, SPMV_SMEM_PROD_F64)
#endif
#if SPMV_WITH_COMPLEX
// The complex instantiations (interleaved values, the complex product; src/spmv/gpu/complex.rs):
// blocked loads, products in registers.
SPMV_FUSED_ENTRY(spmv_fused, false, cfloat, cfloat, c64, SPMV_ITEMS_C64, 1, 0, 0)
SPMV_FUSED_ENTRY(spmv_fused, false, cdouble, cdouble, c128, SPMV_ITEMS_C128, 1, 0, 0)
#endif

// ---------------------------------------------------------------------------------------------
// Fix-up of spmv_fused: the rows that cross tiles, summed in tile order (deterministic).
// ---------------------------------------------------------------------------------------------

// One warp per tile t. Tile t finishes the row carried into it when its first entry continues a
// row (FIX_CONT) and a boundary lies inside it (FIX_BOUND: the carried row ends there). That row
// started in the nearest earlier tile s with a boundary; its sum is tail[s] + tail[s+1] + ... +
// tail[t-1] + head[t] (tiles strictly between s and t lie inside the row, so their tail is their
// whole sum). s comes from a table built at upload; each lane sums a fixed strided subset of the
// tails and a butterfly combines them: the same operands in the same order every run, so the
// result is bitwise reproducible. A row of 10^6 entries spans ~500 tiles: 16 loads per lane.
template <typename T>
__device__ __forceinline__ void spmv_fixup_warp(const u32* __restrict__ tile_info,
                                                const u32* __restrict__ tile_start,
                                                const T* __restrict__ tile_value, u32 ntiles,
                                                const u32* __restrict__ tile_heads,
                                                const u32* __restrict__ row_map, u32 has_map,
                                                u32 nsegs, u32 nrows, T* y, T alpha, T beta) {
    const u32 t = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u32 lane = threadIdx.x & 31u;
    if (t >= ntiles) return;  // whole warps exit together (blockDim is a multiple of 32)
    if ((__ldg(tile_info + t) & (FIX_CONT | FIX_BOUND)) != (FIX_CONT | FIX_BOUND)) return;
    // s depends only on the structure: tile_start was built at upload (spmv_tile_bounds and an
    // exclusive max-scan), so no search here.
    const u32 s = __ldg(tile_start + t);
    T sum = T(0);
#pragma unroll 4
    for (u32 u = s + lane; u < t; u += 32) sum += __ldg(tile_value + u);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, off);
    if (lane == 0) {
        sum += __ldg(tile_value + ntiles + t);
        write_row(y, row_map, has_map, nsegs, nrows, __ldg(tile_heads + t) - 1u, sum, alpha,
                  beta);
    }
}

#define SPMV_FIXUP_ENTRY(T, SUFFIX)                                                                \
    extern "C" __global__ void spmv_fixup_##SUFFIX(                                                \
        const u32* tile_info, const u32* tile_start, const T* tile_value, u32 ntiles,              \
        const u32* tile_heads, const u32* row_map, u32 has_map, u32 nsegs, u32 nrows, T* y,        \
        T alpha, T beta) {                                                                         \
        spmv_fixup_warp<T>(tile_info, tile_start, tile_value, ntiles, tile_heads, row_map,         \
                           has_map, nsegs, nrows, y, alpha, beta);                                 \
    }
#if SPMV_WITH_F32
SPMV_FIXUP_ENTRY(float, f32)
#endif
#if SPMV_WITH_F64 || SPMV_WITH_MIXED
SPMV_FIXUP_ENTRY(double, f64)
#endif
#if SPMV_WITH_COMPLEX
SPMV_FIXUP_ENTRY(cfloat, c64)
SPMV_FIXUP_ENTRY(cdouble, c128)
#endif

// ---------------------------------------------------------------------------------------------
// Row kernel: one thread per row, for short rows of even length (stencils).
// ---------------------------------------------------------------------------------------------

// Every load of a row is issued before the first multiply-add (ROW_UNROLL entries at a time), so
// a thread has a whole 5- or 7-point row in flight. A warp's 32 rows are contiguous in memory:
// the first load instruction brings their lines into L1 and the following ones hit there, so
// DRAM sees each byte once. That reuse is why this kernel does not stream its loads evict-first
// (measured on the H200: poisson2d:2000 f64 93.5 us streamed vs 77.2 us cached, poisson3d:160
// 136 vs 104 us). Rows are summed left to right: deterministic.
template <typename V, typename T>
__device__ __forceinline__ void spmv_rows_body(const u32* __restrict__ row_ptr,
                                               const u32* __restrict__ col,
                                               const V* __restrict__ val,
                                               const T* __restrict__ x, T* y, T alpha, T beta,
                                               u32 nrows) {
    const u32 row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= nrows) return;
    u32 k = __ldg(row_ptr + row);
    const u32 end = __ldg(row_ptr + row + 1);
    T sum = T(0);
    for (; k + ROW_UNROLL <= end; k += ROW_UNROLL) {
        u32 c[ROW_UNROLL];
        V v[ROW_UNROLL];
#pragma unroll
        for (int i = 0; i < ROW_UNROLL; ++i) {
            c[i] = __ldg(col + k + i);
            v[i] = __ldg(val + k + i);
        }
#pragma unroll
        for (int i = 0; i < ROW_UNROLL; ++i) sum += T(v[i]) * __ldg(x + c[i]);
    }
    if (k < end) {
        u32 c[ROW_UNROLL];
        V v[ROW_UNROLL];
#pragma unroll
        for (int i = 0; i < ROW_UNROLL - 1; ++i) {
            c[i] = k + i < end ? __ldg(col + k + i) : 0u;
            v[i] = k + i < end ? __ldg(val + k + i) : V(0);
        }
#pragma unroll
        for (int i = 0; i < ROW_UNROLL - 1; ++i)
            if (k + i < end) sum += T(v[i]) * __ldg(x + c[i]);
    }
    y[row] = alpha * sum + scaled_y(y, row, beta);
}

#define SPMV_ROWS_ENTRY(V, T, SUFFIX)                                                              \
    extern "C" __global__ void __launch_bounds__(SPMV_ROWS_THREADS) spmv_rows_##SUFFIX(            \
        const u32* row_ptr, const u32* col, const V* val, const T* x, T* y, T alpha, T beta,       \
        u32 nrows) {                                                                               \
        spmv_rows_body<V, T>(row_ptr, col, val, x, y, alpha, beta, nrows);                         \
    }
#if SPMV_WITH_F32
SPMV_ROWS_ENTRY(float, float, f32)
#endif
#if SPMV_WITH_F64
SPMV_ROWS_ENTRY(double, double, f64)
#endif
#if SPMV_WITH_MIXED
SPMV_ROWS_ENTRY(float, double, f32f64)
#endif

// ---------------------------------------------------------------------------------------------
// Vector kernel: a sub-warp of `lanes` (power of two, <= 32) threads per row.
// ---------------------------------------------------------------------------------------------

template <typename V, typename T>
__device__ __forceinline__ void spmv_vector_body(const u32* __restrict__ row_ptr,
                                                 const u32* __restrict__ col,
                                                 const V* __restrict__ val,
                                                 const T* __restrict__ x, T* y, T alpha, T beta,
                                                 u32 nrows, u32 lanes_log2) {
    const u32 lanes = 1u << lanes_log2;
    const u32 gid = blockIdx.x * blockDim.x + threadIdx.x;
    const u32 row = gid >> lanes_log2;
    const u32 lane = gid & (lanes - 1u);
    T sum = T(0);
    if (row < nrows) {
        const u32 a = ld_stream(row_ptr + row), b = ld_stream(row_ptr + row + 1);
        u32 k = a + lane;
        // Four entries in flight per lane per iteration, then at most two and one (< 4 left).
        for (; k + 3 * lanes < b; k += 4 * lanes) {
            const u32 c0 = ld_stream(col + k), c1 = ld_stream(col + k + lanes);
            const u32 c2 = ld_stream(col + k + 2 * lanes), c3 = ld_stream(col + k + 3 * lanes);
            const T v0 = T(ld_stream(val + k)), v1 = T(ld_stream(val + k + lanes));
            const T v2 = T(ld_stream(val + k + 2 * lanes)), v3 = T(ld_stream(val + k + 3 * lanes));
            const T x0 = ld_x(x + c0), x1 = ld_x(x + c1), x2 = ld_x(x + c2), x3 = ld_x(x + c3);
            sum += v0 * x0;
            sum += v1 * x1;
            sum += v2 * x2;
            sum += v3 * x3;
        }
        if (k + lanes < b) {
            const u32 c0 = ld_stream(col + k), c1 = ld_stream(col + k + lanes);
            const T v0 = T(ld_stream(val + k)), v1 = T(ld_stream(val + k + lanes));
            const T x0 = ld_x(x + c0), x1 = ld_x(x + c1);
            sum += v0 * x0;
            sum += v1 * x1;
            k += 2 * lanes;
        }
        if (k < b) sum += T(ld_stream(val + k)) * ld_x(x + ld_stream(col + k));
    }
    // Every lane of the warp takes part in the shuffles (rows past the end contribute 0).
    for (u32 off = lanes >> 1; off > 0; off >>= 1) sum += __shfl_xor_sync(FULL_MASK, sum, off);
    if (row < nrows && lane == 0) st_stream(y + row, alpha * sum + scaled_y(y, row, beta));
}

#define SPMV_VECTOR_ENTRY(V, T, SUFFIX)                                                            \
    extern "C" __global__ void __launch_bounds__(SPMV_VECTOR_THREADS) spmv_vector_##SUFFIX(        \
        const u32* row_ptr, const u32* col, const V* val, const T* x, T* y, T alpha, T beta,       \
        u32 nrows, u32 lanes_log2) {                                                               \
        spmv_vector_body<V, T>(row_ptr, col, val, x, y, alpha, beta, nrows, lanes_log2);           \
    }
#if SPMV_WITH_F32
SPMV_VECTOR_ENTRY(float, float, f32)
#endif
#if SPMV_WITH_F64
SPMV_VECTOR_ENTRY(double, double, f64)
#endif
#if SPMV_WITH_MIXED
SPMV_VECTOR_ENTRY(float, double, f32f64)
#endif

// ---------------------------------------------------------------------------------------------
// y <- beta*y (a matrix without nonzeros), and the two element-wise steps of the paper's SpMV.
// ---------------------------------------------------------------------------------------------

#define SPMV_SIMPLE_ENTRIES(T, SUFFIX)                                                             \
    extern "C" __global__ void spmv_scale_##SUFFIX(T* y, T beta, u32 n) {                          \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)    \
            y[i] = scaled_y(y, i, beta);                                                           \
    }                                                                                              \
    /* Step 1 of §4.2: product = value * x[index]. */                                              \
    extern "C" __global__ void spmv_products_##SUFFIX(const u32* col, const T* val, const T* x,    \
                                                      T* prod, u32 nnz) {                          \
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < nnz; i += gridDim.x * blockDim.x)  \
            prod[i] = __ldg(val + i) * __ldg(x + __ldg(col + i));                                  \
    }                                                                                              \
    /* Step 4 of §4.2: after the backward inclusive segmented scan, a row's sum sits at its    */  \
    /* first entry. Empty rows share their rowPtr with the next row, so they take beta*y.      */  \
    extern "C" __global__ void spmv_rowgather_##SUFFIX(const u32* row_ptr, const T* prod, T* y,    \
                                                       T alpha, T beta, u32 nrows) {               \
        for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < nrows;                             \
             r += gridDim.x * blockDim.x) {                                                        \
            const u32 a = __ldg(row_ptr + r), b = __ldg(row_ptr + r + 1);                          \
            y[r] = (a < b ? alpha * prod[a] : T(0)) + scaled_y(y, r, beta);                        \
        }                                                                                          \
    }
#if SPMV_WITH_F32
SPMV_SIMPLE_ENTRIES(float, f32)
#endif
#if SPMV_WITH_F64 || SPMV_WITH_MIXED
SPMV_SIMPLE_ENTRIES(double, f64)
#endif

// ---------------------------------------------------------------------------------------------
// Upload-time tables of the fused kernel, built on the device (src/spmv/gpu.rs, `GpuCsr::upload`).
// ---------------------------------------------------------------------------------------------

// Head flags: bit k of heads[k / 32] is set when entry k starts a (non-empty) row, plus a
// sentinel bit at nnz. `heads` is zeroed first; distinct rows may share a word, hence atomicOr
// (the result does not depend on the order).
extern "C" __global__ void spmv_mark_heads(const u32* __restrict__ row_ptr, u32 nrows, u32 nnz,
                                           u32* heads) {
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += gridDim.x * blockDim.x) {
        const u32 a = __ldg(row_ptr + r), b = __ldg(row_ptr + r + 1);
        if (a < b) atomicOr(heads + (a >> 5), 1u << (a & 31u));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicOr(heads + (nnz >> 5), 1u << (nnz & 31u));
}

// counts[w] = row starts in word w of the head flags (not the sentinel), for w < nw; the words
// past the entries count 0. An exclusive scan of counts gives rank[w] = row starts before word w.
extern "C" __global__ void spmv_head_counts(const u32* __restrict__ heads, u32 nnz, u32 nw,
                                            u32* counts) {
    const u32 data_words = (nnz + 31u) >> 5;
    for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < nw; w += gridDim.x * blockDim.x) {
        u32 bits = w < data_words ? __ldg(heads + w) : 0u;
        if (w == (nnz >> 5)) bits &= ~(1u << (nnz & 31u));
        counts[w] = __popc(bits);
    }
}

// tile_heads[t] = row starts before tile t (= rank at the tile's first word); with empty rows,
// row_map[segment] = row for every non-empty row (its segment = row starts before its first entry).
extern "C" __global__ void spmv_tile_tables(const u32* __restrict__ row_ptr, u32 nrows,
                                            const u32* __restrict__ heads,
                                            const u32* __restrict__ rank, u32 ntiles,
                                            u32 tile_words, u32* tile_heads, u32* row_map,
                                            u32 has_map) {
    const u32 n = ntiles > nrows ? ntiles : nrows;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        if (i < ntiles) tile_heads[i] = __ldg(rank + i * tile_words);
        if (has_map && i < nrows) {
            const u32 a = __ldg(row_ptr + i), b = __ldg(row_ptr + i + 1);
            if (a < b) {
                const u32 w = a >> 5;
                row_map[__ldg(rank + w) + __popc(__ldg(heads + w) & ((1u << (a & 31u)) - 1u))] = i;
            }
        }
    }
}

// bnd[u] = u when tile u holds a row boundary (a row start in it, or a row end at its last entry,
// i.e. a row start or the sentinel right after it), else 0. An exclusive max-scan of bnd gives
// tile_start[t] = the nearest earlier tile with a boundary: where the row carried into t starts.
// rank has nw = ceil(nnz/32) + 1 entries (row starts before each word, the sentinel excluded).
extern "C" __global__ void spmv_tile_bounds(const u32* __restrict__ heads,
                                            const u32* __restrict__ rank, u32 nnz, u32 nw,
                                            u32 ntiles, u32 tile_words, u32* bnd) {
    for (u32 u = blockIdx.x * blockDim.x + threadIdx.x; u < ntiles; u += gridDim.x * blockDim.x) {
        const u32 w0 = u * tile_words;
        const u32 w1 = w0 + tile_words < nw - 1u ? w0 + tile_words : nw - 1u;
        const u32 next = (u + 1u) * tile_words * 32u;  // first entry after the tile
        const bool end_last = next >= nnz || ((__ldg(heads + (next >> 5)) >> (next & 31u)) & 1u);
        bnd[u] = (__ldg(rank + w1) > __ldg(rank + w0) || end_last) ? u : 0u;
    }
}

// Row-length statistics of a CSR row pointer on the device (GpuCsr::from_device_parts): out[0] = the
// least length (out[0] starts at 2^64 - 1), out[1] = the largest, out[2] = empty rows, out[3] = the
// sum of squared lengths (exact: at most nnz * max < 2^64), out[4] = row_ptr[0], out[5] =
// row_ptr[nrows]; out[1..4] start at 0. Integer atomics: the result does not depend on the order.
extern "C" __global__ void spmv_row_stats(const u32* __restrict__ row_ptr, u32 nrows,
                                          unsigned long long* out) {
    unsigned long long mn = ~0ull, mx = 0, empty = 0, sq = 0;
    for (u32 r = blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += gridDim.x * blockDim.x) {
        const unsigned long long len = row_ptr[r + 1] - row_ptr[r];
        mn = len < mn ? len : mn;
        mx = len > mx ? len : mx;
        empty += len == 0;
        sq += len * len;
    }
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long a = __shfl_xor_sync(FULL_MASK, mn, o), b = __shfl_xor_sync(FULL_MASK, mx, o);
        mn = a < mn ? a : mn;
        mx = b > mx ? b : mx;
        empty += __shfl_xor_sync(FULL_MASK, empty, o);
        sq += __shfl_xor_sync(FULL_MASK, sq, o);
    }
    if ((threadIdx.x & 31u) == 0) {
        atomicMin(out, mn);
        atomicMax(out + 1, mx);
        if (empty) atomicAdd(out + 2, empty);
        if (sq) atomicAdd(out + 3, sq);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[4] = row_ptr[0];
        out[5] = row_ptr[nrows];
    }
}

// Column spread of sampled rows (GpuCsr::from_device_parts; the host's column_spread on the
// device): out[0] += sum of |col - r*scale| over the entries of rows r = s*step, s < samples;
// out[1] += their count. out is zeroed first; the sum's order varies (atomics), which moves the
// mean by rounding only (it is compared with a threshold).
extern "C" __global__ void spmv_column_spread(const u32* __restrict__ row_ptr, const u32* __restrict__ col,
                                              u32 nrows, u32 step, u32 samples, double scale, double* out) {
    const u32 s = blockIdx.x * blockDim.x + threadIdx.x;
    double sum = 0.0, count = 0.0;
    if (s < samples) {
        const u32 r = s * step;
        if (r < nrows) {
            const double diag = (double)r * scale;
            for (u32 p = row_ptr[r]; p < row_ptr[r + 1]; ++p) {
                sum += fabs((double)col[p] - diag);
                count += 1.0;
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_xor_sync(FULL_MASK, sum, o);
        count += __shfl_xor_sync(FULL_MASK, count, o);
    }
    if ((threadIdx.x & 31u) == 0 && count > 0.0) {
        atomicAdd(out, sum);
        atomicAdd(out + 1, count);
    }
}
