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

/// Where the per-model rows' cache multiples come from, read 2026-12-07.
const ANTHROPIC_ROW_SOURCE: &str = "cache multiples: /work/shared/background/CLIENTS_AND_APIS_2026-12.md \"Prices that differ by model\" and https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, https://www.anthropic.com/pricing (read 2026-12-07); input and output price: the anthropic table's (no per-model input price read)";

/// Where the per-model OpenAI rows' cache multiples come from, read 2026-12-07.
const OPENAI_ROW_SOURCE: &str = "cache multiples: /work/shared/background/CLIENTS_AND_APIS_2026-12.md \"Prices that differ by model\" and https://platform.openai.com/docs/pricing, https://platform.openai.com/docs/guides/prompt-caching (read 2026-12-07); input and output price: the openai table's (no per-model input price read)";

/// One row of the per-model prices ([`MODEL_PRICES`]): what a provider charges for one model
/// family's input, with the cache's prices as multiples of the input price.
///
/// A row names a model by a prefix of its identifier (`claude-sonnet-4` covers
/// `claude-sonnet-4-20250514` and `claude-sonnet-4-5`); [`PriceTable::for_model`] picks the
/// row with the longest prefix.
///
/// ```
/// use cutctx_session::cache::MODEL_PRICES;
/// let opus = MODEL_PRICES.iter().find(|r| r.model == "claude-opus-5-5").expect("a row");
/// assert_eq!((opus.cache_read, opus.cache_write_5m, opus.cache_write_1h), (0.05, 1.25, Some(2.0)));
/// assert!(opus.source.contains("2026-12-07"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// The provider, as the shipped table is named: `anthropic` or `openai`.
    pub provider: &'static str,
    /// The prefix of the model identifiers the row covers, in lower case.
    pub model: &'static str,
    /// The price of a million uncached input tokens (where no per-model price was read, the
    /// provider's shipped table's).
    pub input_per_million: f64,
    /// A cache read, as a multiple of the input price.
    pub cache_read: f64,
    /// A cache write that lives 5 minutes (OpenAI: every prompt's), as a multiple of the input
    /// price.
    pub cache_write_5m: f64,
    /// A cache write that lives an hour, as a multiple of the input price (`None`: the
    /// provider sells no such write).
    pub cache_write_1h: Option<f64>,
    /// An output token, as a multiple of the input price.
    pub output: Option<f64>,
    /// Where the figures come from, and the date they were read.
    pub source: &'static str,
}

/// An Anthropic row: the anthropic table's input ($3/M) and output (5×) prices.
const fn claude(model: &'static str, read: f64, write_5m: f64, write_1h: f64) -> ModelPrice {
    ModelPrice {
        provider: "anthropic",
        model,
        input_per_million: 3.0,
        cache_read: read,
        cache_write_5m: write_5m,
        cache_write_1h: Some(write_1h),
        output: Some(5.0),
        source: ANTHROPIC_ROW_SOURCE,
    }
}

/// An OpenAI row: the openai table's input ($2.50/M) and output (4×) prices; no 1-hour write.
const fn gpt(model: &'static str, read: f64, write: f64) -> ModelPrice {
    ModelPrice {
        provider: "openai",
        model,
        input_per_million: 2.5,
        cache_read: read,
        cache_write_5m: write,
        cache_write_1h: None,
        output: Some(4.0),
        source: OPENAI_ROW_SOURCE,
    }
}

/// The per-model prices, read 2026-12-07 (each row's [`ModelPrice::source`] says from where).
///
/// * Anthropic: Opus 5.5 reads at 0.05×; Fable 5.1 and Mythos 5.1 read at 0.025× (per a
///   published reading of the prompt-caching page, not confirmed on the page itself; their
///   writes are taken as the standard 1.25× / 2×); older Claude models 0.1× / 1.25× / 2×.
/// * OpenAI before GPT-5.6: writes cost nothing extra, reads are discounted per model
///   (gpt-4o 0.5×, gpt-4.1 0.25×, gpt-5 0.1×); GPT-5.6: writes 1.25× (its read is taken as
///   gpt-5's 0.1×). A later GPT-5.x with no row of its own falls to the `gpt-5` row: add a
///   row when one ships.
/// * No per-model input price was read: every row keeps its provider's shipped table's
///   ($3/M, $2.50/M), so its money column is that table's; its multiples are the model's.
///   Minimum cacheable lengths and block sizes are the provider table's too.
pub const MODEL_PRICES: &[ModelPrice] = &[
    claude("claude-opus-5-5", 0.05, 1.25, 2.0),
    claude("claude-fable-5-1", 0.025, 1.25, 2.0),
    claude("claude-mythos-5-1", 0.025, 1.25, 2.0),
    claude("claude-opus-4", 0.1, 1.25, 2.0),
    claude("claude-sonnet-4", 0.1, 1.25, 2.0),
    claude("claude-haiku-4", 0.1, 1.25, 2.0),
    claude("claude-3-7-sonnet", 0.1, 1.25, 2.0),
    claude("claude-3-5-sonnet", 0.1, 1.25, 2.0),
    claude("claude-3-5-haiku", 0.1, 1.25, 2.0),
    claude("claude-3-opus", 0.1, 1.25, 2.0),
    claude("claude-3-haiku", 0.1, 1.25, 2.0),
    gpt("gpt-4o", 0.5, 1.0),
    gpt("gpt-4.1", 0.25, 1.0),
    gpt("gpt-5", 0.1, 1.0),
    gpt("gpt-5.6", 0.1, 1.25),
];

impl PriceTable {
    /// The table for `model`: the row of [`MODEL_PRICES`] whose model is the longest prefix
    /// of `model` (compared in lower case, after any `provider/` namespace such as
    /// OpenRouter's), with its provider's caching rules (minimum, block size, breakpoints).
    /// The table is named `provider/row` and its write price is the 5-minute write's.
    /// `None` for a model no row covers.
    ///
    /// ```
    /// use cutctx_session::PriceTable;
    /// let t = PriceTable::for_model("claude-opus-5-5-20261101").expect("a row");
    /// assert_eq!((t.name.as_str(), t.cache_read, t.cache_write), ("anthropic/claude-opus-5-5", 0.05, 1.25));
    /// assert!(t.breakpoints);
    /// // gpt-5.6 is a longer prefix than gpt-5: writes are no longer free.
    /// assert_eq!(PriceTable::for_model("gpt-5.6-luna").expect("a row").cache_write, 1.25);
    /// assert_eq!(PriceTable::for_model("gpt-5-mini").expect("a row").cache_write, 1.0);
    /// assert_eq!(PriceTable::for_model("openai/GPT-4.1").expect("a row").cache_read, 0.25);
    /// assert!(PriceTable::for_model("m").is_none());
    /// ```
    #[must_use]
    pub fn for_model(model: &str) -> Option<Self> {
        let bare = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let row = MODEL_PRICES
            .iter()
            .filter(|r| bare.starts_with(r.model))
            .max_by_key(|r| r.model.len())?;
        let base = Self::named(row.provider)?;
        Some(Self {
            name: format!("{}/{}", row.provider, row.model),
            model: row.model.into(),
            input_per_million: row.input_per_million,
            cache_read: row.cache_read,
            cache_write: row.cache_write_5m,
            output: row.output,
            source: row.source.into(),
            ..base
        })
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

#[cfg(test)]
mod tests {
    use super::{MODEL_PRICES, PriceTable};

    #[test]
    fn a_model_picks_its_row_by_the_longest_prefix() {
        let t = PriceTable::for_model("claude-mythos-5-1").expect("a row");
        assert_eq!(t.name, "anthropic/claude-mythos-5-1");
        assert!((t.cache_read - 0.025).abs() < 1e-12);
        assert!(t.breakpoints);
        let t = PriceTable::for_model("claude-3-7-sonnet-20250219").expect("a row");
        assert_eq!((t.cache_read, t.cache_write), (0.1, 1.25));
        let t = PriceTable::for_model("gpt-4o-2024-08-06").expect("a row");
        assert_eq!((t.cache_read, t.cache_write), (0.5, 1.0));
        assert_eq!(t.cache_block_tokens, 128);
        assert!(!t.breakpoints);
        let t = PriceTable::for_model("gpt-5.6").expect("a row");
        assert_eq!((t.cache_read, t.cache_write), (0.1, 1.25));
        assert_eq!(
            PriceTable::for_model("gpt-5.1-codex").expect("a row").name,
            "openai/gpt-5"
        );
    }

    #[test]
    fn an_unknown_model_has_no_row() {
        for model in ["m", "", "deepseek-chat", "claude", "gpt-4", "gemini-3-pro"] {
            assert!(PriceTable::for_model(model).is_none(), "{model}");
        }
    }

    #[test]
    fn every_row_is_dated_and_its_provider_is_a_shipped_table() {
        for row in MODEL_PRICES {
            assert!(row.source.contains("2026-12-07"), "{}", row.model);
            assert!(
                PriceTable::named(row.provider).is_some(),
                "{}",
                row.provider
            );
            assert_eq!(row.model, row.model.to_ascii_lowercase());
        }
    }

    #[test]
    fn the_named_tables_are_unchanged() {
        assert_eq!(
            PriceTable::named("anthropic"),
            Some(PriceTable::anthropic())
        );
        assert_eq!(PriceTable::anthropic().name, "anthropic");
        assert_eq!(PriceTable::named("openai").expect("openai").cache_read, 0.5);
        assert!(PriceTable::named("deepseek").is_some());
    }
}
