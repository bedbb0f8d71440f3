//! Calendar time and a small `strftime`, for the `strftime_now` function
//! that chat templates call to print today's date.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// A civil date and time (proleptic Gregorian calendar, no time zone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    /// Year, e.g. 2026.
    pub year: i32,
    /// Month, 1–12.
    pub month: u32,
    /// Day of the month, 1–31.
    pub day: u32,
    /// Hour, 0–23.
    pub hour: u32,
    /// Minute, 0–59.
    pub minute: u32,
    /// Second, 0–59.
    pub second: u32,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

impl DateTime {
    /// Midnight of the given date.
    pub fn date(year: i32, month: u32, day: u32) -> DateTime {
        DateTime {
            year,
            month,
            day,
            hour: 0,
            minute: 0,
            second: 0,
        }
    }

    /// The current time in UTC.
    pub fn now_utc() -> DateTime {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Self::from_unix(secs)
    }

    /// The UTC time `secs` seconds after 1970-01-01T00:00:00.
    pub fn from_unix(secs: i64) -> DateTime {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        DateTime {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
        }
    }

    fn days(&self) -> i64 {
        days_from_civil(self.year, self.month, self.day)
    }

    /// 0 = Sunday.
    fn weekday(&self) -> usize {
        (self.days() + 4).rem_euclid(7) as usize
    }

    /// 1-based day of the year.
    fn yday(&self) -> i64 {
        self.days() - days_from_civil(self.year, 1, 1) + 1
    }

    /// Formats like C's `strftime` in the C locale, with glibc's `%-d`
    /// style flag for no padding. Unknown directives are copied as they
    /// are, as glibc does.
    pub fn strftime(&self, fmt: &str) -> String {
        let mut out = String::with_capacity(fmt.len() + 16);
        let mut chars = fmt.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let no_pad = chars.peek() == Some(&'-');
            if no_pad {
                chars.next();
            }
            let Some(d) = chars.next() else {
                out.push('%');
                break;
            };
            let num = |out: &mut String, v: i64, width: usize| {
                if no_pad {
                    let _ = write!(out, "{v}");
                } else {
                    let _ = write!(out, "{v:0width$}");
                }
            };
            let month = MONTHS[(self.month.clamp(1, 12) - 1) as usize];
            let weekday = WEEKDAYS[self.weekday()];
            let hour12 = match self.hour % 12 {
                0 => 12,
                h => h,
            };
            match d {
                'Y' => {
                    let _ = write!(out, "{}", self.year);
                }
                'y' => num(&mut out, i64::from(self.year).rem_euclid(100), 2),
                'm' => num(&mut out, self.month.into(), 2),
                'd' => num(&mut out, self.day.into(), 2),
                'e' => {
                    let _ = write!(out, "{:2}", self.day);
                }
                'H' => num(&mut out, self.hour.into(), 2),
                'I' => num(&mut out, hour12.into(), 2),
                'M' => num(&mut out, self.minute.into(), 2),
                'S' => num(&mut out, self.second.into(), 2),
                'j' => num(&mut out, self.yday(), 3),
                'p' => out.push_str(if self.hour < 12 { "AM" } else { "PM" }),
                'B' => out.push_str(month),
                'b' | 'h' => out.push_str(&month[..3]),
                'A' => out.push_str(weekday),
                'a' => out.push_str(&weekday[..3]),
                'w' => {
                    let _ = write!(out, "{}", self.weekday());
                }
                'u' => {
                    let _ = write!(out, "{}", (self.weekday() + 6) % 7 + 1);
                }
                'F' => out.push_str(&self.strftime("%Y-%m-%d")),
                'D' | 'x' => out.push_str(&self.strftime("%m/%d/%y")),
                'T' | 'X' => out.push_str(&self.strftime("%H:%M:%S")),
                'R' => out.push_str(&self.strftime("%H:%M")),
                'c' => out.push_str(&self.strftime("%a %b %e %H:%M:%S %Y")),
                'z' => out.push_str("+0000"),
                'Z' => out.push_str("UTC"),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                '%' => out.push('%'),
                other => {
                    out.push('%');
                    if no_pad {
                        out.push('-');
                    }
                    out.push(other);
                }
            }
        }
        out
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    ((y + i64::from(m <= 2)) as i32, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar() {
        assert_eq!(DateTime::from_unix(0), DateTime::date(1970, 1, 1));
        let t = DateTime::from_unix(1_800_000_000);
        assert_eq!((t.year, t.month, t.day), (2027, 1, 15));
        assert_eq!((t.hour, t.minute, t.second), (8, 0, 0));
        let d = DateTime::date(2026, 11, 29);
        assert_eq!(DateTime::from_unix(d.days() * 86_400), d);
    }

    #[test]
    fn formats() {
        let d = DateTime {
            hour: 13,
            minute: 5,
            second: 9,
            ..DateTime::date(2026, 11, 29)
        };
        assert_eq!(d.strftime("%d %b %Y"), "29 Nov 2026");
        assert_eq!(d.strftime("%A, %B %-d, %Y"), "Sunday, November 29, 2026");
        assert_eq!(
            d.strftime("%Y-%m-%d %H:%M:%S %p %I %j"),
            "2026-11-29 13:05:09 PM 01 333"
        );
        assert_eq!(d.strftime("100%% %Q"), "100% %Q");
    }
}
