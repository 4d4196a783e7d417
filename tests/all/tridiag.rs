//! Tridiagonal solvers: CPU Thomas / cyclic reduction against each other and against the
//! residual; every GPU algorithm (forced) against Thomas in f64 on fresh random diagonally
//! dominant systems, single and batched, sizes around powers of two and the block limits;
//! zero-pivot detection naming the system and row.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::tridiag::{cpu, TridiagAlgorithm, Tridiagonal};
use segsparse::Scalar;

/// A random batch of `batch` diagonally dominant systems of `n` rows: off-diagonals in (-1, 1),
/// |diag| = (|a| + |c|)·(1.05 .. 2) + 0.5 with a random sign; rhs in (-1, 1). The ignored
/// entries (lower[0], upper[n-1] of each system) hold garbage on purpose.
#[allow(clippy::type_complexity)]
fn random_batch<T: Scalar>(n: usize, batch: usize, seed: u64) -> (Vec<T>, Vec<T>, Vec<T>, Vec<T>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let len = n * batch;
    let mut a = Vec::with_capacity(len);
    let mut b = Vec::with_capacity(len);
    let mut c = Vec::with_capacity(len);
    let mut d = Vec::with_capacity(len);
    for _ in 0..len {
        let (lo, up): (f64, f64) = (rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
        let mut dg = (lo.abs() + up.abs()) * rng.gen_range(1.05..2.0) + 0.5;
        if rng.gen_bool(0.3) {
            dg = -dg;
        }
        a.push(T::of_f64(lo));
        b.push(T::of_f64(dg));
        c.push(T::of_f64(up));
        d.push(T::of_f64(rng.gen_range(-1.0..1.0)));
    }
    (a, b, c, d)
}

/// Thomas in f64 on the (already rounded) data: the reference.
fn reference<T: Scalar>(n: usize, a: &[T], b: &[T], c: &[T], d: &[T]) -> Vec<f64> {
    let w = |v: &[T]| v.iter().map(|x| x.as_f64()).collect::<Vec<f64>>();
    cpu::thomas_batch(n, Tridiagonal::new(&w(a), &w(b), &w(c)), &w(d)).unwrap()
}

/// Max error relative to the largest |x| of its system, with a tolerance that grows with log n.
fn assert_close<T: Scalar>(what: &str, n: usize, got: &[T], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let tol = 64.0 * T::EPS * (2.0 + (n.max(2) as f64).log2());
    for (s, (g, w)) in got.chunks(n).zip(want.chunks(n)).enumerate() {
        let scale = w.iter().fold(1e-30f64, |m, v| m.max(v.abs()));
        for (i, (x, y)) in g.iter().zip(w).enumerate() {
            let err = (x.as_f64() - y).abs() / scale;
            assert!(
                err <= tol,
                "{what}: system {s} row {i}: got {x}, want {y} (relative error {err:e} > {tol:e})"
            );
        }
    }
}

fn residual(a: &[f64], b: &[f64], c: &[f64], d: &[f64], x: &[f64]) -> f64 {
    let n = b.len();
    let mut r = 0f64;
    for i in 0..n {
        let mut s = b[i] * x[i] - d[i];
        if i > 0 {
            s += a[i] * x[i - 1];
        }
        if i + 1 < n {
            s += c[i] * x[i + 1];
        }
        r = r.max(s.abs());
    }
    r
}

const SIZES: &[usize] = &[
    1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511,
    512, 513, 1000, 1023, 1024, 1025,
];

#[test]
fn thomas_has_a_small_residual() {
    for &n in SIZES {
        let (a, b, c, d) = random_batch::<f64>(n, 1, n as u64);
        let x = cpu::thomas(Tridiagonal::new(&a, &b, &c), &d).unwrap();
        let r = residual(&a, &b, &c, &d, &x);
        assert!(r < 1e-13, "n = {n}: residual {r:e}");
    }
}

#[test]
fn cpu_cyclic_reduction_and_pcr_match_thomas() {
    for &n in SIZES {
        for cr_stop in [1usize, 2, 4, 64, usize::MAX] {
            let (a, b, c, d) = random_batch::<f64>(n, 1, 100 + n as u64);
            let want = reference(n, &a, &b, &c, &d);
            let got = cpu::cyclic_reduction(Tridiagonal::new(&a, &b, &c), &d, cr_stop).unwrap();
            assert_close(&format!("cpu CR n={n} cr_stop={cr_stop}"), n, &got, &want);
        }
    }
}

#[test]
fn thomas_batch_matches_one_by_one() {
    for (n, batch) in [(1, 5), (3, 7), (100, 33), (513, 9)] {
        let (a, b, c, d) = random_batch::<f32>(n, batch, 7);
        let all = cpu::thomas_batch(n, Tridiagonal::new(&a, &b, &c), &d).unwrap();
        for s in 0..batch {
            let r = s * n..(s + 1) * n;
            let system = Tridiagonal::new(&a[r.clone()], &b[r.clone()], &c[r.clone()]);
            let one = cpu::thomas(system, &d[r.clone()]).unwrap();
            assert_eq!(&all[r], &one[..], "n={n} system {s}");
        }
    }
}

#[test]
fn thomas_names_the_row_of_a_zero_pivot() {
    // [1 1; 1 1]: the second pivot is 1 - 1·1 = 0.
    let e = cpu::thomas(
        Tridiagonal::new(&[0.0, 1.0], &[1.0, 1.0], &[1.0, 0.0]),
        &[1.0, 2.0],
    )
    .unwrap_err();
    assert!(e.to_string().contains("row 1"), "{e}");
    let e = cpu::thomas(
        Tridiagonal::new(&[0.0f32, 1.0, 1.0], &[0.0, 4.0, 4.0], &[1.0, 1.0, 0.0]),
        &[1.0; 3],
    )
    .unwrap_err();
    assert!(e.to_string().contains("row 0"), "{e}");
    // Batched: system 2, row 3 is all zero.
    let (mut a, mut b, mut c, d) = random_batch::<f64>(10, 4, 3);
    for v in [&mut a, &mut b, &mut c] {
        v[2 * 10 + 3] = 0.0;
    }
    let e = cpu::thomas_batch(10, Tridiagonal::new(&a, &b, &c), &d)
        .unwrap_err()
        .to_string();
    assert!(e.contains("system 2") && e.contains("row 3"), "{e}");
    let e = cpu::cyclic_reduction(
        Tridiagonal::new(&a[20..30], &b[20..30], &c[20..30]),
        &d[20..30],
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("row 3"), "{e}");
}

#[test]
fn solve_batch_works_with_or_without_a_gpu() {
    let (a, b, c, d) = random_batch::<f64>(300, 5, 11);
    let want = reference(300, &a, &b, &c, &d);
    let got = segsparse::tridiag::solve_batch(300, Tridiagonal::new(&a, &b, &c), &d).unwrap();
    assert_close("solve_batch", 300, &got, &want);
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::*;
    use segsparse::gpu::test_gpu;
    use segsparse::tridiag::gpu::GpuTridiag;

    fn check_alg<T: Scalar + segsparse::gpu::KernelType>(
        s: &mut GpuTridiag<T>,
        alg: TridiagAlgorithm,
        n: usize,
        batch: usize,
        seed: u64,
    ) {
        let (a, b, c, d) = random_batch::<T>(n, batch, seed);
        let want = reference(n, &a, &b, &c, &d);
        // Poisoned output: the solver must write every element.
        let g = s.gpu().clone();
        let (da, db, dc, dd) = (
            g.upload(&a).unwrap(),
            g.upload(&b).unwrap(),
            g.upload(&c).unwrap(),
            g.upload(&d).unwrap(),
        );
        let mut x = g.upload(&vec![T::nan(); n * batch]).unwrap();
        let what = format!("{} {} n={n} batch={batch}", alg.name(), T::NAME);
        s.solve_batch(n, batch, Tridiagonal::new(&da, &db, &dc), &dd, &mut x, alg)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let got = g.download(&x).unwrap();
        assert_close(&what, n, &got, &want);
    }

    fn all_algorithms<T: Scalar + segsparse::gpu::KernelType>() {
        let Some(g) = test_gpu() else { return };
        let mut s = GpuTridiag::<T>::new(&g).unwrap();
        let mut seed = 1;
        for alg in TridiagAlgorithm::GPU {
            for &n in SIZES.iter().chain(&[2047, 2048, 2049, 3000, 4095, 4096]) {
                if alg == TridiagAlgorithm::Pcr && n > 1024 {
                    continue; // PCR's limit (one block, two equations per thread)
                }
                for batch in [1, 3] {
                    seed += 1;
                    check_alg(&mut s, alg, n, batch, seed);
                }
            }
        }
    }

    #[test]
    fn every_gpu_algorithm_matches_thomas_f32() {
        all_algorithms::<f32>();
    }

    #[test]
    fn every_gpu_algorithm_matches_thomas_f64() {
        all_algorithms::<f64>();
    }

    /// Systems larger than a block: the multi-block partition and CR paths, single and batched
    /// (the batch solved as one block-diagonal system), and huge batches of tiny systems.
    #[test]
    fn multi_block_sizes_match_thomas() {
        let Some(g) = test_gpu() else { return };
        let mut s32 = GpuTridiag::<f32>::new(&g).unwrap();
        let mut s64 = GpuTridiag::<f64>::new(&g).unwrap();
        let algs = [
            TridiagAlgorithm::Auto,
            TridiagAlgorithm::Partition,
            TridiagAlgorithm::CyclicReduction,
            TridiagAlgorithm::CrPcr,
        ];
        for alg in algs {
            for (n, batch) in [
                (4097, 1),
                (10_000, 1),
                (65_537, 1),
                (1 << 20, 1),
                ((1 << 20) + 3, 1),
                (10_007, 5),
                (5000, 3),
            ] {
                check_alg(&mut s32, alg, n, batch, n as u64);
                check_alg(&mut s64, alg, n, batch, n as u64 + 1);
            }
        }
        // Batches of tiny systems (Auto solves them across blocks).
        for n in [1, 2, 3, 5, 16, 17, 63] {
            check_alg(&mut s32, TridiagAlgorithm::Auto, n, 1000, 5 + n as u64);
            check_alg(&mut s64, TridiagAlgorithm::Auto, n, 777, 6 + n as u64);
        }
        // The paper's and the benchmark's shapes.
        check_alg(&mut s32, TridiagAlgorithm::Auto, 512, 512, 42);
        check_alg(&mut s32, TridiagAlgorithm::Auto, 1024, 1024, 43);
        check_alg(&mut s64, TridiagAlgorithm::Auto, 1024, 1024, 44);
    }

    /// The benchmark's single system, 2^24 f64 (and 2^26 + 3 f32), on the GPU machine only
    /// (the reference Thomas takes a while on two cores).
    #[test]
    fn single_huge_system() {
        let Some(g) = test_gpu() else { return };
        let mut s64 = GpuTridiag::<f64>::new(&g).unwrap();
        check_alg(&mut s64, TridiagAlgorithm::Auto, 1 << 24, 1, 99);
        check_alg(&mut s64, TridiagAlgorithm::CyclicReduction, 1 << 24, 1, 98);
        let mut s32 = GpuTridiag::<f32>::new(&g).unwrap();
        check_alg(&mut s32, TridiagAlgorithm::Auto, (1 << 26) + 3, 1, 97);
    }

    /// A few shapes through every kernel, small enough for compute-sanitizer (memcheck and
    /// racecheck) on the GPU machine: `test-tridiag sanitizer_`.
    #[test]
    fn sanitizer_shapes() {
        let Some(g) = test_gpu() else { return };
        let mut s32 = GpuTridiag::<f32>::new(&g).unwrap();
        let mut s64 = GpuTridiag::<f64>::new(&g).unwrap();
        for alg in TridiagAlgorithm::GPU {
            for (n, batch) in [
                (1, 2),
                (5, 3),
                (33, 2),
                (100, 2),
                (1025, 2),
                (4096, 1),
                (9000, 1),
                (3000, 3),
            ] {
                if alg == TridiagAlgorithm::Pcr && n > 1024 {
                    continue;
                }
                check_alg(&mut s32, alg, n, batch, 3);
                check_alg(&mut s64, alg, n, batch, 4);
            }
        }
        check_alg(&mut s32, TridiagAlgorithm::Auto, 7, 300, 5);
    }

    #[test]
    fn gpu_names_the_row_of_a_zero_pivot() {
        let Some(g) = test_gpu() else { return };
        let mut s = GpuTridiag::<f64>::new(&g).unwrap();
        for alg in TridiagAlgorithm::GPU {
            for (n, batch, sys, row) in [
                (1000, 3, 1, 437),
                (100, 4, 3, 0),
                (64, 2, 0, 63),
                (20_000, 2, 1, 5003),
                (300_000, 1, 0, 123_457),
            ] {
                if alg == TridiagAlgorithm::Pcr && n > 1024 {
                    continue;
                }
                let (mut a, mut b, mut c, d) = random_batch::<f64>(n, batch, 17);
                let k = sys * n + row;
                a[k] = 0.0;
                b[k] = 0.0;
                c[k] = 0.0;
                let e = s
                    .solve_batch_host(n, Tridiagonal::new(&a, &b, &c), &d, alg)
                    .expect_err("a singular system must be reported")
                    .to_string();
                assert!(
                    e.contains(&format!("row {row} of system {sys}")),
                    "{} n={n}: {e}",
                    alg.name()
                );
                // The flag was reset: a good system solves afterwards.
                let (a, b, c, d) = random_batch::<f64>(n, batch, 18);
                s.solve_batch_host(n, Tridiagonal::new(&a, &b, &c), &d, alg)
                    .unwrap();
            }
        }
    }

    #[test]
    fn forcing_pcr_beyond_a_block_or_thomas_on_the_gpu_is_an_error() {
        let Some(g) = test_gpu() else { return };
        let mut s = GpuTridiag::<f32>::new(&g).unwrap();
        let (a, b, c, d) = random_batch::<f32>(5000, 1, 1);
        let e = s
            .solve_host(Tridiagonal::new(&a, &b, &c), &d, TridiagAlgorithm::Pcr)
            .unwrap_err();
        assert!(e.to_string().contains("PCR"), "{e}");
        let e = s
            .solve_host(Tridiagonal::new(&a, &b, &c), &d, TridiagAlgorithm::Thomas)
            .unwrap_err();
        assert!(e.to_string().contains("CPU"), "{e}");
    }

    #[test]
    #[cfg(feature = "peers")]
    fn cusparse_peer_agrees() {
        let Some(g) = test_gpu() else { return };
        let mut sp = match segsparse::tridiag::cusparse_peer::CusparseTridiag::new(&g) {
            Ok(s) => s,
            Err(e) => panic!("cuSPARSE: {e}"),
        };
        let (n, batch) = (512, 64);
        let (mut a, b, mut c, d) = random_batch::<f32>(n, batch, 5);
        for s in 0..batch {
            a[s * n] = 0.0;
            c[s * n + n - 1] = 0.0;
        }
        let want = reference(n, &a, &b, &c, &d);
        let (da, db, dc) = (
            g.upload(&a).unwrap(),
            g.upload(&b).unwrap(),
            g.upload(&c).unwrap(),
        );
        let mut x = g.upload(&d).unwrap();
        sp.strided_batch(n, batch, Tridiagonal::new(&da, &db, &dc), &mut x)
            .unwrap();
        assert_close("gtsv2StridedBatch", n, &g.download(&x).unwrap(), &want);
        let mut x1 = g.upload(&d[..n]).unwrap();
        let (da, db, dc) = (
            g.upload(&a[..n]).unwrap(),
            g.upload(&b[..n]).unwrap(),
            g.upload(&c[..n]).unwrap(),
        );
        sp.nopivot(Tridiagonal::new(&da, &db, &dc), &mut x1)
            .unwrap();
        assert_close("gtsv2_nopivot", n, &g.download(&x1).unwrap(), &want[..n]);
    }
}
