//! What a front end passes to the compaction of a provider request ([`FormatOptions`], and
//! [`Keep`] for what is made beyond the request) and what it gets back ([`FormatOutput`], with
//! the report's figures in [`Detailed`]).

use cutctx::formats::{Format, ReasoningMode};

/// The options of compacting a provider request (`cutctx compact --format ...`), as every front
/// end passes them; `None` is the documented default of each.
///
/// ```
/// use cutctx::formats::Format;
/// use cutctx_ops::formats::{compact, FormatOptions};
///
/// let options = FormatOptions {
///     format: Some(Format::OpenAiChat),
///     max_tokens: Some(1000),
///     ..FormatOptions::default()
/// };
/// let request = r#"[{"role":"user","content":"hi"}]"#;
/// let out = compact(&options, request, None)?;
/// // A request that fits comes back byte for byte, as a line.
/// assert_eq!(out.output, format!("{request}\n"));
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct FormatOptions {
    /// Read the input as a provider request in this format, and write the compacted request in it.
    pub format: Option<Format>,
    /// The budget, in estimated tokens (required with --format).
    pub max_tokens: Option<u64>,
    /// How many of the most recent turns are never touched (default 4).
    pub protected_recent: Option<u64>,
    /// drop_oldest, observation_masking, summarizing or default_chain, or a policy object as
    /// the request document spells it, e.g. '{"name":"observation_masking","keep_recent_results":1}';
    /// when absent, `default_chain` if the caller summarizes (`summarizes`, or a
    /// `summarize_with` command), else masking then dropping
    /// ([`crate::session::default_policy`]).
    pub policy: Option<String>,
    /// Whether the caller supplies summaries itself (a summaries file, a callable).
    pub summarizes: bool,
    /// The prompt id of summarization requests (default compaction.summarize.v1).
    pub prompt_id: Option<String>,
    /// How turns are estimated: chars:N (default chars:4), o200k_base or cl100k_base.
    pub estimator: Option<String>,
    /// A command that writes one summary: it gets the request as JSON on standard input.
    pub summarize_with: Option<String>,
    /// Make `{"plan", "report"}` (canonical JSON), as `--report FILE` writes it.
    pub report: bool,
    /// Tokens kept for the completion, out of --max-tokens (default: the request's own
    /// max_completion_tokens or max_tokens, max_output_tokens, or max_tokens; else 0).
    pub reserve_output: Option<u64>,
    /// Drop (never invent) what makes the history invalid for its provider: calls without
    /// results, results without calls, misplaced reasoning, reused call ids, empty messages,
    /// null statuses. Each drop is listed in the report and on standard error.
    pub repair: bool,
    /// What becomes of the thinking blocks and reasoning items after the first message the
    /// compaction changes, which the provider no longer accepts: removed (the default), kept
    /// as they were, or the compaction refused.
    pub reasoning: ReasoningMode,
    /// The front end the call came through: a message that asks for summaries names its
    /// option (`--summaries FILE` or `--summarize-with CMD`; Python's `summaries=` or
    /// `summarize=`).
    pub front_end: crate::summarizer::FrontEnd,
}

/// What `cutctx compact --format` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatOutput {
    /// The compacted request, for standard output.
    pub output: String,
    /// `{"plan", "report"}` as canonical JSON and a newline, for `--report FILE`; with
    /// `"prompt"` when tools or an output reserve count, `"repairs"` with `--repair`. Empty
    /// from [`compact_owned`](super::compact_owned)
    /// ([`Streamed::report`](super::Streamed::report)) without `--report`, and from
    /// [`compact_detailed`](super::compact_detailed) without [`Keep::report`], whose callers
    /// have no use for it.
    pub report: String,
    /// What `--repair` dropped, in order, one line each for standard error.
    pub repairs: Vec<String>,
    /// The line for standard error when the compaction invalidated reasoning: how much, and
    /// what `--reasoning` did with it.
    pub reasoning: Option<String>,
}

/// What [`compact_detailed`](super::compact_detailed) returns: the outputs of
/// [`compact`](super::compact), the report's figures, and, when asked for, what a receipt is
/// made of.
#[derive(Debug, Clone)]
pub struct Detailed {
    /// What `cutctx compact --format` writes.
    pub output: FormatOutput,
    /// Whether every turn was kept, so that the output is the input itself.
    pub unchanged: bool,
    /// The request's whole prompt, in estimated tokens: tools, system, messages and the output
    /// reserve, as `cutctx estimate` totals it (with `--repair`, of the repaired request).
    pub tokens_before: u64,
    /// The compacted request's whole prompt, counted the same way.
    pub tokens_after: u64,
    /// The request's transcript and the compacted view with its report, for a receipt.
    pub compaction: Option<(cutctx::Transcript, cutctx::CompactedTranscript)>,
}

/// What [`compact_detailed`](super::compact_detailed) makes beyond the compacted request and the
/// report's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    /// The request's transcript and the compacted view, for a receipt ([`Detailed::compaction`]).
    pub compaction: bool,
    /// The report's text ([`FormatOutput::report`]; empty when not asked for): its canonical
    /// JSON and hash over every turn id are not made for a caller that throws them away.
    pub report: bool,
}
