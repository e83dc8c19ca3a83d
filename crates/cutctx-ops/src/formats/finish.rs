//! The second half of compacting a provider request ([`finish`]): the plan applied with its
//! summaries; the compacted request rendered, from the input's text (its unchanged bytes
//! copied) or from a value written as JSON; and the report, the whole prompt's figures and the
//! lines for standard error made. What the compaction leaves behind is freed, or, on the
//! command's own run, left to the process's exit.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx::formats::{
    Compacted, EstimatorSpec, Format, PromptCount, ProviderTranscript, ReasoningOutcome, Repair,
    TextParts,
};
use cutctx::model::details;
use cutctx::{CompactedTranscript, CompactionPlan, CompactionReport, TokenEstimator, Transcript};
use serde_json::Value;

use super::errors::from_format;
use super::notices::repair_line;
use super::options::{Detailed, FormatOutput, Keep};
use super::prepare::Prepared;
use super::streamed::Body;
use super::summaries::require_summaries;
use crate::OpsError;

/// The second half of `cutctx compact --format`: applies `prepared`'s plan with `summaries`
/// and writes the outputs. `input_text` must be the text [`prepare`](super::prepare) read: a
/// request that fits comes back as that text, byte for byte. `keep` says what is made beyond
/// the request, as for [`compact_detailed`](super::compact_detailed): without `keep.report` the
/// report's text is left empty and the plan is not hashed (unless a receipt needs it), so that
/// a caller that reads only the request pays for neither; for a large plan they cost as much as
/// its parsing.
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

/// What the second half of `compact --format` makes: [`Detailed`], with the compacted
/// request not yet written whole.
pub(super) struct Finished<'a> {
    pub(super) body: Body<'a>,
    /// `output` is empty here: the request is `body`.
    pub(super) output: FormatOutput,
    unchanged: bool,
    tokens_before: u64,
    tokens_after: u64,
    compaction: Option<(Transcript, CompactedTranscript)>,
}

impl Finished<'_> {
    /// The outputs, the compacted request written whole.
    pub(super) fn into_detailed(self) -> Result<Detailed, OpsError> {
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
pub(super) enum Release {
    /// Freed as usual.
    Free,
    /// Left to the process's exit, which returns the memory at once.
    AtExit,
}

/// How many turns a request has for the command to free its plan beside the rendering
/// (see [`render`]): below it, freeing the plan costs less than handing it over.
const FREE_BESIDE_FROM_TURNS: usize = 10_000;

/// What the second half reads of the first beside the transcript and the plan, and how it
/// was asked to run.
struct Run {
    format: Format,
    max_tokens: u64,
    count: PromptCount,
    /// `Some` when repair was asked for.
    repairs: Option<Vec<Repair>>,
    spec: EstimatorSpec,
    release: Release,
    /// Whether the request's transcript and the compacted view are kept, for a receipt.
    keep_compaction: bool,
    /// Whether the report's text is made.
    want_report: bool,
}

impl Run {
    /// The estimator the invalidated reasoning's tokens are counted with, made only when a
    /// compaction invalidated some: building an estimator (a BPE table) for every request of
    /// a batch would be work for nothing.
    fn reasoning_estimator(
        &self,
        reasoning: &ReasoningOutcome,
    ) -> Result<Option<Box<dyn TokenEstimator>>, OpsError> {
        (!reasoning.is_empty())
            .then(|| self.spec.estimator().map_err(from_format))
            .transpose()
    }

    /// The report's text, made only when asked for, before the plan is released (empty
    /// otherwise).
    fn report(
        &self,
        plan: &CompactionPlan,
        report: &CompactionReport,
        reasoning: &ReasoningOutcome,
    ) -> Result<String, OpsError> {
        if !self.want_report {
            return Ok(String::new());
        }
        let section = self
            .reasoning_estimator(reasoning)?
            .map(|e| reasoning.to_json(e.as_ref()));
        Ok(cutctx::formats::report_text(
            plan,
            report,
            &self.count,
            self.max_tokens,
            self.repairs.as_deref(),
            section.as_ref(),
        ))
    }
}

/// A compacted request rendered: its body, whether it is the input itself, the compaction it
/// came from (its `document` empty when the body is written from the input's text), and the
/// report's text.
struct Rendered<'a> {
    body: Body<'a>,
    unchanged: bool,
    out: Compacted,
    report: String,
}

/// [`finish`] over `input_text`, its compacted tree released as `release` says, the
/// request's transcript and the view kept when `keep_compaction`, the report made when
/// `want_report`.
pub(super) fn finish_text<'a>(
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
        front_end,
    } = prepared;
    drop(originals);
    require_summaries(&plan, summaries, front_end)?;
    // Shares the turns' text with the request's transcript: a copy of the turn list only,
    // with every content read in.
    if keep_compaction {
        pt.read_deferred_contents(&input_text)
            .map_err(from_format)?;
    }
    let input_transcript = keep_compaction.then(|| pt.transcript().clone());
    let run = Run {
        format,
        max_tokens,
        count,
        repairs,
        spec,
        release,
        keep_compaction,
        want_report,
    };
    let rendered = if pt.is_from_text() {
        from_text(&run, pt, plan, summaries, input_text)?
    } else {
        from_value(&run, pt, &plan, summaries, input_text)?
    };
    finished(&run, rendered, input_transcript)
}

/// The compacted request written from its input's text: the request's own bytes wherever the
/// compaction did not change them, and the parts it changed. Applying and rendering are two
/// steps (as `apply_parts` takes them), so that what the rendering does not read is released
/// before it runs: the rendering is where the run's memory peaks.
fn from_text<'a>(
    run: &Run,
    mut pt: ProviderTranscript,
    plan: CompactionPlan,
    summaries: &BTreeMap<String, String>,
    input_text: Cow<'a, str>,
) -> Result<Rendered<'a>, OpsError> {
    let turns = pt.transcript().len();
    if !run.keep_compaction {
        // Applying reads the contents of the turns kept as they are, and rendering from
        // text reads none: the masked and dropped turns' contents (most of a large
        // request) go before the view is built, where the run's memory would peak.
        pt.release_unkept_contents(&plan);
    }
    // The plan's hash is read only by the report and the receipts: hashing a large plan
    // for neither would cost a thread's work for nothing.
    let apply = if run.want_report || run.keep_compaction {
        cutctx::apply
    } else {
        cutctx::executor::apply_unhashed
    };
    let mut applied =
        apply(pt.transcript(), &plan, summaries).map_err(|e| from_format(e.into()))?;
    let unchanged = applied.report.kept_turn_ids.len() == turns;
    let (parts, reasoning, report) = render(run, &pt, plan, &mut applied, &input_text, turns)?;
    if run.release == Release::AtExit {
        // As the compacted tree: the process's end returns the turns at once.
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
    let out = Compacted {
        document: Value::Null,
        report: applied.report,
        view: applied.transcript,
        reasoning,
    };
    Ok(Rendered {
        body,
        unchanged,
        out,
        report,
    })
}

/// The parts of the compacted request `applied` and the reasoning the rendering invalidated,
/// with the report's text when it is asked for; the plan released once nothing reads it
/// (beside the rendering, on the command's own run of a large request).
fn render(
    run: &Run,
    pt: &ProviderTranscript,
    plan: CompactionPlan,
    applied: &mut CompactedTranscript,
    input_text: &str,
    turns: usize,
) -> Result<(TextParts, ReasoningOutcome, String), OpsError> {
    if run.want_report {
        // The report names the reasoning the rendering invalidated: it is made after it.
        let (parts, reasoning) = pt
            .render_parts(&applied.transcript, input_text)
            .map_err(from_format)?;
        let report = run.report(&plan, &applied.report, &reasoning)?;
        drop(plan);
        return Ok((parts, reasoning, report));
    }
    // Only the report's figures are read from here on: its lists of ids go, with the plan.
    let ids = (!run.keep_compaction).then(|| id_lists(&mut applied.report));
    let unread = (plan, ids);
    let render = || pt.render_parts(&applied.transcript, input_text);
    let (parts, reasoning) = if run.release == Release::AtExit && turns >= FREE_BESIDE_FROM_TURNS {
        // The command's own run, on its pool: a large plan is freed on the other core while
        // this one renders, instead of before it.
        cutctx::model::beside::beside_one(render, move || drop(unread)).0
    } else {
        drop(unread);
        render()
    }
    .map_err(from_format)?;
    Ok((parts, reasoning, String::new()))
}

/// The compacted request as a value written as JSON: the transcript is consumed, its kept
/// messages moved into the output, not copied.
fn from_value<'a>(
    run: &Run,
    pt: ProviderTranscript,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
    input_text: Cow<'a, str>,
) -> Result<Rendered<'a>, OpsError> {
    let turns = pt.transcript().len();
    let out = pt.apply_into(plan, summaries).map_err(from_format)?;
    // A repaired request is never the input byte for byte.
    let unchanged =
        out.report.kept_turn_ids.len() == turns && run.repairs.as_ref().is_none_or(Vec::is_empty);
    let output = if unchanged {
        // Nothing was compacted: the request as it was, byte for byte.
        with_newline(input_text.into_owned())
    } else {
        written_json(run.format, &out.document, input_text)?
    };
    let report = run.report(plan, &out.report, &out.reasoning)?;
    Ok(Rendered {
        body: Body::Whole(output),
        unchanged,
        out,
        report,
    })
}

/// `document` as JSON and a newline, pretty when `input_text` spans lines.
fn written_json(
    format: Format,
    document: &Value,
    input_text: Cow<'_, str>,
) -> Result<String, OpsError> {
    let pretty = input_text.trim().contains('\n');
    // One buffer, sized for the input: the output is rarely larger, so it is written without
    // being copied as it grows.
    let mut bytes = Vec::with_capacity(input_text.len() + 1);
    // The request's text is no longer needed; an owned one is released before the output
    // fills its buffer.
    drop(input_text);
    let written = if pretty {
        serde_json::to_writer_pretty(&mut bytes, document)
    } else {
        serde_json::to_writer(&mut bytes, document)
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
    })
}

/// The outputs of a rendered compaction: the lines for standard error, the whole prompt's
/// figures, and what a receipt is made of.
fn finished<'a>(
    run: &Run,
    rendered: Rendered<'a>,
    input_transcript: Option<Transcript>,
) -> Result<Finished<'a>, OpsError> {
    let Rendered {
        body,
        unchanged,
        out,
        report,
    } = rendered;
    let repairs = run.repairs.iter().flatten().map(repair_line).collect();
    let reasoning = run
        .reasoning_estimator(&out.reasoning)?
        .and_then(|e| out.reasoning.notice(run.format, e.as_ref()));
    // The whole prompt, as `cutctx estimate`'s total counts it: the fixed parts beside the
    // turns. `representable` checked that these sums fit.
    let outside = run.count.tools.saturating_add(run.count.reserve);
    let (tokens_before, tokens_after) = (
        outside.saturating_add(out.report.tokens_before),
        outside.saturating_add(out.report.tokens_after_estimate),
    );
    let compaction = kept_compaction(out, input_transcript, run.release);
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

/// The request's transcript and the compacted view with its report, for a receipt, when the
/// transcript was kept; else the compaction released.
fn kept_compaction(
    out: Compacted,
    input: Option<Transcript>,
    release: Release,
) -> Option<(Transcript, CompactedTranscript)> {
    match input {
        Some(input) => Some((
            input,
            CompactedTranscript {
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
    }
}

/// `report`'s lists of turn ids, taken out of it, leaving its figures: for a caller that reads
/// only those. Freed, not left to the process's exit, so that the room is used again.
fn id_lists(report: &mut CompactionReport) -> [Vec<Arc<str>>; 4] {
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
