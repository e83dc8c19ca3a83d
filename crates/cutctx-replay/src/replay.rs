//! Replaying a recorded agent loop call by call under three strategies and pricing each: no
//! compaction, stateless compaction before every call, and a session (`cutctx-session`'s
//! [`step`]).
//!
//! Call `k` sends the messages before the `k`-th model turn (an assistant message; for
//! Responses, the first item of a model step), with everything else of the recorded request
//! (tools, system, settings). Summaries are stood in for by text of the length the plan asks
//! for, so the bill is that of a real summary of that size.
//!
//! **Cache marks.** Where the provider caches only at breakpoints (Anthropic), what a request
//! reads depends on where the client marks it. By default ([`Marking::Shared`]) every strategy
//! is marked by one rule any client can follow without knowing what compaction did: the end of
//! the system prefix (tools and system) and the last message. The comparison then prices the
//! strategies' requests, not their marks. [`Marking::SessionOnly`] is the asymmetric setting of
//! earlier versions, kept to show what the system mark is worth.
//!
//! **Warm prefix.** By default the cache starts empty at every run, so each run's first call
//! writes its tools and system prompt in full. With [`ReplayOptions::warm_prefix`] every
//! strategy's cache starts holding that prefix, as when many conversations share it.
//!
//! **Reasoning.** Each strategy's [`StrategyReport::reasoning_tokens`] is the reasoning its
//! compactions invalidated (thinking blocks, reasoning items after a compaction's first
//! change), each block counted once; [`StrategyReport::reasoning_units`] prices it at the
//! table's output price, as reasoning the model thinks again. A call at which no valid
//! compaction exists (`FORMAT_REASONING_OPEN_TOOL_LOOP`) is sent uncompacted.
//!
//! **Lower bound.** Each call's required parts (see [`bound`](crate::bound)) are collected as
//! the run is replayed, and [`Replay::bound_units`] is the least any strategy could pay.
//!
//! **More strategies.** With [`ReplayExtras::compare`] the replay adds the offline reference
//! `hindsight` ([`hindsight`](crate::hindsight)) and the peers of [`peers`](crate::peers);
//! [`ReplayExtras::external`] adds strategies whose requests were made elsewhere. Every
//! strategy is priced by the same meter, cache model ([`prefix_cache`](crate::prefix_cache))
//! and marks, its summaries sized and charged by one rule ([`summaries`](crate::summaries):
//! native, cached-prefix or fresh, priced by [`PriceTable::summary_units`];
//! [`StrategyReport::summary_units`], part of `cost_units`, and each firing's summaries priced
//! both ways in [`StrategyReport::summary_firings`]), and its
//! [`retention`](crate::retention) measured against the same recorded answers.

use cutctx_formats::descriptor::Carrier;
use cutctx_formats::{Format, FormatError, ProviderTranscript, ReasoningOutcome};
use cutctx_model::{CompactionBudget, CompactionError, Role, SummarizationRequest};
use cutctx_policies::TokenEstimator;
use serde_json::Value;

use cutctx_formats::{fixed_tokens, list_key, message_list as history, message_tokens};
use cutctx_session::cache::{PriceTable, SummaryCall};
use cutctx_session::{
    PrefixItem, SUMMARY_INSTRUCTION, SessionConfig, SessionState, call_points, compact_to,
    message_digest, step, with_instruction,
};
use sha2::{Digest, Sha256};

use crate::bound::{Needs, lower_bound};
use crate::prefix_cache::{Boundary, CacheView, PrefixCache};
use crate::retention::{Retention, Targets};
use crate::summaries::{SummaryCost, SummaryFiring, SummaryKind};

/// How the replayed requests are marked for a provider that caches at breakpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Marking {
    /// Every strategy marks the end of the system prefix (the leading system and developer
    /// messages, or the tools and `system` when the format keeps them outside the list) and
    /// the last message.
    #[default]
    Shared,
    /// Only the session marks the end of the system prefix and of its compacted prefix, after
    /// its first firing (as `cutctx session --cache-breakpoints auto` does); none and stateless
    /// mark the last message alone. This favours the session: a firing keeps the system prefix
    /// cached for it and for no one else.
    SessionOnly,
}

/// How a replay is run: where requests are marked, and whether each run starts with its
/// tools and system prompt already cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayOptions {
    /// Where the requests carry cache breakpoints.
    pub marking: Marking,
    /// Whether the run's first call finds the prefix of tools and system turns already in the
    /// cache, as in a deployment serving many conversations with the same tools and system
    /// prompt (Anthropic caches per organisation, and each hit renews the entry's lifetime).
    /// Off by default: nothing is shared between runs, and the first call writes that prefix
    /// in full. Every strategy, and the lower bound, starts equally warm.
    pub warm_prefix: bool,
}

impl From<Marking> for ReplayOptions {
    fn from(marking: Marking) -> Self {
        Self {
            marking,
            warm_prefix: false,
        }
    }
}

/// What one strategy cost over the run.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyReport {
    /// `none`, `stateless`, `session`, `hindsight`, a peer's name or an external strategy's.
    pub name: String,
    /// Calls replayed.
    pub calls: usize,
    /// Input tokens sent over all calls (with the output reserve left out).
    pub tokens_sent: u64,
    /// Of those, served from the cache.
    pub cached_tokens: u64,
    /// Calls whose request does not extend the previous one (the cache busted).
    pub busts: usize,
    /// Compactions performed.
    pub compactions: usize,
    /// The cost in base-input-token units, the summarizing calls' included.
    pub cost_units: f64,
    /// Of `cost_units`, the summarizing calls' ([`PriceTable::summary_units`]).
    pub summary_units: f64,
    /// Summarizing calls made.
    pub summaries: usize,
    /// Each firing that summarized, in call order: what it was charged, and its summaries'
    /// cost asked as a cached-prefix request and asked fresh ([`SummaryFiring`]).
    pub summary_firings: Vec<SummaryFiring>,
    /// What the requests kept of what the model used ([`retention`](crate::retention)).
    pub retention: Retention,
    /// The cost in the price table's currency.
    pub cost_money: f64,
    /// The largest request, with the output reserve.
    pub peak_tokens: u64,
    /// Calls whose request with the reserve exceeds the window.
    pub over_window: usize,
    /// Of the calls, those whose untouchable part alone exceeds the window: no strategy can
    /// fit them, and all send them uncompacted.
    pub fixed_over: usize,
    /// Calls over the window whose untouchable part fits it: where the strategy, not the
    /// run, is over.
    pub fitting_over: usize,
    /// The cost in base-input-token units over the calls whose untouchable part fits the
    /// window: the calls where the strategies can differ.
    pub fitting_units: f64,
    /// Input tokens sent over the calls whose untouchable part fits the window.
    pub fitting_tokens: u64,
    /// Of those, served from the cache.
    pub fitting_cached: u64,
    /// The estimated tokens of the thinking blocks and reasoning items its compactions
    /// invalidated, each counted once (at the first compaction that invalidated it): reasoning
    /// the model no longer has, and thinks again at the output price.
    pub reasoning_tokens: u64,
    /// Those tokens priced at the table's output price, in base-input-token units; `None` when
    /// the table has no output price. Not part of `cost_units`, which prices input alone.
    pub reasoning_units: Option<f64>,
    /// Each call's request, with the reserve.
    pub sizes: Vec<u64>,
    /// The cost in units after each call.
    pub cumulative_units: Vec<f64>,
}

impl StrategyReport {
    /// The cost with the summaries free: `cost_units - summary_units`, what the strategy's
    /// requests alone cost.
    #[must_use]
    pub fn summaries_free_units(&self) -> f64 {
        self.cost_units - self.summary_units
    }

    /// The summaries' cost summed over the firings had each been asked as a cached-prefix
    /// request (firings with given figures left out).
    #[must_use]
    pub fn summary_cached_prefix_units(&self) -> f64 {
        self.summary_firings
            .iter()
            .filter_map(|f| f.cached_prefix.map(|c| c.units))
            // From +0: an empty `f64` sum is -0, which the JSON would print as `-0.0`.
            .fold(0.0, |total, units| total + units)
    }

    /// The summaries' cost summed over the firings had each been asked fresh (firings with
    /// given figures left out).
    #[must_use]
    pub fn summary_fresh_units(&self) -> f64 {
        self.summary_firings
            .iter()
            .filter_map(|f| f.fresh.map(|c| c.units))
            // From +0: an empty `f64` sum is -0, which the JSON would print as `-0.0`.
            .fold(0.0, |total, units| total + units)
    }

    /// Cached tokens over tokens sent (0 when nothing was sent).
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn hit_rate(&self) -> f64 {
        if self.tokens_sent == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.tokens_sent as f64
        }
    }

    /// Cached tokens over tokens sent, over the calls whose untouchable part fits the window
    /// (0 when there are none).
    #[must_use]
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    pub fn fitting_hit_rate(&self) -> f64 {
        if self.fitting_tokens == 0 {
            0.0
        } else {
            self.fitting_cached as f64 / self.fitting_tokens as f64
        }
    }
}

/// A replay's result: the window and the strategies, in the order none, stateless, session,
/// then (when asked) hindsight, the peers and the external strategies.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The window, in tokens.
    pub window: u64,
    /// The whole run's request, with the reserve: the last call's size uncompacted.
    pub final_tokens: u64,
    /// The least any strategy that sends each call's untouchable part (tools, system turns,
    /// protected recent turns) could pay for the run, in base-input-token units
    /// ([`lower_bound`]).
    pub bound_units: f64,
    /// The strategies.
    pub strategies: Vec<StrategyReport>,
}

/// The stand-in summary: text of about `target_tokens` tokens at four characters a token.
pub(crate) fn stand_in(
    _: &ProviderTranscript,
    r: &SummarizationRequest,
) -> Result<String, FormatError> {
    let n = usize::try_from(r.target_tokens()).unwrap_or(0).max(1);
    let head = format!("[summary of {} turns] ", r.turn_ids().len());
    let mut text = head;
    while text.len() < n * 4 {
        text.push_str("summary ");
    }
    Ok(text)
}

/// The request of call `k`: `run` with its list cut to `len` messages.
pub(crate) fn request_at(format: Format, run: &Value, len: usize) -> Value {
    let list: Vec<Value> = history(format, run).get(..len).unwrap_or(&[]).to_vec();
    match run {
        Value::Object(map) => {
            let mut out = map.clone();
            out.insert(list_key(format).to_owned(), Value::Array(list));
            Value::Object(out)
        }
        _ => Value::Array(list),
    }
}

/// `request` as the cache sees it: the fixed part (everything but the message list, as text)
/// and then each message, with the breakpoints a client puts there: the last message of the
/// request (automatic caching), every segment holding a `cache_control` mark, and `extra`
/// (the session's mark at the end of its prefix, as a message count).
pub(crate) fn view(
    format: Format,
    request: &Value,
    config: &SessionConfig,
    extra: &[usize],
) -> Result<CacheView, FormatError> {
    let estimator = config.estimator.as_ref();
    let fixed = match request {
        Value::Object(map) => {
            let mut rest = map.clone();
            rest.remove(list_key(format));
            Value::Object(rest)
        }
        _ => Value::Null,
    };
    let mut key: [u8; 32] = Sha256::digest(fixed.to_string().as_bytes()).into();
    let mut tokens = fixed_tokens(format, request, estimator)?;
    let mut blocks = 1_u64;
    let mut out = CacheView::default();
    if marked(&fixed) {
        out.breakpoints.push(0);
    }
    out.boundaries.push(Boundary {
        key,
        tokens,
        blocks,
    });
    for m in history(format, request) {
        let mut h = Sha256::new();
        h.update(key);
        h.update(message_digest(m));
        key = h.finalize().into();
        tokens += message_tokens(format, m, estimator)?;
        blocks += content_blocks(format, m);
        if marked(m) {
            out.breakpoints.push(out.boundaries.len());
        }
        out.boundaries.push(Boundary {
            key,
            tokens,
            blocks,
        });
    }
    for &n in extra {
        out.breakpoints.push(n.min(out.boundaries.len() - 1));
    }
    out.breakpoints.push(out.boundaries.len() - 1);
    out.breakpoints.sort_unstable();
    out.breakpoints.dedup();
    Ok(out)
}

/// Whether `value` holds a `cache_control` mark at any depth.
fn marked(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key("cache_control") || map.values().any(marked),
        Value::Array(list) => list.iter().any(marked),
        _ => false,
    }
}

/// The content blocks of a message of `format`: one for string content, one per item of a
/// content list, and one per tool call the format lists beside its content (Chat's
/// `tool_calls`; a call that is a block or an item of its own is counted as one already).
fn content_blocks(format: Format, message: &Value) -> u64 {
    let content = match message.get("content") {
        Some(Value::Array(list)) => list.len().max(1),
        _ => 1,
    };
    let calls = match format.descriptor().tool_call.carrier {
        Carrier::Field { key } => message
            .get(key)
            .and_then(Value::as_array)
            .map_or(0, Vec::len),
        Carrier::Message { .. } | Carrier::Item { .. } | Carrier::Block { .. } => 0,
    };
    u64::try_from(content + calls).unwrap_or(u64::MAX)
}

/// A firing's summaries as a strategy asks for them, with what it takes to price them either
/// way ([`summaries`](crate::summaries)): the cached-prefix request and the spans.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    /// How the strategy asks, and so how it is charged.
    pub(crate) kind: SummaryKind,
    /// The cached-prefix request: the conversation as the strategy would send it at this call
    /// plus the instruction (`None` for given figures).
    pub(crate) prefix: Option<Value>,
    /// Per span summarized: its tokens (the instruction left out) and its summary's tokens
    /// ([`summary_tokens`](crate::summaries::summary_tokens) or the plan's target).
    pub(crate) spans: Vec<(u64, u64)>,
    /// The figures an external strategy gives.
    pub(crate) given: Option<SummaryCall>,
}

/// One call of a strategy as the meter prices it.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The request sent.
    pub(crate) request: Value,
    /// Its marks besides the last message ([`shared_marks`] and the like).
    pub(crate) marks: Vec<usize>,
    /// Whether the strategy compacted at this call.
    pub(crate) compacted: bool,
    /// Whether the call's untouchable part alone exceeds the window.
    pub(crate) unsatisfiable: bool,
    /// The reasoning the compaction invalidated.
    pub(crate) reasoning: Option<ReasoningOutcome>,
    /// The summaries asked before this call, if it summarized.
    pub(crate) summary: Option<Asked>,
}

impl Sent {
    /// A call sending `request` as it is, marked `marks`.
    pub(crate) const fn plain(request: Value, marks: Vec<usize>, unsatisfiable: bool) -> Self {
        Self {
            request,
            marks,
            compacted: false,
            unsatisfiable,
            reasoning: None,
            summary: None,
        }
    }
}

/// The spans of a compaction's plan, one per summarization request: the tokens of the turns
/// it summarizes, and the plan's target length for its summary (the length rule of
/// [`summaries`](crate::summaries)).
pub(crate) fn plan_spans(
    input: &cutctx_model::Transcript,
    plan: &cutctx_invariants::CompactionPlan,
) -> Vec<(u64, u64)> {
    let tokens: std::collections::BTreeMap<&str, u64> = input
        .turn_ids()
        .zip(input.token_estimates().iter().copied())
        .collect();
    plan.summarization_requests
        .iter()
        .map(|r| {
            (
                r.turn_ids()
                    .iter()
                    .map(|id| tokens.get(id.as_ref()).copied().unwrap_or(0))
                    .sum(),
                r.target_tokens(),
            )
        })
        .collect()
}

/// Accumulates one strategy's figures call by call.
pub(crate) struct Meter<'a> {
    report: StrategyReport,
    /// The reasoning already counted, by message and block.
    invalidated: std::collections::BTreeSet<(Option<usize>, Option<usize>)>,
    previous: Option<CacheView>,
    pub(crate) cache: PrefixCache,
    prices: &'a PriceTable,
    config: &'a SessionConfig,
}

impl<'a> Meter<'a> {
    pub(crate) fn new(name: &str, prices: &'a PriceTable, config: &'a SessionConfig) -> Self {
        Self {
            report: StrategyReport {
                name: name.to_owned(),
                calls: 0,
                tokens_sent: 0,
                cached_tokens: 0,
                busts: 0,
                compactions: 0,
                cost_units: 0.0,
                summary_units: 0.0,
                summaries: 0,
                summary_firings: Vec::new(),
                retention: Retention::default(),
                cost_money: 0.0,
                peak_tokens: 0,
                over_window: 0,
                fixed_over: 0,
                fitting_over: 0,
                fitting_units: 0.0,
                fitting_tokens: 0,
                fitting_cached: 0,
                reasoning_tokens: 0,
                reasoning_units: prices.output.map(|_| 0.0),
                sizes: Vec::new(),
                cumulative_units: Vec::new(),
            },
            invalidated: std::collections::BTreeSet::new(),
            previous: None,
            cache: PrefixCache::default(),
            prices,
            config,
        }
    }

    /// Prices one call: its summarizing calls first, then its request.
    pub(crate) fn send(&mut self, sent: &Sent) -> Result<(), FormatError> {
        let format = self.config.format;
        if let Some(asked) = &sent.summary {
            let firing = self.summarize(asked)?;
            self.report.summary_units += firing.charged.units;
            self.report.cost_units += firing.charged.units;
            self.report.summaries += firing.charged.calls;
            self.report.summary_firings.push(firing);
        }
        if let Some(outcome) = &sent.reasoning {
            self.invalidated(outcome, self.config.estimator.as_ref());
        }
        self.report.compactions += usize::from(sent.compacted);
        let v = view(format, &sent.request, self.config, &sent.marks)?;
        self.call(v, sent.unsatisfiable);
        Ok(())
    }

    /// Prices a firing's summaries both ways, before the call they come before, and charges
    /// them by the one rule of [`summaries`](crate::summaries): `native` and `cached-prefix`
    /// as the cached-prefix request, `fresh` as the spans alone, `given` as given.
    fn summarize(&self, asked: &Asked) -> Result<SummaryFiring, FormatError> {
        let format = self.config.format;
        let output: u64 = asked.spans.iter().map(|&(_, out)| out).sum();
        let cached_prefix = match &asked.prefix {
            Some(request) => {
                let marks = if self.prices.breakpoints {
                    shared_marks(format, request)
                } else {
                    Vec::new()
                };
                let v = view(format, request, self.config, &marks)?;
                // What the cache holds of it; the call itself leaves nothing anyone reads.
                let bill = self.cache.clone().call(&v, self.prices);
                Some(self.cost(&[SummaryCall {
                    input_tokens: bill.tokens,
                    cached_tokens: bill.cached,
                    output_tokens: output,
                }]))
            }
            None => None,
        };
        let fresh = if asked.kind == SummaryKind::Given {
            None
        } else {
            let instruction = message_tokens(
                format,
                &format.descriptor().user_text(SUMMARY_INSTRUCTION),
                self.config.estimator.as_ref(),
            )?;
            let calls: Vec<SummaryCall> = asked
                .spans
                .iter()
                .map(|&(span, out)| SummaryCall {
                    input_tokens: span + instruction,
                    cached_tokens: 0,
                    output_tokens: out,
                })
                .collect();
            Some(self.cost(&calls))
        };
        let charged = match asked.kind {
            SummaryKind::Native | SummaryKind::CachedPrefix => cached_prefix.unwrap_or_default(),
            SummaryKind::Fresh => fresh.unwrap_or_default(),
            SummaryKind::Given => self.cost(asked.given.as_slice()),
        };
        Ok(SummaryFiring {
            call: self.report.calls + 1,
            kind: asked.kind,
            charged,
            cached_prefix,
            fresh,
        })
    }

    /// What `calls` cost together ([`PriceTable::summary_units`], each call).
    fn cost(&self, calls: &[SummaryCall]) -> SummaryCost {
        calls
            .iter()
            .fold(SummaryCost::default(), |sum, c| SummaryCost {
                calls: sum.calls + 1,
                input_tokens: sum.input_tokens + c.input_tokens,
                cached_tokens: sum.cached_tokens + c.cached_tokens.min(c.input_tokens),
                output_tokens: sum.output_tokens + c.output_tokens,
                units: sum.units + self.prices.summary_units(c),
            })
    }

    fn call(&mut self, sent: CacheView, unsatisfiable: bool) {
        let bill = self.cache.call(&sent, self.prices);
        let bust = self.previous.as_ref().is_some_and(|p| {
            p.boundaries
                .last()
                .is_none_or(|end| sent.boundaries.get(p.boundaries.len() - 1) != Some(end))
        });
        let r = &mut self.report;
        r.calls += 1;
        r.tokens_sent += bill.tokens;
        r.cached_tokens += bill.cached;
        r.busts += usize::from(bust);
        r.cost_units += bill.units;
        let size = bill.tokens + self.config.reserve_output;
        r.peak_tokens = r.peak_tokens.max(size);
        r.over_window += usize::from(size > self.config.window);
        r.fixed_over += usize::from(unsatisfiable);
        r.fitting_over += usize::from(size > self.config.window && !unsatisfiable);
        if !unsatisfiable {
            r.fitting_units += bill.units;
            r.fitting_tokens += bill.tokens;
            r.fitting_cached += bill.cached;
        }
        r.sizes.push(size);
        r.cumulative_units.push(r.cost_units);
        self.previous = Some(sent);
    }

    /// Counts the reasoning a compaction invalidated that no earlier one of this strategy had.
    #[expect(
        clippy::cast_precision_loss,
        reason = "token counts are far below 2^52"
    )]
    fn invalidated(&mut self, outcome: &ReasoningOutcome, estimator: &dyn TokenEstimator) {
        for r in &outcome.invalidated {
            if r.message.is_some() && !self.invalidated.insert((r.message, r.block)) {
                continue;
            }
            let tokens = estimator.estimate_tokens(r.text());
            self.report.reasoning_tokens += tokens;
            if let (Some(units), Some(price)) =
                (&mut self.report.reasoning_units, self.prices.output)
            {
                *units += tokens as f64 * price;
            }
        }
    }

    fn finish(mut self, retention: Retention) -> StrategyReport {
        self.report.cost_money = self.prices.money(self.report.cost_units);
        self.report.retention = retention;
        self.report
    }
}

/// The boundary at the end of `request`'s system prefix: after its leading system and
/// developer messages (0, the end of the fixed part, when there are none: the Anthropic
/// `system` and every format's tools are part of it).
pub(crate) fn system_end(format: Format, request: &Value) -> usize {
    history(format, request)
        .iter()
        .take_while(|m| cutctx_formats::is_system_message(format, m))
        .count()
}

/// The marks every strategy's request gets under [`Marking::Shared`], besides the last
/// message (which the replay always marks): the end of the system prefix. One rule for all
/// strategies, so that none of them is favoured by where it is marked. Marks are boundaries
/// of the request's [`CacheView`]: 0 is the end of the fixed part, `n` the end of the `n`-th
/// message.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_replay::replay::shared_marks;
/// use serde_json::json;
/// let chat = json!({"model": "m", "messages": [
///     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]});
/// assert_eq!(shared_marks(Format::OpenAiChat, &chat), vec![1]);
/// let anthropic = json!({"model": "m", "max_tokens": 9, "system": "Be brief.",
///     "messages": [{"role": "user", "content": "Hi"}]});
/// assert_eq!(shared_marks(Format::Anthropic, &anthropic), vec![0]);
/// ```
#[must_use]
pub fn shared_marks(format: Format, request: &Value) -> Vec<usize> {
    vec![system_end(format, request)]
}

/// The marks `cutctx session --cache-breakpoints auto` puts in a request after its first
/// firing, as boundaries of its cache view: the end of the system prefix and the end of the
/// compacted prefix. None before the first firing.
fn session_marks(format: Format, request: &Value, state: &SessionState) -> Vec<usize> {
    let (items, len) = state.prefix();
    if items.is_empty() && len == 0 {
        return Vec::new();
    }
    let prefix: usize = items
        .iter()
        .map(|i| match i {
            PrefixItem::Keep([a, b]) => usize::try_from(b - a).unwrap_or(0),
            PrefixItem::Insert(_) => 1,
        })
        .sum();
    vec![system_end(format, request), prefix]
}

/// The marks of a request of a strategy other than the session under `marking`.
pub(crate) fn plain_marks(
    marking: Marking,
    prices: &PriceTable,
    format: Format,
    request: &Value,
) -> Vec<usize> {
    match marking {
        Marking::Shared if prices.breakpoints => shared_marks(format, request),
        _ => Vec::new(),
    }
}

/// What every strategy must send at the call `request`: the untouchable turns and the tools,
/// whether or not they fit the window.
fn needs(config: &SessionConfig, request: &Value) -> Result<Needs, FormatError> {
    let pt = ProviderTranscript::parse_with(config.format, request, config.estimator.as_ref())?;
    let count = pt.prompt_count(config.reserve_output);
    let budget = CompactionBudget::new(0).with_protected_recent_turns(config.protected_recent);
    let analysis = cutctx_invariants::Analysis::of(pt.transcript(), &budget);
    Ok(Needs {
        tools: count.tools,
        system_turns: count
            .turns
            .iter()
            .take_while(|t| t.role == Role::System)
            .count(),
        turns: count
            .turns
            .iter()
            .zip(analysis.untouchable())
            .map(|(t, &untouchable)| (t.tokens, untouchable))
            .collect(),
    })
}

pub(crate) fn unsatisfiable(e: &FormatError) -> bool {
    matches!(
        e,
        FormatError::Compaction(CompactionError::BudgetUnsatisfiable { .. })
    )
}

/// Whether a compaction found no valid request: a manual-thinking tool loop in progress whose
/// thinking it would invalidate. The call is then sent as it is, over the window.
pub(crate) fn open_loop(e: &FormatError) -> bool {
    matches!(e, FormatError::ReasoningOpenToolLoop { .. })
}

/// Replays `run` (a request holding the whole history) under `config` and `prices`, every
/// strategy marked by the same rule ([`Marking::Shared`]).
///
/// A call whose untouchable part cannot fit the window is sent uncompacted and counted over
/// the window, under every strategy.
///
/// # Errors
///
/// `FORMAT_*` for a run its provider would refuse; `VALIDATION_ERROR` for bad settings; any
/// other failure of a compaction.
pub fn replay(
    config: &SessionConfig,
    prices: &PriceTable,
    run: &Value,
) -> Result<Replay, FormatError> {
    replay_with(config, prices, run, ReplayOptions::default())
}

/// [`replay()`] with `options`: where the requests are marked, and whether each run starts
/// with its tools and system prompt cached.
///
/// # Errors
///
/// As [`replay()`].
pub fn replay_with(
    config: &SessionConfig,
    prices: &PriceTable,
    run: &Value,
    options: ReplayOptions,
) -> Result<Replay, FormatError> {
    replay_extended(config, prices, run, options, &ReplayExtras::default())
}

/// What a replay adds to the three strategies, and how retention is measured.
#[derive(Debug, Clone)]
pub struct ReplayExtras {
    /// Add the offline reference `hindsight` and the peers ([`peers`](crate::peers)).
    pub compare: bool,
    /// The `N` of retention's "last `N` tool results kept verbatim".
    pub retention_last: usize,
    /// How the session's (and stateless compaction's) summarizing calls are asked.
    pub summary_input: SummaryInput,
    /// Strategies whose requests were produced elsewhere, one request per call.
    pub external: Vec<External>,
}

impl Default for ReplayExtras {
    fn default() -> Self {
        Self {
            compare: false,
            retention_last: 5,
            summary_input: SummaryInput::default(),
            external: Vec::new(),
        }
    }
}

/// How a compaction's summarizing call is asked, and so what of it the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SummaryInput {
    /// The span to summarize alone, as a fresh prompt: nothing of it is cached.
    Span,
    /// The request as the strategy would have sent it at this call, plus the summarization
    /// instruction as a final user message: it reads the prefix the last call wrote. The
    /// default: on the tau-bench and long-run corpora it costs the session less than the span
    /// (its input is read at the cache price, and it is asked once per firing).
    #[default]
    Cached,
}

/// A strategy whose requests were produced elsewhere.
#[derive(Debug, Clone)]
pub struct External {
    /// Its name in the report.
    pub name: String,
    /// One per call of the run, in order.
    pub calls: Vec<ExternalCall>,
}

/// One call of an external strategy.
#[derive(Debug, Clone)]
pub struct ExternalCall {
    /// The whole request it sent.
    pub request: Value,
    /// A summarizing call it made before this call, if any.
    pub summary: Option<SummaryCall>,
}

/// What the strategies share while they are built: the run, its calls and settings.
pub(crate) struct Context<'a> {
    pub(crate) config: &'a SessionConfig,
    pub(crate) prices: &'a PriceTable,
    pub(crate) run: &'a Value,
    pub(crate) points: Vec<usize>,
    pub(crate) options: ReplayOptions,
    /// How compactions' summarizing calls are asked.
    pub(crate) summary_input: SummaryInput,
    /// Per call: whether its untouchable part alone exceeds the window.
    pub(crate) stuck: Vec<bool>,
    /// Per message of the run: its tokens.
    pub(crate) tokens: Vec<u64>,
    /// The tokens of everything but the message list.
    pub(crate) fixed: u64,
}

impl Context<'_> {
    pub(crate) fn format(&self) -> Format {
        self.config.format
    }

    pub(crate) fn messages(&self) -> &[Value] {
        history(self.config.format, self.run)
    }

    /// The run's request with `list` as its message list.
    pub(crate) fn with_list(&self, list: Vec<Value>) -> Value {
        match self.run {
            Value::Object(map) => {
                let mut out = map.clone();
                out.insert(list_key(self.format()).to_owned(), Value::Array(list));
                Value::Object(out)
            }
            _ => Value::Array(list),
        }
    }

    /// The marks of a request of a strategy other than the session.
    pub(crate) fn marks(&self, request: &Value) -> Vec<usize> {
        plain_marks(self.options.marking, self.prices, self.format(), request)
    }

    /// The tokens of `list`.
    pub(crate) fn list_tokens(&self, list: &[Value]) -> Result<u64, FormatError> {
        list.iter().try_fold(0_u64, |sum, m| {
            Ok(sum + message_tokens(self.format(), m, self.config.estimator.as_ref())?)
        })
    }
}

/// [`replay_with`] with `extras`: the offline and peer strategies, external ones, and how
/// summaries are asked and retention measured.
///
/// # Errors
///
/// As [`replay()`]; `VALIDATION_ERROR` for an external strategy whose calls are not one per
/// call of the run.
pub fn replay_extended(
    config: &SessionConfig,
    prices: &PriceTable,
    run: &Value,
    options: ReplayOptions,
    extras: &ReplayExtras,
) -> Result<Replay, FormatError> {
    let marking = options.marking;
    config.check()?;
    let format = config.format;
    cutctx_formats::validate(format, run).map_err(FormatError::from)?;
    let points = call_points(format, history(format, run));
    for e in &extras.external {
        if e.calls.len() != points.len() {
            return Err(cutctx_model::CompactionError::validation(
                format!(
                    "the external strategy {:?} has {} requests for the run's {} calls",
                    e.name,
                    e.calls.len(),
                    points.len()
                ),
                cutctx_model::details! { "strategy" => e.name.as_str(), "requests" => e.calls.len(), "calls" => points.len() },
            )
            .into());
        }
    }
    let final_tokens = view(format, run, config, &[])?.tokens() + config.reserve_output;
    let mut none = Vec::with_capacity(points.len());
    let mut stateless = Vec::with_capacity(points.len());
    let mut session = Vec::with_capacity(points.len());
    let mut stuck_calls = Vec::with_capacity(points.len());
    let mut state: Option<SessionState> = None;
    let mut last_session: Option<(Value, usize)> = None;
    let mut previous_len = 0_usize;
    let mut summarize = stand_in;
    let mut needed = Vec::with_capacity(points.len());
    for &len in &points {
        let request = request_at(format, run, len);
        needed.push(needs(config, &request)?);
        let full_marks = plain_marks(marking, prices, format, &request);
        let size = view(format, &request, config, &full_marks)?.tokens() + config.reserve_output;
        // Stateless: what `cutctx compact --max-tokens WINDOW` does before every call: nothing
        // while the request fits, a compaction to the window when it does not.
        let mut stuck = false;
        if size > config.window {
            match compact_to(config, &request, 1.0, false, &mut summarize) {
                Ok(fitted) => {
                    let marks = plain_marks(marking, prices, format, &fitted.document);
                    let summary = ask(
                        extras.summary_input,
                        format,
                        stateless.last().map(|s: &Sent| (&s.request, previous_len)),
                        &request,
                        plan_spans(&fitted.input, &fitted.plan),
                    );
                    stateless.push(Sent {
                        request: fitted.document,
                        marks,
                        compacted: true,
                        unsatisfiable: false,
                        reasoning: Some(fitted.reasoning),
                        summary,
                    });
                }
                Err(e) if unsatisfiable(&e) => {
                    stuck = true;
                    stateless.push(Sent::plain(request.clone(), full_marks.clone(), true));
                }
                Err(e) if open_loop(&e) => {
                    stateless.push(Sent::plain(request.clone(), full_marks.clone(), false));
                }
                Err(e) => return Err(e),
            }
        } else {
            stateless.push(Sent::plain(request.clone(), full_marks.clone(), false));
        }
        match step(config, state.as_ref(), &request, &mut summarize) {
            Ok(s) => {
                let marks = match marking {
                    Marking::SessionOnly if prices.breakpoints && config.cache_breakpoints => {
                        session_marks(format, &s.request, &s.state)
                    }
                    Marking::SessionOnly => Vec::new(),
                    Marking::Shared => plain_marks(marking, prices, format, &s.request),
                };
                let (reasoning, summary) = match &s.firing {
                    Some(f) => (
                        Some(f.reasoning.clone()),
                        ask(
                            extras.summary_input,
                            format,
                            last_session.as_ref().map(|(r, l)| (r, *l)),
                            &request,
                            plan_spans(&f.input, &f.plan),
                        ),
                    ),
                    None => (None, None),
                };
                last_session = Some((s.request.clone(), len));
                session.push(Sent {
                    request: s.request,
                    marks,
                    compacted: s.firing.is_some(),
                    unsatisfiable: stuck,
                    reasoning,
                    summary,
                });
                state = Some(s.state);
            }
            Err(e) if unsatisfiable(&e) || open_loop(&e) => {
                last_session = Some((request.clone(), len));
                session.push(Sent::plain(request.clone(), full_marks.clone(), stuck));
            }
            Err(e) => return Err(e),
        }
        none.push(Sent::plain(request, full_marks, stuck));
        stuck_calls.push(stuck);
        previous_len = len;
    }
    let estimator = config.estimator.as_ref();
    let tokens = history(format, run)
        .iter()
        .map(|m| message_tokens(format, m, estimator))
        .collect::<Result<Vec<_>, _>>()?;
    let context = Context {
        config,
        prices,
        run,
        fixed: fixed_tokens(format, run, estimator)?,
        points,
        options,
        summary_input: extras.summary_input,
        stuck: stuck_calls,
        tokens,
    };
    let mut plans: Vec<(String, Vec<Sent>)> = vec![
        ("none".to_owned(), none),
        ("stateless".to_owned(), stateless),
        ("session".to_owned(), session),
    ];
    if extras.compare {
        let fallback = plans[2].1.clone();
        plans.push((
            "hindsight".to_owned(),
            crate::hindsight::plan(&context, fallback)?,
        ));
        for peer in crate::peers::PEERS {
            plans.push((peer.name.to_owned(), crate::peers::plan(&context, peer)?));
        }
    }
    for e in &extras.external {
        let sents = e
            .calls
            .iter()
            .zip(&context.stuck)
            .map(|(c, &stuck)| {
                let mut sent = Sent::plain(c.request.clone(), context.marks(&c.request), stuck);
                if let Some(s) = c.summary {
                    sent.summary = Some(Asked {
                        kind: SummaryKind::Given,
                        prefix: None,
                        spans: Vec::new(),
                        given: Some(s),
                    });
                }
                sent
            })
            .collect();
        plans.push((e.name.clone(), sents));
    }
    let room = crate::retention::Room {
        tokens: &context.tokens,
        besides: context.fixed + config.reserve_output,
        protected: usize::try_from(config.protected_recent).unwrap_or(usize::MAX),
        window: config.window,
    };
    let targets = Targets::of(format, run, &context.points, extras.retention_last, &room);
    let mut strategies = Vec::with_capacity(plans.len());
    for (name, sents) in &plans {
        let retention = targets.measure(sents.iter().map(|s| &s.request));
        strategies.push(price(&context, name, sents)?.finish(retention));
    }
    Ok(Replay {
        window: config.window,
        final_tokens,
        bound_units: lower_bound(&needed, prices, options.warm_prefix),
        strategies,
    })
}

/// The summaries of a compaction at a call whose whole request is `request`, over `spans`
/// (none: no summary), asked as `how` says: `Span` fresh, one call per span; `Cached` as what
/// the strategy would have sent at this call (its last request `last` with the messages
/// after its `len` appended, or the whole request when it has sent nothing) plus the
/// instruction, once. Both are kept, so that the firing is priced both ways.
pub(crate) fn ask(
    how: SummaryInput,
    format: Format,
    last: Option<(&Value, usize)>,
    request: &Value,
    spans: Vec<(u64, u64)>,
) -> Option<Asked> {
    if spans.is_empty() {
        return None;
    }
    let base = match last {
        Some((sent, len)) => {
            let mut out = sent.clone();
            let new = history(format, request).get(len..).unwrap_or(&[]).to_vec();
            if let Some(Value::Array(list)) = out.get_mut(list_key(format)) {
                list.extend(new);
            }
            out
        }
        None => request.clone(),
    };
    Some(Asked {
        kind: match how {
            SummaryInput::Span => SummaryKind::Fresh,
            SummaryInput::Cached => SummaryKind::CachedPrefix,
        },
        prefix: Some(with_instruction(format, &base)),
        spans,
        given: None,
    })
}

/// Prices the calls `sents` of one strategy, every strategy's cache starting alike.
pub(crate) fn price<'a>(
    context: &Context<'a>,
    name: &str,
    sents: &[Sent],
) -> Result<Meter<'a>, FormatError> {
    let format = context.format();
    let mut meter = Meter::new(name, context.prices, context.config);
    if context.options.warm_prefix
        && let Some(&len) = context.points.first()
    {
        // Another conversation with the same tools and system prompt wrote them.
        let first = request_at(format, context.run, len);
        let full = view(format, &first, context.config, &[])?;
        if let Some(b) = full.boundaries.get(system_end(format, &first)) {
            meter.cache.warm(b, context.prices);
        }
    }
    for sent in sents {
        meter.send(sent)?;
    }
    Ok(meter)
}
