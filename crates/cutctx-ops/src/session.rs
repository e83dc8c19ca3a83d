//! `cutctx session`: compaction across the calls of an agent loop.
//!
//! It takes texts and returns texts, as the other commands do; the binary reads the request
//! and the state, and writes the state (atomically) and the ledger.

use cutctx::formats::{EstimatorSpec, Format, FormatError, ProviderTranscript};
use cutctx::model::details;
use cutctx::session::{Firing, PriceTable, Restart, SessionConfig, SessionState};
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

pub(crate) fn estimator_spec(text: Option<&str>) -> Result<EstimatorSpec, OpsError> {
    text.map_or_else(
        || Ok(EstimatorSpec::default()),
        |s| s.parse().map_err(from_format),
    )
}

pub(crate) fn config(
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
