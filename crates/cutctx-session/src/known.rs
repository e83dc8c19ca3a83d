//! [`Known`]: what a caller that holds its session in memory already knows of a request, so
//! that [`step_known`](crate::step_known) reads it once. Each is the same rule as the step's
//! own, read faster:
//!
//! * the chained digests of the request's history, which the caller took to find the session
//!   ([`history_digests`](crate::history_digests)): the history is checked against the state by
//!   looking one up rather than hashing it again;
//! * the last call ([`LastCall`]): its validation held open at the end of its history, its
//!   other fields and their estimate. Where the request continues that history with the same
//!   other fields, it is validated by reading its new messages alone, as
//!   [`OpenValidation::append`] says `validate` would, and its other fields are not counted
//!   again.

use cutctx_formats::{Format, FormatError, OpenValidation, list_key, message_list};
use serde_json::{Map, Value};

use crate::state::{SessionState, digest_of};

/// What a caller already knows of a request (the default: nothing).
#[derive(Debug, Default, Clone, Copy)]
pub struct Known<'a> {
    /// `history_digests` of the request's own history. They must be the request's: the step
    /// trusts them to say whether its history extends the state's (checked in debug builds).
    pub digests: Option<&'a [String]>,
    /// The last call of this session, when the caller keeps it.
    pub last: Option<&'a LastCall>,
}

/// The last call of a session as its caller keeps it in memory: the request's validation held
/// open at the end of its history, its other fields, and their estimate.
///
/// ```
/// use cutctx_formats::{EstimatorSpec, Format, FormatError, policy_named};
/// use cutctx_session::{Known, LastCall, SessionConfig, step_known};
/// use serde_json::json;
/// let config = SessionConfig {
///     format: Format::OpenAiChat, window: 500, reserve_output: 0,
///     trigger: SessionConfig::DEFAULT_TRIGGER, target: SessionConfig::DEFAULT_TARGET,
///     protected_recent: 2,
///     policy: policy_named("drop_oldest", "p", &EstimatorSpec::default())?.expect("known"),
///     estimator: EstimatorSpec::default().estimator()?, cache_breakpoints: false,
///     reasoning: cutctx_formats::ReasoningMode::Strip, pinned_results: Default::default(),
///     early: None,
/// };
/// let mut no_summaries = |_: &_, _: &_| -> Result<String, FormatError> { unreachable!() };
/// let first = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
/// let first = step_known(&config, None, first, &Known::default(), &mut no_summaries)?;
/// let last: Option<LastCall> = first.last;
/// let second = json!({"model": "m", "messages": [
///     {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
///     {"role": "user", "content": "Bye"}]});
/// let known = Known { digests: None, last: last.as_ref() };
/// let next = step_known(&config, Some(&first.step.state), second.clone(), &known, &mut no_summaries)?;
/// assert!(next.received.is_none(), "sent as it came");
/// assert_eq!(next.step.request, second);
/// # Ok::<(), FormatError>(())
/// ```
#[derive(Debug, Clone)]
pub struct LastCall {
    validation: OpenValidation,
    fields: Map<String, Value>,
    fixed_tokens: u64,
}

impl LastCall {
    /// The last call of a step on `request` (as received), whose validation it keeps.
    /// `None` when the request has no list to continue.
    pub(crate) fn of(
        format: Format,
        request: &Value,
        validation: OpenValidation,
        fixed_tokens: u64,
    ) -> Option<Self> {
        Some(Self {
            validation,
            fields: fields(format, request)?,
            fixed_tokens,
        })
    }

    /// Takes in `new`, appended to the last call's history, reading them alone: `Ok` when the
    /// longer request is valid (the validation is then of it), else the violation `validate`
    /// returns (and the validation is as it was).
    ///
    /// # Errors
    ///
    /// The first violation of the longer request.
    pub fn append(&mut self, new: &[Value]) -> Result<(), FormatError> {
        self.validation.append(new).map_err(FormatError::from)
    }

    /// The estimate of everything in the request but its messages.
    #[must_use]
    pub const fn fixed_tokens(&self) -> u64 {
        self.fixed_tokens
    }

    /// How many messages the last call's history held.
    #[must_use]
    pub const fn messages(&self) -> usize {
        self.validation.len()
    }
}

/// The request's fields but its list; `None` for a request that is not an object or whose
/// list is not one.
fn fields(format: Format, request: &Value) -> Option<Map<String, Value>> {
    let map = request.as_object()?;
    let key = list_key(format);
    map.get(key)?.as_array()?;
    Some(
        map.iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Whether the request's fields but its list are `fields`, compared in place.
fn same_fields(format: Format, request: &Value, fields: &Map<String, Value>) -> bool {
    let Some(map) = request.as_object() else {
        return false;
    };
    let key = list_key(format);
    map.len() == fields.len() + 1
        && map
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .all(|(k, v)| fields.get(k) == Some(v))
}

/// Whether `known`, the first messages of a history, are the ones `state` describes: by the
/// caller's digests when given, else hashed.
pub(crate) fn same_history(
    format: Format,
    state: &SessionState,
    known: &[Value],
    digests: Option<&[String]>,
) -> bool {
    match digests.and_then(|d| d.get(state.messages)) {
        Some(d) => {
            debug_assert_eq!(
                *d,
                crate::state::hex(&digest_of(format, known)),
                "the caller's digests are the history's"
            );
            *d == state.history_digest()
        }
        None => digest_of(format, known) == state.digest,
    }
}

/// The request's validation, open at the end of its history, and the estimate of its other
/// fields when the last call's still holds: the last call's validation taking the new
/// messages alone where the request continues its history (by the caller's digests) with the
/// same other fields, else the whole request validated.
pub(crate) fn validate(
    format: Format,
    request: &Value,
    previous: Option<&SessionState>,
    known: &Known<'_>,
) -> Result<(Option<OpenValidation>, Option<u64>), FormatError> {
    let continued = match (known.last, previous, known.digests) {
        (Some(last), Some(state), Some(_))
            if state.format == format
                && last.messages() == state.messages
                && message_list(format, request).len() >= state.messages
                && same_fields(format, request, &last.fields) =>
        {
            let messages = message_list(format, request);
            same_history(format, state, &messages[..state.messages], known.digests)
                .then_some((last, messages.get(state.messages..).unwrap_or(&[])))
        }
        _ => None,
    };
    if let Some((last, new)) = continued {
        let mut validation = last.validation.clone();
        validation.append(new).map_err(FormatError::from)?;
        return Ok((Some(validation), Some(last.fixed_tokens)));
    }
    let validation = OpenValidation::over(format, request).map_err(FormatError::from)?;
    Ok((validation, None))
}
