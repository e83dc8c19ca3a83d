//! The library behind the `cutctx` binary: the request document and the commands.
//!
//! Each command takes the text of its documents and returns the exact bytes the binary prints
//! on standard output, or a [`CliError`] with the stable code, exit status and details the
//! binary reports. `plan`, `compact` and `apply` touch no files or streams, so they run
//! in-process in tests exactly as they run behind the binary; [`ledger`] reads and appends
//! the ledger file it is given, [`formats`] starts the `--summarize-with` command, and
//! [`output`] writes standard output and whole files so that a failure is never quiet.
#![forbid(unsafe_code)]

pub mod batch;
mod error;
pub mod formats;
pub mod ledger;
pub mod output;
pub mod request;
pub mod session;
mod svg;

pub use error::{CliError, INPUT_ERROR, INTERNAL_ERROR, OUTPUT_ERROR, USAGE_ERROR};

use cutctx::model::wire::ObjectOnly;
use cutctx::{CompactionPlan, PlanDraft};

/// `cutctx plan`: the plan's canonical JSON and one newline.
///
/// # Errors
///
/// Any failure of parsing, validation or planning, as a [`CliError`].
pub fn plan(request_text: &str) -> Result<String, CliError> {
    let req = request::parse(request_text)?;
    let plan = req.policy.decide(&req.transcript, &req.budget)?;
    Ok(plan.canonical_json() + "\n")
}

/// `cutctx compact`: plan, apply with the request's summaries, and print
/// `{"plan", "report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// As [`plan`], and `COMPACTION_SUMMARY_MISSING` when a requested summary is not supplied.
pub fn compact(request_text: &str) -> Result<String, CliError> {
    compact_parsed(request::parse(request_text)?).map(|(out, _)| out)
}

/// What [`compact_retaining`] built its output from: the request, the plan and the compacted
/// view, hundreds of thousands of small allocations for a large request.
pub struct Retained {
    _request: request::Request,
    _plan: CompactionPlan,
    _compacted: cutctx::CompactedTranscript,
}

/// As [`compact`], taking the request's text to free it as soon as it is parsed (nothing
/// after parsing reads it, and the output is then built where it was), and handing back what
/// the output was built from, so that a process about to exit can leave it to the operating
/// system rather than free it piece by piece.
///
/// # Errors
///
/// As [`compact`].
pub fn compact_retaining(request_text: String) -> Result<(String, Retained), CliError> {
    let req = request::parse(&request_text)?;
    drop(request_text);
    compact_parsed(req)
}

/// As [`compact_retaining`], reading the request from `reader` piece by piece, so that its
/// whole text is never held (see [`request::parse_reader`]); `whole` reads it whole again,
/// for the exact error, when anything in it is amiss.
///
/// # Errors
///
/// As [`compact`], and whatever `whole` returns.
pub fn compact_reader(
    reader: impl std::io::Read,
    whole: impl FnOnce() -> Result<String, CliError>,
) -> Result<(String, Retained), CliError> {
    compact_parsed(request::parse_reader(reader, whole)?)
}

fn compact_parsed(req: request::Request) -> Result<(String, Retained), CliError> {
    let plan = req.policy.decide(&req.transcript, &req.budget)?;
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries)?;
    // One buffer sized once: the three parts are written in place, never copied together.
    let mut text = String::with_capacity(
        plan.canonical_len_hint()
            + out.report.canonical_len_hint()
            + out.transcript.canonical_len_hint()
            + 64,
    );
    text.push_str("{\"plan\":");
    plan.write_canonical_into(&mut text);
    text.push_str(",\"report\":");
    out.report.write_canonical_into(&mut text);
    text.push_str(",\"transcript\":");
    out.transcript.write_canonical_into(&mut text);
    text.push_str("}\n");
    Ok((
        text,
        Retained {
            _request: req,
            _plan: plan,
            _compacted: out,
        },
    ))
}

/// `cutctx apply`: validate a stored plan against the request, apply it, and print
/// `{"report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// `COMPACTION_PLAN_MISMATCH` when the plan names other turns or another order; any rule the
/// plan breaks; a missing summary.
pub fn apply(request_text: &str, plan_text: &str) -> Result<String, CliError> {
    let req = request::parse(request_text)?;
    let ObjectOnly(draft): ObjectOnly<PlanDraft> = error::parse_json("the plan", plan_text)?;
    // A plan is positional: name a mismatch as such before checking the rules.
    cutctx::executor::check_match(&req.transcript, &draft.actions)?;
    let plan = CompactionPlan::validate(draft, &req.transcript, &req.budget)?;
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries)?;
    Ok(format!(
        "{{\"report\":{},\"transcript\":{}}}\n",
        out.report.canonical_json(),
        out.transcript.canonical_json()
    ))
}
