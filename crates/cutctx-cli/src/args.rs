//! The command line's options, as clap reads them, and each one's plain counterpart in the
//! operations library (`cutctx_ops`), which knows nothing of clap.
//!
//! The help texts live here, beside the flags they describe; the defaults and what each option
//! does live in the operations library, so the Python package and any other front end read the
//! same ones.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use cutctx::formats::{Format, ReasoningMode};
use cutctx_ops::replay::ReplayMarks;
use cutctx_ops::session::Breakpoints;

/// The parser of a provider format's name: its possible values are [`Format::ALL`]'s names.
pub(crate) fn format_name() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(Format::ALL.map(Format::as_str)).map(|name| {
        name.parse()
            .expect("a possible value is a format's own name")
    })
}

/// The parser of a count of tokens (`--max-tokens`, `--window`, `--reserve-output`): a whole
/// number, 0 or more. Negative numbers reach it (rather than being read as an unknown option),
/// so that `--max-tokens -5` is told what a count of tokens is.
fn tokens(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("expected a whole number of tokens, 0 or more, not {s:?}"))
}

/// The parser of `--cache-breakpoints`: `auto` or `off`.
fn breakpoints() -> impl TypedValueParser<Value = Breakpoints> {
    PossibleValuesParser::new(Breakpoints::ALL.map(Breakpoints::as_str)).map(|name| {
        Breakpoints::ALL
            .into_iter()
            .find(|b| b.as_str() == name)
            .expect("a possible value is a setting's own name")
    })
}

/// The parser of `--marks`: `shared` or `session-only`.
fn marks() -> impl TypedValueParser<Value = ReplayMarks> {
    PossibleValuesParser::new(ReplayMarks::ALL.map(ReplayMarks::as_str)).map(|name| {
        ReplayMarks::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .expect("a possible value is a setting's own name")
    })
}

/// The parser of `--reasoning`: `strip`, `keep` or `refuse`.
fn reasoning() -> impl TypedValueParser<Value = ReasoningMode> {
    PossibleValuesParser::new(ReasoningMode::ALL.map(ReasoningMode::as_str))
        .map(|name| name.parse().expect("a possible value is a mode's own name"))
}

/// The options of `cutctx compact --format ...`, to flatten into the `compact` command.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct FormatArgs {
    /// Read the input as a provider request in this format, and write the compacted request in it.
    #[arg(long, value_parser = format_name())]
    pub(crate) format: Option<Format>,
    /// The budget, in estimated tokens (required with --format).
    #[arg(long, value_parser = tokens, allow_negative_numbers = true, requires = "format")]
    pub(crate) max_tokens: Option<u64>,
    /// How many of the most recent turns are never touched (default 4).
    #[arg(long, requires = "format")]
    pub(crate) protected_recent: Option<u64>,
    /// drop_oldest, observation_masking, summarizing or default_chain, or a policy object as
    /// the request document spells it, e.g. '{"name":"observation_masking","keep_recent_results":1}'
    /// (default: default_chain with --summaries or --summarize-with, masking then drop_oldest
    /// without).
    #[arg(long, requires = "format")]
    pub(crate) policy: Option<String>,
    /// The prompt id of summarization requests (default compaction.summarize.v1).
    #[arg(long, requires = "format")]
    pub(crate) prompt_id: Option<String>,
    /// How turns are estimated: chars:N (default chars:4), o200k_base or cl100k_base.
    #[arg(long, requires = "format")]
    pub(crate) estimator: Option<String>,
    /// A JSON object {group_id: summary} fulfilling the plan's summarization requests.
    #[arg(long, requires = "format", conflicts_with = "summarize_with")]
    pub(crate) summaries: Option<PathBuf>,
    /// A command that writes one summary: it gets the request as JSON on standard input.
    #[arg(long, requires = "format")]
    pub(crate) summarize_with: Option<String>,
    /// Also write {"plan", "report"} (canonical JSON) to this file.
    #[arg(long, requires = "format")]
    pub(crate) report: Option<PathBuf>,
    /// Tokens kept for the completion, out of --max-tokens (default: the request's own
    /// max_completion_tokens or max_tokens, max_output_tokens, or max_tokens; else 0).
    #[arg(long, value_parser = tokens, allow_negative_numbers = true, requires = "format")]
    pub(crate) reserve_output: Option<u64>,
    /// Drop (never invent) what makes the history invalid for its provider: calls without
    /// results, results without calls, misplaced reasoning, reused call ids, empty messages,
    /// null statuses. Each drop is listed in the report and on standard error.
    #[arg(long, requires = "format")]
    pub(crate) repair: bool,
    /// What to do with the thinking blocks and reasoning items after the first message the
    /// compaction changes, whose signatures the provider then rejects: strip them (the
    /// default), keep them as they are, or refuse to compact.
    #[arg(long, requires = "format", value_parser = reasoning(), default_value = "strip")]
    pub(crate) reasoning: ReasoningMode,
}

impl FormatArgs {
    /// The options as the operations library takes them (the files are the binary's to read).
    pub(crate) fn options(&self) -> cutctx_ops::formats::FormatOptions {
        cutctx_ops::formats::FormatOptions {
            format: self.format,
            max_tokens: self.max_tokens,
            protected_recent: self.protected_recent,
            policy: self.policy.clone(),
            prompt_id: self.prompt_id.clone(),
            estimator: self.estimator.clone(),
            summarize_with: self.summarize_with.clone(),
            summarizes: self.summaries.is_some(),
            report: self.report.is_some(),
            reserve_output: self.reserve_output,
            repair: self.repair,
            reasoning: self.reasoning,
            front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
        }
    }
}

/// The settings `session` and `replay` share.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TuningArgs {
    /// Fire when the request would exceed TRIGGER × window (default 1.0).
    #[arg(long)]
    trigger: Option<f64>,
    /// When firing, compact down to the untouchable part plus TARGET of the room above it (default 0.2).
    #[arg(long)]
    target: Option<f64>,
    /// drop_oldest, observation_masking, summarizing or default_chain, or a policy object
    /// (default: default_chain with --summarize-with, masking then drop_oldest without).
    #[arg(long)]
    policy: Option<String>,
    /// The prompt id of summarization requests (default compaction.summarize.v1).
    #[arg(long)]
    prompt_id: Option<String>,
    /// How requests are counted: chars:N (default chars:4), o200k_base or cl100k_base.
    #[arg(long)]
    estimator: Option<String>,
    /// How many of the most recent turns are never touched (default 4).
    #[arg(long)]
    protected_recent: Option<u64>,
    /// Tokens kept free for the answer, counted in the window (default 0).
    #[arg(long, value_parser = tokens, allow_negative_numbers = true, default_value_t = 0)]
    reserve_output: u64,
    /// What a firing does with the thinking blocks and reasoning items after the first message
    /// it changes, whose signatures the provider then rejects: strip them (the default), keep
    /// them as they are, or refuse to compact.
    #[arg(long, value_parser = reasoning(), default_value = "strip")]
    reasoning: ReasoningMode,
    /// Also fire below the trigger where the cache model predicts that a firing now costs
    /// less over the calls to come than not firing (priced by the format's shipped table; in
    /// replay, by --pricing).
    #[arg(long)]
    fire_early: bool,
}

impl TuningArgs {
    /// The settings as the operations library takes them.
    /// The settings, for a command that `summarizes` (has summaries written) or not.
    fn options(&self, summarizes: bool) -> cutctx_ops::session::Tuning {
        cutctx_ops::session::Tuning {
            summarizes,
            front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
            trigger: self.trigger,
            target: self.target,
            policy: self.policy.clone(),
            prompt_id: self.prompt_id.clone(),
            estimator: self.estimator.clone(),
            protected_recent: self.protected_recent,
            reserve_output: self.reserve_output,
            reasoning: self.reasoning,
            fire_early: self.fire_early,
        }
    }
}

/// The options of `cutctx session`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct SessionArgs {
    /// The request's format.
    #[arg(long, value_parser = format_name())]
    format: Format,
    /// The window: the whole prompt (tools, system, messages) plus --reserve-output, in tokens.
    #[arg(long, value_parser = tokens, allow_negative_numbers = true)]
    window: u64,
    /// The settings shared with `replay`.
    #[command(flatten)]
    tuning: TuningArgs,
    /// A command that writes one summary: it gets the request as JSON on standard input.
    #[arg(long)]
    summarize_with: Option<String>,
    /// Anthropic: mark the end of the compacted prefix with cache_control after a firing.
    #[arg(long, value_parser = breakpoints(), default_value = Breakpoints::Off.as_str())]
    cache_breakpoints: Breakpoints,
    /// The session's state file: read when it exists, then replaced (atomically).
    #[arg(long)]
    pub(crate) state: PathBuf,
    /// Append a receipt of each firing to this ledger (arcaeon's format).
    #[arg(long)]
    pub(crate) ledger: Option<PathBuf>,
    /// The compactor the receipt names (default `cutctx/<version>`).
    #[arg(long, requires = "ledger")]
    pub(crate) compactor: Option<String>,
    /// Drop (never invent) what makes the history invalid for its provider before the step,
    /// as `compact --repair` does; each drop is listed on standard error.
    #[arg(long)]
    repair: bool,
    /// Keep the result of this tool call (and so the call) as it is if this call fires: a
    /// result the model has just retrieved. Repeat for several.
    #[arg(long = "pin", value_name = "CALL_ID")]
    pin: Vec<String>,
}

impl SessionArgs {
    /// The options as the operations library takes them (the files are the binary's).
    pub(crate) fn options(&self) -> cutctx_ops::session::SessionOptions {
        cutctx_ops::session::SessionOptions {
            format: self.format,
            window: self.window,
            tuning: self.tuning.options(self.summarize_with.is_some()),
            summarize_with: self.summarize_with.clone(),
            cache_breakpoints: self.cache_breakpoints,
            repair: self.repair,
            pin: self.pin.clone(),
        }
    }
}

/// The options of `cutctx replay`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The run's format.
    #[arg(long, value_parser = format_name())]
    format: Format,
    /// The window, in tokens.
    #[arg(long, value_parser = tokens, allow_negative_numbers = true, conflicts_with = "window_fraction")]
    window: Option<u64>,
    /// The window, as a fraction of the whole run's final size (default 0.7).
    #[arg(long)]
    window_fraction: Option<f64>,
    /// auto (the default: the table of the run's model, as claude-opus-5-5 or gpt-4.1, and
    /// anthropic's when no table covers it), anthropic, openai, deepseek, or a JSON price
    /// table file. The table used is named in the replay's first line.
    #[arg(long, default_value = cutctx_ops::replay::AUTO_PRICING)]
    pub(crate) pricing: String,
    /// Draw context size and cumulative cost per call to this SVG file.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// Print the figures as one line of JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Where the requests carry cache breakpoints (Anthropic-style pricing): `shared` (the
    /// default) marks every strategy's system prefix and last message alike; `session-only`
    /// marks the system prefix of the session's requests alone.
    #[arg(long, value_parser = marks(), default_value = ReplayMarks::Shared.as_str())]
    marks: ReplayMarks,
    /// Start the run with its tools and system prompt already cached, as when many
    /// conversations share them; every strategy (and the lower bound) starts equally warm.
    /// Off by default: nothing is shared between runs.
    #[arg(long)]
    warm_prefix: bool,
    /// Add the offline reference `hindsight` (the best firing schedule, found with the whole
    /// run known) and the peer strategies (Claude Code, Codex, OpenHands, Anthropic's
    /// tool-result clearing and server compaction, Deep Agents) to the table.
    #[arg(long)]
    compare: bool,
    /// A strategy whose requests were produced elsewhere: NAME=FILE, FILE holding one JSON
    /// line per call of the run (the whole request sent at that call). Repeatable.
    #[arg(long, value_name = "NAME=FILE.jsonl")]
    pub(crate) external: Vec<String>,
    /// The N of retention's "share of the last N tool results kept verbatim".
    #[arg(long, default_value_t = 5)]
    retention_last: usize,
    /// How a compaction's summarizing call is asked, and so priced: `cached` (the default:
    /// the request as it would be sent, plus the instruction, which reads the cached prefix)
    /// or `span` (the turns alone, as a fresh prompt).
    #[arg(long, value_parser = ["cached", "span"], default_value = "cached")]
    summary_input: String,
    /// The settings shared with `session`.
    #[command(flatten)]
    tuning: TuningArgs,
}

impl ReplayArgs {
    /// The options as the operations library takes them (the SVG file is the binary's).
    pub(crate) fn options(&self, external: Vec<(String, String)>) -> cutctx_ops::replay::ReplayRun {
        cutctx_ops::replay::ReplayRun {
            compare: self.compare,
            external,
            retention_last: self.retention_last,
            summary_input: if self.summary_input == "cached" {
                cutctx::replay::SummaryInput::Cached
            } else {
                cutctx::replay::SummaryInput::Span
            },
            format: self.format,
            window: self.window,
            window_fraction: self.window_fraction,
            pricing: self.pricing.clone(),
            json: self.json,
            marks: self.marks,
            warm_prefix: self.warm_prefix,
            // The replay writes every summary itself.
            tuning: self.tuning.options(true),
        }
    }
}

/// The options of `cutctx batch`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BatchArgs {
    /// The JSONL file of requests (`.gz` and `.zst` read directly), or `-` for standard input.
    input: PathBuf,
    /// The format, budget, policy and summaries, as `cutctx compact --format` takes them.
    #[command(flatten)]
    format: FormatArgs,
    /// How many lines are compacted at once (default: every core).
    #[arg(long)]
    jobs: Option<NonZeroUsize>,
    /// Write one JSON line per failed input line to this file: `{"code", "details", "line",
    /// "message"}` (replaced atomically at the end of the run).
    #[arg(long)]
    errors: Option<PathBuf>,
    /// Append one receipt per compacted line (not for unchanged or failed ones) to this ledger.
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// The compactor the receipts name (default `cutctx/<version>`).
    #[arg(long, requires = "ledger")]
    compactor: Option<String>,
}

impl BatchArgs {
    /// The options as the operations library takes them.
    pub(crate) fn options(&self) -> cutctx_ops::batch::BatchOptions {
        cutctx_ops::batch::BatchOptions {
            input: self.input.clone(),
            format: self.format.options(),
            summaries: self.format.summaries.clone(),
            jobs: self.jobs,
            errors: self.errors.clone(),
            ledger: self.ledger.clone(),
            compactor: self.compactor.clone(),
        }
    }
}

/// The options of `cutctx serve`.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("policy", |a| a.help(
    "drop_oldest, observation_masking, summarizing, default_chain, or a policy object (default: \
     masking then drop_oldest; summaries come from --summarizer, swapped in at a firing)"
)))]
pub(crate) struct ServeArgs {
    /// HOST:PORT to listen on; port 0 picks a free one.
    #[arg(long)]
    listen: String,
    /// The OpenAI base URL: /v1/chat/completions, /v1/responses and every other path but
    /// /v1/messages* go to URL + path (default https://api.openai.com).
    #[arg(long)]
    openai_upstream: Option<String>,
    /// The Anthropic base URL: /v1/messages* go to URL + path (default https://api.anthropic.com).
    #[arg(long)]
    anthropic_upstream: Option<String>,
    /// Where the sessions are kept: sqlite:PATH or memory.
    #[arg(long, default_value = "sqlite:cutctx-serve.db")]
    state: String,
    /// When a SQLite commit is on disk: normal (in the write-ahead log: a killed proxy loses
    /// nothing, a lost machine may lose the last calls) or full (synced: an fsync per call).
    #[arg(long, default_value = "normal")]
    sqlite_sync: String,
    /// The window of every model, in tokens, over the shipped table and the config.
    #[arg(long, value_parser = tokens, allow_negative_numbers = true)]
    window: Option<u64>,
    /// A JSON config file: {"windows": {MODEL: N}, "openai_upstream": URL, "anthropic_upstream": URL}.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Append a receipt of each firing to this ledger (arcaeon's format).
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// The session settings.
    #[command(flatten)]
    tuning: TuningArgs,
    /// The largest request body read, in bytes; a larger one gets 413.
    #[arg(long, default_value_t = 33_554_432)]
    max_body: usize,
    /// The timeout of connecting and of the response's headers, and the longest wait between
    /// two chunks of a response, in milliseconds; past it 504 (or a cut stream).
    #[arg(long, default_value_t = 600_000)]
    upstream_timeout_ms: u64,
    /// Refuse (400) a request the proxy cannot read or compact instead of forwarding it.
    #[arg(long)]
    fail_closed: bool,
    /// Forget sessions unused for this many seconds.
    #[arg(long, default_value_t = 86_400)]
    max_age_secs: u64,
    /// Keep at most this many sessions in all; a full store gives up only the calling
    /// credential's own least recently used session.
    #[arg(long, default_value_t = 10_000)]
    max_sessions: u64,
    /// Keep at most this many sessions per credential (its least recently used go first).
    #[arg(long, default_value_t = 1_000)]
    max_sessions_per_tenant: u64,
    /// A token callers must send as `x-cutctx-auth: TOKEN` (the proxy's own, not the
    /// provider's key; repeatable). Prefer --auth-tokens-file: a command line is visible to
    /// other users of the machine.
    #[arg(long = "auth-token", value_name = "TOKEN")]
    auth_tokens: Vec<String>,
    /// A file of tokens callers may send as `x-cutctx-auth: TOKEN`, one per line (`#` starts
    /// a comment line).
    #[arg(long)]
    pub(crate) auth_tokens_file: Option<PathBuf>,
    /// At most this many client connections at once; more wait to be accepted (default 1,024,
    /// or half the descriptor limit when that is lower).
    #[arg(long)]
    max_connections: Option<usize>,
    /// Close a connection that sends no whole request head for this long, since it opened or
    /// since its last response (an idle keep-alive connection), in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    idle_timeout_ms: u64,
    /// Close a connection whose request head, once begun, is not whole within this long; and
    /// answer 408 to a request body that pauses for longer, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// How the proxy summarizes before a firing, through the same upstream with the caller's
    /// own credential: none (masking, then dropping), auto or native (the provider's own
    /// compaction on Anthropic Messages and OpenAI Responses, a cached-prefix request on Chat
    /// Completions), or cached (a cached-prefix request everywhere).
    #[arg(long, default_value = "none")]
    summarizer: String,
    /// Start a summary in the background once a request reaches this share of the trigger;
    /// 1 makes it at the firing call, which waits for it.
    #[arg(long, default_value_t = cutctx_serve::DEFAULT_SUMMARY_AHEAD)]
    summary_ahead: f64,
    /// The model of cached-prefix summaries (default: the conversation's own, whose cache they
    /// read).
    #[arg(long)]
    summary_model: Option<String>,
    /// The longest a summarizing call may take, its answer included, in milliseconds; past it
    /// the firing compacts with the policy.
    #[arg(long, default_value_t = 120_000)]
    summary_timeout_ms: u64,
}

impl ServeArgs {
    /// The options as the serve library takes them, with the config file's text.
    pub(crate) fn options(
        &self,
        config_text: Option<String>,
        tokens_text: Option<String>,
    ) -> Result<cutctx_serve::ServeOptions, cutctx_ops::OpsError> {
        let mut o = cutctx_serve::ServeOptions::new(&self.listen);
        o.openai_upstream.clone_from(&self.openai_upstream);
        o.anthropic_upstream.clone_from(&self.anthropic_upstream);
        o.state = self.state.parse()?;
        o.sqlite_sync = self.sqlite_sync.parse()?;
        o.window = self.window;
        o.config_text = config_text;
        o.ledger.clone_from(&self.ledger);
        // The proxy has no model of its own to write summaries with.
        o.tuning = self.tuning.options(false);
        o.max_body = self.max_body;
        o.upstream_timeout = std::time::Duration::from_millis(self.upstream_timeout_ms);
        o.fail_closed = self.fail_closed;
        o.max_age_secs = self.max_age_secs;
        o.max_sessions = self.max_sessions;
        o.max_sessions_per_tenant = self.max_sessions_per_tenant;
        o.auth_tokens.clone_from(&self.auth_tokens);
        o.auth_tokens_text = tokens_text;
        o.max_connections = self.max_connections;
        o.idle_timeout = std::time::Duration::from_millis(self.idle_timeout_ms);
        o.header_timeout = std::time::Duration::from_millis(self.header_timeout_ms);
        o.summarizer.clone_from(&self.summarizer);
        o.summary_ahead = self.summary_ahead;
        o.summary_model.clone_from(&self.summary_model);
        o.summary_timeout = std::time::Duration::from_millis(self.summary_timeout_ms);
        Ok(o)
    }
}
