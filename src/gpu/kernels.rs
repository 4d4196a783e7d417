//! The embedded kernel sources and the splicing of their `#include "…"` lines.
//!
//! cudarc hands NVRTC no in-memory headers, and the machines that run this crate need not have
//! the repository (or CUDA headers) on disk, so every `.cuh` under `kernels/` is embedded here and
//! `#include "path.cuh"` lines are replaced by the header's text before compiling. A header is
//! spliced once per source (the effect of `#pragma once`). Kernel sources include nothing else:
//! no CUDA or C++ standard headers, which CI's NVRTC-only install does not have.
//!
//! To add a kernel: put the `.cu` under `kernels/`, declare a [`KernelSource`] constant next to
//! the Rust code that launches it, and list it in [`ALL_SOURCES`] so CI compiles it.

use crate::error::{Error, Result};

/// One `.cu` file: its path under `kernels/` and its text.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// Path under `kernels/`, used in error messages and as the cache key.
    pub name: &'static str,
    /// The source text.
    pub text: &'static str,
}

macro_rules! embed {
    ($path:literal) => {
        ($path, include_str!(concat!("../../kernels/", $path)))
    };
}

/// Every header under `kernels/`, by the path that `#include` lines use.
pub const HEADERS: &[(&str, &str)] = &[
    embed!("common.cuh"),
    embed!("warp/warp_scan.cuh"),
    embed!("warp/warp_reduce.cuh"),
    embed!("block/block_scan.cuh"),
    embed!("block/block_load_store.cuh"),
    embed!("block/tile_lookback.cuh"),
    embed!("block/tile_scan.cuh"),
    embed!("block/block_work_efficient.cuh"),
    embed!("block/scan_instances.cuh"),
    embed!("block/block_select.cuh"),
    embed!("block/block_radix_rank.cuh"),
    embed!("tridiag/block_tridiag.cuh"),
    embed!("spmv/spmv_scan.cuh"),
];

/// Every kernel source, each with the defines it is compiled with in CI (the defaults of its
/// policy). The CI test compiles each for `sm_80` and `sm_90`.
pub const ALL_SOURCES: &[&KernelSource] = &[
    &crate::gpu::kernels::SELFTEST,
    &crate::tridiag::TRIDIAG_KERNELS,
    &crate::tridiag::SHALLOW_WATER_KERNELS,
    &crate::primitives::sources::SCAN_LOOKBACK,
    &crate::primitives::sources::SEGSCAN_LOOKBACK,
    &crate::primitives::sources::SCAN_MULTIPASS,
    &crate::primitives::sources::SEGSCAN_MULTIPASS,
    &crate::primitives::sources::SEGSCAN_FLAGS,
    &crate::primitives::compact::KERNELS,
    &crate::primitives::split::KERNELS,
    &crate::primitives::sort::KERNELS,
    &crate::primitives::segreduce::KERNELS,
    &crate::primitives::distribute::KERNELS,
    #[cfg(feature = "cuda")]
    &crate::spmv::gpu::SPMV_SRC,
    #[cfg(feature = "cuda")]
    &crate::solvers::gpu::BLAS1,
    #[cfg(feature = "nccl")]
    &crate::dist::nccl::DIST_KERNELS,
];

/// A minimal kernel used by the runtime's own tests (fill a buffer with its index).
pub const SELFTEST: KernelSource = KernelSource {
    name: "selftest.cu",
    text: include_str!("../../kernels/selftest.cu"),
};

/// Returns `src` with every `#include "x.cuh"` replaced by the header's text (each header once).
///
/// # Errors
/// [`Error::Compile`] naming the source and the header when an include is unknown.
pub fn preprocess(src: &KernelSource) -> Result<String> {
    let mut out = String::with_capacity(src.text.len() * 2);
    let mut seen = Vec::new();
    splice(src.name, src.text, &mut out, &mut seen)?;
    Ok(out)
}

fn splice(name: &str, text: &str, out: &mut String, seen: &mut Vec<&'static str>) -> Result<()> {
    for (lineno, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("#include") {
            let inc = rest
                .trim()
                .trim_matches(|c| c == '"' || c == '<' || c == '>');
            let Some(&(hname, htext)) = HEADERS.iter().find(|(h, _)| *h == inc) else {
                return Err(Error::Compile {
                    kernel: name.to_string(),
                    log: format!(
                        "{name}:{}: #include \"{inc}\" is not an embedded header \
                         (kernels may include only files listed in gpu::kernels::HEADERS)",
                        lineno + 1
                    ),
                });
            };
            if !seen.contains(&hname) {
                seen.push(hname);
                out.push_str(&format!("// ---- begin {hname}\n"));
                splice(hname, htext, out, seen)?;
                out.push_str(&format!("// ---- end {hname}\n"));
            }
        } else if t.starts_with("#pragma once") {
            continue;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_spliced_once_and_unknown_ones_named() {
        let s = KernelSource {
            name: "t.cu",
            text: "#include \"common.cuh\"\n#include \"common.cuh\"\nint x;\n",
        };
        let out = preprocess(&s).unwrap();
        assert_eq!(out.matches("// ---- begin common.cuh").count(), 1);
        assert!(out.ends_with("int x;\n"));
        let bad = KernelSource {
            name: "b.cu",
            text: "\n#include \"nope.cuh\"\n",
        };
        let e = preprocess(&bad).unwrap_err().to_string();
        assert!(e.contains("b.cu:2") && e.contains("nope.cuh"), "{e}");
    }
}
