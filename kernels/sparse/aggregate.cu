// The graph phases of smoothed aggregation on the GPU: symmetric strength of connection (and
// dropping small entries, its sibling), node amalgamation, the symmetrised graph, MIS-2
// aggregation rounds and the tentative prolongator of one candidate and of several (a QR per
// aggregate). Launched by src/sparse/gpu/aggregate.rs, which documents the method; every result
// equals the CPU's (src/sparse/aggregate.rs, src/precond/amg/tentative.rs) exactly.
//
// Layering: warp level (AggGroup: G lanes of a warp on one row — sums, maxima, ballots, ranks),
// row level (one row's work by its group, `agg_*` device functions), device level (thin
// extern "C" entry points that walk the rows grid-stride, one per group size G in {4, 8, 16, 32}
// and per value type). Inputs are canonical CSR (strictly increasing columns in every row;
// checked on the host side before any of these run), so a row can be binary-searched.
//
// Floating point: the only arithmetic on values is strength's threshold
// theta·sqrt(|a_ii|·|a_jj|) (and the same threshold of dropping small entries), amalgamation's
// sums of squares and the tentative prolongator's norms and quotients, all in double with
// explicit round-to-nearest intrinsics (no FMA contraction; sums taken sequentially in the CPU's
// order), so they round exactly as the CPU.
#include "common.cuh"

#define AGG_NONE 0xffffffffu
#define MIS2_OUT 0ull
#define MIS2_UNDECIDED 1ull
#define MIS2_IN 2ull
#define MIS2_STATE_SHIFT 62
#define MIS2_LOW ((1ull << 62) - 1ull)
// Pass 2's candidate marker: a set top bit distinguishes "a neighbour of key 0" from "none".
#define MIS2_FOUND (1ull << 63)

// ---------------------------------------------------------------------------------------------
// Warp level: a group of G lanes (G divides 32) of one warp.
// ---------------------------------------------------------------------------------------------
template <int G>
struct AggGroup {
    u32 r;      // lane within the group
    u32 first;  // the group's first lane within the warp
    u32 mask;   // the group's lanes
    __device__ __forceinline__ AggGroup() {
        const u32 lane = threadIdx.x & 31u;
        r = lane & (u32)(G - 1);
        first = lane & ~(u32)(G - 1);
        mask = G == 32 ? FULL_MASK : (((1u << G) - 1u) << first);
    }
    __device__ __forceinline__ u32 sum(u32 v) const {
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o, G);
        return v;
    }
    __device__ __forceinline__ u64 max(u64 v) const {
#pragma unroll
        for (int o = G / 2; o > 0; o >>= 1) {
            const u64 w = __shfl_xor_sync(mask, v, o, G);
            v = w > v ? w : v;
        }
        return v;
    }
    // Bit q set when lane q of the group has `flag`.
    __device__ __forceinline__ u32 ballot(bool flag) const {
        const u32 b = __ballot_sync(mask, flag) >> first;
        return G == 32 ? b : b & ((1u << G) - 1u);
    }
    // Lanes below this one with their bit set in `bits`.
    __device__ __forceinline__ u32 rank(u32 bits) const { return __popc(bits & ((1u << r) - 1u)); }
};

// Rows walked grid-stride by groups of G lanes; the loop bound is uniform within a group, so
// the group's collectives see all of its lanes.
#define AGG_FOR_ROWS(G, row, n)                                                                   \
    for (u32 row = (blockIdx.x * blockDim.x + threadIdx.x) / (G); row < (n);                    \
         row += (gridDim.x * blockDim.x) / (G))

// First position in col[lo..hi) (sorted) whose column is >= c.
__device__ __forceinline__ u32 agg_lower_bound(const u32* __restrict__ col, u32 lo, u32 hi, u32 c) {
    while (lo < hi) {
        const u32 mid = lo + ((hi - lo) >> 1);
        if (col[mid] < c) lo = mid + 1; else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ u32 agg_lower_bound64(const u64* __restrict__ keys, u32 lo, u32 hi, u64 k) {
    while (lo < hi) {
        const u32 mid = lo + ((hi - lo) >> 1);
        if (keys[mid] < k) lo = mid + 1; else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ bool agg_row_has(const u32* __restrict__ rp, const u32* __restrict__ col, u32 row,
                                            u32 c) {
    const u32 hi = rp[row + 1];
    const u32 p = agg_lower_bound(col, rp[row], hi, c);
    return p < hi && col[p] == c;
}

// Adds the per-thread counts `v` of the whole grid into *counter: a warp sum, then one atomic per
// warp. Every lane of the warp must call it (it ends the kernels, after their row loops).
__device__ __forceinline__ void agg_count_into(u32 v, u32* counter) {
    v = __reduce_add_sync(FULL_MASK, v);
    if ((threadIdx.x & 31u) == 0 && v > 0) atomicAdd(counter, v);
}

// ---------------------------------------------------------------------------------------------
// Strength of connection: a_ij (j != i, a_ij != 0) is strong when
// |a_ij| >= theta * sqrt(|a_ii| * |a_jj|), evaluated in double as the CPU does.
// ---------------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void agg_abs_diag(const u32* __restrict__ rp, const u32* __restrict__ col,
                                             const T* __restrict__ val, u32 n, double* d) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const u32 hi = rp[i + 1];
        const u32 p = agg_lower_bound(col, rp[i], hi, i);
        d[i] = p < hi && col[p] == i ? fabs((double)val[p]) : 0.0;
    }
}

__device__ __forceinline__ bool agg_strong(u32 i, u32 c, double x, double di, const double* __restrict__ d,
                                           double theta) {
    return c != i && x != 0.0 && x >= __dmul_rn(theta, __dsqrt_rn(__dmul_rn(di, d[c])));
}

// Dropping small entries (DROP): a_ij is kept when it is on the diagonal or
// |a_ij| >= tol * sqrt(|a_ii| * |a_jj|), the strength test without its exclusions.
__device__ __forceinline__ bool agg_kept(u32 i, u32 c, double x, double di, const double* __restrict__ d,
                                         double tol) {
    return c == i || x >= __dmul_rn(tol, __dsqrt_rn(__dmul_rn(di, d[c])));
}

template <bool DROP>
__device__ __forceinline__ bool agg_select(u32 i, u32 c, double x, double di, const double* __restrict__ d,
                                           double theta) {
    return DROP ? agg_kept(i, c, x, di, d, theta) : agg_strong(i, c, x, di, d, theta);
}

template <typename T, int G, bool DROP>
__device__ __forceinline__ void agg_strength_count(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                   const T* __restrict__ val, u32 n,
                                                   const double* __restrict__ d, double theta, u32* counts) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 a1 = rp[row + 1];
        const double di = d[row];
        u32 c = 0;
        for (u32 p = rp[row] + g.r; p < a1; p += G)
            c += agg_select<DROP>(row, col[p], fabs((double)val[p]), di, d, theta);
        c = g.sum(c);
        if (g.r == 0) counts[row] = c;
    }
}

// With DROP, spos[q] receives the position in A of the kept entry q.
template <typename T, int G, bool DROP>
__device__ __forceinline__ void agg_strength_fill(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                  const T* __restrict__ val, u32 n,
                                                  const double* __restrict__ d, double theta,
                                                  const u32* __restrict__ srp, u32* scol, T* sval, u32* spos) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 a1 = rp[row + 1];
        const double di = d[row];
        u32 out = srp[row];
        // The kept entries keep their (sorted) order: each G-wide slice is compacted by a
        // ballot, its lanes placed by their rank among the kept lanes below them.
        for (u32 base = rp[row]; base < a1; base += G) {
            const u32 p = base + g.r;
            u32 c = 0;
            T v = T(0);
            bool keep = false;
            if (p < a1) {
                c = col[p];
                v = val[p];
                keep = agg_select<DROP>(row, c, fabs((double)v), di, d, theta);
            }
            const u32 bits = g.ballot(keep);
            if (keep) {
                const u32 q = out + g.rank(bits);
                scol[q] = c;
                sval[q] = v;
                if (DROP) spos[q] = p;
            }
            out += __popc(bits);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Amalgamation: node row I gathers rows I·b .. I·b+b-1; entry (I, J) = sqrt(sum of a_ij^2 over
// the block), the squares added rows of the block in order, each row's entries in stored
// (= column) order — the CPU's order. One thread per node row: the block-columns are visited in
// increasing order, the next one found as the smallest column >= lo over the block's rows.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ u32 agg_next_block_col(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                  u32 r0, u32 block, u32 lo) {
    u32 best = AGG_NONE;
    for (u32 r = r0; r < r0 + block; ++r) {
        const u32 hi = rp[r + 1];
        const u32 p = agg_lower_bound(col, rp[r], hi, lo);
        if (p < hi && col[p] < best) best = col[p];
    }
    return best == AGG_NONE ? AGG_NONE : best / block;
}

__device__ __forceinline__ void agg_amalgamate_count_rows(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                     u32 nodes, u32 block, u32* counts) {
    for (u32 node = blockIdx.x * blockDim.x + threadIdx.x; node < nodes; node += gridDim.x * blockDim.x) {
        u32 c = 0, lo = 0;
        for (u32 J; (J = agg_next_block_col(rp, col, node * block, block, lo)) != AGG_NONE; lo = (J + 1) * block) ++c;
        counts[node] = c;
    }
}

template <typename T>
__device__ __forceinline__ void agg_amalgamate_fill(const u32* __restrict__ rp, const u32* __restrict__ col,
                                                    const T* __restrict__ val, u32 nodes, u32 block,
                                                    const u32* __restrict__ orp, u32* ocol, T* oval) {
    for (u32 node = blockIdx.x * blockDim.x + threadIdx.x; node < nodes; node += gridDim.x * blockDim.x) {
        u32 out = orp[node], lo = 0;
        const u32 r0 = node * block;
        for (u32 J; (J = agg_next_block_col(rp, col, r0, block, lo)) != AGG_NONE; lo = (J + 1) * block) {
            const u32 end_col = (J + 1) * block;
            double s = 0.0;
            for (u32 r = r0; r < r0 + block; ++r) {
                const u32 hi = rp[r + 1];
                for (u32 p = agg_lower_bound(col, rp[r], hi, lo); p < hi && col[p] < end_col; ++p) {
                    const double x = (double)val[p];
                    s = __dadd_rn(s, __dmul_rn(x, x));
                }
            }
            ocol[out] = J;
            oval[out] = (T)__dsqrt_rn(s);
            ++out;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The symmetrised graph of S without the diagonal: row i = (S[i,:] ∪ {j : i ∈ S[j,:]}) \ {i}.
// count: own[i] = off-diagonal entries of row i; miss[i] = those whose mirror (j, i) is absent.
// missing: the absent mirrors as keys (j << 32) | i (sorted afterwards by the radix sort).
// extra_counts: deg[j] += 1 and ecnt[j] += 1 for every missing mirror.
// fill: row i's own entries (diagonal skipped) merged with its extra entries (disjoint sets):
//       each lane places its element by its rank in its list plus the count of smaller
//       elements of the other list (binary search), so no lane waits for another.
// ---------------------------------------------------------------------------------------------
template <int G>
__device__ __forceinline__ void agg_graph_count(const u32* __restrict__ rp, const u32* __restrict__ col, u32 n,
                                                u32* own, u32* miss) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 a1 = rp[row + 1];
        u32 o = 0, m = 0;
        for (u32 p = rp[row] + g.r; p < a1; p += G) {
            const u32 j = col[p];
            if (j != row) {
                ++o;
                m += !agg_row_has(rp, col, j, row);
            }
        }
        o = g.sum(o);
        m = g.sum(m);
        if (g.r == 0) {
            own[row] = o;
            miss[row] = m;
        }
    }
}

template <int G>
__device__ __forceinline__ void agg_graph_missing(const u32* __restrict__ rp, const u32* __restrict__ col, u32 n,
                                                  const u32* __restrict__ moff, u64* keys) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 a1 = rp[row + 1];
        u32 out = moff[row];
        if (moff[row + 1] == out) continue;  // uniform within the group
        for (u32 base = rp[row]; base < a1; base += G) {
            const u32 p = base + g.r;
            u32 j = 0;
            bool m = false;
            if (p < a1) {
                j = col[p];
                m = j != row && !agg_row_has(rp, col, j, row);
            }
            const u32 bits = g.ballot(m);
            if (m) keys[out + g.rank(bits)] = ((u64)j << 32) | row;
            out += __popc(bits);
        }
    }
}

__device__ __forceinline__ void agg_extra_counts_rows(const u64* __restrict__ keys, u32 m, u32* deg, u32* ecnt) {
    for (u32 q = blockIdx.x * blockDim.x + threadIdx.x; q < m; q += gridDim.x * blockDim.x) {
        const u32 j = (u32)(keys[q] >> 32);
        atomicAdd(deg + j, 1u);
        atomicAdd(ecnt + j, 1u);
    }
}

template <int G>
__device__ __forceinline__ void agg_graph_fill(const u32* __restrict__ rp, const u32* __restrict__ col, u32 n,
                                               const u32* __restrict__ eptr, const u64* __restrict__ ekeys,
                                               u32 has_extra, const u32* __restrict__ gptr, u32* gcol) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 a0 = rp[row], a1 = rp[row + 1];
        const u32 out = gptr[row];
        const u32 e0 = has_extra ? eptr[row] : 0u, e1 = has_extra ? eptr[row + 1] : 0u;
        const u32 dpos = agg_lower_bound(col, a0, a1, row);
        const bool has_diag = dpos < a1 && col[dpos] == row;
        for (u32 p = a0 + g.r; p < a1; p += G) {
            const u32 j = col[p];
            if (j == row) continue;
            const u32 own_rank = p - a0 - (has_diag && p > dpos ? 1u : 0u);
            const u32 extra_less = e1 > e0 ? agg_lower_bound64(ekeys, e0, e1, ((u64)row << 32) | j) - e0 : 0u;
            gcol[out + own_rank + extra_less] = j;
        }
        for (u32 q = e0 + g.r; q < e1; q += G) {
            const u32 x = (u32)ekeys[q];
            const u32 own_less = agg_lower_bound(col, a0, a1, x) - a0 - (has_diag && row < x ? 1u : 0u);
            gcol[out + (q - e0) + own_less] = x;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MIS-2 on packed keys: key(i) = state << 62 | (w(i) >> 34) << 32 | i, with
// w(i) = splitmix64(seed ^ splitmix64(i)) (crate::sparse::mis2_priority).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ u64 agg_splitmix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// The 30-bit priority for ordering windows of 2^window nodes (crate::sparse::mis2_priority30):
// window 0 keeps the top 30 bits of w(i); otherwise the window's random rank (the top bits of
// w(i >> window)) above the node's reversed position in its window (lower index first).
__device__ __forceinline__ u64 mis2_priority30(u32 i, u64 seed, u32 window) {
    if (window == 0) return agg_splitmix64(seed ^ agg_splitmix64((u64)i)) >> 34;
    const u32 w = window < 30 ? window : 30;
    const u64 mask = (1ull << w) - 1;
    const u64 win = w == 30 ? 0 : agg_splitmix64(seed ^ agg_splitmix64((u64)(i >> w))) >> (34 + w);
    return (win << w) | (mask - ((u64)i & mask));
}

__device__ __forceinline__ u64 mis2_key(u32 i, u64 seed, u32 window, u64 state) {
    return (state << MIS2_STATE_SHIFT) | (mis2_priority30(i, seed, window) << 32) | (u64)i;
}

// Nodes with neighbours start UNDECIDED, the others OUT; *undecided counts the former.
__device__ __forceinline__ void mis2_init_rows(const u32* __restrict__ gptr, u32 n, u64 seed, u32 window, u64* key,
                                          u32* undecided) {
    u32 cnt = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const bool und = gptr[i + 1] > gptr[i];
        key[i] = mis2_key(i, seed, window, und ? MIS2_UNDECIDED : MIS2_OUT);
        cnt += und;
    }
    agg_count_into(cnt, undecided);
}

// The largest of a[i] and a[j] over the neighbours j of row i, by the whole group. Each lane
// issues the column loads of up to MIS2_UNROLL of its entries, then their gathers, before the
// first comparison, so a short row (a 7-point graph's 6 neighbours on one lane) has all its
// loads in flight: the latency of the row pointer -> column -> key chain is paid once per row,
// not once per entry. A maximum: the same in any order.
#define MIS2_UNROLL 8
template <int G>
__device__ __forceinline__ u64 mis2_closed_max(const AggGroup<G>& g, const u32* __restrict__ gptr,
                                               const u32* __restrict__ gcol, u32 row, const u64* __restrict__ a) {
    u64 m = g.r == 0 ? a[row] : 0ull;
    const u64 hi = gptr[row + 1];
    u64 p = (u64)gptr[row] + g.r;
    for (; p + (u64)(MIS2_UNROLL - 1) * G < hi; p += (u64)MIS2_UNROLL * G) {
        u32 c[MIS2_UNROLL];
#pragma unroll
        for (int j = 0; j < MIS2_UNROLL; ++j) c[j] = gcol[p + (u64)j * G];
#pragma unroll
        for (int j = 0; j < MIS2_UNROLL; ++j) {
            const u64 x = a[c[j]];
            m = x > m ? x : m;
        }
    }
    if (p < hi) {
        u32 c[MIS2_UNROLL - 1];
#pragma unroll
        for (int j = 0; j < MIS2_UNROLL - 1; ++j) c[j] = p + (u64)j * G < hi ? gcol[p + (u64)j * G] : row;
#pragma unroll
        for (int j = 0; j < MIS2_UNROLL - 1; ++j) {
            const u64 x = a[c[j]];
            m = x > m ? x : m;
        }
    }
    return g.max(m);
}

// First half-round: t1(i) = max key over {i} ∪ N(i). Nothing when the previous round left no
// node undecided (*prev == 0): the host queues rounds in batches and reads the counters after.
template <int G>
__device__ __forceinline__ void mis2_t1(const u32* __restrict__ gptr, const u32* __restrict__ gcol, u32 n,
                                        const u64* __restrict__ key, u64* t1, const u32* __restrict__ prev) {
    if (*prev == 0) return;
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u64 m = mis2_closed_max<G>(g, gptr, gcol, row, key);
        if (g.r == 0) t1[row] = m;
    }
}

// Second half-round and the state update, fused: t2(i) = max t1 over {i} ∪ N(i) is needed only
// by node i itself and t1 is not written here, so an UNDECIDED node can update its own key in
// place (IN when t2 is its key, OUT when t2 is an IN node's key). Counts the nodes left
// UNDECIDED into *undecided.
template <int G>
__device__ __forceinline__ void mis2_t2_update(const u32* __restrict__ gptr, const u32* __restrict__ gcol,
                                               u32 n, const u64* __restrict__ t1, u64* key, u32* undecided,
                                               const u32* __restrict__ prev) {
    if (*prev == 0) return;  // *undecided stays 0
    const AggGroup<G> g;
    u32 left = 0;
    AGG_FOR_ROWS(G, row, n) {
        const u64 k = key[row];
        if ((k >> MIS2_STATE_SHIFT) != MIS2_UNDECIDED) continue;  // uniform within the group
        const u64 t2 = mis2_closed_max<G>(g, gptr, gcol, row, t1);
        if (g.r == 0) {
            if (t2 == k)
                key[row] = (k & MIS2_LOW) | (MIS2_IN << MIS2_STATE_SHIFT);
            else if ((t2 >> MIS2_STATE_SHIFT) == MIS2_IN)
                key[row] = k & MIS2_LOW;
            else
                ++left;
        }
    }
    agg_count_into(left, undecided);
}

__device__ __forceinline__ void mis2_in_flags_rows(const u64* __restrict__ key, u32 n, u32* flags) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        flags[i] = (key[i] >> MIS2_STATE_SHIFT) == MIS2_IN;
}

// Pass 1: a root keeps its own aggregate (its rank among the roots, an exclusive scan of the IN
// flags) and records itself in roots; another node joins the root neighbour of largest key (all
// IN keys share their state bits, so the largest key is the largest (w >> 34, j)).
template <int G>
__device__ __forceinline__ void mis2_pass1(const u32* __restrict__ gptr, const u32* __restrict__ gcol, u32 n,
                                           const u64* __restrict__ key, const u32* __restrict__ rank, u32* roots,
                                           u32* p1) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        if ((key[row] >> MIS2_STATE_SHIFT) == MIS2_IN) {
            if (g.r == 0) {
                p1[row] = rank[row];
                roots[rank[row]] = row;
            }
            continue;
        }
        u64 best = 0;
        const u32 hi = gptr[row + 1];
        for (u32 p = gptr[row] + g.r; p < hi; p += G) {
            const u64 x = key[gcol[p]];
            if ((x >> MIS2_STATE_SHIFT) == MIS2_IN && x > best) best = x;
        }
        best = g.max(best);
        if (g.r == 0) p1[row] = best ? rank[(u32)best] : AGG_NONE;
    }
}

// Pass 2: a node left out by pass 1 joins the aggregate of its pass-1-assigned neighbour of
// largest (w >> 34, j) (its key without the state bits).
template <int G>
__device__ __forceinline__ void mis2_pass2(const u32* __restrict__ gptr, const u32* __restrict__ gcol, u32 n,
                                           const u64* __restrict__ key, const u32* __restrict__ p1, u32* agg) {
    const AggGroup<G> g;
    AGG_FOR_ROWS(G, row, n) {
        const u32 own = p1[row];
        if (own != AGG_NONE) {
            if (g.r == 0) agg[row] = own;
            continue;
        }
        u64 best = 0;
        const u32 hi = gptr[row + 1];
        for (u32 p = gptr[row] + g.r; p < hi; p += G) {
            const u32 j = gcol[p];
            if (p1[j] != AGG_NONE) {
                const u64 x = (key[j] & MIS2_LOW) | MIS2_FOUND;
                best = x > best ? x : best;
            }
        }
        best = g.max(best);
        if (g.r == 0) agg[row] = best ? p1[(u32)best] : AGG_NONE;
    }
}

// ---------------------------------------------------------------------------------------------
// Members of the aggregates: (agg, node) pairs stably sorted by agg (the radix sort), then the
// start of each aggregate found where the sorted agg changes. Every aggregate holds its root, so
// none is empty; agg_ptr[nagg] is where the unaggregated nodes (AGG_NONE) begin.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void agg_iota_rows(u32 n, u32* out) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = i;
}

__device__ __forceinline__ void agg_boundaries_rows(const u32* __restrict__ sorted, u32 n, u32 nagg, u32* agg_ptr) {
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < n; p += gridDim.x * blockDim.x) {
        const u32 k = sorted[p];
        const u32 prev = p > 0 ? sorted[p - 1] : AGG_NONE;
        if (k != prev || p == 0) {
            if (k != AGG_NONE) agg_ptr[k] = p;
            else agg_ptr[nagg] = p;
        }
        if (p == n - 1 && k != AGG_NONE) agg_ptr[nagg] = n;
    }
}

// ---------------------------------------------------------------------------------------------
// Tentative prolongator of one candidate b (block unknowns per node). flags: k (the number of
// candidates, 1 here) for an unknown of an aggregated node (their exclusive scan is T's row
// pointer). fit: one thread per aggregate
// sums b_i^2 over its unknowns in increasing order (members are in node order, each node's
// unknowns consecutive), sequentially in double from 0 — the CPU's fit_candidates for k = 1 —
// then writes T's entries b_i / norm at the unknowns' rows and bc[a] = norm; a norm that is not
// positive and finite gives a zero column (the CPU's test `norm > 1e-10·norm && norm > 0`).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void agg_tent_flags_rows(const u32* __restrict__ agg, u32 unknowns, u32 block, u32 k,
                                                    u32* flags) {
    for (u32 u = blockIdx.x * blockDim.x + threadIdx.x; u < unknowns; u += gridDim.x * blockDim.x)
        flags[u] = agg[u / block] != AGG_NONE ? k : 0u;
}

template <typename T>
__device__ __forceinline__ void agg_tent_fit(const u32* __restrict__ agg_ptr, const u32* __restrict__ members,
                                             u32 nagg, u32 block, const T* __restrict__ b,
                                             const u32* __restrict__ trp, u32* tcol, T* tval, T* bc) {
    for (u32 a = blockIdx.x * blockDim.x + threadIdx.x; a < nagg; a += gridDim.x * blockDim.x) {
        const u32 m0 = agg_ptr[a], m1 = agg_ptr[a + 1];
        double s = 0.0;
        for (u32 m = m0; m < m1; ++m) {
            const u32 u0 = members[m] * block;
            for (u32 u = u0; u < u0 + block; ++u) {
                const double x = (double)b[u];
                s = __dadd_rn(s, __dmul_rn(x, x));
            }
        }
        const double norm = __dsqrt_rn(s);
        const bool ok = norm > __dmul_rn(1e-10, norm) && norm > 0.0;
        bc[a] = ok ? (T)norm : T(0);
        for (u32 m = m0; m < m1; ++m) {
            const u32 u0 = members[m] * block;
            for (u32 u = u0; u < u0 + block; ++u) {
                const u32 q = trp[u];
                tcol[q] = a;
                tval[q] = ok ? (T)__ddiv_rn((double)b[u], norm) : T(0);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tentative prolongator of k candidates (PyAMG's fit_candidates): one thread per aggregate factors
// the aggregate's block of the candidates B_a (its unknowns in increasing order, k columns) as
// Q R by modified Gram-Schmidt, exactly the CPU's sequence (src/precond/amg/tentative.rs): every
// sum sequential in the unknowns' order from -0.0 (Rust's float Sum), each product and update
// rounded on its own. The aggregate's Q is built in place in q (double, T's layout: the k entries
// of unknown u's row start at trp[u]), then converted into tval. R goes to the coarse
// candidates: bc[j·nc + a·k + c] = R[c][j] (nc = nagg·k), upper triangle, zero below. A column
// whose norm falls to 1e-10 of its norm before orthogonalisation (or to 0) is set to zero, with
// a zero diagonal in R.
// ---------------------------------------------------------------------------------------------
// Σ x² of column c of the aggregate's block of q (the unknowns of members m0..m1, block per node,
// in increasing order), sequentially from -0.0 with every product and sum rounded on its own.
__device__ __forceinline__ double agg_col_sumsq(const double* q, const u32* __restrict__ trp,
                                                const u32* __restrict__ members, u32 m0, u32 m1, u32 block,
                                                u32 c) {
    double s = -0.0;
    for (u32 m = m0; m < m1; ++m) {
        const u32 u0 = members[m] * block;
        for (u32 u = u0; u < u0 + block; ++u) {
            const double x = q[trp[u] + c];
            s = __dadd_rn(s, __dmul_rn(x, x));
        }
    }
    return s;
}

template <typename T>
__device__ __forceinline__ void agg_tent_qr(const u32* __restrict__ agg_ptr, const u32* __restrict__ members,
                                            u32 nagg, u32 block, u32 k, const T* __restrict__ b, u32 unknowns,
                                            const u32* __restrict__ trp, u32* __restrict__ tcol,
                                            double* __restrict__ q, T* __restrict__ tval, T* __restrict__ bc) {
    const u64 nc = (u64)nagg * k;
    for (u32 a = blockIdx.x * blockDim.x + threadIdx.x; a < nagg; a += gridDim.x * blockDim.x) {
        const u32 m0 = agg_ptr[a], m1 = agg_ptr[a + 1];
        for (u32 m = m0; m < m1; ++m) {
            const u32 u0 = members[m] * block;
            for (u32 u = u0; u < u0 + block; ++u) {
                const u32 r = trp[u];
                for (u32 c = 0; c < k; ++c) {
                    q[r + c] = (double)b[(u64)c * unknowns + u];
                    tcol[r + c] = a * k + c;
                }
            }
        }
        for (u32 c = 0; c < k; ++c) {
            const double norm0 = __dsqrt_rn(agg_col_sumsq(q, trp, members, m0, m1, block, c));
            for (u32 p = 0; p < c; ++p) {
                double d = -0.0;
                for (u32 m = m0; m < m1; ++m) {
                    const u32 u0 = members[m] * block;
                    for (u32 u = u0; u < u0 + block; ++u) {
                        const u32 r = trp[u];
                        d = __dadd_rn(d, __dmul_rn(q[r + p], q[r + c]));
                    }
                }
                bc[(u64)c * nc + (u64)a * k + p] = (T)d;
                for (u32 m = m0; m < m1; ++m) {
                    const u32 u0 = members[m] * block;
                    for (u32 u = u0; u < u0 + block; ++u) {
                        const u32 r = trp[u];
                        q[r + c] = __dsub_rn(q[r + c], __dmul_rn(d, q[r + p]));
                    }
                }
            }
            const double norm = __dsqrt_rn(agg_col_sumsq(q, trp, members, m0, m1, block, c));
            const bool ok = norm > __dmul_rn(1e-10, norm0) && norm > 0.0;
            bc[(u64)c * nc + (u64)a * k + c] = ok ? (T)norm : T(0);
            for (u32 j = 0; j < c; ++j) bc[(u64)j * nc + (u64)a * k + c] = T(0);
            for (u32 m = m0; m < m1; ++m) {
                const u32 u0 = members[m] * block;
                for (u32 u = u0; u < u0 + block; ++u) {
                    const u32 r = trp[u] + c;
                    q[r] = ok ? __ddiv_rn(q[r], norm) : 0.0;
                }
            }
        }
        for (u32 m = m0; m < m1; ++m) {
            const u32 u0 = members[m] * block;
            for (u32 u = u0; u < u0 + block; ++u) {
                const u32 r = trp[u];
                for (u32 c = 0; c < k; ++c) tval[r + c] = (T)q[r + c];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points. Group kernels come in G = 4, 8, 16, 32 lanes per row (`_g4` ... `_g32`), chosen
// on the host from the average row length; typed ones carry `_f32` / `_f64`.
// ---------------------------------------------------------------------------------------------
#define AGG_GROUP_ENTRIES(G)                                                                                  \
    extern "C" __global__ void agg_graph_count_g##G(const u32* rp, const u32* col, u32 n, u32* own, u32* miss) { \
        agg_graph_count<G>(rp, col, n, own, miss);                                                            \
    }                                                                                                         \
    extern "C" __global__ void agg_graph_missing_g##G(const u32* rp, const u32* col, u32 n, const u32* moff,  \
                                                      u64* keys) {                                            \
        agg_graph_missing<G>(rp, col, n, moff, keys);                                                         \
    }                                                                                                         \
    extern "C" __global__ void agg_graph_fill_g##G(const u32* rp, const u32* col, u32 n, const u32* eptr,     \
                                                   const u64* ekeys, u32 has_extra, const u32* gptr,          \
                                                   u32* gcol) {                                               \
        agg_graph_fill<G>(rp, col, n, eptr, ekeys, has_extra, gptr, gcol);                                    \
    }                                                                                                         \
    extern "C" __global__ void mis2_pass1_g##G(const u32* gptr, const u32* gcol, u32 n, const u64* key,       \
                                               const u32* rank, u32* roots, u32* p1) {                        \
        mis2_pass1<G>(gptr, gcol, n, key, rank, roots, p1);                                                   \
    }                                                                                                         \
    extern "C" __global__ void mis2_pass2_g##G(const u32* gptr, const u32* gcol, u32 n, const u64* key,       \
                                               const u32* p1, u32* agg) {                                     \
        mis2_pass2<G>(gptr, gcol, n, key, p1, agg);                                                           \
    }
AGG_GROUP_ENTRIES(4)
AGG_GROUP_ENTRIES(8)
AGG_GROUP_ENTRIES(16)
AGG_GROUP_ENTRIES(32)

// The MIS-2 rounds also come in G = 1 and 2 (`mis2_round_lanes` on the host: each lane takes
// up to MIS2_UNROLL entries of a row in one batch of loads).
#define AGG_MIS2_ROUND_ENTRIES(G)                                                                             \
    extern "C" __global__ void mis2_t1_g##G(const u32* gptr, const u32* gcol, u32 n, const u64* key, u64* t1, \
                                            const u32* prev) {                                                \
        mis2_t1<G>(gptr, gcol, n, key, t1, prev);                                                             \
    }                                                                                                         \
    extern "C" __global__ void mis2_t2_update_g##G(const u32* gptr, const u32* gcol, u32 n, const u64* t1,    \
                                                   u64* key, u32* undecided, const u32* prev) {               \
        mis2_t2_update<G>(gptr, gcol, n, t1, key, undecided, prev);                                           \
    }
AGG_MIS2_ROUND_ENTRIES(1)
AGG_MIS2_ROUND_ENTRIES(2)
AGG_MIS2_ROUND_ENTRIES(4)
AGG_MIS2_ROUND_ENTRIES(8)
AGG_MIS2_ROUND_ENTRIES(16)
AGG_MIS2_ROUND_ENTRIES(32)

#define AGG_TYPED_GROUP_ENTRIES(T, S, G)                                                                      \
    extern "C" __global__ void agg_strength_count_g##G##_##S(const u32* rp, const u32* col, const T* val,     \
                                                             u32 n, const double* d, double theta,            \
                                                             u32* counts) {                                   \
        agg_strength_count<T, G, false>(rp, col, val, n, d, theta, counts);                                   \
    }                                                                                                         \
    extern "C" __global__ void agg_strength_fill_g##G##_##S(const u32* rp, const u32* col, const T* val,      \
                                                            u32 n, const double* d, double theta,             \
                                                            const u32* srp, u32* scol, T* sval) {             \
        agg_strength_fill<T, G, false>(rp, col, val, n, d, theta, srp, scol, sval, nullptr);                  \
    }                                                                                                         \
    extern "C" __global__ void agg_drop_count_g##G##_##S(const u32* rp, const u32* col, const T* val, u32 n,  \
                                                         const double* d, double tol, u32* counts) {          \
        agg_strength_count<T, G, true>(rp, col, val, n, d, tol, counts);                                      \
    }                                                                                                         \
    extern "C" __global__ void agg_drop_fill_g##G##_##S(const u32* rp, const u32* col, const T* val, u32 n,   \
                                                        const double* d, double tol, const u32* srp,          \
                                                        u32* scol, T* sval, u32* spos) {                      \
        agg_strength_fill<T, G, true>(rp, col, val, n, d, tol, srp, scol, sval, spos);                        \
    }
#define AGG_TYPED_ENTRIES(T, S)                                                                               \
    AGG_TYPED_GROUP_ENTRIES(T, S, 4)                                                                          \
    AGG_TYPED_GROUP_ENTRIES(T, S, 8)                                                                          \
    AGG_TYPED_GROUP_ENTRIES(T, S, 16)                                                                         \
    AGG_TYPED_GROUP_ENTRIES(T, S, 32)                                                                         \
    extern "C" __global__ void agg_abs_diag_##S(const u32* rp, const u32* col, const T* val, u32 n, double* d) { \
        agg_abs_diag<T>(rp, col, val, n, d);                                                                  \
    }                                                                                                         \
    extern "C" __global__ void agg_amalgamate_fill_##S(const u32* rp, const u32* col, const T* val, u32 nodes, \
                                                       u32 block, const u32* orp, u32* ocol, T* oval) {       \
        agg_amalgamate_fill<T>(rp, col, val, nodes, block, orp, ocol, oval);                                  \
    }                                                                                                         \
    extern "C" __global__ void agg_tent_fit_##S(const u32* agg_ptr, const u32* members, u32 nagg, u32 block,  \
                                                const T* b, const u32* trp, u32* tcol, T* tval, T* bc) {      \
        agg_tent_fit<T>(agg_ptr, members, nagg, block, b, trp, tcol, tval, bc);                               \
    }                                                                                                         \
    extern "C" __global__ void agg_tent_qr_##S(const u32* agg_ptr, const u32* members, u32 nagg, u32 block,   \
                                               u32 k, const T* b, u32 unknowns, const u32* trp, u32* tcol,    \
                                               double* q, T* tval, T* bc) {                                   \
        agg_tent_qr<T>(agg_ptr, members, nagg, block, k, b, unknowns, trp, tcol, q, tval, bc);                \
    }
AGG_TYPED_ENTRIES(float, f32)
AGG_TYPED_ENTRIES(double, f64)

extern "C" __global__ void agg_amalgamate_count(const u32* rp, const u32* col, u32 nodes, u32 block, u32* counts) {
    agg_amalgamate_count_rows(rp, col, nodes, block, counts);
}
extern "C" __global__ void agg_extra_counts(const u64* keys, u32 m, u32* deg, u32* ecnt) {
    agg_extra_counts_rows(keys, m, deg, ecnt);
}
extern "C" __global__ void mis2_init(const u32* gptr, u32 n, u64 seed, u32 window, u64* key, u32* undecided) {
    mis2_init_rows(gptr, n, seed, window, key, undecided);
}
extern "C" __global__ void mis2_in_flags(const u64* key, u32 n, u32* flags) { mis2_in_flags_rows(key, n, flags); }
extern "C" __global__ void agg_iota(u32 n, u32* out) { agg_iota_rows(n, out); }
extern "C" __global__ void agg_boundaries(const u32* sorted, u32 n, u32 nagg, u32* agg_ptr) {
    agg_boundaries_rows(sorted, n, nagg, agg_ptr);
}
extern "C" __global__ void agg_tent_flags(const u32* agg, u32 unknowns, u32 block, u32 k, u32* flags) {
    agg_tent_flags_rows(agg, unknowns, block, k, flags);
}
