//! The shipped policies by name for a provider request: the policy registry's
//! ([`cutctx_policies::registry`]) with the stubs of masking estimated as the request's turns
//! are (`chars:N`, or a BPE encoding), so a masked request is counted one way throughout.

use cutctx_policies::CompactionPolicy;
use cutctx_policies::registry;

use crate::{EstimatorSpec, FormatError};

/// The policy called `name` (one of [`registry::POLICY_NAMES`]), summarizing with the prompt
/// record `prompt_id`; `None` for a name it does not know (the caller words that refusal: the
/// command line also takes policy objects). Masking estimates its stubs as `spec` estimates
/// turns; with the default spec, every policy is the reference's.
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
    // Built only for a policy that masks, and only when it is not the default estimator.
    let stubs = if registry::masks(name) && !spec.is_default() {
        Some(spec.estimator()?)
    } else {
        None
    };
    Ok(registry::named(name, prompt_id, stubs)?)
}
