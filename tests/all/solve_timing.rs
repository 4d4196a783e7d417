//! `sparse-solve`'s report follows the crate's one timing model (issue 22): `setup_seconds`,
//! `solve_seconds` and `wall_seconds` are present on every path that runs here (the CPU), with
//! setup + solve ≤ wall and `seconds_per_iteration` = solve / iterations; `--gpus auto` without
//! GPUs is one device without NCCL; `--gpus N` refuses clearly where it cannot run.

use std::process::Command;

use crate::common::cli as common_cli;

/// `sparse-solve` where cargo built it or beside a staged test; the tests skip without it.
fn exe() -> Option<String> {
    common_cli::bin("sparse-solve", env!("CARGO_BIN_EXE_sparse-solve"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe().expect("sparse-solve (checked by the test)"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    let (code, out, err) = run(&a);
    let v = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}): {out} / {err}"));
    (code, v, err)
}

fn num(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number: {v}"))
}

/// The timing fields of one report: present, finite, consistent.
fn check_times(v: &serde_json::Value, what: &str) {
    let (setup, solve, wall) = (
        num(v, "setup_seconds"),
        num(v, "solve_seconds"),
        num(v, "wall_seconds"),
    );
    assert!(setup >= 0.0 && solve > 0.0, "{what}: {v}");
    assert!(setup + solve <= wall, "{what}: {setup} + {solve} > {wall}");
    assert_eq!(num(v, "seconds"), solve, "{what}: seconds is solve_seconds");
    let it = v["iterations"].as_u64().unwrap() as f64;
    let per = num(v, "seconds_per_iteration");
    assert!(
        (per - solve / it).abs() <= 1e-12 * per.max(1e-300),
        "{what}: {per} vs {solve}/{it}"
    );
    assert_eq!(v["solve_seconds_all"][0].as_f64(), Some(solve), "{what}");
}

#[test]
fn every_cpu_solve_reports_setup_solve_and_wall() {
    if exe().is_none() {
        return;
    }
    for args in [
        vec!["poisson2d:40", "--method", "cg"],
        vec!["poisson2d:40", "--method", "pcg"],
        vec!["poisson2d:40", "--method", "cg", "--precond", "poly"],
        vec!["poisson2d:40", "--method", "cg", "--precond", "ic0"],
        vec!["poisson2d:40", "--method", "cg", "--precond", "amg"],
        vec!["poisson2d:40", "--method", "bicgstab", "--precond", "ilu0"],
        vec!["poisson2d:40", "--method", "gmres", "--precond", "jacobi"],
        vec!["poisson2d:40", "--method", "cg", "--rhs-count", "3"],
    ] {
        let mut a = args.clone();
        a.extend(["--backend", "cpu"]);
        let (code, v, err) = json(&a);
        assert_eq!(code, 0, "{a:?}: {err}");
        check_times(&v, &format!("{a:?}"));
        assert_eq!(v["gpus"], 1, "{a:?}");
        assert_eq!(v["gpus_requested"], "1", "{a:?}");
        assert!(v["gpu_choice"].is_null() && v["dist_precond"].is_null());
    }
    // Not converged: still timed, the same way.
    let (code, v, _) = json(&["poisson2d:40", "--backend", "cpu", "--max-iters", "5"]);
    assert_eq!(code, 2);
    assert_eq!(v["converged"], false);
    check_times(&v, "not converged");
}

#[test]
fn the_text_report_names_setup_and_solve() {
    if exe().is_none() {
        return;
    }
    let (code, out, err) = run(&["poisson2d:30", "--backend", "cpu", "--precond", "jacobi"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("time"))
        .unwrap_or_else(|| panic!("no time line: {out}"));
    assert!(line.contains("setup") && line.contains("solve"), "{line}");
}

#[test]
fn gpus_auto_without_several_gpus_is_one_device_without_nccl() {
    if exe().is_none() {
        return;
    }
    // --backend cpu: auto is 1 at once.
    let (code, v, err) = json(&["poisson2d:30", "--backend", "cpu", "--gpus", "auto"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (v["gpus"].as_u64(), v["gpus_requested"].as_str()),
        (Some(1), Some("auto"))
    );
    assert!(v["gpu_choice"].is_null(), "{v}");
    check_times(&v, "--gpus auto --backend cpu");
    // The default backend: with fewer than two GPUs (CI has none), the single-device path and
    // no NCCL start (nothing about NCCL on stderr).
    if segsparse::gpu::Gpu::device_count() < 2 {
        let (code, v, err) = json(&["poisson2d:30", "--gpus", "auto"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(v["gpus"], 1);
        assert!(!err.contains("NCCL"), "{err}");
    }
}

#[test]
fn gpus_n_refuses_clearly_where_it_cannot_run() {
    if exe().is_none() {
        return;
    }
    for (args, want) in [
        (
            vec!["poisson2d:30", "--gpus", "2", "--method", "gmres"],
            "GMRES runs on one GPU only",
        ),
        (
            vec![
                "poisson2d:30",
                "--gpus",
                "2",
                "--precond",
                "ic0",
                "--dist-precond",
                "global",
            ],
            "no distributed form",
        ),
        (
            vec!["poisson2d:30", "--gpus", "2", "--backend", "cpu"],
            "--backend cpu",
        ),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    if segsparse::gpu::Gpu::device_count() < 2 {
        let (code, _, err) = run(&["poisson2d:30", "--gpus", "2"]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("CUDA device(s) present"), "{err}");
    }
    // A count of 0 or a word is a usage error.
    for bad in ["0", "many"] {
        let (code, _, err) = run(&["poisson2d:30", "--gpus", bad]);
        assert_ne!(code, 0, "{err}");
        assert!(err.contains("--gpus"), "{err}");
    }
}
