//! The memory preflight of `sparse-solve`: from the matrix file's header alone,
//! before anything proportional to the problem is allocated, refuse a matrix that is not square
//! or that, with `b`, `x` and (on the CPU) the solver's workspace, cannot fit into the host's
//! available memory. The library checks its own allocations again (the solver workspace on
//! either backend, the GPU upload); this check comes first so that a file that cannot be solved
//! here costs microseconds, not the minutes of reading it.

use anyhow::{bail, Result};

use crate::cli::{BackendArg, Cli, MethodArg};

/// Checks the file `path` (a generator spec passes: its size is the user's own choice).
pub fn host<T>(path: &str, cli: &Cli) -> Result<()> {
    if !std::path::Path::new(path).is_file() {
        return Ok(());
    }
    let hdr = segsparse::io::read_header(path)?;
    if hdr.nrows != hdr.ncols {
        bail!(
            "{}: the matrix is {}×{}; a linear solve needs a square matrix",
            cli.matrix,
            hdr.nrows,
            hdr.ncols
        );
    }
    // Host vectors of length n: b and x, and on the CPU the solver's workspace (GMRES: r, q, z
    // and the m + 1 basis vectors; BiCGSTAB with a preconditioner: 8; CG: 4).
    let workspace = match (cli.backend, cli.method) {
        (BackendArg::Gpu, _) => 1, // the solution's download
        (_, MethodArg::Gmres) => cli.restart as u64 + 4,
        (_, MethodArg::Cg | MethodArg::Pcg | MethodArg::Cocg) => 4,
        (_, MethodArg::Minres) => 11,
        _ => 8,
    };
    let per_row = (2 + workspace) * std::mem::size_of::<T>() as u64;
    segsparse::io::check_matrix_file::<T>(path, "solving", per_row, 0, 0)?;
    Ok(())
}
