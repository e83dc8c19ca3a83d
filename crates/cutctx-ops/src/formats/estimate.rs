//! Estimating a provider request without compacting it: its whole prompt, part by part (tools,
//! system, messages, the output reserve), as the compaction counts it.

use cutctx::formats::{Format, ProviderTranscript};
use serde_json::Value;

use super::errors::{from_format, invalid_with_hint};
use super::prepare::{estimator_spec, read_value, reserve};
use crate::OpsError;

/// `cutctx estimate --format F`: the request's prompt, part by part (see
/// `cutctx::formats::PromptCount::to_json`), as canonical JSON and a newline. `reserve`
/// defaults to the request's own output limit; `estimator` as for `compact --format`; with
/// `repair`, the repaired request is counted.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; `FORMAT_ERROR` or `FORMAT_INVALID_REQUEST` for a
/// request that is not valid for its provider; `VALIDATION_ERROR` for a bad estimator.
pub fn estimate(
    format: Format,
    estimator: Option<&str>,
    reserve_output: Option<u64>,
    repair: bool,
    input_text: &str,
) -> Result<String, OpsError> {
    let (document, repairs) = read_value(format, repair, input_text)?;
    let spec = estimator_spec(estimator)?;
    let estimator = spec.estimator().map_err(from_format)?;
    let pt = ProviderTranscript::from_document_with(format, document, estimator.as_ref())
        .map_err(invalid_with_hint)?;
    let mut json = pt.prompt_count(reserve(&pt, reserve_output)?).to_json();
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
