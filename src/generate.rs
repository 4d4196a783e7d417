//! Generated test matrices, addressed by specs such as `poisson2d:N`.
//!
//! Benchmarks and tests need matrices far larger than the ones committed under `matrices/`
//! (10^7–10^8 entries), with known structure. A *spec* names one; [`from_spec`] builds it and
//! [`crate::load`] accepts a spec wherever it accepts a file name (so does `spmv-bench`).
//!
//! | spec | matrix | rows | entries |
//! |---|---|---|---|
//! | `poisson2d:N` | 5-point Laplacian on an N×N grid: 4 on the diagonal, −1 for each grid neighbour | N² | ≈ 5N² |
//! | `poisson3d:N` | 7-point Laplacian on an N×N×N grid: 6 on the diagonal, −1 for each neighbour | N³ | ≈ 7N³ |
//! | `tridiag:N` | 1-D Laplacian: 2 on the diagonal, −1 beside it | N | 3N − 2 |
//! | `diag:N` | diagonal, values uniform in [1, 2) | N | N |
//! | `dense:N` | every entry stored, values uniform in [−1, 1) (the "Dense" matrix of the Williams SpMV set) | N | N² |
//! | `random:N:K` | N×N, every row has exactly K distinct uniformly random columns, values uniform in [−1, 1) | N | N·K |
//! | `powerlaw:N:ALPHA` | N×N, row lengths power-law ("Zipf") distributed with exponent ALPHA, random distinct columns, values uniform in [−1, 1) | N | ≈ 12 N for ALPHA ≥ 2.1; a heavier tail (more long rows) for ALPHA < 2 |
//! | `denserows:N:K:D:L` | N×N, K random columns per row except D evenly spread dense rows of L random columns (a few dense rows among short ones) | N | (N − D)·K + D·L |
//! | `emptyrows:N:PCT:K` | N×N, about PCT % of the rows empty (chosen by a hash of the seed and the row), the others K random columns (mostly-empty matrices) | N | ≈ (1 − PCT/100)·N·K |
//! | `rmat:SCALE:EF` | R-MAT graph (Graph500's a = 0.57, b = c = 0.19): 2^SCALE vertices, EF·2^SCALE edges drawn, duplicates merged; skewed row lengths and clustered columns | 2^SCALE | ≤ EF·2^SCALE |
//! | `wide:M:N:K` | M×N (short and wide when N ≫ M), K random columns per row | M | M·K |
//! | `aniso2d:N:EPS` | anisotropic diffusion `−u_xx − EPS·u_yy`, Q1 finite elements on an N×N grid (PyAMG's `stencil_grid(diffusion_stencil_2d(EPS), (N, N))`) | N² | ≈ 9N² |
//! | `poisson3d27:N` | 27-point stencil on an N×N×N grid: 26 on the diagonal, −1 for each of the up to 26 neighbours | N³ | ≈ 27N³ |
//! | `knn3d:N:K[:ORDER]` | kNN graph of N points uniform in the unit cube: row i holds the K nearest other points (searched among the neighbouring grid cells), values uniform in [−1, 1); ORDER numbers the points by `x` (slabs, the default), `morton` (Z-order) or `random` | N | N·K |
//! | `knnblocks:N:K:B[:ORDER]` | dense B×B blocks on a point cloud: the `knn3d:N:K:ORDER` graph with each point's own block added, every graph entry a B×B block (B unknowns per point, as in meshless elasticity with B = 3); values from a hash of the seed and the entry, uniform in [−1, 1) | N·B | N·(K + 1)·B² |
//! | `blocks:N:B:D` | dense B×B blocks: each block row holds D blocks, the diagonal one and D − 1 at random block columns; values uniform in [−1, 1) | N (rounded up to a multiple of B) | ≈ N·B·D |
//! | `zipf:N:S:MAX:W` | row lengths Zipf-distributed, P(L = k) ∝ k^(−S) for k in 1..=MAX, columns random within W of the diagonal (W = 0: anywhere) | N | ≈ N × the mean row length |
//! | `arrow:N:W:K` | arrow matrix: the first W rows and columns full, plus K random columns near the diagonal in every other row | N | ≈ 2·N·W + N·K |
//! | `rmat:SCALE:EF:A:B:C` | R-MAT with quadrant probabilities A, B, C and 1 − A − B − C (flatter than Graph500's when A is smaller) | 2^SCALE | ≤ EF·2^SCALE |
//! | `elasticity2d:N` | 2-D linear elasticity, Q1 elements, E = 10⁵, ν = 0.3, Dirichlet on the whole boundary (PyAMG's `linear_elasticity((N, N))`); two unknowns per node | 2N² | ≈ 18·2N² |
//! | `elasticity3d:N` | 3-D linear elasticity, trilinear (Q1) hexahedra on the unit-spaced (N + 1)³-element cube, E = 10⁵, ν = 0.3, Dirichlet on the whole boundary; three unknowns per interior node | 3N³ | ≈ 81·3N³ |
//! | `jumps3d:N` | 7-point 3-D diffusion whose coefficient is 1 or 10⁴ on random 8³ boxes (harmonic means on the faces, Dirichlet boundary): the Poisson pattern with jumping values | N³ | ≈ 7N³ |
//! | `helmholtz3d:N:K:SHIFT` | complex shifted Helmholtz `−Δu − K²(1 − i·SHIFT)u` on the unit cube, 7-point stencil scaled by h² (see [`helmholtz3d`]); complex symmetric, for a complex element type | N³ | ≈ 7N³ |
//! | `fem3d:P:N[:OPT…]` | Poisson, P = `p1` or `p2` tetrahedra on the Kuhn mesh of N³ cells mapped onto the unit ball, assembled element by element ([`fem()`]); symmetric to rounding, SPD | ≈ (N−1)³ (P1), (2N−1)³ (P2) | ≈ 15 / 28 per row |
//! | `fem2d:P:N[:OPT…]` | the same with triangles on the unit disc | ≈ (N−1)² / (2N−1)² | ≈ 7 / 11 per row |
//! | `femelast3d:P:N[:OPT…]` | linear elasticity (E = 10⁵, ν = 0.3), 3 unknowns per node interleaved, clamped on the face x = min | ≈ 3N(N+1)² / 3·2N(2N+1)² | ≈ 43 / 81 per row |
//! | `femelast2d:P:N[:OPT…]` | plane-strain elasticity on triangles, 2 unknowns per node | ≈ 2N(N+1) / 2·2N(2N+1) | ≈ 14 / 23 per row |
//! | `convdiff2d:N:PE`, `convdiff3d:N:PE` | convection–diffusion `−Δu + PE·w·∇u`, upwind differences on an N^d interior grid, constant wind ([`convdiff`]); unsymmetric M-matrix | N², N³ | ≈ 5N², 7N³ |
//! | `aniso3d:N:EPS[:EPS2]` | anisotropic diffusion `−u_xx − EPS·u_yy − EPS2·u_zz` (EPS2 = EPS by default), 7-point ([`aniso3d`]); SPD | N³ | ≈ 7N³ |
//! | `shifted2d:N:SIGMA`, `shifted3d:N:SIGMA` | the 5-/7-point Laplacian minus SIGMA·I ([`shifted`]): symmetric indefinite for 0 < SIGMA < 4d | N², N³ | ≈ 5N², 7N³ |
//! | `stokes2d:N[:SHIFT]` | Stokes on a MAC grid of N×N cells: `[[A + SHIFT·I, G], [Gᵀ, 0]]`, one pressure fixed ([`stokes2d`]; SHIFT > 0: a time step of unsteady Stokes); symmetric indefinite, zero diagonal block | 3N² − 2N − 1 | ≈ 14N² |
//! | `kkt2d:N:M` | `[[K, Bᵀ], [B, 0]]`, K = `poisson2d:N`, M random sparse constraints of full rank ([`kkt2d`]); symmetric indefinite | N² + M | ≈ 5N² + 8M |
//! | `geolap:N:K[:SHIFT]` | Laplacian + SHIFT·I (default 10⁻⁴) of a random geometric graph of N points in the unit square, mean degree ≈ K ([`geolap`]); SPD | N | ≈ N(K + 1) |
//! | `powerlap:N:ALPHA[:SHIFT]` | Laplacian + SHIFT·I (default 10⁻⁴) of a Chung–Lu power-law graph, 4N edges drawn ([`powerlap`]); SPD | N | ≲ 9N |
//! | `circuit:N[:g\|mna\|vccs]` | circuit matrix on a ⌊√N⌋² resistor grid with random extra links and grounds ([`circuit`]): `g` conductances (SPD, the default), `mna` with voltage sources (symmetric indefinite), `vccs` with controlled sources (unsymmetric) | ≈ N | ≈ 5N |
//!
//! Every spec builds into any element type ([`Elem`]): a complex type gets the real
//! generators' values with zero imaginary parts.
//!
//! The finite-element specs take options after N, in any order: `ball` (the default) or `cube`
//! (the structured unit square or cube), `jitter` (move interior vertices by up to 0.15 h,
//! seeded), and the Dirichlet handling `elim` (the default: boundary unknowns removed), `ident`
//! (their rows and columns zeroed, 1 on the diagonal, the zeros stored) or `rows` (identity rows,
//! columns kept: unsymmetric). E.g. `fem3d:p2:24`, `femelast3d:p1:40:cube:ident`,
//! `fem2d:p1:500:jitter`. The [`fem`](mod@fem) module docs say how they are assembled.
//!
//! The Poisson and tridiagonal matrices are symmetric positive definite (the standard
//! finite-difference Laplacians with Dirichlet boundaries) and do not depend on the seed.
//!
//! ```
//! use segsparse::{generate, CsrMatrix};
//! let a: CsrMatrix<f64> = generate::from_spec("poisson2d:100", 0).unwrap();
//! assert_eq!((a.nrows(), a.nnz()), (10_000, 5 * 100 * 100 - 4 * 100));
//! let r: CsrMatrix<f32> = generate::from_spec("random:1000:8", 42).unwrap();
//! assert_eq!(r, generate::random(1000, 8, 42).unwrap()); // same seed, same matrix
//! assert!(generate::from_spec::<f64>("poisson:3", 0).is_err()); // lists the valid forms
//! ```
//!
//! ## Power-law row lengths
//!
//! `powerlaw:N:ALPHA` draws each row length as `L = min(N, ⌊x_min · U^(−1/(ALPHA−1))⌋)` with `U`
//! uniform in (0, 1]: a Pareto variable (the continuous form of Zipf's law) whose density falls as
//! `L^(−ALPHA)`, capped at N. `x_min ≥ 1` is chosen so that the mean of the capped continuous
//! variable is 12 (or N if N < 12); after rounding down the mean row length is about 11.5 whenever
//! that is possible. ALPHA must be greater than 1. For small ALPHA the tail is so heavy that
//! even `x_min = 1` gives a larger mean: with N = 10^6 the mean is about 15 for ALPHA = 2, 75 for
//! ALPHA = 1.8 and 2000 for ALPHA = 1.5 — the long rows are the point of such matrices.
//! [`powerlaw_mean`] gives the expected mean for any N and ALPHA.
//!
//! ## Determinism and speed
//!
//! Rows are generated in parallel (rayon) in fixed chunks of [`CHUNK_ROWS`] rows; each chunk draws
//! from its own `ChaCha8Rng` stream derived from `(seed, chunk)`, so a matrix depends only on its
//! spec and seed, never on the number of threads. Rows are produced in order with sorted, distinct
//! columns straight into the CSR arrays (no triplets, no global sort). Measured on a busy 2-core
//! development machine (`tests/all/io.rs::speed_of_generation_and_reading`): about 70 M entries per
//! CPU-second for the Poisson matrices, 27 M for `random:N:16` and 15 M for `powerlaw:N:2.2`, so a
//! 10^8-entry matrix takes a second or two on a 16-core machine.

use std::ops::Range;

use rand::distributions::{Distribution, Uniform};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::{CsrMatrix, Elem, Scalar};

pub mod fem;
mod systems;

pub use fem::{fem, fem_coordinates, Dirichlet, FemDomain, FemOrder, FemPhysics, FemProblem};
pub use systems::{
    aniso3d, circuit, convdiff, geolap, kkt2d, powerlap, shifted, stokes2d, CircuitKind,
};

/// Rows per generation chunk; each chunk has its own random stream.
pub const CHUNK_ROWS: usize = 1 << 13;

/// The valid spec forms, as listed in error messages.
pub const SPEC_FORMS: &str = "poisson2d:N, poisson3d:N, tridiag:N, diag:N, dense:N, random:N:K, \
                              powerlaw:N:ALPHA, denserows:N:K:D:L, wide:M:N:K (e.g. poisson2d:1000, \
                              random:100000:16, powerlaw:100000:2.2, denserows:100000:8:4:50000, \
                              wide:1000:1000000:32), aniso2d:N:EPS, poisson3d27:N, elasticity2d:N, \
                              emptyrows:N:PCT:K, rmat:SCALE:EF[:A:B:C], knn3d:N:K[:x|morton|random], \
                              knnblocks:N:K:B[:x|morton|random], blocks:N:B:D, zipf:N:S:MAX:W, arrow:N:W:K, elasticity3d:N, jumps3d:N, \
                              helmholtz3d:N:K:SHIFT (complex, e.g. helmholtz3d:100:20:0.5), \
                              fem2d|fem3d|femelast2d|femelast3d:p1|p2:N[:ball|cube][:jitter]\
                              [:elim|ident|rows] (e.g. fem3d:p2:24), convdiff2d:N:PE, \
                              convdiff3d:N:PE, aniso3d:N:EPS[:EPS2], shifted2d:N:SIGMA, \
                              shifted3d:N:SIGMA, stokes2d:N[:SHIFT], kkt2d:N:M, geolap:N:K[:SHIFT], \
                              powerlap:N:ALPHA[:SHIFT], circuit:N[:g|mna|vccs]";

const NAMES: [&str; 36] = [
    "fem2d",
    "fem3d",
    "femelast2d",
    "femelast3d",
    "convdiff2d",
    "convdiff3d",
    "aniso3d",
    "shifted2d",
    "shifted3d",
    "stokes2d",
    "kkt2d",
    "geolap",
    "powerlap",
    "circuit",
    "knn3d",
    "knnblocks",
    "blocks",
    "zipf",
    "arrow",
    "elasticity3d",
    "jumps3d",
    "helmholtz3d",
    "aniso2d",
    "poisson3d27",
    "elasticity2d",
    "poisson2d",
    "poisson3d",
    "tridiag",
    "diag",
    "dense",
    "random",
    "powerlaw",
    "denserows",
    "wide",
    "emptyrows",
    "rmat",
];

/// The finite-element problem and N of a `fem2d`, `fem3d`, `femelast2d` or `femelast3d` spec
/// (`None` for any other spec or a malformed one): what [`fem_coordinates`] needs to give the
/// nodes of the matrix [`from_spec`] builds from it (with the same seed).
pub fn fem_problem(spec: &str) -> Option<(FemProblem, usize)> {
    let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
    let name = parts[0].to_ascii_lowercase();
    let (dim, physics) = match name.as_str() {
        "fem2d" => (2, FemPhysics::Poisson),
        "fem3d" => (3, FemPhysics::Poisson),
        "femelast2d" => (2, FemPhysics::Elasticity),
        "femelast3d" => (3, FemPhysics::Elasticity),
        _ => return None,
    };
    FemProblem::parse(dim, physics, &parts[1..]).ok()
}

/// True when `s` has the shape of a spec: a known generator name followed by `:` (the arguments
/// are checked by [`from_spec`]).
pub fn is_spec(s: &str) -> bool {
    match s.split_once(':') {
        Some((name, _)) => NAMES.iter().any(|n| n.eq_ignore_ascii_case(name.trim())),
        None => false,
    }
}

/// Builds the matrix a spec names (see the [module docs](self) for the forms); `seed` fixes the
/// random ones.
///
/// # Errors
/// [`Error::InvalidInput`] for an unknown or malformed spec (the message lists the valid forms)
/// and for matrices whose size exceeds the 32-bit index limit.
pub fn from_spec<T: Elem>(spec: &str, seed: u64) -> Result<CsrMatrix<T>> {
    let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
    if !parts[0].eq_ignore_ascii_case("helmholtz3d") {
        // The real generators, in the real type; a complex `T` gets zero imaginary parts (for
        // a real `T` the map is the identity and collects in place).
        let m = from_spec_real::<T::Real>(spec, seed)?;
        let (nr, nc) = (m.nrows(), m.ncols());
        let (row_ptr, col_idx, values) = m.into_parts();
        let values: Vec<T> = values.into_iter().map(T::from_real).collect();
        // SAFETY: the parts of a valid matrix with the values mapped one to one.
        return Ok(unsafe { CsrMatrix::from_parts_unchecked(nr, nc, row_ptr, col_idx, values) });
    }
    let bad = |why: &str| {
        Error::InvalidInput(format!(
            "bad matrix spec '{spec}': {why}; valid forms are {SPEC_FORMS}"
        ))
    };
    if parts.len() != 4 {
        return Err(bad("helmholtz3d takes 3 arguments (N, K, SHIFT)"));
    }
    let n = parts[1]
        .replace('_', "")
        .parse::<usize>()
        .map_err(|_| bad(&format!("N '{}' is not a non-negative integer", parts[1])))?;
    let num = |i: usize, what: &str| -> Result<f64> {
        parts[i]
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(&format!("{what} '{}' is not a finite number", parts[i])))
    };
    helmholtz3d(n, num(2, "K")?, num(3, "SHIFT")?)
}

fn from_spec_real<T: Scalar>(spec: &str, seed: u64) -> Result<CsrMatrix<T>> {
    let bad = |why: &str| {
        Error::InvalidInput(format!(
            "bad matrix spec '{spec}': {why}; valid forms are {SPEC_FORMS}"
        ))
    };
    let parts: Vec<&str> = spec.split(':').map(str::trim).collect();
    let name = parts[0].to_ascii_lowercase();
    let int = |i: usize, what: &str| -> Result<usize> {
        let s = parts
            .get(i)
            .ok_or_else(|| bad(&format!("missing {what}")))?;
        s.replace('_', "")
            .parse::<usize>()
            .map_err(|_| bad(&format!("{what} '{s}' is not a non-negative integer")))
    };
    let num = |i: usize, what: &str| -> Result<f64> {
        let s = parts
            .get(i)
            .ok_or_else(|| bad(&format!("missing {what}")))?;
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(&format!("{what} '{s}' is not a finite number")))
    };
    let arity = |n: usize| -> Result<()> {
        if parts.len() > n + 1 {
            Err(bad(&format!("{name} takes {n} argument(s)")))
        } else {
            Ok(())
        }
    };
    match name.as_str() {
        "poisson2d" => {
            arity(1)?;
            poisson2d(int(1, "N")?)
        }
        "poisson3d" => {
            arity(1)?;
            poisson3d(int(1, "N")?)
        }
        "tridiag" => {
            arity(1)?;
            tridiag(int(1, "N")?)
        }
        "diag" => {
            arity(1)?;
            diag(int(1, "N")?, seed)
        }
        "dense" => {
            arity(1)?;
            dense(int(1, "N")?, seed)
        }
        "random" => {
            arity(2)?;
            random(int(1, "N")?, int(2, "K")?, seed)
        }
        "powerlaw" => {
            arity(2)?;
            let n = int(1, "N")?;
            let a = parts.get(2).ok_or_else(|| bad("missing ALPHA"))?;
            let alpha = a
                .parse::<f64>()
                .map_err(|_| bad(&format!("ALPHA '{a}' is not a number")))?;
            powerlaw(n, alpha, seed)
        }
        "denserows" => {
            arity(4)?;
            denserows(int(1, "N")?, int(2, "K")?, int(3, "D")?, int(4, "L")?, seed)
        }
        "wide" => {
            arity(3)?;
            wide(int(1, "M")?, int(2, "N")?, int(3, "K")?, seed)
        }
        "emptyrows" => {
            arity(3)?;
            emptyrows(int(1, "N")?, int(2, "PCT")?, int(3, "K")?, seed)
        }
        "rmat" => {
            if parts.len() == 3 {
                return rmat(int(1, "SCALE")?, int(2, "EF")?, seed);
            }
            arity(5)?;
            let p = |i: usize, what: &str| -> Result<f64> {
                let s = parts
                    .get(i)
                    .ok_or_else(|| bad(&format!("missing {what}")))?;
                s.parse::<f64>()
                    .map_err(|_| bad(&format!("{what} '{s}' is not a number")))
            };
            rmat_with(
                int(1, "SCALE")?,
                int(2, "EF")?,
                [p(3, "A")?, p(4, "B")?, p(5, "C")?],
                seed,
            )
        }
        "knn3d" | "knnblocks" => {
            let at = if name == "knn3d" { 3 } else { 4 };
            arity(at)?;
            let order = match parts.get(at).map(|s| s.to_ascii_lowercase()) {
                None => PointOrder::X,
                Some(o) if o == "x" => PointOrder::X,
                Some(o) if o == "morton" => PointOrder::Morton,
                Some(o) if o == "random" => PointOrder::Random,
                Some(o) => return Err(bad(&format!("ORDER '{o}' is not x, morton or random"))),
            };
            if name == "knn3d" {
                knn3d(int(1, "N")?, int(2, "K")?, order, seed)
            } else {
                knn_blocks(int(1, "N")?, int(2, "K")?, int(3, "B")?, order, seed)
            }
        }
        "blocks" => {
            arity(3)?;
            blocks(int(1, "N")?, int(2, "B")?, int(3, "D")?, seed)
        }
        "zipf" => {
            arity(4)?;
            let e = parts.get(2).ok_or_else(|| bad("missing S"))?;
            let s = e
                .parse::<f64>()
                .map_err(|_| bad(&format!("S '{e}' is not a number")))?;
            zipf(int(1, "N")?, s, int(3, "MAX")?, int(4, "W")?, seed)
        }
        "arrow" => {
            arity(3)?;
            arrow(int(1, "N")?, int(2, "W")?, int(3, "K")?, seed)
        }
        "aniso2d" => {
            arity(2)?;
            let n = int(1, "N")?;
            let e = parts.get(2).ok_or_else(|| bad("missing EPS"))?;
            let eps = e
                .parse::<f64>()
                .map_err(|_| bad(&format!("EPS '{e}' is not a number")))?;
            aniso2d(n, eps)
        }
        "poisson3d27" => {
            arity(1)?;
            poisson3d27(int(1, "N")?)
        }
        "elasticity2d" => {
            arity(1)?;
            elasticity2d(int(1, "N")?)
        }
        "elasticity3d" => {
            arity(1)?;
            elasticity3d(int(1, "N")?)
        }
        "jumps3d" => {
            arity(1)?;
            jumps3d(int(1, "N")?)
        }
        "fem2d" | "fem3d" | "femelast2d" | "femelast3d" => {
            let dim = if name.contains("2d") { 2 } else { 3 };
            let physics = if name.starts_with("femelast") {
                FemPhysics::Elasticity
            } else {
                FemPhysics::Poisson
            };
            let (p, n) = FemProblem::parse(dim, physics, &parts[1..]).map_err(|why| bad(&why))?;
            fem(&p, n, seed)
        }
        "convdiff2d" | "convdiff3d" => {
            arity(2)?;
            let d = if name == "convdiff2d" { 2 } else { 3 };
            convdiff(d, int(1, "N")?, num(2, "PE")?)
        }
        "aniso3d" => {
            arity(3)?;
            let eps = num(2, "EPS")?;
            let eps2 = if parts.len() > 3 {
                num(3, "EPS2")?
            } else {
                eps
            };
            aniso3d(int(1, "N")?, eps, eps2)
        }
        "shifted2d" | "shifted3d" => {
            arity(2)?;
            let d = if name == "shifted2d" { 2 } else { 3 };
            shifted(d, int(1, "N")?, num(2, "SIGMA")?)
        }
        "stokes2d" => {
            arity(2)?;
            let shift = if parts.len() > 2 {
                num(2, "SHIFT")?
            } else {
                0.0
            };
            stokes2d(int(1, "N")?, shift)
        }
        "kkt2d" => {
            arity(2)?;
            kkt2d(int(1, "N")?, int(2, "M")?, seed)
        }
        "geolap" => {
            arity(3)?;
            let shift = if parts.len() > 3 {
                num(3, "SHIFT")?
            } else {
                1e-4
            };
            geolap(int(1, "N")?, int(2, "K")?, shift, seed)
        }
        "powerlap" => {
            arity(3)?;
            let shift = if parts.len() > 3 {
                num(3, "SHIFT")?
            } else {
                1e-4
            };
            powerlap(int(1, "N")?, num(2, "ALPHA")?, shift, seed)
        }
        "circuit" => {
            arity(2)?;
            let kind = match parts.get(2).map(|s| s.to_ascii_lowercase()) {
                None => CircuitKind::Conductance,
                Some(k) if k == "g" => CircuitKind::Conductance,
                Some(k) if k == "mna" => CircuitKind::VoltageSources,
                Some(k) if k == "vccs" => CircuitKind::ControlledSources,
                Some(k) => return Err(bad(&format!("circuit kind '{k}' is not g, mna or vccs"))),
            };
            circuit(int(1, "N")?, kind, seed)
        }
        _ => Err(bad("unknown generator")),
    }
}

// ---------------------------------------------------------------------------------------------
// The chunked parallel builder
// ---------------------------------------------------------------------------------------------

fn too_big(what: &str, v: u128) -> Error {
    Error::InvalidInput(format!(
        "the generated matrix would have {v} {what}, beyond the 32-bit index limit ({})",
        u32::MAX
    ))
}

fn check_rows(n: u128) -> Result<usize> {
    if n > u32::MAX as u128 {
        return Err(too_big("rows", n));
    }
    Ok(n as usize)
}

/// The random stream of `chunk` for one generation `phase`.
fn chunk_rng(seed: u64, chunk: usize, phase: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream((chunk as u64) * 4 + phase);
    rng
}

/// `count` draws of `draw` from the random streams of generation `phase`, chunks of
/// [`CHUNK_ROWS`] draws in parallel, in order (the same for every thread count).
fn random_draws<X, F>(count: usize, seed: u64, phase: u64, draw: F) -> Vec<X>
where
    X: Send,
    F: Fn(&mut ChaCha8Rng) -> X + Sync,
{
    (0..count.div_ceil(CHUNK_ROWS))
        .into_par_iter()
        .flat_map_iter(|chunk| {
            let mut rng = chunk_rng(seed, chunk, phase);
            let len = CHUNK_ROWS.min(count - chunk * CHUNK_ROWS);
            (0..len).map(|_| draw(&mut rng)).collect::<Vec<_>>()
        })
        .collect()
}

/// Builds an `nrows × ncols` matrix whose row `i` has `len(i)` entries; `fill(chunk, rows,
/// row_ptr, cols, vals)` writes the entries of the rows in `rows` (`row_ptr` holds their
/// `rows.len() + 1` pointers, relative to the start of `cols`/`vals`) with strictly increasing
/// columns. Chunks are filled in parallel; every chunk is checked before the matrix is made.
fn build<T, L, F>(nrows: usize, ncols: usize, len: L, fill: F) -> Result<CsrMatrix<T>>
where
    T: Elem,
    L: Fn(usize) -> usize,
    F: Fn(usize, Range<usize>, &[u32], &mut [u32], &mut [T]) + Sync,
{
    check_rows(nrows as u128)?;
    check_rows(ncols as u128)?;
    let mut row_ptr = Vec::with_capacity(nrows + 1);
    let mut acc: u64 = 0;
    row_ptr.push(0u32);
    for i in 0..nrows {
        acc += len(i) as u64;
        if acc > u32::MAX as u64 {
            return Err(too_big("entries (or more)", acc as u128));
        }
        row_ptr.push(acc as u32);
    }
    let nnz = acc as usize;
    let mut col_idx = vec![0u32; nnz];
    let mut values = vec![T::zero(); nnz];
    let mut pieces = Vec::with_capacity(nrows.div_ceil(CHUNK_ROWS));
    {
        let (mut c_rest, mut v_rest) = (&mut col_idx[..], &mut values[..]);
        for (chunk, r0) in (0..nrows).step_by(CHUNK_ROWS).enumerate() {
            let r1 = (r0 + CHUNK_ROWS).min(nrows);
            let n = (row_ptr[r1] - row_ptr[r0]) as usize;
            let (c, cr) = std::mem::take(&mut c_rest).split_at_mut(n);
            let (v, vr) = std::mem::take(&mut v_rest).split_at_mut(n);
            c_rest = cr;
            v_rest = vr;
            pieces.push((chunk, r0..r1, c, v));
        }
    }
    let rp = &row_ptr;
    let ok = pieces.into_par_iter().all(|(chunk, rows, cols, vals)| {
        let base = rp[rows.start];
        let local: Vec<u32> = rp[rows.start..=rows.end]
            .iter()
            .map(|&p| p - base)
            .collect();
        fill(chunk, rows.clone(), &local, cols, vals);
        // Check what `fill` wrote: strictly increasing columns below ncols in every row.
        local.windows(2).all(|w| {
            let row = &cols[w[0] as usize..w[1] as usize];
            row.windows(2).all(|c| c[0] < c[1]) && row.last().is_none_or(|&c| (c as usize) < ncols)
        })
    });
    if !ok {
        return Err(Error::InvalidInput(
            "internal error: a generator wrote unsorted or out-of-range columns".into(),
        ));
    }
    // SAFETY: row_ptr has nrows + 1 non-decreasing entries from 0 to nnz (built above, checked
    // against u32), col_idx and values have nnz entries, and every column was checked < ncols.
    Ok(unsafe { CsrMatrix::from_parts_unchecked(nrows, ncols, row_ptr, col_idx, values) })
}

// ---------------------------------------------------------------------------------------------
// Structured matrices
// ---------------------------------------------------------------------------------------------

/// The 5-point Laplacian on an `n × n` grid (`n²` rows, natural ordering): 4 on the diagonal and
/// −1 for each of the up to four grid neighbours. Symmetric positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when `n²` or the entry count exceeds `u32`.
pub fn poisson2d<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let rows = check_rows((n as u128) * (n as u128))?;
    let len = |r: usize| {
        let (x, y) = (r % n, r / n);
        1 + (x > 0) as usize + (x + 1 < n) as usize + (y > 0) as usize + (y + 1 < n) as usize
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        let (four, m1) = (T::of_f64(4.0), -T::one());
        for (k, r) in range.enumerate() {
            let (x, y) = (r % n, r / n);
            let mut p = rp[k] as usize;
            let mut put = |c: usize, v: T| {
                cols[p] = c as u32;
                vals[p] = v;
                p += 1;
            };
            if y > 0 {
                put(r - n, m1);
            }
            if x > 0 {
                put(r - 1, m1);
            }
            put(r, four);
            if x + 1 < n {
                put(r + 1, m1);
            }
            if y + 1 < n {
                put(r + n, m1);
            }
        }
    })
}

/// The 7-point Laplacian on an `n × n × n` grid (`n³` rows, natural ordering): 6 on the diagonal
/// and −1 for each of the up to six grid neighbours. Symmetric positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when `n³` or the entry count exceeds `u32`.
pub fn poisson3d<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    stencil7(n, T::of_f64(6.0), -T::one())
}

/// The complex shifted Helmholtz operator `−Δu − k²(1 − i·shift)·u` on the unit cube with an
/// `n × n × n` interior grid (`h = 1/(n+1)`, Dirichlet boundaries, 7-point finite differences,
/// natural ordering), scaled by `h²`: `6 − (kh)² + i·shift·(kh)²` on the diagonal and −1 for
/// each of the up to six grid neighbours.
///
/// The matrix is complex symmetric (`A = Aᵀ`), not Hermitian when `shift ≠ 0`: the problem of
/// frequency-domain acoustics with damping, and with `shift` around 0.5 the "shifted Laplacian"
/// preconditioner of Erlangga, Vuik and Oosterlee. For `k` above the lowest eigenvalue
/// (`kh > 2·sin(πh/2)·√3`) its real part is indefinite. With `shift = 0` it is real
/// (indefinite Helmholtz) and a real `T` can hold it.
///
/// # Errors
/// [`Error::InvalidInput`] when `n³` exceeds `u32`, or when `shift ≠ 0` and `T` is real.
pub fn helmholtz3d<T: Elem>(n: usize, k: f64, shift: f64) -> Result<CsrMatrix<T>> {
    let h = 1.0 / (n as f64 + 1.0);
    let kh2 = (k * h) * (k * h);
    let of = |v: f64| <T::Real as Scalar>::of_f64(v);
    let Some(d) = T::from_parts(of(6.0 - kh2), of(shift * kh2)) else {
        return Err(Error::InvalidInput(format!(
            "helmholtz3d with shift {shift} is complex: generate it as Complex<f32> or \
             Complex<f64>, not {}",
            T::NAME
        )));
    };
    stencil7(n, d, -T::one())
}

/// The 7-point stencil on an `n × n × n` grid: `diag` on the diagonal, `off` for each of the
/// up to six grid neighbours.
fn stencil7<T: Elem>(n: usize, diag: T, off: T) -> Result<CsrMatrix<T>> {
    let rows = check_rows((n as u128).pow(3))?;
    let nn = n * n;
    let len = |r: usize| {
        let (x, y, z) = (r % n, (r / n) % n, r / nn);
        1 + (x > 0) as usize
            + (x + 1 < n) as usize
            + (y > 0) as usize
            + (y + 1 < n) as usize
            + (z > 0) as usize
            + (z + 1 < n) as usize
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        let grid = (n as u64, n as u64, n as u64);
        for (k, r) in range.enumerate() {
            let mut p = rp[k] as usize;
            stencil7_row(r as u64, grid, diag, off, |c, v| {
                cols[p] = c as u32;
                vals[p] = v;
                p += 1;
            });
        }
    })
}

/// Row `r` of the 7-point stencil on an `nx × ny × nz` grid (`x` fastest), in column order:
/// `put(column, off)` for each of the up to six grid neighbours, `put(r, diag)` for the diagonal.
pub(crate) fn stencil7_row<T: Copy>(
    r: u64,
    (nx, ny, nz): (u64, u64, u64),
    diag: T,
    off: T,
    mut put: impl FnMut(u64, T),
) {
    let nxy = nx * ny;
    let (x, y, z) = (r % nx, (r / nx) % ny, r / nxy);
    if z > 0 {
        put(r - nxy, off);
    }
    if y > 0 {
        put(r - nx, off);
    }
    if x > 0 {
        put(r - 1, off);
    }
    put(r, diag);
    if x + 1 < nx {
        put(r + 1, off);
    }
    if y + 1 < ny {
        put(r + nx, off);
    }
    if z + 1 < nz {
        put(r + nxy, off);
    }
}

/// Anisotropic diffusion `−u_xx − ε·u_yy` on an `n × n` grid by bilinear (Q1) finite elements
/// with unit spacing and Dirichlet boundaries: PyAMG's
/// `stencil_grid(diffusion_stencil_2d(epsilon=ε, theta=0), (n, n))`, entry for entry. Node
/// `(x, y)` is row `x·n + y` (PyAMG's ordering, `y` fastest); the 9-point stencil is, times 6,
/// `8(1+ε)` in the centre, `2ε − 4` towards `x ± 1` (the strong direction for small ε),
/// `2 − 4ε` towards `y ± 1` (positive for ε < 1/2: Q1 elements are not an M-matrix there) and
/// `−(1+ε)` on the diagonals. Symmetric positive definite for ε > 0.
///
/// # Errors
/// [`Error::InvalidInput`] when `ε` is not positive and finite or the size exceeds `u32`.
pub fn aniso2d<T: Scalar>(n: usize, eps: f64) -> Result<CsrMatrix<T>> {
    if !(eps > 0.0 && eps.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "aniso2d: EPS = {eps} must be positive and finite"
        )));
    }
    let rows = check_rows((n as u128) * (n as u128))?;
    let (centre, along_x, along_y, corner) = (
        8.0 * (1.0 + eps) / 6.0,
        (2.0 * eps - 4.0) / 6.0,
        (2.0 - 4.0 * eps) / 6.0,
        -(1.0 + eps) / 6.0,
    );
    let span = |c: usize| 1 + (c > 0) as usize + (c + 1 < n) as usize;
    let len = |r: usize| span(r / n) * span(r % n);
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (k, r) in range.enumerate() {
            let (x, y) = (r / n, r % n);
            let mut p = rp[k] as usize;
            for dx in -1i64..=1 {
                let xx = x as i64 + dx;
                if xx < 0 || xx >= n as i64 {
                    continue;
                }
                for dy in -1i64..=1 {
                    let yy = y as i64 + dy;
                    if yy < 0 || yy >= n as i64 {
                        continue;
                    }
                    let v = match (dx != 0, dy != 0) {
                        (false, false) => centre,
                        (true, false) => along_x,
                        (false, true) => along_y,
                        (true, true) => corner,
                    };
                    cols[p] = (xx as usize * n + yy as usize) as u32;
                    vals[p] = T::of_f64(v);
                    p += 1;
                }
            }
        }
    })
}

/// The 27-point stencil on an `n × n × n` grid (`n³` rows, natural ordering): 26 on the diagonal
/// and −1 for each of the up to 26 grid neighbours (the cube around the node). Symmetric positive
/// definite (weakly diagonally dominant, strictly on the boundary).
///
/// # Errors
/// [`Error::InvalidInput`] when `n³` or the entry count exceeds `u32`.
pub fn poisson3d27<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let rows = check_rows((n as u128).pow(3))?;
    let nn = n * n;
    let span = |c: usize| 1 + (c > 0) as usize + (c + 1 < n) as usize;
    let len = |r: usize| span(r % n) * span((r / n) % n) * span(r / nn);
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (k, r) in range.enumerate() {
            let (x, y, z) = ((r % n) as i64, ((r / n) % n) as i64, (r / nn) as i64);
            let mut p = rp[k] as usize;
            let inside = |c: i64| c >= 0 && c < n as i64;
            for dz in -1..=1 {
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        let (xx, yy, zz) = (x + dx, y + dy, z + dz);
                        if !(inside(xx) && inside(yy) && inside(zz)) {
                            continue;
                        }
                        let c = zz as usize * nn + yy as usize * n + xx as usize;
                        cols[p] = c as u32;
                        vals[p] = T::of_f64(if c == r { 26.0 } else { -1.0 });
                        p += 1;
                    }
                }
            }
        }
    })
}

/// The 8×8 stiffness matrix of a unit square Q1 element for plane linear elasticity with Lamé
/// parameters `lame` and `mu` (PyAMG's `q12d_local` with unit spacing). Local nodes are
/// `(0,0), (1,0), (1,1), (0,1)`; local unknown `2·node + component`.
fn q1_elasticity_local(lame: f64, mu: f64) -> [[f64; 8]; 8] {
    let m = lame + 2.0 * mu;
    let r11 = [
        [2., -2., -1., 1.],
        [-2., 2., 1., -1.],
        [-1., 1., 2., -2.],
        [1., -1., -2., 2.],
    ];
    let r12 = [
        [1., 1., -1., -1.],
        [-1., -1., 1., 1.],
        [-1., -1., 1., 1.],
        [1., 1., -1., -1.],
    ];
    let r22 = [
        [2., 1., -1., -2.],
        [1., 2., -2., -1.],
        [-1., -2., 2., 1.],
        [-2., -1., 1., 2.],
    ];
    let mut k = [[0.0; 8]; 8];
    for a in 0..4 {
        for b in 0..4 {
            let (s11, s12, s21, s22) = (
                r11[a][b] / 6.0,
                r12[a][b] / 4.0,
                r12[b][a] / 4.0,
                r22[a][b] / 6.0,
            );
            k[2 * a][2 * b] = m * s11 + mu * s22;
            k[2 * a + 1][2 * b + 1] = mu * s11 + m * s22;
            // K[1::2, 0::2] = mu·R12 + lame·R12ᵀ, and K[0::2, 1::2] its transpose.
            k[2 * a + 1][2 * b] = mu * s12 + lame * s21;
        }
    }
    for a in 0..4 {
        for b in 0..4 {
            k[2 * a][2 * b + 1] = k[2 * b + 1][2 * a];
        }
    }
    k
}

/// 2-D linear elasticity on the unit-spaced `(n + 1) × (n + 1)`-element square, Q1 elements,
/// Young's modulus 10⁵, Poisson ratio 0.3, clamped (Dirichlet) on the whole boundary: PyAMG's
/// `linear_elasticity((n, n))`, entry for entry. The unknowns are the two displacements of the
/// `n × n` interior nodes; node `(i, j)` (1-based, `i` along x) is node number
/// `(j − 1)·n + (i − 1)` and owns rows `2·node` (x) and `2·node + 1` (y). Every row stores the
/// 18 entries of the 3 × 3 neighbouring nodes (fewer at the boundary; some are zero by
/// symmetry). [`elasticity2d_coordinates`] gives the node coordinates for rigid-body modes.
///
/// # Errors
/// [`Error::InvalidInput`] when the size exceeds `u32`.
pub fn elasticity2d<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let rows = check_rows(2 * (n as u128) * (n as u128))?;
    let (e, nu) = (1e5, 0.3);
    let lame = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    let mu = e / (2.0 + 2.0 * nu);
    let k = q1_elasticity_local(lame, mu);
    // The local node at offset (dx, dy) from an element's lower-left corner.
    let local = |dx: usize, dy: usize| match (dx, dy) {
        (0, 0) => 0,
        (1, 0) => 1,
        (1, 1) => 2,
        _ => 3,
    };
    let span = |c: usize| 1 + (c > 1) as usize + (c < n) as usize;
    let len = |r: usize| {
        let node = r / 2;
        let (i, j) = (node % n + 1, node / n + 1);
        2 * span(i) * span(j)
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (kk, r) in range.enumerate() {
            let (node, c) = (r / 2, r % 2);
            let (i, j) = (node % n + 1, node / n + 1);
            // acc[dy][dx][c2] for the neighbour (i + dx − 1, j + dy − 1).
            let mut acc = [[[0.0f64; 2]; 3]; 3];
            for (ei, ej) in [(i - 1, j - 1), (i, j - 1), (i - 1, j), (i, j)] {
                let la = local(i - ei, j - ej);
                for dx in 0..2 {
                    for dy in 0..2 {
                        let lb = local(dx, dy);
                        let (ni, nj) = (ei + dx, ej + dy);
                        for c2 in 0..2 {
                            acc[nj + 1 - j][ni + 1 - i][c2] += k[2 * la + c][2 * lb + c2];
                        }
                    }
                }
            }
            let mut p = rp[kk] as usize;
            for (dy, row) in acc.iter().enumerate() {
                let nj = j + dy - 1;
                if nj < 1 || nj > n {
                    continue;
                }
                for (dx, pair) in row.iter().enumerate() {
                    let ni = i + dx - 1;
                    if ni < 1 || ni > n {
                        continue;
                    }
                    let nb = (nj - 1) * n + (ni - 1);
                    for (c2, &v) in pair.iter().enumerate() {
                        cols[p] = (2 * nb + c2) as u32;
                        vals[p] = T::of_f64(v);
                        p += 1;
                    }
                }
            }
        }
    })
}

/// The coordinates of the nodes of [`elasticity2d`]`(n)`, `[x, y]` per node in node order,
/// centred on the domain as PyAMG centres them (so its rigid-body modes are the same).
pub fn elasticity2d_coordinates(n: usize) -> Vec<[f64; 2]> {
    let h = (n + 1) as f64 / 2.0;
    (0..n * n)
        .map(|node| [(node % n + 1) as f64 - h, (node / n + 1) as f64 - h])
        .collect()
}

/// The 24×24 stiffness matrix of a unit cube trilinear (Q1) element for linear elasticity with
/// Lamé parameters `lame` and `mu`, by 2×2×2 Gauss quadrature (exact for this element). Local
/// node `a + 2b + 4c` sits at `(a, b, c)`; local unknown `3·node + component`.
fn q1_elasticity_local_3d(lame: f64, mu: f64) -> [[f64; 24]; 24] {
    let g = [0.5 - 0.5 / 3f64.sqrt(), 0.5 + 0.5 / 3f64.sqrt()];
    let phi = |a: usize, t: f64| if a == 0 { 1.0 - t } else { t };
    let dphi = |a: usize| if a == 0 { -1.0 } else { 1.0 };
    let mut k = [[0.0; 24]; 24];
    for &x in &g {
        for &y in &g {
            for &z in &g {
                // Gradients of the 8 shape functions at the Gauss point.
                let mut grad = [[0.0; 3]; 8];
                for (node, gr) in grad.iter_mut().enumerate() {
                    let (a, b, c) = (node & 1, (node >> 1) & 1, node >> 2);
                    *gr = [
                        dphi(a) * phi(b, y) * phi(c, z),
                        phi(a, x) * dphi(b) * phi(c, z),
                        phi(a, x) * phi(b, y) * dphi(c),
                    ];
                }
                // B (6×24, Voigt order xx, yy, zz, xy, yz, xz), then Bᵀ·D·B / 8.
                let mut bm = [[0.0; 24]; 6];
                for (node, gr) in grad.iter().enumerate() {
                    let q = 3 * node;
                    bm[0][q] = gr[0];
                    bm[1][q + 1] = gr[1];
                    bm[2][q + 2] = gr[2];
                    bm[3][q] = gr[1];
                    bm[3][q + 1] = gr[0];
                    bm[4][q + 1] = gr[2];
                    bm[4][q + 2] = gr[1];
                    bm[5][q] = gr[2];
                    bm[5][q + 2] = gr[0];
                }
                let mut db = [[0.0; 24]; 6];
                for col in 0..24 {
                    let tr = bm[0][col] + bm[1][col] + bm[2][col];
                    for r in 0..3 {
                        db[r][col] = lame * tr + 2.0 * mu * bm[r][col];
                    }
                    for r in 3..6 {
                        db[r][col] = mu * bm[r][col];
                    }
                }
                for (i, ki) in k.iter_mut().enumerate() {
                    for (j, kij) in ki.iter_mut().enumerate() {
                        *kij += (0..6).map(|r| bm[r][i] * db[r][j]).sum::<f64>() / 8.0;
                    }
                }
            }
        }
    }
    k
}

/// 3-D linear elasticity on the unit-spaced `(n + 1)³`-element cube, trilinear (Q1) hexahedra,
/// Young's modulus 10⁵, Poisson ratio 0.3, clamped on the whole boundary: the 3-D counterpart
/// of [`elasticity2d`]. The unknowns are the three displacements of the `n³` interior nodes;
/// node `(i, j, k)` (1-based) is node number `((k − 1)·n + (j − 1))·n + (i − 1)` and owns rows
/// `3·node + c`. Every row stores the 81 entries of the 3 × 3 × 3 neighbouring nodes (fewer at
/// the boundary). [`elasticity3d_coordinates`] gives the node coordinates for rigid-body modes.
/// Symmetric positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when the size exceeds `u32`.
pub fn elasticity3d<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let rows = check_rows(3 * (n as u128).pow(3))?;
    let (e, nu) = (1e5, 0.3);
    let lame = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    let mu = e / (2.0 + 2.0 * nu);
    let k = q1_elasticity_local_3d(lame, mu);
    let span = |c: usize| 1 + (c > 1) as usize + (c < n) as usize;
    let coords = |node: usize| (node % n + 1, (node / n) % n + 1, node / (n * n) + 1);
    let len = |r: usize| {
        let (i, j, l) = coords(r / 3);
        3 * span(i) * span(j) * span(l)
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (kk, r) in range.enumerate() {
            let (node, c) = (r / 3, r % 3);
            let (i, j, l) = coords(node);
            // acc[dz][dy][dx][c2] for the neighbour (i + dx − 1, j + dy − 1, l + dz − 1).
            let mut acc = [[[[0.0f64; 3]; 3]; 3]; 3];
            for el in 0..8 {
                let (ei, ej, el_) = (i - (el & 1), j - ((el >> 1) & 1), l - (el >> 2));
                let la = (i - ei) + 2 * (j - ej) + 4 * (l - el_);
                for lb in 0..8 {
                    let (dx, dy, dz) = (lb & 1, (lb >> 1) & 1, lb >> 2);
                    let (ni, nj, nl) = (ei + dx, ej + dy, el_ + dz);
                    for c2 in 0..3 {
                        acc[nl + 1 - l][nj + 1 - j][ni + 1 - i][c2] += k[3 * la + c][3 * lb + c2];
                    }
                }
            }
            let mut p = rp[kk] as usize;
            for (dz, plane) in acc.iter().enumerate() {
                let nl = l + dz - 1;
                if nl < 1 || nl > n {
                    continue;
                }
                for (dy, row) in plane.iter().enumerate() {
                    let nj = j + dy - 1;
                    if nj < 1 || nj > n {
                        continue;
                    }
                    for (dx, triple) in row.iter().enumerate() {
                        let ni = i + dx - 1;
                        if ni < 1 || ni > n {
                            continue;
                        }
                        let nb = ((nl - 1) * n + (nj - 1)) * n + (ni - 1);
                        for (c2, &v) in triple.iter().enumerate() {
                            cols[p] = (3 * nb + c2) as u32;
                            vals[p] = T::of_f64(v);
                            p += 1;
                        }
                    }
                }
            }
        }
    })
}

/// The coordinates of the nodes of [`elasticity3d`]`(n)`, `[x, y, z]` per node in node order,
/// centred on the domain (as [`elasticity2d_coordinates`]).
pub fn elasticity3d_coordinates(n: usize) -> Vec<[f64; 3]> {
    let h = (n + 1) as f64 / 2.0;
    (0..n * n * n)
        .map(|node| {
            [
                (node % n + 1) as f64 - h,
                ((node / n) % n + 1) as f64 - h,
                (node / (n * n) + 1) as f64 - h,
            ]
        })
        .collect()
}

/// SplitMix64's output function (Steele, Lea and Flood 2014): a bijective 64-bit mix, the
/// deterministic hash of generated coefficient fields and of the aggregation priorities.
#[inline]
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// 7-point 3-D diffusion `−∇·(k∇u)` on an `n × n × n` grid whose coefficient `k` is 1 or 10⁴ on
/// boxes of 8³ cells, chosen by a hash of the box (no seed: the matrix depends on `n` alone);
/// the face coefficients are harmonic means of the two cells', Dirichlet boundary (a face to the
/// boundary takes the cell's own `k`). The Poisson pattern with values that jump by 10⁴.
/// Symmetric positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when the size exceeds `u32`.
pub fn jumps3d<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let rows = check_rows((n as u128).pow(3))?;
    let coef = |x: usize, y: usize, z: usize| {
        let cell = ((z / 8) * 1_000_003 + (y / 8)) * 1_000_033 + x / 8;
        if splitmix64(cell as u64) & 1 == 1 {
            1e4
        } else {
            1.0
        }
    };
    let at = |r: usize| (r % n, (r / n) % n, r / (n * n));
    let len = |r: usize| {
        let (x, y, z) = at(r);
        1 + [x, y, z]
            .iter()
            .map(|&c| (c > 0) as usize + (c + 1 < n) as usize)
            .sum::<usize>()
    };
    build(rows, rows, len, |_, range, rp, cols, vals| {
        for (kk, r) in range.enumerate() {
            let (x, y, z) = at(r);
            let k = coef(x, y, z);
            let face = |kn: f64| 2.0 * k * kn / (k + kn);
            // The six faces: (neighbour row if inside, its coefficient).
            let nbs = [
                (z > 0).then(|| (r - n * n, coef(x, y, z.wrapping_sub(1)))),
                (y > 0).then(|| (r - n, coef(x, y.wrapping_sub(1), z))),
                (x > 0).then(|| (r - 1, coef(x.wrapping_sub(1), y, z))),
                (x + 1 < n).then(|| (r + 1, coef(x + 1, y, z))),
                (y + 1 < n).then(|| (r + n, coef(x, y + 1, z))),
                (z + 1 < n).then(|| (r + n * n, coef(x, y, z + 1))),
            ];
            let diag: f64 = nbs.iter().map(|o| o.map_or(k, |(_, kn)| face(kn))).sum();
            let mut p = rp[kk] as usize;
            let mut put = |c: usize, v: f64| {
                cols[p] = c as u32;
                vals[p] = T::of_f64(v);
                p += 1;
            };
            for (q, o) in nbs.iter().enumerate() {
                if q == 3 {
                    put(r, diag);
                }
                if let Some((c, kn)) = *o {
                    put(c, -face(kn));
                }
            }
        }
    })
}

/// The 1-D Laplacian: `n × n` tridiagonal with 2 on the diagonal and −1 beside it. Symmetric
/// positive definite.
///
/// # Errors
/// [`Error::InvalidInput`] when `n` exceeds `u32`.
pub fn tridiag<T: Scalar>(n: usize) -> Result<CsrMatrix<T>> {
    let len = |r: usize| 1 + (r > 0) as usize + (r + 1 < n) as usize;
    build(n, n, len, |_, range, rp, cols, vals| {
        for (k, r) in range.enumerate() {
            let p = rp[k] as usize;
            for (q, c) in (r.saturating_sub(1)..(r + 2).min(n)).enumerate() {
                cols[p + q] = c as u32;
                vals[p + q] = if c == r { T::of_f64(2.0) } else { -T::one() };
            }
        }
    })
}

/// An `n × n` diagonal matrix with values uniform in [1, 2).
///
/// # Errors
/// [`Error::InvalidInput`] when `n` exceeds `u32`.
pub fn diag<T: Scalar>(n: usize, seed: u64) -> Result<CsrMatrix<T>> {
    build(
        n,
        n,
        |_| 1,
        |chunk, range, _, cols, vals| {
            let mut rng = chunk_rng(seed, chunk, 1);
            for (k, r) in range.enumerate() {
                cols[k] = r as u32;
                vals[k] = T::of_f64(1.0 + rng.gen::<f64>());
            }
        },
    )
}

/// An `n × n` matrix with every entry stored, values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `n²` exceeds `u32`.
pub fn dense<T: Scalar>(n: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if (n as u128) * (n as u128) > u32::MAX as u128 {
        return Err(too_big("entries", (n as u128) * (n as u128)));
    }
    build(
        n,
        n,
        |_| n,
        |chunk, range, rp, cols, vals| {
            let mut rng = chunk_rng(seed, chunk, 1);
            for &p in &rp[..range.len()] {
                let p = p as usize;
                for c in 0..n {
                    cols[p + c] = c as u32;
                    vals[p + c] = T::of_f64(sym_unit(&mut rng));
                }
            }
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Random matrices
// ---------------------------------------------------------------------------------------------

/// Uniform in [−1, 1): 53 random bits scaled exactly (cheaper than `gen_range`).
#[inline]
fn sym_unit(rng: &mut ChaCha8Rng) -> f64 {
    rng.gen::<f64>() * 2.0 - 1.0
}

/// Writes `out.len()` distinct sorted values drawn uniformly from `0..n` (a uniformly random
/// subset) using the column distribution `cols` over `0..n`; `scratch` is reused between calls.
fn sample_distinct(
    rng: &mut ChaCha8Rng,
    n: usize,
    cols: &Uniform<u32>,
    out: &mut [u32],
    scratch: &mut Vec<u32>,
) {
    let k = out.len();
    // Draw the smaller of the subset and its complement.
    let m = k.min(n - k);
    scratch.clear();
    while scratch.len() < m {
        let need = m - scratch.len();
        for _ in 0..need {
            scratch.push(cols.sample(rng));
        }
        scratch.sort_unstable();
        scratch.dedup();
    }
    if m == k {
        out.copy_from_slice(scratch);
    } else {
        // `scratch` holds the excluded columns; write the others in order.
        let mut skip = scratch.iter().peekable();
        let mut p = 0;
        for c in 0..n as u32 {
            if skip.peek() == Some(&&c) {
                skip.next();
            } else {
                out[p] = c;
                p += 1;
            }
        }
    }
}

fn random_rows<T: Scalar>(
    nrows: usize,
    ncols: usize,
    seed: u64,
    len: impl Fn(usize) -> usize,
) -> Result<CsrMatrix<T>> {
    build(nrows, ncols, len, |chunk, range, rp, cols, vals| {
        let mut rng = chunk_rng(seed, chunk, 1);
        let mut scratch = Vec::new();
        let dist = Uniform::new(0, (ncols as u32).max(1));
        for k in 0..range.len() {
            let (a, b) = (rp[k] as usize, rp[k + 1] as usize);
            sample_distinct(&mut rng, ncols, &dist, &mut cols[a..b], &mut scratch);
            for v in &mut vals[a..b] {
                *v = T::of_f64(sym_unit(&mut rng));
            }
        }
    })
}

/// An `n × n` matrix whose every row holds exactly `k` distinct, uniformly random columns (sorted)
/// with values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `k > n` or the size exceeds `u32`.
pub fn random<T: Scalar>(n: usize, k: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if k > n {
        return Err(Error::InvalidInput(format!(
            "random:{n}:{k}: a row of {n} columns cannot hold {k} distinct entries"
        )));
    }
    random_rows(n, n, seed, |_| k)
}

/// An `n × n` matrix of short rows with a few dense ones: every row holds `k` distinct,
/// uniformly random columns, except `d` rows spread evenly over the matrix (row
/// `i·⌊n/d⌋ + ⌊n/(2d)⌋` for `i < d`) that hold `l` each. Values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `k > n`, `l > n`, `d > n` or the size exceeds `u32`.
pub fn denserows<T: Scalar>(
    n: usize,
    k: usize,
    d: usize,
    l: usize,
    seed: u64,
) -> Result<CsrMatrix<T>> {
    if k > n || l > n || d > n {
        return Err(Error::InvalidInput(format!(
            "denserows:{n}:{k}:{d}:{l}: K, D and L must not exceed N"
        )));
    }
    let (step, off) = (
        n.checked_div(d).unwrap_or(0),
        n.checked_div(2 * d).unwrap_or(0),
    );
    let dense = |i: usize| d > 0 && i >= off && (i - off) % step == 0 && (i - off) / step < d;
    random_rows(n, n, seed, |i| if dense(i) { l } else { k })
}

/// A short, wide `m × n` matrix (typically `n ≫ m`): every row holds `k` distinct, uniformly
/// random columns of `n`, values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `k > n` or the size exceeds `u32`.
pub fn wide<T: Scalar>(m: usize, n: usize, k: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if k > n {
        return Err(Error::InvalidInput(format!(
            "wide:{m}:{n}:{k}: a row of {n} columns cannot hold {k} distinct entries"
        )));
    }
    random_rows(m, n, seed, |_| k)
}

/// SplitMix64's output function: the per-row and per-entry hashes of [`emptyrows`] and [`rmat`].
#[inline]
fn mix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A mostly-empty `n × n` matrix: row `i` is empty when a hash of `(seed, i)` modulo 100 is
/// below `pct`, and otherwise holds `k` distinct, uniformly random columns; values uniform in
/// [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `pct > 100`, `k > n` or the size exceeds `u32`.
pub fn emptyrows<T: Scalar>(n: usize, pct: usize, k: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if pct > 100 || k > n {
        return Err(Error::InvalidInput(format!(
            "emptyrows:{n}:{pct}:{k}: PCT must be at most 100 and K at most N"
        )));
    }
    let key = mix64(seed ^ 0xE3);
    random_rows(n, n, seed, |i| {
        if mix64(key ^ i as u64) % 100 < pct as u64 {
            0
        } else {
            k
        }
    })
}

/// An R-MAT graph's adjacency matrix (Chakrabarti, Zhan and Faloutsos 2004) with Graph500's
/// probabilities `a = 0.57, b = c = 0.19, d = 0.05`: `ef · 2^scale` edges are drawn, each by
/// choosing one quadrant per bit of the row and column; repeated edges are merged (so the
/// matrix has at most that many entries). Row lengths follow a heavy-tailed distribution and
/// columns cluster at low indices, as in web and social graphs. Values come from a hash of the
/// seed and the entry, uniform in [−1, 1), so the matrix depends only on the arguments.
///
/// # Errors
/// [`Error::InvalidInput`] when `scale > 31` or the edge count exceeds `u32`.
pub fn rmat<T: Scalar>(scale: usize, ef: usize, seed: u64) -> Result<CsrMatrix<T>> {
    rmat_with(scale, ef, [0.57, 0.19, 0.19], seed)
}

/// [`rmat`] with the quadrant probabilities `[a, b, c]` (and `d = 1 − a − b − c`): smaller `a`
/// gives a flatter degree distribution.
///
/// # Errors
/// As [`rmat`]; also when a probability is negative or `a + b + c > 1`.
pub fn rmat_with<T: Scalar>(
    scale: usize,
    ef: usize,
    [pa, pb, pc]: [f64; 3],
    seed: u64,
) -> Result<CsrMatrix<T>> {
    if !(pa >= 0.0 && pb >= 0.0 && pc >= 0.0 && pa + pb + pc <= 1.0) {
        return Err(Error::InvalidInput(format!(
            "rmat:{scale}:{ef}:{pa}:{pb}:{pc}: A, B and C must be non-negative with A + B + C ≤ 1"
        )));
    }
    let (t1, t2, t3) = (pa, pa + pb, pa + pb + pc);
    if scale > 31 {
        return Err(Error::InvalidInput(format!(
            "rmat:{scale}:{ef}: SCALE must be at most 31 (2^SCALE rows)"
        )));
    }
    let n = 1usize << scale;
    let edges = (n as u128) * ef as u128;
    if edges > u32::MAX as u128 {
        return Err(too_big("entries", edges));
    }
    let edges = edges as usize;
    const EDGE_CHUNK: usize = 1 << 16;
    let mut e: Vec<u64> = vec![0; edges];
    e.par_chunks_mut(EDGE_CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = chunk_rng(seed, chunk, 2);
            for slot in out {
                let (mut r, mut c) = (0u64, 0u64);
                for _ in 0..scale {
                    let u: f64 = rng.gen();
                    let (dr, dc) = if u < t1 {
                        (0, 0)
                    } else if u < t2 {
                        (0, 1)
                    } else if u < t3 {
                        (1, 0)
                    } else {
                        (1, 1)
                    };
                    r = 2 * r + dr;
                    c = 2 * c + dc;
                }
                *slot = (r << 32) | c;
            }
        });
    e.par_sort_unstable();
    e.dedup();
    let mut row_ptr = vec![0u32; n + 1];
    for &x in &e {
        row_ptr[(x >> 32) as usize + 1] += 1;
    }
    for i in 0..n {
        row_ptr[i + 1] += row_ptr[i];
    }
    let key = mix64(seed ^ 0x7A7);
    let col: Vec<u32> = e.par_iter().map(|&x| x as u32).collect();
    let val: Vec<T> = e
        .par_iter()
        .map(|&x| T::of_f64((mix64(key ^ x) >> 11) as f64 / (1u64 << 52) as f64 - 1.0))
        .collect();
    CsrMatrix::try_from_parts(n, n, row_ptr, col, val)
}

/// The expected mean row length of `powerlaw:n:alpha` before rounding (see the module docs).
pub fn powerlaw_mean(n: usize, alpha: f64) -> f64 {
    capped_pareto_mean(powerlaw_xmin(n, alpha), n as f64, alpha - 1.0)
}

/// `E[min(X, cap)]` for a Pareto variable with minimum `xm` and tail exponent `beta`
/// (`P(X > x) = (xm/x)^beta`).
fn capped_pareto_mean(xm: f64, cap: f64, beta: f64) -> f64 {
    if xm >= cap {
        return cap;
    }
    if (beta - 1.0).abs() < 1e-12 {
        xm + xm * (cap / xm).ln()
    } else {
        xm + xm.powf(beta) * (cap.powf(1.0 - beta) - xm.powf(1.0 - beta)) / (1.0 - beta)
    }
}

/// The `x_min ≥ 1` whose capped mean is 12 (or `n` for small `n`), by bisection.
fn powerlaw_xmin(n: usize, alpha: f64) -> f64 {
    let (cap, beta) = (n.max(1) as f64, alpha - 1.0);
    let target = cap.min(12.0);
    if capped_pareto_mean(1.0, cap, beta) >= target {
        return 1.0;
    }
    let (mut lo, mut hi) = (1.0, cap);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if capped_pareto_mean(mid, cap, beta) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// An `n × n` matrix with power-law ("Zipf") row lengths of exponent `alpha` (see the module
/// docs), each row's columns distinct, uniformly random and sorted, values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `alpha ≤ 1` (or not finite) or the size exceeds `u32`.
pub fn powerlaw<T: Scalar>(n: usize, alpha: f64, seed: u64) -> Result<CsrMatrix<T>> {
    if !(alpha > 1.0 && alpha.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "powerlaw:{n}:{alpha}: ALPHA must be a finite number greater than 1"
        )));
    }
    check_rows(n as u128)?;
    let xm = powerlaw_xmin(n, alpha);
    let inv = -1.0 / (alpha - 1.0);
    // Row lengths first, in parallel chunks with their own streams (phase 0).
    let mut lens = vec![0u32; n];
    lens.par_chunks_mut(CHUNK_ROWS)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = chunk_rng(seed, chunk, 0);
            for l in out {
                let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
                let x = (xm * u.powf(inv)).floor();
                *l = if x >= n as f64 {
                    n as u32
                } else {
                    x.max(1.0) as u32
                };
            }
        });
    random_rows(n, n, seed, |i| lens[i] as usize)
}

// ---------------------------------------------------------------------------------------------
// Point clouds, blocks, Zipf rows, arrows
// ---------------------------------------------------------------------------------------------

/// How [`knn3d`] numbers its points (and so how far a row's columns stray from its index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointOrder {
    /// Sorted by the `x` coordinate: neighbours lie in a slab of about `N^(2/3)` indices.
    X,
    /// Sorted along a Z-order (Morton) curve: most neighbours lie close in index.
    Morton,
    /// In the order drawn: neighbours are anywhere.
    Random,
}

/// Interleaves the low 21 bits of `v` with two zero bits between each (Morton order).
fn spread3(v: u64) -> u64 {
    let mut x = v & 0x1f_ffff;
    x = (x | (x << 32)) & 0x1f_0000_0000_ffff;
    x = (x | (x << 16)) & 0x1f_0000_ff00_00ff;
    x = (x | (x << 8)) & 0x100f_00f0_0f00_f00f;
    x = (x | (x << 4)) & 0x10c3_0c30_c30c_30c3;
    x = (x | (x << 2)) & 0x1249_2492_4924_9249;
    x
}

/// The kNN graph of `n` points drawn uniformly in the unit cube: row `i` holds the `k` nearest
/// other points (columns sorted), found among the grid cells around point `i` (cells of about
/// two points, the search widened until the `k`-th distance is inside the searched cube, so the
/// neighbours are exact). `order` numbers the points; values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `k ≥ n` (and `n > 0`) or the size exceeds `u32`.
pub fn knn3d<T: Scalar>(n: usize, k: usize, order: PointOrder, seed: u64) -> Result<CsrMatrix<T>> {
    if n > 0 && k >= n {
        return Err(Error::InvalidInput(format!(
            "knn3d:{n}:{k}: K must be smaller than N (a point is not its own neighbour)"
        )));
    }
    check_rows(n as u128)?;
    if (n as u128) * (k as u128) > u32::MAX as u128 {
        return Err(too_big("entries", (n as u128) * (k as u128)));
    }
    let mut pts = vec![[0f32; 3]; n];
    pts.par_chunks_mut(CHUNK_ROWS)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = chunk_rng(seed, chunk, 0);
            for p in out {
                *p = [rng.gen(), rng.gen(), rng.gen()];
            }
        });
    match order {
        PointOrder::X => pts.par_sort_unstable_by(|a, b| {
            a[0].total_cmp(&b[0])
                .then(a[1].total_cmp(&b[1]))
                .then(a[2].total_cmp(&b[2]))
        }),
        PointOrder::Morton => {
            let q = |c: f32| ((c as f64 * (1u64 << 21) as f64) as u64).min((1 << 21) - 1);
            pts.par_sort_unstable_by_key(|p| {
                spread3(q(p[0])) | (spread3(q(p[1])) << 1) | (spread3(q(p[2])) << 2)
            })
        }
        PointOrder::Random => {}
    }
    let g = ((n as f64 / 2.0).cbrt().floor() as usize).max(1);
    let cell_of = |c: f32| ((c as f64 * g as f64) as usize).min(g - 1);
    let cell = |p: &[f32; 3]| (cell_of(p[2]) * g + cell_of(p[1])) * g + cell_of(p[0]);
    let mut start = vec![0u32; g * g * g + 1];
    for p in &pts {
        start[cell(p) + 1] += 1;
    }
    for c in 0..g * g * g {
        start[c + 1] += start[c];
    }
    let mut items = vec![0u32; n];
    {
        let mut next = start.clone();
        for (i, p) in pts.iter().enumerate() {
            let c = cell(p);
            items[next[c] as usize] = i as u32;
            next[c] += 1;
        }
    }
    let h = 1.0 / g as f64;
    let (pts, start, items) = (&pts, &start, &items);
    build(
        n,
        n,
        |_| k,
        move |chunk, range, rp, cols, vals| {
            let mut rng = chunk_rng(seed, chunk, 1);
            let mut cand: Vec<(f32, u32)> = Vec::new();
            for (j, i) in range.clone().enumerate() {
                let p = pts[i];
                let (cx, cy, cz) = (cell_of(p[0]), cell_of(p[1]), cell_of(p[2]));
                let mut r = 1usize;
                loop {
                    cand.clear();
                    let lo = |c: usize| c.saturating_sub(r);
                    let hi = |c: usize| (c + r).min(g - 1);
                    for z in lo(cz)..=hi(cz) {
                        for y in lo(cy)..=hi(cy) {
                            for x in lo(cx)..=hi(cx) {
                                let c = (z * g + y) * g + x;
                                for &q in &items[start[c] as usize..start[c + 1] as usize] {
                                    if q as usize != i {
                                        let o = pts[q as usize];
                                        let d = (o[0] - p[0]).powi(2)
                                            + (o[1] - p[1]).powi(2)
                                            + (o[2] - p[2]).powi(2);
                                        cand.push((d, q));
                                    }
                                }
                            }
                        }
                    }
                    if cand.len() >= k {
                        if k > 0 {
                            cand.select_nth_unstable_by(k - 1, |a, b| {
                                a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                            });
                        }
                        // Exact when the k-th distance lies within the searched cube's inner ball.
                        let kth = if k > 0 { cand[k - 1].0 as f64 } else { 0.0 };
                        if kth.sqrt() <= r as f64 * h || r >= g {
                            break;
                        }
                    }
                    if r >= g {
                        break;
                    }
                    r += 1;
                }
                let (a, b) = (rp[j] as usize, rp[j + 1] as usize);
                let row = &mut cols[a..b];
                for (slot, c) in row.iter_mut().zip(&cand[..k]) {
                    *slot = c.1;
                }
                row.sort_unstable();
                for v in &mut vals[a..b] {
                    *v = T::of_f64(sym_unit(&mut rng));
                }
            }
        },
    )
}

/// Dense `b × b` blocks on a point cloud: the pattern of [`knn3d`]`(n, k, order, seed)` plus the
/// diagonal, each entry expanded to a dense `b × b` block (`b` unknowns per point, interleaved:
/// row `b·i + s` is unknown `s` of point `i`), so `n·b` rows of `(k + 1)·b` entries. Values from
/// a hash of the seed and the entry, uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `b = 0`, `k ≥ n` or the size exceeds `u32`.
pub fn knn_blocks<T: Scalar>(
    n: usize,
    k: usize,
    b: usize,
    order: PointOrder,
    seed: u64,
) -> Result<CsrMatrix<T>> {
    if b == 0 {
        return Err(Error::InvalidInput(format!(
            "knnblocks:{n}:{k}:{b}: the block size B must be positive"
        )));
    }
    let rows = check_rows(n as u128 * b as u128)?;
    let per_row = (k as u128 + 1) * b as u128;
    if rows as u128 * per_row > u32::MAX as u128 {
        return Err(too_big("entries", rows as u128 * per_row));
    }
    let g: CsrMatrix<f32> = knn3d(n, k, order, seed)?;
    let key = mix64(seed ^ 0xC10D);
    let g = &g;
    build(
        rows,
        rows,
        |_| (k + 1) * b,
        move |_, range, rp, cols, vals| {
            let mut pts: Vec<u32> = Vec::with_capacity(k + 1);
            for (j, i) in range.clone().enumerate() {
                let p = i / b;
                pts.clear();
                pts.extend_from_slice(g.row(p).0);
                let at = pts.partition_point(|&q| (q as usize) < p);
                pts.insert(at, p as u32);
                let (a, e) = (rp[j] as usize, rp[j + 1] as usize);
                for (slot, c) in cols[a..e].iter_mut().zip(
                    pts.iter()
                        .flat_map(|&q| (0..b as u32).map(move |t| q * b as u32 + t)),
                ) {
                    *slot = c;
                }
                for (v, &c) in vals[a..e].iter_mut().zip(&cols[a..e]) {
                    let h = mix64(key ^ ((i as u64) << 32 | c as u64));
                    *v = T::of_f64((h >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
                }
            }
        },
    )
}

/// A matrix of dense `b × b` blocks: `⌈n/b⌉` block rows, each holding `d` blocks, the diagonal
/// one and `d − 1` at distinct random block columns; values from a hash of the seed and the
/// entry, uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `b = 0`, `d = 0`, `d` exceeds the number of block columns or the
/// size exceeds `u32`.
pub fn blocks<T: Scalar>(n: usize, b: usize, d: usize, seed: u64) -> Result<CsrMatrix<T>> {
    let nb = if b == 0 { 0 } else { n.div_ceil(b) };
    if b == 0 || d == 0 || d > nb {
        return Err(Error::InvalidInput(format!(
            "blocks:{n}:{b}:{d}: B and D must be positive and D at most ⌈N/B⌉"
        )));
    }
    let rows = check_rows((nb as u128) * (b as u128))?;
    if (rows as u128) * (b as u128) * (d as u128) > u32::MAX as u128 {
        return Err(too_big("entries", (rows as u128) * (b * d) as u128));
    }
    let mut rng = chunk_rng(seed, 0, 3);
    let dist = Uniform::new(0, nb as u32);
    let mut bcols: Vec<u32> = Vec::with_capacity(nb * d);
    let mut pick = Vec::with_capacity(d);
    for br in 0..nb as u32 {
        pick.clear();
        pick.push(br);
        while pick.len() < d {
            let c = dist.sample(&mut rng);
            if !pick.contains(&c) {
                pick.push(c);
            }
        }
        pick.sort_unstable();
        bcols.extend_from_slice(&pick);
    }
    let key = mix64(seed ^ 0xB10C);
    let bcols = &bcols;
    build(
        rows,
        rows,
        |_| b * d,
        move |_, range, rp, cols, vals| {
            for (j, i) in range.clone().enumerate() {
                let (a, e) = (rp[j] as usize, rp[j + 1] as usize);
                let bc = &bcols[(i / b) * d..(i / b + 1) * d];
                for (slot, c) in cols[a..e].iter_mut().zip(
                    bc.iter()
                        .flat_map(|&c| (0..b as u32).map(move |t| c * b as u32 + t)),
                ) {
                    *slot = c;
                }
                for (v, &c) in vals[a..e].iter_mut().zip(&cols[a..e]) {
                    let h = mix64(key ^ ((i as u64) << 32 | c as u64));
                    *v = T::of_f64((h >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
                }
            }
        },
    )
}

/// The window of columns of row `i` of an `n`-column matrix within `w` of the diagonal
/// (`w = 0`: every column), clipped to `lo..n`.
fn window(i: usize, n: usize, w: usize, lo: usize) -> Range<usize> {
    if w == 0 {
        lo..n
    } else {
        i.saturating_sub(w).max(lo)..(i + w + 1).min(n).max(lo)
    }
}

/// Writes `out.len()` distinct sorted random columns of `range` (at most its length).
fn sample_in(rng: &mut ChaCha8Rng, range: Range<usize>, out: &mut [u32], scratch: &mut Vec<u32>) {
    let n = range.len();
    if out.is_empty() || n == 0 {
        return;
    }
    let dist = Uniform::new(0, n as u32);
    sample_distinct(rng, n, &dist, out, scratch);
    for c in out {
        *c += range.start as u32;
    }
}

/// An `n × n` matrix whose row lengths follow a discrete Zipf law, `P(L = k) ∝ k^(−s)` for
/// `k` in `1..=max` (clipped to the row's window), with distinct random columns within `w` of
/// the diagonal (`w = 0`: anywhere); values uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `s` is not finite and positive, `max = 0`, `max > n` or the size
/// exceeds `u32`.
pub fn zipf<T: Scalar>(n: usize, s: f64, max: usize, w: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if !(s > 0.0 && s.is_finite()) || max == 0 || max > n {
        return Err(Error::InvalidInput(format!(
            "zipf:{n}:{s}:{max}:{w}: S must be a positive number and MAX in 1..=N"
        )));
    }
    check_rows(n as u128)?;
    let mut cdf: Vec<f64> = (1..=max).map(|k| (k as f64).powf(-s)).collect();
    for k in 1..max {
        cdf[k] += cdf[k - 1];
    }
    let total = cdf[max - 1];
    let mut lens = vec![0u32; n];
    lens.par_chunks_mut(CHUNK_ROWS)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = chunk_rng(seed, chunk, 0);
            let base = chunk * CHUNK_ROWS;
            for (j, l) in out.iter_mut().enumerate() {
                let u = rng.gen::<f64>() * total;
                let k = cdf.partition_point(|&c| c < u) + 1;
                *l = k.min(window(base + j, n, w, 0).len()) as u32;
            }
        });
    let lens = &lens;
    build(
        n,
        n,
        |i| lens[i] as usize,
        move |chunk, range, rp, cols, vals| {
            let mut rng = chunk_rng(seed, chunk, 1);
            let mut scratch = Vec::new();
            for (j, i) in range.clone().enumerate() {
                let (a, b) = (rp[j] as usize, rp[j + 1] as usize);
                sample_in(&mut rng, window(i, n, w, 0), &mut cols[a..b], &mut scratch);
                for v in &mut vals[a..b] {
                    *v = T::of_f64(sym_unit(&mut rng));
                }
            }
        },
    )
}

/// An arrow matrix: the first `w` rows hold every column, every other row holds the first `w`
/// columns and `k` distinct random columns within `2k` of the diagonal (at least `w`); values
/// uniform in [−1, 1).
///
/// # Errors
/// [`Error::InvalidInput`] when `w > n` or the size exceeds `u32`.
pub fn arrow<T: Scalar>(n: usize, w: usize, k: usize, seed: u64) -> Result<CsrMatrix<T>> {
    if w > n {
        return Err(Error::InvalidInput(format!(
            "arrow:{n}:{w}:{k}: W must not exceed N"
        )));
    }
    check_rows(n as u128)?;
    let band = |i: usize| window(i, n, 2 * k.max(1), w);
    let len = move |i: usize| if i < w { n } else { w + k.min(band(i).len()) };
    build(n, n, len, move |chunk, range, rp, cols, vals| {
        let mut rng = chunk_rng(seed, chunk, 1);
        let mut scratch = Vec::new();
        for (j, i) in range.clone().enumerate() {
            let (a, b) = (rp[j] as usize, rp[j + 1] as usize);
            let row = &mut cols[a..b];
            if i < w {
                for (c, slot) in row.iter_mut().enumerate() {
                    *slot = c as u32;
                }
            } else {
                for (c, slot) in row[..w].iter_mut().enumerate() {
                    *slot = c as u32;
                }
                sample_in(&mut rng, band(i), &mut row[w..], &mut scratch);
            }
            for v in &mut vals[a..b] {
                *v = T::of_f64(sym_unit(&mut rng));
            }
        }
    })
}

#[cfg(test)]
mod kind_tests;

#[cfg(test)]
mod amg_problem_tests {
    use super::*;

    fn dense(a: &CsrMatrix<f64>) -> Vec<Vec<f64>> {
        a.to_dense()
    }

    /// Entries printed by PyAMG 5.4.1 (`linear_elasticity((3, 3))` and
    /// `stencil_grid(diffusion_stencil_2d(epsilon=0.001, theta=0), (4, 4))`).
    #[test]
    fn elasticity_and_aniso_match_pyamg() {
        let a = elasticity2d::<f64>(3).unwrap();
        assert_eq!((a.nrows(), a.nnz()), (18, 196));
        assert!(a.is_symmetric());
        let d = dense(&a);
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-8 * y.abs().max(1.0);
        let row0 = [
            230769.23076923,
            0.0,
            -76923.07692308,
            0.0,
            0.0,
            0.0,
            19230.76923077,
            0.0,
        ];
        for (k, &v) in row0.iter().enumerate() {
            assert!(close(d[0][k], v), "A[0,{k}] = {} vs {v}", d[0][k]);
        }
        let row9 = [
            -24038.46153846,
            -28846.15384615,
            0.0,
            -76923.07692308,
            24038.46153846,
            -28846.15384615,
            0.0,
            19230.76923077,
            0.0,
            230769.23076923,
            0.0,
            19230.76923077,
            24038.46153846,
            -28846.15384615,
            0.0,
            -76923.07692308,
            -24038.46153846,
            -28846.15384615,
        ];
        for (k, &v) in row9.iter().enumerate() {
            assert!(close(d[9][k], v), "A[9,{k}] = {} vs {v}", d[9][k]);
        }
        let fro: f64 = a.values().iter().map(|v| v * v).sum();
        assert!(close(fro, 1154585798816.5684), "{fro}");
        let xy = elasticity2d_coordinates(3);
        assert_eq!((xy[0], xy[4]), ([-1.0, -1.0], [0.0, 0.0]));

        let s = aniso2d::<f64>(4, 0.001).unwrap();
        assert_eq!(s.nnz(), 100);
        let d = dense(&s);
        let row5 = [
            -0.16683333,
            -0.66633333,
            -0.16683333,
            0.0,
            0.33266667,
            1.33466667,
            0.33266667,
            0.0,
            -0.16683333,
            -0.66633333,
            -0.16683333,
        ];
        for (k, &v) in row5.iter().enumerate() {
            assert!((d[5][k] - v).abs() < 1e-8, "S[5,{k}] = {} vs {v}", d[5][k]);
        }
        let fro: f64 = s.values().iter().map(|v| v * v).sum();
        assert!((fro - 42.8153761111111).abs() < 1e-9);
        assert!(aniso2d::<f64>(4, 0.0).is_err());
        let p = poisson3d27::<f64>(3).unwrap();
        assert_eq!((p.nrows(), p.nnz()), (27, 343));
        assert!(p.is_symmetric());
        assert_eq!(from_spec::<f64>("elasticity2d:3", 0).unwrap(), a);
        assert_eq!(from_spec::<f64>("aniso2d:4:1e-3", 0).unwrap(), s);
        assert_eq!(from_spec::<f64>("poisson3d27:3", 0).unwrap(), p);
    }
}

#[cfg(test)]
mod irregular_tests {
    use super::*;

    #[test]
    fn emptyrows_has_the_asked_share_of_empty_rows() {
        let a: CsrMatrix<f64> = from_spec("emptyrows:20000:90:20", 3).unwrap();
        let s = a.row_stats();
        let share = s.empty_rows as f64 / 20000.0;
        assert!((0.88..=0.92).contains(&share), "{share}");
        assert_eq!(s.max, 20);
        assert_eq!(a, emptyrows(20000, 90, 20, 3).unwrap());
        assert_ne!(a, emptyrows(20000, 90, 20, 4).unwrap());
        assert!(from_spec::<f64>("emptyrows:10:101:2", 0).is_err());
        let full: CsrMatrix<f64> = from_spec("emptyrows:100:0:3", 0).unwrap();
        assert_eq!(full.nnz(), 300);
    }

    #[test]
    fn rmat_is_skewed_deterministic_and_canonical() {
        let a: CsrMatrix<f64> = from_spec("rmat:14:16", 5).unwrap();
        assert_eq!(a.nrows(), 1 << 14);
        assert!(a.nnz() <= 16 << 14 && a.nnz() > 8 << 14, "{}", a.nnz());
        let s = a.row_stats();
        // Heavy tail: the longest row is far above the mean; many rows are empty.
        assert!(s.max as f64 > 20.0 * s.mean, "{s:?}");
        assert!(s.empty_rows > 0);
        for i in 0..a.nrows() {
            let (c, _) = a.row(i);
            assert!(
                c.windows(2).all(|w| w[0] < w[1]),
                "row {i} not strictly sorted"
            );
        }
        assert!(a.values().iter().all(|v| (-1.0..1.0).contains(v)));
        assert_eq!(a, rmat(14, 16, 5).unwrap());
        assert!(from_spec::<f64>("rmat:32:1", 0).is_err());
    }
}

#[cfg(test)]
mod unseen_kind_tests {
    use super::*;

    fn sorted_in_range(a: &CsrMatrix<f64>) {
        for i in 0..a.nrows() {
            let (c, _) = a.row(i);
            assert!(c.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
            assert!(c.iter().all(|&c| (c as usize) < a.ncols()));
        }
    }

    #[test]
    fn knn3d_rows_hold_the_nearest_points() {
        for order in ["x", "morton", "random"] {
            let spec = format!("knn3d:3000:8:{order}");
            let a: CsrMatrix<f64> = from_spec(&spec, 4).unwrap();
            assert_eq!((a.nrows(), a.nnz()), (3000, 3000 * 8), "{spec}");
            sorted_in_range(&a);
            assert!((0..a.nrows()).all(|i| !a.row(i).0.contains(&(i as u32))));
            assert_eq!(a, from_spec(&spec, 4).unwrap());
        }
        // Brute force on a small cloud: the same neighbour sets. The points are regenerated the
        // same way (chunk stream 0, sorted by x).
        let n = 500;
        let a: CsrMatrix<f64> = knn3d(n, 6, PointOrder::X, 11).unwrap();
        let mut rng = chunk_rng(11, 0, 0);
        let mut pts: Vec<[f32; 3]> = (0..n).map(|_| [rng.gen(), rng.gen(), rng.gen()]).collect();
        pts.sort_unstable_by(|a, b| {
            a[0].total_cmp(&b[0])
                .then(a[1].total_cmp(&b[1]))
                .then(a[2].total_cmp(&b[2]))
        });
        for i in 0..n {
            let p = pts[i];
            let mut d: Vec<(f32, u32)> = (0..n)
                .filter(|&q| q != i)
                .map(|q| {
                    let o = pts[q];
                    let d = (o[0] - p[0]).powi(2) + (o[1] - p[1]).powi(2) + (o[2] - p[2]).powi(2);
                    (d, q as u32)
                })
                .collect();
            d.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut want: Vec<u32> = d[..6].iter().map(|x| x.1).collect();
            want.sort_unstable();
            assert_eq!(a.row(i).0, &want[..], "row {i}");
        }
        assert!(from_spec::<f64>("knn3d:10:10", 0).is_err());
        assert!(from_spec::<f64>("knn3d:10:3:hilbert", 0).is_err());
        // 3×3 blocks on the same cloud: each point's row block holds its own block and its K
        // neighbours' blocks, in column order.
        let g: CsrMatrix<f64> = from_spec("knn3d:2000:6:morton", 5).unwrap();
        let a: CsrMatrix<f64> = from_spec("knnblocks:2000:6:3:morton", 5).unwrap();
        assert_eq!((a.nrows(), a.ncols(), a.nnz()), (6000, 6000, 6000 * 21));
        sorted_in_range(&a);
        for i in [0usize, 1, 2, 1000, 5999] {
            let p = i / 3;
            let mut want: Vec<u32> = g.row(p).0.to_vec();
            want.push(p as u32);
            want.sort_unstable();
            let want: Vec<u32> = want
                .iter()
                .flat_map(|&q| [3 * q, 3 * q + 1, 3 * q + 2])
                .collect();
            assert_eq!(a.row(i).0, &want[..], "row {i}");
        }
        assert_eq!(a, from_spec("knnblocks:2000:6:3:morton", 5).unwrap());
        assert!(from_spec::<f64>("knnblocks:10:3:0", 0).is_err());
        assert!(from_spec::<f64>("knnblocks:10:3:3:hilbert", 0).is_err());
    }

    #[test]
    fn blocks_zipf_arrow_and_flat_rmat() {
        let b: CsrMatrix<f64> = from_spec("blocks:1000:32:3", 1).unwrap();
        assert_eq!(b.nrows(), 1024);
        assert_eq!(b.nnz(), 1024 * 96);
        sorted_in_range(&b);
        for i in 0..b.nrows() {
            assert!(
                b.row(i).0.contains(&(i as u32)),
                "row {i} lacks its diagonal"
            );
            assert_eq!(b.row(i).0, b.row(i / 32 * 32).0);
        }
        let z: CsrMatrix<f64> = from_spec("zipf:20000:1.5:5000:0", 2).unwrap();
        let s = z.row_stats();
        assert!(s.min >= 1 && s.max <= 5000 && s.max > 200, "{s:?}");
        sorted_in_range(&z);
        let zl: CsrMatrix<f64> = from_spec("zipf:20000:2.0:64:100", 2).unwrap();
        sorted_in_range(&zl);
        for i in 0..zl.nrows() {
            assert!(zl
                .row(i)
                .0
                .iter()
                .all(|&c| (c as i64 - i as i64).abs() <= 100));
        }
        let a: CsrMatrix<f64> = from_spec("arrow:5000:3:4", 3).unwrap();
        sorted_in_range(&a);
        assert_eq!(a.row(0).0.len(), 5000);
        assert_eq!(a.row(2).0.len(), 5000);
        assert_eq!(&a.row(100).0[..3], &[0, 1, 2]);
        assert_eq!(a.row(100).0.len(), 7);
        let flat: CsrMatrix<f64> = from_spec("rmat:14:16:0.45:0.22:0.22", 5).unwrap();
        let skewed: CsrMatrix<f64> = from_spec("rmat:14:16", 5).unwrap();
        assert!(flat.row_stats().max < skewed.row_stats().max);
        assert_eq!(skewed, from_spec("rmat:14:16:0.57:0.19:0.19", 5).unwrap());
        assert!(from_spec::<f64>("rmat:10:4:0.6:0.3:0.3", 0).is_err());
        for bad in [
            "blocks:10:0:1",
            "blocks:10:5:3",
            "zipf:10:0:5:0",
            "zipf:10:1:11:0",
            "arrow:5:6:1",
        ] {
            assert!(from_spec::<f64>(bad, 0).is_err(), "{bad}");
        }
    }
}
