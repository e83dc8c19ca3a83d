//! The prefix-cache model the replay prices calls with: which part of a request a provider
//! serves from its cache over one recorded run, under the rules and prices of a
//! [`PriceTable`] (`cutctx_session::cache`, where the providers' published rules are cited).
//!
//! **The model.** A request is a sequence of segments in the order providers read them: the
//! fixed part (tool definitions, system, settings) and then each message. A boundary is the
//! end of a segment; the cache holds prefixes, each named by the chained digest of its
//! segments, so a prefix is found again only when every byte before it is the same. The
//! calls of one run follow each other within the providers' lifetimes (five minutes and
//! more), so nothing expires during a replay. By default nothing is shared between runs, so
//! each run's first call writes its tools and system prompt in full; a replay can instead
//! start every strategy with that prefix held ([`PrefixCache::warm`]), as a deployment serving
//! many conversations with the same prefix finds it (Anthropic caches per organisation and
//! renews an entry's five-minute lifetime at each hit). Hits are counted at message
//! boundaries: a provider may also match into the first changed message, which this model
//! leaves out (it errs towards fewer hits, for every strategy alike).
//!
//! Where the provider caches only at breakpoints (Anthropic), the replay marks every
//! strategy's requests alike (see [`Marking`](crate::Marking)): the last message (what
//! Anthropic's automatic caching and the usual agent loops do), so each call writes its whole
//! prompt and the next reads it back, and the end of the system prefix, so a request that
//! changes an early message still reads the tools and system prompt. A block is a content
//! block: a message of string content is one, a list of content is one per item, each tool
//! call one more.

use std::collections::BTreeMap;

use cutctx_session::PriceTable;

/// Anthropic checks for cache hits at the block boundaries up to about this many blocks
/// before each breakpoint.
pub const LOOKBACK_BLOCKS: u64 = 20;

/// One boundary of a request: the end of its fixed part or of one of its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundary {
    /// The chained digest of everything before the boundary.
    pub key: [u8; 32],
    /// The tokens before the boundary.
    pub tokens: u64,
    /// The content blocks before the boundary.
    pub blocks: u64,
}

/// A request as the cache sees it: its boundaries in order (the fixed part's first) and the
/// boundaries that carry a breakpoint (indices into `boundaries`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CacheView {
    /// Every boundary, in order; the last one's tokens are the request's.
    pub boundaries: Vec<Boundary>,
    /// The boundaries marked with a cache breakpoint, ascending.
    pub breakpoints: Vec<usize>,
}

impl CacheView {
    /// The request's tokens.
    #[must_use]
    pub fn tokens(&self) -> u64 {
        self.boundaries.last().map_or(0, |b| b.tokens)
    }
}

/// What one call paid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bill {
    /// The request's tokens.
    pub tokens: u64,
    /// Read from the cache.
    pub cached: u64,
    /// Written to the cache at the write price.
    pub written: u64,
    /// The cost in base-input-token units.
    pub units: f64,
}

/// The provider's cache over one run: the prefixes it holds, by key.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    held: BTreeMap<[u8; 32], u64>,
}

impl PrefixCache {
    /// Sends `request`: what it reads, writes and costs under `prices`, and what it leaves
    /// in the cache for the calls after it.
    ///
    /// ```
    /// use cutctx_replay::prefix_cache::{Boundary, CacheView, PrefixCache};
    /// use cutctx_session::PriceTable;
    /// let at = |k: u8, tokens: u64| Boundary { key: [k; 32], tokens, blocks: u64::from(k) };
    /// let first = CacheView { boundaries: vec![at(1, 2_000), at(2, 3_000)], breakpoints: vec![1] };
    /// let second = CacheView { boundaries: vec![at(1, 2_000), at(2, 3_000), at(3, 3_500)], breakpoints: vec![2] };
    /// let mut cache = PrefixCache::default();
    /// let prices = PriceTable::anthropic();
    /// assert_eq!(cache.call(&first, &prices).written, 3_000); // all of it, at 1.25x
    /// let bill = cache.call(&second, &prices);
    /// assert_eq!((bill.cached, bill.written), (3_000, 500)); // exact: no rounding
    /// assert!((bill.units - (300.0 + 625.0)).abs() < 1e-9);
    /// ```
    pub fn call(&mut self, request: &CacheView, prices: &PriceTable) -> Bill {
        let tokens = request.tokens();
        let (cached, written) = if prices.breakpoints {
            self.by_breakpoints(request, prices)
        } else {
            self.automatic(request, prices)
        };
        Bill {
            tokens,
            cached,
            written,
            units: prices.units(tokens, cached, written),
        }
    }

    /// Holds the prefix ending at `boundary` as if an earlier conversation had written it
    /// (when it reaches the provider's minimum): a warm start.
    pub fn warm(&mut self, boundary: &Boundary, prices: &PriceTable) {
        if boundary.tokens >= prices.min_cached_tokens {
            self.held.insert(boundary.key, boundary.tokens);
        }
    }

    /// OpenAI, DeepSeek: the longest prefix held, at the provider's granularity; then every
    /// prefix of the request is held.
    fn automatic(&mut self, request: &CacheView, prices: &PriceTable) -> (u64, u64) {
        let common = request
            .boundaries
            .iter()
            .rev()
            .find(|b| self.held.contains_key(&b.key))
            .map_or(0, |b| b.tokens);
        for b in &request.boundaries {
            self.held.insert(b.key, b.tokens);
        }
        let cached = prices.cached(request.tokens(), common);
        (cached, request.tokens() - cached)
    }

    /// Anthropic: the longest prefix held that ends within the lookback of a breakpoint; the
    /// part up to the last breakpoint is written (when it reaches the minimum), and held.
    fn by_breakpoints(&mut self, request: &CacheView, prices: &PriceTable) -> (u64, u64) {
        let mut hit = 0_u64;
        for &bp in &request.breakpoints {
            let Some(mark) = request.boundaries.get(bp) else {
                continue;
            };
            let found = request.boundaries[..=bp]
                .iter()
                .rev()
                .take_while(|b| mark.blocks - b.blocks <= LOOKBACK_BLOCKS)
                .find(|b| self.held.contains_key(&b.key));
            if let Some(b) = found {
                hit = hit.max(b.tokens);
            }
        }
        let mut last = hit;
        for &bp in &request.breakpoints {
            if let Some(b) = request.boundaries.get(bp)
                && b.tokens >= prices.min_cached_tokens
            {
                self.held.insert(b.key, b.tokens);
                last = last.max(b.tokens);
            }
        }
        (hit, last - hit)
    }
}
