//! A lower bound on what any strategy must pay for a recorded run under the cache model of
//! [`prefix_cache`](crate::prefix_cache): the floor the replayed strategies are measured
//! against.
//!
//! **What every strategy must send.** At every call, a strategy that compacts only what the
//! invariants allow sends at least the untouchable part: the tools, the system turns and the
//! protected recent turns (the output reserve is room, not tokens sent). Call these the
//! *required* parts. Nothing is assumed about the rest: a call whose untouchable part alone
//! exceeds the window still requires only that part (a strategy may keep its compacted prefix
//! there rather than send the whole history), and no window is assumed at all, so the bound
//! holds for any strategy that sends each call's untouchable turns as they are, whether it
//! stays under the window or not.
//!
//! **What a required token costs at least.** Let `r` be the read price, `w` the write price
//! and `1` the price of a token neither read nor written (the part of an Anthropic request
//! after its last breakpoint; on providers that cache automatically `w` is 1 already):
//!
//! * A token of a message that did not exist at the previous call (or, at the first call,
//!   any token: nothing is shared between runs, unless the run starts with its tools and
//!   system prompt warm) cannot be read: no earlier request could hold it. It costs at least
//!   `min(w, 1)`.
//! * If that token is required again at the next call, the two calls together pay at least
//!   `min(w + r, 2 × min(w, 1))`: the next call reads it only if this call wrote it. The bound
//!   charges `min(w + r, 2 min(w, 1)) − r` to this call and `r` to the next.
//! * Every other required token costs at least `r`.
//!
//! Nothing else is charged: the bound lets a strategy drop everything that may be dropped at
//! no cost, keep every earlier byte in place and summarise for free (summarizing calls are
//! not charged). No strategy that sends the required parts can pay less, whatever it marks
//! and however it compacts; it is reached only by one that never moves a required token,
//! which a real strategy must do to stay under a window. Cache minimums and block
//! granularity are left out, which only lowers the bound. What it does not prove: that any
//! strategy reaches it, nor anything about what a strategy keeps beyond the required parts.
//!
//! Assumptions: the cache model of [`prefix_cache`](crate::prefix_cache) (a token is read only if an
//! earlier call of the run wrote the same prefix; nothing expires during a run); a strategy
//! sends only messages of the history as it stands and text of its own, never the bytes of a
//! message that does not exist yet; untouchable turns are sent as they are.

use cutctx_session::PriceTable;

/// One call's parts as the bound sees them: the tools, and every turn by position with
/// whether the strategy must send it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Needs {
    /// The tokens of the tool definitions (and of anything else outside the turns).
    pub tools: u64,
    /// How many of the leading turns are system turns (what a warm prefix holds with the
    /// tools).
    pub system_turns: usize,
    /// Per turn position: its tokens and whether every strategy must send it.
    pub turns: Vec<(u64, bool)>,
}

/// The least any strategy can pay, in base-input-token units, for the calls `calls` of one
/// run (in order) under `prices`; `warm` when the run's first call finds its tools and system
/// turns already cached (written by another conversation with the same prefix).
///
/// Turn positions must be stable across calls: the `p`-th turn of a call is the `p`-th turn
/// of every later call (true of a history that only grows).
///
/// ```
/// use cutctx_session::PriceTable;
/// use cutctx_replay::bound::{Needs, lower_bound};
/// let p = PriceTable::anthropic();
/// // Two calls: 1,000 tokens of tools, then one required turn of 100, then a second of 50.
/// let one = Needs { tools: 1_000, system_turns: 0, turns: vec![(100, true)] };
/// let two = Needs { tools: 1_000, system_turns: 0, turns: vec![(100, true), (50, true)] };
/// let units = lower_bound(&[one, two], &p, false);
/// // Call 1 writes 1,100 (read again next call); call 2 reads 1,100, and its 50 new tokens
/// // are never needed again: at least 1 each.
/// assert!((units - (1_100.0 * 1.25 + 1_100.0 * 0.1 + 50.0)).abs() < 1e-9);
/// ```
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    reason = "token counts are far below 2^52"
)]
pub fn lower_bound(calls: &[Needs], prices: &PriceTable, warm: bool) -> f64 {
    let read = prices.cache_read;
    let uncached = prices.cache_write.min(1.0);
    let written_then_read = (prices.cache_write + read).min(2.0 * uncached) - read;
    let mut units = 0.0;
    let mut seen_turns = 0_usize;
    for (k, call) in calls.iter().enumerate() {
        let next = calls.get(k + 1);
        // The tools are new at the first call alone (unless warm), and needed at every call.
        let tools_new = k == 0 && !warm;
        units += call.tools as f64
            * match (tools_new, next.is_some()) {
                (false, _) => read,
                (true, true) => written_then_read,
                (true, false) => uncached,
            };
        for (p, &(tokens, required)) in call.turns.iter().enumerate() {
            if !required {
                continue;
            }
            // A warm start holds the tools and the leading system turns, nothing more.
            let new = p >= seen_turns && !(warm && k == 0 && p < call.system_turns);
            let again = next.is_some_and(|n| n.turns.get(p).is_some_and(|t| t.1));
            units += tokens as f64
                * match (new, again) {
                    (false, _) => read,
                    (true, true) => written_then_read,
                    (true, false) => uncached,
                };
        }
        seen_turns = call.turns.len();
    }
    units
}
