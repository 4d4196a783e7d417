//! Fuzzing of the Matrix Market reader on stable Rust: a mutation loop over the corpus files.
//!
//! ```text
//! cargo run --release -p segsparse-tools --example fuzz_mtx -- --seconds 60            # what CI runs
//! cargo run --release -p segsparse-tools --example fuzz_mtx -- --inputs 10000000 --seed 7
//! ```
//!
//! Every input is a corpus file (`matrices/small`, `matrices/bad` and the compressed SuiteSparse
//! files of at most 2 KiB) after one to eight random mutations: bytes flipped, inserted or deleted,
//! ranges duplicated or dropped, lines swapped or spliced in from another file, numbers replaced
//! by awkward ones (0, −1, 2^32 − 1, 10^9, 10^20, NaN, …), banner words swapped, the file cut
//! short. Each input is read as an `f64` matrix and, in turn, as an `f32` matrix, a vector or a
//! header, and three things are checked:
//!
//! * **no panic** (each read runs under `catch_unwind`);
//! * **no hang**: no input takes more than 1 s (a watchdog thread aborts the run, saving the input,
//!   if one takes 10 s);
//! * **no allocation beyond what the declared sizes need**: a counting global allocator records
//!   the peak of live heap bytes during each read, which must stay below
//!   `SLACK + 3·(8·(rows + 1) + (12 + 2·sizeof(T))·min(2·entries, 2·lines))`: the reader's own
//!   accounting (row pointers, triplets and their CSR copy, see `segsparse::io`), with a factor 3
//!   for a growing `Vec`'s spare capacity and reallocation, capped by the entries that the input
//!   can actually hold, plus [`SLACK`] for the line buffer, the gzip state and the reservation of
//!   `MAX_RESERVE` entries that a header may trigger.
//!
//! The reader runs under a 64 MiB budget ([`segsparse::io::ReadOptions`]), so that mutated size
//! lines are refused quickly rather than filling row pointers of 10^8 rows; the budget itself is
//! part of what is tested (no read may exceed it by more than the slack). Findings (inputs that
//! panicked, took over 1 s, or allocated too much) are written to `--findings DIR` (default
//! `target/fuzz-findings`) and the exit status is 1 when there is any.

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use segsparse::io::{self, ReadOptions, MAX_RESERVE};

// ---------------------------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------------------------

/// The system allocator, counting live bytes and their peak (reset before each read).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    let now = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: forwards every call to `System` unchanged; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            note_alloc(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(l);
        if !p.is_null() {
            note_alloc(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            // Old and new block may both be live during the copy: count the new one first.
            note_alloc(new);
            LIVE.fetch_sub(l.size(), Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes of heap that any read may use whatever the header says: the 1 MiB line buffer (it may
/// sit at up to twice that while growing), the buffered reader and gzip state (~200 KiB), the
/// up-front reservation of `MAX_RESERVE` triplets of f64 (16 B each, 64 MiB) that a header
/// declaring many entries triggers, and the error messages.
const SLACK: usize = (4 << 20) + MAX_RESERVE * 16;

/// Budget the reader runs under during fuzzing.
const BUDGET: u64 = 64 << 20;

// ---------------------------------------------------------------------------------------------
// Corpus and mutations
// ---------------------------------------------------------------------------------------------

fn corpus_root() -> PathBuf {
    // The repository root's corpus (this example belongs to tools/, one level down).
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrices");
    if manifest.is_dir() {
        manifest
    } else {
        PathBuf::from("matrices")
    }
}

/// Every plain file of at most 64 KiB (compressed: 2 KiB) under `matrices/`, `matrices/small/` and `matrices/bad/`.
fn load_corpus(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in [root.to_path_buf(), root.join("small"), root.join("bad")] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for p in files {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if !p.is_file() || !(name.ends_with(".mtx") || name.ends_with(".mtx.gz")) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&p) {
                // Small files keep the loop fast (a mutated gzip stream is mostly rejected by
                // the decoder, so a few small compressed files cover that path).
                let limit = if name.ends_with(".gz") {
                    2 << 10
                } else {
                    64 << 10
                };
                if bytes.len() <= limit {
                    out.push((p.display().to_string(), bytes));
                }
            }
        }
    }
    out
}

const AWKWARD: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "+3",
    "4294967295",
    "4294967296",
    "1000000000",
    "100000000",
    "18446744073709551615",
    "99999999999999999999999",
    "1e308",
    "-1e-320",
    "nan",
    "-inf",
    "Infinity",
    "1.5D+03",
    "0x10",
    "",
    "%",
    "%%MatrixMarket",
    "matrix",
    "array",
    "coordinate",
    "pattern",
    "integer",
    "complex",
    "symmetric",
    "skew-symmetric",
    "hermitian",
    "general",
    "\u{feff}",
    "\r",
    "é",
];

fn mutate(rng: &mut ChaCha8Rng, input: &mut Vec<u8>, corpus: &[(String, Vec<u8>)]) {
    let n = input.len();
    let pos = |rng: &mut ChaCha8Rng, n: usize| if n == 0 { 0 } else { rng.gen_range(0..=n) };
    match rng.gen_range(0..11) {
        0 if n > 0 => {
            let i = rng.gen_range(0..n);
            input[i] ^= 1 << rng.gen_range(0..8);
        }
        1 => {
            let i = pos(rng, n);
            let b = *b"0123456789 \n-+.eE%"
                .get(rng.gen_range(0..19))
                .unwrap_or(&rng.gen::<u8>());
            input.insert(i, b);
        }
        2 if n > 0 => {
            let i = rng.gen_range(0..n);
            let len = rng.gen_range(1..=(n - i).min(64));
            input.drain(i..i + len);
        }
        3 if n > 0 => {
            let i = rng.gen_range(0..n);
            let len = rng.gen_range(1..=(n - i).min(256));
            let chunk = input[i..i + len].to_vec();
            let at = pos(rng, n);
            input.splice(at..at, chunk);
        }
        4 => input.truncate(pos(rng, n)),
        5 | 6 => {
            // Replace one whitespace-separated token by an awkward one.
            let starts: Vec<usize> = (0..n)
                .filter(|&i| {
                    !input[i].is_ascii_whitespace()
                        && (i == 0 || input[i - 1].is_ascii_whitespace())
                })
                .collect();
            if let Some(&s) = starts.get(rng.gen_range(0..starts.len().max(1))) {
                let e = (s..n)
                    .find(|&i| input[i].is_ascii_whitespace())
                    .unwrap_or(n);
                let w = AWKWARD[rng.gen_range(0..AWKWARD.len())].as_bytes().to_vec();
                input.splice(s..e, w);
            }
        }
        7 => {
            // Swap two lines.
            let lines: Vec<Vec<u8>> = input.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            if lines.len() > 1 {
                let mut lines = lines;
                let (a, b) = (rng.gen_range(0..lines.len()), rng.gen_range(0..lines.len()));
                lines.swap(a, b);
                *input = lines.join(&b'\n');
            }
        }
        8 => {
            // Splice in a line range of another corpus file.
            let other = &corpus[rng.gen_range(0..corpus.len())].1;
            let lines: Vec<&[u8]> = other.split(|&b| b == b'\n').collect();
            let a = rng.gen_range(0..lines.len());
            let b = (a + rng.gen_range(1..8)).min(lines.len());
            let mut chunk = lines[a..b].join(&b'\n');
            chunk.push(b'\n');
            let at = pos(rng, n);
            input.splice(at..at, chunk);
        }
        9 => {
            // Repeat the last line many times (too many entries, long files).
            let last = input
                .split(|&b| b == b'\n')
                .rfind(|l| !l.is_empty())
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            for _ in 0..rng.gen_range(1..200) {
                input.extend_from_slice(&last);
                input.push(b'\n');
            }
        }
        _ => {
            // A random byte anywhere.
            let i = pos(rng, n);
            input.insert(i, rng.gen());
        }
    }
    // Keep inputs small so that the loop stays fast and the bound meaningful.
    input.truncate(256 << 10);
}

// ---------------------------------------------------------------------------------------------
// One input
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Stats {
    inputs: u64,
    reads: u64,
    ok: u64,
    errors: u64,
    panics: u64,
    slow: u64,
    over_alloc: u64,
    max_peak: usize,
    max_secs: f64,
}

/// What the declared sizes need for entries of `sz`-byte values (see the module docs), times 3;
/// 0 when the header does not parse (the reader then allocates no more than the slack).
fn declared_need(input: &[u8], sz: usize) -> usize {
    let Ok(h) = io::read_header_from(input, "<fuzz>") else {
        return 0;
    };
    let lines = input.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    // An array file's `entries` is rows·cols (every value listed), a coordinate file's the
    // third number of the size line; either way no more than two entries per line are stored.
    let stored = h.entries.saturating_mul(2).min(2 * lines);
    let vector = if h.nrows == 1 || h.ncols == 1 {
        h.nrows.saturating_mul(h.ncols).saturating_mul(sz as u64)
    } else {
        0
    };
    let need = (8 * (h.nrows + 1))
        .max(vector)
        .saturating_add(stored.saturating_mul(12 + 2 * sz as u64));
    need.min(BUDGET * 2).saturating_mul(3) as usize
}

/// One way of reading an input: its name, the value size it stores, the read itself.
type Read<'a> = (&'static str, usize, &'a dyn Fn(&[u8]) -> bool);

fn run_one(input: &[u8], stats: &mut Stats, findings: &Path, tag: &str) {
    let opts = ReadOptions {
        max_bytes: BUDGET,
        ..Default::default()
    };
    let reads: [Read; 4] = [
        ("f64", 8, &|b| {
            io::read_matrix_market_from_with::<f64, _>(b, "<fuzz>", &opts).is_ok()
        }),
        ("f32", 4, &|b| {
            io::read_matrix_market_from_with::<f32, _>(b, "<fuzz>", &opts).is_ok()
        }),
        ("vector", 8, &|b| {
            io::read_vector_from_with::<f64, _>(b, "<fuzz>", &opts).is_ok()
        }),
        ("header", 0, &|b| io::read_header_from(b, "<fuzz>").is_ok()),
    ];
    stats.inputs += 1;
    // Every input is read as an f64 matrix, and in turn as an f32 matrix, a vector or a header.
    let other = 1 + (stats.inputs % 3) as usize;
    for (what, sz, read) in [reads[0], reads[other]] {
        let bound = SLACK + input.len() + declared_need(input, sz.max(1));
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        let t = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| read(input)));
        let secs = t.elapsed().as_secs_f64();
        let peak = PEAK.load(Relaxed).saturating_sub(base);
        stats.reads += 1;
        stats.max_peak = stats.max_peak.max(peak);
        stats.max_secs = stats.max_secs.max(secs);
        let mut finding = None;
        match r {
            Ok(true) => stats.ok += 1,
            Ok(false) => stats.errors += 1,
            Err(_) => {
                stats.panics += 1;
                finding = Some("panic");
            }
        }
        if secs > 1.0 {
            stats.slow += 1;
            finding = Some("slow");
        }
        if peak > bound {
            stats.over_alloc += 1;
            finding = Some("alloc");
        }
        if let Some(kind) = finding {
            let _ = std::fs::create_dir_all(findings);
            let p = findings.join(format!("{kind}-{what}-{tag}.mtx"));
            let _ = std::fs::write(&p, input);
            eprintln!(
                "FINDING {kind} reading {what}: {:.3} s, peak {peak} B (bound {bound} B); input saved to {}",
                secs,
                p.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

struct Args {
    seconds: Option<f64>,
    inputs: Option<u64>,
    seed: u64,
    findings: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: None,
        inputs: None,
        seed: 1,
        findings: PathBuf::from("target/fuzz-findings"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => a.seconds = Some(val()?.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--inputs" => a.inputs = Some(val()?.parse().map_err(|e| format!("--inputs: {e}"))?),
            "--seed" => a.seed = val()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--findings" => a.findings = PathBuf::from(val()?),
            "-h" | "--help" => {
                return Err("fuzz_mtx: mutation fuzzing of the Matrix Market reader\n\
                            usage: fuzz_mtx [--seconds S] [--inputs N] [--seed S] [--findings DIR]\n\
                            (default: 60 seconds)"
                    .into())
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    if a.seconds.is_none() && a.inputs.is_none() {
        a.seconds = Some(60.0);
    }
    Ok(a)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(m) => {
            eprintln!("{m}");
            return std::process::ExitCode::from(2);
        }
    };
    let corpus = load_corpus(&corpus_root());
    if corpus.is_empty() {
        eprintln!(
            "fuzz_mtx: no corpus files found under {}",
            corpus_root().display()
        );
        return std::process::ExitCode::from(2);
    }
    // Panics are expected to be caught and counted; keep the default hook's output short.
    std::panic::set_hook(Box::new(|info| eprintln!("panic: {info}")));

    // Watchdog: an input that runs for 10 s is a hang; save it and stop.
    let current = Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let started_at = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    {
        let (current, started_at, findings) =
            (current.clone(), started_at.clone(), args.findings.clone());
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let s = started_at.load(Relaxed);
            if s != 0 && epoch.elapsed().as_millis() as u64 - s > 10_000 {
                let _ = std::fs::create_dir_all(&findings);
                let p = findings.join("hang.mtx");
                if let Ok(c) = current.lock() {
                    let _ = std::fs::write(&p, &*c);
                }
                eprintln!(
                    "FINDING hang: one input ran for 10 s; saved to {}",
                    p.display()
                );
                std::process::exit(1);
            }
        });
    }

    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut stats = Stats::default();
    let start = Instant::now();
    let mut next_report = 10.0;
    let mut input = Vec::new();
    loop {
        if args.inputs.is_some_and(|n| stats.inputs >= n)
            || args
                .seconds
                .is_some_and(|s| start.elapsed().as_secs_f64() >= s)
        {
            break;
        }
        let (_, base) = &corpus[rng.gen_range(0..corpus.len())];
        input.clear();
        input.extend_from_slice(base);
        for _ in 0..rng.gen_range(1..=8) {
            mutate(&mut rng, &mut input, &corpus);
        }
        if let Ok(mut c) = current.lock() {
            c.clone_from(&input);
        }
        started_at.store(epoch.elapsed().as_millis().max(1) as u64, Relaxed);
        let tag = format!("{}-{}", args.seed, stats.inputs);
        run_one(&input, &mut stats, &args.findings, &tag);
        started_at.store(0, Relaxed);
        let el = start.elapsed().as_secs_f64();
        if el >= next_report {
            eprintln!(
                "{:>8.0} s  {:>10} inputs  {:>8.0}/s  panics {}  slow {}  over-alloc {}",
                el,
                stats.inputs,
                stats.inputs as f64 / el,
                stats.panics,
                stats.slow,
                stats.over_alloc
            );
            next_report += if el < 60.0 { 10.0 } else { 300.0 };
        }
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "fuzz_mtx: seed {}, {} corpus files, {} inputs ({} reads: {} ok, {} refused with an error) in {:.0} s ({:.0} inputs/s)\n\
         findings: {} panics, {} slow (> 1 s), {} allocations beyond the declared sizes' need\n\
         slowest read {:.3} s, largest peak heap of one read {:.1} MiB (budget {} MiB)",
        args.seed,
        corpus.len(),
        stats.inputs,
        stats.reads,
        stats.ok,
        stats.errors,
        el,
        stats.inputs as f64 / el,
        stats.panics,
        stats.slow,
        stats.over_alloc,
        stats.max_secs,
        stats.max_peak as f64 / (1 << 20) as f64,
        BUDGET >> 20
    );
    if stats.panics + stats.slow + stats.over_alloc > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
