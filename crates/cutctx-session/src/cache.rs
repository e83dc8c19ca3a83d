//! What a provider charges for input and how it caches, as a [`PriceTable`]: the shipped
//! tables, the published rules behind them, and the price of a call and of a summarizing call
//! ([`SummaryCall`]). The table stays beside the engine because the engine prices with it: a
//! session's early firing weighs a firing by its read and write prices
//! ([`EarlyFiring::from_prices`](crate::EarlyFiring::from_prices)). The model of which
//! prefixes a provider holds over a recorded run, with which the replay finds what each call
//! reads and writes, is `cutctx-replay`'s `prefix_cache`; it reads its parameters (minimum,
//! granularity, breakpoints) from this table.
//!
//! | provider | what is cached | hit | uncached part | cached part |
//! |---|---|---|---|---|
//! | `anthropic` | the prefix up to each `cache_control` breakpoint, from 1,024 tokens | the longest cached prefix ending within 20 blocks before a breakpoint, exactly | 1.25× up to the last breakpoint (a cache write), 1× after | 0.1× |
//! | `openai` | every prompt, automatically | the longest prefix computed before, from 1,024 tokens, floored to 128 | 1× | 0.5× |
//! | `deepseek` | every prompt, on disk | the longest prefix computed before, in 64-token units | 1× ($0.27/M) | $0.07/M |
//!
//! Where each rule comes from:
//!
//! * Anthropic's prompt-caching guide: the cache key is the whole prefix up to a block marked
//!   `cache_control`, in the order tools, system, messages; at most four marks; the minimum
//!   cacheable prompt is 1,024 tokens for Sonnet-class models (a shorter one is processed
//!   uncached, at 1×); the system checks for hits at the block boundaries up to about 20
//!   blocks before each mark; writes cost 1.25× the base input price (5-minute lifetime),
//!   reads 0.1×.
//! * OpenAI's prompt-caching announcement and guide: automatic on prompts of 1,024 tokens and
//!   more; "the longest prefix of a prompt that has been previously computed, starting at
//!   1,024 tokens and increasing in 128-token increments"; GPT-4o cached input at $1.25/M
//!   against $2.50/M, 0.5×. No write premium.
//! * DeepSeek's context-caching guide: automatic, every request builds a disk cache of its
//!   prefix and a later request's overlapping prefix is a hit; stored in 64-token units
//!   (under 64 tokens nothing is cached); $0.07/M on a hit against $0.27/M on a miss.
//!
//! Output tokens are left out of a call's bill: the answers are the same under every
//! strategy. What differs is charged apart (see [`SummaryCall`]).
//!
//! **Summarizing calls.** A strategy that writes a summary makes a call of its own, and pays
//! for it under the same table ([`PriceTable::summary_units`], the one place this is priced):
//! its input's cached part at the read price, the rest at the base price (its request is
//! read by nothing later, so nothing is gained by writing it), and its output (the summary)
//! at the table's output price (not priced when the table has none). What part of the input
//! is cached depends on how the strategy asks: one that sends the prefix it last sent plus an
//! instruction reads that prefix from the cache; one that sends the span to summarize as a
//! fresh prompt reads nothing.

use serde::Deserialize;

/// What a provider charges for input, and how it caches.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// The table's name, for example `anthropic`.
    pub name: String,
    /// The model the base price is for.
    pub model: String,
    /// The currency of the prices.
    #[serde(default = "usd")]
    pub currency: String,
    /// The base price of a million uncached input tokens.
    pub input_per_million: f64,
    /// The price of a cached token, as a multiple of the base price.
    pub cache_read: f64,
    /// The price of an uncached token, as a multiple of the base price (a cache write).
    pub cache_write: f64,
    /// The shortest prefix the provider caches, in tokens.
    pub min_cached_tokens: u64,
    /// The granularity of a cache hit, in tokens.
    pub cache_block_tokens: u64,
    /// Whether only prefixes ending at a cache breakpoint are cached (Anthropic), rather than
    /// every prompt (OpenAI, DeepSeek).
    #[serde(default)]
    pub breakpoints: bool,
    /// The price of an output token, as a multiple of the base input price: what the replay
    /// charges for reasoning a compaction invalidated, which the model thinks again. Left out,
    /// that reasoning is counted but not priced.
    #[serde(default)]
    pub output: Option<f64>,
    /// When the prices were read, and from where.
    #[serde(default)]
    pub source: String,
}

fn usd() -> String {
    "USD".to_owned()
}

/// Where the shipped prices come from.
const SOURCE: &str = "list prices and caching rules as published by each provider (read 2026-11; see cutctx_session::cache): check them, or pass a table of your own";

impl PriceTable {
    /// The shipped tables' names.
    pub const NAMES: [&'static str; 3] = ["anthropic", "openai", "deepseek"];

    /// Anthropic, Claude Sonnet 4: $3 per million input tokens; cache reads 0.1×, cache writes
    /// 1.25× of that; output $15 per million (5×).
    #[must_use]
    pub fn anthropic() -> Self {
        Self {
            name: "anthropic".into(),
            model: "claude-sonnet-4".into(),
            currency: usd(),
            input_per_million: 3.0,
            cache_read: 0.1,
            cache_write: 1.25,
            min_cached_tokens: 1024,
            cache_block_tokens: 1,
            breakpoints: true,
            output: Some(5.0),
            source: SOURCE.into(),
        }
    }

    /// OpenAI, GPT-4o: $2.50 per million input tokens; cached input 0.5×; output $10 per
    /// million (4×).
    #[must_use]
    pub fn openai() -> Self {
        Self {
            name: "openai".into(),
            model: "gpt-4o".into(),
            currency: usd(),
            input_per_million: 2.5,
            cache_read: 0.5,
            cache_write: 1.0,
            min_cached_tokens: 1024,
            cache_block_tokens: 128,
            breakpoints: false,
            output: Some(4.0),
            source: SOURCE.into(),
        }
    }

    /// DeepSeek: $0.27 per million input tokens on a cache miss, $0.07 on a hit; output $1.10
    /// per million.
    #[must_use]
    pub fn deepseek() -> Self {
        Self {
            name: "deepseek".into(),
            model: "deepseek-chat".into(),
            currency: usd(),
            input_per_million: 0.27,
            cache_read: 0.07 / 0.27,
            cache_write: 1.0,
            min_cached_tokens: 64,
            cache_block_tokens: 64,
            breakpoints: false,
            output: Some(1.10 / 0.27),
            source: SOURCE.into(),
        }
    }

    /// The shipped table called `name` (one of [`PriceTable::NAMES`]).
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "anthropic" => Some(Self::anthropic()),
            "openai" => Some(Self::openai()),
            "deepseek" => Some(Self::deepseek()),
            _ => None,
        }
    }

    /// A table from a JSON document with this type's fields (`currency` and `source` may be
    /// left out).
    ///
    /// # Errors
    ///
    /// A message naming what is wrong: not JSON, an unknown or missing field, a negative or
    /// non-finite price, a block of zero tokens.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let t: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let prices = [
            t.input_per_million,
            t.cache_read,
            t.cache_write,
            t.output.unwrap_or(0.0),
        ];
        if prices.iter().any(|p| !p.is_finite() || *p < 0.0) {
            return Err("prices must be finite and not negative".into());
        }
        if t.cache_block_tokens == 0 {
            return Err("cache_block_tokens must be at least 1".into());
        }
        Ok(t)
    }

    /// The cached part of a request of `tokens` tokens whose longest common prefix with the
    /// previous request is `common` tokens.
    ///
    /// ```
    /// use cutctx_session::PriceTable;
    /// let p = PriceTable::openai();
    /// assert_eq!(p.cached(5_000, 1_000), 0);      // below the minimum
    /// assert_eq!(p.cached(5_000, 1_300), 1_280);  // floored to 128-token blocks
    /// ```
    #[must_use]
    pub const fn cached(&self, tokens: u64, common: u64) -> u64 {
        let common = if common < tokens { common } else { tokens };
        if common < self.min_cached_tokens {
            return 0;
        }
        common / self.cache_block_tokens * self.cache_block_tokens
    }

    /// A call's cost in base-input-token units: `cached` tokens at the read price, `written`
    /// at the write price, the rest of `tokens` at the base price.
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn units(&self, tokens: u64, cached: u64, written: u64) -> f64 {
        let rest = tokens.saturating_sub(cached).saturating_sub(written);
        cached as f64 * self.cache_read + written as f64 * self.cache_write + rest as f64
    }

    /// `units` in money.
    #[must_use]
    pub fn money(&self, units: f64) -> f64 {
        units * self.input_per_million / 1e6
    }
}

/// One summarizing call: what it sends, how much of that the cache holds, what it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SummaryCall {
    /// The call's input tokens.
    pub input_tokens: u64,
    /// Of those, read from the cache.
    pub cached_tokens: u64,
    /// The summary's tokens: the call's output.
    pub output_tokens: u64,
}

impl PriceTable {
    /// A summarizing call's cost in base-input-token units: cached input at the read price,
    /// the rest of the input at the base price, the output at the output price (0 when the
    /// table has none).
    ///
    /// ```
    /// use cutctx_session::PriceTable;
    /// use cutctx_session::cache::SummaryCall;
    /// let p = PriceTable::anthropic();
    /// let call = SummaryCall { input_tokens: 10_000, cached_tokens: 9_000, output_tokens: 500 };
    /// // 9,000 read at 0.1, 1,000 at 1, 500 written out at 5.
    /// assert!((p.summary_units(&call) - (900.0 + 1_000.0 + 2_500.0)).abs() < 1e-9);
    /// ```
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn summary_units(&self, call: &SummaryCall) -> f64 {
        let cached = call.cached_tokens.min(call.input_tokens);
        cached as f64 * self.cache_read
            + (call.input_tokens - cached) as f64
            + call.output_tokens as f64 * self.output.unwrap_or(0.0)
    }
}
