//! `kernel-archive`: compiles every kernel variant the runtime can ask for into the archive of
//! precompiled CUBINs that `build.rs` embeds in the library (see `segsparse::gpu::prebuilt`).
//!
//! ```text
//! kernel-archive [--out PATH] [--arch sm_80,sm_90] [--jobs N]
//! ```
//!
//! Needs NVRTC (no GPU): the archive records its version, and the runtime uses the archive only
//! under a driver that supports it. Then build with `SEGSPARSE_KERNEL_ARCHIVE=PATH` (or write
//! the archive to `kernels/prebuilt/cubins.bin`, the default `--out`, which the build takes
//! when present).

use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: kernel-archive [--out PATH] [--arch sm_80,sm_90] [--jobs N]");
    std::process::exit(2)
}

/// `"sm_86"` as `(8, 6)`.
fn compute_capability(arch: &str) -> Option<(i32, i32)> {
    let digits = arch.strip_prefix("sm_")?;
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?))
}

fn main() {
    let mut out = String::from("kernels/prebuilt/cubins.bin");
    // An sm_80 CUBIN also serves 8.6 and 8.9 devices (`gpu::prebuilt::archive_archs`).
    let mut archs = String::from("sm_80,sm_90");
    let mut jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--out" => out = value(),
            "--arch" => archs = value(),
            "--jobs" => jobs = value().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let mut targets = Vec::new();
    for arch in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let Some(cc) = compute_capability(arch) else {
            eprintln!("kernel-archive: {arch:?} is not a real architecture like sm_90");
            std::process::exit(2)
        };
        targets.push((arch, segsparse::kernel_registry::variants(cc)));
    }
    let count: usize = targets.iter().map(|t| t.1.len()).sum();
    let t0 = Instant::now();
    // Sources the runtime never loads from the archive (compiled on demand with run-time
    // defines, or test-only) are still compiled once per architecture here, so that a written
    // archive means every kernel source compiles with this NVRTC.
    let mut unarchived = 0;
    for (arch, variants) in &targets {
        for src in segsparse::kernel_registry::ALL_SOURCES {
            if variants.iter().any(|(v, _)| v.name == src.name) {
                continue;
            }
            unarchived += 1;
            if let Err(e) = segsparse::gpu::compile_ptx(src, arch, &[]) {
                eprintln!("kernel-archive: {} for {arch}: {e}", src.name);
                std::process::exit(1)
            }
        }
    }
    let bytes = match segsparse::gpu::build_kernel_archive(&targets, jobs) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("kernel-archive: {e}");
            std::process::exit(1)
        }
    };
    let path = std::path::Path::new(&out);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("kernel-archive: creating {}: {e}", dir.display());
            std::process::exit(1)
        }
    }
    if let Err(e) = std::fs::write(path, &bytes) {
        eprintln!("kernel-archive: writing {out}: {e}");
        std::process::exit(1)
    }
    let (lib, v) = segsparse::gpu::nvrtc::library().expect("used above");
    println!(
        "kernel-archive: {count} modules for {archs} with NVRTC {}.{} ({lib}), {jobs} jobs, \
         {:.1} s (and {unarchived} source compiles outside the archive); {} bytes written to {out}",
        v.0,
        v.1,
        t0.elapsed().as_secs_f64(),
        bytes.len()
    );
}
