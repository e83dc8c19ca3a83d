//! Early firing: the rule by which a session fires below its trigger, when the cache model
//! predicts that a firing now costs less over the following calls than not firing.
//!
//! Between firings each call reads the previous request from the cache and writes what it
//! appends; a firing writes its whole compacted request at the uncached price. A session that
//! fires whenever the request is `P` tokens, compacting to `C`, runs cycles of `L = (P − C) / g`
//! calls (`g`, the tokens a call appends); a cycle costs `C·w` for the firing and about
//! `L·C·r + L²·g·r / 2` for reading, so the cost per call is least at
//! `L* = √(2·C·w / (g·r))` (`r`, `w`: the cache read and write prices): the economic order
//! quantity of inventory theory. So a firing below the trigger pays when the request has grown
//! past the compaction by `√(2·C·g·w / r)` tokens, and when the calls still to come repay its
//! write, `k·(P − C)·r ≥ C·w − P·r`. The calls `k` predicted still to come are as many as the
//! conversation has had so far, but no more than until the trigger forces a firing anyway:
//! a firing now only brings that one forward. Both conditions tighten as `C` grows, so the
//! least a firing could send is a sound first check before its goal is counted.
//!
//! On the recorded corpora (`docs/SESSIONS.md`) this rule never fires on tau-bench and costs
//! the same as firing at the trigger on the long runs; predicting the horizon from the calls
//! so far alone fired more and cost 1.025× at a 50% window. So it is off by default.

/// The cache prices a firing below the trigger is weighed by, as multiples of the base input
/// price (those of [`PriceTable`](crate::PriceTable)).
///
/// ```
/// use cutctx_session::EarlyFiring;
/// let early = EarlyFiring { cache_read: 0.1, cache_write: 1.25 };
/// // 60,000 tokens compacting to 20,000, growing 500 a call, after 200 calls: it pays.
/// assert!(early.pays(60_000, 20_000, 500, 200));
/// // After 4 calls the conversation is not predicted to last long enough to repay it.
/// assert!(!early.pays(60_000, 20_000, 500, 4));
/// // Grown only 5,000 past the compaction: not yet.
/// assert!(!early.pays(25_000, 20_000, 500, 200));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EarlyFiring {
    /// The price of a token read from the cache.
    pub cache_read: f64,
    /// The price of a token written (sent uncached).
    pub cache_write: f64,
}

impl EarlyFiring {
    /// The prices of `prices`.
    #[must_use]
    pub const fn from_prices(prices: &crate::PriceTable) -> Self {
        Self {
            cache_read: prices.cache_read,
            cache_write: prices.cache_write,
        }
    }

    /// Whether a firing now pays: the request is `prompt` tokens, the firing would send
    /// `compacted`, each call appends `growth` on average, and `calls` more calls are
    /// predicted before a firing would happen anyway.
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts and calls are far below 2^52"
    )]
    pub fn pays(&self, prompt: u64, compacted: u64, growth: u64, calls: u64) -> bool {
        let (r, w) = (self.cache_read, self.cache_write);
        if compacted >= prompt || !(r > 0.0 && r < w) || growth == 0 {
            return false;
        }
        let (p, c, g, k) = (prompt as f64, compacted as f64, growth as f64, calls as f64);
        let grown = p - c;
        let cycle = grown * grown >= 2.0 * c * g * w / r;
        let repaid = k * grown * r >= c * w - p * r;
        cycle && repaid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_reads_or_a_compaction_that_saves_nothing_never_fire_early() {
        let free = EarlyFiring {
            cache_read: 0.0,
            cache_write: 1.0,
        };
        assert!(!free.pays(90_000, 10_000, 100, 1_000));
        let anthropic = EarlyFiring {
            cache_read: 0.1,
            cache_write: 1.25,
        };
        assert!(!anthropic.pays(10_000, 10_000, 100, 1_000));
        assert!(!anthropic.pays(10_000, 12_000, 100, 1_000));
        assert!(!anthropic.pays(90_000, 10_000, 0, 1_000));
    }

    #[test]
    fn the_threshold_is_the_square_root_rule() {
        let e = EarlyFiring {
            cache_read: 0.1,
            cache_write: 1.25,
        };
        // √(2 · 20,000 · 500 · 12.5) = 15,811: fires at 35,812 above a compaction to 20,000.
        assert!(!e.pays(35_810, 20_000, 500, 10_000));
        assert!(e.pays(35_812, 20_000, 500, 10_000));
    }
}
