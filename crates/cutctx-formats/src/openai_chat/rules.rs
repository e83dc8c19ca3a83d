//! The Chat rules: [`validate`] over a document, and [`Check`], the one site of
//! every rule, which each reader feeds (a value, or a hand-read [`Plain`]).

use super::*;

/// What the rules read of one message, from its value ([`Check::message`]) or from its text
/// ([`Check::plain`]).
pub(super) struct Facts<'m> {
    pub(super) role: &'m str,
    /// A `tool` message's `tool_call_id` (`None` when it has none).
    pub(super) tool_call_id: Option<&'m str>,
    /// Whether the content is absent, null or an empty array.
    pub(super) no_content: bool,
    /// Whether the message carries a payload of its own in place of content: a refusal, an
    /// audio reply, a legacy `function_call`.
    pub(super) own_payload: bool,
}

/// The content rule on a message's value: absent, a string, an array or null.
pub(super) fn content_shape_ok(map: &Map<String, Value>) -> bool {
    map.get("content")
        .is_none_or(|c| matches!(c, Value::String(_) | Value::Array(_) | Value::Null))
}

/// Whether a message's value has no content: absent, null or an empty array.
pub(super) fn no_content(map: &Map<String, Value>) -> bool {
    match map.get("content") {
        None | Some(Value::Null) => true,
        Some(Value::Array(parts)) => parts.is_empty(),
        Some(_) => false,
    }
}

/// Whether a message's value carries a payload of its own in place of content: a refusal, an
/// audio reply, a legacy `function_call`.
pub(super) fn own_payload(map: &Map<String, Value>) -> bool {
    ["function_call", "refusal", "audio"]
        .iter()
        .any(|k| map.get(*k).is_some_and(|v| !v.is_null()))
}

/// A run of tool messages being checked: the calling message's position, its call ids in
/// order and as a set, and the ids answered so far. Ids are owned: a message is read once and
/// may be gone (the text path parses one message at a time).
type OpenRun = (usize, Vec<String>, BTreeSet<String>, BTreeSet<String>);

/// Checks a Chat document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    let list = messages(document)?;
    let mut check = Check::start(list.len())?;
    for (i, m) in list.iter().enumerate() {
        check.message(i, m)?;
    }
    check.finish()
}

/// The rules, message by message: [`validate`] over a document, and the text path over one
/// parsed message at a time.
#[derive(Debug, Clone, Default)]
pub(crate) struct Check {
    /// The calls the current run of tool messages may answer (in order, and as a set, so that
    /// a message of many parallel calls costs no more than its length), and those answered.
    pub(super) open: Option<OpenRun>,
}

impl Check {
    /// A check of a list of `len` messages: at least one.
    pub(crate) fn start(len: usize) -> Result<Self, Violation> {
        if len == 0 {
            return Err(Violation::new(
                FORMAT,
                Rule::NoMessages,
                None,
                "messages".to_owned(),
            ));
        }
        Ok(Self { open: None })
    }

    /// Message `i`, in order: its value's shape, then [`Check::rules`].
    pub(crate) fn message(&mut self, i: usize, m: &Value) -> Result<(), Violation> {
        let Value::Object(map) = m else {
            return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), path(i)));
        };
        let Some(role) = map.get("role").and_then(Value::as_str) else {
            return Err(Violation::new(
                FORMAT,
                Rule::Malformed,
                Some(i),
                format!("{}.role", path(i)),
            ));
        };
        shape(content_shape_ok(map), FORMAT, Some(i), || {
            format!("{}.content", path(i))
        })?;
        let facts = Facts {
            role,
            tool_call_id: map.get("tool_call_id").and_then(Value::as_str),
            no_content: no_content(map),
            own_payload: own_payload(map),
        };
        self.rules(i, &facts, || call_ids(i, map))
    }

    /// Message `i`, in order, read as a [`Plain`] message: [`Check::rules`] over what it holds.
    /// `None` when the message breaks a rule (the check's state is then as it was): the
    /// caller checks its value, which says what is wrong.
    pub(crate) fn plain(&mut self, i: usize, m: &Plain<'_>) -> Option<()> {
        let facts = Facts {
            role: &m.role,
            tool_call_id: m.tool_call_id.as_deref(),
            no_content: !matches!(m.content, Some(Some(_))),
            // The reader takes none of those fields.
            own_payload: false,
        };
        // An assistant message without `tool_calls` calls nothing.
        let calls = m.calls.as_deref().unwrap_or_default();
        self.rules(i, &facts, || {
            distinct_calls(i, calls.iter().map(|c| Some(&*c.id)))
        })
        .ok()
    }

    /// The format's rules on message `i`, whichever reader read it: a `tool` message answers
    /// a call of the run open before it, once; any other message closes that run, every call
    /// answered; an assistant message's call ids are distinct (`calls`, asked only of an
    /// assistant message), and it has content unless it calls a tool or carries its own
    /// payload. The state changes only when the message passes.
    fn rules<'m>(
        &mut self,
        i: usize,
        m: &Facts<'_>,
        calls: impl FnOnce() -> Result<Vec<&'m str>, Violation>,
    ) -> Result<(), Violation> {
        let at_id = || format!("{}.tool_call_id", path(i));
        if m.role == "tool" {
            let Some(id) = m.tool_call_id else {
                return Err(Violation::new(FORMAT, Rule::Malformed, Some(i), at_id()));
            };
            let Some((_, _, calls, answered)) = self.open.as_mut() else {
                return Err(
                    Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at_id()).with_id(id),
                );
            };
            if !calls.contains(id) {
                return Err(
                    Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at_id()).with_id(id),
                );
            }
            if answered.contains(id) {
                return Err(
                    Violation::new(FORMAT, Rule::DuplicateResult, Some(i), at_id()).with_id(id),
                );
            }
            answered.insert(id.to_owned());
            return Ok(());
        }
        close(self.open.as_ref())?;
        match role_of(m.role) {
            // A role the format does not name is an opaque message: carried untouched, in its
            // place, like a system message ([`crate::opaque_items`] counts it).
            Some(Role::System | Role::User) | None => self.open = None,
            Some(Role::Assistant) => {
                let ids = calls()?;
                // Content is required unless the message calls a tool (or is a refusal or
                // an audio reply, which carry their own payload).
                if m.no_content && ids.is_empty() && !m.own_payload {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::EmptyContent,
                        Some(i),
                        format!("{}.content", path(i)),
                    ));
                }
                self.open = (!ids.is_empty()).then(|| {
                    let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
                    let set = ids.iter().cloned().collect();
                    (i, ids, set, BTreeSet::new())
                });
            }
            // A tool message was checked above.
            Some(Role::Tool) => {
                return Err(Violation::new(
                    FORMAT,
                    Rule::UnknownRole,
                    Some(i),
                    format!("{}.role", path(i)),
                ));
            }
        }
        Ok(())
    }

    /// The end of the list: the last calls must have been answered.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        close(self.open.as_ref())
    }
}

/// Every call of the closing run must have been answered.
pub(super) fn close(open: Option<&OpenRun>) -> Result<(), Violation> {
    if let Some(&(i, ref ids, _, ref answered)) = open
        && let Some((j, id)) = ids
            .iter()
            .enumerate()
            .find(|(_, id)| !answered.contains(id.as_str()))
    {
        return Err(Violation::new(
            FORMAT,
            Rule::CallWithoutResult,
            Some(i),
            format!("{}.tool_calls[{j}].id", path(i)),
        )
        .with_id(id));
    }
    Ok(())
}
