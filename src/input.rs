//! Where a matrix comes from: a Matrix Market file ([`io`](crate::io)) or a generator spec
//! ([`generate`](crate::generate)). Above both, so that neither needs the other.

use std::path::Path;

#[cfg(doc)]
use crate::Error;
use crate::{generate, io, CsrMatrix, Elem, Result};

/// Loads a matrix from a Matrix Market file or generates it from a spec such as `poisson2d:100`
/// (see [`crate::generate`]).
///
/// An existing file always wins; otherwise a string that looks like a spec
/// ([`generate::is_spec`]) is generated with `seed`, and anything else is opened as a file
/// (giving a "not found" [`Error::Io`] naming it).
///
/// # Errors
/// Those of [`io::read_matrix_market`] or [`generate::from_spec`].
pub fn load<T: Elem>(path_or_spec: &str, seed: u64) -> Result<CsrMatrix<T>> {
    if !Path::new(path_or_spec).exists() && generate::is_spec(path_or_spec) {
        generate::from_spec(path_or_spec, seed)
    } else {
        io::read_matrix_market(path_or_spec)
    }
}
