//! Progress reporting on stderr for long transfers, and the byte-size
//! format every size shown to users goes through.
//!
//! On a terminal a redrawn bar per file is the natural display; when stderr
//! is a log file or a pipe, redraws turn into noise, so each file gets one
//! line when it is done instead (name, size, time).

use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// Formats a byte count with binary units, as llama.cpp does ("MiB"):
/// `"12 B"`, `"1.5 KiB"`, `"468.6 MiB"`, `"1.0 GiB"`.
///
/// One decimal above bytes. A value that would round up to 1024.0 of a
/// unit is shown in the next unit instead ("1.0 MiB", not "1024.0 KiB").
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 1;
    // 1023.95 and above prints as "1024.0" with one decimal.
    while v >= 1023.95 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A progress display for one file.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    done: u64,
    started: Instant,
    /// Prints nothing at all, not even the closing line (assembling from
    /// wheels through the public function has nothing to report).
    quiet: bool,
}

impl Progress {
    /// Starts a display for `label`, `start` bytes already done out of
    /// `total` (when known). `bars` selects the terminal bar; without it
    /// only the closing line of [`Progress::finish`] is printed.
    pub(crate) fn new(
        bars: bool,
        label: impl Into<String>,
        total: Option<u64>,
        start: u64,
    ) -> Self {
        let label = label.into();
        let bar = bars.then(|| {
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
            apply_style(&bar, total.is_some());
            bar.set_message(label.clone());
            bar.set_position(start);
            bar
        });
        Progress {
            bar,
            label,
            done: start,
            started: Instant::now(),
            quiet: false,
        }
    }

    /// A display that shows nothing.
    pub(crate) fn hidden() -> Self {
        let mut p = Progress::new(false, "", None, 0);
        p.quiet = true;
        p
    }

    /// Sets the total once it is known (after the display was created).
    pub(crate) fn set_total(&mut self, total: u64) {
        if let Some(bar) = &self.bar {
            apply_style(bar, true);
            bar.set_length(total);
        }
    }

    /// Records `n` more bytes.
    pub(crate) fn inc(&mut self, n: u64) {
        self.set_position(self.done + n);
    }

    /// Records that `pos` bytes are done (for transfers watched from the
    /// outside, where only the current size is known).
    pub(crate) fn set_position(&mut self, pos: u64) {
        self.done = pos;
        if let Some(bar) = &self.bar {
            bar.set_position(pos);
        }
    }

    /// Removes the bar and prints the closing line: label, size, time.
    pub(crate) fn finish(mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if !self.quiet {
            eprintln!("{}", self.summary());
        }
    }

    /// `"name: 93.8 MiB in 1.2 s"`.
    fn summary(&self) -> String {
        format!(
            "{}: {} in {:.1} s",
            self.label,
            fmt_bytes(self.done),
            self.started.elapsed().as_secs_f64()
        )
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // Dropped without `finish`: an error is on its way. Leave the bar
        // where it stopped so the user sees how far the transfer got.
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }
}

fn apply_style(bar: &ProgressBar, total_known: bool) {
    // `wide_msg` takes the width the rest leaves: a file name is cut short
    // on a narrow terminal rather than wrapping the bar onto a second line.
    let template = if total_known {
        "{wide_msg} [{bar:20}] {done}/{total} {rate} eta {eta}"
    } else {
        "{spinner} {wide_msg} {done} {rate}"
    };
    // A template error would be a bug in the literal above; indicatif's
    // default style still shows progress, so it is not worth failing for.
    if let Ok(style) = ProgressStyle::with_template(template) {
        // Custom keys, so the bar's sizes read like every other size the
        // program prints (indicatif's own `{bytes}` rounds differently).
        let style = style
            .with_key("done", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&fmt_bytes(s.pos()));
            })
            .with_key("total", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&s.len().map(fmt_bytes).unwrap_or_default());
            })
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", fmt_bytes(s.per_sec() as u64));
            })
            .progress_chars("=> ");
        bar.set_style(style);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fmt_bytes_binary_units() {
        assert_eq!(fmt_bytes(0), "0 B");
        assert_eq!(fmt_bytes(12), "12 B");
        assert_eq!(fmt_bytes(1023), "1023 B");
        assert_eq!(fmt_bytes(1024), "1.0 KiB");
        assert_eq!(fmt_bytes(1536), "1.5 KiB");
        assert_eq!(fmt_bytes(1_234_567), "1.2 MiB");
        // The two known models.
        assert_eq!(fmt_bytes(98_362_432), "93.8 MiB");
        assert_eq!(fmt_bytes(491_400_064), "468.6 MiB");
        assert_eq!(fmt_bytes(1 << 30), "1.0 GiB");
        assert_eq!(fmt_bytes(3 << 40), "3.0 TiB");
        assert_eq!(fmt_bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn fmt_bytes_never_shows_1024_of_a_unit() {
        // 1024 * 1024 - 1 is 1023.999 KiB, which would round to "1024.0 KiB".
        assert_eq!(fmt_bytes(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(fmt_bytes(1023 * 1024), "1023.0 KiB");
        assert_eq!(fmt_bytes((1 << 30) - 1), "1.0 GiB");
    }

    #[test]
    fn summary_names_file_size_and_time() {
        let mut p = Progress::new(false, "x.whl", Some(4096), 1024);
        p.quiet = true;
        p.inc(1024);
        let s = p.summary();
        assert!(s.starts_with("x.whl: 2.0 KiB in "), "{s}");
        assert!(s.ends_with(" s"), "{s}");
        p.set_position(3072);
        assert!(p.summary().starts_with("x.whl: 3.0 KiB in "));
    }
}
