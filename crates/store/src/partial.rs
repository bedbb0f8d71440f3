//! `.partial` files and their atomic promotion to the final name.
//!
//! Every pull writes into `<final>.partial` and renames only after the
//! content has been verified and flushed to disk, so a file under a model's
//! final name is always complete: a crash, a kill or a failed check leaves
//! at worst a `.partial`, which nothing lists or loads.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::StoreError;

/// `<dest>.partial`.
pub(crate) fn partial_path(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// Flushes `partial` to disk and renames it to `dest`, replacing any file
/// there, then syncs the directory so the rename itself survives a crash.
pub(crate) fn commit(partial: &Path, dest: &Path) -> Result<(), StoreError> {
    File::open(partial)
        .and_then(|f| f.sync_all())
        .map_err(StoreError::io(partial))?;
    std::fs::rename(partial, dest).map_err(StoreError::io(dest))?;
    sync_dir(dest);
    Ok(())
}

/// Removes a file that must not survive (a rejected download). A failure
/// here cannot be acted on and must not hide the error being reported.
pub(crate) fn discard(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Best effort: not every platform or file system can open or sync a
/// directory, and the data itself is already on disk.
fn sync_dir(path: &Path) {
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Creates `dir` and its parents.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(StoreError::io(dir))
}
