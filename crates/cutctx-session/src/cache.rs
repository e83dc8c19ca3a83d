//! The price of a call under prompt caching: which part of a request the provider serves from
//! its cache, and what the cached and uncached parts cost.
//!
//! **The cache model.** A provider caches prompts by prefix. A call's cached part is the
//! longest common prefix, in tokens, of its request and the previous call's request (tool
//! definitions and system first, then the messages in order: the order providers read them),
//! floored to the provider's block and counted only from its minimum cacheable length:
//!
//! | provider | minimum | block | uncached part | cached part |
//! |---|---|---|---|---|
//! | `anthropic` | 1,024 | 128 | 1.25× (cache write) | 0.1× (cache read) |
//! | `openai` | 1,024 | 128 | 1× | 0.5× |
//! | `deepseek` | 64 | 64 | 1× ($0.27/M) | $0.07/M |
//!
//! OpenAI documents exactly this model: automatic caching from 1,024 tokens, hits in 128-token
//! steps. Anthropic caches at the `cache_control` marks a request carries; the model assumes
//! the common agent-loop practice of a mark on the last message of every request (which
//! `cutctx session --cache-breakpoints auto` places at a firing), so everything the previous
//! request wrote is read back, and the same 1,024/128 granularity stands in for its
//! per-model minimums. DeepSeek caches on disk in 64-token units. Only the previous request is
//! assumed cached: calls of an agent loop follow each other within the five-minute lifetime.
//! Output tokens are left out: they are the same under every strategy.

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
    /// When the prices were read, and from where.
    #[serde(default)]
    pub source: String,
}

fn usd() -> String {
    "USD".to_owned()
}

/// Where the shipped prices come from.
const SOURCE: &str = "list prices as known in mid-2025, not read again since: check them, or pass a table of your own";

impl PriceTable {
    /// The shipped tables' names.
    pub const NAMES: [&'static str; 3] = ["anthropic", "openai", "deepseek"];

    /// Anthropic, Claude Sonnet 4: $3 per million input tokens; cache reads 0.1×, cache writes
    /// 1.25× of that.
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
            cache_block_tokens: 128,
            source: SOURCE.into(),
        }
    }

    /// OpenAI, GPT-4o: $2.50 per million input tokens; cached input 0.5×.
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
            source: SOURCE.into(),
        }
    }

    /// DeepSeek: $0.27 per million input tokens on a cache miss, $0.07 on a hit.
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
            source: SOURCE.into(),
        }
    }

    /// The shipped table called `name`.
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
        let prices = [t.input_per_million, t.cache_read, t.cache_write];
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

    /// A call's cost in base-input-token units: cached tokens at the read price, the rest at
    /// the write price.
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn units(&self, tokens: u64, cached: u64) -> f64 {
        cached as f64 * self.cache_read + tokens.saturating_sub(cached) as f64 * self.cache_write
    }

    /// `units` in money.
    #[must_use]
    pub fn money(&self, units: f64) -> f64 {
        units * self.input_per_million / 1e6
    }
}
