//! The policies a provider request can be compacted with, by name: the one place the command
//! line and the Python package build them from, so that a name means the same policy in both.

use cutctx_policies::{
    CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain, SummarizingPolicy,
    default_chain,
};

use crate::{EstimatorSpec, FormatError};

/// The names [`policy_named`] knows, in the order messages list them.
pub const POLICY_NAMES: [&str; 4] = [
    "drop_oldest",
    "observation_masking",
    "summarizing",
    "default_chain",
];

/// The policy called `name`, summarizing with the prompt record `prompt_id`; `None` for a name
/// it does not know (the caller words that refusal: the command line also takes policy
/// objects). Masking keeps the two most recent results, as the reference's default chain does,
/// and estimates its stubs as `spec` estimates turns, so that the default keeps the
/// reference's plans.
///
/// # Errors
///
/// `VALIDATION_ERROR` for a blank `prompt_id` (when the policy summarizes), and the estimator's
/// own error when `spec` cannot be built.
///
/// ```
/// use cutctx_formats::{EstimatorSpec, policy_named};
/// let chain = policy_named("default_chain", "summary.v1", &EstimatorSpec::default())?
///     .expect("a known name");
/// assert_eq!(chain.name(), "chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)");
/// assert!(policy_named("newest_first", "summary.v1", &EstimatorSpec::default())?.is_none());
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
pub fn policy_named(
    name: &str,
    prompt_id: &str,
    spec: &EstimatorSpec,
) -> Result<Option<Box<dyn CompactionPolicy>>, FormatError> {
    let masking = || -> Result<ObservationMaskingPolicy, FormatError> {
        let policy = ObservationMaskingPolicy::new(2)?;
        Ok(if spec.is_default() {
            policy
        } else {
            policy.with_estimator(spec.estimator()?)
        })
    };
    Ok(Some(match name {
        "drop_oldest" => Box::new(DropOldestPolicy),
        "observation_masking" => Box::new(masking()?),
        "summarizing" => Box::new(SummarizingPolicy::new(prompt_id)?),
        "default_chain" if spec.is_default() => Box::new(default_chain(prompt_id)?),
        "default_chain" => Box::new(PolicyChain::new(vec![
            Box::new(masking()?),
            Box::new(SummarizingPolicy::new(prompt_id)?),
            Box::new(DropOldestPolicy),
        ])?),
        _ => return Ok(None),
    }))
}
