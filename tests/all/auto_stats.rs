//! The automatic choice's statistics: symmetry judged against the row size on every SPD
//! generator and on finite-element matrices assembled element by element (with the rounding of a
//! real assembly), a matrix unsymmetric in one row, the GPU statistics equal to the CPU's, the
//! indefinite systems that never get CG, and the same choice from the Rust API and the CLI.

use segsparse::autosolve::{solve, ProbeParams};
use segsparse::backend::Cpu;
use segsparse::generate::{self, splitmix64};
use segsparse::precond::auto::{
    choose, symmetric_indefinite, AutoMethod as M, AutoPrecond as P, MatrixStats,
};
use segsparse::solvers::SolveParams;
use segsparse::CsrMatrix;

/// A deterministic uniform number in [0, 1) from `k`.
fn unit(k: u64) -> f64 {
    (splitmix64(k) >> 11) as f64 / (1u64 << 53) as f64
}

/// The nodes of an `n³`-cell cube mesh, interior nodes jittered by up to 20 % of a cell.
fn cube_nodes(n: usize, seed: u64) -> Vec<[f64; 3]> {
    let h = 1.0 / n as f64;
    let mut p = Vec::new();
    for k in 0..=n {
        for j in 0..=n {
            for i in 0..=n {
                let inner = i > 0 && j > 0 && k > 0 && i < n && j < n && k < n;
                let id = (p.len() as u64) * 3 + seed * 7919;
                let jit = |d: u64| {
                    if inner {
                        0.4 * h * (unit(id + d) - 0.5)
                    } else {
                        0.0
                    }
                };
                p.push([
                    i as f64 * h + jit(0),
                    j as f64 * h + jit(1),
                    k as f64 * h + jit(2),
                ]);
            }
        }
    }
    p
}

/// The tetrahedra of the cube mesh: each cell split into six (Kuhn).
fn cube_tets(n: usize) -> Vec<[usize; 4]> {
    let id = |i: usize, j: usize, k: usize| (k * (n + 1) + j) * (n + 1) + i;
    let mut t = Vec::new();
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let c = |d: usize| id(i + (d & 1), j + ((d >> 1) & 1), k + ((d >> 2) & 1));
                for path in [[1, 3], [1, 5], [2, 3], [2, 6], [4, 5], [4, 6]] {
                    t.push([c(0), c(path[0]), c(path[1]), c(7)]);
                }
            }
        }
    }
    t
}

fn on_boundary(p: &[f64; 3]) -> bool {
    p.iter()
        .any(|&x| x.abs() < 1e-12 || (x - 1.0).abs() < 1e-12)
}

/// The gradients of the four barycentric coordinates of a tetrahedron and its volume.
fn p1_gradients(x: [[f64; 3]; 4]) -> ([[f64; 3]; 4], f64) {
    let e = |a: usize| [x[a][0] - x[0][0], x[a][1] - x[0][1], x[a][2] - x[0][2]];
    let (a, b, c) = (e(1), e(2), e(3));
    let cross = |u: [f64; 3], v: [f64; 3]| {
        [
            u[1] * v[2] - u[2] * v[1],
            u[2] * v[0] - u[0] * v[2],
            u[0] * v[1] - u[1] * v[0],
        ]
    };
    let det = a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
        + a[2] * (b[0] * c[1] - b[1] * c[0]);
    let (g1, g2, g3) = (cross(b, c), cross(c, a), cross(a, b));
    let g1 = g1.map(|v| v / det);
    let g2 = g2.map(|v| v / det);
    let g3 = g3.map(|v| v / det);
    let g0 = [
        -g1[0] - g2[0] - g3[0],
        -g1[1] - g2[1] - g3[1],
        -g1[2] - g2[2] - g3[2],
    ];
    ([g0, g1, g2, g3], det.abs() / 6.0)
}

/// `u · (K v)` for a 3×3 `K`: the rounding of the product is not symmetric in `u` and `v`, as
/// in a finite-element code's element loop.
fn form(u: [f64; 3], k: &[[f64; 3]; 3], v: [f64; 3]) -> f64 {
    let kv = [
        k[0][0] * v[0] + k[0][1] * v[1] + k[0][2] * v[2],
        k[1][0] * v[0] + k[1][1] * v[1] + k[1][2] * v[2],
        k[2][0] * v[0] + k[2][1] * v[1] + k[2][2] * v[2],
    ];
    u[0] * kv[0] + u[1] * kv[1] + u[2] * kv[2]
}

/// Assembles triplets into a CSR matrix as a FEM code does: entries summed in element order,
/// Dirichlet rows and columns of `fixed` zeroed in place (the pattern kept, explicit zeros
/// left) with 1 on their diagonal.
fn assemble(n: usize, t: Vec<(usize, usize, f64)>, fixed: &[bool]) -> CsrMatrix<f64> {
    let t: Vec<(usize, usize, f64)> = t
        .into_iter()
        .map(|(i, j, v)| {
            if fixed[i] || fixed[j] {
                (i, j, if i == j { 1.0 } else { 0.0 })
            } else {
                (i, j, v)
            }
        })
        .collect();
    let mut a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    a.sum_duplicates();
    // A diagonal of a fixed row summed from several elements is a sum of ones: reset it.
    for (i, _) in fixed.iter().enumerate().filter(|&(_, &f)| f) {
        let (lo, hi) = (a.row_ptr()[i] as usize, a.row_ptr()[i + 1] as usize);
        let k = a.col_idx()[lo..hi]
            .iter()
            .position(|&j| j as usize == i)
            .unwrap();
        a.values_mut()[lo + k] = 1.0;
    }
    a
}

/// P1 tetrahedra, scalar diffusion with an anisotropic, varying coefficient tensor.
pub(crate) fn fem_p1_scalar(n: usize, seed: u64) -> CsrMatrix<f64> {
    let x = cube_nodes(n, seed);
    let mut t = Vec::new();
    for (e, tet) in cube_tets(n).iter().enumerate() {
        let (g, vol) = p1_gradients(tet.map(|v| x[v]));
        let s = 1.0 + unit(seed ^ e as u64);
        let k = [[s, 0.3, 0.1], [0.3, 1.5 * s, 0.2], [0.1, 0.2, 0.7]];
        for a in 0..4 {
            for b in 0..4 {
                t.push((tet[a], tet[b], vol * form(g[a], &k, g[b])));
            }
        }
    }
    let fixed: Vec<bool> = x.iter().map(on_boundary).collect();
    assemble(x.len(), t, &fixed)
}

/// P1 tetrahedra, linear elasticity (3 unknowns per node, interleaved): `K_e = vol · Bᵀ(D B)`.
pub(crate) fn fem_p1_elasticity(n: usize, seed: u64) -> CsrMatrix<f64> {
    let x = cube_nodes(n, seed);
    let (lam, mu) = (1.2, 0.8);
    let mut d = [[0.0f64; 6]; 6];
    for i in 0..3 {
        d[i][..3].fill(lam);
        d[i][i] += 2.0 * mu;
        d[i + 3][i + 3] = mu;
    }
    let mut t = Vec::new();
    for tet in cube_tets(n) {
        let (g, vol) = p1_gradients(tet.map(|v| x[v]));
        // B: 6 strains × 12 unknowns.
        let mut bm = [[0.0f64; 12]; 6];
        for (a, &[gx, gy, gz]) in g.iter().enumerate() {
            let c = 3 * a;
            bm[0][c] = gx;
            bm[1][c + 1] = gy;
            bm[2][c + 2] = gz;
            bm[3][c] = gy;
            bm[3][c + 1] = gx;
            bm[4][c + 1] = gz;
            bm[4][c + 2] = gy;
            bm[5][c] = gz;
            bm[5][c + 2] = gx;
        }
        let mut db = [[0.0f64; 12]; 6];
        for r in 0..6 {
            for c in 0..12 {
                db[r][c] = (0..6).map(|k| d[r][k] * bm[k][c]).sum();
            }
        }
        for p in 0..12 {
            for q in 0..12 {
                let v: f64 = (0..6).map(|k| bm[k][p] * db[k][q]).sum();
                t.push((3 * tet[p / 3] + p % 3, 3 * tet[q / 3] + q % 3, vol * v));
            }
        }
    }
    let fixed: Vec<bool> = (0..3 * x.len()).map(|i| on_boundary(&x[i / 3])).collect();
    assemble(3 * x.len(), t, &fixed)
}

/// P2 triangles on a jittered square mesh, scalar diffusion with an anisotropic coefficient,
/// three-point quadrature.
pub(crate) fn fem_p2_triangles(n: usize, seed: u64) -> CsrMatrix<f64> {
    // Nodes on the (2n+1)² lattice: vertices at even, edge midpoints at odd positions.
    let m = 2 * n + 1;
    let idx = |i: usize, j: usize| j * m + i;
    let h = 1.0 / (2 * n) as f64;
    let mut x = vec![[0.0f64; 2]; m * m];
    for j in 0..m {
        for i in 0..m {
            x[idx(i, j)] = [i as f64 * h, j as f64 * h];
        }
    }
    for j in (2..m - 1).step_by(2) {
        for i in (2..m - 1).step_by(2) {
            let k = idx(i, j) as u64 + seed * 104_729;
            x[idx(i, j)][0] += 0.5 * h * (unit(2 * k) - 0.5);
            x[idx(i, j)][1] += 0.5 * h * (unit(2 * k + 1) - 0.5);
        }
    }
    // Edge midpoints at the middle of their (moved) vertices.
    let mid = |x: &Vec<[f64; 2]>, a: usize, b: usize| {
        [(x[a][0] + x[b][0]) / 2.0, (x[a][1] + x[b][1]) / 2.0]
    };
    let mut t = Vec::new();
    let q = [
        [1.0 / 6.0, 1.0 / 6.0],
        [2.0 / 3.0, 1.0 / 6.0],
        [1.0 / 6.0, 2.0 / 3.0],
    ];
    for cj in 0..n {
        for ci in 0..n {
            let (i, j) = (2 * ci, 2 * cj);
            for tri in [
                [(i, j), (i + 2, j), (i, j + 2)],
                [(i + 2, j + 2), (i, j + 2), (i + 2, j)],
            ] {
                let v = tri.map(|(a, b)| idx(a, b));
                let e = [
                    idx((tri[1].0 + tri[2].0) / 2, (tri[1].1 + tri[2].1) / 2),
                    idx((tri[0].0 + tri[2].0) / 2, (tri[0].1 + tri[2].1) / 2),
                    idx((tri[0].0 + tri[1].0) / 2, (tri[0].1 + tri[1].1) / 2),
                ];
                x[e[0]] = mid(&x, v[1], v[2]);
                x[e[1]] = mid(&x, v[0], v[2]);
                x[e[2]] = mid(&x, v[0], v[1]);
                let nodes = [v[0], v[1], v[2], e[0], e[1], e[2]];
                let (p0, p1, p2) = (x[v[0]], x[v[1]], x[v[2]]);
                let jac = [
                    [p1[0] - p0[0], p2[0] - p0[0]],
                    [p1[1] - p0[1], p2[1] - p0[1]],
                ];
                let det = jac[0][0] * jac[1][1] - jac[0][1] * jac[1][0];
                // The inverse transpose maps reference gradients to physical ones.
                let it = [
                    [jac[1][1] / det, -jac[1][0] / det],
                    [-jac[0][1] / det, jac[0][0] / det],
                ];
                let s = 1.0 + unit(seed ^ (v[0] as u64 * 31 + v[1] as u64));
                let k = [[s, 0.4, 0.0], [0.4, 2.0, 0.0], [0.0, 0.0, 1.0]];
                for qp in q {
                    let (r, u) = (qp[0], qp[1]);
                    let l0 = 1.0 - r - u;
                    // Reference gradients of the six quadratic shape functions.
                    let gr = [
                        [-(4.0 * l0 - 1.0), -(4.0 * l0 - 1.0)],
                        [4.0 * r - 1.0, 0.0],
                        [0.0, 4.0 * u - 1.0],
                        [4.0 * u, 4.0 * r],
                        [-4.0 * u, 4.0 * (l0 - u)],
                        [4.0 * (l0 - r), -4.0 * r],
                    ];
                    let gp: Vec<[f64; 3]> = gr
                        .iter()
                        .map(|g| {
                            [
                                it[0][0] * g[0] + it[0][1] * g[1],
                                it[1][0] * g[0] + it[1][1] * g[1],
                                0.0,
                            ]
                        })
                        .collect();
                    let w = det.abs() / 6.0;
                    for a in 0..6 {
                        for b in 0..6 {
                            t.push((nodes[a], nodes[b], w * form(gp[a], &k, gp[b])));
                        }
                    }
                }
            }
        }
    }
    let fixed: Vec<bool> = x
        .iter()
        .map(|p| {
            p.iter()
                .any(|&c| c.abs() < 1e-12 || (c - 1.0).abs() < 1e-12)
        })
        .collect();
    assemble(m * m, t, &fixed)
}

/// The largest `|a_ij − a_ji|` over the stored entries (bit-level asymmetry).
fn max_asymmetry(a: &CsrMatrix<f64>) -> f64 {
    let at = a.transpose();
    let d = segsparse::sparse::add(a, -1.0, &at).unwrap();
    d.values().iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[test]
fn every_spd_generator_is_symmetric() {
    let cases: Vec<(&str, CsrMatrix<f64>)> = vec![
        ("poisson2d:30", generate::poisson2d(30).unwrap()),
        ("poisson3d:12", generate::poisson3d(12).unwrap()),
        ("poisson3d27:10", generate::poisson3d27(10).unwrap()),
        ("aniso2d:30:1e-3", generate::aniso2d(30, 1e-3).unwrap()),
        ("elasticity2d:20", generate::elasticity2d(20).unwrap()),
        ("elasticity3d:8", generate::elasticity3d(8).unwrap()),
        ("jumps3d:12", generate::jumps3d(12).unwrap()),
        ("tridiag:500", generate::tridiag(500).unwrap()),
    ];
    for (name, a) in cases {
        let s = MatrixStats::of(&a);
        assert!(s.symmetric, "{name}: asymmetry {:.2e}", s.asymmetry);
        assert!(s.positive_diagonal, "{name}");
        let c = choose(&a);
        assert_eq!(c.method, M::Cg, "{name}: {}", c.reason);
        // f32 too.
        let s32 = MatrixStats::of(&a.cast::<f32>());
        assert!(s32.symmetric, "{name} f32: asymmetry {:.2e}", s32.asymmetry);
    }
}

#[test]
fn elasticity3d_is_symmetric_only_to_rounding() {
    // What the issue measured at 8³: entries that cancel to ~1e-17 on one side only.
    let a = generate::elasticity3d::<f64>(8).unwrap();
    let s = MatrixStats::of(&a);
    assert!(s.symmetric && s.asymmetry < 1e-14, "{:.2e}", s.asymmetry);
    assert_eq!(s.missing_diagonal, 0);
    // Its diagonal is constant: Jacobi would only scale, so plain CG, AMG weighed by the probe.
    let c = choose(&a);
    assert_eq!(
        (c.method, c.precond, c.alternative),
        (M::Cg, P::None, Some((M::Cg, P::Amg))),
        "{}",
        c.reason
    );
    // A non-M-matrix SPD matrix whose diagonal varies keeps Jacobi.
    let c = choose(&fem_p1_elasticity(5, 2));
    assert_eq!((c.method, c.precond), (M::Cg, P::Jacobi), "{}", c.reason);
}

#[test]
fn fem_assembled_matrices_are_symmetric() {
    let cases: Vec<(&str, CsrMatrix<f64>)> = vec![
        ("P1 tetrahedra, scalar", fem_p1_scalar(7, 1)),
        ("P1 tetrahedra, elasticity", fem_p1_elasticity(5, 2)),
        ("P2 triangles, scalar", fem_p2_triangles(12, 3)),
    ];
    for (name, a) in cases {
        // Not bit-symmetric (the rounding of the element loop), but symmetric to rounding.
        let bits = max_asymmetry(&a);
        let s = MatrixStats::of(&a);
        eprintln!(
            "{name}: {} rows, max |A − Aᵀ| {bits:.2e}, relative {:.2e}",
            a.nrows(),
            s.asymmetry
        );
        assert!(bits > 0.0, "{name}: expected rounding in the assembly");
        assert!(s.symmetric, "{name}: asymmetry {:.2e}", s.asymmetry);
        assert!(s.positive_diagonal && s.missing_diagonal == 0, "{name}");
        let c = choose(&a);
        assert_eq!(c.method, M::Cg, "{name}: {}", c.reason);
        // CG converges on it, so it is SPD as the statistics say.
        let b = vec![1.0; a.nrows()];
        let mut x = vec![0.0; a.nrows()];
        let r = solve(
            &Cpu,
            &a,
            Some(&a),
            &b,
            &mut x,
            &SolveParams::default(),
            &ProbeParams {
                cache: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(r.result.is_ok(), "{name}: {}", r.choice.reason);
        assert_eq!(r.choice.method, M::Cg, "{name}: {}", r.choice.reason);
    }
}

/// `a` with one off-diagonal entry of row `row` (or of the next row that has a nonzero one)
/// moved by `f` times the row's largest magnitude: unsymmetric in that row only.
fn perturb_row(a: &CsrMatrix<f64>, row: usize, f: f64) -> CsrMatrix<f64> {
    let mut b = a.clone();
    for r in (row..a.nrows()).chain(0..row) {
        let (lo, hi) = (b.row_ptr()[r] as usize, b.row_ptr()[r + 1] as usize);
        let size = b.values()[lo..hi]
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        let k = (lo..hi).find(|&k| b.col_idx()[k] as usize != r && b.values()[k] != 0.0);
        if let Some(k) = k {
            b.values_mut()[k] += f * size;
            return b;
        }
    }
    panic!("no off-diagonal entry to perturb");
}

#[test]
fn one_unsymmetric_row_is_found() {
    // Anywhere in the matrix: the check reads every row, not a sample.
    for a in [
        generate::poisson3d::<f64>(20).unwrap(),
        fem_p1_scalar(6, 4),
        generate::elasticity3d(6).unwrap(),
    ] {
        for row in [0, a.nrows() / 2 + 17, a.nrows() - 1] {
            let b = perturb_row(&a, row, 1e-3);
            let s = MatrixStats::of(&b);
            assert!(!s.symmetric, "row {row}: asymmetry {:.2e}", s.asymmetry);
            assert!(s.asymmetry > 1e-5);
            assert_ne!(choose(&b).method, M::Cg);
        }
    }
}

/// Poisson 2D with `shift` taken off the diagonal.
fn shifted(n: usize, shift: f64) -> CsrMatrix<f64> {
    let mut a = generate::poisson2d::<f64>(n).unwrap();
    for i in 0..a.nrows() {
        let (lo, hi) = (a.row_ptr()[i] as usize, a.row_ptr()[i + 1] as usize);
        let k = a.col_idx()[lo..hi]
            .iter()
            .position(|&j| j as usize == i)
            .unwrap();
        a.values_mut()[lo + k] -= shift;
    }
    a
}

/// `[[K, Bᵀ], [B, 0]]`: `K` the 2D Laplacian on `n²` nodes, `B` one constraint per `stride`
/// nodes averaging two neighbours (zero diagonal block).
fn saddle(n: usize, stride: usize) -> CsrMatrix<f64> {
    let k = generate::poisson2d::<f64>(n).unwrap();
    let nk = k.nrows();
    let mut t = Vec::new();
    for i in 0..nk {
        let (c, v) = k.row(i);
        for (&j, &x) in c.iter().zip(v) {
            t.push((i, j as usize, x));
        }
    }
    let mut m = nk;
    for i in (0..nk - 1).step_by(stride) {
        for (j, w) in [(i, 0.5), (i + 1, 0.5)] {
            t.push((m, j, w));
            t.push((j, m, w));
        }
        m += 1;
    }
    CsrMatrix::from_triplets(m, m, &t).unwrap()
}

#[test]
fn indefinite_symmetric_systems_get_no_cg() {
    let p = ProbeParams {
        cache: false,
        ..Default::default()
    };
    for (name, a) in [
        ("Poisson − 5 (negative diagonal)", shifted(30, 5.0)),
        ("saddle point", saddle(30, 7)),
    ] {
        let c = choose(&a);
        assert!(symmetric_indefinite(&c.stats), "{name}");
        assert_ne!(c.method, M::Cg, "{name}");
        let b = vec![1.0; a.nrows()];
        let mut x = vec![0.0; a.nrows()];
        let r = solve(&Cpu, &a, Some(&a), &b, &mut x, &SolveParams::default(), &p).unwrap();
        eprintln!("{name}: {} — tried {:?}", r.choice.reason, r.tried);
        assert!(r.result.is_ok(), "{name}: {}", r.choice.reason);
        assert!(r.tried.iter().all(|t| !t.starts_with("cg ")), "{name}");
    }
    // Positive diagonal but indefinite (Poisson − 1 on 30²: the smallest eigenvalues are
    // negative): the statistics cannot tell, CG may break down, and no CG runs after that.
    let a = shifted(30, 1.0);
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let r = solve(&Cpu, &a, Some(&a), &b, &mut x, &SolveParams::default(), &p).unwrap();
    eprintln!("Poisson − 1: {} — tried {:?}", r.choice.reason, r.tried);
    assert!(r.result.is_ok(), "{}", r.choice.reason);
    if let Some(k) = r.tried.iter().position(|t| t.contains("breakdown")) {
        assert!(r.tried[k + 1..].iter().all(|t| !t.starts_with("cg ")));
        assert_ne!(r.choice.method, M::Cg);
    }
}

#[test]
fn nothing_converges_in_one_sentence() {
    // A singular system with an inconsistent right-hand side: no candidate can converge.
    let mut t = Vec::new();
    for i in 0..200usize {
        t.push((i, i, 1.0));
        t.push((i, (i + 1) % 200, -1.0));
    }
    let a = CsrMatrix::<f64>::from_triplets(200, 200, &t).unwrap();
    let b: Vec<f64> = (0..200).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect();
    let mut x = vec![0.0; 200];
    let p = SolveParams {
        max_iters: 400,
        ..Default::default()
    };
    let r = solve(
        &Cpu,
        &a,
        Some(&a),
        &b,
        &mut x,
        &p,
        &ProbeParams {
            cache: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.result.is_err());
    let f = r.failure.expect("a sentence");
    eprintln!("{f}");
    assert!(
        f.starts_with("no candidate converged") && f.contains("tried"),
        "{f}"
    );
    assert!(r.tried.len() >= 2, "{:?}", r.tried);
    assert!(r.choice.reason.contains(&f));
}

#[test]
fn gpu_statistics_equal_the_cpu_ones() {
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    use segsparse::spmv::gpu::GpuCsr;
    let mut cases: Vec<(&str, CsrMatrix<f64>)> = vec![
        ("poisson3d:20", generate::poisson3d(20).unwrap()),
        ("elasticity3d:8", generate::elasticity3d(8).unwrap()),
        ("fem P1 elasticity", fem_p1_elasticity(5, 5)),
        ("fem P2", fem_p2_triangles(10, 6)),
        ("shifted", shifted(25, 5.0)),
        ("saddle", saddle(25, 5)),
        (
            "one row",
            perturb_row(&generate::poisson3d(15).unwrap(), 1000, 1.01),
        ),
        ("random unsymmetric", generate::random(3000, 9, 7).unwrap()),
        // Rows longer than a thread's share, walked by a whole block: hubs of a power-law
        // graph, a shifted operator's negative row sums, an arrow matrix (a full first row
        // and column, its diagonal in the middle of the long row's entries).
        (
            "power-law graph",
            generate::from_spec("powerlap:20000:2.2", 0).unwrap(),
        ),
        (
            "shifted3d",
            generate::from_spec("shifted3d:12:0.5", 0).unwrap(),
        ),
        ("arrow", arrow(5000)),
        // Rows of every length from 1 to 300 entries: a thread's, a warp's and a block's.
        ("every row length", every_length(3000)),
    ];
    // An empty row and a lone entry.
    cases.push((
        "sparse corner",
        CsrMatrix::from_triplets(4, 4, &[(0, 0, 2.0), (1, 3, -1.0), (3, 3, 5.0)]).unwrap(),
    ));
    for (name, a) in cases {
        let cpu = MatrixStats::with_levels(&a, false);
        let gpu =
            segsparse::precond::auto::gpu::matrix_stats(&GpuCsr::upload(&g, &a).unwrap()).unwrap();
        assert_eq!(gpu, cpu, "{name}");
        let (a32, name32) = (a.cast::<f32>(), format!("{name} f32"));
        let cpu = MatrixStats::with_levels(&a32, false);
        let gpu = segsparse::precond::auto::gpu::matrix_stats(&GpuCsr::upload(&g, &a32).unwrap())
            .unwrap();
        assert_eq!(gpu, cpu, "{name32}");
    }
}

#[test]
fn gpu_jacobi_equals_the_host_one() {
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    use segsparse::backend::gpu::GpuOps;
    use segsparse::precond::auto::StatsOps;
    use segsparse::precond::Jacobi;
    use segsparse::spmv::gpu::GpuCsr;
    let (o64, o32) = (
        GpuOps::<f64>::new(&g).unwrap(),
        GpuOps::<f32>::new(&g).unwrap(),
    );
    for (name, a) in [
        ("poisson3d:12", generate::poisson3d(12).unwrap()),
        ("fem P2", fem_p2_triangles(10, 6)),
        (
            "power-law graph",
            generate::from_spec("powerlap:20000:2.2", 0).unwrap(),
        ),
        ("arrow", arrow(5000)),
        ("random unsymmetric", generate::random(3000, 9, 7).unwrap()),
    ] {
        // Equal inverse diagonals, or the same error where a diagonal entry is missing.
        match (
            Jacobi::from_matrix(&Cpu, &a),
            o64.jacobi(&GpuCsr::upload(&g, &a).unwrap()),
        ) {
            (Ok(h), Ok(d)) => assert_eq!(
                &g.download(d.inverse_diagonal()).unwrap(),
                h.inverse_diagonal(),
                "{name}"
            ),
            (h, d) => assert_eq!(
                h.map(|_| ()).map_err(|e| e.to_string()),
                d.map(|_| ()).map_err(|e| e.to_string()),
                "{name}"
            ),
        }
        let a32 = a.cast::<f32>();
        match (
            Jacobi::from_matrix(&Cpu, &a32),
            o32.jacobi(&GpuCsr::upload(&g, &a32).unwrap()),
        ) {
            (Ok(h), Ok(d)) => assert_eq!(
                &g.download(d.inverse_diagonal()).unwrap(),
                h.inverse_diagonal(),
                "{name} f32"
            ),
            (h, d) => assert_eq!(
                h.map(|_| ()).map_err(|e| e.to_string()),
                d.map(|_| ()).map_err(|e| e.to_string()),
                "{name} f32"
            ),
        }
    }
    // A diagonal entry not stored (row 1), zero (row 2) or unsorted rows: the host's error,
    // naming the first such row.
    for (t, row) in [
        (vec![(0, 0, 2.0), (1, 2, 1.0), (2, 2, 4.0)], 1),
        (vec![(0, 0, 2.0), (1, 1, 3.0), (2, 2, 0.0)], 2),
    ] {
        let a = CsrMatrix::from_triplets(3, 3, &t).unwrap();
        let e = o64
            .jacobi(&GpuCsr::upload(&g, &a).unwrap())
            .map(|_| ())
            .unwrap_err()
            .to_string();
        let h = Jacobi::<Vec<f64>>::from_matrix(&Cpu, &a)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert_eq!(e, h);
        assert!(e.contains(&format!("row {row}")), "{e}");
    }
}

#[test]
fn gpu_automatic_solve_matches_the_cpu_choice() {
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    use segsparse::backend::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let ops = GpuOps::<f64>::new(&g).unwrap();
    for (name, a) in [
        ("fem P1", fem_p1_scalar(8, 9)),
        ("saddle", saddle(40, 5)),
        ("shifted", shifted(30, 5.0)),
    ] {
        let p = ProbeParams {
            cache: false,
            ..Default::default()
        };
        let b = vec![1.0; a.nrows()];
        let da = GpuCsr::upload(&g, &a).unwrap();
        let db = g.upload(&b).unwrap();
        let mut dx = g.zeros::<f64>(a.nrows()).unwrap();
        let r = solve(&ops, &da, None, &db, &mut dx, &SolveParams::default(), &p).unwrap();
        let mut x = vec![0.0; a.nrows()];
        let c = solve(&Cpu, &a, Some(&a), &b, &mut x, &SolveParams::default(), &p).unwrap();
        assert_eq!(r.choice.stats, c.choice.stats, "{name}");
        assert!(r.result.is_ok(), "{name}: {}", r.choice.reason);
        let xg = g.download(&dx).unwrap();
        let mut ax = vec![0.0; a.nrows()];
        segsparse::spmv::spmv(1.0, &a, &xg, 0.0, &mut ax);
        let res = ax
            .iter()
            .zip(&b)
            .map(|(u, v)| (u - v) * (u - v))
            .sum::<f64>()
            .sqrt()
            / (a.nrows() as f64).sqrt();
        assert!(res <= 2e-8, "{name}: {res}");
    }
}

/// The method and preconditioner of `sparse-solve`'s JSON `auto` object.
fn cli_choice(exe: &str, file: &std::path::Path, backend: &str) -> (String, String) {
    let out = std::process::Command::new(exe)
        .arg(file)
        .args(["--backend", backend, "--format", "json", "--rhs", "ones"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["auto"]["method"].as_str().unwrap().to_string(),
        v["auto"]["precond"].as_str().unwrap().to_string(),
    )
}

#[test]
fn the_cli_and_the_rust_api_choose_the_same() {
    let Some(exe) = crate::common::cli::bin("sparse-solve", env!("CARGO_BIN_EXE_sparse-solve"))
    else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("segsparse-auto-same-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Choices that do not hang on a close timing: SPD below the probe's 20 000 rows, and small
    // unsymmetric and indefinite systems where the cheap candidate converges within the probe
    // or its prediction is far below the factorization's fixed cost.
    for (name, a) in [
        ("fem", fem_p1_scalar(8, 11)),
        ("p2", fem_p2_triangles(14, 12)),
        ("saddle", saddle(12, 4)),
        ("convection", crate::ilu::convection2d(16, 2.0)),
        ("shifted", shifted(12, 5.0)),
    ] {
        let file = dir.join(format!("{name}.mtx"));
        segsparse::io::write_matrix_market(&file, &a).unwrap();
        let b = vec![1.0; a.nrows()];
        let mut x = vec![0.0; a.nrows()];
        let r = solve(
            &Cpu,
            &a,
            Some(&a),
            &b,
            &mut x,
            &SolveParams::default(),
            &ProbeParams::default(),
        )
        .unwrap();
        let cli = cli_choice(&exe, &file, "cpu");
        assert_eq!(
            (
                r.choice.method.name().to_string(),
                r.choice.precond.name().to_string()
            ),
            cli,
            "{name}: {}",
            r.choice.reason
        );
        let _ = std::fs::remove_file(&file);
    }
}

/// Row `i` of `1 + 37·i mod 300` entries (every length from 1 to 300: the GPU statistics walk
/// them by a thread, a warp and a block), off-diagonal values of either sign over six decades,
/// the diagonal `(0.5 + u)` times the row's off-diagonal sum: sums whose rounding depends on
/// the order of addition.
fn every_length(n: usize) -> CsrMatrix<f64> {
    let mut t = Vec::new();
    for i in 0..n {
        let len = 1 + (37 * i) % 300;
        let mut off = 0.0;
        for k in 0..len - 1 {
            let j = (i + 1 + 7 * k) % n;
            let u = unit((i * 1000 + k) as u64);
            let v = 10f64.powf(6.0 * u - 3.0) * if k % 3 == 0 { 1.0 } else { -1.0 };
            off += v.abs();
            t.push((i, j, v));
        }
        t.push((i, i, (0.5 + unit(i as u64 + 7_000_000)) * off.max(1.0)));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// A full first row and column over a diagonal `2 + i`, the first row's values slightly off its
/// column's: unsymmetric in one long row.
fn arrow(n: usize) -> CsrMatrix<f64> {
    let mut t = vec![(0, 0, n as f64)];
    for i in 1..n {
        t.push((i, i, 2.0 + i as f64));
        t.push((0, i, -1.0 - 1e-3 * (i % 7) as f64));
        t.push((i, 0, -1.0));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}
