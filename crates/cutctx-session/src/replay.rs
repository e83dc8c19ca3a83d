//! Replaying a recorded agent loop call by call under three strategies and pricing each: no
//! compaction, stateless compaction before every call, and a [session](crate::step).
//!
//! Call `k` sends the messages before the `k`-th model turn (an assistant message; for
//! Responses, the first item of a model step), with everything else of the recorded request
//! (tools, system, settings). Summaries are stood in for by text of the length the plan asks
//! for, so the bill is that of a real summary of that size.

use cutctx_formats::{Format, FormatError, ProviderTranscript};
use cutctx_model::{CompactionError, SummarizationRequest};
use serde_json::Value;

use crate::cache::PriceTable;
use crate::count::{fixed_tokens, history, list_key, message_tokens};
use crate::session::{SessionConfig, compact_to, step};
use crate::state::{SessionState, message_digest};

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
}

/// A replay's result: the window and the three strategies, in the order none, stateless,
/// session.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    /// The window, in tokens.
    pub window: u64,
    /// The whole run's request, with the reserve: the last call's size uncompacted.
    pub final_tokens: u64,
    /// The strategies.
    pub strategies: Vec<StrategyReport>,
}

/// The lengths of the message lists sent at each call of `messages`: the index of every model
/// turn that follows a turn of another kind.
#[must_use]
pub fn call_points(format: Format, messages: &[Value]) -> Vec<usize> {
    let is_model = |m: &Value| -> bool {
        let role = m.get("role").and_then(Value::as_str);
        let kind = m.get("type").and_then(Value::as_str);
        role == Some("assistant")
            || matches!(format, Format::OpenAiResponses)
                && matches!(
                    kind,
                    Some("function_call" | "reasoning" | "custom_tool_call")
                )
    };
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

/// A sent request as the cache sees it: the text of everything but the messages, and each
/// message's digest and tokens.
struct Sent {
    fixed: String,
    fixed_tokens: u64,
    messages: Vec<([u8; 32], u64)>,
}

impl Sent {
    fn of(format: Format, request: &Value, config: &SessionConfig) -> Self {
        let estimator = config.estimator.as_ref();
        let fixed = match request {
            Value::Object(map) => {
                let mut rest = map.clone();
                rest.remove(list_key(format));
                Value::Object(rest).to_string()
            }
            _ => String::new(),
        };
        Self {
            fixed,
            fixed_tokens: fixed_tokens(format, request, estimator),
            messages: history(format, request)
                .iter()
                .map(|m| (message_digest(m), message_tokens(m, estimator)))
                .collect(),
        }
    }

    fn tokens(&self) -> u64 {
        self.fixed_tokens + self.messages.iter().map(|m| m.1).sum::<u64>()
    }

    /// The tokens of the longest common prefix with `previous`, message by message.
    fn common(&self, previous: &Self) -> u64 {
        if self.fixed != previous.fixed {
            return 0;
        }
        self.fixed_tokens
            + self
                .messages
                .iter()
                .zip(&previous.messages)
                .take_while(|(a, b)| a.0 == b.0)
                .map(|(a, _)| a.1)
                .sum::<u64>()
    }
}

/// Accumulates one strategy's figures call by call.
struct Meter<'a> {
    report: StrategyReport,
    previous: Option<Sent>,
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
                sizes: Vec::new(),
                cumulative_units: Vec::new(),
            },
            previous: None,
            prices,
            window: config.window,
            reserve: config.reserve_output,
        }
    }

    fn call(&mut self, sent: Sent) {
        let tokens = sent.tokens();
        let (cached, bust) = match &self.previous {
            Some(p) => {
                let common = sent.common(p);
                (self.prices.cached(tokens, common), common < p.tokens())
            }
            None => (0, false),
        };
        let r = &mut self.report;
        r.calls += 1;
        r.tokens_sent += tokens;
        r.cached_tokens += cached;
        r.busts += usize::from(bust);
        r.cost_units += self.prices.units(tokens, cached);
        let size = tokens + self.reserve;
        r.peak_tokens = r.peak_tokens.max(size);
        r.over_window += usize::from(size > self.window);
        r.sizes.push(size);
        r.cumulative_units.push(r.cost_units);
        self.previous = Some(sent);
    }

    fn finish(mut self) -> StrategyReport {
        self.report.cost_money = self.prices.money(self.report.cost_units);
        self.report
    }
}

fn unsatisfiable(e: &FormatError) -> bool {
    matches!(
        e,
        FormatError::Compaction(CompactionError::BudgetUnsatisfiable { .. })
    )
}

/// Replays `run` (a request holding the whole history) under `config` and `prices`.
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
    config.check()?;
    let format = config.format;
    cutctx_formats::validate(format, run).map_err(FormatError::from)?;
    let points = call_points(format, history(format, run));
    let final_tokens = Sent::of(format, run, config).tokens() + config.reserve_output;
    let mut none = Meter::new("none", prices, config);
    let mut stateless = Meter::new("stateless", prices, config);
    let mut session = Meter::new("session", prices, config);
    let mut state: Option<SessionState> = None;
    let mut summarize = stand_in;
    for &len in &points {
        let request = request_at(format, run, len);
        let full = Sent::of(format, &request, config);
        let size = full.tokens() + config.reserve_output;
        // Stateless: compact to the window whenever the call would not fit.
        if size > config.window {
            match compact_to(config, &request, 1.0, &mut summarize) {
                Ok(fitted) => {
                    stateless.report.compactions += 1;
                    stateless.call(Sent::of(format, &fitted.document, config));
                }
                Err(e) if unsatisfiable(&e) => stateless.call(Sent::of(format, &request, config)),
                Err(e) => return Err(e),
            }
        } else {
            stateless.call(Sent::of(format, &request, config));
        }
        match step(config, state.as_ref(), &request, &mut summarize) {
            Ok(s) => {
                session.report.compactions += usize::from(s.firing.is_some());
                session.call(Sent::of(format, &s.request, config));
                state = Some(s.state);
            }
            Err(e) if unsatisfiable(&e) => session.call(Sent::of(format, &request, config)),
            Err(e) => return Err(e),
        }
        none.call(full);
    }
    Ok(Replay {
        window: config.window,
        final_tokens,
        strategies: vec![none.finish(), stateless.finish(), session.finish()],
    })
}
