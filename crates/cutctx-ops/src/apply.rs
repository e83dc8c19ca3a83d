//! Applying a stored plan to a request document: the plan checked against the request's
//! transcript (a mismatch named before any rule) and validated, then applied with the request's
//! summaries, printed as `{"report", "transcript"}` (the plan is the caller's own).

use cutctx::model::wire::ObjectOnly;
use cutctx::{CompactionPlan, PlanDraft};

use crate::compacted::{Compacted, compacted_with};
use crate::compacted_file::CompactedFile;
use crate::input::RequestFile;
use crate::request::{self, Request};
use crate::request_text::RequestText;
use crate::{OpsError, error};

/// `cutctx apply`: validate a stored plan against the request, apply it, and print
/// `{"report", "transcript"}` canonically, with one newline.
///
/// # Errors
///
/// `COMPACTION_PLAN_MISMATCH` when the plan names other turns or another order; any rule the
/// plan breaks; a missing summary.
pub fn apply(request_text: &str, plan_text: &str) -> Result<String, OpsError> {
    let req = request::parse(request_text)?;
    let plan = stored_plan(&req, plan_text)?;
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries)?;
    Ok(format!(
        "{{\"report\":{},\"transcript\":{}}}\n",
        out.report.canonical_json(),
        out.transcript.canonical_json()
    ))
}

/// The plan stored in `plan_text`, validated against `req`: a mismatch named as such before
/// the rules are checked, since a plan is positional.
fn stored_plan(req: &Request, plan_text: &str) -> Result<CompactionPlan, OpsError> {
    let ObjectOnly(draft): ObjectOnly<PlanDraft> = error::parse_json("the plan", plan_text)?;
    cutctx::executor::check_match(&req.transcript, &draft.actions)?;
    Ok(CompactionPlan::validate(
        draft,
        &req.transcript,
        &req.budget,
    )?)
}

/// As [`apply`], the contents of the request's turns left in its text, as
/// [`compact_text`](crate::compact_text) leaves them: no rule of a plan and no step of
/// applying one reads a content, and the output copies each kept one from the text. The
/// output is the bytes [`apply`] gives, its errors the same.
///
/// ```
/// let request = r#"{"transcript":[
///     {"turn_id":"a","role":"assistant","content":"run","token_estimate":5,"tool_call_id":"c"},
///     {"turn_id":"t","role":"tool","content":"a \"long\" log","token_estimate":900,"tool_call_id":"c"},
///     {"turn_id":"u","role":"user","content":"go on","token_estimate":5}],
///   "budget":{"max_tokens":100,"protected_recent_turns":1},
///   "policy":{"name":"observation_masking","keep_recent_results":0}}"#;
/// let plan = cutctx_ops::plan(request)?;
/// let applied = cutctx_ops::apply_text(request.to_owned(), &plan)?.into_text();
/// assert_eq!(applied, cutctx_ops::apply(request, &plan)?);
/// assert!(applied.starts_with(r#"{"report":"#));
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
///
/// # Errors
///
/// As [`apply`].
pub fn apply_text(request_text: String, plan_text: &str) -> Result<Compacted, OpsError> {
    let Some(leaving) = request::parse_leaving(&request_text) else {
        let req = request::parse(&request_text)?;
        drop(request_text);
        let plan = stored_plan(&req, plan_text)?;
        return Ok(compacted_with(req, plan, None)?.without_plan());
    };
    let (req, text) = RequestText::new(leaving?, request_text);
    let plan = stored_plan(&req, plan_text)?;
    Ok(compacted_with(req, plan, Some(text))?.without_plan())
}

/// As [`apply_text`], the request read from `file` where it lies, as
/// [`compact_file`](crate::compact_file) reads it; `whole` reads the file whole for a request
/// it does not read so.
///
/// # Errors
///
/// As [`apply`]; a file that cannot be read again, and the errors of `whole`, as
/// [`compact_file`](crate::compact_file)'s.
pub fn apply_file(
    file: RequestFile,
    plan_text: &str,
    whole: impl FnOnce(&RequestFile) -> Result<String, OpsError>,
) -> Result<CompactedFile, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return apply_text(whole(&file)?, plan_text).map(CompactedFile);
    };
    let (req, text) = RequestText::in_file(leaving?, file);
    let plan = stored_plan(&req, plan_text)?;
    Ok(CompactedFile(
        compacted_with(req, plan, Some(text))?.without_plan(),
    ))
}
