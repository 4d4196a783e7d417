//! Generated systems of kinds the automatic solve must recognise: convection–diffusion, saddle
//! points, graph Laplacians, circuits, anisotropic diffusion and shifted (indefinite) operators.
//! See the table in the [parent module](super) for the specs.

use rand::Rng;
use rayon::prelude::*;

use super::{build, check_rows, chunk_rng, random_draws, splitmix64, too_big, CHUNK_ROWS};
use crate::error::{Error, Result};
use crate::{CsrMatrix, Scalar};

fn bad(msg: String) -> Error {
    Error::InvalidInput(msg)
}

/// A uniform number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The 7-point (3-D) or 5-point (2-D) stencil on an `n^d` grid with per-axis weights: row
/// `diag` on the diagonal, `lo[k]` towards the lower neighbour along axis `k` and `hi[k]`
/// towards the upper one (natural ordering, x fastest; missing neighbours dropped).
fn stencil<T: Scalar>(
    d: usize,
    n: usize,
    diag: f64,
    lo: [f64; 3],
    hi: [f64; 3],
) -> Result<CsrMatrix<T>> {
    let rows = check_rows((n as u128).pow(d as u32))?;
    let stride = [1, n, n * n];
    let at = move |r: usize| [r % n, (r / n) % n, if d == 3 { r / (n * n) } else { 0 }];
    let len = move |r: usize| {
        let p = at(r);
        1 + (0..d)
            .map(|k| (p[k] > 0) as usize + (p[k] + 1 < n) as usize)
            .sum::<usize>()
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (kk, r) in range.enumerate() {
            let p = at(r);
            let mut q = rp[kk] as usize;
            let mut put = |c: usize, v: f64| {
                cols[q] = c as u32;
                vals[q] = T::of_f64(v);
                q += 1;
            };
            for k in (0..d).rev() {
                if p[k] > 0 {
                    put(r - stride[k], lo[k]);
                }
            }
            put(r, diag);
            for k in 0..d {
                if p[k] + 1 < n {
                    put(r + stride[k], hi[k]);
                }
            }
        }
    })
}

/// Convection–diffusion `−Δu + Pe·w·∇u` on the unit square (`d = 2`) or cube (`d = 3`) with an
/// `n^d` interior grid (`h = 1/(n+1)`, Dirichlet boundaries), the diffusion by central and the
/// convection by first-order upwind differences, scaled by `h²`. The wind is the constant unit
/// vector `w = (2, 1)/√5` or `(3, 2, 1)/√14`, so `pe` is the global Péclet number (the cell
/// Péclet number is `pe·h`). Row: `2d + pe·h·Σ|w_k|` on the diagonal, `−1 − pe·h·w_k` towards
/// the upwind neighbour along axis `k`, −1 towards the downwind one. Unsymmetric for `pe > 0`,
/// an M-matrix, weakly diagonally dominant (strictly on boundary rows): the kind where plain
/// BiCGSTAB does well.
///
/// # Errors
/// [`Error::InvalidInput`] when `d` is not 2 or 3, `pe` is negative or not finite, or the size
/// exceeds `u32`.
pub fn convdiff<T: Scalar>(d: usize, n: usize, pe: f64) -> Result<CsrMatrix<T>> {
    if d != 2 && d != 3 {
        return Err(bad(format!("convdiff: {d} dimensions (2 or 3)")));
    }
    if !(pe.is_finite() && pe >= 0.0) {
        return Err(bad(format!(
            "convdiff: the Péclet number {pe} must be non-negative and finite"
        )));
    }
    let w: [f64; 3] = if d == 2 {
        let s = 5f64.sqrt();
        [2.0 / s, 1.0 / s, 0.0]
    } else {
        let s = 14f64.sqrt();
        [3.0 / s, 2.0 / s, 1.0 / s]
    };
    let h = 1.0 / (n as f64 + 1.0);
    let c = pe * h;
    let diag = 2.0 * d as f64 + c * w.iter().map(|v| v.abs()).sum::<f64>();
    let mut lo = [-1.0; 3];
    let mut hi = [-1.0; 3];
    for k in 0..d {
        if w[k] >= 0.0 {
            lo[k] -= c * w[k];
        } else {
            hi[k] += c * w[k];
        }
    }
    stencil(d, n, diag, lo, hi)
}

/// Anisotropic diffusion `−u_xx − eps_y·u_yy − eps_z·u_zz` on an `n × n × n` grid, 7-point
/// finite differences scaled by `h²`, Dirichlet boundaries: `2(1 + eps_y + eps_z)` on the
/// diagonal, −1 towards x-neighbours, `−eps_y` and `−eps_z` towards y- and z-neighbours. With
/// small `eps` the couplings along x are strong (line anisotropy for `eps_y = eps_z`). Symmetric
/// positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when an `eps` is not positive and finite or the size exceeds `u32`.
pub fn aniso3d<T: Scalar>(n: usize, eps_y: f64, eps_z: f64) -> Result<CsrMatrix<T>> {
    for e in [eps_y, eps_z] {
        if !(e.is_finite() && e > 0.0) {
            return Err(bad(format!(
                "aniso3d: EPS = {e} must be positive and finite"
            )));
        }
    }
    let off = [-1.0, -eps_y, -eps_z];
    stencil(3, n, 2.0 * (1.0 + eps_y + eps_z), off, off)
}

/// The shifted Laplacian `L − σI` on an `n^d` grid (`d` = 2: 5-point, `d` = 3: 7-point, the
/// unscaled stencils of `poisson2d`/`poisson3d`): `2d − σ` on the diagonal, −1 for each
/// neighbour. The eigenvalues of `L` lie in (0, 4d), so for `σ` between the smallest and the
/// largest the matrix is symmetric indefinite (the real Helmholtz operator `−Δ − k²` scaled by
/// `h²` with `σ = (kh)²`; singular only when `σ` hits an eigenvalue).
///
/// # Errors
/// [`Error::InvalidInput`] when `d` is not 2 or 3, `σ` is not finite, or the size exceeds `u32`.
pub fn shifted<T: Scalar>(d: usize, n: usize, sigma: f64) -> Result<CsrMatrix<T>> {
    if d != 2 && d != 3 {
        return Err(bad(format!("shifted: {d} dimensions (2 or 3)")));
    }
    if !sigma.is_finite() {
        return Err(bad(format!("shifted: SIGMA = {sigma} is not finite")));
    }
    stencil(d, n, 2.0 * d as f64 - sigma, [-1.0; 3], [-1.0; 3])
}

/// Merges the 2 × 2 block matrix `[[K, Bᵀ], [B, 0]]` (`K` square, `B` with `K`'s column count)
/// row by row; the zero block stores nothing.
fn saddle(k: &CsrMatrix<f64>, b: &CsrMatrix<f64>) -> Result<CsrMatrix<f64>> {
    let n = k.nrows();
    let bt = b.transpose();
    let rows = n + b.nrows();
    check_rows(rows as u128)?;
    let nnz = k.nnz() as u128 + 2 * b.nnz() as u128;
    if nnz > u32::MAX as u128 {
        return Err(too_big("entries", nnz));
    }
    let mut rp = Vec::with_capacity(rows + 1);
    let mut ci = Vec::with_capacity(nnz as usize);
    let mut v = Vec::with_capacity(nnz as usize);
    rp.push(0u32);
    for i in 0..n {
        let (c, x) = k.row(i);
        ci.extend_from_slice(c);
        v.extend_from_slice(x);
        let (c, x) = bt.row(i);
        ci.extend(c.iter().map(|&j| j + n as u32));
        v.extend_from_slice(x);
        rp.push(ci.len() as u32);
    }
    for i in 0..b.nrows() {
        let (c, x) = b.row(i);
        ci.extend_from_slice(c);
        v.extend_from_slice(x);
        rp.push(ci.len() as u32);
    }
    CsrMatrix::try_from_parts(rows, rows, rp, ci, v)
}

fn cast<T: Scalar>(a: CsrMatrix<f64>) -> CsrMatrix<T> {
    a.cast()
}

/// The Stokes problem on the unit square, a marker-and-cell (MAC) staggered grid of `n × n`
/// cells, no-slip walls: `[[A, G], [Gᵀ, 0]]` scaled by `h²` with `A` the 5-point Laplacian of
/// each velocity component (4 on the diagonal, +1 for each wall a tangential velocity sees, −1
/// per neighbour) and `G` the pressure gradient (±h), so `Gᵀ = −h·div`. Unknowns: the
/// x-velocities on the `(n−1)·n` interior vertical faces, then the y-velocities on the
/// `n·(n−1)` interior horizontal faces, then the pressures of the cells but the first (fixed to
/// 0, which removes the constant pressure mode): `3n² − 2n − 1` rows. Symmetric indefinite, with
/// an empty (zero) diagonal in the pressure rows. `shift ≥ 0` is added to the velocity block's
/// diagonal: the mass term `h²/(ν·Δt)` of a time step of the unsteady problem (0: steady
/// Stokes, whose Schur complement is the hardest to precondition).
///
/// # Errors
/// [`Error::InvalidInput`] when `n < 2`, `shift` is negative or not finite, or the size exceeds
/// `u32`.
pub fn stokes2d<T: Scalar>(n: usize, shift: f64) -> Result<CsrMatrix<T>> {
    if n < 2 {
        return Err(bad("stokes2d: N must be at least 2".into()));
    }
    if !(shift.is_finite() && shift >= 0.0) {
        return Err(bad(format!(
            "stokes2d: SHIFT = {shift} must be non-negative and finite"
        )));
    }
    check_rows(3 * (n as u128) * (n as u128))?;
    let h = 1.0 / n as f64;
    let nu = (n - 1) * n;
    let u = |i: usize, j: usize| j * (n - 1) + (i - 1); // face i = 1..n-1, row j
    let v = |i: usize, j: usize| nu + (j - 1) * n + i; // column i, face j = 1..n-1
    let p = |i: usize, j: usize| j * n + i; // cell, 0 removed below
    let mut kt: Vec<(usize, usize, f64)> = Vec::with_capacity(10 * nu);
    // K, both Laplacians: one stencil for both components, at face `a = 1..n-1` across the flow and `b = 0..n-1`
    // along it: the y-velocities are the x-velocities with i and j swapped.
    let components: [&dyn Fn(usize, usize) -> usize; 2] = [&|a, b| u(a, b), &|a, b| v(b, a)];
    for face in components {
        for b in 0..n {
            for a in 1..n {
                let r = face(a, b);
                let walls = (b == 0) as usize + (b + 1 == n) as usize;
                kt.push((r, r, 4.0 + walls as f64 + shift));
                if a > 1 {
                    kt.push((r, face(a - 1, b), -1.0));
                }
                if a + 1 < n {
                    kt.push((r, face(a + 1, b), -1.0));
                }
                if b > 0 {
                    kt.push((r, face(a, b - 1), -1.0));
                }
                if b + 1 < n {
                    kt.push((r, face(a, b + 1), -1.0));
                }
            }
        }
    }
    let k = CsrMatrix::from_triplets(2 * nu, 2 * nu, &kt)?;
    drop(kt);
    // B = Gᵀ: the row of cell (i, j) holds +h at its left and bottom faces, −h at its right and
    // top faces (h·(p_cell − p_left) in the row of the face between).
    let mut bt: Vec<(usize, usize, f64)> = Vec::with_capacity(4 * n * n);
    for j in 0..n {
        for i in 0..n {
            let c = p(i, j);
            if c == 0 {
                continue;
            }
            let row = c - 1;
            if i > 0 {
                bt.push((row, u(i, j), h));
            }
            if i + 1 < n {
                bt.push((row, u(i + 1, j), -h));
            }
            if j > 0 {
                bt.push((row, v(i, j), h));
            }
            if j + 1 < n {
                bt.push((row, v(i, j + 1), -h));
            }
        }
    }
    let b = CsrMatrix::from_triplets(n * n - 1, 2 * nu, &bt)?;
    Ok(cast(saddle(&k, &b)?))
}

/// A saddle-point system `[[K, Bᵀ], [B, 0]]` with `K` the 5-point Laplacian of an `n × n` grid
/// (`poisson2d`) and `B` `m` random sparse constraints: constraint `i` puts 1 on its own column
/// `⌊i·n²/m⌋` (used by no other constraint, so `B` has full row rank) and values uniform in
/// [−½, ½) on 3 random other columns (never another constraint's own). Symmetric indefinite
/// (`n²` positive and `m` negative eigenvalues), an empty diagonal in the last `m` rows.
///
/// # Errors
/// [`Error::InvalidInput`] when `m` is 0 or more than half of `n²`, or the size exceeds `u32`.
pub fn kkt2d<T: Scalar>(n: usize, m: usize, seed: u64) -> Result<CsrMatrix<T>> {
    let nk = check_rows((n as u128) * (n as u128))?;
    if m == 0 || 2 * m > nk {
        return Err(bad(format!(
            "kkt2d: M = {m} constraints must be between 1 and half the {nk} unknowns"
        )));
    }
    check_rows(nk as u128 + m as u128)?;
    let k: CsrMatrix<f64> = super::poisson2d(n)?;
    let own = |i: usize| ((i as u128 * nk as u128) / m as u128) as usize;
    let is_own = |c: usize| {
        // c is constraint i's own column for i = ⌈c·m/nk⌉ when own(i) == c.
        let i = ((c as u128 * m as u128).div_ceil(nk as u128)) as usize;
        i < m && own(i) == c
    };
    let rows: Vec<Vec<(usize, usize, f64)>> = (0..m.div_ceil(CHUNK_ROWS))
        .into_par_iter()
        .map(|chunk| {
            let mut rng = chunk_rng(seed, chunk, 2);
            let mut out = Vec::new();
            for i in chunk * CHUNK_ROWS..((chunk + 1) * CHUNK_ROWS).min(m) {
                out.push((i, own(i), 1.0));
                let mut taken = vec![own(i)];
                while taken.len() < 4 {
                    let c = rng.gen_range(0..nk);
                    if !is_own(c) && !taken.contains(&c) {
                        taken.push(c);
                        out.push((i, c, rng.gen::<f64>() - 0.5));
                    }
                }
            }
            out
        })
        .collect();
    let trip: Vec<(usize, usize, f64)> = rows.into_iter().flatten().collect();
    let b = CsrMatrix::from_triplets(m, nk, &trip)?;
    Ok(cast(saddle(&k, &b)?))
}

/// A symmetric matrix from the sorted, distinct directed pairs `keys` (`row << 32 | col`, both
/// directions present, no self pairs): off-diagonal `off(i, j)` (equal for `(j, i)`), and on
/// the diagonal `diag(i, Σ_j −off(i, j))`.
fn from_pairs(
    n: usize,
    keys: &[u64],
    off: impl Fn(usize, usize) -> f64 + Sync,
    diag: impl Fn(usize, f64) -> f64 + Sync,
) -> Result<CsrMatrix<f64>> {
    let mut start = vec![0usize; n + 1];
    for &k in keys {
        start[(k >> 32) as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let start = &start;
    build(
        n,
        n,
        |i| start[i + 1] - start[i] + 1,
        |_, range, rp, cols, vals| {
            for (kk, i) in range.enumerate() {
                let mut q = rp[kk] as usize;
                let nb = &keys[start[i]..start[i + 1]];
                let sum: f64 = nb
                    .iter()
                    .map(|&k| -off(i, (k & 0xFFFF_FFFF) as usize))
                    .sum();
                let mut placed = false;
                for &k in nb {
                    let j = (k & 0xFFFF_FFFF) as usize;
                    if !placed && j > i {
                        cols[q] = i as u32;
                        vals[q] = diag(i, sum);
                        q += 1;
                        placed = true;
                    }
                    cols[q] = j as u32;
                    vals[q] = off(i, j);
                    q += 1;
                }
                if !placed {
                    cols[q] = i as u32;
                    vals[q] = diag(i, sum);
                }
            }
        },
    )
}

/// Sorted distinct directed pairs of the undirected edges `e` (self loops dropped).
fn pairs(mut e: Vec<u64>) -> Vec<u64> {
    let both: Vec<u64> = e
        .par_iter()
        .filter(|&&k| (k >> 32) != (k & 0xFFFF_FFFF))
        .map(|&k| k.rotate_right(32))
        .collect();
    e.retain(|&k| (k >> 32) != (k & 0xFFFF_FFFF));
    e.extend_from_slice(&both);
    e.par_sort_unstable();
    e.dedup();
    e
}

/// Refuses before any work a matrix whose entries (at least `nnz`) exceed the 32-bit limit.
fn check_entries(nnz: u128) -> Result<()> {
    if nnz > u32::MAX as u128 {
        return Err(too_big("entries (or more)", nnz));
    }
    Ok(())
}

fn check_shift(what: &str, shift: f64) -> Result<()> {
    if !(shift.is_finite() && shift > 0.0) {
        return Err(bad(format!(
            "{what}: SHIFT = {shift} must be positive and finite (it makes the Laplacian definite)"
        )));
    }
    Ok(())
}

/// The Laplacian `D − W + shift·I` of a random geometric graph: `n` points uniform in the unit
/// square (seeded), joined when closer than `r = √(k/(π n))` (so the mean degree is about `k`),
/// unit weights. The points are numbered cell by cell of a grid of `r`-sized cells (nearby
/// points get nearby numbers, as a mesh generator's would); `shift > 0` makes it definite (the
/// graph may have small components). Symmetric positive definite, a graph Laplacian like a
/// Delaunay mesh's but with irregular degrees.
///
/// # Errors
/// [`Error::InvalidInput`] when `k` is 0 or not below `n`, `shift` is not positive and finite,
/// or the size exceeds `u32`.
pub fn geolap<T: Scalar>(n: usize, k: usize, shift: f64, seed: u64) -> Result<CsrMatrix<T>> {
    check_rows(n as u128)?;
    check_entries(n as u128 * (k as u128 + 1))?;
    check_shift("geolap", shift)?;
    if k == 0 || k >= n {
        return Err(bad(format!(
            "geolap: the mean degree K = {k} must be between 1 and N − 1 = {}",
            n.saturating_sub(1)
        )));
    }
    let r = (k as f64 / (std::f64::consts::PI * n as f64)).sqrt();
    let g = ((1.0 / r).floor() as usize).max(1);
    let cell_of = |p: [f64; 2]| {
        let cx = ((p[0] * g as f64) as usize).min(g - 1);
        let cy = ((p[1] * g as f64) as usize).min(g - 1);
        cy * g + cx
    };
    let mut pts = random_draws(n, seed, 0, |rng| {
        let p = [rng.gen::<f64>(), rng.gen::<f64>()];
        (cell_of(p), p)
    });
    pts.par_sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1[0].total_cmp(&b.1[0]))
            .then(a.1[1].total_cmp(&b.1[1]))
    });
    let mut cell_start = vec![0usize; g * g + 1];
    for p in &pts {
        cell_start[p.0 + 1] += 1;
    }
    for c in 0..g * g {
        cell_start[c + 1] += cell_start[c];
    }
    let r2 = r * r;
    let pts = &pts;
    let cell_start = &cell_start;
    let neighbours = |i: usize, out: &mut Vec<u32>| {
        out.clear();
        let (c, p) = pts[i];
        let (cx, cy) = ((c % g) as i64, (c / g) as i64);
        for dy in -1..=1 {
            for dx in -1..=1 {
                let (x, y) = (cx + dx, cy + dy);
                if x < 0 || y < 0 || x >= g as i64 || y >= g as i64 {
                    continue;
                }
                let cc = y as usize * g + x as usize;
                let a = cell_start[cc];
                for (o, q) in pts[a..cell_start[cc + 1]].iter().enumerate() {
                    let (ex, ey) = (q.1[0] - p[0], q.1[1] - p[1]);
                    if a + o != i && ex * ex + ey * ey < r2 {
                        out.push((a + o) as u32);
                    }
                }
            }
        }
        out.sort_unstable();
    };
    let keys: Vec<u64> = (0..n)
        .into_par_iter()
        .flat_map_iter(|i| {
            let mut nb = Vec::new();
            neighbours(i, &mut nb);
            nb.into_iter()
                .map(move |j| ((i as u64) << 32) | j as u64)
                .collect::<Vec<_>>()
        })
        .collect();
    let a = from_pairs(n, &keys, |_, _| -1.0, |_, s| s + shift)?;
    Ok(cast(a))
}

/// The Laplacian `D − W + shift·I` of a power-law (Chung–Lu) random graph on `n` vertices:
/// `4n` edges drawn with both ends chosen with probability proportional to `(i + 1)^(−1/(α−1))`
/// (the expected degrees then follow a power law with exponent `α`), duplicates and self loops
/// dropped, unit weights, the hubs first. Mean degree about 8 (less after the duplicates, which
/// gather on the hubs); the largest degree grows like `n^(1/(α−1))`. Symmetric positive
/// definite.
///
/// # Errors
/// [`Error::InvalidInput`] when `α ≤ 1` or not finite, `n < 2`, `shift` is not positive and
/// finite, or the size exceeds `u32`.
pub fn powerlap<T: Scalar>(n: usize, alpha: f64, shift: f64, seed: u64) -> Result<CsrMatrix<T>> {
    check_rows(n as u128)?;
    // 8n directed pairs drawn at most, plus the diagonal.
    check_entries(9 * n as u128)?;
    check_shift("powerlap", shift)?;
    if !(alpha.is_finite() && alpha > 1.0) {
        return Err(bad(format!(
            "powerlap: ALPHA = {alpha} must be greater than 1"
        )));
    }
    if n < 2 {
        return Err(bad("powerlap: N must be at least 2".into()));
    }
    let beta = 1.0 / (alpha - 1.0);
    let mut cdf: Vec<f64> = Vec::with_capacity(n);
    let mut acc = 0.0;
    for i in 0..n {
        acc += ((i + 1) as f64).powf(-beta);
        cdf.push(acc);
    }
    let total = acc;
    let cdf = &cdf;
    let pick = |u: f64| cdf.partition_point(|&c| c <= u * total).min(n - 1) as u64;
    let edges = random_draws(4 * n, seed, 3, |rng| {
        let (a, b) = (pick(rng.gen()), pick(rng.gen()));
        (a << 32) | b
    });
    let keys = pairs(edges);
    Ok(cast(from_pairs(n, &keys, |_, _| -1.0, |_, s| s + shift)?))
}

/// What [`circuit`] adds to the resistor network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CircuitKind {
    /// Nodal analysis of resistors and ground conductances: symmetric positive definite.
    Conductance,
    /// Modified nodal analysis with voltage sources to ground: each adds a current unknown, a
    /// row and a column with a 1 and a zero diagonal (symmetric indefinite).
    VoltageSources,
    /// Nodal analysis with voltage-controlled current sources: unsymmetric.
    ControlledSources,
}

/// A circuit-simulation matrix: the conductance matrix of a resistor network on an `m × m`
/// grid of nodes (`m = ⌊√n⌋`), every grid edge a resistor, plus `m²/100` resistors between
/// random node pairs, each conductance log-uniform in [10⁻², 10²] S (from a hash of the seed
/// and the pair); about one node in 500 (and node 0) is tied to ground by a conductance in
/// [1, 10] S. `kind` adds voltage sources (to ground at about one node in 1000, modified nodal
/// analysis) or voltage-controlled current sources (at about one node in 50: a
/// transconductance `g` into the node, controlled by its right and upper neighbours, `+g` and
/// `−g` in its row with `g` half the smaller conductance to them, so the row stays weakly
/// dominant while the matrix loses its symmetry).
///
/// # Errors
/// [`Error::InvalidInput`] when `n < 4` or the size exceeds `u32`.
pub fn circuit<T: Scalar>(n: usize, kind: CircuitKind, seed: u64) -> Result<CsrMatrix<T>> {
    if n < 4 {
        return Err(bad("circuit: N must be at least 4".into()));
    }
    let m = n.isqrt();
    let nn = check_rows((m as u128) * (m as u128))?;
    check_entries(5 * nn as u128 + 2 * (nn as u128 / 100))?;
    let hash = |a: u64, b: u64| splitmix64(seed ^ splitmix64(a.wrapping_mul(0x9E37_79B9) ^ b));
    let cond = move |i: usize, j: usize| {
        let (a, b) = (i.min(j) as u64, i.max(j) as u64);
        10f64.powf(4.0 * unit(hash(a, b)) - 2.0)
    };
    let node_hash = move |i: usize| hash(i as u64, u64::MAX);
    let ground = move |i: usize| {
        let h = node_hash(i);
        if i == 0 || h % 500 == 0 {
            1.0 + 9.0 * unit(splitmix64(h))
        } else {
            0.0
        }
    };
    let links = nn / 100;
    let mut edges: Vec<u64> = (0..nn)
        .into_par_iter()
        .flat_map_iter(|i| {
            let (x, y) = (i % m, i / m);
            let mut e = Vec::with_capacity(2);
            if x + 1 < m {
                e.push(((i as u64) << 32) | (i + 1) as u64);
            }
            if y + 1 < m {
                e.push(((i as u64) << 32) | (i + m) as u64);
            }
            e
        })
        .collect();
    let mut rng = chunk_rng(seed, 0, 1);
    for _ in 0..links {
        let (a, b) = (rng.gen_range(0..nn) as u64, rng.gen_range(0..nn) as u64);
        edges.push((a << 32) | b);
    }
    let keys = pairs(edges);
    let g = from_pairs(nn, &keys, |i, j| -cond(i, j), |i, s| s + ground(i))?;
    match kind {
        CircuitKind::Conductance => Ok(cast(g)),
        CircuitKind::VoltageSources => {
            let mut sources: Vec<usize> = (0..nn).filter(|&i| node_hash(i) % 1000 == 1).collect();
            if sources.is_empty() {
                sources.push(nn / 2);
            }
            let trip: Vec<(usize, usize, f64)> = sources
                .iter()
                .enumerate()
                .map(|(s, &node)| (s, node, 1.0))
                .collect();
            let b = CsrMatrix::from_triplets(sources.len(), nn, &trip)?;
            Ok(cast(saddle(&g, &b)?))
        }
        CircuitKind::ControlledSources => {
            let mut g = g;
            let rp = g.row_ptr().to_vec();
            let ci = g.col_idx().to_vec();
            let vals = g.values_mut();
            for i in 0..nn {
                let (x, y) = (i % m, i / m);
                if node_hash(i) % 50 != 2 || x + 1 >= m || y + 1 >= m {
                    continue;
                }
                let (c, d) = (i + 1, i + m);
                let gm = 0.5 * cond(i, c).min(cond(i, d));
                let row = rp[i] as usize..rp[i + 1] as usize;
                for p in row {
                    if ci[p] as usize == c {
                        vals[p] += gm;
                    } else if ci[p] as usize == d {
                        vals[p] -= gm;
                    }
                }
            }
            Ok(cast(g))
        }
    }
}
