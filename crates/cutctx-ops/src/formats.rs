//! `cutctx compact --format openai-chat|openai-responses|anthropic`: compaction of a provider
//! request in the provider's own format.
//!
//! The input is an OpenAI Chat Completions request (or its `messages` array), an OpenAI
//! Responses request (or its `input` list) or an Anthropic Messages request (or its `messages`
//! array); the output is the compacted request in the same format and shape, written only
//! after the whole command succeeded. A request that fits comes back byte for byte.
//!
//! Summaries come from `--summaries FILE` (a JSON object `{group_id: text}`) or from
//! `--summarize-with CMD`, which runs `CMD` (through `sh -c`) once per summarization request,
//! with the request as JSON on its standard input, and takes its standard output as the
//! summary; a failing command fails the compaction. Without either, a plan that needs
//! summaries fails with `COMPACTION_SUMMARY_MISSING` and the requests in the message.
//!
//! [`compact`] takes the texts of the documents and returns the output texts; the one thing it
//! does besides computing is starting the summarizer command, when asked to.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write as _;

use cutctx::formats::{
    EstimatorSpec, Format, FormatError, PromptCount, ProviderTranscript, ReasoningMode,
    ReasoningOutcome, Repair, is_repairable,
};
use cutctx::model::details;
use cutctx::{CompactionBudget, CompactionPlan, CompactionPolicy, ErrorCode, SummarizationRequest};
use serde_json::Value;

use crate::OpsError;
use crate::summarizer::{CommandSummarizer, Summarizer, summarize_each};

pub use crate::summarizer::SUMMARIZER_ERROR;

pub use cutctx::policies::registry::{DEFAULT_POLICY, DEFAULT_PROMPT_ID};

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
    /// drop_oldest, observation_masking, summarizing or default_chain (the default), or a
    /// policy object as the request document spells it, e.g. '{"name":"observation_masking","keep_recent_results":1}'.
    pub policy: Option<String>,
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
}

/// What `cutctx compact --format` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatOutput {
    /// The compacted request, for standard output.
    pub output: String,
    /// `{"plan", "report"}` as canonical JSON and a newline, for `--report FILE`; with
    /// `"prompt"` when tools or an output reserve count, `"repairs"` with `--repair`. Empty
    /// from [`compact_owned`] ([`Streamed::report`]) without `--report`, and from
    /// [`compact_detailed`] without [`Keep::report`], whose callers have no use for it.
    pub report: String,
    /// What `--repair` dropped, in order, one line each for standard error.
    pub repairs: Vec<String>,
    /// The line for standard error when the compaction invalidated reasoning: how much, and
    /// what `--reasoning` did with it.
    pub reasoning: Option<String>,
}

/// `cutctx compact --format F`: compacts the provider request `input_text` under the budget
/// and policy of `args`, with the summaries of `summaries_text` (the `--summaries` file) or of
/// the `--summarize-with` command.
///
/// # Errors
///
/// `USAGE_ERROR` without `--format` or `--max-tokens`; `INPUT_ERROR` for text that is not
/// JSON; `FORMAT_ERROR` or `FORMAT_INVALID_REQUEST` for a request that is not valid for its
/// provider; `VALIDATION_ERROR` for bad options; `COMPACTION_BUDGET_UNSATISFIABLE`;
/// `COMPACTION_SUMMARY_MISSING` (listing the requests); `SUMMARIZER_ERROR`.
pub fn compact(
    args: &FormatOptions,
    input_text: &str,
    summaries_text: Option<&str>,
) -> Result<FormatOutput, OpsError> {
    compact_text(
        args,
        Cow::Borrowed(input_text),
        summaries_text,
        Release::Free,
        false,
        true,
    )
    .and_then(|d| d.into_detailed().map(|d| d.output))
}

/// What [`compact_detailed`] returns: the outputs of [`compact`], the report's figures, and,
/// when asked for, what a receipt is made of.
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

/// What [`compact_detailed`] makes beyond the compacted request and the report's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    /// The request's transcript and the compacted view, for a receipt ([`Detailed::compaction`]).
    pub compaction: bool,
    /// The report's text ([`FormatOutput::report`]; empty when not asked for): its canonical
    /// JSON and hash over every turn id are not made for a caller that throws them away.
    pub report: bool,
}

/// As [`compact`], with the report's figures and what `keep` asks for (for `cutctx batch` and
/// the Python batch functions, which count each line, and receipt or report it on request).
///
/// # Errors
///
/// As [`compact`].
pub fn compact_detailed(
    args: &FormatOptions,
    input_text: &str,
    summaries_text: Option<&str>,
    keep: Keep,
) -> Result<Detailed, OpsError> {
    compact_text(
        args,
        Cow::Borrowed(input_text),
        summaries_text,
        Release::Free,
        keep.compaction,
        keep.report,
    )
    .and_then(Finished::into_detailed)
}

/// As [`compact`], taking the request's text, and handing back the output to write rather
/// than written whole: a compacted request is written from the input's text and the parts
/// compaction changed ([`Streamed::write_to`]), so the whole output is never held, and a
/// request that fits is its own text.
///
/// This is the command's own path, for a process that exits once the output is written: on
/// success the transcript and the compacted view are left to the process's exit instead of
/// being freed one by one, and the report is made only when `--report` asks for it. A caller
/// that compacts many requests in one process uses [`compact`], which frees them.
///
/// # Errors
///
/// As [`compact`]: everything that can fail but writing has been checked when it returns.
pub fn compact_owned(
    args: &FormatOptions,
    input_text: String,
    summaries_text: Option<&str>,
) -> Result<Streamed, OpsError> {
    let finished = compact_text(
        args,
        Cow::Owned(input_text),
        summaries_text,
        Release::AtExit,
        false,
        // The command writes the report only with --report: its canonical JSON and hash over
        // every turn id are not made for nothing.
        args.report,
    )?;
    let body = match finished.body {
        Body::Whole(text) => Body::Whole(text),
        Body::Parts {
            text,
            parts,
            newline,
        } => Body::Parts {
            text: Cow::Owned(text.into_owned()),
            parts,
            newline,
        },
    };
    Ok(Streamed {
        body,
        report: finished.output.report,
        repairs: finished.output.repairs,
        reasoning: finished.output.reasoning,
    })
}

/// What `cutctx compact --format` writes, its compacted request to be written as it is made:
/// what [`compact_owned`] returns.
#[derive(Debug)]
pub struct Streamed {
    body: Body<'static>,
    /// As [`FormatOutput::report`].
    pub report: String,
    /// As [`FormatOutput::repairs`].
    pub repairs: Vec<String>,
    /// As [`FormatOutput::reasoning`].
    pub reasoning: Option<String>,
}

impl Streamed {
    /// Writes the compacted request (the bytes [`compact`] returns as `output`) to `out`, a
    /// buffered part at a time, and flushes it.
    ///
    /// # Errors
    ///
    /// The first error writing to `out`; part of the output may have been written.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut buffered = std::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, out);
        self.body.write_to(&mut buffered)?;
        buffered.flush()
    }
}

/// The buffer [`Streamed::write_to`] gathers small parts in before writing them.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// A compacted request, whole or as parts of its input's text.
#[derive(Debug)]
enum Body<'a> {
    /// The output whole, a newline included.
    Whole(String),
    /// The output written from the input's text: `parts` of `text`, and a newline when they
    /// do not end with one.
    Parts {
        text: Cow<'a, str>,
        parts: cutctx::formats::TextParts,
        newline: bool,
    },
}

impl Body<'_> {
    /// The output whole: what [`Body::write_to`] writes.
    ///
    /// # Errors
    ///
    /// `INTERNAL_ERROR` should the parts not resolve in the text they were made from.
    fn into_text(self) -> Result<String, OpsError> {
        Ok(match self {
            Self::Whole(text) => text,
            Self::Parts {
                text,
                parts,
                newline,
            } => {
                // The parts were made from this text: they cannot fail to resolve in it, but
                // should they, the output is refused rather than printed empty.
                let mut whole = parts.to_text(&text).ok_or_else(|| {
                    OpsError::internal(
                        "the compacted request's parts do not resolve in its input's text",
                        details! { "text_bytes" => text.len() },
                    )
                })?;
                if newline {
                    whole.push('\n');
                }
                whole
            }
        })
    }

    fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        match self {
            Self::Whole(text) => out.write_all(text.as_bytes()),
            Self::Parts {
                text,
                parts,
                newline,
            } => {
                parts.write_to(text, out)?;
                if *newline {
                    out.write_all(b"\n")?;
                }
                Ok(())
            }
        }
    }
}

/// What the second half of `compact --format` makes: [`Detailed`], with the compacted
/// request not yet written whole.
struct Finished<'a> {
    body: Body<'a>,
    /// `output` is empty here: the request is `body`.
    output: FormatOutput,
    unchanged: bool,
    tokens_before: u64,
    tokens_after: u64,
    compaction: Option<(cutctx::Transcript, cutctx::CompactedTranscript)>,
}

impl Finished<'_> {
    /// The outputs, the compacted request written whole.
    fn into_detailed(self) -> Result<Detailed, OpsError> {
        let mut output = self.output;
        output.output = self.body.into_text()?;
        Ok(Detailed {
            output,
            unchanged: self.unchanged,
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            compaction: self.compaction,
        })
    }
}

/// What becomes of the compacted tree once its text is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// Freed as usual.
    Free,
    /// Left to the process's exit, which returns the memory at once.
    AtExit,
}

/// A provider request read, repaired, counted and planned: the first half of `compact
/// --format`, up to the plan's summarization requests. [`finish`] applies it.
///
/// The Python package runs the two halves around its own summarizer callable, so that what it
/// returns is exactly what the command prints.
#[derive(Debug)]
pub struct Prepared {
    format: Format,
    max_tokens: u64,
    pt: ProviderTranscript,
    plan: CompactionPlan,
    count: PromptCount,
    /// `Some` when repair was asked for (empty when nothing needed it).
    repairs: Option<Vec<Repair>>,
    /// The request mapped from a value, for the summarizer's input (which quotes the original
    /// messages), made when a summarizer first asks for it and `pt` was read from text.
    originals: Option<ProviderTranscript>,
    /// The estimator the turns were counted with, for `originals`.
    spec: EstimatorSpec,
}

impl Prepared {
    /// The plan, whose `summarization_requests` the summaries given to [`finish`] fulfil.
    #[must_use]
    pub const fn plan(&self) -> &CompactionPlan {
        &self.plan
    }

    /// The summaries of the plan's requests, asked of `summarizer` one at a time, in order,
    /// each with the document [`Prepared::summarization_input`] makes: what [`finish`] takes.
    /// `input_text` must be the text [`prepare`] read.
    ///
    /// # Errors
    ///
    /// As [`summarize_each`]; as [`Prepared::summarization_input`].
    pub fn summaries_from(
        &mut self,
        summarizer: &mut dyn Summarizer,
        input_text: &str,
    ) -> Result<BTreeMap<String, String>, OpsError> {
        let requests = self.plan.summarization_requests.clone();
        summarize_each(summarizer, &requests, |request| {
            self.summarization_input(input_text, request)
        })
    }

    /// The document a summarizer gets for `request`, as `--summarize-with` sends it.
    /// `input_text` must be the text [`prepare`] read: the document quotes the folded turns'
    /// original messages, which a request read from text does not keep, so on the first call
    /// they are mapped from it once more (only a plan that is summarized by a caller's model
    /// pays for that; summaries given ready do not).
    ///
    /// # Errors
    ///
    /// As [`prepare`], should `input_text` not be the text it read.
    pub fn summarization_input(
        &mut self,
        input_text: &str,
        request: &SummarizationRequest,
    ) -> Result<Value, OpsError> {
        if self.pt.is_from_text() && self.originals.is_none() {
            let (document, _) = read_value(self.format, false, input_text)?;
            let estimator = self.spec.estimator().map_err(from_format)?;
            let originals =
                ProviderTranscript::from_document_with(self.format, document, estimator.as_ref())
                    .map_err(invalid_with_hint)?;
            self.originals = Some(originals);
        }
        Ok(self
            .originals
            .as_ref()
            .unwrap_or(&self.pt)
            .summarization_input(request))
    }
}

/// The first half of `cutctx compact --format`: reads `input_text` as `args` say, repairs it
/// when `--repair` is set, counts the whole prompt and plans the turns against what is left.
///
/// # Errors
///
/// As [`compact`], but for what summaries and applying add.
pub fn prepare(args: &FormatOptions, input_text: &str) -> Result<Prepared, OpsError> {
    let format: Format = args
        .format
        .ok_or_else(|| usage("compact --format needs a format", "format"))?;
    let max_tokens = args
        .max_tokens
        .ok_or_else(|| usage("compact --format needs --max-tokens N", "max_tokens"))?;
    let spec: EstimatorSpec = match &args.estimator {
        Some(s) => s.parse().map_err(from_format)?,
        None => EstimatorSpec::default(),
    };
    let estimator = spec.estimator().map_err(from_format)?;
    // The request's text is read without a tree of the whole document, and the output will
    // copy its bytes; a request that path does not take (one that is not valid, a Responses
    // `input` string) or a repair goes through a value, whose errors are the catalogue's.
    // The turns' contents stay in the text until a step needs them (the plan reads what its
    // policy reads): most of a large request is output that is dropped or masked unread.
    let from_text = (!args.repair)
        .then(|| ProviderTranscript::from_text_deferred(format, input_text, estimator.as_ref()))
        .flatten();
    let (pt, repairs) = match from_text {
        Some(pt) => (pt, None),
        None => {
            let (document, repairs) = read_value(format, args.repair, input_text)?;
            let pt = ProviderTranscript::from_document_with(format, document, estimator.as_ref())
                .map_err(invalid_with_hint)?;
            (pt, repairs)
        }
    };
    let reserve = match args.reserve_output {
        Some(n) => n,
        None => pt.requested_output().map_err(from_format)?.unwrap_or(0),
    };
    // The sums only: nothing of the compaction reads the count turn by turn.
    let count = pt.prompt_totals(reserve);
    representable(&count, max_tokens)?;
    let turn_budget = count.turn_budget(max_tokens).map_err(from_format)?;
    let policy = policy(args, spec)?;
    let budget = CompactionBudget::new(turn_budget).with_protected_recent_turns(
        args.protected_recent
            .unwrap_or(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS),
    );
    let mut pt = pt;
    pt.set_reasoning(args.reasoning);
    // What a repair dropped changed the request before any compaction did.
    pt.set_changed_from(repairs.as_deref().and_then(cutctx::formats::first_repaired));
    let plan = pt
        .plan(policy.as_ref(), &budget, input_text)
        .map_err(from_format)?;
    Ok(Prepared {
        format,
        max_tokens,
        pt,
        plan,
        count,
        repairs,
        originals: None,
        spec,
    })
}

/// The request as a value, repaired when asked: `Some` repairs then (empty when nothing
/// needed one).
fn read_value(
    format: Format,
    repair: bool,
    input_text: &str,
) -> Result<(Value, Option<Vec<Repair>>), OpsError> {
    let document: Value = parse_json(input_text, "the transcript")?;
    if repair {
        let (repaired, repairs) = cutctx::formats::repair(format, document).map_err(from_format)?;
        return Ok((repaired, Some(repairs)));
    }
    Ok((document, None))
}

/// `COMPACTION_BUDGET_UNSATISFIABLE` when the prompt's parts and the reserve add up to more
/// than a `u64` holds: the sum saturates, and every figure derived from it (the turns' budget,
/// the report's whole-prompt totals) would be wrong. Only an output reserve near 2^64 (from
/// `--reserve-output` or the request's own limit) gets there, and no budget fits it.
fn representable(count: &PromptCount, max_tokens: u64) -> Result<(), OpsError> {
    let sum = count
        .tools
        .checked_add(count.system)
        .and_then(|n| n.checked_add(count.messages))
        .and_then(|n| n.checked_add(count.reserve));
    if sum.is_some() {
        return Ok(());
    }
    Err(OpsError {
        code: ErrorCode::BudgetUnsatisfiable.as_str(),
        message: format!(
            "The request's parts (tools {}, system {}, messages {}) and the output reserve ({}) \
             add up to more than 2^64-1 tokens, beyond max_tokens ({max_tokens}); no compaction \
             of the messages can fit.",
            count.tools, count.system, count.messages, count.reserve
        ),
        details: details! {
            "max_tokens" => max_tokens,
            "tools_tokens" => count.tools,
            "system_tokens" => count.system,
            "messages_tokens" => count.messages,
            "reserve_tokens" => count.reserve,
        },
    })
}

/// The second half of `cutctx compact --format`: applies `prepared`'s plan with `summaries`
/// and writes the outputs. `input_text` must be the text [`prepare`] read: a request that fits
/// comes back as that text, byte for byte. `keep` says what is made beyond the request, as
/// for [`compact_detailed`]: without `keep.report` the report's text is left empty and the
/// plan is not hashed (unless a receipt needs it), so that a caller that reads only the
/// request pays for neither; for a large plan they cost as much as its parsing.
///
/// # Errors
///
/// `COMPACTION_SUMMARY_MISSING` (listing the requests) when `summaries` lacks one;
/// `FORMAT_INVALID_REQUEST` when the compacted request breaks its provider's rules.
pub fn finish(
    prepared: Prepared,
    input_text: &str,
    summaries: &BTreeMap<String, String>,
    keep: Keep,
) -> Result<Detailed, OpsError> {
    finish_text(
        prepared,
        Cow::Borrowed(input_text),
        summaries,
        Release::Free,
        keep.compaction,
        keep.report,
    )
    .and_then(Finished::into_detailed)
}

fn compact_text<'a>(
    args: &FormatOptions,
    input_text: Cow<'a, str>,
    summaries_text: Option<&str>,
    release: Release,
    keep_compaction: bool,
    want_report: bool,
) -> Result<Finished<'a>, OpsError> {
    let mut prepared = prepare(args, &input_text)?;
    let summaries = match (summaries_text, &args.summarize_with) {
        (Some(text), _) => parse_summaries(text)?,
        (None, Some(command)) => {
            prepared.summaries_from(&mut CommandSummarizer::new(command), &input_text)?
        }
        (None, None) => BTreeMap::new(),
    };
    finish_text(
        prepared,
        input_text,
        &summaries,
        release,
        keep_compaction,
        want_report,
    )
}

fn finish_text<'a>(
    prepared: Prepared,
    input_text: Cow<'a, str>,
    summaries: &BTreeMap<String, String>,
    release: Release,
    keep_compaction: bool,
    want_report: bool,
) -> Result<Finished<'a>, OpsError> {
    let Prepared {
        format,
        max_tokens,
        mut pt,
        plan,
        count,
        repairs,
        originals,
        spec,
    } = prepared;
    drop(originals);
    require_summaries(&plan, summaries)?;
    let turns = pt.transcript().len();
    // Shares the turns' text with the request's transcript: a copy of the turn list only,
    // with every content read in.
    if keep_compaction {
        pt.read_deferred_contents(&input_text)
            .map_err(from_format)?;
    }
    let input_transcript = keep_compaction.then(|| pt.transcript().clone());
    // The report's text, made only when asked for, before the plan is released.
    // The reasoning's tokens are counted only when a compaction invalidated some: building an
    // estimator (a BPE table) for every request of a batch would be work for nothing.
    let reasoning_estimator = |reasoning: &ReasoningOutcome| {
        (!reasoning.is_empty())
            .then(|| spec.estimator().map_err(from_format))
            .transpose()
    };
    let make_report = |plan: &CompactionPlan,
                       report: &cutctx::CompactionReport,
                       reasoning: &ReasoningOutcome|
     -> Result<String, OpsError> {
        Ok(if want_report {
            let section = reasoning_estimator(reasoning)?.map(|e| reasoning.to_json(e.as_ref()));
            cutctx::formats::report_text(
                plan,
                report,
                &count,
                max_tokens,
                repairs.as_deref(),
                section.as_ref(),
            )
        } else {
            String::new()
        })
    };
    let (body, unchanged, out, report) = if pt.is_from_text() {
        // The output is the request's own bytes wherever compaction did not change them,
        // written from its text and the parts compaction changed. Applying and rendering are
        // two steps (as `apply_parts` takes them), so that what the rendering does not read
        // is released before it runs: the rendering is where the run's memory peaks.
        if input_transcript.is_none() {
            // Applying reads the contents of the turns kept as they are, and rendering from
            // text reads none: the masked and dropped turns' contents (most of a large
            // request) go before the view is built, where the run's memory would peak.
            pt.release_unkept_contents(&plan);
        }
        // The plan's hash is read only by the report and the receipts: hashing a large plan
        // for neither would cost a thread's work for nothing.
        let apply = if want_report || input_transcript.is_some() {
            cutctx::apply
        } else {
            cutctx::executor::apply_unhashed
        };
        let mut applied =
            apply(pt.transcript(), &plan, summaries).map_err(|e| from_format(e.into()))?;
        let unchanged = applied.report.kept_turn_ids.len() == turns;
        let render = || pt.render_parts(&applied.transcript, &input_text);
        let (parts, reasoning, report) = if want_report {
            // The report names the reasoning the rendering invalidated: it is made after it.
            let (parts, reasoning) = render().map_err(from_format)?;
            let report = make_report(&plan, &applied.report, &reasoning)?;
            drop(plan);
            (parts, reasoning, report)
        } else {
            // Only the report's figures are read from here on: its lists of ids go, with the
            // plan.
            let ids = input_transcript
                .is_none()
                .then(|| id_lists(&mut applied.report));
            let unread = (plan, ids);
            let (parts, reasoning) =
                if release == Release::AtExit && turns >= FREE_BESIDE_FROM_TURNS {
                    // The command's own run, on its pool: a large plan is freed on the other
                    // core while this one renders, instead of before it.
                    cutctx::model::beside::beside_one(render, move || drop(unread)).0
                } else {
                    drop(unread);
                    render()
                }
                .map_err(from_format)?;
            (parts, reasoning, String::new())
        };
        if release == Release::AtExit {
            // As the compacted tree below: the process's end returns the turns at once.
            std::mem::forget(pt);
        }
        let body = if unchanged {
            drop(parts);
            Body::Whole(with_newline(input_text.into_owned()))
        } else {
            let newline = parts.last_byte(&input_text) != Some(b'\n');
            Body::Parts {
                text: input_text,
                parts,
                newline,
            }
        };
        let compacted = cutctx::formats::Compacted {
            document: Value::Null,
            report: applied.report,
            view: applied.transcript,
            reasoning,
        };
        (body, unchanged, compacted, report)
    } else {
        // The transcript is consumed: its kept messages move into the output, not copied.
        let out = pt.apply_into(&plan, summaries).map_err(from_format)?;
        // A repaired request is never the input byte for byte.
        let unchanged =
            out.report.kept_turn_ids.len() == turns && repairs.as_ref().is_none_or(Vec::is_empty);
        let output = if unchanged {
            // Nothing was compacted: the request as it was, byte for byte.
            with_newline(input_text.into_owned())
        } else {
            let pretty = input_text.trim().contains('\n');
            // One buffer, sized for the input: the output is rarely larger, so it is written
            // without being copied as it grows.
            let mut bytes = Vec::with_capacity(input_text.len() + 1);
            // The request's text is no longer needed; an owned one is released before the output
            // fills its buffer.
            drop(input_text);
            let written = if pretty {
                serde_json::to_writer_pretty(&mut bytes, &out.document)
            } else {
                serde_json::to_writer(&mut bytes, &out.document)
            };
            written.map_err(|e| {
                OpsError::validation(
                    format!("the compacted request cannot be written as JSON: {e}"),
                    details! { "format" => format.as_str() },
                )
            })?;
            bytes.push(b'\n');
            String::from_utf8(bytes).map_err(|e| {
                OpsError::validation(
                    format!(
                        "the compacted request is not UTF-8 at byte {}",
                        e.utf8_error().valid_up_to()
                    ),
                    details! { "format" => format.as_str() },
                )
            })?
        };
        let report = make_report(&plan, &out.report, &out.reasoning)?;
        (Body::Whole(output), unchanged, out, report)
    };
    let repairs = repairs.iter().flatten().map(repair_line).collect();
    let reasoning =
        reasoning_estimator(&out.reasoning)?.and_then(|e| out.reasoning.notice(format, e.as_ref()));
    // The whole prompt, as `cutctx estimate`'s total counts it: the fixed parts beside the
    // turns. `representable` checked that these sums fit.
    let outside = count.tools.saturating_add(count.reserve);
    let (tokens_before, tokens_after) = (
        outside.saturating_add(out.report.tokens_before),
        outside.saturating_add(out.report.tokens_after_estimate),
    );
    let compaction = match input_transcript {
        Some(input) => Some((
            input,
            cutctx::CompactedTranscript {
                transcript: out.view,
                report: out.report,
            },
        )),
        None if release == Release::AtExit => {
            // The command writes the output and exits, and the process's end returns the
            // tree's memory at once, where freeing it node by node costs a tenth of the run on
            // a large request. Forgetting is safe: the output is already text.
            std::mem::forget(out);
            None
        }
        None => None,
    };
    Ok(Finished {
        body,
        output: FormatOutput {
            output: String::new(),
            report,
            repairs,
            reasoning,
        },
        unchanged,
        tokens_before,
        tokens_after,
        compaction,
    })
}

/// How many turns a request has for the command to free its plan beside the rendering
/// (see `finish_text`): below it, freeing the plan costs less than handing it over.
const FREE_BESIDE_FROM_TURNS: usize = 10_000;

/// `report`'s lists of turn ids, taken out of it, leaving its figures: for a caller that reads
/// only those. Freed, not left to the process's exit, so that the room is used again.
fn id_lists(report: &mut cutctx::CompactionReport) -> [Vec<std::sync::Arc<str>>; 4] {
    [
        std::mem::take(&mut report.kept_turn_ids),
        std::mem::take(&mut report.masked_turn_ids),
        std::mem::take(&mut report.summarized_turn_ids),
        std::mem::take(&mut report.dropped_turn_ids),
    ]
}

/// `text` ending with a newline.
fn with_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `cutctx estimate --format F`: the request's prompt, part by part (see
/// `cutctx::formats::PromptCount::to_json`), as canonical JSON and a newline. `reserve` defaults to the
/// request's own output limit; `estimator` as for `compact --format`; with `repair`, the
/// repaired request is counted.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; `FORMAT_ERROR` or `FORMAT_INVALID_REQUEST` for a
/// request that is not valid for its provider; `VALIDATION_ERROR` for a bad estimator.
pub fn estimate(
    format: Format,
    estimator: Option<&str>,
    reserve: Option<u64>,
    repair: bool,
    input_text: &str,
) -> Result<String, OpsError> {
    let mut document: Value = parse_json(input_text, "the transcript")?;
    let mut repairs = None;
    if repair {
        let (repaired, made) = cutctx::formats::repair(format, document).map_err(from_format)?;
        document = repaired;
        repairs = Some(made);
    }
    let spec: EstimatorSpec = match estimator {
        Some(s) => s.parse().map_err(from_format)?,
        None => EstimatorSpec::default(),
    };
    let estimator = spec.estimator().map_err(from_format)?;
    let pt = ProviderTranscript::from_document_with(format, document, estimator.as_ref())
        .map_err(invalid_with_hint)?;
    let reserve = match reserve {
        Some(n) => n,
        None => pt.requested_output().map_err(from_format)?.unwrap_or(0),
    };
    let mut json = pt.prompt_count(reserve).to_json();
    if let (Some(made), Value::Object(map)) = (repairs, &mut json) {
        // As in the report: what was dropped before counting, by input position.
        map.insert(
            "repairs".into(),
            Value::Array(made.iter().map(cutctx::formats::Repair::to_json).collect()),
        );
    }
    Ok(format!(
        "{}\n",
        cutctx::model::canonical::canonical_json_value(&json)
    ))
}

/// As [`from_format`], adding to a violation that `--repair` fixes the hint to use it.
fn invalid_with_hint(e: FormatError) -> OpsError {
    let hint = e
        .violation()
        .filter(|v| e.code() == "FORMAT_INVALID_REQUEST" && is_repairable(v))
        .is_some();
    let mut err = from_format(e);
    if hint {
        err.message
            .push_str(" Run with --repair to drop what breaks the rule.");
        err.details.insert("hint".into(), Value::from("--repair"));
    }
    err
}

/// A [`OpsError`] carrying a [`FormatError`]'s code, message and details.
#[must_use]
pub fn from_format(e: FormatError) -> OpsError {
    OpsError {
        code: e.code(),
        message: e.message(),
        details: e.details(),
    }
}

fn usage(message: &str, option: &str) -> OpsError {
    OpsError {
        code: crate::USAGE_ERROR,
        message: message.to_owned(),
        details: details! { "option" => option },
    }
}

/// JSON text: an `INPUT_ERROR` when it is not JSON, a `VALIDATION_ERROR` when it has the wrong
/// shape, naming the position and never the text around it.
fn parse_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, OpsError> {
    crate::error::parse_json(what, text)
}

/// The `--summaries` document: an object of strings.
fn parse_summaries(text: &str) -> Result<BTreeMap<String, String>, OpsError> {
    #[derive(serde::Deserialize)]
    #[serde(transparent)]
    struct Summaries(
        #[serde(deserialize_with = "cutctx::model::wire::unique_string_map")]
        BTreeMap<String, String>,
    );
    parse_json::<Summaries>(text, "the summaries").map(|s| s.0)
}

/// The policy the options name.
fn policy(
    args: &FormatOptions,
    spec: EstimatorSpec,
) -> Result<Box<dyn CompactionPolicy>, OpsError> {
    named_policy(args.policy.as_deref(), args.prompt_id.as_deref(), spec)
}

/// The policy `--policy` names (a name or a policy object; [`DEFAULT_POLICY`] when absent),
/// with `--prompt-id` (or [`DEFAULT_PROMPT_ID`]), from the one policy registry
/// ([`cutctx::policies::registry`]).
pub(crate) fn named_policy(
    name: Option<&str>,
    prompt_id: Option<&str>,
    spec: EstimatorSpec,
) -> Result<Box<dyn CompactionPolicy>, OpsError> {
    let prompt = prompt_id.unwrap_or(DEFAULT_PROMPT_ID);
    let name = name.unwrap_or(DEFAULT_POLICY);
    if name.trim_start().starts_with('{') {
        // A policy object, checked exactly as a request document's.
        let policy: Value =
            parse_json::<cutctx::model::wire::UniqueKeys>(name, "the --policy object")?.0;
        return Ok(cutctx::policies::registry::from_spec(&policy)?);
    }
    cutctx::formats::policy_named(name, prompt, &spec)
        .map_err(from_format)?
        .ok_or_else(|| {
            OpsError::validation(
                format!(
                    "unknown policy {name:?}; expected drop_oldest, observation_masking, \
                     summarizing, default_chain or a policy object."
                ),
                details! { "policy" => name },
            )
        })
}

/// What `--repair` dropped, as one line for standard error:
/// `cutctx: repair: KIND at position N`, with ` (id "ID")` when the drop has an id.
pub(crate) fn repair_line(r: &Repair) -> String {
    let id = match r.id.as_deref() {
        Some(id) => format!(" (id {id:?})"),
        None => String::new(),
    };
    format!(
        "cutctx: repair: {} at position {}{id}",
        r.kind.as_str(),
        r.position
    )
}

/// The JSON form of a request, ids and figures only.
fn request_json(r: &SummarizationRequest) -> Value {
    serde_json::json!({
        "group_id": r.group_id(),
        "prompt_id": r.prompt_id(),
        "target_tokens": r.target_tokens(),
        "turn_ids": r.turn_ids().iter().map(|id| &**id).collect::<Vec<_>>(),
    })
}

/// `COMPACTION_SUMMARY_MISSING`, listing every request without a summary, unless none lacks one.
fn require_summaries(
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
) -> Result<(), OpsError> {
    let missing: Vec<&SummarizationRequest> = plan
        .summarization_requests
        .iter()
        .filter(|r| !summaries.contains_key(r.group_id()))
        .collect();
    let Some(first) = missing.first() else {
        return Ok(());
    };
    let listed: Vec<Value> = missing.iter().map(|r| request_json(r)).collect();
    let listed = Value::Array(listed);
    let mut details = details! {
        "group_id" => first.group_id(),
        "prompt_id" => first.prompt_id(),
        "target_tokens" => first.target_tokens(),
        "turn_ids" => first.turn_ids().iter().map(|id| &**id).collect::<Vec<_>>(),
    };
    details.insert("requests".into(), listed.clone());
    Err(OpsError {
        code: ErrorCode::SummaryMissing.as_str(),
        message: format!(
            "{} summarization request(s) have no summary; fulfil them with --summaries FILE \
             (a JSON object {{group_id: summary}}) or --summarize-with CMD. Requests: {}",
            missing.len(),
            cutctx::model::canonical::canonical_json_value(&listed)
        ),
        details,
    })
}
