//! One measurement as a JSON line, the format the peer harness (`benches/prims/cub_peers.cu`)
//! prints too, so `benches/prims/merge.py` joins the tools' rows on
//! `(op, variant, dtype, n, segment)` into `benches/results/scan-vs-cub.jsonl`.
//! Shared by `scan-bench` and `prims-bench` (the latter includes this file by path).

use serde::Serialize;
use serde_json::Value;

/// Output format of the benchmark tools.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Markdown tables for benches/results/*.md.
    Markdown,
    /// One JSON object per measurement (for benches/prims/merge.py).
    Json,
}

/// A timed measurement of segsparse.
#[derive(Serialize, Debug)]
pub struct Record<'a> {
    /// Always "segsparse" (the peer harness writes "cub").
    pub tool: &'static str,
    /// scan | segscan | segreduce | sort | compact | copy.
    pub op: &'a str,
    /// inclusive / exclusive (scans), plus (segreduce), keys / pairs (sort), flagged / if (compact).
    pub variant: &'a str,
    /// f32, f64, u32, u64.
    pub dtype: &'a str,
    /// Elements (keys for sorts).
    pub n: usize,
    /// Segment length, "random", or null.
    pub segment: Value,
    /// Median microseconds per call.
    pub us: f64,
    /// The GPU's name.
    pub device: &'a str,
    /// Anything else worth keeping (direction, algorithm, GB/s, fraction of copy, ...).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl Record<'_> {
    /// Prints the record as one line of JSON on stdout.
    pub fn print(&self) {
        // Serializing plain strings and numbers cannot fail.
        println!("{}", serde_json::to_string(self).unwrap_or_default());
    }
}

/// The segment field: a length, "random", or null.
pub fn segment(len: Option<usize>, random: bool) -> Value {
    match (len, random) {
        (_, true) => Value::from("random"),
        (Some(l), false) => Value::from(l),
        (None, false) => Value::Null,
    }
}

/// Extra fields from `(name, value)` pairs.
pub fn extra<const N: usize>(kv: [(&str, Value); N]) -> serde_json::Map<String, Value> {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Exits with one plain sentence when no GPU can be used (rather than a debug-printed error),
/// and otherwise passes the error on.
pub fn gpu_or_exit<T>(tool: &str, r: segsparse::Result<T>) -> anyhow::Result<T> {
    match r {
        Ok(g) => Ok(g),
        Err(e) if e.is_cuda_unavailable() => {
            eprintln!("{tool} measures the GPU and found none it can use here ({e}).");
            std::process::exit(1)
        }
        Err(e) => Err(e.into()),
    }
}
