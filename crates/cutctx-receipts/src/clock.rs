//! Where time comes from: an injectable clock, so receipts and ledgers are deterministic in
//! tests. The system clock is `cutctx_ledger::SystemClock`: reading real time is I/O.
//!
//! Every timestamp is UTC at second precision with a literal `Z`, as Python's
//! `strftime("%Y-%m-%dT%H:%M:%SZ")` writes it: `2026-08-15T00:00:00Z`.

use std::sync::atomic::{AtomicI64, Ordering};

/// A source of UTC timestamps.
pub trait Clock {
    /// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
    fn now_utc(&self) -> String;
}

/// A clock that always says the same time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedClock(String);

impl FixedClock {
    /// A clock stopped at `timestamp`, used verbatim.
    #[must_use]
    pub fn new(timestamp: impl Into<String>) -> Self {
        Self(timestamp.into())
    }

    /// A clock stopped at `secs` seconds after the Unix epoch.
    #[must_use]
    pub fn at_unix(secs: i64) -> Self {
        Self(format_unix_utc(secs))
    }
}

impl Clock for FixedClock {
    fn now_utc(&self) -> String {
        self.0.clone()
    }
}

/// A clock that starts at a given second and advances one second per reading.
#[derive(Debug, Default)]
pub struct SteppingClock(AtomicI64);

impl SteppingClock {
    /// A clock whose first reading is `secs` seconds after the Unix epoch.
    #[must_use]
    pub fn starting_at_unix(secs: i64) -> Self {
        Self(AtomicI64::new(secs))
    }
}

impl Clock for SteppingClock {
    fn now_utc(&self) -> String {
        format_unix_utc(self.0.fetch_add(1, Ordering::Relaxed))
    }
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian).
#[must_use]
pub fn format_unix_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`: the date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_strftime() {
        assert_eq!(format_unix_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix_utc(1_786_752_000), "2026-08-15T00:00:00Z");
        assert_eq!(format_unix_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix_utc(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(format_unix_utc(-1), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn stepping_clock_advances() {
        let c = SteppingClock::starting_at_unix(1_786_752_000);
        assert_eq!(c.now_utc(), "2026-08-15T00:00:00Z");
        assert_eq!(c.now_utc(), "2026-08-15T00:00:01Z");
    }
}
