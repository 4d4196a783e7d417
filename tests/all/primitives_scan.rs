//! Scan and segmented scan: the multithreaded CPU versions and every GPU algorithm against the
//! sequential CPU reference, on fresh seeded random data, at and around tile boundaries, with
//! head-flag densities from none to all, empty segments, and poisoned outputs.
//!
//! Integers compare exactly; max/min compare exactly for floats too (no rounding). Float sums
//! compare with an f64 reference with tolerance `4·eps·sqrt(n)·max(1, max|prefix|)` on inputs
//! in [-1, 1] — small enough that a missing or doubled tile (or, at small n, a single element)
//! fails.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::primitives::{
    cpu, flags_from_offsets, pack_flags, Direction, ScanAlgorithm, ScanElem, ScanKind, ScanOp,
    ScanSpec,
};

const OPS: [ScanOp; 3] = [ScanOp::Plus, ScanOp::Max, ScanOp::Min];
const KINDS: [ScanKind; 2] = [ScanKind::Inclusive, ScanKind::Exclusive];
const DIRS: [Direction; 2] = [Direction::Forward, Direction::Backward];

fn specs() -> Vec<ScanSpec> {
    let mut v = Vec::new();
    for op in OPS {
        for kind in KINDS {
            for dir in DIRS {
                v.push(ScanSpec::new(op, kind, dir));
            }
        }
    }
    v
}

/// Test data and comparison per element type.
trait TestElem: ScanElem {
    fn random(rng: &mut ChaCha8Rng) -> Self;
    fn poison() -> Self;
    /// Compares `got` with the reference computed in f64 (floats) or exactly (integers);
    /// returns the first mismatch.
    fn compare(
        input: &[Self],
        flags: Option<&[bool]>,
        got: &[Self],
        spec: ScanSpec,
    ) -> Result<(), String>;
}

fn exact<T: ScanElem>(
    input: &[T],
    flags: Option<&[bool]>,
    got: &[T],
    spec: ScanSpec,
) -> Result<(), String> {
    let mut want = vec![T::default(); input.len()];
    match flags {
        Some(f) => cpu::segmented_scan(input, f, &mut want, spec),
        None => cpu::scan(input, &mut want, spec),
    }
    for i in 0..input.len() {
        // Bitwise equality through f64 (NaN never expected: no NaN inputs).
        if want[i].to_f64() != got[i].to_f64() {
            return Err(format!(
                "element {i} of {}: got {:?}, want {:?}",
                input.len(),
                got[i],
                want[i]
            ));
        }
    }
    Ok(())
}

fn float_compare<T: ScanElem>(
    input: &[T],
    flags: Option<&[bool]>,
    got: &[T],
    spec: ScanSpec,
    eps: f64,
) -> Result<(), String> {
    if spec.op != ScanOp::Plus {
        return exact(input, flags, got, spec);
    }
    let x: Vec<f64> = input.iter().map(|v| v.to_f64()).collect();
    let mut want = vec![0.0; x.len()];
    match flags {
        Some(f) => cpu::segmented_scan(&x, f, &mut want, spec),
        None => cpu::scan(&x, &mut want, spec),
    }
    let m = want.iter().fold(1.0f64, |a, b| a.max(b.abs()));
    let tol = 4.0 * eps * (x.len() as f64).sqrt() * m;
    for i in 0..x.len() {
        let g = got[i].to_f64();
        // NaN (e.g. a poisoned element left unwritten) must fail too.
        let ok = (g - want[i]).abs() <= tol;
        if !ok {
            return Err(format!(
                "element {i} of {}: got {g}, want {} (tol {tol:e})",
                x.len(),
                want[i]
            ));
        }
    }
    Ok(())
}

impl TestElem for f32 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        rng.gen_range(-1.0..1.0)
    }
    fn poison() -> Self {
        f32::NAN
    }
    fn compare(i: &[Self], f: Option<&[bool]>, g: &[Self], s: ScanSpec) -> Result<(), String> {
        float_compare(i, f, g, s, f32::EPSILON as f64)
    }
}
impl TestElem for f64 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        rng.gen_range(-1.0..1.0)
    }
    fn poison() -> Self {
        f64::NAN
    }
    fn compare(i: &[Self], f: Option<&[bool]>, g: &[Self], s: ScanSpec) -> Result<(), String> {
        float_compare(i, f, g, s, f64::EPSILON)
    }
}
impl TestElem for i32 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        // Full range: sums wrap, and wrapping must agree exactly.
        rng.gen()
    }
    fn poison() -> Self {
        0xdeadbeefu32 as i32
    }
    fn compare(i: &[Self], f: Option<&[bool]>, g: &[Self], s: ScanSpec) -> Result<(), String> {
        exact(i, f, g, s)
    }
}
impl TestElem for u32 {
    fn random(rng: &mut ChaCha8Rng) -> Self {
        rng.gen()
    }
    fn poison() -> Self {
        0xdeadbeef
    }
    fn compare(i: &[Self], f: Option<&[bool]>, g: &[Self], s: ScanSpec) -> Result<(), String> {
        exact(i, f, g, s)
    }
}

fn random_vec<T: TestElem>(rng: &mut ChaCha8Rng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::random(rng)).collect()
}

/// Head flags: density 0 = none (only what element 0 implies), 1 = sparse (~1/1000),
/// 2 = 50 %, 3 = all.
fn random_flags(rng: &mut ChaCha8Rng, n: usize, density: u32) -> Vec<bool> {
    (0..n)
        .map(|_| match density {
            0 => false,
            1 => rng.gen_ratio(1, 1000),
            2 => rng.gen_bool(0.5),
            _ => true,
        })
        .collect()
}

// ---------------------------------------------------------------- CPU

#[test]
fn cpu_reference_small_cases() {
    let x = [3i32, 1, 7, 0, 4, 1, 6, 3];
    let mut y = [0; 8];
    cpu::scan(&x, &mut y, ScanSpec::inclusive(ScanOp::Plus));
    assert_eq!(y, [3, 4, 11, 11, 15, 16, 22, 25]);
    cpu::scan(&x, &mut y, ScanSpec::exclusive(ScanOp::Plus).backward());
    assert_eq!(y, [22, 21, 14, 14, 10, 9, 3, 0]);
    cpu::scan(&x, &mut y, ScanSpec::inclusive(ScanOp::Max).backward());
    assert_eq!(y, [7, 7, 7, 6, 6, 6, 6, 3]);
    cpu::scan(&x, &mut y, ScanSpec::exclusive(ScanOp::Min));
    assert_eq!(y, [i32::MAX, 3, 1, 1, 0, 0, 0, 0]);
    let f = [true, false, true, false, false, true, false, false];
    cpu::segmented_scan(&x, &f, &mut y, ScanSpec::exclusive(ScanOp::Plus));
    assert_eq!(y, [0, 3, 0, 7, 7, 0, 1, 7]);
    cpu::segmented_scan(&x, &f, &mut y, ScanSpec::inclusive(ScanOp::Plus).backward());
    assert_eq!(y, [4, 1, 11, 4, 4, 10, 9, 3]);
    let empty: [i32; 0] = [];
    cpu::scan(&empty, &mut [], ScanSpec::default());
}

#[test]
fn offsets_are_checked_and_match_flags() {
    assert!(flags_from_offsets(&[0, 2, 1, 3], 3).is_err());
    assert!(flags_from_offsets(&[1, 3], 3).is_err());
    assert!(flags_from_offsets(&[0, 2], 3).is_err());
    assert!(flags_from_offsets(&[], 0).is_err());
    assert_eq!(
        flags_from_offsets(&[0, 0, 2, 2, 2, 5], 5).unwrap(),
        vec![true, false, true, false, false]
    );
    assert_eq!(pack_flags(&[false; 33]), vec![0, 0]);
    let mut f = vec![false; 40];
    f[0] = true;
    f[33] = true;
    assert_eq!(pack_flags(&f), vec![1, 2]);
}

#[test]
fn par_versions_match_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for n in [0usize, 1, 1000, 40_000, 200_003] {
        let xi: Vec<i32> = random_vec(&mut rng, n);
        let xf: Vec<f64> = random_vec(&mut rng, n);
        for density in 0..4 {
            let f = random_flags(&mut rng, n, density);
            for spec in specs() {
                let mut want = vec![0; n];
                let mut got = vec![0; n];
                cpu::scan(&xi, &mut want, spec);
                cpu::par_scan(&xi, &mut got, spec);
                assert_eq!(want, got, "par_scan i32 n={n} {spec:?}");
                cpu::segmented_scan(&xi, &f, &mut want, spec);
                cpu::par_segmented_scan(&xi, &f, &mut got, spec);
                assert_eq!(
                    want, got,
                    "par_segmented_scan i32 n={n} d={density} {spec:?}"
                );
                let mut gf = vec![0.0; n];
                cpu::par_segmented_scan(&xf, &f, &mut gf, spec);
                f64::compare(&xf, Some(&f), &gf, spec)
                    .unwrap_or_else(|e| panic!("par_segmented_scan f64 n={n} {spec:?}: {e}"));
            }
        }
    }
    // Offsets with empty segments.
    let n = 100_000;
    let mut offs = vec![0u32];
    while (*offs.last().unwrap() as usize) < n {
        let step = [0u32, 0, 1, 7, 300, 5000][rng.gen_range(0..6)];
        offs.push((offs.last().unwrap() + step).min(n as u32));
    }
    let x: Vec<u32> = random_vec(&mut rng, n);
    for spec in specs() {
        let mut want = vec![0; n];
        let mut got = vec![0; n];
        cpu::segmented_scan_offsets(&x, &offs, &mut want, spec).unwrap();
        cpu::par_segmented_scan_offsets(&x, &offs, &mut got, spec).unwrap();
        assert_eq!(want, got, "{spec:?}");
    }
}

// ---------------------------------------------------------------- GPU

#[cfg(feature = "cuda")]
mod gpu_tests {
    use super::*;
    use segsparse::gpu::{test_gpu, Gpu, KernelType};
    use segsparse::primitives::gpu::{self, HeadFlags};
    use segsparse::primitives::policy;

    /// Sizes around the work-efficient block and the look-back tile of `g`'s device class: one
    /// tile, a ragged pair of tiles, an odd count of tiles (a two-tile block with no second tile)
    /// and an even one.
    fn sizes<T>(g: &Gpu) -> Vec<usize> {
        let t = policy::lookback(std::mem::size_of::<T>(), gpu::device_class(g)).tile();
        let w = policy::WORK_EFFICIENT.tile();
        let mut v = vec![
            0,
            1,
            31,
            32,
            33,
            w - 1,
            w,
            w + 1,
            t - 1,
            t,
            t + 1,
            3 * t,
            5 * t + 17,
            8 * t,
        ];
        v.push(100_003);
        v
    }

    /// Runs one GPU scan on `x` (plain if `flags` is None) into a poisoned output and compares.
    fn run_one<T: TestElem + KernelType>(
        g: &Gpu,
        x: &[T],
        flags: Option<(&[bool], &HeadFlags)>,
        spec: ScanSpec,
        alg: ScanAlgorithm,
        ws: &mut cudarc::driver::CudaSlice<u8>,
    ) -> Result<(), String> {
        let n = x.len();
        let dx = g.upload(x).unwrap();
        let mut dy = g.upload(&vec![T::poison(); n.max(1)]).unwrap();
        let mut dyv = dy.slice_mut(0..n);
        match flags {
            Some((_, hf)) => gpu::segmented_scan_with(g, &dx, hf, &mut dyv, spec, alg, ws),
            None => gpu::scan_with(g, &dx, &mut dyv, spec, alg, ws),
        }
        .map_err(|e| e.to_string())?;
        let y = g.download(&dy).map_err(|e| e.to_string())?;
        T::compare(x, flags.map(|f| f.0), &y[..n], spec)
    }

    fn all_variants<T: TestElem + KernelType>(g: &Gpu, segmented: bool, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sizes = sizes::<T>(g);
        let mut ws = gpu::workspace(g, *sizes.iter().max().unwrap()).unwrap();
        let mut failures = Vec::new();
        let mut runs = 0;
        for &n in &sizes {
            let x: Vec<T> = random_vec(&mut rng, n);
            let densities: Vec<u32> = if segmented { vec![0, 1, 2, 3] } else { vec![0] };
            for d in densities {
                let f = random_flags(&mut rng, n, d);
                let hf = HeadFlags::from_flags(g, &f).unwrap();
                for alg in ScanAlgorithm::ALL {
                    for spec in specs() {
                        let fl = segmented.then_some((&f[..], &hf));
                        runs += 1;
                        if let Err(e) = run_one(g, &x, fl, spec, alg, &mut ws) {
                            failures.push(format!(
                                "{} seg={segmented} n={n} density={d} {alg:?} {spec:?}: {e}",
                                T::SUFFIX
                            ));
                        }
                    }
                }
            }
        }
        eprintln!("{} segmented={segmented}: {runs} runs", T::SUFFIX);
        assert!(
            failures.is_empty(),
            "{} of {runs} failed:\n{}",
            failures.len(),
            failures[..failures.len().min(30)].join("\n")
        );
    }

    #[test]
    fn gpu_scan_all_variants_i32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<i32>(&g, false, 1);
    }
    #[test]
    fn gpu_scan_all_variants_u32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<u32>(&g, false, 2);
    }
    #[test]
    fn gpu_scan_all_variants_f32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<f32>(&g, false, 3);
    }
    #[test]
    fn gpu_scan_all_variants_f64() {
        let Some(g) = test_gpu() else { return };
        all_variants::<f64>(&g, false, 4);
    }
    #[test]
    fn gpu_segscan_all_variants_i32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<i32>(&g, true, 5);
    }
    #[test]
    fn gpu_segscan_all_variants_u32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<u32>(&g, true, 6);
    }
    #[test]
    fn gpu_segscan_all_variants_f32() {
        let Some(g) = test_gpu() else { return };
        all_variants::<f32>(&g, true, 7);
    }
    #[test]
    fn gpu_segscan_all_variants_f64() {
        let Some(g) = test_gpu() else { return };
        all_variants::<f64>(&g, true, 8);
    }

    /// Offsets with empty segments (repeated offsets), single-element segments and one segment
    /// spanning many tiles; flags built on the device from the offsets.
    fn random_offsets(rng: &mut ChaCha8Rng, n: usize) -> Vec<u32> {
        let mut offs = vec![0u32, 0];
        while (*offs.last().unwrap() as usize) < n {
            let last = *offs.last().unwrap();
            let step = if offs.len() == 40 {
                60_000 // a segment spanning many tiles
            } else {
                [0u32, 0, 1, 2, 31, 33, 700, 5000][rng.gen_range(0..8)]
            };
            offs.push((last + step).min(n as u32));
        }
        offs.push(n as u32);
        offs
    }

    #[test]
    fn gpu_segscan_offsets_with_empty_segments() {
        let Some(g) = test_gpu() else { return };
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut failures = Vec::new();
        for n in [1usize, 4097, 300_001] {
            let offs = random_offsets(&mut rng, n);
            let flags = flags_from_offsets(&offs, n).unwrap();
            let doffs = g.upload(&offs).unwrap();
            // Flags built on the device equal the host ones.
            let hf = HeadFlags::from_device_offsets(&g, &doffs, n).unwrap();
            assert_eq!(hf.to_host(&g).unwrap(), flags, "n={n}");
            let hf2 = HeadFlags::from_offsets(&g, &offs, n).unwrap();
            assert_eq!(hf2.to_host(&g).unwrap(), flags, "n={n}");
            let xi: Vec<i32> = random_vec(&mut rng, n);
            let xf: Vec<f32> = random_vec(&mut rng, n);
            let dxi = g.upload(&xi).unwrap();
            let dxf = g.upload(&xf).unwrap();
            let mut ws = gpu::workspace(&g, n).unwrap();
            for alg in ScanAlgorithm::ALL {
                for spec in specs() {
                    let mut dy = g.upload(&vec![i32::poison(); n]).unwrap();
                    gpu::segmented_scan_offsets_with(&g, &dxi, &doffs, &mut dy, spec, alg, &mut ws)
                        .unwrap();
                    let y = g.download(&dy).unwrap();
                    if let Err(e) = i32::compare(&xi, Some(&flags), &y, spec) {
                        failures.push(format!("i32 n={n} {alg:?} {spec:?}: {e}"));
                    }
                    let mut dy = g.upload(&vec![f32::NAN; n]).unwrap();
                    gpu::segmented_scan_offsets(&g, &dxf, &doffs, &mut dy, spec, alg).unwrap();
                    let y = g.download(&dy).unwrap();
                    if let Err(e) = f32::compare(&xf, Some(&flags), &y, spec) {
                        failures.push(format!("f32 n={n} {alg:?} {spec:?}: {e}"));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// One workspace, many back-to-back look-back scans of different types, sizes and segment
    /// structures: the generation protocol must never let a stale status word through.
    #[test]
    fn gpu_workspace_reuse_across_calls() {
        let Some(g) = test_gpu() else { return };
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let nmax = 1 << 20;
        let mut ws = gpu::workspace(&g, nmax).unwrap();
        for round in 0..60 {
            let n = rng.gen_range(1..nmax);
            let d = round % 4;
            let f = random_flags(&mut rng, n, d);
            let hf = HeadFlags::from_flags(&g, &f).unwrap();
            let spec = specs()[round as usize % 12];
            let seg = round % 3 != 0;
            let fl = seg.then_some((&f[..], &hf));
            let alg = ScanAlgorithm::ALL[(round as usize / 2) % 3];
            let r = if round % 2 == 0 {
                let x: Vec<u32> = random_vec(&mut rng, n);
                run_one(&g, &x, fl, spec, alg, &mut ws)
            } else {
                let x: Vec<f64> = random_vec(&mut rng, n);
                run_one(&g, &x, fl, spec, alg, &mut ws)
            };
            r.unwrap_or_else(|e| panic!("round {round} n={n} seg={seg} {alg:?} {spec:?}: {e}"));
        }
    }

    /// 2^20 + 7 for every algorithm, operator and direction (i32 and f32), and 2^26 + 3 for
    /// sums (GPU only: the CPU test sizes stay modest).
    #[test]
    fn gpu_large_sizes() {
        let Some(g) = test_gpu() else { return };
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let mut failures = Vec::new();
        for n in [(1usize << 20) + 7, (1 << 26) + 3] {
            let xi: Vec<i32> = random_vec(&mut rng, n);
            let xf: Vec<f32> = random_vec(&mut rng, n);
            let f = random_flags(&mut rng, n, 1);
            let hf = HeadFlags::from_flags(&g, &f).unwrap();
            let mut ws = gpu::workspace(&g, n).unwrap();
            let big = n > 1 << 21;
            for alg in ScanAlgorithm::ALL {
                for spec in specs() {
                    if big && (spec.op != ScanOp::Plus || spec.kind == ScanKind::Exclusive) {
                        continue;
                    }
                    for seg in [false, true] {
                        let fl = seg.then_some((&f[..], &hf));
                        if let Err(e) = run_one(&g, &xi, fl, spec, alg, &mut ws) {
                            failures.push(format!("i32 n={n} seg={seg} {alg:?} {spec:?}: {e}"));
                        }
                        if let Err(e) = run_one(&g, &xf, fl, spec, alg, &mut ws) {
                            failures.push(format!("f32 n={n} seg={seg} {alg:?} {spec:?}: {e}"));
                        }
                    }
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// A small case for compute-sanitizer (memcheck, racecheck): every algorithm, both
    /// directions, plain and segmented, a few tiles; f32 (8-byte status words) and f64
    /// (16-byte status words).
    #[test]
    fn gpu_sanitizer_small() {
        let Some(g) = test_gpu() else { return };
        sanitizer_case::<f32>(&g, 14);
        sanitizer_case::<f64>(&g, 15);
    }

    fn sanitizer_case<T: TestElem + KernelType>(g: &Gpu, seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = 3 * policy::lookback(std::mem::size_of::<T>(), gpu::device_class(g)).tile() + 5;
        let x: Vec<T> = random_vec(&mut rng, n);
        let f = random_flags(&mut rng, n, 2);
        let hf = HeadFlags::from_flags(g, &f).unwrap();
        let mut ws = gpu::workspace(g, n).unwrap();
        for alg in ScanAlgorithm::ALL {
            for dir in DIRS {
                for seg in [false, true] {
                    let spec = ScanSpec::new(ScanOp::Plus, ScanKind::Inclusive, dir);
                    let fl = seg.then_some((&f[..], &hf));
                    run_one(g, &x, fl, spec, alg, &mut ws)
                        .unwrap_or_else(|e| panic!("{alg:?} {dir:?} seg={seg}: {e}"));
                }
            }
        }
    }
}
