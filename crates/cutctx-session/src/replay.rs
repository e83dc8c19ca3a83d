//! Replaying a recorded agent loop call by call under three strategies and pricing each: no
//! compaction, stateless compaction before every call, and a [session](crate::step).
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

use cutctx_formats::{Format, FormatError, ProviderTranscript, ReasoningOutcome};
use cutctx_model::{CompactionBudget, CompactionError, Role, SummarizationRequest};
use cutctx_policies::TokenEstimator;
use serde_json::Value;

use cutctx_formats::{fixed_tokens, list_key, message_list as history, message_tokens};
use sha2::{Digest, Sha256};

use crate::bound::{Needs, lower_bound};
use crate::cache::{Boundary, CacheView, PrefixCache, PriceTable};
use crate::session::{SessionConfig, compact_to, step};
use crate::state::{PrefixItem, SessionState, message_digest};

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
    /// `none`, `stateless` or `session`.
    pub name: &'static str,
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
    /// The cost in base-input-token units.
    pub cost_units: f64,
    /// The cost in the price table's currency.
    pub cost_money: f64,
    /// The largest request, with the output reserve.
    pub peak_tokens: u64,
    /// Calls whose request with the reserve exceeds the window.
    pub over_window: usize,
    /// Of the calls, those whose untouchable part alone exceeds the window: no strategy can
    /// fit them, and all send them uncompacted.
    pub fixed_over: usize,
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

/// A replay's result: the window and the three strategies, in the order none, stateless,
/// session.
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

/// The lengths of the message lists sent at each call of `messages`: the index of every model
/// turn that follows a turn of another kind.
#[must_use]
pub fn call_points(format: Format, messages: &[Value]) -> Vec<usize> {
    let is_model = |m: &Value| cutctx_formats::is_model_item(format, m);
    let mut points = Vec::new();
    let mut previous = false;
    for (i, m) in messages.iter().enumerate() {
        let model = is_model(m);
        if model && !previous {
            points.push(i);
        }
        previous = model;
    }
    points
}

/// The stand-in summary: text of about `target_tokens` tokens at four characters a token.
fn stand_in(_: &ProviderTranscript, r: &SummarizationRequest) -> Result<String, FormatError> {
    let n = usize::try_from(r.target_tokens()).unwrap_or(0).max(1);
    let head = format!("[summary of {} turns] ", r.turn_ids().len());
    let mut text = head;
    while text.len() < n * 4 {
        text.push_str("summary ");
    }
    Ok(text)
}

/// The request of call `k`: `run` with its list cut to `len` messages.
fn request_at(format: Format, run: &Value, len: usize) -> Value {
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
fn view(
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
        blocks += content_blocks(m);
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

/// The content blocks of a message: one for string content, one per item of a content list,
/// and one per tool call.
fn content_blocks(message: &Value) -> u64 {
    let content = match message.get("content") {
        Some(Value::Array(list)) => list.len().max(1),
        _ => 1,
    };
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    u64::try_from(content + calls).unwrap_or(u64::MAX)
}

/// Accumulates one strategy's figures call by call.
struct Meter<'a> {
    report: StrategyReport,
    /// The reasoning already counted, by message and block.
    invalidated: std::collections::BTreeSet<(Option<usize>, Option<usize>)>,
    previous: Option<CacheView>,
    cache: PrefixCache,
    prices: &'a PriceTable,
    window: u64,
    reserve: u64,
}

impl<'a> Meter<'a> {
    fn new(name: &'static str, prices: &'a PriceTable, config: &SessionConfig) -> Self {
        Self {
            report: StrategyReport {
                name,
                calls: 0,
                tokens_sent: 0,
                cached_tokens: 0,
                busts: 0,
                compactions: 0,
                cost_units: 0.0,
                cost_money: 0.0,
                peak_tokens: 0,
                over_window: 0,
                fixed_over: 0,
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
            window: config.window,
            reserve: config.reserve_output,
        }
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
        let size = bill.tokens + self.reserve;
        r.peak_tokens = r.peak_tokens.max(size);
        r.over_window += usize::from(size > self.window);
        r.fixed_over += usize::from(unsatisfiable);
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

    fn finish(mut self) -> StrategyReport {
        self.report.cost_money = self.prices.money(self.report.cost_units);
        self.report
    }
}

/// The boundary at the end of `request`'s system prefix: after its leading system and
/// developer messages (0, the end of the fixed part, when there are none: the Anthropic
/// `system` and every format's tools are part of it).
fn system_end(format: Format, request: &Value) -> usize {
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
/// use cutctx_session::replay::shared_marks;
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
fn plain_marks(
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

fn unsatisfiable(e: &FormatError) -> bool {
    matches!(
        e,
        FormatError::Compaction(CompactionError::BudgetUnsatisfiable { .. })
    )
}

/// Whether a compaction found no valid request: a manual-thinking tool loop in progress whose
/// thinking it would invalidate. The call is then sent as it is, over the window.
fn open_loop(e: &FormatError) -> bool {
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
    let marking = options.marking;
    config.check()?;
    let format = config.format;
    cutctx_formats::validate(format, run).map_err(FormatError::from)?;
    let points = call_points(format, history(format, run));
    let final_tokens = view(format, run, config, &[])?.tokens() + config.reserve_output;
    let mut none = Meter::new("none", prices, config);
    let mut stateless = Meter::new("stateless", prices, config);
    let mut session = Meter::new("session", prices, config);
    let mut state: Option<SessionState> = None;
    let mut summarize = stand_in;
    let mut needed = Vec::with_capacity(points.len());
    for &len in &points {
        let request = request_at(format, run, len);
        needed.push(needs(config, &request)?);
        let full = view(
            format,
            &request,
            config,
            &plain_marks(marking, prices, format, &request),
        )?;
        if options.warm_prefix && needed.len() == 1 {
            // Another conversation with the same tools and system prompt wrote them.
            if let Some(b) = full.boundaries.get(system_end(format, &request)) {
                for meter in [&mut none, &mut stateless, &mut session] {
                    meter.cache.warm(b, prices);
                }
            }
        }
        let size = full.tokens() + config.reserve_output;
        // Stateless: what `cutctx compact --max-tokens WINDOW` does before every call: nothing
        // while the request fits, a compaction to the window when it does not.
        let mut stuck = false;
        if size > config.window {
            match compact_to(config, &request, 1.0, &mut summarize) {
                Ok(fitted) => {
                    stateless.report.compactions += 1;
                    stateless.invalidated(&fitted.reasoning, config.estimator.as_ref());
                    let marks = plain_marks(marking, prices, format, &fitted.document);
                    stateless.call(view(format, &fitted.document, config, &marks)?, false);
                }
                Err(e) if unsatisfiable(&e) => {
                    stuck = true;
                    stateless.call(full.clone(), true);
                }
                Err(e) if open_loop(&e) => stateless.call(full.clone(), false),
                Err(e) => return Err(e),
            }
        } else {
            stateless.call(full.clone(), false);
        }
        match step(config, state.as_ref(), &request, &mut summarize) {
            Ok(s) => {
                session.report.compactions += usize::from(s.firing.is_some());
                if let Some(f) = &s.firing {
                    session.invalidated(&f.reasoning, config.estimator.as_ref());
                }
                let marks = match marking {
                    Marking::SessionOnly if prices.breakpoints && config.cache_breakpoints => {
                        session_marks(format, &s.request, &s.state)
                    }
                    Marking::SessionOnly => Vec::new(),
                    Marking::Shared => plain_marks(marking, prices, format, &s.request),
                };
                session.call(view(format, &s.request, config, &marks)?, stuck);
                state = Some(s.state);
            }
            Err(e) if unsatisfiable(&e) => session.call(full.clone(), stuck),
            Err(e) if open_loop(&e) => session.call(full.clone(), stuck),
            Err(e) => return Err(e),
        }
        none.call(full, stuck);
    }
    Ok(Replay {
        window: config.window,
        final_tokens,
        bound_units: lower_bound(&needed, prices, options.warm_prefix),
        strategies: vec![none.finish(), stateless.finish(), session.finish()],
    })
}
