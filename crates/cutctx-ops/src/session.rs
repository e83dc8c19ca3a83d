//! A session's settings, and the text path over the typed session ([`Session`], in
//! `session/live.rs`) that every front end holds: [`session`] and [`session_with`] take the
//! request's and the state's text and return theirs, for the binary, which reads the request
//! and the state file and writes the state (atomically) and the ledger.

use cutctx::formats::{EstimatorSpec, Format, FormatError};
use cutctx::session::{Firing, PriceTable, SessionConfig};
use serde_json::Value;

use crate::OpsError;
use crate::formats::{from_format, named_policy};
use crate::summarizer::{CommandSummarizer, Summarizer};

mod live;
/// Summaries made ahead of a firing, around a cut (`cutctx-session`'s own module).
pub use cutctx::session::ahead;
pub use live::{Appended, Call, HistoryKey, Prepared, Session};

/// The policy of a front end with no model to write summaries (the proxy, a session or a
/// compaction given no summarizer): mask old tool results, then drop the oldest turns. Masking
/// first keeps the conversation's turns while it can.
///
/// ```
/// let policy: serde_json::Value = serde_json::from_str(cutctx_ops::session::NO_SUMMARIZER_POLICY)?;
/// assert_eq!(policy["name"], "chain");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub const NO_SUMMARIZER_POLICY: &str =
    r#"{"name":"chain","policies":[{"name":"observation_masking"},{"name":"drop_oldest"}]}"#;

/// The policy a front end compacts with when it names none: with a summarizer (a command, a
/// callable), `default_chain` (mask, summarize, drop); without one, [`NO_SUMMARIZER_POLICY`]
/// (mask, drop), so that no firing ever waits for a summary nobody can write. Every front end
/// takes this one rule.
///
/// ```
/// use cutctx_ops::session::{NO_SUMMARIZER_POLICY, default_policy};
/// assert_eq!(default_policy(false), NO_SUMMARIZER_POLICY);
/// assert_eq!(default_policy(true), "default_chain");
/// ```
#[must_use]
pub const fn default_policy(summarizes: bool) -> &'static str {
    if summarizes {
        cutctx::policies::registry::DEFAULT_POLICY
    } else {
        NO_SUMMARIZER_POLICY
    }
}

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
    /// drop_oldest, observation_masking, summarizing or default_chain, or a policy object;
    /// when absent, [`default_policy`] of `summarizes`.
    pub policy: Option<String>,
    /// Whether the caller supplies summaries (a command, a callable, the replay's own): the
    /// policy named by none is then `default_chain`, else masking then dropping, which never
    /// needs one.
    pub summarizes: bool,
    /// The front end the session is used through, for the words of its messages.
    pub front_end: crate::summarizer::FrontEnd,
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
    /// The session after the call, typed, for a front end that keeps it in memory (its
    /// [`Session::append`] takes a next call's appended messages alone).
    pub session: Session,
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
        policy: named_policy(
            tuning.policy.as_deref(),
            tuning.prompt_id.as_deref(),
            spec,
            tuning.summarizes,
        )?,
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
/// `summarize_with` command (which is then not read); `None` for none. A thin wrapper over
/// [`Session`]: the request parsed, one step, the request written as it came.
///
/// # Errors
///
/// As [`session`]; `COMPACTION_SUMMARY_MISSING` at a firing that needs summaries without a
/// summarizer; the summarizer's own errors.
pub fn session_with(
    args: &SessionOptions,
    request_text: &str,
    state_text: Option<&str>,
    summarizer: Option<&mut dyn Summarizer>,
) -> Result<SessionOutput, OpsError> {
    let mut session = match state_text {
        Some(text) => Session::restore(args, text)?,
        None => Session::new(args)?,
    };
    let request: Value = crate::error::parse_json("the request", request_text)?;
    let call = Call {
        // The summarizer borrowed for this call alone.
        summarizer: summarizer.map(|s| -> &mut dyn Summarizer { s }),
        pin: &args.pin,
        digests: None,
    };
    let prepared = session.step(request, call)?;
    let output = prepared.written(args.format, request_text)?;
    Ok(SessionOutput {
        output,
        state: session.state_json().unwrap_or_default(),
        notice: prepared.notice,
        firing: prepared.firing,
        repairs: prepared.repairs,
        reasoning: prepared.reasoning,
        session,
    })
}
