//! Start-up cost of the GPU path in a fresh process: context creation, then the first SpMV (its
//! upload compiles or loads the kernels), then a steady one. Prints one JSON object.
//!
//! ```text
//! cargo run --release -p segsparse-tools --example startup                       # whatever the cache holds
//! SEGSPARSE_CACHE_DIR=$(mktemp -d) ./startup                  # cold: empty kernel cache
//! SEGSPARSE_CACHE_DIR=<same dir> ./startup                    # warm: a second process
//! SEGSPARSE_KERNEL_CACHE=0 ./startup                          # no persistent cache
//! ```
//!
//! `first_spmv_ms` is the time from a ready context to the first product's result on the host:
//! `GpuCsr::upload` (kernel compile or cache load, structure tables, copies), one SpMV and the
//! download. The goal of the kernel cache is `first_spmv_ms` ≤ 50 in a second process.
//! `benches/reliability/device.sh` runs the three cases on the GPU machine.

use std::time::Instant;

use segsparse::gpu::{disk_cache, Gpu};
use segsparse::spmv::gpu::GpuCsr;
use segsparse::{generate, CsrMatrix};

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "poisson2d:256".into());
    let a: CsrMatrix<f64> = generate::from_spec(&spec, 0)?;
    let x = vec![1.0f64; a.ncols()];
    let cache = disk_cache::cache_dir();
    let entries_before = cache
        .as_ref()
        .and_then(|d| std::fs::read_dir(d).ok())
        .map_or(0, |rd| rd.count());

    let t = Instant::now();
    let g = Gpu::new().map_err(|e| format!("startup needs a GPU: {e}"))?;
    let context_ms = ms(t);

    let t = Instant::now();
    let ga = GpuCsr::upload(&g, &a)?;
    let upload_ms = ms(t);
    let dx = g.upload(&x)?;
    let mut dy = g.zeros::<f64>(a.nrows())?;
    ga.spmv(1.0, &dx, 0.0, &mut dy)?;
    let y = g.download(&dy)?;
    let first_spmv_ms = ms(t);

    let t = Instant::now();
    ga.spmv(1.0, &dx, 0.0, &mut dy)?;
    g.synchronize()?;
    let second_spmv_ms = ms(t);

    // A row sum of the Poisson matrix with x = 1 is 0 inside and positive at the boundary:
    // enough to see that the product ran.
    let checksum: f64 = y.iter().sum();
    let entries_after = cache
        .as_ref()
        .and_then(|d| std::fs::read_dir(d).ok())
        .map_or(0, |rd| rd.count());
    // A flat object of numbers and two plain strings, so no serializer is needed.
    println!(
        "{{\"device\": \"{}\", \"matrix\": \"{spec}\", \"cache\": \"{}\", \
         \"cache_entries_before\": {entries_before}, \"cache_entries_after\": {entries_after}, \
         \"context_ms\": {context_ms:.1}, \"upload_ms\": {upload_ms:.1}, \
         \"first_spmv_ms\": {first_spmv_ms:.1}, \"second_spmv_ms\": {second_spmv_ms:.3}, \
         \"checksum\": {checksum}}}",
        g.name().replace('"', "'"),
        cache.map_or("disabled".to_string(), |d| d
            .display()
            .to_string()
            .replace('"', "'")),
    );
    Ok(())
}
