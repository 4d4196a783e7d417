//! Tridiagonal systems: Thomas (CPU reference), cyclic reduction and PCR.
