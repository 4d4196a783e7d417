//! Orderings and row matchings for incomplete factorizations.
//!
//! - [`multicolor`]: a greedy colouring of the symmetrised pattern (`A + Aᵀ`), rows listed colour
//!   by colour. Rows of one colour never reference each other, so a triangular solve (and the
//!   factorization) of the reordered matrix has at most as many dependency levels as there are
//!   colours: the usual GPU remedy for factors whose natural order is a near chain.
//! - [`rcm`]: reverse Cuthill–McKee (bandwidth reduction), for comparison.
//! - [`max_transversal`]: a row permutation that puts a structural nonzero on every diagonal
//!   position (a maximum bipartite matching of rows to columns: a greedy pass that prefers each
//!   column's entries of largest magnitude relative to their row, then depth-first augmenting
//!   paths, Duff's MC21 idea). Rows left unmatched (a structurally singular matrix) are paired
//!   with the columns left over, and their diagonal entries must be inserted.
//! - [`permute`]: `B[i][j] = A[row_of[i]][col_of[j]]` with the position of each of `B`'s entries
//!   in `A` (`u32::MAX` for an inserted diagonal entry), so a re-factorization of new values of
//!   `A` gathers them without permuting again.
//!
//! A permutation here is a list `p` with `new position i ↔ old index p[i]`; [`inverse`] gives the
//! other direction.
//!
//! # References
//!
//! - I. S. Duff, *On algorithms for obtaining a maximum transversal*, ACM TOMS 7(3), 1981.
//! - E. Cuthill and J. McKee, *Reducing the bandwidth of sparse symmetric matrices*, 1969.
//! - Y. Saad, *Iterative Methods for Sparse Linear Systems*, 2nd ed., §3.3 (multicolouring).

use crate::csr::CsrMatrix;
use crate::error::Result;
use crate::scalar::{Elem, Scalar};

/// Marks an entry of a permuted matrix that is not in `A` (an inserted diagonal entry).
pub const INSERTED: u32 = u32::MAX;

/// The entries `values[p]` for the positions `p` of `src`, zero where `p` is [`INSERTED`].
pub fn gather<T: Copy + num_traits::Zero>(values: &[T], src: &[u32]) -> Vec<T> {
    src.iter()
        .map(|&p| {
            if p == INSERTED {
                T::zero()
            } else {
                values[p as usize]
            }
        })
        .collect()
}

/// The inverse of a permutation (`inv[p[i]] = i`).
pub fn inverse(p: &[u32]) -> Vec<u32> {
    let mut inv = vec![0u32; p.len()];
    for (i, &pi) in p.iter().enumerate() {
        inv[pi as usize] = i as u32;
    }
    inv
}

/// Whether `p` is a permutation of `0..p.len()`.
pub fn is_permutation(p: &[u32]) -> bool {
    let mut seen = vec![false; p.len()];
    p.iter().all(|&i| {
        let i = i as usize;
        i < seen.len() && !std::mem::replace(&mut seen[i], true)
    })
}

/// The pattern of `A + Aᵀ` without the diagonal, as adjacency lists (sorted, unique).
fn symmetric_graph<T: Elem>(a: &CsrMatrix<T>) -> (Vec<u32>, Vec<u32>) {
    let n = a.nrows();
    let (rp, cj) = (a.row_ptr(), a.col_idx());
    let mut deg = vec![0u32; n + 1];
    for i in 0..n {
        for &c in &cj[rp[i] as usize..rp[i + 1] as usize] {
            let c = c as usize;
            if c != i && c < n {
                deg[i + 1] += 1;
                deg[c + 1] += 1;
            }
        }
    }
    for i in 0..n {
        deg[i + 1] += deg[i];
    }
    let mut next = deg.clone();
    let mut adj = vec![0u32; deg[n] as usize];
    for i in 0..n {
        for &c in &cj[rp[i] as usize..rp[i + 1] as usize] {
            let c = c as usize;
            if c != i && c < n {
                adj[next[i] as usize] = c as u32;
                next[i] += 1;
                adj[next[c] as usize] = i as u32;
                next[c] += 1;
            }
        }
    }
    // Sort and deduplicate each list (compacting).
    let mut ptr = vec![0u32; n + 1];
    let mut out = Vec::with_capacity(adj.len());
    for i in 0..n {
        let l = &mut adj[deg[i] as usize..deg[i + 1] as usize];
        l.sort_unstable();
        let mut last = u32::MAX;
        for &c in l.iter() {
            if c != last {
                out.push(c);
                last = c;
            }
        }
        ptr[i + 1] = out.len() as u32;
    }
    (ptr, out)
}

/// A multicolour ordering of a square matrix: `(order, colours)`, where `order` lists the rows
/// colour by colour (rows of one colour in ascending index) and `colours` is the number of
/// colours. Greedy first-fit colouring of `A + Aᵀ` in natural order, `O(nnz)`.
pub fn multicolor<T: Elem>(a: &CsrMatrix<T>) -> (Vec<u32>, usize) {
    let n = a.nrows();
    let (ptr, adj) = symmetric_graph(a);
    let mut color = vec![u32::MAX; n];
    // mark[c] == i: colour c is taken by a neighbour of row i.
    let mut mark: Vec<u32> = Vec::new();
    let mut ncolors = 0u32;
    for i in 0..n {
        for &j in &adj[ptr[i] as usize..ptr[i + 1] as usize] {
            let c = color[j as usize];
            if c != u32::MAX {
                mark[c as usize] = i as u32;
            }
        }
        let c = (0..ncolors)
            .find(|&c| mark[c as usize] != i as u32)
            .unwrap_or(ncolors);
        if c == ncolors {
            ncolors += 1;
            mark.push(u32::MAX);
        }
        color[i] = c;
    }
    // Counting sort by colour (stable).
    let mut cptr = vec![0u32; ncolors as usize + 1];
    for &c in &color {
        cptr[c as usize + 1] += 1;
    }
    for c in 0..ncolors as usize {
        cptr[c + 1] += cptr[c];
    }
    let mut order = vec![0u32; n];
    for (i, &c) in color.iter().enumerate() {
        order[cptr[c as usize] as usize] = i as u32;
        cptr[c as usize] += 1;
    }
    (order, ncolors as usize)
}

/// Reverse Cuthill–McKee ordering of the symmetrised pattern (each connected component from a
/// pseudo-peripheral row of minimum degree, neighbours by ascending degree).
pub fn rcm<T: Elem>(a: &CsrMatrix<T>) -> Vec<u32> {
    let n = a.nrows();
    let (ptr, adj) = symmetric_graph(a);
    let deg = |i: usize| ptr[i + 1] - ptr[i];
    let mut visited = vec![false; n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    // BFS from `s`, returning the last level's minimum-degree row (pseudo-peripheral search).
    let bfs_far = |s: usize, seen: &mut Vec<u32>, stamp: u32| -> (usize, usize) {
        let mut frontier = vec![s];
        seen[s] = stamp;
        let mut depth = 0;
        loop {
            let mut next = Vec::new();
            for &u in &frontier {
                for &v in &adj[ptr[u] as usize..ptr[u + 1] as usize] {
                    if seen[v as usize] != stamp {
                        seen[v as usize] = stamp;
                        next.push(v as usize);
                    }
                }
            }
            if next.is_empty() {
                let far = *frontier.iter().min_by_key(|&&u| (deg(u), u)).unwrap_or(&s);
                return (far, depth);
            }
            depth += 1;
            frontier = next;
        }
    };
    let mut seen = vec![0u32; n];
    let mut stamp = 0u32;
    for root in 0..n {
        if visited[root] {
            continue;
        }
        // A few sweeps towards a pseudo-peripheral start.
        let mut s = root;
        let mut depth = 0;
        for _ in 0..4 {
            stamp += 1;
            let (far, d) = bfs_far(s, &mut seen, stamp);
            if d <= depth && s != root {
                break;
            }
            depth = d;
            s = far;
        }
        let begin = order.len();
        visited[s] = true;
        order.push(s as u32);
        let mut head = begin;
        let mut nb: Vec<u32> = Vec::new();
        while head < order.len() {
            let u = order[head] as usize;
            head += 1;
            nb.clear();
            nb.extend(
                adj[ptr[u] as usize..ptr[u + 1] as usize]
                    .iter()
                    .copied()
                    .filter(|&v| !visited[v as usize]),
            );
            nb.sort_by_key(|&v| (deg(v as usize), v));
            for &v in &nb {
                visited[v as usize] = true;
                order.push(v);
            }
        }
    }
    order.reverse();
    order
}

/// The result of [`max_transversal`].
#[derive(Clone, Debug)]
pub struct Matching {
    /// `row_of[j]`: the row of `A` placed at row `j`, so `A[row_of[j]][j]` is the new diagonal.
    pub row_of: Vec<u32>,
    /// Columns with no structurally nonzero entry available (a structurally singular matrix):
    /// their diagonal entry must be inserted.
    pub unmatched: usize,
}

/// An unmatched row or column of a matching under construction.
const FREE: u32 = u32::MAX;

/// Pairs the columns a matching left free with the rows it left free, in increasing order, so
/// that `row_of` is a permutation (the structurally singular part gets arbitrary rows).
fn pair_leftovers(row_of: &mut [u32], col_of_row: &[u32]) {
    let free_rows = (0..col_of_row.len() as u32).filter(|&i| col_of_row[i as usize] == FREE);
    let free_cols: Vec<usize> = (0..row_of.len()).filter(|&j| row_of[j] == FREE).collect();
    for (j, i) in free_cols.into_iter().zip(free_rows) {
        row_of[j] = i;
    }
}

/// A maximum transversal: a row permutation putting a structurally nonzero entry of `A`
/// (square, any order of indices) on as many diagonal positions as possible, all of them when
/// `A` is structurally nonsingular. Explicitly stored zeros are not used. Among the entries of a
/// column, the greedy pass prefers the one largest relative to its row's largest magnitude, so
/// well-scaled diagonals result on diagonally dominant rows; augmenting paths then complete the
/// matching (`O(n·nnz)` worst case, near-linear in practice).
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when `A` is not square.
pub fn max_transversal<T: Elem>(a: &CsrMatrix<T>) -> Result<Matching> {
    let n = a.square_rows("row matching")?;
    let (rp, cj, av) = (a.row_ptr(), a.col_idx(), a.values());
    let rowmax: Vec<f64> = (0..n)
        .map(|i| {
            av[rp[i] as usize..rp[i + 1] as usize]
                .iter()
                .fold(0.0f64, |m, v| m.max(v.modulus().as_f64()))
        })
        .collect();
    // Column lists (CSC of the nonzero pattern) with the relative magnitude, best first.
    let mut cptr = vec![0u32; n + 1];
    for (k, &c) in cj.iter().enumerate() {
        if av[k] != T::zero() {
            cptr[c as usize + 1] += 1;
        }
    }
    for j in 0..n {
        cptr[j + 1] += cptr[j];
    }
    let mut next = cptr.clone();
    let mut crow = vec![(0u32, 0.0f64); cptr[n] as usize];
    for i in 0..n {
        for k in rp[i] as usize..rp[i + 1] as usize {
            if av[k] != T::zero() {
                let c = cj[k] as usize;
                let w = if rowmax[i] > 0.0 {
                    av[k].modulus().as_f64() / rowmax[i]
                } else {
                    0.0
                };
                crow[next[c] as usize] = (i as u32, w);
                next[c] += 1;
            }
        }
    }
    for j in 0..n {
        crow[cptr[j] as usize..cptr[j + 1] as usize]
            .sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    }
    let mut col_of_row = vec![FREE; n];
    let mut row_of = vec![FREE; n];
    // Greedy: each column takes its best free row.
    for j in 0..n {
        for &(i, _) in &crow[cptr[j] as usize..cptr[j + 1] as usize] {
            if col_of_row[i as usize] == FREE {
                col_of_row[i as usize] = j as u32;
                row_of[j] = i;
                break;
            }
        }
    }
    // Augmenting paths (iterative DFS) for the columns left free.
    let mut visited = vec![u32::MAX; n];
    let mut stack: Vec<(u32, u32)> = Vec::new(); // (column, next index into its list)
    let mut unmatched = 0;
    for j0 in 0..n {
        if row_of[j0] != FREE {
            continue;
        }
        stack.clear();
        stack.push((j0 as u32, cptr[j0]));
        let mut found: Option<u32> = None;
        while let Some(&mut (j, ref mut k)) = stack.last_mut() {
            let end = cptr[j as usize + 1];
            if *k >= end {
                stack.pop();
                continue;
            }
            let i = crow[*k as usize].0;
            *k += 1;
            if visited[i as usize] == j0 as u32 {
                continue;
            }
            visited[i as usize] = j0 as u32;
            let owner = col_of_row[i as usize];
            if owner == FREE {
                found = Some(i);
                break;
            }
            stack.push((owner, cptr[owner as usize]));
        }
        match found {
            Some(mut i) => {
                // Flip the path: each column on the stack takes the row its search stepped to.
                while let Some((j, k)) = stack.pop() {
                    let step = crow[k as usize - 1].0;
                    debug_assert!(step == i || col_of_row[step as usize] != FREE);
                    let prev = row_of[j as usize];
                    row_of[j as usize] = i;
                    col_of_row[i as usize] = j;
                    i = prev;
                    if i == FREE {
                        break;
                    }
                }
            }
            None => unmatched += 1,
        }
    }
    pair_leftovers(&mut row_of, &col_of_row);
    Ok(Matching { row_of, unmatched })
}

/// The result of [`max_product_matching`].
#[derive(Clone, Debug)]
pub struct WeightedMatching {
    /// `row_of[j]`: the row of `A` placed at row `j` (as [`Matching::row_of`]).
    pub row_of: Vec<u32>,
    /// Columns left without a structurally nonzero entry (a structurally singular matrix):
    /// paired with leftover rows, their diagonal entry must be inserted.
    pub unmatched: usize,
    /// Row scaling `r` and column scaling `c` (MC64's): every entry of `diag(r)·A·diag(c)` has
    /// magnitude at most 1 (up to rounding) and the matched entries have magnitude 1, on the
    /// matched columns. Ones for unmatched rows and columns.
    pub row_scale: Vec<f64>,
    /// See [`row_scale`](Self::row_scale).
    pub col_scale: Vec<f64>,
}

/// A maximum-product transversal (MC64's job 5, Duff and Koster 2001): the row permutation that
/// maximises the product of the diagonal magnitudes `∏ |A[row_of[j]][j]|` among those that put a
/// structural nonzero on every diagonal position, with the scaling of its dual solution.
/// Explicitly stored zeros are not used. A structurally singular `A` gets a maximum matching
/// (as many nonzero diagonal positions as possible), whose product is not necessarily the
/// largest among such matchings.
///
/// With `c_ij = log max_k |a_kj| − log |a_ij|` this is a minimum-cost perfect bipartite matching,
/// solved by successive shortest augmenting paths (Dijkstra on reduced costs `c_ij − u_i − v_j ≥ 0`,
/// one search per column left free by a greedy start on zero reduced costs). The duals give the
/// scaling `r_i = exp(u_i)`, `c_j = exp(v_j) / max_k |a_kj|`.
///
/// Where [`max_transversal`] only guarantees nonzeros, this puts large entries on the diagonal,
/// which is what ILU(0) of a matrix without a usable diagonal needs (its pivots are the diagonal
/// after elimination). The scaling itself does not change ILU(0) or the Krylov iterations (ILU(0)
/// of `D₁·A·D₂` is `(D₁LD₁⁻¹)(D₁UD₂)`); it is returned for other uses.
///
/// # Errors
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when `A` is not square.
pub fn max_product_matching<T: Elem>(a: &CsrMatrix<T>) -> Result<WeightedMatching> {
    Ok(max_product_search(a)?.0)
}

/// [`max_product_matching`], with the rows its searches finalized in all (the work the `lsap`
/// bound keeps near linear).
fn max_product_search<T: Elem>(a: &CsrMatrix<T>) -> Result<(WeightedMatching, usize)> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = a.square_rows("row matching")?;
    let (rp, cj, av) = (a.row_ptr(), a.col_idx(), a.values());
    // Column lists of the nonzero entries with log|a_ij|.
    let mut cptr = vec![0usize; n + 1];
    for (k, &c) in cj.iter().enumerate() {
        if av[k] != T::zero() && av[k].finite() {
            cptr[c as usize + 1] += 1;
        }
    }
    for j in 0..n {
        cptr[j + 1] += cptr[j];
    }
    let mut next = cptr.clone();
    let mut crow = vec![0u32; cptr[n]];
    let mut cost = vec![0.0f64; cptr[n]];
    for i in 0..n {
        for k in rp[i] as usize..rp[i + 1] as usize {
            if av[k] != T::zero() && av[k].finite() {
                let c = cj[k] as usize;
                crow[next[c]] = i as u32;
                cost[next[c]] = av[k].modulus().as_f64().ln();
                next[c] += 1;
            }
        }
    }
    // c_ij = log colmax_j − log|a_ij| ≥ 0, zero at each column's largest entry.
    let mut colmax = vec![f64::NEG_INFINITY; n];
    for j in 0..n {
        let r = cptr[j]..cptr[j + 1];
        let m = cost[r.clone()]
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        colmax[j] = m;
        for c in &mut cost[r] {
            *c = m - *c;
        }
    }
    let inf = f64::INFINITY;
    // Duals: v_j = 0 (the column minimum), u_i = the row minimum of c_ij − v_j.
    let mut v = vec![0.0f64; n];
    let mut u = vec![inf; n];
    for j in 0..n {
        for k in cptr[j]..cptr[j + 1] {
            let i = crow[k] as usize;
            u[i] = u[i].min(cost[k]);
        }
    }
    for ui in &mut u {
        if !ui.is_finite() {
            *ui = 0.0;
        }
    }
    let reduced = |k: usize, i: usize, j: usize, u: &[f64], v: &[f64]| -> f64 {
        (cost[k] - u[i] - v[j]).max(0.0)
    };
    let mut row_of = vec![FREE; n];
    let mut col_of_row = vec![FREE; n];
    // Greedy start on tight edges.
    for j in 0..n {
        for (k, &i) in crow.iter().enumerate().take(cptr[j + 1]).skip(cptr[j]) {
            let i = i as usize;
            if col_of_row[i] == FREE && reduced(k, i, j, &u, &v) <= 1e-12 {
                col_of_row[i] = j as u32;
                row_of[j] = i as u32;
                break;
            }
        }
    }
    // Shortest augmenting paths.
    // The search from one column: tentative distances of the rows, the column each row was
    // reached from, the rows reached (to reset), the queue, and the shortest path to a free row
    // found so far (MC64's `lsap`): free rows end a path and never enter the heap, nothing at or
    // beyond its length is pushed, and the search stops once the heap holds nothing shorter.
    // Without it, every row at a distance equal to the path's (a plateau of tight edges, common
    // once the duals have moved) is finalized before the free row is popped: on a saddle point
    // each search then covered about half the matrix (O(n²) in all).
    struct Search {
        dist: Vec<f64>,
        pred: Vec<u32>,
        touched: Vec<usize>,
        heap: BinaryHeap<Reverse<(u64, u32)>>,
        found: Option<(usize, f64)>,
    }
    let mut sp = Search {
        dist: vec![inf; n],
        pred: vec![FREE; n],
        touched: Vec::new(),
        heap: BinaryHeap::new(),
        found: None,
    };
    let mut done = vec![false; n];
    let mut finalized: Vec<usize> = Vec::new();
    // Non-negative f64 keys order like their bit patterns.
    let key = |d: f64| d.to_bits();
    let mut unmatched = 0;
    let mut work = 0;
    for j0 in 0..n {
        if row_of[j0] != FREE {
            continue;
        }
        sp.heap.clear();
        sp.found = None;
        let relax = |j: usize,
                     base: f64,
                     sp: &mut Search,
                     done: &[bool],
                     matched: &[u32],
                     u: &[f64],
                     v: &[f64]| {
            for (k, &i) in crow.iter().enumerate().take(cptr[j + 1]).skip(cptr[j]) {
                let i = i as usize;
                if done[i] {
                    continue;
                }
                let d = base + reduced(k, i, j, u, v);
                if sp.found.is_some_and(|(_, l)| d >= l) || d >= sp.dist[i] {
                    continue;
                }
                if sp.dist[i] == inf {
                    sp.touched.push(i);
                }
                sp.dist[i] = d;
                sp.pred[i] = j as u32;
                if matched[i] == FREE {
                    sp.found = Some((i, d));
                } else {
                    sp.heap.push(Reverse((key(d), i as u32)));
                }
            }
        };
        relax(j0, 0.0, &mut sp, &done, &col_of_row, &u, &v);
        while let Some(Reverse((kd, i))) = sp.heap.pop() {
            let i = i as usize;
            if done[i] || kd != key(sp.dist[i]) {
                continue;
            }
            let d = sp.dist[i];
            if sp.found.is_some_and(|(_, l)| d >= l) {
                break;
            }
            done[i] = true;
            finalized.push(i);
            let j = col_of_row[i] as usize;
            relax(j, d, &mut sp, &done, &col_of_row, &u, &v);
        }
        match sp.found {
            Some((iend, lsp)) => {
                // Potentials: rows and columns reached closer than the path move by their
                // distance minus its length (reduced costs stay ≥ 0, the path becomes tight).
                v[j0] += lsp;
                for &i in &finalized {
                    let delta = lsp - sp.dist[i];
                    u[i] -= delta;
                    v[col_of_row[i] as usize] += delta;
                }
                // Flip the path.
                let mut i = iend;
                loop {
                    let j = sp.pred[i] as usize;
                    let prev = row_of[j];
                    row_of[j] = i as u32;
                    col_of_row[i] = j as u32;
                    if j == j0 {
                        break;
                    }
                    i = prev as usize;
                }
            }
            None => unmatched += 1,
        }
        work += finalized.len();
        for &i in &sp.touched {
            sp.dist[i] = inf;
            sp.pred[i] = FREE;
        }
        for &i in &finalized {
            done[i] = false;
        }
        sp.touched.clear();
        finalized.clear();
    }
    // Scaling from the duals on the matched part.
    let mut row_scale = vec![1.0f64; n];
    let mut col_scale = vec![1.0f64; n];
    for j in 0..n {
        let i = row_of[j];
        if i != FREE && colmax[j].is_finite() {
            row_scale[i as usize] = u[i as usize].exp();
            col_scale[j] = (v[j] - colmax[j]).exp();
        }
    }
    pair_leftovers(&mut row_of, &col_of_row);
    Ok((
        WeightedMatching {
            row_of,
            unmatched,
            row_scale,
            col_scale,
        },
        work,
    ))
}

/// `B[i][j] = A[row_of[i]][col_of[j]]` (`A` with sorted, unique column indices), canonical, and
/// for each of `B`'s entries its position in `A` ([`INSERTED`] for a diagonal entry added where
/// `B` has none, with value zero, when `insert_diagonal` is set).
pub fn permute<T: Elem>(
    a: &CsrMatrix<T>,
    row_of: &[u32],
    col_of: &[u32],
    insert_diagonal: bool,
) -> Result<(CsrMatrix<T>, Vec<u32>)> {
    let n = a.nrows();
    let col_new = inverse(col_of);
    let (rp, cj, av) = (a.row_ptr(), a.col_idx(), a.values());
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0u32);
    let mut col_idx = Vec::with_capacity(a.nnz() + n);
    let mut src = Vec::with_capacity(a.nnz() + n);
    let mut row: Vec<(u32, u32)> = Vec::new();
    for (i, &r) in row_of.iter().enumerate() {
        let r = r as usize;
        row.clear();
        row.extend((rp[r]..rp[r + 1]).map(|p| (col_new[cj[p as usize] as usize], p)));
        if insert_diagonal && !row.iter().any(|&(c, _)| c as usize == i) {
            row.push((i as u32, INSERTED));
        }
        row.sort_unstable();
        for &(c, p) in &row {
            col_idx.push(c);
            src.push(p);
        }
        row_ptr.push(col_idx.len() as u32);
    }
    let values = gather(av, &src);
    let b = CsrMatrix::try_from_parts(n, a.ncols(), row_ptr, col_idx, values)?;
    Ok((b, src))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, per_row: usize, seed: u64, diag: bool) -> CsrMatrix<f64> {
        let mut s = seed;
        let mut rnd = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as usize
        };
        let mut t = Vec::new();
        for i in 0..n {
            for _ in 0..per_row {
                let j = rnd() % n;
                if j != i || diag {
                    t.push((i, j, 1.0 + (rnd() % 7) as f64));
                }
            }
            if diag {
                t.push((i, i, 4.0));
            }
        }
        let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        a.sort_indices();
        a
    }

    #[test]
    fn multicolor_classes_are_independent() {
        let a = random(300, 5, 7, true);
        let (order, colors) = multicolor(&a);
        assert!(is_permutation(&order));
        let pos = inverse(&order);
        let (b, src) = permute(&a, &order, &order, false).unwrap();
        assert_eq!(src.len(), a.nnz());
        // The lower triangle of B has at most `colors` levels.
        let plan = crate::sparse::triangular::TriangularPlan::analyse(
            &b,
            crate::sparse::triangular::Triangle::Lower,
            crate::sparse::triangular::Diagonal::Unit,
        )
        .unwrap();
        assert!(plan.levels() <= colors, "{} > {}", plan.levels(), colors);
        // Entries land where the permutation says.
        for i in 0..b.nrows() {
            let (c, v) = b.row(i);
            for (&cj, &vj) in c.iter().zip(v) {
                let (oi, oj) = (order[i] as usize, order[cj as usize] as usize);
                let (ac, avv) = a.row(oi);
                let k = ac.iter().position(|&x| x as usize == oj).unwrap();
                assert_eq!(avv[k], vj);
                assert_eq!(pos[oj] as usize, cj as usize);
            }
        }
    }

    #[test]
    fn rcm_is_a_permutation_and_inverse_roundtrips() {
        let a = random(257, 3, 11, true);
        let p = rcm(&a);
        assert!(is_permutation(&p));
        let inv = inverse(&p);
        for (i, &pi) in p.iter().enumerate() {
            assert_eq!(inv[pi as usize] as usize, i);
        }
        assert!(!is_permutation(&[0, 0, 1]));
    }

    #[test]
    fn transversal_fills_the_diagonal() {
        // No diagonal at all, random pattern plus a hidden permutation so it is nonsingular.
        for seed in 0..5 {
            let n = 200;
            let mut t = Vec::new();
            let base = random(n, 3, seed, false);
            for i in 0..n {
                let (c, v) = base.row(i);
                for (&cj, &vj) in c.iter().zip(v) {
                    t.push((i, cj as usize, vj));
                }
                t.push((i, (i * 7 + 3) % n, 2.0));
            }
            let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
            a.sort_indices();
            let m = max_transversal(&a).unwrap();
            assert_eq!(m.unmatched, 0);
            assert!(is_permutation(&m.row_of));
            let id: Vec<u32> = (0..n as u32).collect();
            let (b, _) = permute(&a, &m.row_of, &id, false).unwrap();
            for i in 0..n {
                let (c, v) = b.row(i);
                let k = c.iter().position(|&x| x as usize == i).expect("diagonal");
                assert!(v[k] != 0.0);
            }
        }
        // Structurally singular: an empty column; one inserted diagonal.
        let a = CsrMatrix::from_triplets(3, 3, &[(0, 1, 1.0), (1, 0, 1.0), (2, 0, 1.0)]).unwrap();
        let m = max_transversal(&a).unwrap();
        assert_eq!(m.unmatched, 1);
        assert!(is_permutation(&m.row_of));
        let id = [0u32, 1, 2];
        let (b, src) = permute(&a, &m.row_of, &id, true).unwrap();
        assert_eq!(src.iter().filter(|&&p| p == INSERTED).count(), 1);
        assert_eq!(b.nnz(), 4);
    }

    /// Every permutation of 0..n (Heap's algorithm), for brute force.
    fn permutations(n: usize) -> Vec<Vec<u32>> {
        fn go(k: usize, p: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
            if k <= 1 {
                out.push(p.clone());
                return;
            }
            for i in 0..k {
                go(k - 1, p, out);
                let j = if k % 2 == 0 { i } else { 0 };
                p.swap(j, k - 1);
            }
        }
        let mut out = Vec::new();
        go(n, &mut (0..n as u32).collect(), &mut out);
        out
    }

    #[test]
    fn max_product_matching_is_optimal_and_scales_to_one() {
        // Random sparse 7×7 matrices with entries spread over many magnitudes, some without
        // a full diagonal: the matching's diagonal product equals the brute-force maximum over
        // all 5040 permutations, and the scaled matrix is bounded by 1 with ones on the matching.
        let perms = permutations(7);
        let mut s = 12345u64;
        let mut rnd = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        for case in 0..60 {
            let n = 7;
            let mut t = Vec::new();
            for i in 0..n {
                for j in 0..n {
                    if rnd() < 0.45 || j == (i + case) % n {
                        let sign = if rnd() < 0.5 { -1.0 } else { 1.0 };
                        t.push((i, j, sign * 10f64.powf(6.0 * rnd() - 3.0)));
                    }
                }
            }
            let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
            let dense = |i: usize, j: usize| -> f64 {
                let (c, v) = a.row(i);
                c.iter()
                    .position(|&x| x as usize == j)
                    .map_or(0.0, |k| v[k].abs())
            };
            let product =
                |row_of: &[u32]| -> f64 { (0..n).map(|j| dense(row_of[j] as usize, j).ln()).sum() };
            let best = perms
                .iter()
                .map(|p| product(p))
                .fold(f64::NEG_INFINITY, f64::max);
            let m = max_product_matching(&a).unwrap();
            assert_eq!(m.unmatched, 0, "case {case}");
            assert!(is_permutation(&m.row_of));
            let got = product(&m.row_of);
            assert!(
                (got - best).abs() <= 1e-9 * best.abs().max(1.0),
                "case {case}: {got} vs {best}"
            );
            for i in 0..n {
                let (c, v) = a.row(i);
                for (&j, &x) in c.iter().zip(v) {
                    let y = (x * m.row_scale[i] * m.col_scale[j as usize]).abs();
                    assert!(y <= 1.0 + 1e-9, "case {case}: scaled ({i}, {j}) = {y}");
                }
            }
            for j in 0..n {
                let i = m.row_of[j] as usize;
                let y = dense(i, j) * m.row_scale[i] * m.col_scale[j];
                assert!(
                    (y - 1.0).abs() <= 1e-9,
                    "case {case}: matched ({i}, {j}) = {y}"
                );
            }
        }
        // Structurally singular: as many as possible, the rest paired.
        let a = CsrMatrix::from_triplets(3, 3, &[(0, 1, 1.0), (1, 0, 1.0), (2, 0, 5.0)]).unwrap();
        let m = max_product_matching(&a).unwrap();
        assert_eq!(m.unmatched, 1);
        assert!(is_permutation(&m.row_of));
        // Columns 0 and 1 keep a structural nonzero (rows 1 or 2, and 0).
        assert_eq!(m.row_of[1], 0);
        assert!(m.row_of[0] == 1 || m.row_of[0] == 2);
        assert!(max_product_matching(&CsrMatrix::<f64>::zeros(2, 3)).is_err());
    }

    #[test]
    fn max_product_matching_of_a_saddle_point_is_optimal_in_near_linear_work() {
        // A Stokes matrix: the greedy start leaves every pressure column free, and the
        // searches meet plateaus of tight edges (every row at distance 0). They stop at the
        // shortest path to a free row (MC64's bound): 210 000 rows finalized in all here (45
        // per row), where popping the free row first finalized 3.6 million (760 per row).
        // Optimal: the scaled matrix is bounded by 1 with ones on the matching (the duals
        // certify it).
        let a = crate::generate::stokes2d::<f64>(40, 1.0).unwrap();
        let n = a.nrows();
        let (m, work) = max_product_search(&a).unwrap();
        assert_eq!(m.unmatched, 0);
        assert!(is_permutation(&m.row_of));
        assert!(work <= 100 * n, "{work} rows finalized for {n} rows");
        let mut matched = vec![false; n];
        for (j, &i) in m.row_of.iter().enumerate() {
            let (c, v) = a.row(i as usize);
            let k = c
                .iter()
                .position(|&x| x as usize == j)
                .expect("a structural nonzero");
            let y = (v[k] * m.row_scale[i as usize] * m.col_scale[j]).abs();
            assert!((y - 1.0).abs() <= 1e-9, "matched ({i}, {j}) = {y}");
            matched[i as usize] = true;
        }
        assert!(matched.iter().all(|&x| x));
        for i in 0..n {
            let (c, v) = a.row(i);
            for (&j, &x) in c.iter().zip(v) {
                let y = (x * m.row_scale[i] * m.col_scale[j as usize]).abs();
                assert!(y <= 1.0 + 1e-9, "scaled ({i}, {j}) = {y}");
            }
        }
    }
}
