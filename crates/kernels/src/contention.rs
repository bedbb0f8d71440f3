//! Noticing that the pool's workers are not getting CPU time, and running
//! split jobs on the caller alone while that lasts.
//!
//! An elastic job never waits for a worker that has not joined, but a
//! worker that joined, claimed a chunk and was then preempted by another
//! process holds the job until the scheduler gives it its core back: a
//! time slice, milliseconds, against the tens of microseconds an operation
//! of a decode step takes. With one busy process beside a two-thread engine
//! that happens on most steps and halves the speed.
//!
//! The caller measures its own share of each split job (`work`) and how
//! long it then waits for the workers that joined (`wait`). On an idle
//! machine the wait is at most about one chunk, well under the caller's own
//! work; a preempted worker makes it exceed the work by far. A few such
//! stalls in quick succession switch the pool to *solo* mode: split jobs run
//! on the caller alone (results do not depend on the thread count) for a
//! back-off period, then the workers are tried again. The period doubles
//! each time the stalls come back at once, up to a cap, and falls back to
//! its start after a quiet stretch, so a machine that calms down gets its
//! threads back within a fraction of a second.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A wait longer than the caller's own work by this much is a stall.
const STALL_SLACK: Duration = Duration::from_micros(200);
/// Stalls closer together than this count as one streak.
const STREAK_GAP: Duration = Duration::from_millis(50);
/// Stalls in one streak that switch to solo mode.
const STREAK_TO_SOLO: u32 = 3;
/// First solo period, and the cap of its doubling.
const SOLO_MIN: Duration = Duration::from_millis(100);
const SOLO_MAX: Duration = Duration::from_secs(2);
/// A solo period that starts later than this after the previous one ended
/// starts again from `SOLO_MIN`.
const CALM: Duration = Duration::from_secs(5);

/// The detector's state. Updated only by the dispatching caller (under the
/// pool's dispatch lock); read by any caller deciding whether to split.
pub(crate) struct Contention {
    start: Instant,
    /// Nanoseconds since `start` until which split jobs run solo.
    solo_until: AtomicU64,
    /// The last stall, in nanoseconds since `start`.
    last_stall: AtomicU64,
    streak: AtomicU32,
    /// The current solo period, in milliseconds.
    period_ms: AtomicU32,
    /// Solo periods entered so far.
    periods: AtomicU64,
}

impl Contention {
    pub(crate) fn new() -> Self {
        Contention {
            start: Instant::now(),
            solo_until: AtomicU64::new(0),
            last_stall: AtomicU64::new(0),
            streak: AtomicU32::new(0),
            period_ms: AtomicU32::new(SOLO_MIN.as_millis() as u32),
            periods: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Whether split jobs should run on the caller alone now.
    #[inline]
    pub(crate) fn solo(&self) -> bool {
        let until = self.solo_until.load(Ordering::Relaxed);
        until != 0 && self.now_ns() < until
    }

    /// Solo periods entered since the pool was made.
    pub(crate) fn periods(&self) -> u64 {
        self.periods.load(Ordering::Relaxed)
    }

    /// Records one split job in which workers joined: the caller's own
    /// share took `work`, then it waited `wait` for the workers.
    pub(crate) fn record(&self, work: Duration, wait: Duration) {
        if wait <= work + STALL_SLACK {
            return;
        }
        let now = self.now_ns();
        let last = self.last_stall.swap(now, Ordering::Relaxed);
        let streak = if now.saturating_sub(last) < STREAK_GAP.as_nanos() as u64 {
            self.streak.load(Ordering::Relaxed) + 1
        } else {
            1
        };
        self.streak.store(streak, Ordering::Relaxed);
        if streak < STREAK_TO_SOLO {
            return;
        }
        self.streak.store(0, Ordering::Relaxed);
        let ended = self.solo_until.load(Ordering::Relaxed);
        let mut period = self.period_ms.load(Ordering::Relaxed) as u64;
        if ended != 0 && now.saturating_sub(ended) > CALM.as_nanos() as u64 {
            period = SOLO_MIN.as_millis() as u64;
        } else if ended != 0 {
            period = (period * 2).min(SOLO_MAX.as_millis() as u64);
        }
        self.period_ms.store(period as u32, Ordering::Relaxed);
        self.solo_until
            .store(now + period * 1_000_000, Ordering::Relaxed);
        self.periods.fetch_add(1, Ordering::Relaxed);
    }
}
