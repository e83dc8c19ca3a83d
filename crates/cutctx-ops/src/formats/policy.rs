//! The policy a provider request is compacted with: a name or a policy object, with its prompt
//! id, built by the one policy registry (`cutctx::policies::registry`) with its stubs
//! estimated as the turns are.

use cutctx::CompactionPolicy;
use cutctx::formats::EstimatorSpec;
use cutctx::model::details;
use serde_json::Value;

use super::errors::{from_format, parse_json};
use super::options::FormatOptions;
use crate::OpsError;
use cutctx::policies::registry::DEFAULT_PROMPT_ID;

/// The policy the options name.
pub(super) fn policy(
    args: &FormatOptions,
    spec: EstimatorSpec,
) -> Result<Box<dyn CompactionPolicy>, OpsError> {
    let summarizes = args.summarizes || args.summarize_with.is_some();
    named_policy(
        args.policy.as_deref(),
        args.prompt_id.as_deref(),
        spec,
        summarizes,
    )
}

/// The policy `--policy` names (a name or a policy object; when absent,
/// [`crate::session::default_policy`] of whether the caller `summarizes`), with `--prompt-id`
/// (or [`DEFAULT_PROMPT_ID`]), from the one policy registry ([`cutctx::policies::registry`]).
pub(crate) fn named_policy(
    name: Option<&str>,
    prompt_id: Option<&str>,
    spec: EstimatorSpec,
    summarizes: bool,
) -> Result<Box<dyn CompactionPolicy>, OpsError> {
    let prompt = prompt_id.unwrap_or(DEFAULT_PROMPT_ID);
    let name = name.unwrap_or(crate::session::default_policy(summarizes));
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
