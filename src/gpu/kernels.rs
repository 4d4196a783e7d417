//! Kernel sources as the runtime sees them, and the splicing of their `#include "…"` lines.
//!
//! cudarc hands NVRTC no in-memory headers, and the machines that run this crate need not have
//! the repository (or CUDA headers) on disk, so every `.cu` and `.cuh` is embedded with
//! `include_str!` by the module that owns it, and `#include "path.cuh"` lines are replaced by the
//! header's text before compiling. A header is spliced once per source (the effect of
//! `#pragma once`). Kernel sources include nothing else: no CUDA or C++ standard headers, which
//! CI's NVRTC-only install does not have.
//!
//! # Who owns what
//!
//! The runtime knows no kernel above it. Each [`KernelSource`] names the headers it includes
//! directly (a header is a `KernelSource` too, naming its own includes), so an include is resolved
//! from the source's own declaration and never from a global table. The runtime owns only
//! [`COMMON`] (`common.cuh`, the typedefs and macros every kernel uses) and [`SELFTEST`]; the
//! primitives own `warp/` and `block/`, SpMV and the tridiagonal solvers their own headers. The
//! list of every source, which CI compiles for `sm_80` and `sm_90`, is assembled above all of them
//! in [`crate::kernel_registry`].
//!
//! To add a kernel: put the `.cu` under `kernels/`, declare a [`KernelSource`] constant with
//! `kernel_source!` (naming the headers its `#include` lines name) next to the Rust code that
//! launches it, and list it in
//! [`crate::kernel_registry::ALL_SOURCES`] so CI compiles it.

use crate::error::{Error, Result};

/// One `.cu` or `.cuh` file: its path under `kernels/`, its text, the headers it includes and
/// the constants it shares with the Rust code that launches it.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// Path under `kernels/`, used in error messages, in `#include` lines and in cache keys.
    pub name: &'static str,
    /// The source text.
    pub text: &'static str,
    /// The headers its `#include "…"` lines name (each header lists its own includes in turn).
    pub headers: &'static [&'static KernelSource],
    /// Constants that the Rust side and the kernel must agree on (block sizes, slot numbers,
    /// status codes, table sizes): every compile of this file, or of a file that includes it,
    /// passes them as `-DNAME=value`, so they are written once, in Rust. The file tests that they
    /// are defined (`#ifndef NAME` / `#error`) instead of repeating the values.
    pub constants: &'static [(&'static str, i64)],
}

/// The [`KernelSource`] of the file `path` under `kernels/` (a string literal), its text embedded
/// with `include_str!`, with the headers it includes (`&[&KernelSource]`) and, optionally, the
/// constants it shares with Rust (`&[(&str, i64)]`, none when left out):
/// `kernel_source!("spmv/spmv.cu", &[&COMMON, &SPMV_SCAN])`.
macro_rules! kernel_source {
    ($path:literal, $headers:expr) => {
        $crate::gpu::kernels::kernel_source!($path, $headers, &[])
    };
    ($path:literal, $headers:expr, $constants:expr) => {
        $crate::gpu::kernels::KernelSource {
            name: $path,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/kernels/", $path)),
            headers: $headers,
            constants: $constants,
        }
    };
}
pub(crate) use kernel_source;

/// `kernels/common.cuh`: typedefs, type-suffix macros and operators used by every kernel.
pub const COMMON: KernelSource = kernel_source!("common.cuh", &[]);

/// `kernels/complex.cuh`: the interleaved complex types (`cfloat`, `cdouble`) and their
/// arithmetic, and the scalar functions that let one kernel template serve real and complex
/// element types (the solver kernels, the complex SpMV, the conjugate transpose).
pub const COMPLEX_H: KernelSource = kernel_source!("complex.cuh", &[]);

/// A minimal kernel used by the runtime's own tests (fill a buffer with its index).
pub const SELFTEST: KernelSource = kernel_source!("selftest.cu", &[&COMMON]);

/// Returns `src` with every `#include "x.cuh"` replaced by the header's text (each header once).
///
/// # Errors
/// [`Error::Compile`] naming the file, line and header when an include is not among the
/// headers that file declares.
pub fn preprocess(src: &KernelSource) -> Result<String> {
    let mut out = String::with_capacity(src.text.len() * 2);
    let mut seen = Vec::new();
    splice(src, &mut out, &mut seen)?;
    Ok(out)
}

/// The constants of `src` and of every header it includes (directly or not), in include order,
/// each once: the `-D` options of every compile of `src`.
///
/// # Errors
/// [`Error::Compile`] when two files give one name different values.
pub fn constants(src: &KernelSource) -> Result<Vec<(&'static str, i64)>> {
    fn walk(src: &KernelSource, out: &mut Vec<(&'static str, i64)>, root: &str) -> Result<()> {
        for h in src.headers {
            walk(h, out, root)?;
        }
        for &(name, value) in src.constants {
            match out.iter().find(|(n, _)| *n == name) {
                Some(&(_, v)) if v != value => {
                    return Err(Error::Compile {
                        kernel: root.to_string(),
                        log: format!(
                            "constant {name} is {v} in one file and {value} in {}",
                            src.name
                        ),
                    })
                }
                Some(_) => {}
                None => out.push((name, value)),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(src, &mut out, src.name)?;
    Ok(out)
}

fn splice(src: &KernelSource, out: &mut String, seen: &mut Vec<&'static str>) -> Result<()> {
    for (lineno, line) in src.text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("#include") {
            let inc = rest
                .trim()
                .trim_matches(|c| c == '"' || c == '<' || c == '>');
            let Some(header) = src.headers.iter().find(|h| h.name == inc) else {
                return Err(Error::Compile {
                    kernel: src.name.to_string(),
                    log: format!(
                        "{}:{}: #include \"{inc}\" is not among the headers this file declares \
                         (its KernelSource's `headers`: [{}])",
                        src.name,
                        lineno + 1,
                        src.headers
                            .iter()
                            .map(|h| h.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            };
            if !seen.contains(&header.name) {
                seen.push(header.name);
                out.push_str(&format!("// ---- begin {}\n", header.name));
                splice(header, out, seen)?;
                out.push_str(&format!("// ---- end {}\n", header.name));
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
    fn includes_are_spliced_once_and_undeclared_ones_named() {
        let s = KernelSource {
            name: "t.cu",
            text: "#include \"common.cuh\"\n#include \"common.cuh\"\nint x;\n",
            headers: &[&COMMON],
            constants: &[],
        };
        let out = preprocess(&s).unwrap();
        assert_eq!(out.matches("// ---- begin common.cuh").count(), 1);
        assert!(out.ends_with("int x;\n"));
        let bad = KernelSource {
            name: "b.cu",
            text: "\n#include \"common.cuh\"\n",
            headers: &[],
            constants: &[],
        };
        let e = preprocess(&bad).unwrap_err().to_string();
        assert!(e.contains("b.cu:2") && e.contains("common.cuh"), "{e}");
    }

    #[test]
    fn constants_are_collected_from_the_headers_once_and_conflicts_named() {
        const H: KernelSource = KernelSource {
            name: "h.cuh",
            text: "",
            headers: &[&COMMON],
            constants: &[("A", 1), ("B", 2)],
        };
        const S: KernelSource = KernelSource {
            name: "s.cu",
            text: "#include \"h.cuh\"\n",
            headers: &[&H, &COMMON],
            constants: &[("B", 2), ("C", -3)],
        };
        assert_eq!(constants(&S).unwrap(), [("A", 1), ("B", 2), ("C", -3)]);
        const BAD: KernelSource = KernelSource {
            name: "bad.cu",
            text: "",
            headers: &[&H],
            constants: &[("A", 7)],
        };
        let e = constants(&BAD).unwrap_err().to_string();
        assert!(e.contains("A is 1") && e.contains("7 in bad.cu"), "{e}");
    }
}
