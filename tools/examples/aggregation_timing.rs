//! Times the CPU graph phases of smoothed-aggregation setup — amalgamation, strength of
//! connection and MIS-2 aggregation — on generated problems (median of 3 runs each), and, with a
//! GPU, the same phases on the device (checked equal to the CPU's).
//!
//! ```text
//! cargo run --release -p segsparse-tools --example aggregation_timing                      # the default problems
//! cargo run --release -p segsparse-tools --example aggregation_timing -- poisson3d:256     # any generate spec
//! ```
//!
//! A spec starting with `elasticity2d` is amalgamated with block size 2 first.

use std::time::Instant;

use segsparse::generate;
use segsparse::sparse;
use segsparse::CsrMatrix;

fn median(mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..3)
        .map(|_| {
            let c = Instant::now();
            f();
            c.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[1]
}

fn main() -> segsparse::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let specs: Vec<String> = if args.is_empty() {
        ["poisson3d:128", "poisson3d27:128", "elasticity2d:1000"]
            .map(String::from)
            .to_vec()
    } else {
        args
    };
    println!("threads: {}", rayon::current_num_threads());
    for spec in &specs {
        let a: CsrMatrix<f64> = generate::from_spec(spec, 0)?;
        let block = if spec.starts_with("elasticity2d") {
            2
        } else {
            1
        };
        let (t_am, node) = if block > 1 {
            let t = median(|| {
                sparse::amalgamate(&a, block).expect("amalgamate");
            });
            (t, sparse::amalgamate(&a, block)?)
        } else {
            (0.0, a.clone())
        };
        let t_st = median(|| {
            sparse::strength_symmetric(&node, 0.0).expect("strength");
        });
        let s = sparse::strength_symmetric(&node, 0.0)?;
        let t_ag = median(|| {
            sparse::aggregate_mis2(&s, 0);
        });
        let (agg, rounds) = sparse::aggregate_mis2_counted(&s, 0);
        println!(
            "cpu {spec}: {} rows, {} nodes; amalgamate (block {block}) {t_am:.3} s, strength \
             {t_st:.3} s, MIS-2 {t_ag:.3} s ({} aggregates, {rounds} rounds)",
            a.nrows(),
            node.nrows(),
            agg.num_aggregates()
        );
        #[cfg(feature = "cuda")]
        gpu(&a, block, &s, &agg)?;
    }
    Ok(())
}

/// The same phases on the GPU (after a warm-up that compiles the kernels), checked equal.
#[cfg(feature = "cuda")]
fn gpu(
    a: &CsrMatrix<f64>,
    block: usize,
    s: &CsrMatrix<f64>,
    want: &sparse::Aggregation,
) -> segsparse::Result<()> {
    use segsparse::sparse::gpu as sg;
    let Ok(g) = segsparse::gpu::Gpu::shared() else {
        return Ok(());
    };
    let da = sg::DeviceCsr::upload(&g, a)?;
    let run = || -> segsparse::Result<(sg::GpuAggregation, usize)> {
        let node = if block > 1 {
            Some(sg::amalgamate(&g, &da, block)?)
        } else {
            None
        };
        let s = match &node {
            Some(n) => sg::strength_symmetric(&g, n, 0.0)?,
            None => sg::strength_symmetric(&g, &da, 0.0)?,
        };
        let nnz = s.nnz;
        Ok((sg::aggregate_mis2(&g, &s, 0)?, nnz))
    };
    run()?;
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..5 {
        let c = Instant::now();
        let r = run()?;
        g.synchronize()?;
        times.push(c.elapsed().as_secs_f64());
        last = Some(r);
    }
    times.sort_by(f64::total_cmp);
    let (agg, nnz) = last.expect("five runs");
    let same = agg.download(&g)? == *want && nnz == s.nnz();
    println!(
        "gpu: amalgamate + strength + MIS-2 {:.2} ms (median of 5), {} rounds, equal to the CPU: {same}",
        times[2] * 1e3,
        agg.rounds
    );
    Ok(())
}
