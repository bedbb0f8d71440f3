//! sha256 of files, and the sidecar cache that spares re-hashing them.
//!
//! Checking a 400 MB model on every `resolve` would cost seconds, so after a
//! file has been hashed its digest is written next to it as
//! `<file>.sha256` together with the size and modification time it had.
//! While size and mtime are unchanged the recorded digest is trusted; any
//! rewrite of the file changes at least one of them and forces a re-hash.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use crate::StoreError;

/// Lowercase hex of a digest.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// True for a 64-character hex string (a sha256 digest), in any letter case.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// sha256 of a whole file, lowercase hex.
pub(crate) fn sha256_file(path: &Path) -> Result<String, StoreError> {
    let mut file = File::open(path).map_err(StoreError::io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StoreError::io(path)(e)),
        };
        hasher.update(&buf[..n]);
    }
    Ok(to_hex(&hasher.finalize()))
}

/// Where the digest of `path` is cached.
pub(crate) fn sidecar_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".sha256");
    PathBuf::from(s)
}

/// Size and modification time (ns since the epoch) of a file, the pair the
/// sidecar is keyed on. `None` when the platform gives no mtime.
fn stamp(path: &Path) -> io::Result<Option<(u64, u128)>> {
    let meta = std::fs::metadata(path)?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos());
    Ok(mtime.map(|m| (meta.len(), m)))
}

/// The digest recorded for `path`, if the sidecar exists, parses, and was
/// written for the file's current size and mtime.
fn cached_digest(path: &Path) -> Option<String> {
    let (size, mtime) = stamp(path).ok()??;
    let text = std::fs::read_to_string(sidecar_path(path)).ok()?;
    let (mut digest, mut s, mut m) = (None, None, None);
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("sha256", v)) if is_sha256_hex(v) => digest = Some(v.to_ascii_lowercase()),
            Some(("size", v)) => s = v.parse::<u64>().ok(),
            Some(("mtime", v)) => m = v.parse::<u128>().ok(),
            _ => {}
        }
    }
    (s == Some(size) && m == Some(mtime))
        .then_some(digest)
        .flatten()
}

/// The sha256 recorded for `path` by an earlier check (its `.sha256`
/// sidecar), when the file still has the size and mtime it had then. Never
/// hashes the file: for callers that want a digest only when it is free.
pub fn recorded_sha256(path: &Path) -> Option<String> {
    cached_digest(path)
}

/// Records `digest` as the sha256 of `path` as it is now. Failure only
/// costs a re-hash next time, so it is not an error.
pub(crate) fn write_sidecar(path: &Path, digest: &str) {
    if let Ok(Some((size, mtime))) = stamp(path) {
        let text = format!("sha256 {digest}\nsize {size}\nmtime {mtime}\n");
        let _ = std::fs::write(sidecar_path(path), text);
    }
}

/// Whether `path` exists and has sha256 `expected` (and size
/// `expected_size`, unless that is 0). Uses and refreshes the sidecar.
pub(crate) fn verify_existing(
    path: &Path,
    expected: &str,
    expected_size: u64,
) -> Result<bool, StoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io(path)(e)),
    };
    if !meta.is_file() || (expected_size != 0 && meta.len() != expected_size) {
        return Ok(false);
    }
    let expected = expected.to_ascii_lowercase();
    if let Some(digest) = cached_digest(path) {
        return Ok(digest == expected);
    }
    let digest = sha256_file(path)?;
    write_sidecar(path, &digest);
    Ok(digest == expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn digest_of(bytes: &[u8]) -> String {
        to_hex(&Sha256::digest(bytes))
    }

    #[test]
    fn hex_and_known_digest() {
        assert_eq!(
            digest_of(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_sha256_hex(&digest_of(b"")));
        assert!(!is_sha256_hex("abc"));
        assert!(!is_sha256_hex(&"g".repeat(64)));
    }

    #[test]
    fn verify_hashes_then_trusts_the_sidecar_while_size_and_mtime_hold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"hello model").unwrap();
        let good = digest_of(b"hello model");

        assert!(!verify_existing(&dir.path().join("absent"), &good, 0).unwrap());
        assert!(verify_existing(&path, &good, 0).unwrap());
        assert!(sidecar_path(&path).exists());
        // Wrong size is rejected without hashing.
        assert!(!verify_existing(&path, &good, 3).unwrap());

        // Rewrite with same-length content but restore the old mtime: the
        // cache cannot notice, which proves the sidecar is what answered.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, b"HELLO MODEL").unwrap();
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert!(verify_existing(&path, &good, 0).unwrap());

        // A changed mtime invalidates the cache and the new content is hashed.
        let later = SystemTime::now() + Duration::from_secs(5);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(!verify_existing(&path, &good, 0).unwrap());
        assert!(verify_existing(&path, &digest_of(b"HELLO MODEL"), 0).unwrap());
    }

    #[test]
    fn recorded_digest_is_only_the_sidecar_of_the_current_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"data").unwrap();
        assert_eq!(recorded_sha256(&path), None);
        assert!(verify_existing(&path, &digest_of(b"data"), 4).unwrap());
        assert_eq!(recorded_sha256(&path), Some(digest_of(b"data")));
        std::fs::write(&path, b"other data").unwrap();
        assert_eq!(recorded_sha256(&path), None);
    }

    #[test]
    fn garbage_sidecar_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        std::fs::write(&path, b"data").unwrap();
        std::fs::write(sidecar_path(&path), "not a sidecar").unwrap();
        assert!(verify_existing(&path, &digest_of(b"data"), 4).unwrap());
    }
}
