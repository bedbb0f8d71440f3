//! RFC 3339 timestamps in UTC with nanoseconds, as Ollama writes
//! `created_at`, `modified_at` and `expires_at` (Go's `time.Time`).

use std::time::SystemTime;

/// The civil date of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, exact for any day count).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `t` as `2024-06-04T14:38:31.837530000Z` (times before 1970 read as the
/// epoch: no file or clock here is that old).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        d.subsec_nanos()
    )
}

/// Now, as [`rfc3339`].
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn known_instants() {
        let at = |s: u64, ns: u32| rfc3339(SystemTime::UNIX_EPOCH + Duration::new(s, ns));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.000000005Z");
        assert_eq!(
            at(1_691_177_365, 499_127_000),
            "2023-08-04T19:29:25.499127000Z"
        );
        // Go's "forever": the epoch plus the longest duration.
        assert_eq!(
            at(9_223_372_036, 854_775_807),
            "2262-04-11T23:47:16.854775807Z"
        );
    }
}
