//! Finding test matrices (shared by the solver and ILU tests): `SEGSPARSE_DATA` first (the
//! corpus on the GPU machine), then `../shared/matrices` and `matrices/` beside the manifest (or
//! the current directory where the build machine's manifest path does not exist).

use std::path::PathBuf;

use segsparse::{io, CsrMatrix, Elem};

pub fn roots() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(d) = std::env::var("SEGSPARSE_DATA") {
        v.push(PathBuf::from(d));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let base = if manifest.exists() {
        manifest
    } else {
        PathBuf::from(".")
    };
    v.push(base.join("../shared/matrices"));
    v.push(base.join("matrices"));
    v
}

pub fn load<T: Elem>(name: &str) -> Option<CsrMatrix<T>> {
    for root in roots() {
        for ext in ["mtx.gz", "mtx"] {
            let p = root.join(format!("{name}.{ext}"));
            if p.exists() {
                return Some(io::read_matrix_market(&p).unwrap_or_else(|e| panic!("{e}")));
            }
        }
    }
    eprintln!("skipped: {name} not found (set SEGSPARSE_DATA)");
    None
}
