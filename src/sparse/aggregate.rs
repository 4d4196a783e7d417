//! Strength of connection and aggregation: the graph steps of smoothed-aggregation multigrid.
//!
//! [`strength_symmetric`] keeps the strong off-diagonal entries of `A` (PyAMG's symmetric
//! strength of connection); [`aggregate_mis2`] groups the nodes of that graph into aggregates
//! around the nodes of a distance-2 maximal independent set (Bell, Dalton and Olson 2012).
//!
//! # Why MIS-2, and why this exact procedure
//!
//! Greedy aggregation (PyAMG's `standard_aggregation`) visits nodes in order, which is
//! sequential. A distance-2 maximal independent set has the same property that makes good
//! aggregates — every node is within distance 2 of exactly one chosen root and no two roots
//! are within distance 2 — and it is computed in parallel rounds where every node reads only the
//! previous round's arrays. The procedure below fixes every tie by a random priority and the node
//! index, so its result depends on the graph and the seed alone, not on thread count or
//! evaluation order: the CPU version here and the GPU version (`sparse::gpu`) produce the same
//! aggregates, hence the same multigrid hierarchy.
//!
//! 1. Priority `w(i) = splitmix64(seed ^ splitmix64(i))` ([`mis2_priority`]). State
//!    `OUT = 0`, `UNDECIDED = 1`, `IN = 2`; nodes without neighbours start `OUT`, the others
//!    `UNDECIDED`. `key(i) = (state(i), w(i), i)`, compared lexicographically.
//! 2. Round: `t1(i) = max key(j)` over `j ∈ {i} ∪ N(i)`; `t2(i) = max t1(j)` over the same set
//!    (the largest key within distance 2); every `UNDECIDED` node whose `t2` is its own key
//!    becomes `IN`, and every `UNDECIDED` node whose `t2` belongs to an `IN` node becomes `OUT`.
//!    Repeat until no node is `UNDECIDED` (each round decides at least the node of largest key).
//! 3. The `IN` nodes are the roots; aggregate `k` is the `k`-th root in node order.
//! 4. Pass 1: a non-root node with a root neighbour joins the root neighbour of largest
//!    `(w(j), j)`. Pass 2: a node still unassigned joins the aggregate of its neighbour of largest
//!    `(w(j), j)` among those assigned in pass 1 (maximality puts every node with neighbours
//!    within distance 2 of a root, so pass 2 assigns the rest).
//!
//! Nodes without strong neighbours stay unaggregated ([`NOT_AGGREGATED`]): their rows of the
//! tentative prolongator are zero, and the smoother alone treats them (as in PyAMG).
//!
//! # References
//!
//! - N. Bell, S. Dalton and L. N. Olson, *Exposing fine-grained parallelism in algebraic
//!   multigrid methods*, SIAM J. Sci. Comput. 34(4), 2012.
//! - P. Vaněk, J. Mandel and M. Brezina, *Algebraic multigrid by smoothed aggregation for second
//!   and fourth order elliptic problems*, Computing 56, 1996.

use rayon::prelude::*;

use crate::csr::CsrMatrix;
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// `agg[i]` of a node that belongs to no aggregate (it has no strong neighbour).
pub const NOT_AGGREGATED: u32 = u32::MAX;

/// The result of an aggregation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregation {
    /// The aggregate of each node, or [`NOT_AGGREGATED`].
    pub agg: Vec<u32>,
    /// The root node of each aggregate, in increasing node order.
    pub roots: Vec<u32>,
}

impl Aggregation {
    /// The number of aggregates (the coarse level's nodes).
    pub fn num_aggregates(&self) -> usize {
        self.roots.len()
    }
}

/// SplitMix64's output function (Steele, Lea and Flood 2014): a bijective 64-bit mix.
#[inline]
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random priority of node `i` in [`aggregate_mis2`] (shared with the GPU version).
#[inline]
pub fn mis2_priority(i: u32, seed: u64) -> u64 {
    splitmix64(seed ^ splitmix64(i as u64))
}

/// Symmetric strength of connection (PyAMG's `symmetric_strength_of_connection`): the
/// off-diagonal `a_ij` is strong when `|a_ij| ≥ θ·sqrt(|a_ii|·|a_jj|)`. Returns the strong
/// off-diagonal entries (values `a_ij`) as canonical CSR without the diagonal; `θ = 0` keeps every
/// stored off-diagonal entry (PyAMG's default for smoothed aggregation). Explicit zeros are
/// dropped.
///
/// # Errors
/// [`Error::InvalidInput`] when `A` is not square or `θ` is not in `[0, 1]`.
pub fn strength_symmetric<T: Scalar>(a: &CsrMatrix<T>, theta: f64) -> Result<CsrMatrix<T>> {
    if a.nrows() != a.ncols() {
        return Err(Error::InvalidInput(format!(
            "strength of connection: the matrix is {}×{}, not square",
            a.nrows(),
            a.ncols()
        )));
    }
    if !(0.0..=1.0).contains(&theta) {
        return Err(Error::InvalidInput(format!(
            "strength of connection: theta = {theta} is not in [0, 1]"
        )));
    }
    let n = a.nrows();
    let diag: Vec<f64> = a.diagonal().iter().map(|d| d.as_f64().abs()).collect();
    let (p, j, v) = (a.row_ptr(), a.col_idx(), a.values());
    let rows: Vec<Vec<(u32, T)>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut row: Vec<(u32, T)> = (p[i] as usize..p[i + 1] as usize)
                .filter(|&k| {
                    let c = j[k] as usize;
                    let x = v[k].as_f64().abs();
                    c != i && x != 0.0 && x >= theta * (diag[i] * diag[c]).sqrt()
                })
                .map(|k| (j[k], v[k]))
                .collect();
            row.sort_unstable_by_key(|e| e.0);
            // Duplicate entries of one column are summed (they are one connection).
            row.dedup_by(|b, a| {
                if a.0 == b.0 {
                    a.1 += b.1;
                    true
                } else {
                    false
                }
            });
            row
        })
        .collect();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u32);
    let nnz: usize = rows.iter().map(Vec::len).sum();
    let mut col_idx = Vec::with_capacity(nnz);
    let mut values = Vec::with_capacity(nnz);
    for row in rows {
        for (c, x) in row {
            col_idx.push(c);
            values.push(x);
        }
        row_ptr.push(col_idx.len() as u32);
    }
    CsrMatrix::try_from_parts(n, n, row_ptr, col_idx, values)
}

/// The symmetrised adjacency of `s` without the diagonal: `i ~ j` when `s_ij` or `s_ji` is
/// stored. Rows sorted, no duplicates.
fn symmetric_graph<T: Scalar>(s: &CsrMatrix<T>) -> (Vec<u32>, Vec<u32>) {
    let n = s.nrows();
    let t = s.transpose();
    let rows: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mut r: Vec<u32> = s
                .col_idx()
                .get(s.row_ptr()[i] as usize..s.row_ptr()[i + 1] as usize)
                .unwrap_or(&[])
                .iter()
                .chain(&t.col_idx()[t.row_ptr()[i] as usize..t.row_ptr()[i + 1] as usize])
                .copied()
                .filter(|&c| c as usize != i)
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let mut ptr = Vec::with_capacity(n + 1);
    ptr.push(0u32);
    let mut idx = Vec::new();
    for r in rows {
        idx.extend_from_slice(&r);
        ptr.push(idx.len() as u32);
    }
    (ptr, idx)
}

const OUT: u8 = 0;
const UNDECIDED: u8 = 1;
const IN: u8 = 2;

/// `(state, priority, node)`: the lexicographic key of the MIS-2 rounds.
type Key = (u8, u64, u32);

/// MIS-2 aggregation of the graph of `s` (its pattern, symmetrised, without the diagonal),
/// deterministic for a given `seed` and independent of evaluation order. See the module docs for
/// the exact procedure.
///
/// # Panics
/// When `s` is not square (a strength matrix always is).
pub fn aggregate_mis2<T: Scalar>(s: &CsrMatrix<T>, seed: u64) -> Aggregation {
    assert_eq!(s.nrows(), s.ncols(), "aggregate_mis2: S must be square");
    let n = s.nrows();
    let (ptr, idx) = symmetric_graph(s);
    let nbrs = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
    let w: Vec<u64> = (0..n as u32).map(|i| mis2_priority(i, seed)).collect();
    let mut state: Vec<u8> = (0..n)
        .map(|i| if nbrs(i).is_empty() { OUT } else { UNDECIDED })
        .collect();
    let max_over = |i: usize, f: &dyn Fn(usize) -> Key| {
        nbrs(i)
            .iter()
            .map(|&j| f(j as usize))
            .fold(f(i), |m, k| m.max(k))
    };
    while state.contains(&UNDECIDED) {
        let key = |i: usize| (state[i], w[i], i as u32);
        let t1: Vec<Key> = (0..n).into_par_iter().map(|i| max_over(i, &key)).collect();
        let t2: Vec<Key> = (0..n)
            .into_par_iter()
            .map(|i| max_over(i, &|j| t1[j]))
            .collect();
        state = (0..n)
            .into_par_iter()
            .map(|i| match state[i] {
                UNDECIDED if t2[i].2 as usize == i => IN,
                UNDECIDED if t2[i].0 == IN => OUT,
                s => s,
            })
            .collect();
    }
    let roots: Vec<u32> = (0..n as u32).filter(|&i| state[i as usize] == IN).collect();
    let mut agg = vec![NOT_AGGREGATED; n];
    for (k, &r) in roots.iter().enumerate() {
        agg[r as usize] = k as u32;
    }
    // Pass 1: join the best root neighbour.
    let pass1: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| {
            if agg[i] != NOT_AGGREGATED {
                return agg[i];
            }
            nbrs(i)
                .iter()
                .filter(|&&j| state[j as usize] == IN)
                .max_by_key(|&&j| (w[j as usize], j))
                .map_or(NOT_AGGREGATED, |&j| agg[j as usize])
        })
        .collect();
    // Pass 2: join the best neighbour assigned in pass 1.
    let agg: Vec<u32> = (0..n)
        .into_par_iter()
        .map(|i| {
            if pass1[i] != NOT_AGGREGATED {
                return pass1[i];
            }
            nbrs(i)
                .iter()
                .filter(|&&j| pass1[j as usize] != NOT_AGGREGATED)
                .max_by_key(|&&j| (w[j as usize], j))
                .map_or(NOT_AGGREGATED, |&j| pass1[j as usize])
        })
        .collect();
    Aggregation { agg, roots }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate;

    #[test]
    fn strength_drops_weak_entries() {
        // Anisotropic 1-D-ish: strong −1 couplings and weak −0.001 ones.
        let t = vec![
            (0, 0, 2.0),
            (0, 1, -1.0),
            (0, 2, -0.001),
            (1, 0, -1.0),
            (1, 1, 2.0),
            (2, 0, -0.001),
            (2, 2, 2.0),
        ];
        let a = CsrMatrix::<f64>::from_triplets(3, 3, &t).unwrap();
        let s = strength_symmetric(&a, 0.25).unwrap();
        assert_eq!(s.nnz(), 2);
        assert_eq!(s.col_idx(), &[1, 0]);
        let s0 = strength_symmetric(&a, 0.0).unwrap();
        assert_eq!(s0.nnz(), 4);
        assert!(strength_symmetric(&a, 1.5).is_err());
        let rect = CsrMatrix::<f64>::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
        assert!(strength_symmetric(&rect, 0.0)
            .unwrap_err()
            .to_string()
            .contains("2×3"));
    }

    /// Checks the MIS-2 properties: roots pairwise at distance > 2, every node with neighbours
    /// aggregated, each aggregate connected to its root within distance 2.
    fn check(a: &CsrMatrix<f64>, g: &Aggregation) {
        let (ptr, idx) = symmetric_graph(a);
        let n = a.nrows();
        let nb = |i: usize| &idx[ptr[i] as usize..ptr[i + 1] as usize];
        let is_root: Vec<bool> = {
            let mut r = vec![false; n];
            g.roots.iter().for_each(|&x| r[x as usize] = true);
            r
        };
        for &r in &g.roots {
            for &j in nb(r as usize) {
                assert!(!is_root[j as usize], "roots {r} and {j} adjacent");
                for &k in nb(j as usize) {
                    assert!(
                        k == r || !is_root[k as usize],
                        "roots {r}, {k} at distance 2"
                    );
                }
            }
        }
        for i in 0..n {
            if nb(i).is_empty() {
                assert_eq!(g.agg[i], NOT_AGGREGATED);
                continue;
            }
            let k = g.agg[i];
            assert_ne!(k, NOT_AGGREGATED, "node {i} with neighbours not aggregated");
            let r = g.roots[k as usize] as usize;
            let near = i == r
                || nb(i).contains(&(r as u32))
                || nb(i).iter().any(|&j| nb(j as usize).contains(&(r as u32)));
            assert!(near, "node {i} is farther than 2 from its root {r}");
        }
    }

    #[test]
    fn mis2_on_poisson_is_valid_and_deterministic() {
        let a = generate::poisson2d::<f64>(40).unwrap();
        let s = strength_symmetric(&a, 0.0).unwrap();
        let g = aggregate_mis2(&s, 7);
        check(&a, &g);
        // Aggregates of a 5-point grid by MIS-2 hold about 5–13 nodes: coarsening ratio check.
        let ratio = a.nrows() as f64 / g.num_aggregates() as f64;
        assert!((4.0..=14.0).contains(&ratio), "coarsening ratio {ratio}");
        assert_eq!(g, aggregate_mis2(&s, 7));
        // The result does not depend on the thread count.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(g, pool.install(|| aggregate_mis2(&s, 7)));
        assert_ne!(g, aggregate_mis2(&s, 8));
    }

    #[test]
    fn mis2_isolated_nodes_and_unsymmetric_patterns() {
        // Node 3 isolated; the pattern 0→1 stored one way only.
        let t = vec![
            (0, 0, 1.0),
            (0, 1, -1.0),
            (1, 1, 1.0),
            (1, 2, -1.0),
            (2, 1, -1.0),
            (2, 2, 1.0),
            (3, 3, 1.0),
        ];
        let a = CsrMatrix::<f64>::from_triplets(4, 4, &t).unwrap();
        let s = strength_symmetric(&a, 0.0).unwrap();
        let g = aggregate_mis2(&s, 1);
        check(&a, &g);
        assert_eq!(g.agg[3], NOT_AGGREGATED);
        assert_eq!(g.num_aggregates(), 1);
        let e = CsrMatrix::<f64>::from_triplets(0, 0, &[]).unwrap();
        assert_eq!(aggregate_mis2(&e, 0).num_aggregates(), 0);
    }
}
