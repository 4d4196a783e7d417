//! SpMM `Y ← α·A·X + β·Y` against `k` SpMVs, column by column: random and real matrices, both
//! layouts, empty rows, `k = 1` and `k` around the GPU's 32-column window, `α = 0`, `β = 0` with
//! NaN in `Y`, and bad shapes. The GPU product (and cuSPARSE's) through the same comparison;
//! those tests skip without a GPU and fail instead under `SEGSPARSE_REQUIRE_GPU=1`.

use crate::common::mtx as common_mtx;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::spmm::{self, cpu, Layout};
use segsparse::spmv::cpu::spmv_seq;
use segsparse::{generate, CsrMatrix, Error, Scalar};

const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

fn random_block<T: Scalar>(rows: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<T> {
    (0..rows * k)
        .map(|_| T::of_f64(rng.gen_range(-1.0..1.0)))
        .collect()
}

fn column<T: Scalar>(b: &[T], j: usize, rows: usize, k: usize, layout: Layout) -> Vec<T> {
    (0..rows).map(|i| b[layout.index(i, j, rows, k)]).collect()
}

/// Checks `y_out` (the block after `Y ← α·A·X + β·Y` from `y_in`) against one SpMV per column,
/// with a rounding bound that grows with the row length.
#[allow(clippy::too_many_arguments)]
fn check_against_spmv<T: Scalar>(
    what: &str,
    a: &CsrMatrix<T>,
    alpha: T,
    x: &[T],
    k: usize,
    layout: Layout,
    beta: T,
    y_in: &[T],
    y_out: &[T],
) {
    let (n, m) = (a.nrows(), a.ncols());
    for j in 0..k {
        let xc = column(x, j, m, k, layout);
        let mut yc = column(y_in, j, n, k, layout);
        spmv_seq(alpha, a, &xc, beta, &mut yc);
        for i in 0..n {
            let (cols, vals) = a.row(i);
            let mag: f64 = alpha.as_f64().abs()
                * cols
                    .iter()
                    .zip(vals)
                    .map(|(&c, &v)| (v.as_f64() * xc[c as usize].as_f64()).abs())
                    .sum::<f64>()
                + if beta == T::zero() {
                    0.0
                } else {
                    (beta.as_f64() * y_in[layout.index(i, j, n, k)].as_f64()).abs()
                };
            let got = y_out[layout.index(i, j, n, k)].as_f64();
            let tol = 4.0 * T::EPS * (cols.len() as f64 + 2.0) * mag + f64::MIN_POSITIVE;
            assert!(
                (got - yc[i].as_f64()).abs() <= tol,
                "{what}: {layout:?} k={k} Y[{i}][{j}] = {got}, SpMV gives {} (tol {tol:e})",
                yc[i]
            );
        }
    }
}

/// Rows of 3 entries with one row of each length around the GPU kernels' team bounds (16 … 64
/// entries for a group, 32 … 1 024 for a warp, beyond for a block) every 7th row, and a run of
/// rows of 100 entries: every team size, and windows that hold several longer rows.
fn team_rows<T: Scalar>() -> CsrMatrix<T> {
    let lens = [
        0usize, 1, 2, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
        511, 512, 513, 1023, 1500,
    ];
    let (n, m) = (400usize, 1600usize);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut t = Vec::new();
    for i in 0..n {
        let len = if i % 7 == 3 && i / 7 < lens.len() {
            lens[i / 7]
        } else if (300..340).contains(&i) {
            100
        } else {
            3
        };
        let first = rng.gen_range(0..m);
        for j in 0..len {
            t.push((i, (first + j * 7) % m, rng.gen_range(-1.0..1.0)));
        }
    }
    let t: Vec<(usize, usize, T)> = t
        .into_iter()
        .map(|(i, j, v)| (i, j, T::of_f64(v)))
        .collect();
    CsrMatrix::from_triplets(n, m, &t).unwrap()
}

/// Rows of 3 entries with rows long enough for the GPU's row-major kernel to cut them into
/// pieces summed by several blocks: one of 20 000 entries (more pieces than blocks per window),
/// three long rows back to back (a piece boundary between two of them), a long row that starts
/// and one that ends at a multiple of 2 048 entries (a piece boundary for every width), rows
/// just below and above the cutting bound, and a long last row.
fn split_rows<T: Scalar>() -> CsrMatrix<T> {
    let (n, m) = (3000usize, 25_000usize);
    let mut lens = vec![3usize; n];
    lens[10] = 20_000;
    lens[100] = 3000;
    lens[101] = 2500;
    lens[102] = 2049;
    lens[1500] = 511;
    lens[1501] = 513;
    lens[1502] = 1025;
    lens[1503] = 4097;
    lens[n - 1] = 5000;
    // Row 500 starts at a multiple of 2 048, row 800 ends at one.
    let pad = |lens: &[usize], upto: usize| {
        let before: usize = lens[..upto].iter().sum();
        3 + (2048 - (before + 3) % 2048) % 2048
    };
    lens[499] = pad(&lens, 499);
    lens[500] = 2600;
    lens[800] = pad(&lens, 800) + 2048;
    let mut rng = ChaCha8Rng::seed_from_u64(29);
    let mut t = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let first = rng.gen_range(0..m);
        for j in 0..len {
            t.push((i, (first + j * 7) % m, T::of_f64(rng.gen_range(-1.0..1.0))));
        }
    }
    let a = CsrMatrix::from_triplets(n, m, &t).unwrap();
    assert_eq!(a.row_ptr()[500] % 2048, 0);
    assert_eq!(a.row_ptr()[801] % 2048, 0);
    a
}

fn test_matrices<T: Scalar>() -> Vec<(String, CsrMatrix<T>)> {
    let mut v: Vec<(String, CsrMatrix<T>)> = vec![
        ("team_rows".into(), team_rows()),
        ("poisson2d:17".into(), generate::poisson2d(17).unwrap()),
        ("poisson3d:6".into(), generate::poisson3d(6).unwrap()),
        ("random:300:9".into(), generate::random(300, 9, 3).unwrap()),
        (
            "wide:40:700:12".into(),
            generate::wide(40, 700, 12, 4).unwrap(),
        ),
        (
            "emptyrows:500:70".into(),
            generate::emptyrows(500, 70, 6, 5).unwrap(),
        ),
        (
            "powerlaw:2000:1.8".into(),
            generate::powerlaw(2000, 1.8, 6).unwrap(),
        ),
        (
            "denserows".into(),
            generate::denserows(400, 3, 2, 380, 7).unwrap(),
        ),
        // Rows of 2 900 entries among 4-entry ones: summed by a whole block on the GPU.
        (
            "denserows:3000:4:3:2900".into(),
            generate::denserows(3000, 4, 3, 2900, 9).unwrap(),
        ),
        ("zeros:7x5".into(), CsrMatrix::zeros(7, 5)),
        ("zeros:0x4".into(), CsrMatrix::zeros(0, 4)),
    ];
    for name in [
        "raefsky2",
        "west0479",
        "1138_bus",
        "lp_ship04l",
        "small/empty_rows",
    ] {
        if let Some(a) = common_mtx::load::<T>(name) {
            v.push((name.into(), a));
        }
    }
    v
}

fn cpu_case<T: Scalar>() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (name, a) in test_matrices::<T>() {
        for &k in &[1usize, 3, 4, 8, 16, 33] {
            for layout in LAYOUTS {
                let x = random_block::<T>(a.ncols(), k, &mut rng);
                let y0 = random_block::<T>(a.nrows(), k, &mut rng);
                for (alpha, beta) in [(1.0, 0.0), (-0.5, 2.0), (0.0, 3.0), (0.0, 0.0)] {
                    let (alpha, beta) = (T::of_f64(alpha), T::of_f64(beta));
                    // β = 0 must not read Y: start from NaN.
                    let y_in: Vec<T> = if beta == T::zero() {
                        vec![T::nan(); y0.len()]
                    } else {
                        y0.clone()
                    };
                    let mut y = y_in.clone();
                    spmm::spmm(alpha, &a, &x, k, layout, beta, &mut y).unwrap();
                    check_against_spmv(&name, &a, alpha, &x, k, layout, beta, &y_in, &y);
                    let mut ys = y_in.clone();
                    cpu::spmm_seq(alpha, &a, &x, k, layout, beta, &mut ys);
                    check_against_spmv(&name, &a, alpha, &x, k, layout, beta, &y_in, &ys);
                }
            }
        }
    }
}

#[test]
fn cpu_spmm_equals_k_spmvs_f64() {
    cpu_case::<f64>();
}

#[test]
fn cpu_spmm_equals_k_spmvs_f32() {
    cpu_case::<f32>();
}

/// Large enough to take the parallel path with many chunks, so the chunk boundaries are covered.
#[test]
fn cpu_spmm_parallel_chunks() {
    let a: CsrMatrix<f64> = generate::random(20_000, 7, 9).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for layout in LAYOUTS {
        let k = 5;
        let x = random_block::<f64>(a.ncols(), k, &mut rng);
        let y0 = random_block::<f64>(a.nrows(), k, &mut rng);
        let mut y = y0.clone();
        spmm::spmm(1.5, &a, &x, k, layout, -1.0, &mut y).unwrap();
        check_against_spmv("random:20000:7", &a, 1.5, &x, k, layout, -1.0, &y0, &y);
    }
}

/// The rows the GPU cuts into pieces, on the CPU (and the matrix's piece boundaries where the
/// GPU test wants them).
#[test]
fn cpu_spmm_split_rows() {
    let a = split_rows::<f64>();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for layout in LAYOUTS {
        let k = 13;
        let x = random_block::<f64>(a.ncols(), k, &mut rng);
        let y0 = random_block::<f64>(a.nrows(), k, &mut rng);
        let mut y = y0.clone();
        spmm::spmm(0.5, &a, &x, k, layout, 2.0, &mut y).unwrap();
        check_against_spmv("split_rows", &a, 0.5, &x, k, layout, 2.0, &y0, &y);
    }
}

#[test]
fn bad_shapes_are_clear_errors() {
    let a: CsrMatrix<f64> = generate::random(10, 3, 1).unwrap();
    let x = vec![0.0; 10 * 4];
    let mut y = vec![0.0; 10 * 4];
    let msg = |e: Error| e.to_string();
    let e = spmm::spmm(1.0, &a, &x, 0, Layout::RowMajor, 0.0, &mut y).unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    assert!(msg(e).contains("k = 0"));
    let e = spmm::spmm(1.0, &a, &x[..36], 4, Layout::RowMajor, 0.0, &mut y).unwrap_err();
    assert!(msg(e).contains("X has 36 elements, expected 10 rows × 4 columns = 40"));
    let e = spmm::spmm(1.0, &a, &x, 4, Layout::ColMajor, 0.0, &mut y[..39]).unwrap_err();
    assert!(msg(e).contains("Y has 39 elements, expected 10 rows × 4 columns = 40"));
    // A block of the right length for another k is a shape error too.
    let e = spmm::spmm(1.0, &a, &x, 5, Layout::RowMajor, 0.0, &mut y).unwrap_err();
    assert!(msg(e).contains("expected 10 rows × 5 columns"));
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::gpu::test_gpu;
    use segsparse::spmm::gpu::GpuSpmm;
    #[cfg(feature = "peers")]
    use segsparse::spmm::gpu::{CusparseSpmm, CusparseSpmmAlg};
    use segsparse::spmv::gpu::{GpuCsr, GpuScalar};

    fn gpu_case<T: GpuScalar>() {
        let Some(g) = test_gpu() else { return };
        let ops = GpuSpmm::<T>::new(&g).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for (name, a) in test_matrices::<T>() {
            let d = GpuCsr::upload(&g, &a).unwrap();
            for &k in &[1usize, 2, 4, 6, 8, 16, 32, 33, 70] {
                for layout in LAYOUTS {
                    let x = random_block::<T>(a.ncols(), k, &mut rng);
                    let y0 = random_block::<T>(a.nrows(), k, &mut rng);
                    let dx = g.upload(&x).unwrap();
                    for (alpha, beta) in [(1.0, 0.0), (-0.5, 2.0), (0.0, 3.0)] {
                        let (alpha, beta) = (T::of_f64(alpha), T::of_f64(beta));
                        let y_in: Vec<T> = if beta == T::zero() {
                            vec![T::nan(); y0.len()] // poisoned, and β = 0 must not read it
                        } else {
                            y0.clone()
                        };
                        let mut dy = g.upload(&y_in).unwrap();
                        ops.spmm(&d, alpha, &dx, k, layout, beta, &mut dy).unwrap();
                        let y = g.download(&dy).unwrap();
                        check_against_spmv(&name, &a, alpha, &x, k, layout, beta, &y_in, &y);
                    }
                }
            }
        }
    }

    #[test]
    fn gpu_spmm_equals_k_spmvs_f64() {
        gpu_case::<f64>();
    }

    #[test]
    fn gpu_spmm_equals_k_spmvs_f32() {
        gpu_case::<f32>();
    }

    /// `A·X` by [`GpuSpmm`] for every width of `ks`, both layouts and each `(α, β)` of
    /// `coeffs`: equal to `k` SpMVs, and the same bits in each of `runs` runs.
    fn gpu_repeatable<T: GpuScalar>(
        what: &str,
        a: &CsrMatrix<T>,
        seed: u64,
        ks: &[usize],
        coeffs: [(f64, f64); 2],
        runs: usize,
    ) {
        let Some(g) = test_gpu() else { return };
        let ops = GpuSpmm::<T>::new(&g).unwrap();
        let d = GpuCsr::upload(&g, a).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for &k in ks {
            for layout in LAYOUTS {
                let x = random_block::<T>(a.ncols(), k, &mut rng);
                let y0 = random_block::<T>(a.nrows(), k, &mut rng);
                let dx = g.upload(&x).unwrap();
                for (alpha, beta) in coeffs {
                    let (alpha, beta) = (T::of_f64(alpha), T::of_f64(beta));
                    let y_in: Vec<T> = if beta == T::zero() {
                        vec![T::nan(); y0.len()]
                    } else {
                        y0.clone()
                    };
                    let out: Vec<Vec<T>> = (0..runs)
                        .map(|_| {
                            let mut dy = g.upload(&y_in).unwrap();
                            ops.spmm(&d, alpha, &dx, k, layout, beta, &mut dy).unwrap();
                            g.download(&dy).unwrap()
                        })
                        .collect();
                    check_against_spmv(what, a, alpha, &x, k, layout, beta, &y_in, &out[0]);
                    for again in &out[1..] {
                        let same = out[0]
                            .iter()
                            .zip(again)
                            .all(|(p, q)| p.as_f64().to_bits() == q.as_f64().to_bits());
                        assert!(same, "{what} {layout:?} k={k}: runs differ");
                    }
                }
            }
        }
    }

    /// Every team size of the row-major kernel (and the column-major long rows) on one matrix,
    /// in both precisions and layouts, for the widths of the vector and scalar paths; the same
    /// bits on a second run.
    fn gpu_teams<T: GpuScalar>() {
        let ks = [1usize, 3, 4, 8, 12, 16, 32, 40];
        gpu_repeatable(
            "team_rows",
            &team_rows::<T>(),
            23,
            &ks,
            [(1.0, 0.0), (0.75, -1.5)],
            2,
        );
    }

    #[test]
    fn gpu_spmm_teams_f64() {
        gpu_teams::<f64>();
    }

    #[test]
    fn gpu_spmm_teams_f32() {
        gpu_teams::<f32>();
    }

    /// Rows cut into pieces over several blocks (row-major), for widths that fill, split and
    /// do not divide the lanes' loads: equal to `k` SpMVs, and the same bits in three runs
    /// (whichever block adds a row's pieces, it adds them in piece order).
    fn gpu_split<T: GpuScalar>() {
        let ks = [1usize, 3, 5, 8, 13, 16, 17, 24, 32, 40];
        gpu_repeatable(
            "split_rows",
            &split_rows::<T>(),
            31,
            &ks,
            [(1.0, 0.0), (-1.25, 0.5)],
            3,
        );
    }

    #[test]
    fn gpu_spmm_split_rows_f64() {
        gpu_split::<f64>();
    }

    #[test]
    fn gpu_spmm_split_rows_f32() {
        gpu_split::<f32>();
    }

    /// Rows too long for one block's two rounds of loads are cut on small matrices, into as many
    /// pieces as blocks share a window (at most 32); a matrix with a window per long-row block
    /// keeps its rows whole.
    #[test]
    fn long_split_shapes() {
        use segsparse::spmm::gpu::{LongSplit, RowPlan};
        let plan = RowPlan::new::<f64>(6.3, 16, 16).spread(6833, 6.3, 67_584);
        assert_eq!(plan.lanes, 8);
        let s = LongSplit::new(&plan, 6833, 1442, 1056);
        assert_eq!((s.chunk, s.parts), (256, 7), "{s:?}");
        assert_eq!(
            LongSplit::new(&plan, 6833, 512, 1056).parts,
            1,
            "two rounds: whole"
        );
        assert_eq!(LongSplit::new(&plan, 6833, 512, 1056).chunk, 0);
        assert_eq!(LongSplit::new(&plan, 6833, 100_000, 1056).parts, 32);
        let s = LongSplit::new(&plan, 1_000_000, 100_000, 1056);
        assert_eq!(
            (s.chunk, s.parts),
            (0, 1),
            "a large matrix: one block per window"
        );
        let plan = RowPlan::new::<f32>(6.0, 8, 8);
        assert_eq!(plan.lanes, 2);
        assert_eq!(LongSplit::new(&plan, 2000, 1310, 1056).chunk, 0);
        assert_eq!(
            LongSplit::new(&plan, 2000, 5000, 1056),
            LongSplit {
                chunk: 1024,
                parts: 6
            }
        );
    }

    /// The row-major plan: 16-byte loads where the widths allow, lanes covering the window,
    /// team bounds growing from group to warp.
    #[test]
    fn row_plan_shapes() {
        use segsparse::spmm::gpu::RowPlan;
        let p = RowPlan::new::<f64>(6.0, 8, 8);
        assert_eq!((p.vector, p.lanes, p.group_slots), (2, 4, 1));
        assert!(p.lim_group < p.lim_warp, "{p:?}");
        assert_eq!(p.rows_per_block(), 64);
        let p = RowPlan::new::<f64>(20.0, 8, 8);
        assert_eq!((p.group_slots, p.rows_per_block()), (4, 16));
        let p = RowPlan::new::<f64>(90.0, 16, 16);
        assert_eq!(
            (p.vector, p.lanes, p.group_slots),
            (2, 8, 4),
            "a warp per row"
        );
        assert_eq!(
            p.lim_group, p.lim_warp,
            "a group as wide as a warp takes the warp's rows"
        );
        let p = RowPlan::new::<f32>(3.0, 16, 16);
        assert_eq!((p.vector, p.lanes, p.group_slots), (4, 4, 1));
        // k = 33: the second window holds one column; odd widths load scalars.
        let p = RowPlan::new::<f64>(6.0, 33, 1);
        assert_eq!((p.vector, p.lanes), (1, 1));
        let p = RowPlan::new::<f64>(6.0, 33, 32);
        assert_eq!((p.vector, p.lanes), (1, 32));
        let p = RowPlan::new::<f32>(1000.0, 32, 32);
        assert_eq!((p.vector, p.lanes, p.group_slots), (4, 8, 4));
        assert!(p.lim_group <= p.lim_warp);
        // A small matrix spreads its rows over more slots: up to one entry of the mean row per
        // slot, a warp per row, or enough lanes; a large one keeps its plan.
        let small = RowPlan::new::<f64>(6.5, 4, 4);
        assert_eq!((small.lanes, small.group_slots), (2, 1));
        let p = small.spread(3312, 6.5, 67_584);
        assert_eq!((p.lanes, p.group_slots), (2, 8), "{p:?}");
        assert!(p.lim_group >= 8 * 2 * 8 && p.lim_group <= p.lim_warp);
        assert_eq!(small.spread(13_436, 5.3, 67_584).group_slots, 4);
        assert_eq!(small.spread(1_000_000, 6.5, 67_584), small);
        let p = RowPlan::new::<f64>(6.5, 16, 16).spread(3312, 6.5, 67_584);
        assert_eq!((p.lanes, p.group_slots), (8, 4), "a warp per row at most");
    }

    /// Groups widen to take the longest row where it would wait for a warp and the launch stays
    /// within a wave of resident threads; long rows, large matrices and plans that cover the
    /// longest row keep their groups.
    #[test]
    fn row_plan_covers_the_longest_row() {
        use segsparse::spmm::gpu::RowPlan;
        let wave = 132 * 2048;
        let p = RowPlan::new::<f64>(7.1, 16, 16).spread(13_436, 7.1, 67_584);
        assert_eq!((p.lanes, p.group_slots, p.lim_group), (8, 1, 16), "{p:?}");
        let c = p.cover_longest(13_436, 27, wave);
        assert_eq!(c.group_slots, 2, "{c:?}");
        assert!(c.lim_group >= 27 && c.lim_warp == p.lim_warp, "{c:?}");
        assert_eq!(
            p.cover_longest(13_436, 16, wave),
            p,
            "the group takes every row"
        );
        assert_eq!(
            p.cover_longest(13_436, 200, wave),
            p,
            "a row for the long-row blocks"
        );
        assert_eq!(p.cover_longest(1_000_000, 27, wave), p, "more than a wave");
        let w = RowPlan::new::<f64>(7.0, 16, 16).cover_longest(100, 120, wave);
        assert_eq!(w.group_slots, 4, "at most a warp: {w:?}");
    }

    /// The column-major group: one lane per 8 entries of the mean row, more on a small matrix.
    #[test]
    fn col_lanes_spread_small_matrices() {
        use segsparse::spmm::gpu::GpuSpmm;
        let lanes = |n, mean| 1usize << GpuSpmm::<f64>::col_lanes_log2(n, mean, 67_584);
        assert_eq!(lanes(1_000_000, 7.0), 1);
        assert_eq!(lanes(1_000_000, 90.0), 8);
        assert_eq!(lanes(3312, 6.5), 8, "one lane per entry of the mean row");
        assert_eq!(lanes(20_000, 6.5), 4);
        assert_eq!(lanes(100, 5000.0), 32);
    }

    #[test]
    fn gpu_spmm_bad_shapes() {
        let Some(g) = test_gpu() else { return };
        let a: CsrMatrix<f64> = generate::random(10, 3, 1).unwrap();
        let d = GpuCsr::upload(&g, &a).unwrap();
        let ops = GpuSpmm::<f64>::new(&g).unwrap();
        let x = g.upload(&[0.0; 40]).unwrap();
        let mut y = g.upload(&[0.0; 40]).unwrap();
        let e = ops
            .spmm(&d, 1.0, &x, 0, Layout::RowMajor, 0.0, &mut y)
            .unwrap_err();
        assert!(e.to_string().contains("k = 0"), "{e}");
        let e = ops
            .spmm(&d, 1.0, &x, 3, Layout::ColMajor, 0.0, &mut y)
            .unwrap_err();
        assert!(e.to_string().contains("X has 40 elements"), "{e}");
    }

    /// cuSPARSE's SpMM (every algorithm that accepts the layout) agrees with ours.
    #[test]
    #[cfg(feature = "peers")]
    fn cusparse_spmm_agrees() {
        let Some(g) = test_gpu() else { return };
        let a: CsrMatrix<f64> = generate::powerlaw(3000, 1.9, 8).unwrap();
        let d = GpuCsr::upload(&g, &a).unwrap();
        let ops = GpuSpmm::<f64>::new(&g).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let k = 8;
        let mut ran = 0;
        for layout in LAYOUTS {
            let x = random_block::<f64>(a.ncols(), k, &mut rng);
            let dx = g.upload(&x).unwrap();
            let mut ours = g.zeros::<f64>(a.nrows() * k).unwrap();
            ops.spmm(&d, 1.0, &dx, k, layout, 0.0, &mut ours).unwrap();
            let ours = g.download(&ours).unwrap();
            for alg in CusparseSpmmAlg::ALL {
                let mut dy = g.zeros::<f64>(a.nrows() * k).unwrap();
                let Ok(mut p) = CusparseSpmm::new(&d, alg, layout, k, 1.0, &dx, 0.0, &mut dy)
                else {
                    continue; // this algorithm does not take this layout
                };
                p.spmm(1.0, &dx, 0.0, &mut dy).unwrap();
                let theirs = g.download(&dy).unwrap();
                for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
                    assert!(
                        (o - t).abs() <= 1e-12 * (1.0 + t.abs()),
                        "{layout:?} {alg:?} [{i}]: ours {o}, cuSPARSE {t}"
                    );
                }
                ran += 1;
            }
        }
        assert!(ran >= 2, "no cuSPARSE SpMM algorithm ran");
    }
}
