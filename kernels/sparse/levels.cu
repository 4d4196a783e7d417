// Level analysis of a triangular solve on the device (the GPU side of TriangularPlan::analyse).
//
// tri_levels: one warp per row computes the row's range inside the triangle ([start, end): the
// entries with col < i for lower, col > i for upper), its diagonal position, and its dependency
// level, 1 + the largest level among the rows it references (0 for none). The level is found
// without a host round trip or a launch per level: a warp takes the next row from a ticket
// counter in dependency order (rows ascending for lower, descending for upper), waits on the
// ready words of the rows it references and publishes its own. Why it cannot deadlock: a row
// references only rows whose ticket is smaller, and every smaller ticket was taken by a warp
// that is resident and running (it executed its atomicAdd); by induction on the ticket every wait
// ends (the argument of the sync-free solve in sptrsv.cu).
//
// ready[i] holds level(i) + 1 once row i is done (0 before; the host zeroes ready[0..n] and the
// ticket counter ready[n] before the launch). The producer writes it with st.release.gpu, the
// consumer reads it with ld.acquire.gpu; the level is the value itself, so no other data needs
// ordering.
//
// The warp also writes key[t] = level and row_of[t] = row at its ticket t, so a stable sort of
// (key, row_of) by key yields the rows ordered by level and, inside a level, in ticket order:
// the CPU's order exactly. level_bounds then writes the level boundaries from the sorted keys.

#include "common.cuh"

#ifndef LEVELS_THREADS
#error "LEVELS_THREADS comes from the Rust side as a -D define (sparse::triangular::gpu::LEVELS_THREADS)"
#endif
#ifndef LEVELS_NO_DIAG
#error "LEVELS_NO_DIAG comes from the Rust side as a -D define (sparse::triangular::NO_DIAG)"
#endif

// upper: 0 lower triangle, 1 upper. stats[0] += off-diagonal entries in the triangle,
// stats[1] = max of them over rows, stats[2] = min row without a diagonal entry (the host sets
// it to LEVELS_NO_DIAG first). diag receives the diagonal position or LEVELS_NO_DIAG.
extern "C" __global__ void __launch_bounds__(LEVELS_THREADS)
    tri_levels(u32 n, const u32* __restrict__ row_ptr, const u32* __restrict__ col, u32 upper, u32* start,
               u32* end, u32* diag, u32* ready, u32* key, u32* row_of, u32* stats) {
    const u32 lane = threadIdx.x & 31u;
    for (;;) {
        const u32 t = warp_ticket(&ready[n]);
        if (t >= n) return;
        const u32 i = upper ? n - 1 - t : t;
        const u32 lo = row_ptr[i], hi = row_ptr[i + 1];
        const u32 ge = lower_bound_u32(col, lo, hi, i);
        const u32 gt = (ge < hi && col[ge] == i) ? ge + 1 : ge;
        const u32 s = upper ? gt : lo;
        const u32 e = upper ? hi : ge;
        u32 m = 0;  // the largest ready word seen = 1 + the largest level referenced
        for (u32 k = s + lane; k < e; k += 32) {
            const u32* w = &ready[col[k]];
            u32 v;
            while ((v = ld_acquire_u32(w)) == 0u) {
            }
            m = max(m, v);
        }
        for (u32 off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, off));
        if (lane == 0) {
            start[i] = s;
            end[i] = e;
            diag[i] = gt > ge ? ge : LEVELS_NO_DIAG;
            key[t] = m;
            row_of[t] = i;
            if (e > s) {
                atomicAdd(&stats[0], e - s);
                atomicMax(&stats[1], e - s);
            }
            if (gt == ge) atomicMin(&stats[2], i);
            st_release_u32(&ready[i], m + 1);
        }
        __syncwarp();
    }
}

// level_ptr from the sorted keys (levels 0..L-1, every one non-empty): level_ptr[key[p]] = p where
// the key changes, and level_ptr[L] = n. level_ptr has room for n + 1 entries.
extern "C" __global__ void level_bounds(u32 n, const u32* __restrict__ key, u32* level_ptr) {
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        const u32 k = key[p];
        if (p == 0 || key[p - 1] != k) level_ptr[k] = p;
        if (p == n - 1) level_ptr[k + 1] = n;
    }
}
