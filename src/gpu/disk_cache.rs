//! The persistent on-disk cache of compiled kernels (CUBIN), shared by every process of a user.
//!
//! NVRTC compiling a kernel source and the driver loading it cost about 1.5 s for the SpMV module
//! in a new process on the GPU machine, and every process paid it again. A CUBIN compiled by
//! NVRTC for the device's own `sm_XY` loads in milliseconds, so compiled modules are kept on disk.
//!
//! # Where, and how to turn it off
//!
//! `$SEGSPARSE_CACHE_DIR` when set, else `$XDG_CACHE_HOME/segsparse`, else
//! `$HOME/.cache/segsparse`. `SEGSPARSE_KERNEL_CACHE=0` disables it (every process compiles, as
//! before). A cache directory that cannot be created or written only costs the compile: errors
//! of the cache are never errors of the computation.
//!
//! # What an entry is keyed by, and why an entry is never trusted
//!
//! The file name is a 128-bit hash of the *key*: the preprocessed source text (every spliced
//! header included), the architecture, the `-D` defines and compile options, the NVRTC version,
//! the driver version and this crate's version. The key itself (with the source's hash in place
//! of the source) is stored in the entry and compared on load, together with the payload's
//! length and a 64-bit checksum, so a truncated, corrupt or stale entry, or one written by
//! another version, is recompiled and rewritten rather than loaded. Entries are written to a
//! temporary file in the same directory and renamed into place, so a reader never sees half an
//! entry even when several processes compile the same kernel at once (the last rename wins, and
//! both wrote the same bytes).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 16] = b"segsparse-cubin\n";
const FORMAT: u32 = 1;

/// The cache directory, or `None` when the cache is disabled or no directory can be named.
pub fn cache_dir() -> Option<PathBuf> {
    if std::env::var("SEGSPARSE_KERNEL_CACHE").is_ok_and(|v| v == "0") {
        return None;
    }
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = nonempty("SEGSPARSE_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = nonempty("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("segsparse"));
    }
    nonempty("HOME").map(|h| PathBuf::from(h).join(".cache").join("segsparse"))
}

/// A 64-bit hash of `parts` under `salt`. `DefaultHasher::new()` uses fixed keys, so it is
/// stable within a build; a Rust release that changes it only turns old entries into misses.
fn hash64(salt: u64, parts: &[&[u8]]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    salt.hash(&mut h);
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// What identifies one module's compile apart from the tools: the source's name, a 128-bit hash
/// and the length of its preprocessed text, the architecture, the compile options (every `-D`
/// define among them) and this crate's version. The disk cache adds the NVRTC and driver
/// versions; the embedded archive ([`super::prebuilt`]) keys its entries by this text alone and
/// records the NVRTC version once for the whole archive.
pub fn module_key(name: &str, source: &str, arch: &str, options: &[String]) -> String {
    let src_hash = format!(
        "{:016x}{:016x}",
        hash64(1, &[source.as_bytes()]),
        hash64(2, &[source.as_bytes()])
    );
    format!(
        "source={name}\nsource_hash={src_hash}\nsource_len={}\narch={arch}\noptions={}\n\
         segsparse={}\n",
        source.len(),
        options.join(" "),
        env!("CARGO_PKG_VERSION")
    )
}

/// A 64-bit checksum of `payload` (the disk cache's and the archive's).
pub(crate) fn checksum64(payload: &[u8]) -> u64 {
    hash64(5, &[payload])
}

/// What identifies one compiled module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheKey {
    /// The readable part: source name, architecture, options, tool versions, source hash.
    text: String,
    /// 128-bit hash of the full key, naming the file.
    file: String,
}

impl CacheKey {
    /// The key of `source` (preprocessed text) named `name`, compiled for `arch` with `options`,
    /// by NVRTC `nvrtc` for a driver `driver` (both as version strings).
    pub fn new(
        name: &str,
        source: &str,
        arch: &str,
        options: &[String],
        nvrtc: &str,
        driver: &str,
    ) -> Self {
        let text = format!(
            "{}nvrtc={nvrtc}\ndriver={driver}\n",
            module_key(name, source, arch, options)
        );
        let file = format!(
            "{}-{:016x}{:016x}.cubin",
            name.replace(['/', '\\', '.'], "_"),
            hash64(3, &[text.as_bytes()]),
            hash64(4, &[text.as_bytes()])
        );
        CacheKey { text, file }
    }

    /// The entry's file name within the cache directory.
    pub fn file_name(&self) -> &str {
        &self.file
    }
}

fn checksum(payload: &[u8]) -> u64 {
    checksum64(payload)
}

/// The payload of `key`'s entry in `dir`, or `None` when there is none or it does not check out
/// (wrong magic, format, key, length or checksum).
pub fn load(dir: &Path, key: &CacheKey) -> Option<Vec<u8>> {
    let bytes = std::fs::read(dir.join(&key.file)).ok()?;
    parse(&bytes, key)
}

fn parse(bytes: &[u8], key: &CacheKey) -> Option<Vec<u8>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (format, rest) = take_u64(rest)?;
    if format != FORMAT as u64 {
        return None;
    }
    let (klen, rest) = take_u64(rest)?;
    let klen = usize::try_from(klen).ok()?;
    if rest.len() < klen || &rest[..klen] != key.text.as_bytes() {
        return None;
    }
    let rest = &rest[klen..];
    let (plen, rest) = take_u64(rest)?;
    let (sum, payload) = take_u64(rest)?;
    if payload.len() as u64 != plen || checksum(payload) != sum {
        return None;
    }
    Some(payload.to_vec())
}

fn take_u64(b: &[u8]) -> Option<(u64, &[u8])> {
    let (head, rest) = b.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*head), rest))
}

/// Writes `payload` as `key`'s entry in `dir`, atomically (temporary file, then rename). Errors
/// are returned for the caller to ignore or report; a failed store leaves no partial entry.
pub fn store(dir: &Path, key: &CacheKey, payload: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut bytes = Vec::with_capacity(payload.len() + key.text.len() + 48);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(FORMAT as u64).to_le_bytes());
    bytes.extend_from_slice(&(key.text.len() as u64).to_le_bytes());
    bytes.extend_from_slice(key.text.as_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&checksum(payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    let tmp = dir.join(format!(
        ".{}.{}.{:x}.tmp",
        key.file,
        std::process::id(),
        hash64(
            6,
            &[format!("{:?}", std::thread::current().id()).as_bytes()]
        )
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(&key.file))
    };
    let r = write();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, driver: &str) -> CacheKey {
        CacheKey::new(
            "spmv/spmv.cu",
            src,
            "sm_90",
            &["-DX=1".into()],
            "13.0",
            driver,
        )
    }

    #[test]
    fn round_trip_and_every_corruption_is_a_miss() {
        let dir = std::env::temp_dir().join(format!("segsparse-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let k = key("int x;", "13000");
        assert_eq!(load(&dir, &k), None, "empty cache");
        let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        store(&dir, &k, &payload).unwrap();
        assert_eq!(load(&dir, &k).as_deref(), Some(&payload[..]));
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec![k.file_name().to_string()]);

        // Another source, driver or architecture is another entry.
        assert_ne!(key("int y;", "13000").file_name(), k.file_name());
        assert_ne!(key("int x;", "13010").file_name(), k.file_name());
        assert_eq!(load(&dir, &key("int x;", "13010")), None);

        let path = dir.join(k.file_name());
        let good = std::fs::read(&path).unwrap();
        // A flipped byte anywhere (magic, key, length, checksum or payload) is a miss.
        for i in (0..good.len()).step_by(97).chain([good.len() - 1]) {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert_eq!(parse(&bad, &k), None, "byte {i} flipped");
        }
        // A truncated entry is a miss, as is an entry stored under this name for another key.
        for len in [0, 10, 16, 40, good.len() / 2, good.len() - 1] {
            assert_eq!(parse(&good[..len], &k), None, "truncated to {len}");
        }
        std::fs::write(&path, b"garbage").unwrap();
        assert_eq!(load(&dir, &k), None);
        // Storing again repairs it.
        store(&dir, &k, &payload).unwrap();
        assert_eq!(load(&dir, &k).as_deref(), Some(&payload[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn directory_follows_the_environment_variables() {
        // Only the pure parts: the variables are process-wide, so read without setting them.
        if std::env::var("SEGSPARSE_KERNEL_CACHE").is_ok_and(|v| v == "0") {
            assert_eq!(cache_dir(), None);
        } else if let Some(d) = std::env::var_os("SEGSPARSE_CACHE_DIR").filter(|v| !v.is_empty()) {
            assert_eq!(cache_dir(), Some(PathBuf::from(d)));
        } else if let Some(d) = cache_dir() {
            assert!(d.ends_with("segsparse"), "{}", d.display());
        }
    }
}
