//! The GPU runtime: every kernel source compiles (CI, NVRTC only), device discovery never panics,
//! and a launched kernel computes what the CPU computes (GPU machine).

#![cfg(feature = "cuda")]

use segsparse::gpu::{self, kernels, Gpu, PushKernelArg};

/// Whether NVRTC can be loaded; prints a skip notice when not, and fails instead under
/// `SEGSPARSE_REQUIRE_NVRTC=1` (CI).
fn nvrtc_or_skip() -> bool {
    if gpu::nvrtc_present() {
        return true;
    }
    assert!(
        std::env::var("SEGSPARSE_REQUIRE_NVRTC").as_deref() != Ok("1"),
        "SEGSPARSE_REQUIRE_NVRTC=1 but no NVRTC library could be loaded: {:?}",
        gpu::nvrtc::library().err()
    );
    eprintln!("skipped: NVRTC not found (set LD_LIBRARY_PATH to a libnvrtc.so.12 or .13)");
    false
}

/// Every kernel source compiles for sm_80 and sm_90 (A100, H100/H200; no kernel has a code path
/// of its own for 8.6 or 8.9, whose devices run sm_80 code).
/// Needs only libnvrtc. CI sets `SEGSPARSE_REQUIRE_NVRTC=1`, so there this test fails instead of
/// skipping when NVRTC is absent, and runs it once per NVRTC major version (12 and 13, chosen
/// with `SEGSPARSE_NVRTC`), with `SEGSPARSE_EXPECT_NVRTC_MAJOR` saying which one must be in use.
#[test]
fn every_kernel_source_compiles_for_sm80_and_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    let (lib, version) = gpu::nvrtc::library().unwrap();
    if let Ok(want) = std::env::var("SEGSPARSE_EXPECT_NVRTC_MAJOR") {
        assert_eq!(
            version.0.to_string(),
            want,
            "NVRTC {version:?} from {lib}, expected major {want}"
        );
    }
    // CI compiles every source with NVRTC 13 once more in its kernel-archive step (which fails
    // on any error, for sm_80/86/89/90) and says so here, instead of compiling everything twice.
    if std::env::var("SEGSPARSE_COMPILE_CHECK").as_deref() == Ok("kernel-archive") {
        eprintln!(
            "not compiled here: SEGSPARSE_COMPILE_CHECK=kernel-archive (the kernel-archive step \
             compiles every source with NVRTC {}.{})",
            version.0, version.1
        );
        return;
    }
    let archs = ["sm_80", "sm_90"];
    let jobs: Vec<_> = segsparse::kernel_registry::ALL_SOURCES
        .iter()
        .flat_map(|src| archs.iter().map(move |arch| (src, *arch)))
        .collect();
    // NVRTC compiles distinct programs concurrently: one worker per core (CI has two) keeps the
    // 48 compiles of two NVRTC versions within CI's time.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((src, arch)) = jobs.get(i) else {
                    break;
                };
                let r = match gpu::compile_ptx(src, arch, &[]) {
                    Ok(ptx) if ptx.to_src().is_empty() => {
                        Err(format!("{} gave empty PTX", src.name))
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(format!("{} for {arch}: {e}", src.name)),
                };
                if let Err(e) = r {
                    failures.lock().unwrap().push(e);
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    eprintln!(
        "compiled {} kernel sources for {archs:?} with NVRTC {}.{} ({lib})",
        segsparse::kernel_registry::ALL_SOURCES.len(),
        version.0,
        version.1
    );
}

/// The SpMV kernels assemble (CUBIN: the inline PTX of the cache policies is only checked by
/// ptxas) with each architecture's own policy (warp-striped loads, products parked in shared
/// memory, register caps), with the blocked loads, and on sm_90 with every `x`-gather cache
/// policy of the tuning knob.
#[test]
fn spmv_policy_variants_assemble() {
    use segsparse::spmv::gpu::{SpmvPolicy, SPMV_SRC};
    if !nvrtc_or_skip() {
        return;
    }
    for (arch, cc) in [("sm_80", (8, 0)), ("sm_89", (8, 9)), ("sm_90", (9, 0))] {
        let base = SpmvPolicy::for_device(cc);
        let blocked = SpmvPolicy {
            striped_f32: false,
            striped_f64: false,
            smem_prod_f32: false,
            smem_prod_f64: false,
            ..base
        };
        let hints: &[u32] = if arch == "sm_90" {
            &[1, 2, 3, 4, 5]
        } else {
            &[]
        };
        let variants = [base, blocked]
            .into_iter()
            .chain(hints.iter().map(|&x_hint| SpmvPolicy { x_hint, ..base }));
        for p in variants {
            gpu::compile_cubin(&SPMV_SRC, arch, &p.defines())
                .unwrap_or_else(|e| panic!("spmv.cu for {arch} with {p:?}: {e}"));
        }
    }
}

/// The driver and NVRTC versions found are reported (issue 23): by `Gpu::describe` on a device,
/// and by the free functions without one.
#[test]
fn driver_and_nvrtc_versions_are_reported() {
    match gpu::driver_version_number() {
        Some(v) => eprintln!("CUDA driver {}", gpu::version_string(v)),
        None => eprintln!("no CUDA driver"),
    }
    match gpu::nvrtc::library() {
        Ok((lib, v)) => eprintln!("NVRTC {}.{} from {lib}", v.0, v.1),
        Err(e) => eprintln!("{e}"),
    }
    assert_eq!(gpu::version_string(12040), "12.4");
    assert_eq!(gpu::version_string(13000), "13.0");
    if let Some(g) = gpu::test_gpu() {
        let d = g.describe();
        eprintln!("{d}");
        assert!(d.contains("CUDA driver 1") && d.contains("NVRTC 1"), "{d}");
    }
}

#[test]
fn a_compile_error_names_the_kernel_and_keeps_the_log() {
    if !gpu::nvrtc_present() {
        eprintln!("skipped: NVRTC not found");
        return;
    }
    let bad = kernels::KernelSource {
        name: "broken.cu",
        text: "extern \"C\" __global__ void k() { undeclared_thing = 1; }\n",
        headers: &[],
        constants: &[],
    };
    let e = gpu::compile_ptx(&bad, "sm_90", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("broken.cu"), "{e}");
    assert!(e.contains("undeclared_thing"), "{e}");
}

/// The kernel cache stores CUBINs: NVRTC produces an ELF image for a real architecture, without
/// a GPU. (The disk cache's keying, checksums and atomic writes are unit-tested in
/// `gpu::disk_cache`; loading a cached CUBIN is exercised on the GPU machine by every test.)
#[test]
fn cubin_compiles_without_a_gpu() {
    if !nvrtc_or_skip() {
        return;
    }
    let cubin = gpu::compile_cubin(&kernels::SELFTEST, "sm_90", &[]).unwrap();
    assert!(
        cubin.starts_with(b"\x7fELF"),
        "not an ELF image: {:?}",
        &cubin[..16.min(cubin.len())]
    );
    eprintln!(
        "selftest.cu: {} bytes of CUBIN for sm_90 (NVRTC {})",
        cubin.len(),
        gpu::nvrtc_version()
    );
    // A virtual architecture gives PTX only, which is an error here, not an empty image.
    let e = gpu::compile_cubin(&kernels::SELFTEST, "compute_90", &[]).unwrap_err();
    assert!(e.to_string().contains("selftest.cu"), "{e}");
}

#[test]
fn discovery_never_panics() {
    // On a machine without a driver this is a clear error; on the GPU machine a device.
    match Gpu::new() {
        Ok(g) => eprintln!("found {g:?}"),
        Err(e) => {
            assert!(e.is_cuda_unavailable(), "{e}");
            assert!(!gpu::gpu_required(), "SEGSPARSE_REQUIRE_GPU=1 but {e}");
        }
    }
}

#[test]
fn selftest_kernel_runs_across_many_blocks() {
    let Some(g) = gpu::test_gpu() else { return };
    let n = 1_000_003u32;
    let f = g
        .function(&kernels::SELFTEST, "selftest_iota_u32", &[])
        .unwrap();
    let mut out = g.upload(&vec![u32::MAX; n as usize]).unwrap();
    let mut b = g.stream().launch_builder(&f);
    b.arg(&mut out).arg(&n).arg(&3u32);
    // SAFETY: selftest_iota_u32(u32* out, u32 n, u32 scale); out has n elements.
    unsafe { b.launch(Gpu::cfg(64, 256, 0)) }.unwrap();
    let host = g.download(&out).unwrap();
    for (i, v) in host.iter().enumerate() {
        assert_eq!(*v, (i as u32).wrapping_mul(3), "element {i}");
    }
    let bw = g.copy_bandwidth(1 << 28, 10).unwrap();
    eprintln!("{}: copy bandwidth {:.0} GB/s", g.name(), bw / 1e9);
    assert!(bw > 1e10, "copy bandwidth {bw} B/s is implausible");
}

/// The kernel archive (the precompiled CUBINs embedded by `build.rs`) holds, under the key the
/// runtime computes, exactly the CUBIN NVRTC produces for that source, architecture and
/// defines; another policy or architecture is another key. When the library was built with an
/// archive from this NVRTC, its entries are compared too. NVRTC only, no GPU.
#[test]
fn the_kernel_archive_holds_what_nvrtc_produces() {
    use segsparse::gpu::prebuilt::Archive;
    use segsparse::spmv::gpu::{SpmvPolicy, SPMV_SRC};
    if !nvrtc_or_skip() {
        return;
    }
    let (_, version) = gpu::nvrtc::library().unwrap();
    let policy = SpmvPolicy::for_device((9, 0));
    let variants: Vec<(&kernels::KernelSource, Vec<(&'static str, String)>)> = vec![
        (&kernels::SELFTEST, Vec::new()),
        (&SPMV_SRC, policy.defines()),
    ];
    let bytes = gpu::build_kernel_archive(&[("sm_90", variants.clone())], 2).unwrap();
    let archive = Archive::parse(&bytes).unwrap();
    assert_eq!(archive.nvrtc(), version);
    assert_eq!(archive.len(), 2);
    let mut fresh = Vec::new();
    for (src, defines) in &variants {
        let key = gpu::archive_key(src, "sm_90", defines).unwrap();
        let cubin = gpu::compile_cubin(src, "sm_90", defines).unwrap();
        assert!(
            archive.get(&key).as_deref() == Some(&cubin[..]),
            "{}: the archive's CUBIN differs from NVRTC's",
            src.name
        );
        fresh.push((key, cubin));
    }
    let hinted = SpmvPolicy {
        x_hint: 3,
        ..policy
    }
    .defines();
    for key in [
        gpu::archive_key(&SPMV_SRC, "sm_90", &hinted).unwrap(),
        gpu::archive_key(&SPMV_SRC, "sm_80", &policy.defines()).unwrap(),
        gpu::archive_key(&kernels::SELFTEST, "sm_89", &[]).unwrap(),
    ] {
        assert!(archive.get(&key).is_none(), "found {key}");
    }
    match gpu::prebuilt::embedded() {
        Some(e) if e.nvrtc() == version => {
            for (key, cubin) in &fresh {
                if let Some(c) = e.get(key) {
                    assert!(
                        c == *cubin,
                        "the embedded CUBIN differs from NVRTC's: {key}"
                    );
                }
            }
            eprintln!(
                "embedded archive: {} modules, NVRTC {}.{}",
                e.len(),
                version.0,
                version.1
            );
        }
        Some(e) => eprintln!(
            "embedded archive from NVRTC {:?}, this is {version:?}: not compared",
            e.nvrtc()
        ),
        None => eprintln!("no embedded archive"),
    }
}

/// Whether the embedded archive must hold this device's kernels (`SEGSPARSE_REQUIRE_PREBUILT=1`,
/// set where the test executable was built with an archive for the GPU it runs on).
fn prebuilt_required() -> bool {
    std::env::var("SEGSPARSE_REQUIRE_PREBUILT").is_ok_and(|v| v == "1")
}

/// On the GPU: the embedded CUBINs of the device's architecture load and run (the self-test
/// kernel, checked element by element), every variant the registry lists for the device is in
/// the archive, and a `Gpu` takes them from there (a module loaded through `Gpu::prepare` runs).
#[test]
fn embedded_kernels_load_and_run_on_the_device() {
    let Some(g) = gpu::test_gpu() else { return };
    let skip = |why: String| {
        assert!(
            !prebuilt_required(),
            "SEGSPARSE_REQUIRE_PREBUILT=1 but {why}"
        );
        eprintln!("skipped: {why}");
    };
    let Some(archive) = gpu::prebuilt::embedded() else {
        return skip("the library was built without a kernel archive".into());
    };
    let driver = gpu::driver_version_number().unwrap_or(0);
    if !gpu::prebuilt::loadable(archive.nvrtc(), driver) {
        return skip(format!(
            "the archive's NVRTC {:?} is newer than the driver ({driver})",
            archive.nvrtc()
        ));
    }
    let arch = g.arch();
    let key = gpu::archive_key(&kernels::SELFTEST, &arch, &[]).unwrap();
    let Some(cubin) = archive.get(&key) else {
        return skip(format!("the archive has no {arch} kernels"));
    };
    let (major, minor) = g.compute_capability();
    let mut missing = Vec::new();
    for (src, defines) in segsparse::kernel_registry::variants((major, minor)) {
        if archive
            .get(&gpu::archive_key(src, &arch, &defines).unwrap())
            .is_none()
        {
            missing.push(src.name);
        }
    }
    assert!(
        missing.is_empty(),
        "not in the archive for {arch}: {missing:?}"
    );

    let module = g
        .context()
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .unwrap();
    let f = module.load_function("selftest_iota_u32").unwrap();
    let n = 100_003u32;
    let mut out = g.upload(&vec![u32::MAX; n as usize]).unwrap();
    let mut b = g.stream().launch_builder(&f);
    b.arg(&mut out).arg(&n).arg(&7u32);
    // SAFETY: selftest_iota_u32(u32* out, u32 n, u32 scale); out has n elements.
    unsafe { b.launch(Gpu::cfg(32, 256, 0)) }.unwrap();
    let host = g.download(&out).unwrap();
    for (i, v) in host.iter().enumerate() {
        assert_eq!(*v, (i as u32).wrapping_mul(7), "element {i}");
    }

    // Through the runtime: several modules at once (found in the archive), then used.
    let none: &[(&str, String)] = &[];
    g.prepare(&[
        (&kernels::SELFTEST, none),
        (&segsparse::spmv::gpu::SPMV_COLUMNS_SRC, none),
    ])
    .unwrap();
    let f = g
        .function(&kernels::SELFTEST, "selftest_iota_u32", &[])
        .unwrap();
    let mut b = g.stream().launch_builder(&f);
    b.arg(&mut out).arg(&n).arg(&5u32);
    // SAFETY: as above.
    unsafe { b.launch(Gpu::cfg(32, 256, 0)) }.unwrap();
    let host = g.download(&out).unwrap();
    assert!(host.iter().enumerate().all(|(i, v)| *v == (i as u32) * 5));
}

/// The per-buffer memory preflight spends one driver figure down across allocations: buffers
/// that fit pass, and one larger than the device is still refused with `OutOfMemory` naming the
/// buffer, however many checked buffers came before it (GPU machine).
#[test]
fn buffer_preflight_refuses_what_cannot_fit_after_many_buffers() {
    let Some(g) = gpu::test_gpu() else {
        return;
    };
    let (_, total) = g.memory_info().unwrap();
    // Twenty checked buffers (8 MiB each, above the unchecked size) and a queued timing.
    let t = g
        .time_queued(|| {
            let mut keep = Vec::new();
            for _ in 0..20 {
                keep.push(g.zeros::<f64>(1 << 20)?);
            }
            Ok(())
        })
        .unwrap();
    let s = t.seconds().unwrap();
    assert!(s.is_finite() && s >= 0.0, "queued timing {s}");
    let n = total / 8 + 1;
    match g.zeros::<f64>(n) {
        Err(segsparse::Error::OutOfMemory { what, need, .. }) => {
            assert!(what.contains("f64"), "{what}");
            assert_eq!(need, 8 * n as u64);
        }
        other => panic!("a buffer larger than the device was not refused: {other:?}"),
    }
    // One that fits still passes after the refusal.
    assert_eq!(g.zeros::<f64>(1 << 20).unwrap().len(), 1 << 20);
}
