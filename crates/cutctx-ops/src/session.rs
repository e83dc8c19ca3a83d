//! `cutctx session` and `cutctx replay`: compaction across the calls of an agent loop, and the
//! replay of a recorded loop that prices strategies against each other.
//!
//! Both take texts and return texts, as the other commands do; the binary reads the request,
//! the state and the price table, and writes the state (atomically), the SVG and the ledger.

use cutctx::formats::{EstimatorSpec, Format, FormatError, ProviderTranscript};
use cutctx::model::details;
use cutctx::session::{
    Firing, Marking, PriceTable, Replay, ReplayOptions, Restart, SessionConfig, SessionState,
    StrategyReport,
};
use cutctx::{CompactionError, SummarizationRequest};
use serde_json::Value;

use crate::OpsError;
use crate::formats::{from_format, named_policy};
use crate::summarizer::{CommandSummarizer, Summarizer, summarize_one};

mod open;
pub use open::{Appended, OpenSession};

/// Whether `cutctx session` marks the compacted prefix for Anthropic's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Breakpoints {
    /// Add `cache_control` at the end of the stable prefix after a firing (Anthropic).
    Auto,
    /// Leave the request's marks as they are.
    #[default]
    Off,
}

impl Breakpoints {
    /// Every setting, in a fixed order.
    pub const ALL: [Self; 2] = [Self::Auto, Self::Off];

    /// The setting's name, as `--cache-breakpoints` spells it: `"auto"` or `"off"`.
    ///
    /// ```
    /// assert_eq!(cutctx_ops::session::Breakpoints::Auto.as_str(), "auto");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Off => "off",
        }
    }
}

/// How `cutctx replay` marks the requests it prices for a provider that caches at breakpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplayMarks {
    /// Every strategy marks the end of the system prefix and the last message.
    #[default]
    Shared,
    /// Only the session marks the end of the system prefix (and of its compacted prefix);
    /// none and stateless mark the last message alone. Favours the session.
    SessionOnly,
}

impl ReplayMarks {
    /// Every setting, in a fixed order.
    pub const ALL: [Self; 2] = [Self::Shared, Self::SessionOnly];

    /// The setting's name, as `--marks` spells it: `"shared"` or `"session-only"`.
    ///
    /// ```
    /// assert_eq!(cutctx_ops::session::ReplayMarks::SessionOnly.as_str(), "session-only");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Shared => "shared",
            Self::SessionOnly => "session-only",
        }
    }
}

impl From<ReplayMarks> for Marking {
    fn from(m: ReplayMarks) -> Self {
        match m {
            ReplayMarks::Shared => Self::Shared,
            ReplayMarks::SessionOnly => Self::SessionOnly,
        }
    }
}

/// The settings `session` and `replay` share.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// Fire when the request would exceed TRIGGER × window (default 1.0).
    pub trigger: Option<f64>,
    /// When firing, compact down to the untouchable part plus TARGET of the room above it (default 0.2).
    pub target: Option<f64>,
    /// drop_oldest, observation_masking, summarizing or default_chain (the default), or a policy object.
    pub policy: Option<String>,
    /// The prompt id of summarization requests (default compaction.summarize.v1).
    pub prompt_id: Option<String>,
    /// How requests are counted: chars:N (default chars:4), o200k_base or cl100k_base.
    pub estimator: Option<String>,
    /// How many of the most recent turns are never touched (default 4).
    pub protected_recent: Option<u64>,
    /// Tokens kept free for the answer, counted in the window (default 0).
    pub reserve_output: u64,
    /// What a firing does with the thinking blocks and reasoning items after the first
    /// message it changes: strip (the default), keep, or refuse.
    pub reasoning: cutctx::formats::ReasoningMode,
    /// Also fire below the trigger where the cache model predicts that it pays
    /// (`cutctx_session::EarlyFiring`), priced by the format's shipped table (the replay's own
    /// table in `replay`). Off by default.
    pub fire_early: bool,
}

/// The options of `cutctx session`.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The request's format.
    pub format: Format,
    /// The window: the whole prompt (tools, system, messages) plus --reserve-output, in tokens.
    pub window: u64,
    /// The settings shared with `replay`.
    pub tuning: Tuning,
    /// A command that writes one summary: it gets the request as JSON on standard input.
    pub summarize_with: Option<String>,
    /// Anthropic: mark the end of the compacted prefix with cache_control after a firing.
    pub cache_breakpoints: Breakpoints,
    /// Drop (never invent) what makes the history invalid for its provider before the step,
    /// as `compact --repair` does; each drop is listed on standard error.
    pub repair: bool,
    /// The tool call ids whose results this call's firing keeps as they are, and so their
    /// calls: a result the model has just retrieved, not to be masked again at once.
    pub pin: Vec<String>,
}

/// What one `cutctx session` call produces.
#[derive(Debug)]
pub struct SessionOutput {
    /// The request to send, for standard output.
    pub output: String,
    /// The new state file's text.
    pub state: String,
    /// A line for standard error when the given state was set aside.
    pub notice: Option<String>,
    /// The firing, when this call compacted (for the ledger's receipt).
    pub firing: Option<Firing>,
    /// What `--repair` dropped, one line each for standard error.
    pub repairs: Vec<String>,
    /// The line for standard error when a firing invalidated reasoning: how much, and what
    /// `--reasoning` did with it; or when a firing was held off so as not to invalidate the
    /// reasoning of a tool loop in progress.
    pub reasoning: Option<String>,
    /// The session held open for a next call that hands over only its appended messages
    /// (a front end that keeps the session in memory); `None` when the request has no message
    /// list or was repaired.
    pub open: Option<OpenSession>,
}

fn estimator_spec(text: Option<&str>) -> Result<EstimatorSpec, OpsError> {
    text.map_or_else(
        || Ok(EstimatorSpec::default()),
        |s| s.parse().map_err(from_format),
    )
}

fn config(
    format: Format,
    window: u64,
    tuning: &Tuning,
    breakpoints: Breakpoints,
) -> Result<SessionConfig, OpsError> {
    let spec = estimator_spec(tuning.estimator.as_deref())?;
    let config = SessionConfig {
        format,
        window,
        reserve_output: tuning.reserve_output,
        trigger: tuning.trigger.unwrap_or(SessionConfig::DEFAULT_TRIGGER),
        target: tuning.target.unwrap_or(SessionConfig::DEFAULT_TARGET),
        protected_recent: tuning
            .protected_recent
            .unwrap_or(cutctx::CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS),
        policy: named_policy(tuning.policy.as_deref(), tuning.prompt_id.as_deref(), spec)?,
        estimator: spec.estimator().map_err(from_format)?,
        cache_breakpoints: breakpoints == Breakpoints::Auto,
        reasoning: tuning.reasoning,
        pinned_results: std::collections::BTreeSet::new(),
        early: tuning.fire_early.then(|| {
            let table = match format {
                Format::Anthropic => PriceTable::anthropic(),
                Format::OpenAiChat | Format::OpenAiResponses => PriceTable::openai(),
            };
            cutctx::session::EarlyFiring::from_prices(&table)
        }),
    };
    config.check()?;
    Ok(config)
}

/// Checks `args` as a session's first call would, before any request: the figures
/// (`0 <= target < trigger <= 1`, a window above the reserve), the policy and the estimator.
/// For a front end that holds its session in memory and wants a bad setting refused when the
/// session is made, not at its first call.
///
/// # Errors
///
/// `VALIDATION_ERROR` naming the figure; `FORMAT_UNSUPPORTED` for an unknown policy or
/// estimator.
pub fn check_options(args: &SessionOptions) -> Result<(), OpsError> {
    config(
        args.format,
        args.window,
        &args.tuning,
        args.cache_breakpoints,
    )
    .map(drop)
}

/// Checks that `state_text` is a session state of `format` that this build reads.
///
/// # Errors
///
/// `VALIDATION_ERROR` as [`SessionState::from_json`] says.
pub fn check_state(format: Format, state_text: &str) -> Result<(), OpsError> {
    SessionState::from_json(state_text, format)
        .map(drop)
        .map_err(OpsError::from)
}

impl From<FormatError> for OpsError {
    fn from(e: FormatError) -> Self {
        from_format(e)
    }
}

/// `cutctx session`: the request to send for `request_text` (the whole history), given the
/// state file's text (`None` when there is none yet), and the new state.
///
/// # Errors
///
/// `INPUT_ERROR` for a request that is not JSON; `FORMAT_*` for one its provider would
/// refuse; `VALIDATION_ERROR` for bad settings and for a state file that is corrupt, of
/// another version or of another format; `COMPACTION_BUDGET_UNSATISFIABLE` when the
/// untouchable part cannot fit the window; `COMPACTION_SUMMARY_MISSING` at a firing that needs
/// summaries without `--summarize-with`; `SUMMARIZER_ERROR`.
pub fn session(
    args: &SessionOptions,
    request_text: &str,
    state_text: Option<&str>,
) -> Result<SessionOutput, OpsError> {
    match args.summarize_with.as_deref() {
        Some(command) => session_with(
            args,
            request_text,
            state_text,
            Some(&mut CommandSummarizer::new(command)),
        ),
        None => session_with(args, request_text, state_text, None),
    }
}

/// As [`session`], a firing's summaries asked of `summarizer` rather than of the
/// `summarize_with` command (which is then not read); `None` for none.
///
/// # Errors
///
/// As [`session`]; `COMPACTION_SUMMARY_MISSING` at a firing that needs summaries without a
/// summarizer; the summarizer's own errors.
pub fn session_with(
    args: &SessionOptions,
    request_text: &str,
    state_text: Option<&str>,
    mut summarizer: Option<&mut dyn Summarizer>,
) -> Result<SessionOutput, OpsError> {
    let format = args.format;
    let mut config = config(format, args.window, &args.tuning, args.cache_breakpoints)?;
    config.pinned_results = args.pin.iter().cloned().collect();
    let mut request: Value = crate::error::parse_json("the request", request_text)?;
    let mut repairs = Vec::new();
    if args.repair {
        // Repair is a function of the history alone, so a history that grows by appending
        // repairs to a history that grows by appending, and the session continues.
        let (repaired, done) = cutctx::formats::repair(format, request).map_err(from_format)?;
        request = repaired;
        repairs = done;
    }
    let previous = state_text
        .map(|t| SessionState::from_json(t, format))
        .transpose()?;
    let mut summarize = |pt: &ProviderTranscript,
                         r: &SummarizationRequest|
     -> Result<String, OpsError> {
        match summarizer.as_deref_mut() {
            Some(s) => {
                // Beside the span, the request that reads the cache: the prefix as last sent
                // plus the instruction, for a summarizer that would rather send that.
                let mut input = pt.summarization_input(r);
                let cached =
                    cutctx::session::cached_summary_request(&config, previous.as_ref(), &request)?;
                if let Value::Object(map) = &mut input {
                    map.insert("cached_request".to_owned(), cached);
                }
                summarize_one(s, r, &input)
            }
            None => Err(OpsError::from(CompactionError::SummaryMissing {
                message: format!(
                    "the session fired and summarization request {} needs a summary; pass --summarize-with CMD, or a policy that does not summarize",
                    r.group_id()
                ),
                details: details! { "group_id" => r.group_id(), "target_tokens" => r.target_tokens(), "turn_ids" => r.turn_ids().iter().map(|i| &**i).collect::<Vec<_>>() },
            })),
        }
    };
    let step = cutctx::session::step(&config, previous.as_ref(), &request, &mut summarize)?;
    let notice = step.restarted.map(|r| match r {
        Restart::Rewound { known, given } => format!(
            "cutctx session: the history has {given} messages, fewer than the {known} the state describes; starting a new session"
        ),
        Restart::Diverged { known } => format!(
            "cutctx session: the history's first {known} messages are not those the state describes; starting a new session"
        ),
    });
    let reasoning = step
        .firing
        .as_ref()
        .and_then(|f| f.reasoning.notice(format, config.estimator.as_ref()))
        .or_else(|| {
            step.held_off.map(|start| {
                if step.over_window {
                    format!(
                        "cutctx session: the request ({} tokens) is over the window, but any compaction would invalidate the manual thinking the tool loop in progress since message {start} must keep (FORMAT_REASONING_OPEN_TOOL_LOOP); the session's own request is sent, over the window, until the loop's answer",
                        step.prompt_tokens
                    )
                } else {
                    format!(
                        "cutctx session: the request crossed the trigger ({} tokens) but still fits the window; a firing now would invalidate the reasoning of the tool loop in progress since message {start}, so it waits for the loop's answer",
                        step.prompt_tokens
                    )
                }
            })
        });
    let untouched = step.state.prefix().0.is_empty() && step.state.prefix().1 == 0;
    let output = if untouched && repairs.is_empty() {
        // Never compacted: the request as it came, byte for byte.
        let mut text = request_text.to_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    } else {
        // Every message and field the step kept leaves with the bytes it came with (a
        // 23-digit integer, `1e2`, `-0`, the order of its keys); only what it made is written.
        // The state says which messages are the request's own; after a repair its list is
        // not the text's, and messages are matched by value instead.
        let pretty = request_text.trim().contains('\n');
        let origins = repairs.is_empty().then(|| {
            step.state
                .origins(cutctx::session::history(format, &request).len())
        });
        cutctx::formats::to_string_as_written(
            format,
            &step.request,
            request_text,
            origins.as_deref(),
            pretty,
        )
        .map_err(|e| {
            OpsError::validation(
                format!("the request cannot be written as JSON: {e}"),
                details! {},
            )
        })? + "\n"
    };
    let state = step.state.to_json();
    let open = match step.validation {
        Some(validation) if !args.repair => {
            // The pins were this call's; an append never fires, so they are not kept.
            config.pinned_results.clear();
            Some(OpenSession {
                config,
                state: step.state,
                fixed_tokens: step.fixed_tokens,
                validation,
            })
        }
        _ => None,
    };
    Ok(SessionOutput {
        output,
        state,
        notice,
        firing: step.firing,
        repairs: repairs.iter().map(crate::formats::repair_line).collect(),
        reasoning,
        open,
    })
}

/// The options of `cutctx replay`.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// The run's format.
    pub format: Format,
    /// The window, in tokens.
    pub window: Option<u64>,
    /// The window, as a fraction of the whole run's final size (default 0.7).
    pub window_fraction: Option<f64>,
    /// anthropic (the default), openai, deepseek, or a JSON price table file.
    pub pricing: String,
    /// Print the figures as one line of JSON instead of a table.
    pub json: bool,
    /// Where the requests carry cache breakpoints (Anthropic-style pricing): `shared` (the
    /// default) marks every strategy's system prefix and last message alike; `session-only`
    /// marks the system prefix of the session's requests alone.
    pub marks: ReplayMarks,
    /// Start the run with its tools and system prompt already cached, as when many
    /// conversations share them; every strategy (and the lower bound) starts equally warm.
    /// Off by default: nothing is shared between runs.
    pub warm_prefix: bool,
    /// Add the offline reference `hindsight` and the peer strategies.
    pub compare: bool,
    /// Strategies whose requests were produced elsewhere: name and the text of its JSONL file.
    pub external: Vec<(String, String)>,
    /// The `N` of "the last N tool results kept verbatim" (default 5).
    pub retention_last: usize,
    /// How compactions' summarizing calls are asked: `cached` (the default) or `span`.
    pub summary_input: cutctx::session::SummaryInput,
    /// The settings shared with `session`.
    pub tuning: Tuning,
}

/// What `cutctx replay` produces: the table (or JSON line), the chart and the cost against
/// retention chart.
#[derive(Debug, Clone)]
pub struct ReplayOutput {
    /// For standard output.
    pub output: String,
    /// The chart of context per call and cumulative cost.
    pub svg: String,
    /// The chart of cost against retention, one point per strategy.
    pub frontier_svg: String,
}

/// One external strategy's calls from the text of its JSONL file: per line the whole request,
/// or an object `{"request", "summary_input_tokens", "summary_cached_tokens",
/// "summary_output_tokens"}` charging a summarizing call made before it.
///
/// # Errors
///
/// `INPUT_ERROR` for a line that is not JSON, naming the strategy and the line;
/// `VALIDATION_ERROR` for a figure that is not a count.
pub fn external_calls(
    name: &str,
    text: &str,
) -> Result<Vec<cutctx::session::ExternalCall>, OpsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| {
            OpsError::input(
                format!(
                    "line {} of the external strategy {name:?} is not JSON: {e}",
                    i + 1
                ),
                details! { "strategy" => name, "line" => i + 1 },
            )
        })?;
        let wrapped = v.as_object().is_some_and(|m| {
            m.contains_key("request")
                && m.keys().all(|k| {
                    matches!(
                        k.as_str(),
                        "request"
                            | "summary_input_tokens"
                            | "summary_cached_tokens"
                            | "summary_output_tokens"
                    )
                })
        });
        if !wrapped {
            out.push(cutctx::session::ExternalCall {
                request: v,
                summary: None,
            });
            continue;
        }
        let count = |key: &str| -> Result<u64, OpsError> {
            match v.get(key) {
                None => Ok(0),
                Some(x) => x.as_u64().ok_or_else(|| {
                    OpsError::validation(
                        format!(
                            "{key} on line {} of the external strategy {name:?} must be a count",
                            i + 1
                        ),
                        details! { "strategy" => name, "line" => i + 1, "field" => key },
                    )
                }),
            }
        };
        let summary = cutctx::session::cache::SummaryCall {
            input_tokens: count("summary_input_tokens")?,
            cached_tokens: count("summary_cached_tokens")?,
            output_tokens: count("summary_output_tokens")?,
        };
        let any = summary != cutctx::session::cache::SummaryCall::default();
        out.push(cutctx::session::ExternalCall {
            request: v.get("request").cloned().unwrap_or(Value::Null),
            summary: any.then_some(summary),
        });
    }
    Ok(out)
}

/// The price table `--pricing` names: a shipped one, or the text of a file (`file_text`).
///
/// # Errors
///
/// `VALIDATION_ERROR` for a table file that is not one.
pub fn prices(name: &str, file_text: Option<&str>) -> Result<PriceTable, OpsError> {
    if let Some(t) = PriceTable::named(name) {
        return Ok(t);
    }
    let Some(text) = file_text else {
        return Err(OpsError::validation(
            format!(
                "unknown price table {name:?}; expected {} or a JSON price table file",
                PriceTable::NAMES.join(", ")
            ),
            details! { "pricing" => name },
        ));
    };
    PriceTable::from_json(text).map_err(|why| {
        OpsError::validation(
            format!("the price table is not valid: {why}"),
            details! { "document" => "price table" },
        )
    })
}

/// `cutctx replay`: the three strategies' figures over the run `run_text`, as a table (or one
/// line of JSON), and the SVG's text.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; `FORMAT_*` for a run its provider would refuse;
/// `VALIDATION_ERROR` for bad settings.
pub fn replay(
    args: &ReplayRun,
    run_text: &str,
    prices: &PriceTable,
) -> Result<ReplayOutput, OpsError> {
    let format = args.format;
    let run: Value = crate::error::parse_json("the run", run_text)?;
    let window = match args.window {
        Some(w) => w,
        None => {
            let fraction = args.window_fraction.unwrap_or(0.7);
            if !(fraction > 0.0 && fraction.is_finite()) {
                return Err(OpsError::validation(
                    "--window-fraction must be above 0",
                    details! { "window_fraction" => fraction },
                ));
            }
            let estimator = estimator_spec(args.tuning.estimator.as_deref())?
                .estimator()
                .map_err(from_format)?;
            let full = cutctx::session::prompt_tokens(format, &run, estimator.as_ref())?
                + args.tuning.reserve_output;
            scaled(full, fraction)
        }
    };
    // Under `--marks session-only` the session is priced as `cutctx session
    // --cache-breakpoints auto` marks it; under `shared` every strategy is marked alike.
    let mut config = config(format, window, &args.tuning, Breakpoints::Auto)?;
    if config.early.is_some() {
        config.early = Some(cutctx::session::EarlyFiring::from_prices(prices));
    }
    let options = ReplayOptions {
        marking: args.marks.into(),
        warm_prefix: args.warm_prefix,
    };
    let external = args
        .external
        .iter()
        .map(|(name, text)| {
            Ok(cutctx::session::External {
                name: name.clone(),
                calls: external_calls(name, text)?,
            })
        })
        .collect::<Result<Vec<_>, OpsError>>()?;
    let extras = cutctx::session::ReplayExtras {
        compare: args.compare,
        retention_last: args.retention_last,
        summary_input: args.summary_input,
        external,
    };
    let replay = cutctx::session::replay_extended(&config, prices, &run, options, &extras)?;
    let output = if args.json {
        json_line(&replay, prices, args.warm_prefix)
    } else {
        table(&replay, prices)
    };
    Ok(ReplayOutput {
        output,
        svg: crate::svg::chart(&replay, prices),
        frontier_svg: crate::svg::frontier(&replay, prices),
    })
}

#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "token counts are far below 2^52; floored on purpose"
)]
fn scaled(tokens: u64, fraction: f64) -> u64 {
    (tokens as f64 * fraction).floor() as u64
}

#[expect(
    clippy::cast_precision_loss,
    reason = "token counts are far below 2^52"
)]
fn peak_share(r: &StrategyReport, window: u64) -> f64 {
    r.peak_tokens as f64 / window.max(1) as f64
}

fn table(replay: &Replay, prices: &PriceTable) -> String {
    use std::fmt::Write as _;
    let calls = replay.strategies.first().map_or(0, |s| s.calls);
    let mut out = format!(
        "replay: {calls} calls; window {} tokens (the whole run is {}); prices {} ({}, {} {}/M input, cache read {}x, uncached {}x)\n",
        replay.window,
        replay.final_tokens,
        prices.name,
        prices.model,
        prices.currency,
        prices.input_per_million,
        prices.cache_read,
        prices.cache_write
    );
    let _ = writeln!(
        out,
        "{:<17} {:>5} {:>11} {:>9} {:>5} {:>11} {:>12} {:>12} {:>10} {:>11} {:>9} {:>15} {:>13} {:>11} {:>5} {:>6}",
        "strategy",
        "calls",
        "tokens_sent",
        "cache_hit",
        "busts",
        "compactions",
        "cost_units",
        format!("cost_{}", prices.currency),
        "peak_use",
        "over_window",
        "reasoning",
        "reasoning_units",
        "summary_units",
        "identifiers",
        "task",
        "recent"
    );
    for s in &replay.strategies {
        let _ = writeln!(
            out,
            "{:<17} {:>5} {:>11} {:>9.3} {:>5} {:>11} {:>12.1} {:>12.6} {:>10.3} {:>11} {:>9} {:>15} {:>13.1} {:>11.3} {:>5.3} {:>6.3}",
            s.name,
            s.calls,
            s.tokens_sent,
            s.hit_rate(),
            s.busts,
            s.compactions,
            s.cost_units,
            s.cost_money,
            peak_share(s, replay.window),
            s.over_window,
            s.reasoning_tokens,
            s.reasoning_units
                .map_or_else(|| "-".to_owned(), |u| format!("{u:.1}")),
            s.summary_units,
            s.retention.identifiers,
            s.retention.task_intact,
            s.retention.recent_results
        );
    }
    let _ = writeln!(
        out,
        "lower bound: no strategy that sends each call's untouchable part pays less than {:.1} units",
        replay.bound_units
    );
    let _ = writeln!(
        out,
        "reasoning: estimated tokens of the thinking and reasoning items compactions invalidated, each once; reasoning_units prices them at the output price ({}), as thought again, apart from cost_units",
        prices.output.map_or_else(
            || "none in this table".to_owned(),
            |o| format!("{o:.2}x input")
        )
    );
    out
}

fn json_line(replay: &Replay, prices: &PriceTable, warm: bool) -> String {
    let strategies: Vec<Value> = replay
        .strategies
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name, "calls": s.calls, "tokens_sent": s.tokens_sent,
                "cached_tokens": s.cached_tokens, "hit_rate": s.hit_rate(), "busts": s.busts,
                "compactions": s.compactions, "cost_units": s.cost_units, "cost_money": s.cost_money,
                "peak_tokens": s.peak_tokens, "over_window": s.over_window,
                "untouchable_over": s.fixed_over, "fitting_units": s.fitting_units,
                "fitting_tokens": s.fitting_tokens, "fitting_cached": s.fitting_cached,
                "reasoning_tokens": s.reasoning_tokens, "reasoning_units": s.reasoning_units,
                "fixed_over": s.fixed_over, "fitting_over": s.fitting_over, "summary_units": s.summary_units,
                "summaries": s.summaries,
                "retention": {
                    "identifiers": s.retention.identifiers,
                    "task_intact": s.retention.task_intact,
                    "recent_results": s.retention.recent_results,
                },
            })
        })
        .collect();
    let v = serde_json::json!({
        "window": replay.window, "final_tokens": replay.final_tokens,
        "bound_units": replay.bound_units, "warm_prefix": warm,
        "prices": prices.name, "currency": prices.currency, "strategies": strategies,
    });
    format!("{v}\n")
}
