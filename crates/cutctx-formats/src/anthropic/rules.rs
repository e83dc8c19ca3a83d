//! The Anthropic rules: [`validate`] over a document, and [`Check`], the one site
//! of every rule, which each reader feeds (a value, or a hand-read [`Plain`]).

use super::*;

/// Checks an Anthropic document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    system_shape(document)?;
    let list = messages(document)?;
    let mut check = Check::start(list.len())?;
    for (i, m) in list.iter().enumerate() {
        check.message(i, m)?;
    }
    check.finish()
}

/// The shape of the top-level `system`: a string or text blocks.
pub(crate) fn system_shape(document: &Value) -> Result<(), Violation> {
    if let Some(system) = document.as_object().and_then(|d| d.get("system")) {
        let ok = match system {
            Value::Null | Value::String(_) => true,
            Value::Array(blocks) => blocks
                .iter()
                .all(|b| block_type(b) == "text" && b.get("text").is_some_and(Value::is_string)),
            _ => false,
        };
        shape(ok, FORMAT, None, || "system".into())?;
    }
    Ok(())
}

/// What [`Check::rules`] reads of a content block, from either reader: a result or a call by
/// its id (`None` when it has none), or any other block.
pub(super) enum BlockFact<'m> {
    Result(Option<&'m str>),
    Use(Option<&'m str>),
    Other,
}

/// The rules, message by message: [`validate`] over a document, and the text path over one
/// parsed message at a time.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    /// How many messages the list holds: a final assistant message may be empty.
    pub(super) len: usize,
    /// The tool_use ids of the previous message, when it was an assistant message with calls
    /// (a message of many parallel calls costs no more than its length).
    pub(super) open: Option<(usize, Ids<String>)>,
    /// Whether the previous message may be followed by a mid-conversation system message: a
    /// user message (tool results included) or a system message.
    pub(super) system_may_follow: bool,
}

impl Check {
    /// A check of a list of `len` messages: at least one.
    pub(crate) fn start(len: usize) -> Result<Self, Violation> {
        if len == 0 {
            return Err(Violation::new(
                FORMAT,
                Rule::NoMessages,
                None,
                "messages".into(),
            ));
        }
        Ok(Self {
            len,
            open: None,
            system_may_follow: false,
        })
    }

    /// A check of a list whose length is not known yet: as [`Check::start`] of a list longer
    /// than any, so that it takes no empty final assistant message (a prefill), which only a
    /// known length allows. Whatever it accepts, a check of the list's true length accepts.
    pub(crate) const fn open_ended() -> Self {
        Self {
            len: usize::MAX,
            open: None,
            system_may_follow: false,
        }
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
        let content = map.get("content");
        shape(
            matches!(content, Some(Value::String(_) | Value::Array(_))),
            FORMAT,
            Some(i),
            || format!("{}.content", path(i)),
        )?;
        for (j, b) in blocks(m).iter().enumerate() {
            shape(
                b.get("type").is_some_and(Value::is_string),
                FORMAT,
                Some(i),
                || format!("{}.content[{j}].type", path(i)),
            )?;
        }
        let empty = match content {
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Array(b)) => b.is_empty(),
            _ => false,
        };
        let facts = blocks(m).iter().map(|b| match block_type(b) {
            TOOL_RESULT => BlockFact::Result(b.get(TOOL_USE_ID).and_then(Value::as_str)),
            TOOL_USE => BlockFact::Use(b.get("id").and_then(Value::as_str)),
            _ => BlockFact::Other,
        });
        self.rules(i, role, empty, facts)
    }

    /// Message `i`, in order, read as a [`Plain`] message: [`Check::rules`] over what it holds.
    /// `None` when the message breaks a rule (the check's state is then as it was), and for an
    /// empty message, which the value path reads (a final assistant prefill, allowed only when
    /// the list's length is known): the caller checks its value, which says what is wrong.
    pub(crate) fn plain(&mut self, i: usize, m: &Plain<'_>) -> Option<()> {
        if m.content.is_empty() {
            return None;
        }
        let facts = m.content.blocks().iter().map(|b| match b {
            Block::ToolResult { id, .. } => BlockFact::Result(Some(id)),
            Block::ToolUse { id, .. } => BlockFact::Use(Some(id)),
            Block::Text(_) => BlockFact::Other,
        });
        self.rules(i, &m.role, false, facts).ok()
    }

    /// The format's rules on message `i`, whichever reader read it: a `user` first; a
    /// mid-conversation `system` message only after a user or system message; a role the format
    /// does not name is an opaque message ([`Kind::Opaque`]), checked only for what it holds;
    /// content unless it is the final assistant message; the results of the previous
    /// message's calls first in a user message, each once, every call answered; `tool_use`
    /// only from the assistant, its ids distinct. The state changes only when the message
    /// passes.
    fn rules<'m>(
        &mut self,
        i: usize,
        role: &str,
        empty: bool,
        blocks: impl Iterator<Item = BlockFact<'m>>,
    ) -> Result<(), Violation> {
        let kind = Kind::of(role);
        if i == 0 && matches!(kind, Kind::Assistant | Kind::System) {
            return Err(Violation::new(
                FORMAT,
                Rule::FirstMessageNotUser,
                Some(0),
                format!("{}.role", path(0)),
            ));
        }
        if kind == Kind::System && !self.system_may_follow {
            return Err(Violation::new(
                FORMAT,
                Rule::SystemMessageMisplaced,
                Some(i),
                format!("{}.role", path(i)),
            ));
        }
        // The provider allows an empty final assistant message (a prefill to continue from).
        if empty && !(role == "assistant" && i + 1 == self.len) {
            return Err(Violation::new(
                FORMAT,
                Rule::EmptyContent,
                Some(i),
                format!("{}.content", path(i)),
            ));
        }
        let calls = self.open.as_ref();
        let mut answered: Ids<&str> = Ids::default();
        let mut seen_other = false;
        let mut uses: Ids<String> = Ids::default();
        for (j, b) in blocks.enumerate() {
            let at = || format!("{}.content[{j}]", path(i));
            match b {
                BlockFact::Result(id) => {
                    let Some(id) = id else {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.tool_use_id", at()),
                        ));
                    };
                    let known = role == "user" && calls.is_some_and(|(_, set)| set.contains(id));
                    if !known {
                        return Err(
                            Violation::new(FORMAT, Rule::ResultWithoutCall, Some(i), at())
                                .with_id(id),
                        );
                    }
                    if !answered.insert(id) {
                        return Err(Violation::new(FORMAT, Rule::DuplicateResult, Some(i), at())
                            .with_id(id));
                    }
                    if seen_other {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::ToolResultNotFirst,
                            Some(i),
                            at(),
                        )
                        .with_id(id));
                    }
                }
                BlockFact::Use(id) => {
                    let Some(id) = id else {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.id", at()),
                        ));
                    };
                    if role != "assistant" {
                        return Err(Violation::new(
                            FORMAT,
                            Rule::Malformed,
                            Some(i),
                            format!("{}.type", at()),
                        ));
                    }
                    if !uses.insert(id.to_owned()) {
                        return Err(Violation::new(FORMAT, Rule::DuplicateCallId, Some(i), at())
                            .with_id(id));
                    }
                    seen_other = true;
                }
                BlockFact::Other => seen_other = true,
            }
        }
        if let Some((at, ids)) = calls
            && let Some(id) = ids.iter().find(|id| !answered.contains(id.as_str()))
        {
            return Err(
                Violation::new(FORMAT, Rule::CallWithoutResult, Some(*at), path(*at)).with_id(id),
            );
        }
        self.open = (!uses.is_empty()).then_some((i, uses));
        self.system_may_follow = matches!(kind, Kind::User | Kind::System);
        Ok(())
    }

    /// The end of the list: the last message's calls must have their results.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        if let Some((at, ids)) = self.open
            && let Some(id) = ids.first()
        {
            return Err(
                Violation::new(FORMAT, Rule::CallWithoutResult, Some(at), path(at)).with_id(id),
            );
        }
        Ok(())
    }
}
