//! Issue 23: inputs that cannot give a meaningful answer, and problems that cannot fit, are
//! refused with a clear error, never a wrong answer or the OOM killer.
//!
//! - the 67-byte file that declares 10^9 rows (and its square sibling): refused in well under a
//!   second and 100 MB from the library (`segsparse::load` then a solve) and from both CLIs;
//! - the memory preflight of the solvers (GMRES's Krylov basis included) and of the CLIs;
//! - NaN and infinity in `A`, `b` and the initial guess, on every solver (CPU here; the GPU too
//!   when one works, and it must under `SEGSPARSE_REQUIRE_GPU=1`): `SolveError::NonFinite` at
//!   iteration 0; from `sparse-solve`: exit status 2 and one line naming it.

#[cfg(feature = "cli")]
use crate::common::cli as common_cli;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use segsparse::backend::{Cpu, Identity};
use segsparse::precond::Jacobi;
use segsparse::solvers::{bicgstab, cg, gmres, pcg, InitialGuess, SolveError, SolveParams};
use segsparse::{generate, CsrMatrix, Error};

const BIG67: &str = "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n1 1 1\n";
const BIG76: &str =
    "%%MatrixMarket matrix coordinate real general\n1000000000 1000000000 1\n1 1 1\n";

/// A file with `text` in a fresh temporary directory (kept for the test's duration).
fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "segsparse-bad-input-{}-{}",
        std::process::id(),
        name.replace('.', "-")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

/// A field of `/proc/self/status` given in kB (`VmHWM:`, `VmRSS:`), in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with(key))?;
    l.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

/// Resets the peak resident set (VmHWM) to the current one, so that what follows is measured
/// on its own (earlier tests of this process, a CUDA context, raised it). Linux: writing 5 to
/// `/proc/self/clear_refs`.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[test]
fn the_billion_row_file_fails_fast_from_the_library() {
    assert_eq!(BIG67.len(), 67);
    let reset = reset_peak_rss();
    let rss0 = status_bytes("VmRSS:").unwrap_or(0);
    for (name, text) in [("big67.mtx", BIG67), ("big76.mtx", BIG76)] {
        let path = temp_file(name, text);
        let t = Instant::now();
        // segsparse::load, then (were it to succeed) any solve: the load already refuses.
        let r = segsparse::load::<f64>(path.to_str().unwrap(), 0).and_then(|a| {
            let b = vec![1.0; a.nrows()];
            let mut x = vec![0.0; a.ncols()];
            cg(&Cpu, &a, &b, &mut x, &SolveParams::default())?;
            Ok(())
        });
        let secs = t.elapsed().as_secs_f64();
        let e = r.unwrap_err().to_string();
        eprintln!("{name}: {e} ({secs:.6} s)");
        assert!(e.contains("at least 999999999 rows are empty"), "{e}");
        assert!(secs < 1.0, "{secs} s");
    }
    if let Some(peak) = status_bytes("VmHWM:") {
        // With the peak reset, what the load and solve added; else the whole process's peak.
        let grown = if reset {
            peak.saturating_sub(rss0)
        } else {
            peak
        };
        eprintln!(
            "peak RSS {} MB, {} MB above the RSS before the load",
            peak / 1_000_000,
            grown / 1_000_000
        );
        assert!(grown < 100_000_000, "{grown} bytes");
    }
}

#[test]
fn a_solve_that_cannot_fit_is_refused_before_allocating() {
    // The residual history of max_iters + 1 entries: usize::MAX iterations cannot be recorded.
    let a: CsrMatrix<f64> = generate::from_spec("poisson2d:8", 0).unwrap();
    let b = vec![1.0; a.nrows()];
    let mut x = vec![0.0; a.nrows()];
    let params = SolveParams {
        max_iters: usize::MAX,
        ..Default::default()
    };
    let e = cg(&Cpu, &a, &b, &mut x, &params).unwrap_err();
    assert!(
        matches!(&e, SolveError::Backend(Error::OutOfMemory { what, .. }) if what == "the CG workspace"),
        "{e}"
    );
    assert!(
        e.to_string()
            .starts_with("out of memory: the CG workspace needs"),
        "{e}"
    );
    let e = gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &params).unwrap_err();
    assert!(
        e.to_string().contains("the GMRES workspace (Krylov basis)"),
        "{e}"
    );
    let e = bicgstab(&Cpu, &a, &Identity, &b, &mut x, &params).unwrap_err();
    assert!(e.to_string().contains("the BiCGSTAB workspace"), "{e}");
    // A sane limit still solves.
    cg(&Cpu, &a, &b, &mut x, &SolveParams::default()).unwrap();
}

/// Where the bad value is, and the `A`, `b` and `x0` of the case.
type Case = (&'static str, CsrMatrix<f64>, Vec<f64>, Vec<f64>);

/// A matrix, b and x0 for the NaN/Inf cases: Poisson 2-D with `bad` put into A, b or x0.
fn nonfinite_cases(bad: f64) -> Vec<Case> {
    let a: CsrMatrix<f64> = generate::from_spec("poisson2d:12", 0).unwrap();
    let n = a.nrows();
    let mut vals = a.values().to_vec();
    vals[17] = bad;
    let bad_a =
        CsrMatrix::try_from_parts(n, n, a.row_ptr().to_vec(), a.col_idx().to_vec(), vals).unwrap();
    let mut bad_b = vec![1.0; n];
    bad_b[5] = bad;
    let mut bad_x = vec![0.5; n];
    bad_x[9] = bad;
    vec![
        ("A", bad_a, vec![1.0; n], vec![0.5; n]),
        ("b", a.clone(), bad_b, vec![0.5; n]),
        ("x0", a, vec![1.0; n], bad_x),
    ]
}

#[test]
fn nan_and_inf_in_a_b_or_x0_are_non_finite_on_every_solver() {
    let given = SolveParams {
        initial_guess: InitialGuess::Given,
        ..Default::default()
    };
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        for (what, a, b, x0) in nonfinite_cases(bad) {
            let jac = Jacobi::from_matrix(&Cpu, &a).ok();
            let mut outcomes = Vec::new();
            let mut x = x0.clone();
            outcomes.push(("cg", cg(&Cpu, &a, &b, &mut x, &given).map(|_| ())));
            let mut x = x0.clone();
            // Jacobi of a matrix with NaN on the diagonal may itself refuse: that is an error
            // too, never a result.
            outcomes.push((
                "pcg",
                match &jac {
                    Some(m) => pcg(&Cpu, &a, m, &b, &mut x, &given).map(|_| ()),
                    None => Err(SolveError::NonFinite { iteration: 0 }),
                },
            ));
            let mut x = x0.clone();
            outcomes.push((
                "bicgstab",
                bicgstab(&Cpu, &a, &Identity, &b, &mut x, &given).map(|_| ()),
            ));
            let mut x = x0.clone();
            outcomes.push((
                "gmres",
                gmres(&Cpu, &a, &Identity, &b, &mut x, 30, &given).map(|_| ()),
            ));
            for (solver, r) in outcomes {
                match r {
                    Err(SolveError::NonFinite { iteration: 0 }) => {}
                    other => panic!("cpu {solver}, {bad} in {what}: {other:?}"),
                }
            }
        }
    }
    gpu_cases();
}

#[cfg(feature = "cuda")]
fn gpu_cases() {
    use segsparse::backend::gpu::GpuOps;
    use segsparse::spmv::gpu::GpuCsr;
    let Some(g) = segsparse::gpu::test_gpu() else {
        return;
    };
    let ops = GpuOps::<f64>::new(&g).unwrap();
    let given = SolveParams {
        initial_guess: InitialGuess::Given,
        ..Default::default()
    };
    for bad in [f64::NAN, f64::INFINITY] {
        for (what, a, b, x0) in nonfinite_cases(bad) {
            let ga = GpuCsr::upload(&g, &a).unwrap();
            let db = g.upload(&b).unwrap();
            let mut results = Vec::new();
            let mut x = g.upload(&x0).unwrap();
            results.push(("cg", cg(&ops, &ga, &db, &mut x, &given).map(|_| ())));
            let mut x = g.upload(&x0).unwrap();
            results.push((
                "bicgstab",
                bicgstab(&ops, &ga, &Identity, &db, &mut x, &given).map(|_| ()),
            ));
            let mut x = g.upload(&x0).unwrap();
            results.push((
                "gmres",
                gmres(&ops, &ga, &Identity, &db, &mut x, 30, &given).map(|_| ()),
            ));
            if let Ok(m) = Jacobi::from_matrix(&ops, &a) {
                let mut x = g.upload(&x0).unwrap();
                results.push(("pcg", pcg(&ops, &ga, &m, &db, &mut x, &given).map(|_| ())));
            }
            for (solver, r) in results {
                match r {
                    Err(SolveError::NonFinite { iteration: 0 }) => {}
                    other => panic!("gpu {solver}, {bad} in {what}: {other:?}"),
                }
            }
        }
    }
    eprintln!("gpu: NaN/Inf in A, b, x0 → NonFinite at iteration 0 on cg, pcg, bicgstab, gmres");
}

#[cfg(not(feature = "cuda"))]
fn gpu_cases() {}

// ---- the command-line front ends ------------------------------------------------------------

#[cfg(feature = "cli")]
mod cli {
    use super::*;

    use super::common_cli::bin;

    fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String, f64) {
        let t = Instant::now();
        let out = Command::new(bin)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            t.elapsed().as_secs_f64(),
        )
    }

    fn solve_bin() -> Option<String> {
        bin("sparse-solve", env!("CARGO_BIN_EXE_sparse-solve"))
    }
    fn spmv_bin() -> Option<String> {
        bin("spmv-bench", env!("CARGO_BIN_EXE_spmv-bench"))
    }

    #[test]
    fn the_billion_row_file_fails_fast_from_both_clis() {
        let (Some(solve), Some(spmv)) = (solve_bin(), spmv_bin()) else {
            return;
        };
        for (name, text) in [("big67.mtx", BIG67), ("big76.mtx", BIG76)] {
            let path = temp_file(name, text);
            let p = path.to_str().unwrap();
            for (bin, args) in [
                (&solve, vec![p, "--backend", "cpu"]),
                (&solve, vec![p]),
                (&spmv, vec![p, "--backend", "cpu"]),
            ] {
                let (code, _, err, secs) = run(bin, &args, &[]);
                eprintln!("{bin} {args:?}: exit {code}, {secs:.3} s: {err}");
                assert_eq!(code, 1, "{err}");
                assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
                assert!(
                    err.contains("square matrix")
                        || err.contains("out of memory")
                        || err.contains("rows are empty"),
                    "{err}"
                );
                assert!(secs < 1.0, "{secs} s");
            }
        }
    }

    #[test]
    fn the_library_preflight_refuses_gmres_basis_beyond_the_memory() {
        let Some(solve) = solve_bin() else { return };
        // 10^6 rows: GMRES(100) keeps 101 basis vectors of 8 MB; capped at 256 MiB of host
        // memory, the library refuses before allocating them.
        let (code, _, err, _) = run(
            &solve,
            &[
                "poisson2d:1000",
                "--backend",
                "cpu",
                "--method",
                "gmres",
                "--restart",
                "100",
            ],
            &[("SEGSPARSE_MAX_HOST_BYTES", "256M")],
        );
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("out of memory: the GMRES workspace (Krylov basis) needs")
                && err.contains("268435456 bytes"),
            "{err}"
        );
    }

    #[test]
    fn nan_in_the_matrix_or_rhs_exits_2_naming_it() {
        let Some(solve) = solve_bin() else { return };
        // NaN off the diagonal (on it, `--precond jacobi` refuses the matrix at setup, exit 1:
        // "Jacobi preconditioner: diagonal entry of row 1 is NaN").
        let mut a = String::from("%%MatrixMarket matrix coordinate real general\n3 3 4\n");
        a.push_str("1 1 2\n1 2 nan\n2 2 2\n3 3 2\n");
        let bad_a = temp_file("nan_a.mtx", &a);
        let good_a = temp_file(
            "good_a.mtx",
            "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 2\n2 2 2\n3 3 2\n",
        );
        let bad_b = temp_file(
            "nan_b.mtx",
            "%%MatrixMarket matrix array real general\n3 1\n1\ninf\n1\n",
        );
        for method in ["cg", "pcg", "bicgstab", "gmres"] {
            for (m, rhs) in [
                (bad_a.to_str().unwrap(), "ones"),
                (good_a.to_str().unwrap(), bad_b.to_str().unwrap()),
            ] {
                let (code, _, err, _) = run(
                    &solve,
                    &[m, "--backend", "cpu", "--method", method, "--rhs", rhs],
                    &[],
                );
                assert_eq!(code, 2, "{method} {m} {rhs}: {err}");
                assert!(err.contains("NaN or infinite at iteration 0"), "{err}");
            }
        }
    }
}
