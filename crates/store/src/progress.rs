//! Progress reporting on stderr for long transfers.
//!
//! On a terminal a redrawn bar is the natural display; when stderr is a
//! log file or a pipe, redraws turn into noise, so the same events become a
//! plain percentage line at most every few seconds.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the plain-text mode prints a line.
const LINE_INTERVAL: Duration = Duration::from_secs(5);

/// A progress display for one transfer.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: Option<u64>,
    done: u64,
    last_line: Instant,
    /// Plain-text mode can be switched off entirely (tests of the assembly
    /// step have nothing to report).
    quiet: bool,
}

impl Progress {
    /// Starts a display for `label`, `start` bytes already done out of
    /// `total` (when known). `bars` selects the terminal bar.
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
            total,
            done: start,
            last_line: Instant::now(),
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
        self.total = Some(total);
        if let Some(bar) = &self.bar {
            apply_style(bar, true);
            bar.set_length(total);
        }
    }

    /// Records `n` more bytes.
    pub(crate) fn inc(&mut self, n: u64) {
        self.done += n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
        } else if !self.quiet && self.last_line.elapsed() >= LINE_INTERVAL {
            self.last_line = Instant::now();
            eprintln!("{}: {}", self.label, self.describe());
        }
    }

    /// Removes the bar (the caller reports the outcome itself).
    pub(crate) fn finish(mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn describe(&self) -> String {
        match self.total {
            Some(total) if total > 0 => format!(
                "{:.0}% ({} of {})",
                self.done as f64 * 100.0 / total as f64,
                human_bytes(self.done),
                human_bytes(total)
            ),
            _ => human_bytes(self.done),
        }
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
    let template = if total_known {
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}"
    } else {
        "{msg} {bytes} {binary_bytes_per_sec}"
    };
    // A template error would be a bug in the literal above; indicatif's
    // default style still shows progress, so it is not worth failing for.
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
}

/// `1234567` → `"1.2 MB"`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_units() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1_234_567), "1.2 MB");
        assert_eq!(human_bytes(491_400_064), "491.4 MB");
    }

    #[test]
    fn describe_percentage() {
        let mut p = Progress::new(false, "x", Some(200), 50);
        p.quiet = true;
        p.inc(50);
        assert_eq!(p.describe(), "50% (100 B of 200 B)");
    }
}
