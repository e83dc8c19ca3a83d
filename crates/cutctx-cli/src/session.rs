//! `cutctx session` and `cutctx replay`: compaction across the calls of an agent loop, and the
//! replay of a recorded loop that prices strategies against each other.
//!
//! Both take texts and return texts, as the other commands do; the binary reads the request,
//! the state and the price table, and writes the state (atomically), the SVG and the ledger.

use std::path::PathBuf;

use cutctx::formats::{EstimatorSpec, Format, FormatError, ProviderTranscript};
use cutctx::model::details;
use cutctx::session::{
    Firing, Marking, PriceTable, Replay, ReplayOptions, Restart, SessionConfig, SessionState,
    StrategyReport,
};
use cutctx::{CompactionError, SummarizationRequest};
use serde_json::Value;

use crate::CliError;
use crate::formats::{FormatName, from_format, named_policy, summarize_once};

/// Whether `cutctx session` marks the compacted prefix for Anthropic's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Breakpoints {
    /// Add `cache_control` at the end of the stable prefix after a firing (Anthropic).
    Auto,
    /// Leave the request's marks as they are.
    #[default]
    Off,
}

/// How `cutctx replay` marks the requests it prices for a provider that caches at breakpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReplayMarks {
    /// Every strategy marks the end of the system prefix and the last message.
    #[default]
    Shared,
    /// Only the session marks the end of the system prefix (and of its compacted prefix);
    /// none and stateless mark the last message alone. Favours the session.
    SessionOnly,
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
#[derive(Debug, Clone, clap::Args)]
pub struct Tuning {
    /// Fire when the request would exceed TRIGGER × window (default 1.0).
    #[arg(long)]
    pub trigger: Option<f64>,
    /// When firing, compact down to the untouchable part plus TARGET of the room above it (default 0.2).
    #[arg(long)]
    pub target: Option<f64>,
    /// drop_oldest, observation_masking, summarizing or default_chain (the default), or a policy object.
    #[arg(long)]
    pub policy: Option<String>,
    /// The prompt id of summarization requests (default compaction.summarize.v1).
    #[arg(long)]
    pub prompt_id: Option<String>,
    /// How requests are counted: chars:N (default chars:4), o200k_base or cl100k_base.
    #[arg(long)]
    pub estimator: Option<String>,
    /// How many of the most recent turns are never touched (default 4).
    #[arg(long)]
    pub protected_recent: Option<u64>,
    /// Tokens kept free for the answer, counted in the window (default 0).
    #[arg(long, default_value_t = 0)]
    pub reserve_output: u64,
}

/// The options of `cutctx session`.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    /// The request's format.
    #[arg(long, value_enum)]
    pub format: FormatName,
    /// The window: the whole prompt (tools, system, messages) plus --reserve-output, in tokens.
    #[arg(long)]
    pub window: u64,
    /// The settings shared with `replay`.
    #[command(flatten)]
    pub tuning: Tuning,
    /// A command that writes one summary: it gets the request as JSON on standard input.
    #[arg(long)]
    pub summarize_with: Option<String>,
    /// Anthropic: mark the end of the compacted prefix with cache_control after a firing.
    #[arg(long, value_enum, default_value_t = Breakpoints::Off)]
    pub cache_breakpoints: Breakpoints,
    /// The session's state file: read when it exists, then replaced (atomically).
    #[arg(long)]
    pub state: PathBuf,
    /// Append a receipt of each firing to this ledger (arcaeon's format).
    #[arg(long)]
    pub ledger: Option<PathBuf>,
    /// The compactor the receipt names (default `cutctx/<version>`).
    #[arg(long, requires = "ledger")]
    pub compactor: Option<String>,
    /// Drop (never invent) what makes the history invalid for its provider before the step,
    /// as `compact --repair` does; each drop is listed on standard error.
    #[arg(long)]
    pub repair: bool,
}

/// What one `cutctx session` call produces.
#[derive(Debug, Clone)]
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
}

fn estimator_spec(text: Option<&str>) -> Result<EstimatorSpec, CliError> {
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
) -> Result<SessionConfig, CliError> {
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
    };
    config.check()?;
    Ok(config)
}

impl From<FormatError> for CliError {
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
    args: &SessionArgs,
    request_text: &str,
    state_text: Option<&str>,
) -> Result<SessionOutput, CliError> {
    let format: Format = args.format.into();
    let config = config(format, args.window, &args.tuning, args.cache_breakpoints)?;
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
    let command = args.summarize_with.as_deref();
    let mut summarize = |pt: &ProviderTranscript,
                         r: &SummarizationRequest|
     -> Result<String, CliError> {
        match command {
            Some(c) => summarize_once(c, r.group_id(), &pt.summarization_input(r).to_string()),
            None => Err(CliError::from(CompactionError::SummaryMissing {
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
    let untouched = step.state.prefix().0.is_empty() && step.state.prefix().1 == 0;
    let output = if untouched && repairs.is_empty() {
        // Never compacted: the request as it came, byte for byte.
        let mut text = request_text.to_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    } else {
        let pretty = request_text.trim().contains('\n');
        let text = if pretty {
            serde_json::to_string_pretty(&step.request)
        } else {
            serde_json::to_string(&step.request)
        };
        text.map_err(|e| {
            CliError::validation(
                format!("the request cannot be written as JSON: {e}"),
                details! {},
            )
        })? + "\n"
    };
    Ok(SessionOutput {
        output,
        state: step.state.to_json(),
        notice,
        firing: step.firing,
        repairs: repairs
            .iter()
            .map(|r| {
                format!(
                    "cutctx: repair: {} at position {}{}",
                    r.kind.as_str(),
                    r.position,
                    r.id.as_deref()
                        .map(|id| format!(" (id {id:?})"))
                        .unwrap_or_default()
                )
            })
            .collect(),
    })
}

/// The options of `cutctx replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The run's format.
    #[arg(long, value_enum)]
    pub format: FormatName,
    /// The window, in tokens.
    #[arg(long, conflicts_with = "window_fraction")]
    pub window: Option<u64>,
    /// The window, as a fraction of the whole run's final size (default 0.7).
    #[arg(long)]
    pub window_fraction: Option<f64>,
    /// anthropic (the default), openai, deepseek, or a JSON price table file.
    #[arg(long, default_value = "anthropic")]
    pub pricing: String,
    /// Draw context size and cumulative cost per call to this SVG file.
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Print the figures as one line of JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Where the requests carry cache breakpoints (Anthropic-style pricing): `shared` (the
    /// default) marks every strategy's system prefix and last message alike; `session-only`
    /// marks the system prefix of the session's requests alone.
    #[arg(long, value_enum, default_value_t = ReplayMarks::Shared)]
    pub marks: ReplayMarks,
    /// Start the run with its tools and system prompt already cached, as when many
    /// conversations share them; every strategy (and the lower bound) starts equally warm.
    /// Off by default: nothing is shared between runs.
    #[arg(long)]
    pub warm_prefix: bool,
    /// The settings shared with `session`.
    #[command(flatten)]
    pub tuning: Tuning,
}

/// The price table `--pricing` names: a shipped one, or the text of a file (`file_text`).
///
/// # Errors
///
/// `VALIDATION_ERROR` for a table file that is not one.
pub fn prices(name: &str, file_text: Option<&str>) -> Result<PriceTable, CliError> {
    if let Some(t) = PriceTable::named(name) {
        return Ok(t);
    }
    let text = file_text.unwrap_or_default();
    PriceTable::from_json(text).map_err(|why| {
        CliError::validation(
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
    args: &ReplayArgs,
    run_text: &str,
    prices: &PriceTable,
) -> Result<(String, String), CliError> {
    let format: Format = args.format.into();
    let run: Value = crate::error::parse_json("the run", run_text)?;
    let window = match args.window {
        Some(w) => w,
        None => {
            let fraction = args.window_fraction.unwrap_or(0.7);
            if !(fraction > 0.0 && fraction.is_finite()) {
                return Err(CliError::validation(
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
    let config = config(format, window, &args.tuning, Breakpoints::Auto)?;
    let options = ReplayOptions {
        marking: args.marks.into(),
        warm_prefix: args.warm_prefix,
    };
    let replay = cutctx::session::replay_with(&config, prices, &run, options)?;
    let out = if args.json {
        json_line(&replay, prices, args.warm_prefix)
    } else {
        table(&replay, prices)
    };
    Ok((out, crate::svg::chart(&replay, prices)))
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
        "{:<10} {:>5} {:>11} {:>9} {:>5} {:>11} {:>12} {:>12} {:>10} {:>11}",
        "strategy",
        "calls",
        "tokens_sent",
        "cache_hit",
        "busts",
        "compactions",
        "cost_units",
        format!("cost_{}", prices.currency),
        "peak_use",
        "over_window"
    );
    for s in &replay.strategies {
        let _ = writeln!(
            out,
            "{:<10} {:>5} {:>11} {:>9.3} {:>5} {:>11} {:>12.1} {:>12.6} {:>10.3} {:>11}",
            s.name,
            s.calls,
            s.tokens_sent,
            s.hit_rate(),
            s.busts,
            s.compactions,
            s.cost_units,
            s.cost_money,
            peak_share(s, replay.window),
            s.over_window
        );
    }
    let _ = writeln!(
        out,
        "lower bound: no strategy that stays under the window where it can pays less than {:.1} units",
        replay.bound_units
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
