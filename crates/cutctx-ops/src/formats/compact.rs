//! Compacting a provider request in its own format, the whole of it: the request read,
//! repaired when asked, counted and planned ([`prepare`](super::prepare)), its summaries taken
//! from a summaries document or asked of the `summarize_with` command, and the plan applied and
//! written ([`finish`](super::finish)). [`compact`] returns the texts; [`compact_detailed`] the
//! report's figures too; [`compact_owned`] the output to write as it is made.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::finish::{Finished, Release, finish_text};
use super::options::{Detailed, FormatOptions, FormatOutput, Keep};
use super::prepare::prepare;
use super::streamed::Streamed;
use super::summaries::parse_summaries;
use crate::OpsError;
use crate::summarizer::CommandSummarizer;

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
    Ok(Streamed::new(finished.body, finished.output))
}

/// Both halves over `input_text`, the summaries from `summaries_text` or the
/// `summarize_with` command; `keep_compaction` and `want_report` as [`Keep`] says.
fn compact_text<'a>(
    args: &FormatOptions,
    input_text: Cow<'a, str>,
    summaries_text: Option<&str>,
    release: Release,
    keep_compaction: bool,
    want_report: bool,
) -> Result<Finished<'a>, OpsError> {
    // Summaries given with the call are a caller that summarizes: the default policy is then
    // the chain that asks for them.
    let with_summaries;
    let args = if summaries_text.is_some() && !args.summarizes {
        with_summaries = FormatOptions {
            summarizes: true,
            ..args.clone()
        };
        &with_summaries
    } else {
        args
    };
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
