//! Iterative solvers: CG, Jacobi-PCG and BiCGSTAB, one body for CPU and GPU.
