//! Kernels compiled ahead of time and embedded in the library: an archive of CUBINs.
//!
//! The first process on a new machine used to load NVRTC from disk and compile every kernel
//! module it touched (14 s for the first SpMV on a fresh H100). When the crate is built with an
//! archive (see `build.rs`: `$SEGSPARSE_KERNEL_ARCHIVE`, or `kernels/prebuilt/cubins.bin` when
//! present), a module the archive holds for the device's architecture is loaded from it
//! directly: no NVRTC, no compile. The runtime looks here first, then in the
//! [disk cache](super::disk_cache), then asks NVRTC ([`super::Gpu::module`]).
//!
//! # What an entry is, and when one is used
//!
//! The archive is written by the `kernel-archive` tool, which compiles every (source, defines)
//! variant that [`crate::kernel_registry::variants`] lists for each architecture asked for
//! (`sm_80` and `sm_90` in CI: an `sm_80` CUBIN also runs on 8.6 and 8.9 devices, see
//! [`archive_archs`]) with the NVRTC it finds. Each entry is keyed by
//! [`module_key`](super::disk_cache::module_key): the source's name, a hash of its whole
//! preprocessed text, the architecture and every compile option, the `-D` defines included. A
//! runtime request computes the same key, so an entry built from another source, another policy
//! or another crate version is never found (the request goes on to the disk cache and NVRTC).
//! The NVRTC version that built the archive is stored once; the archive is used only when the
//! driver supports that CUDA version ([`loadable`]: a CUBIN from a newer toolkit than the
//! driver is refused by the driver). Each payload is deflate-compressed on its own, with its
//! length and checksum, so a lookup inflates only the module asked for and a damaged entry is
//! a miss, never a wrong kernel.
//!
//! `SEGSPARSE_PREBUILT=0` makes the runtime ignore the archive (for measurements and tests).
//!
//! # Layout
//!
//! `MAGIC`, then little-endian `u64`s: the format, the NVRTC major and minor version, the entry
//! count; then per entry the key's length and bytes, the payload's length, its checksum, the
//! compressed length and the compressed bytes.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::OnceLock;

const MAGIC: &[u8; 16] = b"segsparse-kbins\n";
const FORMAT: u64 = 1;

/// The archive `build.rs` embedded (empty when the crate was built without one).
static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kernels.bin"));

/// One entry: where its compressed payload is, and what it must inflate to.
struct Entry<'a> {
    len: u64,
    sum: u64,
    deflated: &'a [u8],
}

/// A parsed archive (the index only; payloads are inflated on lookup).
pub struct Archive<'a> {
    nvrtc: (i32, i32),
    entries: HashMap<&'a str, Entry<'a>>,
}

fn take_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = b.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

fn take_bytes(b: &[u8], n: u64) -> Option<(&[u8], &[u8])> {
    let n = usize::try_from(n).ok()?;
    (b.len() >= n).then(|| b.split_at(n))
}

impl<'a> Archive<'a> {
    /// Reads the index of `bytes`.
    ///
    /// # Errors
    /// A sentence saying what is wrong (magic, format, a truncated entry, a key that is not
    /// UTF-8, a repeated key).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or("not a segsparse kernel archive (wrong magic)")?;
        let bad = |what: &str| format!("kernel archive truncated or damaged ({what})");
        let (format, rest) = take_u64(rest).ok_or_else(|| bad("format"))?;
        if format != FORMAT {
            return Err(format!(
                "kernel archive format {format}, this crate reads {FORMAT}"
            ));
        }
        let (major, rest) = take_u64(rest).ok_or_else(|| bad("NVRTC version"))?;
        let (minor, rest) = take_u64(rest).ok_or_else(|| bad("NVRTC version"))?;
        let (count, mut rest) = take_u64(rest).ok_or_else(|| bad("entry count"))?;
        let mut entries = HashMap::new();
        for i in 0..count {
            let what = format!("entry {i}");
            let (klen, r) = take_u64(rest).ok_or_else(|| bad(&what))?;
            let (key, r) = take_bytes(r, klen).ok_or_else(|| bad(&what))?;
            let key = std::str::from_utf8(key).map_err(|_| bad(&what))?;
            let (len, r) = take_u64(r).ok_or_else(|| bad(&what))?;
            let (sum, r) = take_u64(r).ok_or_else(|| bad(&what))?;
            let (dlen, r) = take_u64(r).ok_or_else(|| bad(&what))?;
            let (deflated, r) = take_bytes(r, dlen).ok_or_else(|| bad(&what))?;
            if entries.insert(key, Entry { len, sum, deflated }).is_some() {
                return Err(format!("kernel archive: entry {i} repeats a key"));
            }
            rest = r;
        }
        if !rest.is_empty() {
            return Err(bad("bytes after the last entry"));
        }
        Ok(Archive {
            nvrtc: (major as i32, minor as i32),
            entries,
        })
    }

    /// The NVRTC version that compiled every entry.
    pub fn nvrtc(&self) -> (i32, i32) {
        self.nvrtc
    }

    /// How many modules the archive holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The keys of every entry (in no particular order).
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.keys().copied()
    }

    /// The payload stored under `key`, inflated and checked; `None` when there is no such
    /// entry or it does not inflate to its recorded length and checksum.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let e = self.entries.get(key)?;
        let mut out = Vec::with_capacity(usize::try_from(e.len).ok()?);
        flate2::read::DeflateDecoder::new(e.deflated)
            .take(e.len.saturating_add(1))
            .read_to_end(&mut out)
            .ok()?;
        (out.len() as u64 == e.len && super::disk_cache::checksum64(&out) == e.sum).then_some(out)
    }
}

/// Builds an archive: entries added one by one, the bytes written by [`ArchiveWriter::finish`].
pub struct ArchiveWriter {
    nvrtc: (i32, i32),
    entries: Vec<(String, Vec<u8>)>,
}

impl ArchiveWriter {
    /// An empty archive for modules compiled by NVRTC `nvrtc` (major, minor).
    pub fn new(nvrtc: (i32, i32)) -> Self {
        ArchiveWriter {
            nvrtc,
            entries: Vec::new(),
        }
    }

    /// Adds `payload` (a CUBIN) under `key` (a [`module_key`](super::disk_cache::module_key));
    /// a key added twice keeps the last payload.
    pub fn add(&mut self, key: String, payload: Vec<u8>) {
        self.entries.retain(|(k, _)| *k != key);
        self.entries.push((key, payload));
    }

    /// The archive's bytes (entries in key order, so the same modules give the same bytes).
    pub fn finish(mut self) -> Vec<u8> {
        self.entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        for v in [
            FORMAT,
            self.nvrtc.0.max(0) as u64,
            self.nvrtc.1.max(0) as u64,
            self.entries.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for (key, payload) in &self.entries {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            enc.write_all(payload)
                .expect("writing to a Vec cannot fail");
            let deflated = enc.finish().expect("writing to a Vec cannot fail");
            out.extend_from_slice(&(key.len() as u64).to_le_bytes());
            out.extend_from_slice(key.as_bytes());
            for v in [
                payload.len() as u64,
                super::disk_cache::checksum64(payload),
                deflated.len() as u64,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&deflated);
        }
        out
    }
}

/// Whether a CUBIN compiled by NVRTC `nvrtc` (major, minor) can be loaded by a driver of
/// version number `driver` (e.g. 13000 for CUDA 13.0; 0 when unknown): the driver must
/// support at least that CUDA version.
pub fn loadable(nvrtc: (i32, i32), driver: i32) -> bool {
    driver > 0 && driver >= nvrtc.0 * 1000 + nvrtc.1 * 10
}

/// The architectures whose archived CUBINs a device of compute capability `cc` can load, best
/// first: its own, then the first of its major version (`sm_80` for an 8.6 or 8.9 device), since
/// a CUBIN runs on devices of the same major version with an equal or higher minor one.
pub fn archive_archs(cc: (i32, i32)) -> Vec<String> {
    let own = format!("sm_{}{}", cc.0, cc.1);
    if cc.1 == 0 {
        vec![own]
    } else {
        vec![own, format!("sm_{}0", cc.0)]
    }
}

/// The embedded archive: `None` when the crate was built without one, when
/// `SEGSPARSE_PREBUILT=0`, or when it does not parse (then a notice is printed once and NVRTC
/// compiles, as without an archive).
pub fn embedded() -> Option<&'static Archive<'static>> {
    static ARCHIVE: OnceLock<Option<Archive<'static>>> = OnceLock::new();
    if std::env::var("SEGSPARSE_PREBUILT").is_ok_and(|v| v == "0") {
        return None;
    }
    ARCHIVE
        .get_or_init(|| {
            if EMBEDDED.is_empty() {
                return None;
            }
            match Archive::parse(EMBEDDED) {
                Ok(a) => Some(a),
                Err(e) => {
                    eprintln!("segsparse: the embedded kernel archive is not used: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// How many modules the embedded archive holds and the NVRTC that compiled them, or `None`
/// (see [`embedded`]).
pub fn embedded_summary() -> Option<(usize, (i32, i32))> {
    embedded().map(|a| (a.len(), a.nvrtc()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage_is_a_miss() {
        let mut w = ArchiveWriter::new((13, 0));
        let big: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 251) as u8).collect();
        w.add("b-key".into(), big.clone());
        w.add("a-key".into(), vec![1, 2, 3]);
        w.add("a-key".into(), vec![4, 5]);
        let bytes = w.finish();
        let a = Archive::parse(&bytes).unwrap();
        assert_eq!(a.nvrtc(), (13, 0));
        assert_eq!(a.len(), 2);
        assert_eq!(a.get("a-key").as_deref(), Some(&[4u8, 5][..]));
        assert_eq!(a.get("b-key").as_deref(), Some(&big[..]));
        assert_eq!(a.get("c-key"), None);

        // The same entries in another order give the same bytes.
        let mut w2 = ArchiveWriter::new((13, 0));
        w2.add("a-key".into(), vec![4, 5]);
        w2.add("b-key".into(), big.clone());
        assert_eq!(w2.finish(), bytes);

        // A flipped byte in a payload is a miss for that entry (or a parse error), never other
        // bytes; truncation is a parse error.
        let mut flips = 0;
        for i in (MAGIC.len()..bytes.len()).step_by(53) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            if let Ok(b) = Archive::parse(&bad) {
                for k in ["a-key", "b-key"] {
                    if let Some(p) = b.get(k) {
                        assert!(p == [4, 5] || p == big, "byte {i}: another payload");
                    }
                }
                flips += 1;
            }
        }
        assert!(flips > 10);
        for len in [0, 10, 20, bytes.len() / 2, bytes.len() - 1] {
            assert!(Archive::parse(&bytes[..len]).is_err(), "truncated to {len}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(Archive::parse(&extra).is_err());
    }

    #[test]
    fn a_device_falls_back_to_the_first_minor_of_its_major() {
        assert_eq!(archive_archs((9, 0)), ["sm_90"]);
        assert_eq!(archive_archs((8, 0)), ["sm_80"]);
        assert_eq!(archive_archs((8, 6)), ["sm_86", "sm_80"]);
        assert_eq!(archive_archs((8, 9)), ["sm_89", "sm_80"]);
    }

    #[test]
    fn the_driver_must_support_the_archive_nvrtc() {
        assert!(loadable((13, 0), 13000));
        assert!(loadable((13, 0), 13020));
        assert!(loadable((12, 4), 13000));
        assert!(
            !loadable((13, 0), 12080),
            "a CUDA 12 driver refuses CUDA 13 CUBINs"
        );
        assert!(!loadable((13, 1), 13000));
        assert!(!loadable((12, 4), 0), "unknown driver");
    }
}
