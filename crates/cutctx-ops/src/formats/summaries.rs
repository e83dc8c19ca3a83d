//! The summaries a compaction is given: the summaries document read (an object of strings by
//! group id), and every summarization request of a plan held to having one
//! (`COMPACTION_SUMMARY_MISSING`, listing the requests, never their content).

use std::collections::BTreeMap;

use cutctx::model::details;
use cutctx::{CompactionPlan, ErrorCode, SummarizationRequest};
use serde_json::Value;

use super::errors::parse_json;
use crate::OpsError;

/// The `--summaries` document: an object of strings.
pub(super) fn parse_summaries(text: &str) -> Result<BTreeMap<String, String>, OpsError> {
    #[derive(serde::Deserialize)]
    #[serde(transparent)]
    struct Summaries(
        #[serde(deserialize_with = "cutctx::model::wire::unique_string_map")]
        BTreeMap<String, String>,
    );
    parse_json::<Summaries>(text, "the summaries").map(|s| s.0)
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

/// `COMPACTION_SUMMARY_MISSING`, listing every request without a summary, unless none lacks one;
/// its message names the options of `front_end` that give summaries.
pub(super) fn require_summaries(
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
    front_end: crate::summarizer::FrontEnd,
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
            "{} summarization request(s) have no summary; {}. Requests: {}",
            missing.len(),
            front_end.to_give_summaries(),
            cutctx::model::canonical::canonical_json_value(&listed)
        ),
        details,
    })
}
