//! The container of session files and of the prompt cache's block files:
//! a magic, a format version, a JSON header and rows, each with its `u64`
//! length, then a sha256 of all of it. Each file kind names its own magic
//! and version and reads its own header.

use sha2::{Digest, Sha256};

/// Why bytes are not a whole, intact container of the expected kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Too short, or another magic.
    NoHeader,
    /// The checksum does not match the contents.
    Checksum,
    /// Another format version, this one.
    Version(u32),
    /// The header's length runs past the end.
    CutHeader,
    /// The rows' length runs past the end.
    CutRows,
    /// Bytes after the rows.
    Trailing,
}

/// The bytes of a container of `header` and `rows`.
pub(crate) fn frame(magic: &[u8; 8], version: u32, header: &[u8], rows: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 4 + 16 + header.len() + rows.len() + 32);
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    out.extend_from_slice(rows);
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

/// The header and rows of a container with `magic` and `version`, checked
/// in this order: magic and size, checksum, version, lengths.
pub(crate) fn unframe<'a>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    version: u32,
) -> Result<(&'a [u8], &'a [u8]), FrameError> {
    if bytes.len() < 8 + 4 + 8 + 8 + 32 || &bytes[..8] != magic {
        return Err(FrameError::NoHeader);
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != sum {
        return Err(FrameError::Checksum);
    }
    let found = u32::from_le_bytes(body[8..12].try_into().unwrap_or_default());
    if found != version {
        return Err(FrameError::Version(found));
    }
    let mut at = 12;
    let header = take_block(body, &mut at).ok_or(FrameError::CutHeader)?;
    let rows = take_block(body, &mut at).ok_or(FrameError::CutRows)?;
    if at != body.len() {
        return Err(FrameError::Trailing);
    }
    Ok((header, rows))
}

/// A block of `u64` length and bytes starting at `*at`.
fn take_block<'a>(body: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len_bytes = body.get(*at..*at + 8)?;
    let len = usize::try_from(u64::from_le_bytes(len_bytes.try_into().ok()?)).ok()?;
    let start = *at + 8;
    let end = start.checked_add(len)?;
    let block = body.get(start..end)?;
    *at = end;
    Some(block)
}
