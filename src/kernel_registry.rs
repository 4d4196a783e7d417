//! Every kernel source of the crate in one list, assembled above the modules that own them.
//!
//! The GPU runtime ([`crate::gpu`]) compiles whatever [`KernelSource`] it is handed and knows no
//! kernel above it; each module (primitives, SpMV, solvers, tridiagonal) declares its own sources
//! and headers. This list exists for the checks that must see all of them at once: CI compiles
//! each for `sm_80` and `sm_90` with NVRTC (`tests/all/gpu_runtime.rs`), and a unit test below
//! resolves every source's includes on every machine, NVRTC or not.

use crate::gpu::kernels::KernelSource;

/// The slice of the sources listed, those of a feature's group only with that feature.
macro_rules! sources {
    ([$($src:expr),* $(,)?] $(, $feature:literal: [$($gated:expr),* $(,)?])* $(,)?) => {
        &[$(&$src,)* $($(#[cfg(feature = $feature)] &$gated,)*)*]
    };
}

/// Every kernel source (`.cu`), each compiled in CI with the defaults of its policy.
pub const ALL_SOURCES: &[&KernelSource] = sources!(
    [
        crate::gpu::kernels::SELFTEST,
        crate::tridiag::TRIDIAG_KERNELS,
        crate::tridiag::SHALLOW_WATER_KERNELS,
        crate::primitives::sources::SCAN_LOOKBACK,
        crate::primitives::sources::SEGSCAN_LOOKBACK,
        crate::primitives::sources::SCAN_MULTIPASS,
        crate::primitives::sources::SEGSCAN_MULTIPASS,
        crate::primitives::sources::SEGSCAN_FLAGS,
        crate::primitives::compact::KERNELS,
        crate::primitives::split::KERNELS,
        crate::primitives::sort::KERNELS,
        crate::primitives::sort::ONESWEEP_KERNELS,
        crate::primitives::segreduce::KERNELS,
        crate::primitives::distribute::KERNELS,
    ],
    "cuda": [
        crate::spmv::gpu::SPMV_SRC,
        crate::spmv::gpu::SPMV_COLUMNS_SRC,
        crate::spmv::gpu::complex::SPMV_COMPLEX_SRC,
        crate::spmm::gpu::SPMM_SRC,
        crate::batched::gpu::BATCHED_SRC,
        crate::backend::gpu::BLAS1,
        crate::backend::gpu::CG,
        crate::backend::gpu::BICGSTAB,
        crate::backend::gpu::GMRES,
        crate::backend::gpu::CHEBYSHEV,
        crate::sparse::gpu::SPGEMM_SRC,
        crate::sparse::gpu::AGGREGATE_SRC,
        crate::sparse::gpu::ADJOINT_SRC,
        crate::sparse::gpu::BLOCK_SRC,
        crate::sparse::triangular::gpu::SPTRSV_SRC,
        crate::sparse::triangular::gpu::LEVELS_SRC,
        crate::precond::amg::AMG_SETUP_SRC,
        crate::precond::auto::gpu::AUTO_STATS_SRC,
        crate::csr::check_gpu::CSR_CHECK_SRC,
    ],
    "nccl": [
        crate::backend::nccl::DIST_KERNELS,
    ],
);

/// Every `(source, defines)` variant the runtime asks for on a device of compute capability
/// `cc`, under this process's policies (their defaults unless tuning variables are set): what
/// the `kernel-archive` tool compiles into the embedded archive ([`crate::gpu::prebuilt`]).
/// Sources compiled with a policy's defines (SpMV once per element type, the scans, the
/// Onesweep sort) appear with those; every other source with none. A variant missing here is not an error: the runtime
/// then compiles it with NVRTC.
#[cfg(feature = "cuda")]
pub fn variants(cc: (i32, i32)) -> Vec<(&'static KernelSource, Vec<(&'static str, String)>)> {
    use crate::primitives::sources as scan;
    let spmv = crate::spmv::gpu::SpmvPolicy::for_device(cc);
    // The primitives' tuning rows depend on the device class (read from the name at run time,
    // H100 / H200 / other), so every distinct row of the classes is archived.
    let classes = crate::primitives::policy::DeviceClass::ALL;
    let distinct =
        |f: &dyn Fn(crate::primitives::policy::DeviceClass) -> Vec<(&'static str, String)>| {
            let mut v: Vec<Vec<(&'static str, String)>> = Vec::new();
            for c in classes {
                let d = f(c);
                if !v.contains(&d) {
                    v.push(d);
                }
            }
            v
        };
    let scan_defines = distinct(&crate::primitives::gpu::scan_defines);
    let sort_defines = distinct(&crate::primitives::sort::gpu::onesweep_defines);
    let scans = [
        scan::SCAN_LOOKBACK.name,
        scan::SEGSCAN_LOOKBACK.name,
        scan::SCAN_MULTIPASS.name,
        scan::SEGSCAN_MULTIPASS.name,
    ];
    let mut out = Vec::new();
    for &src in ALL_SOURCES {
        // By name: a `const` source has no single address.
        if src.name == crate::spmv::gpu::SPMV_SRC.name {
            // One module per element type (what a `GpuCsr<T>` asks for).
            out.push((src, spmv.typed_defines::<f32>()));
            out.push((src, spmv.typed_defines::<f64>()));
            out.push((src, spmv.mixed_defines()));
        } else if scans.contains(&src.name) {
            out.extend(scan_defines.iter().map(|d| (src, d.clone())));
        } else if src.name == crate::primitives::sort::ONESWEEP_KERNELS.name {
            out.extend(sort_defines.iter().map(|d| (src, d.clone())));
        } else {
            out.push((src, Vec::new()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::kernels::preprocess;

    /// Every include of every source is declared (so no kernel fails to compile for a missing
    /// header on a machine that has NVRTC), and every `.cu` under `kernels/` is listed here.
    #[test]
    fn every_source_resolves_its_includes_and_is_listed() {
        for src in ALL_SOURCES {
            let text = preprocess(src).unwrap_or_else(|e| panic!("{e}"));
            assert!(!text.contains("#include"), "{}: include left", src.name);
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        if !dir.is_dir() {
            return; // not on the build machine
        }
        let mut on_disk = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "cu") {
                    let rel = p
                        .strip_prefix(&dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/");
                    on_disk.push(rel);
                }
            }
        }
        for f in &on_disk {
            assert!(
                ALL_SOURCES.iter().any(|s| s.name == f),
                "kernels/{f} is not in kernel_registry::ALL_SOURCES (CI would not compile it)"
            );
        }
    }
}
