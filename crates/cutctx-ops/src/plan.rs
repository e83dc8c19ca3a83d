//! Planning a request document: the plan its policy makes for its transcript and budget, as
//! canonical JSON, the request's contents left in its text (or its file) and read only where
//! the policy needs them.

use crate::OpsError;
use crate::input::RequestFile;
use crate::request;
use crate::request_text::plan as plan_left_in;
use crate::text::Text;

/// `cutctx plan`: the plan's canonical JSON and one newline.
///
/// # Errors
///
/// Any failure of parsing, validation or planning, as a [`OpsError`].
pub fn plan(request_text: &str) -> Result<String, OpsError> {
    // The contents left in the text: a plan reads at most the masked ones, to hash them.
    let plan = match request::parse_leaving(request_text) {
        Some(leaving) => {
            let mut leaving = leaving?;
            plan_left_in(
                &mut leaving.request,
                &Text::Whole(request_text.into()),
                &mut leaving.left,
            )?
        }
        None => {
            let req = request::parse(request_text)?;
            req.policy.decide(&req.transcript, &req.budget)?
        }
    };
    Ok(plan.canonical_json() + "\n")
}

/// As [`plan`], the request read from `file` where it lies, as
/// [`compact_file`](crate::compact_file) reads it; `whole` reads the file whole for a request it
/// does not read so.
///
/// # Errors
///
/// As [`plan`]; a file that cannot be read again, and the errors of `whole`, as
/// [`compact_file`](crate::compact_file)'s.
pub fn plan_file(
    file: RequestFile,
    whole: impl FnOnce(&RequestFile) -> Result<String, OpsError>,
) -> Result<String, OpsError> {
    let Some(leaving) = request::parse_leaving_file(&file) else {
        return plan(&whole(&file)?);
    };
    let mut leaving = leaving?;
    let text = Text::File(file);
    let plan = plan_left_in(&mut leaving.request, &text, &mut leaving.left)?;
    Ok(plan.canonical_json() + "\n")
}
