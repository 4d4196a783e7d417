//! Solve a 2-D Poisson problem with conjugate gradient on the GPU, or on the CPU when no GPU works.
//!
//! ```sh
//! cargo run --release --example gpu_cg -- 1000      # Poisson 2D 1000² (10^6 unknowns)
//! ```
//!
//! The solver body is the same for both backends; only the vector type differs (`Vec<T>` on the
//! CPU, a device buffer on the GPU). On the GPU the matrix is uploaded once (`GpuCsr::upload`) and
//! the whole iteration, scalars included, stays on the device.

use segsparse::backend::{Cpu, VectorOps};
use segsparse::solvers::{cg, SolveParams};
use segsparse::{generate, CsrMatrix};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(300);
    let a: CsrMatrix<f64> = generate::poisson2d(n)?;
    let b = vec![1.0; a.nrows()];
    let params = SolveParams {
        rel_tol: 1e-8,
        max_iters: 20 * n + 100,
        ..Default::default()
    };
    println!(
        "Poisson 2D {n}²: {} unknowns, {} entries",
        a.nrows(),
        a.nnz()
    );

    #[cfg(feature = "cuda")]
    match segsparse::gpu::Gpu::new() {
        Ok(gpu) => {
            use segsparse::backend::gpu::GpuOps;
            use segsparse::spmv::gpu::GpuCsr;
            let ops = GpuOps::<f64>::new(&gpu)?;
            let da = GpuCsr::upload(&gpu, &a)?;
            let db = ops.upload(&b)?;
            let mut dx = ops.upload(&vec![0.0; a.ncols()])?;
            let info = cg(&ops, &da, &db, &mut dx, &params)?;
            let x = ops.download(&dx)?;
            println!(
                "GPU ({}): {} iterations, relative residual {:.2e}, {:.1} ms; x[0] = {:.6}",
                gpu.name(),
                info.iterations,
                info.relative_residual,
                info.solve_seconds * 1e3,
                x[0]
            );
            return Ok(());
        }
        Err(e) => eprintln!("{e}"),
    }

    let mut x = vec![0.0; a.ncols()];
    let info = cg(&Cpu, &a, &b, &mut x, &params)?;
    println!(
        "CPU: {} iterations, relative residual {:.2e}, {:.1} ms; x[0] = {:.6}",
        info.iterations,
        info.relative_residual,
        info.solve_seconds * 1e3,
        x[0]
    );
    Ok(())
}
