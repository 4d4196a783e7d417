//! The graph phases of smoothed-aggregation setup on the GPU (`segsparse::sparse::gpu::{
//! strength_symmetric, amalgamate, aggregate_mis2, tentative_single, tentative_qr}`) against
//! their CPU references, **exactly**: same patterns, same aggregation arrays and roots, values
//! bit for bit (f64 and f32). Strength on anisotropic, Poisson, 27-point, random symmetric and unsymmetric
//! patterns, isolated nodes and the empty matrix (θ = 0 and 0.25); amalgamation of elasticity
//! (block 2) and a random block-3 matrix; MIS-2 (seeds 0 and 7) on Poisson 2D/3D, 27-point,
//! amalgamated elasticity, anisotropic, unsymmetric and isolated-node graphs, with the members
//! and aggregate pointers checked against the aggregation, and with ordered priorities (windows
//! of 2^4 nodes, and standard aggregation); the tentative prolongator of one
//! candidate (block 1 and 2, a candidate with zeros on a whole aggregate) and of several
//! (rigid-body modes in 2-D and 3-D, random and rank-deficient sets); the errors for
//! non-canonical and non-square input.
//!
//! Skips with a notice without a GPU; fails instead when `SEGSPARSE_REQUIRE_GPU=1`.
//! Run alone: `cargo test --test all amg_gpu_graph::`.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::csr::CsrMatrix;
use segsparse::generate;
use segsparse::gpu::Gpu;
use segsparse::precond::amg::{fit_candidates, rigid_body_modes_2d, rigid_body_modes_3d};
use segsparse::sparse;
use segsparse::sparse::gpu::{self as sg, DeviceCsr};
use segsparse::spmv::gpu::GpuScalar;

trait Bits: Copy {
    fn bits(self) -> u64;
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}
impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

/// Same shape, pattern and values (bit for bit).
fn assert_same<T: GpuScalar + Bits + std::fmt::Debug>(
    got: &CsrMatrix<T>,
    want: &CsrMatrix<T>,
    what: &str,
) {
    assert_eq!(
        (got.nrows(), got.ncols(), got.nnz()),
        (want.nrows(), want.ncols(), want.nnz()),
        "{what} ({}): shape / entries",
        T::NAME
    );
    assert_eq!(got.row_ptr(), want.row_ptr(), "{what}: row_ptr");
    assert_eq!(got.col_idx(), want.col_idx(), "{what}: columns");
    for (k, (x, y)) in got.values().iter().zip(want.values()).enumerate() {
        assert!(
            x.bits() == y.bits(),
            "{what} ({}): value {k}: GPU {x:?} vs CPU {y:?}",
            T::NAME
        );
    }
}

/// A random canonical matrix with a stored diagonal (except on some rows), symmetric pattern
/// or not, with empty rows (isolated nodes) when `holes`.
fn random(n: usize, per_row: usize, symmetric: bool, holes: bool, seed: u64) -> CsrMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let empty: Vec<bool> = (0..n).map(|_| holes && rng.gen_range(0..6) == 0).collect();
    let mut t = Vec::new();
    for i in 0..n {
        if empty[i] {
            continue;
        }
        if rng.gen_range(0..10) != 0 {
            t.push((i, i, rng.gen_range(2.0..6.0)));
        }
        for _ in 0..rng.gen_range(0..=per_row) {
            let j = rng.gen_range(0..n);
            if empty[j] {
                continue;
            }
            let v = rng.gen_range(-1.0..1.0);
            t.push((i, j, v));
            if symmetric && j != i {
                t.push((j, i, v));
            }
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// Matrices for strength and aggregation: (name, matrix).
fn cases() -> Vec<(String, CsrMatrix<f64>)> {
    let mut v: Vec<(String, CsrMatrix<f64>)> = vec![
        ("poisson2d:50".into(), generate::poisson2d(50).unwrap()),
        ("poisson3d:16".into(), generate::poisson3d(16).unwrap()),
        ("poisson3d:40".into(), generate::poisson3d(40).unwrap()),
        ("poisson3d27:12".into(), generate::poisson3d27(12).unwrap()),
        (
            "aniso2d:40:1e-3".into(),
            generate::aniso2d(40, 1e-3).unwrap(),
        ),
        ("aniso2d:33:0.1".into(), generate::aniso2d(33, 0.1).unwrap()),
        ("random symmetric".into(), random(5000, 6, true, false, 1)),
        (
            "random unsymmetric".into(),
            random(3000, 4, false, false, 2),
        ),
        (
            "unsymmetric with isolated nodes".into(),
            random(2000, 3, false, true, 3),
        ),
        (
            "isolated nodes only".into(),
            generate::diag(100, 4).unwrap(),
        ),
        (
            "1×1".into(),
            CsrMatrix::from_triplets(1, 1, &[(0, 0, 2.0)]).unwrap(),
        ),
        ("empty".into(), CsrMatrix::from_triplets(0, 0, &[]).unwrap()),
    ];
    // Huge diagonals: d_i·d_j overflows to ∞ and θ·sqrt(∞) (NaN at θ = 0) keeps nothing there.
    let mut h = generate::poisson2d::<f64>(20).unwrap();
    let (rp, cj) = (h.row_ptr().to_vec(), h.col_idx().to_vec());
    for i in (0..h.nrows()).step_by(5) {
        let r = rp[i] as usize..rp[i + 1] as usize;
        for (c, x) in cj[r.clone()].iter().zip(&mut h.values_mut()[r]) {
            if *c as usize == i {
                *x = 1e300;
            }
        }
    }
    v.push(("huge diagonals".into(), h));
    let e = generate::elasticity2d::<f64>(30).unwrap();
    v.push((
        "elasticity2d:30 amalgamated".into(),
        sparse::amalgamate(&e, 2).unwrap(),
    ));
    v
}

fn gpu() -> Option<Arc<Gpu>> {
    segsparse::gpu::test_gpu()
}

fn check_strength<T: GpuScalar + Bits + std::fmt::Debug>(
    g: &Arc<Gpu>,
    a: &CsrMatrix<T>,
    theta: f64,
    what: &str,
) -> CsrMatrix<T> {
    let want = sparse::strength_symmetric(a, theta).unwrap();
    let da = DeviceCsr::upload(g, a).unwrap();
    let got = sg::strength_symmetric(g, &da, theta)
        .unwrap()
        .download(g)
        .unwrap();
    assert_same(&got, &want, &format!("strength {what} θ {theta}"));
    want
}

#[test]
fn strength_equals_cpu() {
    let Some(g) = gpu() else { return };
    for (name, a) in cases() {
        for theta in [0.0, 0.25] {
            check_strength(&g, &a, theta, &name);
            check_strength(&g, &a.cast::<f32>(), theta, &name);
        }
    }
}

#[test]
fn drop_small_equals_cpu() {
    let Some(g) = gpu() else { return };
    let mut cases = cases();
    cases.push(("elasticity3d:6".into(), generate::elasticity3d(6).unwrap()));
    for (name, a) in cases {
        for tol in [0.0, 1e-12, 0.2] {
            check_drop(&g, &a, tol, &name);
            check_drop(&g, &a.cast::<f32>(), tol, &name);
        }
    }
}

fn check_drop<T: GpuScalar + Bits + std::fmt::Debug>(
    g: &Arc<Gpu>,
    a: &CsrMatrix<T>,
    tol: f64,
    what: &str,
) {
    let want = sparse::drop_small(a, tol).unwrap();
    let da = DeviceCsr::upload(g, a).unwrap();
    let got = sg::drop_small(g, &da, tol).unwrap();
    match (got, want) {
        (None, None) => {}
        (Some((m, pos)), Some((wm, wpos))) => {
            let what = format!("drop {what} tol {tol}");
            assert_same(&m.download(g).unwrap(), &wm, &what);
            assert_eq!(g.download(&pos).unwrap(), wpos, "{what}: positions");
        }
        (got, want) => panic!(
            "drop {what} tol {tol}: GPU dropped {}, CPU {}",
            got.map_or(0, |(m, _)| a.nnz() - m.nnz),
            want.map_or(0, |(m, _)| a.nnz() - m.nnz())
        ),
    }
}

#[test]
fn amalgamate_equals_cpu() {
    let Some(g) = gpu() else { return };
    let e = generate::elasticity2d::<f64>(30).unwrap();
    let r = random(900, 8, false, true, 5);
    for (name, a, block) in [
        ("elasticity2d:30", &e, 2),
        ("random", &r, 3),
        ("random", &r, 1),
    ] {
        let want = sparse::amalgamate(a, block).unwrap();
        let da = DeviceCsr::upload(&g, a).unwrap();
        let got = sg::amalgamate(&g, &da, block)
            .unwrap()
            .download(&g)
            .unwrap();
        assert_same(&got, &want, &format!("amalgamate {name} block {block}"));
        let a32 = a.cast::<f32>();
        let want = sparse::amalgamate(&a32, block).unwrap();
        let da = DeviceCsr::upload(&g, &a32).unwrap();
        let got = sg::amalgamate(&g, &da, block)
            .unwrap()
            .download(&g)
            .unwrap();
        assert_same(&got, &want, &format!("amalgamate {name} block {block}"));
    }
    let da = DeviceCsr::upload(&g, &r).unwrap();
    assert!(sg::amalgamate(&g, &da, 0).is_err());
    assert!(sg::amalgamate(&g, &da, 7).is_err());
}

/// `members` and `agg_ptr` describe the aggregation: each aggregate's nodes in increasing order,
/// then the unaggregated nodes in increasing order.
fn check_members(g: &Arc<Gpu>, ga: &sg::GpuAggregation, want: &sparse::Aggregation, what: &str) {
    let n = ga.n;
    let nagg = ga.num_aggregates;
    let ptr = g.download(&ga.agg_ptr).unwrap();
    let mut members = g.download(&ga.members).unwrap();
    members.truncate(n);
    assert_eq!(ptr.len(), nagg + 1, "{what}: agg_ptr length");
    let mut expect_ptr = vec![0u32; nagg + 1];
    let mut expect_members: Vec<u32> = Vec::with_capacity(n);
    let mut by_agg: Vec<Vec<u32>> = vec![Vec::new(); nagg];
    let mut loose = Vec::new();
    for (i, &a) in want.agg.iter().enumerate() {
        if a == sparse::NOT_AGGREGATED {
            loose.push(i as u32);
        } else {
            by_agg[a as usize].push(i as u32);
        }
    }
    for (a, m) in by_agg.iter().enumerate() {
        expect_members.extend_from_slice(m);
        expect_ptr[a + 1] = expect_members.len() as u32;
    }
    expect_members.extend_from_slice(&loose);
    assert_eq!(ptr, expect_ptr, "{what}: agg_ptr");
    assert_eq!(members, expect_members, "{what}: members");
}

#[test]
fn mis2_equals_cpu() {
    let Some(g) = gpu() else { return };
    for (name, a) in cases() {
        for theta in [0.0, 0.25] {
            let s = check_strength(&g, &a, theta, &name);
            let ds = DeviceCsr::upload(&g, &s).unwrap();
            for seed in [0, 7] {
                let (want, rounds) = sparse::aggregate_mis2_counted(&s, seed);
                let ga = sg::aggregate_mis2(&g, &ds, seed).unwrap();
                let what = format!("MIS-2 {name} θ {theta} seed {seed}");
                assert_eq!(ga.rounds, rounds, "{what}: rounds");
                assert_eq!(ga.n, s.nrows(), "{what}");
                assert_eq!(ga.num_aggregates, want.num_aggregates(), "{what}");
                let got = ga.download(&g).unwrap();
                assert!(got.agg == want.agg, "{what}: agg differs");
                assert!(got.roots == want.roots, "{what}: roots differ");
                check_members(&g, &ga, &want, &what);
            }
        }
    }
    // An unsymmetric S passed directly (its graph needs the missing mirrors), and S with its
    // diagonal stored.
    for (name, s) in [
        ("unsymmetric S", random(4000, 5, false, true, 9)),
        ("S with diagonal", generate::poisson2d(30).unwrap()),
    ] {
        let ds = DeviceCsr::upload(&g, &s).unwrap();
        for seed in [0, 7] {
            let want = sparse::aggregate_mis2(&s, seed);
            let ga = sg::aggregate_mis2(&g, &ds, seed).unwrap();
            assert!(ga.download(&g).unwrap() == want, "{name} seed {seed}");
            check_members(&g, &ga, &want, name);
        }
    }
}

/// Ordered priorities (windows of 2^4 nodes, and one window: standard aggregation): the same
/// aggregation, roots and round count as the CPU, through batches of rounds that double (one
/// window takes far more than the first batch's rounds on these graphs).
#[test]
fn ordered_mis2_equals_cpu() {
    let Some(g) = gpu() else { return };
    for (name, a) in cases() {
        let s = sparse::strength_symmetric(&a, 0.0).unwrap();
        let ds = DeviceCsr::upload(&g, &s).unwrap();
        for window in [4, 30] {
            let (want, rounds) = sparse::aggregate_mis2_ordered(&s, 7, window);
            let ga = sg::aggregate_mis2_ordered(&g, &ds, 7, window).unwrap();
            let what = format!("ordered MIS-2 {name} window {window}");
            assert_eq!(ga.rounds, rounds, "{what}: rounds");
            assert_eq!(ga.num_aggregates, want.num_aggregates(), "{what}");
            let got = ga.download(&g).unwrap();
            assert!(got == want, "{what}: aggregation differs");
            check_members(&g, &ga, &want, &what);
        }
    }
}

fn check_tentative<T: GpuScalar + Bits + std::fmt::Debug>(
    g: &Arc<Gpu>,
    s: &CsrMatrix<T>,
    block: usize,
    b: &[T],
    what: &str,
) {
    let agg = sparse::aggregate_mis2(s, 3);
    let (want_t, want_bc) = fit_candidates(&agg, block, &[b.to_vec()]);
    let ds = DeviceCsr::upload(g, s).unwrap();
    let ga = sg::aggregate_mis2(g, &ds, 3).unwrap();
    let db = g.upload(b).unwrap();
    let (t, bc) = sg::tentative_single(g, &ga, block, &db).unwrap();
    assert_same(&t.download(g).unwrap(), &want_t, what);
    let mut bc = g.download(&bc).unwrap();
    bc.truncate(agg.num_aggregates());
    assert_eq!(bc.len(), want_bc[0].len(), "{what}: bc length");
    for (a, (x, y)) in bc.iter().zip(&want_bc[0]).enumerate() {
        assert!(
            x.bits() == y.bits(),
            "{what}: bc[{a}] GPU {x:?} vs CPU {y:?}"
        );
    }
}

#[test]
fn tentative_single_equals_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    // Block 1: Poisson 3D with the constant and with a random candidate; an unsymmetric graph
    // with isolated nodes (empty rows of T).
    let p = generate::poisson3d::<f64>(14).unwrap();
    let s = sparse::strength_symmetric(&p, 0.0).unwrap();
    let ones = vec![1.0; s.nrows()];
    check_tentative(&g, &s, 1, &ones, "poisson3d:14 constant");
    let b: Vec<f64> = (0..s.nrows()).map(|_| rng.gen_range(-2.0..3.0)).collect();
    check_tentative(&g, &s, 1, &b, "poisson3d:14 random");
    check_tentative(
        &g,
        &s.cast::<f32>(),
        1,
        &b.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        "poisson3d:14 f32",
    );
    let r = sparse::strength_symmetric(&random(3000, 3, false, true, 4), 0.0).unwrap();
    let b: Vec<f64> = (0..r.nrows()).map(|_| rng.gen_range(0.5..1.5)).collect();
    check_tentative(&g, &r, 1, &b, "isolated nodes");
    // Block 2: elasticity, the x-translation (zero on every y unknown) and a random candidate;
    // a candidate that vanishes on whole aggregates gives zero columns.
    let e = generate::elasticity2d::<f64>(30).unwrap();
    let se = sparse::strength_symmetric(&sparse::amalgamate(&e, 2).unwrap(), 0.0).unwrap();
    let tx: Vec<f64> = (0..e.nrows())
        .map(|i| if i % 2 == 0 { 1.0 } else { 0.0 })
        .collect();
    check_tentative(&g, &se, 2, &tx, "elasticity x-translation");
    let b: Vec<f64> = (0..e.nrows()).map(|_| rng.gen_range(-1.0..1.0)).collect();
    check_tentative(&g, &se, 2, &b, "elasticity random");
    let half: Vec<f64> = (0..e.nrows())
        .map(|i| if i < e.nrows() / 2 { 0.0 } else { 2.5 })
        .collect();
    check_tentative(&g, &se, 2, &half, "elasticity half zero");
    check_tentative(
        &g,
        &se.cast::<f32>(),
        2,
        &b.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        "elasticity f32",
    );
}

/// `tentative_qr` against `fit_candidates` on the same aggregation: `T` and every coarse
/// candidate bit for bit.
fn check_qr<T: GpuScalar + Bits + std::fmt::Debug>(
    g: &Arc<Gpu>,
    s: &CsrMatrix<T>,
    block: usize,
    b: &[Vec<T>],
    what: &str,
) {
    let agg = sparse::aggregate_mis2(s, 3);
    let (want_t, want_bc) = fit_candidates(&agg, block, b);
    let ds = DeviceCsr::upload(g, s).unwrap();
    let ga = sg::aggregate_mis2(g, &ds, 3).unwrap();
    let db: Vec<_> = b.iter().map(|v| g.upload(v).unwrap()).collect();
    let (t, bc) = sg::tentative_qr(g, &ga, block, &db).unwrap();
    assert_same(&t.download(g).unwrap(), &want_t, what);
    assert_eq!(bc.len(), b.len(), "{what}: coarse candidates");
    for (j, (got, want)) in bc.iter().zip(&want_bc).enumerate() {
        let mut got = g.download(got).unwrap();
        got.truncate(want.len());
        assert_eq!(got.len(), want.len(), "{what}: bc[{j}] length");
        for (a, (x, y)) in got.iter().zip(want).enumerate() {
            assert!(
                x.bits() == y.bits(),
                "{what}: bc[{j}][{a}] GPU {x:?} vs CPU {y:?}"
            );
        }
    }
}

/// The tentative prolongator of several candidates (a QR per aggregate) equals the CPU's:
/// 2-D elasticity with its three rigid-body modes (block 2), 3-D elasticity with six (block 3),
/// random candidates on Poisson 3D (block 1), a rank-deficient set (a repeated candidate and a
/// sum of two gives zero columns), candidates that vanish on whole aggregates, and f32.
#[test]
fn tentative_qr_equals_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let n2 = 30;
    let e2 = generate::elasticity2d::<f64>(n2).unwrap();
    let s2 = sparse::strength_symmetric(&sparse::amalgamate(&e2, 2).unwrap(), 0.0).unwrap();
    let m2 = rigid_body_modes_2d::<f64>(&generate::elasticity2d_coordinates(n2));
    check_qr(&g, &s2, 2, &m2, "elasticity2d rigid-body modes");
    let n3 = 9;
    let e3 = generate::elasticity3d::<f64>(n3).unwrap();
    let s3 = sparse::strength_symmetric(&sparse::amalgamate(&e3, 3).unwrap(), 0.0).unwrap();
    let m3 = rigid_body_modes_3d::<f64>(&generate::elasticity3d_coordinates(n3));
    check_qr(&g, &s3, 3, &m3, "elasticity3d rigid-body modes");
    check_qr(
        &g,
        &s3.cast::<f32>(),
        3,
        &m3.iter()
            .map(|v| v.iter().map(|&x| x as f32).collect())
            .collect::<Vec<Vec<f32>>>(),
        "elasticity3d f32",
    );
    let p = generate::poisson3d::<f64>(14).unwrap();
    let sp = sparse::strength_symmetric(&p, 0.0).unwrap();
    let rand: Vec<Vec<f64>> = (0..4)
        .map(|_| (0..sp.nrows()).map(|_| rng.gen_range(-2.0..3.0)).collect())
        .collect();
    check_qr(&g, &sp, 1, &rand, "poisson3d random ×4");
    let sum: Vec<f64> = rand[0].iter().zip(&rand[1]).map(|(x, y)| x + y).collect();
    let deficient = vec![
        rand[0].clone(),
        rand[0].clone(),
        rand[1].clone(),
        sum,
        vec![1.0; sp.nrows()],
    ];
    check_qr(&g, &sp, 1, &deficient, "poisson3d rank-deficient");
    let half: Vec<Vec<f64>> = (0..2)
        .map(|c| {
            (0..e2.nrows())
                .map(|i| {
                    if i < e2.nrows() / 2 {
                        0.0
                    } else {
                        c as f64 + rng.gen_range(0.5..1.5)
                    }
                })
                .collect()
        })
        .collect();
    check_qr(&g, &s2, 2, &half, "elasticity2d half zero");
    let r = sparse::strength_symmetric(&random(3000, 3, false, true, 4), 0.0).unwrap();
    let rb: Vec<Vec<f64>> = (0..3)
        .map(|_| (0..r.nrows()).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    check_qr(&g, &r, 1, &rb, "isolated nodes ×3");
}

#[test]
fn non_canonical_and_non_square_input_are_errors() {
    let Some(g) = gpu() else { return };
    // Row 2 unsorted, row 3 repeated.
    let a = CsrMatrix::try_from_parts(
        4,
        4,
        vec![0, 1, 3, 5, 7],
        vec![0, 0, 1, 2, 1, 3, 3],
        vec![1.0f64; 7],
    )
    .unwrap();
    let da = DeviceCsr::upload(&g, &a).unwrap();
    for e in [
        sg::strength_symmetric(&g, &da, 0.0).unwrap_err(),
        sg::amalgamate(&g, &da, 2).unwrap_err(),
        sg::aggregate_mis2(&g, &da, 0).unwrap_err(),
    ] {
        let m = e.to_string();
        assert!(m.contains("row 2") || m.contains("row 3"), "{m}");
        assert!(m.contains("canonical"), "{m}");
    }
    let rect = CsrMatrix::<f64>::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
    let dr = DeviceCsr::upload(&g, &rect).unwrap();
    assert!(sg::strength_symmetric(&g, &dr, 0.0)
        .unwrap_err()
        .to_string()
        .contains("2×3"));
    assert!(sg::aggregate_mis2(&g, &dr, 0).is_err());
    let sq = generate::poisson2d::<f64>(4).unwrap();
    let ds = DeviceCsr::upload(&g, &sq).unwrap();
    assert!(sg::strength_symmetric(&g, &ds, 1.5).is_err());
}
