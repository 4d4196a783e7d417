//! Kass–Miller implicit shallow-water simulation (SIGGRAPH 1990), the application of
//! Sengupta et al. 2007 §4.3: every step is two alternating-direction sweeps, each a batch of
//! tridiagonal solves — one system per grid row, then one per column.
//!
//! ```text
//! cargo run --release --example shallow_water -- --size 128 --steps 200 --frames DIR [--backend cpu|gpu|auto]
//! ```
//! `--size` takes a comma list (`128,256,512`); steps per second are printed for each size
//! beside the paper's 1,207 steps/s at 128² (GeForce 8800 GTX, compute only). PNG frames of the
//! height field go to `DIR/n{size}_frame_{k}.png`.
//!
//! # The model
//!
//! Height `h` over a ground `b`, depth `e = max(h - b, 0)`. Kass & Miller's linearised wave
//! equation `h_tt = g e ∇²h`, implicit in time, gives along one line the symmetric,
//! diagonally dominant system
//! `h_k - λ[(e_{k-1}+e_k)(h_{k-1}-h_k) + (e_k+e_{k+1})(h_{k+1}-h_k)] = rhs_k`, `λ = g Δt²/(2Δx²)`,
//! with `rhs = h¹ + (1-τ)(h¹ - h⁰)` (the previous two heights, τ a small damping). It is stable
//! for any Δt, and dry cells (e = 0) stop the flow: the beach on the right holds the water back.
//! As in their paper, a step solves the rows with that right-hand side, then the columns with
//! the row sweep's result as right-hand side; the depths of both sweeps come from `h¹`.
//!
//! # What runs where
//!
//! `--backend gpu`: everything per step runs on the device — assembling the row systems
//! (`sw_rows_f32`), the batched solve ([`GpuTridiag`], per-block partition method), assembling
//! the column systems transposed (`sw_cols_f32`, coalesced writes, strided reads served from
//! L2), the second batched solve, and the transpose back (`sw_transpose_f32`, a shared-memory
//! tile). The host only queues launches; it synchronises when a frame is written (frame
//! download and PNG encoding are not counted in steps/s) and once at the end (pivot check).
//! `--backend cpu`: the same arithmetic with `tridiag::cpu::thomas_batch_into` (rayon).

use std::path::PathBuf;
use std::time::Instant;

use segsparse::tridiag::{cpu, Tridiagonal};

const G: f32 = 9.81;
const DT: f32 = 0.15;
const TAU: f32 = 0.005;
const REST: f32 = 1.0;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Backend {
    Cpu,
    Gpu,
    Auto,
}

struct Args {
    sizes: Vec<usize>,
    steps: usize,
    frames: Option<PathBuf>,
    backend: Backend,
    frame_every: usize,
}

fn usage() -> String {
    "usage: shallow_water [--size N[,N..]] [--steps S] [--frames DIR] [--frame-every K] [--backend cpu|gpu|auto]".into()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        sizes: vec![128],
        steps: 200,
        frames: None,
        backend: Backend::Auto,
        frame_every: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| format!("{k} needs a value\n{}", usage()))
        };
        match k.as_str() {
            "--size" => {
                a.sizes = val()?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<usize>()
                            .map_err(|e| format!("--size {s}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
                if a.sizes.iter().any(|&n| n < 8) {
                    return Err("--size must be at least 8".into());
                }
            }
            "--steps" => a.steps = val()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--frames" => a.frames = Some(PathBuf::from(val()?)),
            "--frame-every" => {
                a.frame_every = val()?.parse().map_err(|e| format!("--frame-every: {e}"))?
            }
            "--backend" => {
                a.backend = match val()?.as_str() {
                    "cpu" => Backend::Cpu,
                    "gpu" => Backend::Gpu,
                    "auto" => Backend::Auto,
                    o => return Err(format!("--backend {o}: expected cpu, gpu or auto")),
                }
            }
            "-h" | "--help" => return Err(usage()),
            o => return Err(format!("unknown argument {o}\n{}", usage())),
        }
    }
    if a.frame_every == 0 {
        a.frame_every = (a.steps / 10).max(1);
    }
    Ok(a)
}

/// The initial state: ground (flat, a submerged ridge, a beach rising above the water on the
/// right) and water at rest with a raised drop.
fn initial(n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut ground = vec![0f32; n * n];
    let mut h = vec![0f32; n * n];
    let nf = n as f32;
    for i in 0..n {
        for j in 0..n {
            let (y, x) = (i as f32 / nf, j as f32 / nf);
            let beach = ((x - 0.75) / 0.25).max(0.0) * 1.4;
            let ridge = 0.5 * (-((y - 0.7).powi(2) + (x - 0.35).powi(2)) / 0.004).exp();
            let gnd = beach.max(ridge);
            ground[i * n + j] = gnd;
            let drop = 0.5 * (-((y - 0.35).powi(2) + (x - 0.3).powi(2)) / 0.003).exp();
            h[i * n + j] = (REST + drop).max(gnd);
        }
    }
    (ground, h)
}

fn lambda() -> f32 {
    G * DT * DT / 2.0
}

fn write_frame(
    dir: &std::path::Path,
    n: usize,
    k: usize,
    h: &[f32],
    ground: &[f32],
) -> Result<(), String> {
    let scale = (512 / n).max(1) as u32;
    let size = n as u32 * scale;
    // RGB8, row-major.
    let mut img = vec![0u8; 3 * (size * size) as usize];
    // Colour scale from this frame's largest wave (at least 1 cm), so that spreading, weakening
    // waves stay visible.
    let amp = h
        .iter()
        .zip(ground)
        .filter(|(h, g)| *h - *g > 1e-3)
        .fold(0.01f32, |m, (h, _)| m.max((h - REST).abs()));
    for i in 0..n {
        for j in 0..n {
            let idx = i * n + j;
            let depth = h[idx] - ground[idx];
            let px = if depth <= 1e-3 {
                let s = (ground[idx] * 60.0).min(80.0) as u8;
                [170 + s / 2, 150 + s / 2, 100 + s / 3]
            } else {
                // Height above rest, plus a fake light from the slope, so crests show.
                let v = ((h[idx] - REST) / amp).clamp(-1.0, 1.0);
                let jm = if j > 0 { idx - 1 } else { idx };
                let jp = if j + 1 < n { idx + 1 } else { idx };
                let im = if i > 0 { idx - n } else { idx };
                let ip = if i + 1 < n { idx + n } else { idx };
                let slope =
                    ((h[jp] - h[jm] + h[ip] - h[im]) * n as f32 / (8.0 * amp)).clamp(-1.0, 1.0);
                let l = 0.5 * v + 0.35 * slope;
                let ch = |base: f32, amp: f32| (base + amp * l).clamp(0.0, 255.0) as u8;
                [ch(40.0, 90.0), ch(95.0, 110.0), ch(175.0, 80.0)]
            };
            for dy in 0..scale {
                for dx in 0..scale {
                    let at = 3 * ((i as u32 * scale + dy) * size + j as u32 * scale + dx) as usize;
                    img[at..at + 3].copy_from_slice(&px);
                }
            }
        }
    }
    let path = dir.join(format!("n{n}_frame_{k:04}.png"));
    let fail = |e: &dyn std::fmt::Display| format!("writing {}: {e}", path.display());
    let file = std::fs::File::create(&path).map_err(|e| fail(&e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), size, size);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(|e| fail(&e))?;
    w.write_image_data(&img).map_err(|e| fail(&e))
}

/// One step's state on the host (CPU backend).
struct CpuSim {
    n: usize,
    ground: Vec<f32>,
    h0: Vec<f32>,
    h1: Vec<f32>,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    d: Vec<f32>,
    x: Vec<f32>,
}

impl CpuSim {
    fn new(n: usize) -> Self {
        let (ground, h) = initial(n);
        let z = vec![0f32; n * n];
        CpuSim {
            n,
            ground,
            h0: h.clone(),
            h1: h,
            a: z.clone(),
            b: z.clone(),
            c: z.clone(),
            d: z.clone(),
            x: z,
        }
    }

    fn depth(&self, idx: usize) -> f32 {
        (self.h1[idx] - self.ground[idx]).max(0.0)
    }

    fn step(&mut self) -> segsparse::Result<()> {
        let (n, lam) = (self.n, lambda());
        // Rows.
        for i in 0..n {
            for j in 0..n {
                let idx = i * n + j;
                let e = self.depth(idx);
                let lo = if j > 0 {
                    -lam * (self.depth(idx - 1) + e)
                } else {
                    0.0
                };
                let up = if j + 1 < n {
                    -lam * (e + self.depth(idx + 1))
                } else {
                    0.0
                };
                self.a[idx] = lo;
                self.c[idx] = up;
                self.b[idx] = 1.0 - lo - up;
                self.d[idx] = self.h1[idx] + (1.0 - TAU) * (self.h1[idx] - self.h0[idx]);
            }
        }
        let a = Tridiagonal::new(&self.a[..], &self.b[..], &self.c[..]);
        cpu::thomas_batch_into(n, a, &self.d, &mut self.x)?;
        // Columns (stored column-major: system j, element i).
        for j in 0..n {
            for i in 0..n {
                let (o, idx) = (j * n + i, i * n + j);
                let e = self.depth(idx);
                let lo = if i > 0 {
                    -lam * (self.depth(idx - n) + e)
                } else {
                    0.0
                };
                let up = if i + 1 < n {
                    -lam * (e + self.depth(idx + n))
                } else {
                    0.0
                };
                self.a[o] = lo;
                self.c[o] = up;
                self.b[o] = 1.0 - lo - up;
                self.d[o] = self.x[idx];
            }
        }
        let a = Tridiagonal::new(&self.a[..], &self.b[..], &self.c[..]);
        cpu::thomas_batch_into(n, a, &self.d, &mut self.x)?;
        std::mem::swap(&mut self.h0, &mut self.h1);
        for i in 0..n {
            for j in 0..n {
                self.h1[i * n + j] = self.x[j * n + i];
            }
        }
        Ok(())
    }
}

#[cfg(feature = "cuda")]
mod gpu_sim {
    use std::sync::Arc;

    use segsparse::gpu::{DeviceBuffer, Gpu, PushKernelArg};
    use segsparse::tridiag::gpu::GpuTridiag;
    use segsparse::tridiag::{TridiagAlgorithm, Tridiagonal, SHALLOW_WATER_KERNELS};

    pub struct GpuSim {
        pub n: usize,
        pub g: Arc<Gpu>,
        solver: GpuTridiag<f32>,
        rows: cudarc::driver::CudaFunction,
        cols: cudarc::driver::CudaFunction,
        transpose: cudarc::driver::CudaFunction,
        pub ground: DeviceBuffer<f32>,
        h0: DeviceBuffer<f32>,
        pub h1: DeviceBuffer<f32>,
        h2: DeviceBuffer<f32>,
        a: DeviceBuffer<f32>,
        b: DeviceBuffer<f32>,
        c: DeviceBuffer<f32>,
        d: DeviceBuffer<f32>,
        x: DeviceBuffer<f32>,
    }

    impl GpuSim {
        pub fn new(g: &Arc<Gpu>, n: usize) -> segsparse::Result<Self> {
            let (ground, h) = super::initial(n);
            let f = |name: &str| g.function(&SHALLOW_WATER_KERNELS, name, &[]);
            Ok(GpuSim {
                n,
                g: g.clone(),
                solver: GpuTridiag::new(g)?,
                rows: f("sw_rows_f32")?,
                cols: f("sw_cols_f32")?,
                transpose: f("sw_transpose_f32")?,
                ground: g.upload(&ground)?,
                h0: g.upload(&h)?,
                h1: g.upload(&h)?,
                h2: g.zeros(n * n)?,
                a: g.zeros(n * n)?,
                b: g.zeros(n * n)?,
                c: g.zeros(n * n)?,
                d: g.zeros(n * n)?,
                x: g.zeros(n * n)?,
            })
        }

        /// Queues one step; no host synchronisation.
        pub fn step(&mut self) -> segsparse::Result<()> {
            let n = self.n as u32;
            let cells = n * n;
            let (lam, tau) = (super::lambda(), super::TAU);
            let cfg = Gpu::cfg(cells.div_ceil(256), 256, 0);
            let s = self.g.stream().clone();
            let mut l = s.launch_builder(&self.rows);
            l.arg(&self.h1)
                .arg(&self.h0)
                .arg(&self.ground)
                .arg(&n)
                .arg(&lam)
                .arg(&tau)
                .arg(&mut self.a)
                .arg(&mut self.b)
                .arg(&mut self.c)
                .arg(&mut self.d);
            // SAFETY: sw_rows_f32(const float* h1, h0, ground, u32 n, float lam, float tau,
            // float* a, b, c, d); every buffer holds n*n floats.
            unsafe { l.launch(cfg) }.map_err(|e| Gpu::launch_error("sw_rows_f32", e))?;
            let n_ = self.n;
            let a = Tridiagonal::new(&self.a, &self.b, &self.c);
            self.solver
                .queue_batch(n_, n_, a, &self.d, &mut self.x, TridiagAlgorithm::Auto)?;
            let mut l = s.launch_builder(&self.cols);
            l.arg(&self.x)
                .arg(&self.h1)
                .arg(&self.ground)
                .arg(&n)
                .arg(&lam)
                .arg(&mut self.a)
                .arg(&mut self.b)
                .arg(&mut self.c)
                .arg(&mut self.d);
            // SAFETY: sw_cols_f32(const float* hx, h1, ground, u32 n, float lam, float* a, b, c,
            // d); every buffer holds n*n floats.
            unsafe { l.launch(cfg) }.map_err(|e| Gpu::launch_error("sw_cols_f32", e))?;
            let a = Tridiagonal::new(&self.a, &self.b, &self.c);
            self.solver
                .queue_batch(n_, n_, a, &self.d, &mut self.x, TridiagAlgorithm::Auto)?;
            let mut l = s.launch_builder(&self.transpose);
            l.arg(&self.x).arg(&n).arg(&mut self.h2);
            let tcfg = cudarc::driver::LaunchConfig {
                grid_dim: (n.div_ceil(32), n.div_ceil(32), 1),
                block_dim: (32, 8, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: sw_transpose_f32(const float* in, u32 n, float* out); both n*n floats;
            // the kernel's tile is static shared memory.
            unsafe { l.launch(tcfg) }.map_err(|e| Gpu::launch_error("sw_transpose_f32", e))?;
            // Rotate: h0 <- h1 <- h2.
            std::mem::swap(&mut self.h0, &mut self.h1);
            std::mem::swap(&mut self.h1, &mut self.h2);
            Ok(())
        }

        pub fn check(&mut self) -> segsparse::Result<()> {
            self.solver.check()
        }
    }
}

fn run_size(args: &Args, n: usize, use_gpu: bool) -> Result<(), String> {
    let e = |e: segsparse::Error| e.to_string();
    let frames = |k: usize| args.frames.is_some() && (k % args.frame_every == 0 || k == args.steps);
    let mut compute = 0f64;
    let (h_first, h_last);
    #[cfg(feature = "cuda")]
    if use_gpu {
        let g = segsparse::gpu::Gpu::shared().map_err(e)?;
        let mut sim = gpu_sim::GpuSim::new(&g, n).map_err(e)?;
        let ground = g.download(&sim.ground).map_err(e)?;
        // Warm-up: compile the kernels outside the timing (on a copy, then start over).
        sim.step().map_err(e)?;
        g.synchronize().map_err(e)?;
        let mut sim = gpu_sim::GpuSim::new(&g, n).map_err(e)?;
        h_first = g.download(&sim.h1).map_err(e)?;
        if let Some(dir) = &args.frames {
            write_frame(dir, n, 0, &h_first, &ground)?;
        }
        let mut k = 0;
        while k < args.steps {
            let t = Instant::now();
            loop {
                sim.step().map_err(e)?;
                k += 1;
                if k == args.steps || frames(k) {
                    break;
                }
            }
            g.synchronize().map_err(e)?;
            compute += t.elapsed().as_secs_f64();
            if frames(k) {
                let h = g.download(&sim.h1).map_err(e)?;
                write_frame(args.frames.as_ref().unwrap(), n, k, &h, &ground)?;
            }
        }
        sim.check().map_err(e)?;
        h_last = g.download(&sim.h1).map_err(e)?;
        report(
            n,
            args.steps,
            compute,
            &format!("GPU ({})", g.name()),
            &h_first,
            &h_last,
        );
        return Ok(());
    }
    let _ = use_gpu;
    let mut sim = CpuSim::new(n);
    h_first = sim.h1.clone();
    if let Some(dir) = &args.frames {
        write_frame(dir, n, 0, &h_first, &sim.ground)?;
    }
    for k in 1..=args.steps {
        let t = Instant::now();
        sim.step().map_err(e)?;
        compute += t.elapsed().as_secs_f64();
        if frames(k) {
            write_frame(args.frames.as_ref().unwrap(), n, k, &sim.h1, &sim.ground)?;
        }
    }
    h_last = sim.h1.clone();
    let who = format!("CPU ({} threads)", rayon::current_num_threads());
    report(n, args.steps, compute, &who, &h_first, &h_last);
    Ok(())
}

fn report(n: usize, steps: usize, secs: f64, who: &str, h0: &[f32], h1: &[f32]) {
    let vol = |h: &[f32]| h.iter().map(|&v| v as f64).sum::<f64>();
    let (lo, hi) = h1
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    println!(
        "{n}x{n}: {steps} steps in {:.3} s on {who}: {:.0} steps/s (paper: 1,207 steps/s at 128x128, \
         GeForce 8800 GTX, compute only); height range [{lo:.3}, {hi:.3}], volume change {:+.2e}",
        secs,
        steps as f64 / secs,
        (vol(h1) - vol(h0)) / vol(h0)
    );
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(m) => {
            eprintln!("{m}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Some(dir) = &args.frames {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("creating {}: {e}", dir.display());
            return std::process::ExitCode::FAILURE;
        }
    }
    let gpu_ok = {
        #[cfg(feature = "cuda")]
        {
            match segsparse::gpu::Gpu::shared() {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err::<(), String>("built without the cuda feature".into())
        }
    };
    let use_gpu = match (args.backend, &gpu_ok) {
        (Backend::Cpu, _) => false,
        (Backend::Gpu, Ok(())) | (Backend::Auto, Ok(())) => true,
        (Backend::Gpu, Err(e)) => {
            eprintln!("--backend gpu: {e}");
            return std::process::ExitCode::FAILURE;
        }
        (Backend::Auto, Err(e)) => {
            eprintln!("no GPU ({e}); running on the CPU");
            false
        }
    };
    for &n in &args.sizes {
        if let Err(m) = run_size(&args, n, use_gpu) {
            eprintln!("size {n}: {m}");
            return std::process::ExitCode::FAILURE;
        }
    }
    std::process::ExitCode::SUCCESS
}
