//! Embeds the archive of precompiled kernels (CUBINs), when one was built, into the library.
//!
//! The archive is written by the `kernel-archive` tool (`src/gpu/prebuilt.rs` describes it):
//! `$SEGSPARSE_KERNEL_ARCHIVE` names it, else `kernels/prebuilt/cubins.bin` is taken when it
//! exists (CI writes it there before packaging, so the published crate and the wheel carry it).
//! Without either, an empty archive is embedded and every kernel is compiled by NVRTC at run
//! time: building never needs NVRTC or CUDA.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SEGSPARSE_KERNEL_ARCHIVE");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let default = manifest.join("kernels").join("prebuilt").join("cubins.bin");
    // The directory, which always exists (a path that does not exist would rerun this script,
    // and rebuild the library, on every build); cargo scans it for changes.
    println!("cargo:rerun-if-changed=kernels");
    let chosen = match std::env::var_os("SEGSPARSE_KERNEL_ARCHIVE").filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            println!("cargo:rerun-if-changed={}", p.display());
            if !p.is_file() {
                panic!(
                    "SEGSPARSE_KERNEL_ARCHIVE={} is not a file (unset it to build without \
                     precompiled kernels)",
                    p.display()
                );
            }
            Some(p)
        }
        None => default.is_file().then_some(default),
    };
    let bytes = match &chosen {
        Some(p) => std::fs::read(p)
            .unwrap_or_else(|e| panic!("reading the kernel archive {}: {e}", p.display())),
        None => Vec::new(),
    };
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out.join("kernels.bin"), bytes).expect("writing OUT_DIR/kernels.bin");
}
