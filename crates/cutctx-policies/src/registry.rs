//! The one registry of the shipped policies: a policy's name, or its JSON spec as a request
//! document spells it, to the policy, with the defaults as named constants.
//!
//! Every front end builds its policies here: the request document's `"policy"` object
//! ([`from_spec`]), `--policy NAME` and `--policy '{...}'` of the provider formats, sessions and
//! batches, and the Python package's names ([`POLICY_NAMES`]). A new shipped policy is added
//! here once, and every front end knows it.

use cutctx_model::wire::{python_type_name, shown_in_details};
use cutctx_model::{CompactionError, details};
use serde_json::{Map, Value};

use crate::{
    CharRatioEstimator, CompactionPolicy, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain,
    SummarizingPolicy, TokenEstimator,
};

/// The names [`named`] knows, in the order messages list them.
pub const POLICY_NAMES: [&str; 4] = [
    "drop_oldest",
    "observation_masking",
    "summarizing",
    "default_chain",
];

/// The policy a front end uses when none is named.
pub const DEFAULT_POLICY: &str = "default_chain";

/// The prompt id summarization requests carry when a front end is given none (a request
/// document's policy object always names its own).
pub const DEFAULT_PROMPT_ID: &str = "compaction.summarize.v1";

/// The policy called `name`, summarizing with the prompt record `prompt_id`, its masking
/// estimating stubs with `stub_estimator` (the default estimator when `None`); `None` for a
/// name it does not know (the caller words that refusal: some also take a JSON spec). Masking
/// keeps [`ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS`] results, as the
/// reference's default chain does.
///
/// # Errors
///
/// `VALIDATION_ERROR` for a blank `prompt_id` when the policy summarizes.
///
/// ```
/// use cutctx_policies::registry::{DEFAULT_PROMPT_ID, named};
/// use cutctx_policies::CompactionPolicy;
/// let chain = named("default_chain", DEFAULT_PROMPT_ID, None)?.expect("a known name");
/// assert_eq!(chain.name(), "chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)");
/// assert!(named("newest_first", DEFAULT_PROMPT_ID, None)?.is_none());
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn named(
    name: &str,
    prompt_id: &str,
    stub_estimator: Option<Box<dyn TokenEstimator>>,
) -> Result<Option<Box<dyn CompactionPolicy>>, CompactionError> {
    let masking = |estimator: Option<Box<dyn TokenEstimator>>| {
        let policy =
            ObservationMaskingPolicy::new(ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS)?;
        Ok::<_, CompactionError>(match estimator {
            Some(estimator) => policy.with_estimator(estimator),
            None => policy,
        })
    };
    Ok(Some(match name {
        "drop_oldest" => Box::new(DropOldestPolicy),
        "observation_masking" => Box::new(masking(stub_estimator)?),
        "summarizing" => Box::new(SummarizingPolicy::new(prompt_id)?),
        "default_chain" => Box::new(PolicyChain::new(vec![
            Box::new(masking(stub_estimator)?),
            Box::new(SummarizingPolicy::new(prompt_id)?),
            Box::new(DropOldestPolicy),
        ])?),
        _ => return Ok(None),
    }))
}

/// Whether the policy called `name` masks, and so estimates stubs: a caller builds a stub
/// estimator only for these.
///
/// ```
/// assert!(cutctx_policies::registry::masks("default_chain"));
/// assert!(!cutctx_policies::registry::masks("drop_oldest"));
/// ```
#[must_use]
pub fn masks(name: &str) -> bool {
    matches!(name, "observation_masking" | "default_chain")
}

/// The policy a JSON spec names, as a request document's `"policy"` spells it: `{"name": ...}`
/// with that policy's options (`drop_oldest`; `observation_masking` with `keep_recent_results`,
/// `placeholder` and `estimator`; `summarizing` with `prompt_id`, `target_ratio` and
/// `min_span_turns`; `default_chain` with theirs; or `chain` with `policies`, a list of the
/// first three). The checks and their messages are the reference's.
///
/// # Errors
///
/// `VALIDATION_ERROR` naming the option and showing no content: an unknown policy or option, a
/// value of the wrong type or range, a missing `prompt_id`.
///
/// ```
/// use cutctx_policies::CompactionPolicy;
/// let spec = serde_json::json!({"name": "observation_masking", "keep_recent_results": 1});
/// let policy = cutctx_policies::registry::from_spec(&spec)?;
/// assert_eq!(policy.name(), "observation_masking");
/// let unknown = serde_json::json!({"name": "observation_masking", "keep": 1});
/// assert_eq!(
///     cutctx_policies::registry::from_spec(&unknown).map(|_| ()).unwrap_err().code().as_str(),
///     "VALIDATION_ERROR",
/// );
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn from_spec(spec: &Value) -> Result<Box<dyn CompactionPolicy>, CompactionError> {
    spec_policy(spec, true)
}

fn bad(message: String, key: &str, value: Value) -> CompactionError {
    CompactionError::validation(message, details! { key => value })
}

struct Options<'a> {
    name: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Options<'a> {
    fn only(&self, allowed: &[&str]) -> Result<(), CompactionError> {
        for key in self.map.keys() {
            if key != "name" && !allowed.contains(&key.as_str()) {
                return Err(CompactionError::validation(
                    format!(
                        "policy {:?} has no option {key:?}; its options are {allowed:?}.",
                        self.name
                    ),
                    details! { "policy" => self.name, "unknown_key" => key },
                ));
            }
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// A JSON integer (not a bool, not a float), or the default.
    fn int(&self, key: &str, default: i128) -> Result<i128, CompactionError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v
                .as_i64()
                .map(i128::from)
                .or_else(|| v.as_u64().map(i128::from))
            {
                Some(i) if !v.is_f64() => Ok(i),
                _ => Err(bad(
                    format!("{key} must be an int; got {}.", python_type_name(v)),
                    key,
                    shown_in_details(v),
                )),
            },
        }
    }

    fn count(&self, key: &str, default: usize, min: i128) -> Result<usize, CompactionError> {
        let n = self.int(key, i128::try_from(default).unwrap_or(i128::MAX))?;
        if n < min {
            let message = if min == 0 {
                format!("{key} must not be negative; got {n}.")
            } else {
                format!("{key} must be at least {min}; got {n}.")
            };
            return Err(bad(message, key, serde_json::json!(n as i64)));
        }
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, CompactionError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(bad(
                format!("{key} must be a string; got {}.", python_type_name(v)),
                key,
                shown_in_details(v),
            )),
        }
    }

    /// A JSON number (int or float, not a bool).
    fn number(&self, key: &str) -> Result<Option<f64>, CompactionError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(v) => Err(bad(
                format!("{key} must be a number; got {}.", python_type_name(v)),
                key,
                shown_in_details(v),
            )),
        }
    }
}

fn prompt_id<'a>(o: &Options<'a>) -> Result<&'a str, CompactionError> {
    o.string("prompt_id")?.ok_or_else(|| {
        CompactionError::validation(
            format!(
                "policy {:?} needs a prompt_id naming a versioned prompt record.",
                o.name
            ),
            details! { "policy" => o.name, "missing_key" => "prompt_id" },
        )
    })
}

fn masking(o: &Options<'_>) -> Result<ObservationMaskingPolicy, CompactionError> {
    let mut p = ObservationMaskingPolicy::new(o.count(
        "keep_recent_results",
        ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS,
        0,
    )?)?;
    if let Some(placeholder) = o.string("placeholder")? {
        p = p.with_placeholder(placeholder)?;
    }
    if let Some(est) = o.get("estimator") {
        let Value::Object(m) = est else {
            return Err(bad(
                format!(
                    "estimator must be an object {{\"chars_per_token\": number}}; got {}.",
                    python_type_name(est)
                ),
                "estimator",
                Value::from(python_type_name(est)),
            ));
        };
        let eo = Options {
            name: "estimator",
            map: m,
        };
        eo.only(&["chars_per_token"])?;
        let ratio = eo.number("chars_per_token")?.ok_or_else(|| {
            CompactionError::validation(
                "estimator needs chars_per_token, a finite positive number.",
                details! { "missing_key" => "chars_per_token" },
            )
        })?;
        p = p.with_estimator(Box::new(CharRatioEstimator::new(ratio)?));
    }
    Ok(p)
}

fn summarizing(o: &Options<'_>) -> Result<SummarizingPolicy, CompactionError> {
    let mut p = SummarizingPolicy::new(prompt_id(o)?)?;
    if let Some(r) = o.number("target_ratio")? {
        p = p.with_target_ratio(r)?;
    }
    p.with_min_span_turns(o.count(
        "min_span_turns",
        SummarizingPolicy::DEFAULT_MIN_SPAN_TURNS,
        1,
    )?)
}

/// The policy `v` specifies. `top` allows the composite policies (a chain's members are not).
fn spec_policy(v: &Value, top: bool) -> Result<Box<dyn CompactionPolicy>, CompactionError> {
    let Value::Object(map) = v else {
        return Err(bad(
            format!("policy must be an object; got {}.", python_type_name(v)),
            "policy",
            Value::from(python_type_name(v)),
        ));
    };
    let name = match map.get("name") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(bad(
                format!(
                    "policy name must be a string; got {}.",
                    python_type_name(other)
                ),
                "name",
                shown_in_details(other),
            ));
        }
        None => {
            return Err(CompactionError::validation(
                "policy needs a name.",
                details! { "missing_key" => "name" },
            ));
        }
    };
    let o = Options { name, map };
    Ok(match name {
        "drop_oldest" => {
            o.only(&[])?;
            Box::new(DropOldestPolicy)
        }
        "observation_masking" => {
            o.only(&["keep_recent_results", "placeholder", "estimator"])?;
            Box::new(masking(&o)?)
        }
        "summarizing" => {
            o.only(&["prompt_id", "target_ratio", "min_span_turns"])?;
            Box::new(summarizing(&o)?)
        }
        "default_chain" if top => {
            o.only(&[
                "prompt_id",
                "keep_recent_results",
                "target_ratio",
                "min_span_turns",
            ])?;
            let masking = ObservationMaskingPolicy::new(o.count(
                "keep_recent_results",
                ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS,
                0,
            )?)?;
            Box::new(PolicyChain::new(vec![
                Box::new(masking),
                Box::new(summarizing(&o)?),
                Box::new(DropOldestPolicy),
            ])?)
        }
        "chain" if top => {
            o.only(&["policies"])?;
            let members = match o.get("policies") {
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(bad(
                        format!(
                            "policies must be an array; got {}.",
                            python_type_name(other)
                        ),
                        "policies",
                        Value::from(python_type_name(other)),
                    ));
                }
                None => {
                    return Err(CompactionError::validation(
                        "a chain needs policies.",
                        details! { "missing_key" => "policies" },
                    ));
                }
            };
            let members = members
                .iter()
                .map(|m| spec_policy(m, false))
                .collect::<Result<Vec<_>, _>>()?;
            Box::new(PolicyChain::new(members)?)
        }
        other => {
            let allowed: &[&str] = if top {
                &[
                    "drop_oldest",
                    "observation_masking",
                    "summarizing",
                    "default_chain",
                    "chain",
                ]
            } else {
                &["drop_oldest", "observation_masking", "summarizing"]
            };
            return Err(CompactionError::validation(
                format!("unknown policy {other:?}; expected one of {allowed:?}."),
                details! { "policy" => other },
            ));
        }
    })
}
