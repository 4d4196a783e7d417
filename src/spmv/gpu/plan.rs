//! A measured SpMV choice: [`SpmvPlan::tune`] times each candidate kernel on the device matrix a
//! few times and keeps the fastest, cached per pattern fingerprint (in this process and in the
//! kernel cache directory), so a matrix of a pattern already tuned costs nothing.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::{GpuCsr, GpuScalar, SpmvAlgorithm};
use crate::error::Result;

/// Products a solve may make for [`GpuCsr::prepare_for`] to tune a pattern it has not seen
/// before. Tuning cost 26–240 products' time on an H100 (2026-11-25, 44 instances of 2–218 M
/// entries; up to 710 with rows of millions of entries), so 2 % of 50,000 products bounds it.
/// A solve's iteration limit only bounds its products (a default solve that converges in a few
/// hundred iterations would pay tuning many times over), so below this budget a solve keeps the
/// rule's choice unless the pattern was tuned before ([`GpuCsr::tune`], cached): a code that
/// solves on one pattern many times tunes it once itself. The choice never changes between two
/// solves of one process on their own, so repeated solves stay bitwise reproducible.
pub const TUNE_MIN_PRODUCTS: usize = 50_000;

/// Timed batches per candidate; the fastest batch counts.
const ROUNDS: usize = 3;

/// Shortest batch, seconds of device time (a batch repeats the product to last this long, so
/// the event timer's resolution does not decide between kernels of a few microseconds).
const MIN_BATCH_S: f64 = 40e-6;

/// A candidate slower than this multiple of the best so far after one call is not timed further.
const DROP_FACTOR: f64 = 3.0;

/// A candidate replaces the rule's choice only when it is faster by more than this fraction (so
/// that timing noise does not flip between near-equal kernels).
const MARGIN: f64 = 0.02;

/// What [`SpmvPlan::tune`] decided for one matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct SpmvPlan {
    /// The kernel `Auto` runs from now on for this matrix.
    pub algorithm: SpmvAlgorithm,
    /// What the statistics rule chose at upload.
    pub rule: SpmvAlgorithm,
    /// The pattern's fingerprint (see [`GpuCsr::fingerprint`]).
    pub fingerprint: u64,
    /// Seconds per product of each timed candidate (empty when the decision came from a cache).
    pub timings: Vec<(SpmvAlgorithm, f64)>,
    /// True when the decision came from the in-process or on-disk cache (nothing was timed).
    pub cached: bool,
    /// Wall seconds the tuning took (timing and synchronisation included).
    pub seconds: f64,
}

/// Encodes an algorithm (not `Auto`) in a word, for the atomic choice of a [`GpuCsr`] and the
/// on-disk cache.
pub(super) fn encode(a: SpmvAlgorithm) -> u32 {
    match a {
        SpmvAlgorithm::Auto | SpmvAlgorithm::Fused => 1,
        SpmvAlgorithm::FusedLookback => 2,
        SpmvAlgorithm::Rows => 3,
        SpmvAlgorithm::PaperSegscan => 4,
        SpmvAlgorithm::Vector { lanes } => 0x100 | lanes,
    }
}

/// The inverse of [`encode`]; `None` for a word no algorithm encodes to.
pub(super) fn decode(w: u32) -> Option<SpmvAlgorithm> {
    Some(match w {
        1 => SpmvAlgorithm::Fused,
        2 => SpmvAlgorithm::FusedLookback,
        3 => SpmvAlgorithm::Rows,
        4 => SpmvAlgorithm::PaperSegscan,
        w if w & !0x3f == 0x100 && (w & 0x3f) <= 32 => {
            let lanes = w & 0x3f;
            if lanes != 0 && !lanes.is_power_of_two() {
                return None;
            }
            SpmvAlgorithm::Vector { lanes }
        }
        _ => return None,
    })
}

type Key = (u64, usize, String);

fn memory() -> &'static Mutex<HashMap<Key, SpmvAlgorithm>> {
    static PLANS: OnceLock<Mutex<HashMap<Key, SpmvAlgorithm>>> = OnceLock::new();
    PLANS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The on-disk entry of a key: `<cache dir>/spmv-plans/<hash>` holding the encoded algorithm.
fn disk_path(key: &Key) -> Option<std::path::PathBuf> {
    use std::hash::{Hash, Hasher};
    let dir = crate::gpu::disk_cache::cache_dir()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (key, env!("CARGO_PKG_VERSION")).hash(&mut h);
    Some(dir.join("spmv-plans").join(format!("{:016x}", h.finish())))
}

fn disk_load(key: &Key) -> Option<SpmvAlgorithm> {
    let text = std::fs::read_to_string(disk_path(key)?).ok()?;
    let (fp, code) = text.trim().split_once(' ')?;
    // The fingerprint is stored beside the choice: a hash collision of the file name is a miss.
    if fp != format!("{:016x}", key.0) {
        return None;
    }
    decode(code.parse().ok()?)
}

/// Writes an entry (to a temporary file renamed into place); errors only cost a later re-tune.
fn disk_store(key: &Key, a: SpmvAlgorithm) {
    let Some(path) = disk_path(key) else { return };
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    if std::fs::write(&tmp, format!("{:016x} {}\n", key.0, encode(a))).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
    let _ = std::fs::remove_file(&tmp);
}

/// True when a decision for `a`'s pattern is cached in this process or on disk.
pub(super) fn is_cached<T: GpuScalar>(a: &GpuCsr<T>) -> bool {
    let key = key_of(a);
    memory()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains_key(&key)
        || disk_load(&key).is_some()
}

fn key_of<T: GpuScalar>(a: &GpuCsr<T>) -> Key {
    let g = a.gpu();
    (
        a.fingerprint(),
        T::BYTES,
        format!("{} {:?}", g.name(), g.compute_capability()),
    )
}

impl SpmvPlan {
    /// The kernels [`tune`](Self::tune) times for `a`, the rule's choice first. Kernels that
    /// cannot win are left out: one thread per row for rows longer than 256 entries (one thread
    /// would walk the whole row), the look-back kernel when a row is longer than a tile (not
    /// reproducible then), the paper's formulation (it moves twice the bytes).
    pub fn candidates<T: GpuScalar>(a: &GpuCsr<T>) -> Vec<SpmvAlgorithm> {
        let s = a.row_stats();
        let mut c = vec![a.rule_algorithm(), SpmvAlgorithm::Fused];
        // A row longer than two tiles: only the fused kernel's cost does not grow with it.
        if s.max > 2 * a.policy().tile::<T>() as usize {
            c.dedup();
            return c;
        }
        if s.max <= 256 {
            c.push(SpmvAlgorithm::Rows);
        }
        for lanes in [2u32, 4, 8, 16, 32] {
            // Sub-warps between a quarter and four times the mean row length.
            if (lanes as f64) <= 4.0 * s.mean.max(1.0) && (lanes as f64) * 4.0 >= s.mean {
                c.push(SpmvAlgorithm::Vector { lanes });
            }
        }
        if s.max <= a.policy().tile::<T>() as usize {
            c.push(SpmvAlgorithm::FusedLookback);
        }
        let auto_lanes = SpmvAlgorithm::Vector {
            lanes: super::auto_lanes(s),
        };
        let mut out: Vec<SpmvAlgorithm> = Vec::new();
        for x in c {
            // Vector { lanes: 0 } is the same kernel as Vector { lanes: auto }.
            let x = if x == (SpmvAlgorithm::Vector { lanes: 0 }) {
                auto_lanes
            } else {
                x
            };
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }

    /// Times each of [`candidates`](Self::candidates) on `a` (`x = 0`; one call each, then
    /// [`ROUNDS`] batches of products lasting at least 40 µs for those within 3× of the best so
    /// far; the fastest batch counts) and returns the fastest, unless a decision for the same
    /// pattern, scalar type and device is cached already. The rule's choice is kept unless
    /// another kernel is more than 2 % faster. Does not change `a` (see [`GpuCsr::tune`]).
    ///
    /// # Errors
    /// Out of device memory (an `x` and a `y` are allocated for the timing) or a failed launch.
    pub fn tune<T: GpuScalar>(a: &GpuCsr<T>) -> Result<SpmvPlan> {
        let t0 = std::time::Instant::now();
        let g = a.gpu().clone();
        let key = key_of(a);
        let rule = a.rule_algorithm();
        let hit = memory()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied();
        let hit = hit.or_else(|| {
            let d = disk_load(&key)?;
            memory()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key.clone(), d);
            Some(d)
        });
        if let Some(algorithm) = hit {
            return Ok(SpmvPlan {
                algorithm,
                rule,
                fingerprint: key.0,
                timings: Vec::new(),
                cached: true,
                seconds: t0.elapsed().as_secs_f64(),
            });
        }
        let mut timings = Vec::new();
        let mut algorithm = rule;
        if a.nnz() > 0 && a.nrows() > 0 {
            g.check_memory(
                "the SpMV tuning vectors",
                ((a.ncols() + a.nrows()) * T::BYTES) as u64,
            )?;
            // The values of x do not change the kernels' work: zeros, made on the device.
            let x = g.zeros::<T>(a.ncols())?;
            let mut y = g.zeros::<T>(a.nrows())?;
            let (one, zero) = (T::one(), T::zero());
            let mut best = f64::INFINITY;
            let mut rule_t = f64::INFINITY;
            for alg in Self::candidates(a) {
                let first = g.time(|| a.spmv_with(alg, one, &x, zero, &mut y))?;
                let mut t = first;
                if first <= DROP_FACTOR * best {
                    let reps = ((MIN_BATCH_S / first.max(1e-7)).ceil() as usize).clamp(1, 64);
                    for _ in 0..ROUNDS {
                        let s = g.time(|| {
                            for _ in 0..reps {
                                a.spmv_with(alg, one, &x, zero, &mut y)?;
                            }
                            Ok(())
                        })? / reps as f64;
                        t = t.min(s);
                    }
                }
                if alg == rule {
                    rule_t = t;
                }
                timings.push((alg, t));
                best = best.min(t);
            }
            let (fastest, tf) =
                timings
                    .iter()
                    .copied()
                    .fold((rule, f64::INFINITY), |b, c| if c.1 < b.1 { c } else { b });
            algorithm = if tf < (1.0 - MARGIN) * rule_t {
                fastest
            } else {
                rule
            };
        }
        memory()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), algorithm);
        disk_store(&key, algorithm);
        Ok(SpmvPlan {
            algorithm,
            rule,
            fingerprint: key.0,
            timings,
            cached: false,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }

    /// Forgets every decision cached in this process (the on-disk entries stay).
    pub fn clear_memory_cache() {
        memory().lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let all = [
            SpmvAlgorithm::Fused,
            SpmvAlgorithm::FusedLookback,
            SpmvAlgorithm::Rows,
            SpmvAlgorithm::PaperSegscan,
            SpmvAlgorithm::Vector { lanes: 0 },
            SpmvAlgorithm::Vector { lanes: 1 },
            SpmvAlgorithm::Vector { lanes: 4 },
            SpmvAlgorithm::Vector { lanes: 32 },
        ];
        for a in all {
            assert_eq!(decode(encode(a)), Some(a));
        }
        for bad in [0, 5, 0x103, 0x121, 0x200, u32::MAX] {
            assert_eq!(decode(bad), None, "{bad:#x}");
        }
    }
}
