//! Tests of the finite-element, convection–diffusion, saddle-point, graph, circuit and shifted
//! generators: sizes, symmetry (to rounding where the assembly rounds), definiteness and inertia
//! on small instances by dense factorisations, determinism, and the errors of bad specs.

use super::*;

fn spec(s: &str) -> CsrMatrix<f64> {
    from_spec(s, 5).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn canonical(a: &CsrMatrix<f64>) {
    for i in 0..a.nrows() {
        let (c, _) = a.row(i);
        assert!(c.windows(2).all(|w| w[0] < w[1]), "row {i} not sorted");
        assert!(c.iter().all(|&c| (c as usize) < a.ncols()));
    }
}

/// max |a_ij − a_ji| over the stored entries and their partners (absent = 0), and max |a_ij|.
fn asymmetry(a: &CsrMatrix<f64>) -> (f64, f64) {
    let t = a.transpose();
    let d = a.to_dense();
    let dt = t.to_dense();
    let mut worst: f64 = 0.0;
    let mut big: f64 = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            worst = worst.max((d[i][j] - dt[i][j]).abs());
            big = big.max(d[i][j].abs());
        }
    }
    (worst, big)
}

fn structurally_symmetric(a: &CsrMatrix<f64>) -> bool {
    let t = a.transpose();
    a.row_ptr() == t.row_ptr() && a.col_idx() == t.col_idx()
}

/// Dense Cholesky of the symmetric part: true when every pivot is positive.
fn positive_definite(a: &CsrMatrix<f64>) -> bool {
    let n = a.nrows();
    let d = a.to_dense();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s = 0.5 * (d[i][j] + d[j][i]) - (0..j).map(|k| l[i][k] * l[j][k]).sum::<f64>();
            if i == j {
                if s <= 0.0 {
                    return false;
                }
                l[i][i] = s.sqrt();
            } else {
                l[i][j] = s / l[j][j];
            }
        }
    }
    true
}

/// The eigenvalues of the symmetric part by cyclic Jacobi rotations (tiny matrices only).
fn eigenvalues(a: &CsrMatrix<f64>) -> Vec<f64> {
    let n = a.nrows();
    let d = a.to_dense();
    let mut m: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| 0.5 * (d[i][j] + d[j][i])).collect())
        .collect();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| m[i][j] * m[i][j])
            .sum();
        if off < 1e-26 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if m[p][q].abs() < 1e-300 {
                    continue;
                }
                let theta = (m[q][q] - m[p][p]) / (2.0 * m[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for row in m.iter_mut() {
                    let (mkp, mkq) = (row[p], row[q]);
                    row[p] = c * mkp - s * mkq;
                    row[q] = s * mkp + c * mkq;
                }
                let (head, tail) = m.split_at_mut(q);
                for (x, y) in head[p].iter_mut().zip(tail[0].iter_mut()) {
                    let (mpk, mqk) = (*x, *y);
                    *x = c * mpk - s * mqk;
                    *y = s * mpk + c * mqk;
                }
            }
        }
    }
    (0..n).map(|i| m[i][i]).collect()
}

/// (positive, negative) eigenvalue counts; panics on an eigenvalue within `tol` of zero.
fn inertia(a: &CsrMatrix<f64>, tol: f64) -> (usize, usize) {
    let ev = eigenvalues(a);
    for &e in &ev {
        assert!(e.abs() > tol, "an eigenvalue {e} is (nearly) zero");
    }
    (
        ev.iter().filter(|&&e| e > 0.0).count(),
        ev.iter().filter(|&&e| e < 0.0).count(),
    )
}

#[test]
fn fem_sizes_follow_the_mesh() {
    let n = 3usize;
    for (s, rows) in [
        ("fem2d:p1:3", (n - 1).pow(2)),
        ("fem2d:p2:3", (2 * n - 1).pow(2)),
        ("fem3d:p1:3", (n - 1).pow(3)),
        ("fem3d:p2:3", (2 * n - 1).pow(3)),
        ("femelast2d:p1:3", 2 * n * (n + 1)),
        ("femelast2d:p2:3", 2 * 2 * n * (2 * n + 1)),
        ("femelast3d:p1:3", 3 * n * (n + 1) * (n + 1)),
        ("femelast3d:p2:3", 3 * 2 * n * (2 * n + 1) * (2 * n + 1)),
        ("fem3d:p1:3:ident", (n + 1).pow(3)),
        ("fem3d:p2:3:rows:cube", (2 * n + 1).pow(3)),
    ] {
        let a = spec(s);
        assert_eq!(a.shape(), (rows, rows), "{s}");
        canonical(&a);
        assert!(a.values().iter().all(|v| v.is_finite()), "{s}");
    }
    // Interior rows of the structured cube: P1 couples a vertex with its 14 Kuhn neighbours.
    let a = spec("fem3d:p1:6:cube");
    // Vertex (2, 2, 2) is the free unknown 1 + 5·(1 + 5·1) (Kuhn cells around it are not
    // reflected); the centre (3, 3, 3), where every cell's diagonal points away, has all 26.
    assert_eq!(a.row(31).0.len(), 15);
    assert_eq!(a.row(62).0.len(), 27);
    // Coordinates: one node per free node.
    let p = FemProblem::new(3, FemPhysics::Elasticity, FemOrder::P1);
    let xs = fem_coordinates(&p, 3, 0).unwrap();
    assert_eq!(3 * xs.len(), spec("femelast3d:p1:3").nrows());
    assert!(xs
        .iter()
        .all(|x| x[0] * x[0] + x[1] * x[1] + x[2] * x[2] <= 1.0 + 1e-12));
}

#[test]
fn fem_matrices_are_symmetric_only_to_rounding() {
    // (spec, may be bit-symmetric): on the structured cube every P1 gradient has equal-sized
    // components, so its products round alike on both sides.
    for (s, bitsym) in [
        ("fem3d:p1:6:cube", true),
        ("fem3d:p1:5", false),
        ("fem3d:p2:4", false),
        ("fem2d:p2:6:jitter", false),
        ("femelast3d:p1:4", false),
        ("femelast2d:p2:4", false),
        ("femelast3d:p2:2", false),
        ("fem3d:p1:5:ident", false),
    ] {
        let a = spec(s);
        assert!(structurally_symmetric(&a), "{s}");
        let (worst, big) = asymmetry(&a);
        assert!(
            worst <= 1e-13 * big,
            "{s}: |A − Aᵀ| = {worst:e}, |A| = {big:e}"
        );
        assert!(
            bitsym || (worst > 0.0 && !a.is_symmetric()),
            "{s} is bit-symmetric: the assembly should round differently on the two sides"
        );
    }
    // On the structured cube the couplings that vanish mathematically are stored as rounding
    // noise (or exact zeros), and where the element matrices round unevenly a tiny entry faces
    // a different one (another tiny value, of either sign, or an exact zero).
    for (s, uneven) in [
        ("fem3d:p1:8:cube", false),
        ("fem3d:p2:5:cube", true),
        ("femelast3d:p1:6:cube", true),
    ] {
        let a = spec(s);
        let t = a.transpose();
        let big = a.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let (mut tiny, mut unequal) = (0, 0);
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            let (_, vt) = t.row(i);
            for k in 0..c.len() {
                if v[k].abs() < 1e-12 * big {
                    tiny += 1;
                    unequal += (v[k] != vt[k]) as usize;
                }
            }
        }
        assert!(
            tiny > a.nrows() / 2,
            "{s}: {tiny} tiny entries in {} rows",
            a.nrows()
        );
        assert!(
            !uneven || unequal > 0,
            "{s}: every tiny entry equals its partner"
        );
    }
}

#[test]
fn fem_matrices_are_positive_definite() {
    for s in [
        "fem2d:p1:6",
        "fem2d:p2:4:jitter",
        "fem3d:p1:4",
        "fem3d:p2:3",
        "femelast2d:p1:4",
        "femelast2d:p2:2:cube",
        "femelast3d:p1:2",
        "fem3d:p1:3:ident",
    ] {
        assert!(positive_definite(&spec(s)), "{s} is not positive definite");
    }
}

#[test]
fn fem_dirichlet_modes() {
    let full = spec("fem2d:p2:4:cube:rows");
    let ident = spec("fem2d:p2:4:cube:ident");
    let elim = spec("fem2d:p2:4:cube");
    assert_eq!(full.nrows(), 81);
    assert_eq!(full.col_idx(), ident.col_idx());
    // Node 0 (a corner) is fixed: identity row in both, with stored zeros.
    let (c, v) = ident.row(0);
    assert!(c.len() > 1);
    for (&j, &x) in c.iter().zip(v) {
        assert_eq!(x, if j == 0 { 1.0 } else { 0.0 });
    }
    assert_eq!(full.row(0), ident.row(0));
    // Fixed unknowns: the identity rows of `ident`.
    let fixed: Vec<bool> = (0..81)
        .map(|i| {
            let (c, v) = ident.row(i);
            c.iter()
                .zip(v)
                .all(|(&j, &x)| x == if j as usize == i { 1.0 } else { 0.0 })
        })
        .collect();
    let free: Vec<usize> = (0..81).filter(|&i| !fixed[i]).collect();
    assert_eq!(free.len(), elim.nrows());
    assert_eq!(free.len(), 49);
    let big = full.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut coupled = 0;
    for (k, &i) in free.iter().enumerate() {
        let (c, v) = full.row(i);
        let (ci, vi) = ident.row(i);
        assert_eq!(c, ci);
        let mut kept = Vec::new();
        for p in 0..c.len() {
            let j = c[p] as usize;
            if fixed[j] {
                // `rows` keeps the coupling to a fixed unknown, `ident` stores a zero.
                assert_eq!(vi[p], 0.0);
                coupled += (v[p].abs() > 1e-6 * big) as usize;
            } else {
                assert_eq!(v[p], vi[p]);
                let at = free.binary_search(&j).unwrap();
                kept.push((at as u32, v[p]));
            }
        }
        // The free block is the same matrix in all three.
        let (ce, ve) = elim.row(k);
        let want: (Vec<u32>, Vec<f64>) = kept.into_iter().unzip();
        assert_eq!((ce, ve), (&want.0[..], &want.1[..]), "row {i}");
    }
    assert!(coupled > 0);
    let (worst, big) = asymmetry(&full);
    assert!(worst > 1e-3 * big, "rows mode must be clearly unsymmetric");
}

#[test]
fn fem_assembly_is_deterministic_and_thread_independent() {
    let a = spec("fem3d:p2:14:jitter");
    assert!(a.nrows() > 2 * CHUNK_ROWS);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| spec("fem3d:p2:14:jitter"));
    assert_eq!(a, one);
    assert_ne!(a, from_spec::<f64>("fem3d:p2:14:jitter", 6).unwrap());
    let b = spec("femelast3d:p1:6");
    assert_eq!(b, from_spec::<f64>("femelast3d:p1:6", 99).unwrap());
    let f32m: CsrMatrix<f32> = from_spec("fem2d:p1:5", 0).unwrap();
    assert_eq!(f32m.nnz(), spec("fem2d:p1:5").nnz());
}

#[test]
fn convection_diffusion_is_an_unsymmetric_m_matrix() {
    assert_eq!(spec("convdiff2d:7:0"), poisson2d::<f64>(7).unwrap());
    assert_eq!(spec("convdiff3d:5:0"), poisson3d::<f64>(5).unwrap());
    for s in ["convdiff2d:20:100", "convdiff3d:8:1000"] {
        let a = spec(s);
        canonical(&a);
        assert!(structurally_symmetric(&a) && !a.is_symmetric(), "{s}");
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            let mut sum = 0.0;
            for (&j, &x) in c.iter().zip(v) {
                if j as usize == i {
                    assert!(x > 0.0);
                } else {
                    assert!(x < 0.0);
                }
                sum += x;
            }
            assert!(sum >= -1e-12, "{s}: row {i} sums to {sum}");
        }
    }
    assert!(from_spec::<f64>("convdiff2d:10:-1", 0).is_err());
    assert!(from_spec::<f64>("convdiff3d:10:nan", 0).is_err());
}

#[test]
fn anisotropic_and_shifted_operators() {
    assert_eq!(spec("aniso3d:6:1"), poisson3d::<f64>(6).unwrap());
    let a = spec("aniso3d:4:0.01:0.1");
    assert!(a.is_symmetric());
    let want = [-0.1, -0.01, -1.0, 2.22, -1.0, -0.01, -0.1];
    for (x, w) in a.row(21).1.iter().zip(want) {
        assert!((x - w).abs() < 1e-14, "{x} vs {w}");
    }
    assert!(positive_definite(&a));
    assert!(from_spec::<f64>("aniso3d:4:0", 0).is_err());
    // The 2-D Laplacian's eigenvalues are 4 − 2cos(iπ/(n+1)) − 2cos(jπ/(n+1)): as many
    // negative ones as lie below σ.
    let (n, sigma) = (6usize, 2.5);
    let below = (1..=n)
        .flat_map(|i| (1..=n).map(move |j| (i, j)))
        .filter(|&(i, j)| {
            let t = std::f64::consts::PI / (n as f64 + 1.0);
            4.0 - 2.0 * (i as f64 * t).cos() - 2.0 * (j as f64 * t).cos() < sigma
        })
        .count();
    let s = spec("shifted2d:6:2.5");
    assert!(s.is_symmetric());
    assert_eq!(inertia(&s, 1e-9), (n * n - below, below));
    assert!(below > 0 && below < n * n);
    let s3 = spec("shifted3d:4:1.5");
    assert_eq!(s3.row(21).1[3], 4.5);
    assert!(from_spec::<f64>("shifted3d:4:inf", 0).is_err());
}

#[test]
fn saddle_points_have_the_inertia_of_their_blocks() {
    let n = 4;
    let st = spec("stokes2d:4");
    let (nv, np) = (2 * n * (n - 1), n * n - 1);
    assert_eq!(st.nrows(), nv + np);
    canonical(&st);
    assert!(st.is_symmetric());
    assert!((nv..nv + np).all(|i| !st.row(i).0.contains(&(i as u32))));
    assert_eq!(inertia(&st, 1e-10), (nv, np));
    let unsteady = spec("stokes2d:4:0.5");
    assert_eq!(inertia(&unsteady, 1e-10), (nv, np));
    assert_eq!(unsteady.row(0).1[0], st.row(0).1[0] + 0.5);
    assert!(from_spec::<f64>("stokes2d:4:-1", 0).is_err());

    let k = spec("kkt2d:6:10");
    assert_eq!(k.nrows(), 46);
    canonical(&k);
    assert!(k.is_symmetric());
    assert_eq!(inertia(&k, 1e-10), (36, 10));
    assert_eq!(k, from_spec::<f64>("kkt2d:6:10", 5).unwrap());
    assert_ne!(k, from_spec::<f64>("kkt2d:6:10", 4).unwrap());
    assert!(from_spec::<f64>("kkt2d:6:19", 0).is_err());
    assert!(from_spec::<f64>("kkt2d:6:0", 0).is_err());
    assert!(from_spec::<f64>("stokes2d:1", 0).is_err());
}

#[test]
fn graph_laplacians_are_shifted_laplacians() {
    for (s, shift) in [
        ("geolap:3000:8", 1e-4),
        ("geolap:500:6:0.5", 0.5),
        ("powerlap:3000:2.5", 1e-4),
    ] {
        let a = spec(s);
        canonical(&a);
        assert!(a.is_symmetric(), "{s}");
        for i in 0..a.nrows() {
            let sum: f64 = a.row(i).1.iter().sum();
            assert!((sum - shift).abs() < 1e-9, "{s}: row {i} sums to {sum}");
        }
        assert_eq!(a, from_spec::<f64>(s, 5).unwrap());
    }
    let g = spec("geolap:3000:8");
    let mean = g.nnz() as f64 / g.nrows() as f64 - 1.0;
    assert!((6.0..10.0).contains(&mean), "mean degree {mean}");
    let p = spec("powerlap:20000:2.2");
    let s = p.row_stats();
    assert!(s.max as f64 > 30.0 * s.mean, "{s:?}");
    assert!(positive_definite(&spec("geolap:200:5")));
    assert!(positive_definite(&spec("powerlap:200:2.5:0.01")));
    for bad in [
        "geolap:10:10",
        "geolap:10:0",
        "geolap:10:3:0",
        "powerlap:10:1",
        "powerlap:10:2:-1",
    ] {
        assert!(from_spec::<f64>(bad, 0).is_err(), "{bad}");
    }
}

#[test]
fn circuits() {
    let g = spec("circuit:400");
    assert_eq!(g.nrows(), 400);
    canonical(&g);
    assert!(g.is_symmetric());
    assert!(positive_definite(&g));
    let vals: Vec<f64> = g.values().iter().map(|v| v.abs()).collect();
    let (lo, hi) = vals
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
    assert!(
        hi / lo > 1e3,
        "conductances should span decades: {lo} .. {hi}"
    );
    let mna = spec("circuit:3000:mna");
    let sources = mna.nrows() - 2916;
    assert!(sources >= 1);
    assert!(mna.is_symmetric());
    for i in 2916..mna.nrows() {
        assert_eq!(mna.row(i).1, &[1.0]);
    }
    let small = spec("circuit:100:mna");
    let m = small.nrows() - 100;
    assert_eq!(inertia(&small, 1e-12), (100, m));
    let v = spec("circuit:3000:vccs");
    assert_eq!(v.nrows(), 2916);
    assert!(structurally_symmetric(&v) && !v.is_symmetric());
    for i in 0..v.nrows() {
        let (c, x) = v.row(i);
        let diag = x[c.iter().position(|&j| j as usize == i).unwrap()];
        let off: f64 = c
            .iter()
            .zip(x)
            .filter(|(&j, _)| j as usize != i)
            .map(|(_, y)| y.abs())
            .sum();
        assert!(diag >= off * (1.0 - 1e-12), "row {i}: {diag} < {off}");
    }
    assert!(from_spec::<f64>("circuit:100:spice", 0).is_err());
    assert!(from_spec::<f64>("circuit:3", 0).is_err());
}

#[test]
fn bad_specs_say_what_is_wrong() {
    for (s, says) in [
        ("fem3d:p3:4", "p1 or p2"),
        ("fem3d:p1", "missing N"),
        ("fem3d:p1:x", "not a non-negative integer"),
        ("fem3d:p1:4:sphere", "ball, cube, jitter"),
        ("fem3d:p1:0", "at least 1"),
        ("fem3d:p2:5000", "32-bit"),
        ("femelast3d:p2:2000", "32-bit"),
        ("femelast3d:p1:500", "32-bit"),
        ("powerlap:1000000000:2", "32-bit"),
        ("geolap:100000000:50", "32-bit"),
        ("convdiff3d:10", "missing PE"),
        ("convdiff3d:10:1:2", "takes 2"),
        ("aniso3d:10:1:2:3", "takes 3"),
        ("circuit:100:spice", "g, mna or vccs"),
    ] {
        let e = from_spec::<f64>(s, 0).unwrap_err().to_string();
        assert!(e.contains(says), "{s}: {e}");
    }
    for s in [
        "fem2d:p1:3",
        "circuit:9",
        "geolap:9:2",
        "kkt2d:3:2",
        "shifted2d:3:1",
    ] {
        assert!(is_spec(s), "{s}");
    }
}
