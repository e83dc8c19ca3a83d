//! The Anthropic turns: [`Build`] maps each message (as a value, or as a hand-read
//! [`Plain`]) to cutctx turns and the sources they came from.

use super::*;

/// Maps a valid Anthropic document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let mut build = Build::start(document, estimator)?;
    let list = messages(document)?;
    for (i, m) in list.iter().enumerate() {
        build.message(i, m, estimator)?;
    }
    Ok(build.built)
}

/// The turn of the request's top-level `system`, when it has one that is not `null`.
pub(super) fn system_turn(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Option<TranscriptTurn>, FormatError> {
    let Some(system) = document.get("system").filter(|s| !s.is_null()) else {
        return Ok(None);
    };
    let mut t = Text::default();
    t.push_content(system);
    let (content, estimate) = t.finish(estimator);
    Ok(Some(TranscriptTurn::new(
        "system",
        Role::System,
        content,
        estimate,
    )?))
}

/// The turns, message by message.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// tool_use id -> the key of the exchange the latest assistant message with calls
    /// opened. A valid list answers only those calls (in the message right after it), so the
    /// map is emptied at each such message: it holds one message's calls rather than every
    /// call of the request, each looked up among thousands.
    pub(super) keys: BTreeMap<String, Arc<str>>,
}

impl Build {
    /// The turn of the request's top-level `system`.
    pub(crate) fn start(
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        let mut build = Self::default();
        if let Some(turn) = system_turn(document, estimator)? {
            build.built.push(turn, TurnSource::System);
        }
        Ok(build)
    }

    /// The turns built, with the turn of the request's top-level `system` put first, as
    /// [`Build::start`] puts it: for a reader that builds the messages before it has read the
    /// rest of the request (its `system` may come after `messages`).
    pub(crate) fn finish_with_system(
        mut self,
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Built, FormatError> {
        if let Some(turn) = system_turn(document, estimator)? {
            self.built.insert_first(turn, TurnSource::System);
        }
        Ok(self.built)
    }

    /// The turns of message `i`, which the check accepted.
    pub(crate) fn message(
        &mut self,
        i: usize,
        m: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let built = &mut self.built;
        let keys = &mut self.keys;
        let id = message_id(i, None);
        let kind = Kind::of_message(m);
        let blocks = blocks(m);
        // A message with a block carried untouched (a compaction, a tool-set change, a block
        // type this crate does not know) is pinned: kept in its place, its exchange with it.
        let pinned = blocks.iter().any(|b| untouchable_block(b).is_some());
        if matches!(kind, Kind::System | Kind::Opaque) {
            let mut t = Text::default();
            t.push_content(m.get("content").unwrap_or(&Value::Null));
            let (content, estimate) = t.finish(estimator);
            built.push(
                TranscriptTurn::new(id, Role::System, content, estimate)?,
                TurnSource::Message(i),
            );
            return Ok(());
        }
        if kind == Kind::Assistant {
            let key: Option<Arc<str>> = blocks
                .iter()
                .any(|b| block_type(b) == TOOL_USE)
                .then(|| Arc::clone(&id));
            if let Some(key) = &key {
                keys.clear();
                for b in blocks.iter().filter(|b| block_type(b) == TOOL_USE) {
                    if let Some(use_id) = b.get("id").and_then(Value::as_str) {
                        keys.insert(use_id.to_owned(), Arc::clone(key));
                    }
                }
            }
            let mut t = Text::default();
            t.push_content(m.get("content").unwrap_or(&Value::Null));
            let (content, estimate) = t.finish(estimator);
            let turn = TranscriptTurn::new(id, Role::Assistant, content, estimate)?
                .with_tool_call_id_opt(key)
                .with_pinned(pinned);
            built.push(turn, TurnSource::Message(i));
            return Ok(());
        }
        if !blocks.iter().any(|b| block_type(b) == TOOL_RESULT) {
            let mut t = Text::default();
            t.push_content(m.get("content").unwrap_or(&Value::Null));
            let (content, estimate) = t.finish(estimator);
            built.push(
                TranscriptTurn::new(id, Role::User, content, estimate)?.with_pinned(pinned),
                TurnSource::Message(i),
            );
            return Ok(());
        }
        // A user message holding results: one tool turn per result, one turn for the rest.
        let mut message_key: Option<Arc<str>> = None;
        let mut rest: Vec<usize> = Vec::new();
        let mut rest_text = Text::default();
        for (j, b) in blocks.iter().enumerate() {
            if block_type(b) != TOOL_RESULT {
                rest.push(j);
                rest_text.push_part(b);
                continue;
            }
            let use_id = b.get(TOOL_USE_ID).and_then(Value::as_str).unwrap_or("");
            let key = keys.get(use_id).cloned();
            if message_key.is_none() {
                message_key.clone_from(&key);
            }
            let mut t = Text::default();
            t.push_content(b.get("content").unwrap_or(&Value::Null));
            push_result(built, (i, j), t, key, estimator)?;
        }
        // The untouchable blocks are among the message's other blocks: their turn is pinned.
        push_rest(built, i, (rest, pinned), rest_text, message_key, estimator)
    }
}

impl Build {
    /// The turns of message `i`, read as a [`Plain`] message, which [`Check::plain`]
    /// accepted: the turns [`Build::message`] makes of its value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        m: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let built = &mut self.built;
        let keys = &mut self.keys;
        let id = message_id(i, None);
        let blocks = m.content.blocks();
        let kind = Kind::of(&m.role);
        if matches!(kind, Kind::System | Kind::Opaque) {
            let mut t = Text::default();
            match &m.content {
                Content::Text(text) => t.push_str(text),
                Content::Blocks(_) => {
                    for b in blocks {
                        if let Block::Text(text) = b {
                            t.push_str(text);
                        }
                    }
                }
            }
            let (content, estimate, written) = t.finish_deferring(estimator);
            let turn = TranscriptTurn::new(id, Role::System, content, estimate)?;
            built.push_deferring(turn, TurnSource::Message(i), written);
            return Ok(());
        }
        if kind == Kind::Assistant {
            let key: Option<Arc<str>> = blocks
                .iter()
                .any(|b| matches!(b, Block::ToolUse { .. }))
                .then(|| Arc::clone(&id));
            if key.is_some() {
                keys.clear();
            }
            let mut t = Text::default();
            for b in blocks {
                match b {
                    Block::Text(text) => t.push_str(text),
                    Block::ToolUse {
                        id: use_id,
                        name,
                        input,
                    } => {
                        if let Some(key) = &key {
                            keys.insert(use_id.clone().into_owned(), Arc::clone(key));
                        }
                        t.push(name);
                        match input {
                            Input::Written(written) => t.push_json_text(written),
                            Input::Value(value) => t.push_json(value),
                        }
                    }
                    Block::ToolResult { .. } => {}
                }
            }
            if let Content::Text(text) = &m.content {
                t.push_str(text);
            }
            let (content, estimate, written) = t.finish_deferring(estimator);
            let turn = TranscriptTurn::new(id, Role::Assistant, content, estimate)?
                .with_tool_call_id_opt(key);
            built.push_deferring(turn, TurnSource::Message(i), written);
            return Ok(());
        }
        let mut message_key: Option<Arc<str>> = None;
        let mut rest: Vec<usize> = Vec::new();
        let mut rest_text = Text::default();
        if let Content::Text(text) = &m.content {
            rest_text.push_str(text);
        }
        let results = blocks.iter().any(|b| matches!(b, Block::ToolResult { .. }));
        for (j, b) in blocks.iter().enumerate() {
            let Block::ToolResult {
                id: use_id,
                content,
            } = b
            else {
                if let Block::Text(text) = b {
                    rest_text.push_str(text);
                }
                rest.push(j);
                continue;
            };
            let key = keys.get(&**use_id).cloned();
            if message_key.is_none() {
                message_key.clone_from(&key);
            }
            let mut t = Text::default();
            for piece in content {
                t.push_str(piece);
            }
            push_result(built, (i, j), t, key, estimator)?;
        }
        if !results {
            // No results: the message is one user turn.
            let (content, estimate, written) = rest_text.finish_deferring(estimator);
            let turn = TranscriptTurn::new(id, Role::User, content, estimate)?;
            built.push_deferring(turn, TurnSource::Message(i), written);
            return Ok(());
        }
        push_rest(built, i, (rest, false), rest_text, message_key, estimator)
    }
}

/// The tool turn of result block `j` of message `i` (`m{i}.{j}`), in its call's exchange:
/// the same from either reading of the message.
pub(super) fn push_result(
    built: &mut Built,
    (i, j): (usize, usize),
    text: Text<'_>,
    key: Option<Arc<str>>,
    estimator: &dyn TokenEstimator,
) -> Result<(), FormatError> {
    let (content, estimate, written) = text.finish_deferring(estimator);
    let turn = TranscriptTurn::new(message_id(i, Some(j)), Role::Tool, content, estimate)?
        .with_tool_call_id_opt(key);
    built.push_deferring(
        turn,
        TurnSource::Block {
            message: i,
            block: j,
        },
        written,
    );
    Ok(())
}

/// The one user turn of the other blocks `rest` of a message holding results (none when it
/// has no others), named after the first of them and in the exchange of the message's first
/// result, pinned when one of them is carried untouched: the same from either reading of the
/// message.
pub(super) fn push_rest(
    built: &mut Built,
    i: usize,
    (rest, pinned): (Vec<usize>, bool),
    text: Text<'_>,
    key: Option<Arc<str>>,
    estimator: &dyn TokenEstimator,
) -> Result<(), FormatError> {
    let Some(&first) = rest.first() else {
        return Ok(());
    };
    let (content, estimate, written) = text.finish_deferring(estimator);
    let turn = TranscriptTurn::new(message_id(i, Some(first)), Role::User, content, estimate)?
        .with_tool_call_id_opt(key)
        .with_pinned(pinned);
    built.push_deferring(
        turn,
        TurnSource::Blocks {
            message: i,
            blocks: rest,
        },
        written,
    );
    Ok(())
}
