//! The system clock: the one [`Clock`] that reads real time, kept out of the pure
//! `cutctx-receipts` so that everything there stays deterministic.

use cutctx_receipts::Clock;
use cutctx_receipts::clock::format_unix_utc;

/// The system clock, in UTC at second precision.
///
/// ```
/// use cutctx_ledger::SystemClock;
/// use cutctx_receipts::Clock;
/// let now = SystemClock.now_utc();
/// assert_eq!((now.len(), now.ends_with('Z')), (20, true));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_utc(&self) -> String {
        let secs = match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        };
        format_unix_utc(secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_time_in_the_receipts_format() {
        let s = SystemClock.now_utc();
        assert_eq!(s.len(), 20);
        assert!(s.ends_with('Z'));
        // Any reading from this century or later sorts after the Unix epoch's.
        assert!(s.as_str() > "2000-01-01T00:00:00Z");
    }
}
