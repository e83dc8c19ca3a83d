//! The first half of compacting a provider request ([`prepare`]): the request read (from its
//! text, contents left there, or as a value when repaired or unusual), its whole prompt
//! counted, the turns' budget found and the plan made, up to the plan's summarization requests
//! ([`Prepared`]), which a front end with its own summarizer fulfils before the second half.

use std::collections::BTreeMap;

use cutctx::formats::{EstimatorSpec, Format, PromptCount, ProviderTranscript, Repair};
use cutctx::model::details;
use cutctx::{CompactionBudget, CompactionPlan, ErrorCode, SummarizationRequest, TokenEstimator};
use serde_json::Value;

use super::errors::{from_format, invalid_with_hint, parse_json, usage};
use super::options::FormatOptions;
use super::policy::policy;
use crate::OpsError;
use crate::summarizer::{Summarizer, summarize_each};

/// A provider request read, repaired, counted and planned: the first half of `compact
/// --format`, up to the plan's summarization requests. [`finish`](super::finish) applies it.
///
/// The Python package runs the two halves around its own summarizer callable, so that what it
/// returns is exactly what the command prints.
#[derive(Debug)]
pub struct Prepared {
    pub(super) format: Format,
    pub(super) max_tokens: u64,
    pub(super) pt: ProviderTranscript,
    pub(super) plan: CompactionPlan,
    pub(super) count: PromptCount,
    /// `Some` when repair was asked for (empty when nothing needed it).
    pub(super) repairs: Option<Vec<Repair>>,
    /// The request mapped from a value, for the summarizer's input (which quotes the original
    /// messages), made when a summarizer first asks for it and `pt` was read from text.
    pub(super) originals: Option<ProviderTranscript>,
    /// The estimator the turns were counted with, for `originals`.
    pub(super) spec: EstimatorSpec,
    /// The front end the call came through, whose words a missing summary's message uses.
    pub(super) front_end: crate::summarizer::FrontEnd,
}

impl Prepared {
    /// The plan, whose `summarization_requests` the summaries given to
    /// [`finish`](super::finish) fulfil.
    #[must_use]
    pub const fn plan(&self) -> &CompactionPlan {
        &self.plan
    }

    /// The summaries of the plan's requests, asked of `summarizer` one at a time, in order,
    /// each with the document [`Prepared::summarization_input`] makes: what
    /// [`finish`](super::finish) takes. `input_text` must be the text [`prepare`] read.
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
/// As [`compact`](super::compact), but for what summaries and applying add.
pub fn prepare(args: &FormatOptions, input_text: &str) -> Result<Prepared, OpsError> {
    let format: Format = args
        .format
        .ok_or_else(|| usage("compact --format needs a format", "format"))?;
    let max_tokens = args
        .max_tokens
        .ok_or_else(|| usage("compact --format needs --max-tokens N", "max_tokens"))?;
    let spec = estimator_spec(args.estimator.as_deref())?;
    let estimator = spec.estimator().map_err(from_format)?;
    let (mut pt, repairs) = read_request(format, args, input_text, estimator.as_ref())?;
    // The sums only: nothing of the compaction reads the count turn by turn.
    let count = pt.prompt_totals(reserve(&pt, args.reserve_output)?);
    representable(&count, max_tokens)?;
    let turn_budget = count.turn_budget(max_tokens).map_err(from_format)?;
    let policy = policy(args, spec)?;
    let budget = CompactionBudget::new(turn_budget).with_protected_recent_turns(
        args.protected_recent
            .unwrap_or(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS),
    );
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
        front_end: args.front_end,
    })
}

/// The estimator `name` names (`chars:N`, `o200k_base`, `cl100k_base`), `chars:4` when none.
///
/// # Errors
///
/// `VALIDATION_ERROR` for a name of no estimator.
pub(super) fn estimator_spec(name: Option<&str>) -> Result<EstimatorSpec, OpsError> {
    match name {
        Some(s) => s.parse().map_err(from_format),
        None => Ok(EstimatorSpec::default()),
    }
}

/// The tokens kept for the completion: `asked`, or the request's own output limit, or none.
///
/// # Errors
///
/// A request whose own output limit is malformed.
pub(super) fn reserve(pt: &ProviderTranscript, asked: Option<u64>) -> Result<u64, OpsError> {
    match asked {
        Some(n) => Ok(n),
        None => Ok(pt.requested_output().map_err(from_format)?.unwrap_or(0)),
    }
}

/// The request `input_text` holds, its turns estimated by `estimator`, and what a repair
/// dropped when `repair` asks for one.
///
/// The request's text is read without a tree of the whole document, and the output will copy
/// its bytes; a request that path does not take (one that is not valid, a Responses `input`
/// string) or a repair goes through a value, whose errors are the catalogue's. The turns'
/// contents stay in the text until a step needs them (the plan reads what its policy reads):
/// most of a large request is output that is dropped or masked unread.
fn read_request(
    format: Format,
    args: &FormatOptions,
    input_text: &str,
    estimator: &dyn TokenEstimator,
) -> Result<(ProviderTranscript, Option<Vec<Repair>>), OpsError> {
    let from_text = (!args.repair)
        .then(|| ProviderTranscript::from_text_deferred(format, input_text, estimator))
        .flatten();
    if let Some(pt) = from_text {
        return Ok((pt, None));
    }
    let (document, repairs) = read_value(format, args.repair, input_text)?;
    let key = cutctx::formats::list_key(format);
    let a_document = document.get("transcript").is_some() && document.get(key).is_none();
    let pt = ProviderTranscript::from_document_with(format, document, estimator).map_err(|e| {
        let mut err = invalid_with_hint(e);
        if a_document {
            // A request document given where a provider request was expected: say which.
            err.message = format!(
                "this is a cutctx request document (it has \"transcript\" and no \"{key}\"), \
                 not an {format} request: {}",
                args.front_end.to_compact_a_document()
            );
            err.details
                .insert("found".into(), Value::from("transcript"));
        }
        err
    })?;
    Ok((pt, repairs))
}

/// The request as a value, repaired when asked: `Some` repairs then (empty when nothing
/// needed one).
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; a request that cannot be repaired.
pub(super) fn read_value(
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
