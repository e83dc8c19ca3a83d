//! The Chat turns: [`Build`] maps each message (as a value, or as a hand-read
//! [`Plain`]) to cutctx turns and the sources they came from.

use super::*;

/// Maps a valid Chat document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let list = messages(document)?;
    let mut build = Build::default();
    for (i, m) in list.iter().enumerate() {
        build.message(i, m, estimator)?;
    }
    Ok(build.built)
}

/// The turns, message by message.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// Call id -> the key of the exchange the latest assistant message with calls opened.
    /// A valid list answers only those calls (the check holds a tool message to the run of
    /// calls before it), so the map is emptied at each such message: it holds one message's
    /// calls rather than every call of the request, each looked up among thousands.
    pub(super) keys: BTreeMap<String, Arc<str>>,
    pub(super) ids: MessageIds,
}

impl Build {
    /// The turns of a list of `n` messages: room for them, and their ids made ahead.
    pub(crate) fn of(n: usize) -> Self {
        Self {
            built: Built::with_capacity(n),
            keys: BTreeMap::new(),
            ids: MessageIds::ahead(n),
        }
    }

    /// The turns of a list whose length is not known yet, room made for `capacity` of them:
    /// a list read as it is scanned.
    pub(crate) fn growing(capacity: usize) -> Self {
        Self {
            built: Built::with_capacity(capacity),
            keys: BTreeMap::new(),
            ids: MessageIds::growing(),
        }
    }

    /// The turn of message `i`, which the check accepted.
    pub(crate) fn message(
        &mut self,
        i: usize,
        m: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let role_name = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(i, "role"))?;
        let mut text = Text::default();
        text.push_content(m.get("content").unwrap_or(&Value::Null));
        let (role, key) = match role_of(role_name) {
            // A role the format does not name: an opaque message, untouchable as a system one.
            Some(Role::System) | None => (Role::System, None),
            Some(Role::User) => (Role::User, None),
            Some(Role::Tool) => {
                let call = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(i, "tool_call_id"))?;
                (Role::Tool, self.keys.get(call).cloned())
            }
            _ => {
                if let Some(r) = m.get("refusal").and_then(Value::as_str) {
                    text.push(r);
                }
                let calls = m.get("tool_calls").and_then(Value::as_array);
                // The exchange's key is the message's id, shared.
                let key: Option<Arc<str>> =
                    calls.filter(|c| !c.is_empty()).map(|_| Arc::clone(&id));
                if key.is_some() {
                    self.keys.clear();
                }
                for call in calls.into_iter().flatten() {
                    if let (Some(call_id), Some(k)) = (call.get("id").and_then(Value::as_str), &key)
                    {
                        self.keys.insert(call_id.to_owned(), Arc::clone(k));
                    }
                    // `function` calls and `custom` calls.
                    for kind in ["function", "custom"] {
                        if let Some(f) = call.get(kind) {
                            text.push_json(f.get("name").unwrap_or(&Value::Null));
                            text.push_json(f.get("arguments").unwrap_or(&Value::Null));
                            text.push_json(f.get("input").unwrap_or(&Value::Null));
                        }
                    }
                }
                (Role::Assistant, key)
            }
        };
        self.push(i, id, role, text, key, estimator)
    }

    /// The turn of message `i`, read as a [`Plain`] message, which [`Check::plain`] accepted:
    /// the turn [`Build::message`] makes of its value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        m: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let mut text = Text::default();
        if let Some(Some(content)) = &m.content {
            text.push_str(content);
        }
        let (role, key) = match role_of(&m.role) {
            // A role the format does not name: an opaque message, untouchable as a system one.
            Some(Role::System) | None => (Role::System, None),
            Some(Role::User) => (Role::User, None),
            Some(Role::Tool) => {
                let call = m
                    .tool_call_id
                    .as_deref()
                    .ok_or_else(|| missing(i, "tool_call_id"))?;
                (Role::Tool, self.keys.get(call).cloned())
            }
            _ => {
                let calls = m.calls.as_deref().unwrap_or_default();
                let key: Option<Arc<str>> = (!calls.is_empty()).then(|| Arc::clone(&id));
                if key.is_some() {
                    self.keys.clear();
                }
                for call in calls {
                    if let Some(k) = &key {
                        self.keys
                            .insert(call.id.clone().into_owned(), Arc::clone(k));
                    }
                    text.push(&call.name);
                    text.push(&call.arguments);
                }
                (Role::Assistant, key)
            }
        };
        self.push(i, id, role, text, key, estimator)
    }

    /// Adds the turn of message `i`.
    fn push(
        &mut self,
        i: usize,
        id: Arc<str>,
        role: Role,
        text: Text<'_>,
        key: Option<Arc<str>>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let (content, estimate, written) = text.finish_deferring(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        self.built
            .push_deferring(turn, TurnSource::Message(i), written);
        Ok(())
    }
}
