//! The Anthropic rendering: a compacted view's items back to the provider's messages.

use super::*;

/// One message of the output, before roles are reconciled.
pub(super) struct Out {
    pub(super) piece: Piece,
    /// Whose message it is: only user or assistant messages are merged with their like.
    pub(super) side: Kind,
    /// A pinned message (one carrying a compaction block, a tool-set change or a block type
    /// cutctx does not know among them) is never merged: it leaves as it came.
    pub(super) pinned: bool,
    /// The input message it starts with, if it starts with one (not with a summary).
    pub(super) first: Option<usize>,
    /// The input message it ends with, if it ends with one.
    pub(super) last: Option<usize>,
}

/// A user message being rebuilt from its blocks, as its turns come.
pub(super) struct Pending {
    pub(super) message: usize,
    /// The position of one of the message's turns, the first that came.
    pub(super) position: usize,
    pub(super) blocks: BTreeMap<usize, Part>,
    /// How many of the message's turns came.
    pub(super) turns: usize,
    /// Whether one of them is pinned.
    pub(super) pinned: bool,
}

/// One block of a pending message.
pub(super) enum Part {
    /// Block `j` of the message, the turn at position `turn`, as it was, or with the stub as
    /// its `content`.
    Block { stub: Option<Arc<str>>, turn: usize },
    /// The stub standing for the message's blocks other than results.
    Stub(Arc<str>),
}

/// Renders the view items of an Anthropic transcript: each kept message as it was, a user
/// message some of whose blocks changed rebuilt from them, each summary a new user message,
/// messages of one role that compaction made meet merged; `system` stays only when its turn
/// does.
pub(crate) fn render(
    document: &Value,
    list: Source<'_>,
    turns: &[TranscriptTurn],
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut doc = crate::mapping::shell(document, crate::list_key(FORMAT));
    let mut system_kept = false;
    let mut outs: Vec<Out> = Vec::with_capacity(items.len());
    let mut pending: Option<Pending> = None;
    for item in items {
        let item = item?;
        let (position, stub) = match &item {
            ViewItem::Summary { text } => {
                flush(list, sources, &mut pending, &mut outs);
                let mut m = Map::new();
                m.insert("role".into(), Value::from("user"));
                m.insert("content".into(), Value::from(&**text));
                outs.push(Out {
                    piece: Piece::New(Value::Object(m)),
                    side: Kind::User,
                    pinned: false,
                    first: None,
                    last: None,
                });
                continue;
            }
            ViewItem::Source { position, stub } => (*position, stub.as_ref()),
        };
        match sources.get(position) {
            Some(TurnSource::System) => {
                system_kept = true;
                if let (Some(stub), Value::Object(map)) = (stub, &mut doc) {
                    map.insert("system".into(), Value::from(&**stub));
                }
            }
            Some(TurnSource::Message(i)) => {
                flush(list, sources, &mut pending, &mut outs);
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                // A message turn is an assistant turn exactly when the message is one, and a
                // system turn when it is a system message or one of a role the format does not
                // name (which the message itself tells apart).
                let side = match turns.get(position).map(TranscriptTurn::role) {
                    Some(Role::Assistant) => Kind::Assistant,
                    Some(Role::System) => {
                        list.get(*i).map_or(Kind::Opaque, |m| Kind::of_message(&m))
                    }
                    _ => Kind::User,
                };
                let assistant = side == Kind::Assistant;
                let piece = match stub {
                    None => Piece::Kept(*i),
                    Some(stub) => {
                        if assistant {
                            let original = list
                                .get(*i)
                                .ok_or_else(|| crate::mapping::bad_position(position))?;
                            maskable(*i, &original)?;
                        }
                        Piece::masked(*i, "content", stub, position)
                    }
                };
                outs.push(Out {
                    side,
                    pinned: turns.get(position).is_some_and(TranscriptTurn::pinned),
                    piece,
                    first: Some(*i),
                    last: Some(*i),
                });
            }
            Some(TurnSource::Block { message: i, block }) => {
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                let p = open_pending(list, sources, &mut pending, &mut outs, *i, position);
                p.turns += 1;
                p.pinned |= turns.get(position).is_some_and(TranscriptTurn::pinned);
                p.blocks.insert(
                    *block,
                    Part::Block {
                        stub: stub.cloned(),
                        turn: position,
                    },
                );
            }
            Some(TurnSource::Blocks { message: i, blocks }) => {
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(position));
                }
                let p = open_pending(list, sources, &mut pending, &mut outs, *i, position);
                p.turns += 1;
                p.pinned |= turns.get(position).is_some_and(TranscriptTurn::pinned);
                match stub {
                    Some(stub) => {
                        if let Some(&first) = blocks.first() {
                            p.blocks.insert(first, Part::Stub(Arc::clone(stub)));
                        }
                    }
                    None => {
                        for &j in blocks {
                            p.blocks.insert(
                                j,
                                Part::Block {
                                    stub: None,
                                    turn: position,
                                },
                            );
                        }
                    }
                }
            }
            _ => return Err(crate::mapping::bad_position(position)),
        }
    }
    flush(list, sources, &mut pending, &mut outs);
    if !system_kept && let Value::Object(map) = &mut doc {
        map.remove("system");
    }
    let messages = lead_ins(reconcile(outs, list));
    Ok(Rendered {
        shell: doc,
        list: Some(messages.into_iter().map(|o| o.piece).collect()),
    })
}

/// The pending rebuilt message for message `i`, whose turn at `position` came, flushing
/// another one first.
pub(super) fn open_pending<'p>(
    list: Source<'_>,
    sources: &[TurnSource],
    pending: &'p mut Option<Pending>,
    outs: &mut Vec<Out>,
    i: usize,
    position: usize,
) -> &'p mut Pending {
    if pending.as_ref().is_some_and(|p| p.message != i) {
        flush(list, sources, pending, outs);
    }
    pending.get_or_insert_with(|| Pending {
        message: i,
        position,
        blocks: BTreeMap::new(),
        turns: 0,
        pinned: false,
    })
}

/// Emits the pending message: when every turn of it came and none stands for its other
/// blocks with a stub, the message itself with its masked results patched; else the original
/// with the present blocks, in order.
pub(super) fn flush(
    list: Source<'_>,
    sources: &[TurnSource],
    pending: &mut Option<Pending>,
    outs: &mut Vec<Out>,
) {
    let Some(p) = pending.take() else {
        return;
    };
    // The turns of one message are neighbours: counted from the one that came, outwards (a
    // search of the whole list for the message's first and last turn, twice for each
    // message, cost more than rendering it).
    let of_message = |s: &TurnSource| s.message() == Some(p.message);
    let after = sources
        .get(p.position..)
        .map_or(0, |s| s.iter().take_while(|s| of_message(s)).count());
    let before = sources
        .get(..p.position)
        .map_or(0, |s| s.iter().rev().take_while(|s| of_message(s)).count());
    let all = before + after;
    let whole = p.turns == all && p.blocks.values().all(|b| matches!(b, Part::Block { .. }));
    let piece = if whole {
        let patches: Vec<Patch> = p
            .blocks
            .iter()
            .filter_map(|(&j, b)| match b {
                Part::Block {
                    stub: Some(stub),
                    turn,
                } => Some(Patch {
                    block: Some(j),
                    key: "content",
                    stub: Arc::clone(stub),
                    at: None,
                    turn: Some(*turn),
                }),
                _ => None,
            })
            .collect();
        if patches.is_empty() {
            Piece::Kept(p.message)
        } else {
            Piece::Masked {
                index: p.message,
                patches,
            }
        }
    } else {
        let original = list.get(p.message);
        let original = original.as_deref().unwrap_or(&Value::Null);
        let all_blocks = blocks(original);
        let present: Vec<Value> = p
            .blocks
            .into_iter()
            .filter_map(|(j, part)| match part {
                Part::Block { stub: None, .. } => all_blocks.get(j).cloned(),
                Part::Block {
                    stub: Some(stub), ..
                } => all_blocks
                    .get(j)
                    .map(|b| with_field(b, "content", Value::from(&*stub))),
                Part::Stub(stub) => {
                    let mut text = Map::new();
                    text.insert("type".into(), Value::from("text"));
                    text.insert("text".into(), Value::from(&*stub));
                    Some(Value::Object(text))
                }
            })
            .collect();
        Piece::New(with_field(original, "content", Value::Array(present)))
    };
    outs.push(Out {
        piece,
        side: Kind::User,
        pinned: p.pinned,
        first: Some(p.message),
        last: Some(p.message),
    });
}

/// Whether message `i` may be masked: not an assistant message with blocks other than text.
pub(super) fn maskable(i: usize, original: &Value) -> Result<(), FormatError> {
    let assistant = original.get("role").and_then(Value::as_str) == Some("assistant");
    let plain = blocks(original).iter().all(|b| block_type(b) == "text");
    if assistant && !plain {
        return Err(FormatError::unsupported(
            format!(
                "Message {i} is masked, but it is an assistant message with blocks other than \
                 text (tool uses or thinking), which a stub cannot replace."
            ),
            cutctx_model::details! { "index" => i, "format" => FORMAT.as_str() },
        ));
    }
    Ok(())
}

/// Merges consecutive messages of one role that did not meet in the input.
pub(super) fn reconcile(mut outs: Vec<Out>, list: Source<'_>) -> Vec<Out> {
    // In place (a request's worth of messages is not held twice): a message merged into the
    // one kept before it is removed.
    outs.dedup_by(|out, prev| {
        let met_in_input = matches!(
            (prev.last, out.first),
            (Some(last), Some(first)) if last + 1 == first
        );
        let mergeable =
            matches!(out.side, Kind::User | Kind::Assistant) && !out.pinned && !prev.pinned;
        if prev.side != out.side || !mergeable || met_in_input {
            return false;
        }
        let next = Out {
            piece: std::mem::replace(&mut out.piece, Piece::New(Value::Null)),
            ..*out
        };
        merge(prev, next, list);
        true
    });
    outs
}

/// The messages with the user message [`LEAD_IN_TEXT`](crate::LEAD_IN_TEXT) put where the
/// provider needs a user message that compaction removed: first, when the first message left
/// is an assistant or system message (or none is left), and before a mid-conversation system
/// message that would otherwise follow an assistant message.
pub(super) fn lead_ins(outs: Vec<Out>) -> Vec<Out> {
    let lead_in = || Out {
        piece: Piece::New(crate::mapping::lead_in_message()),
        side: Kind::User,
        pinned: false,
        first: None,
        last: None,
    };
    let mut messages = Vec::with_capacity(outs.len() + 1);
    if outs
        .first()
        .is_none_or(|m| matches!(m.side, Kind::Assistant | Kind::System))
    {
        messages.push(lead_in());
    }
    for out in outs {
        let after_assistant = messages
            .last()
            .is_some_and(|m: &Out| matches!(m.side, Kind::Assistant | Kind::Opaque));
        if out.side == Kind::System && after_assistant {
            messages.push(lead_in());
        }
        messages.push(out);
    }
    messages
}

/// A piece as a value: merging looks inside the messages it joins. A kept or masked piece
/// names a message of `list`, which the rendering made it from.
pub(super) fn value_of(piece: Piece, list: Source<'_>) -> Value {
    match piece {
        Piece::New(v) => v,
        Piece::Kept(i) => list
            .get(i)
            .map(Cow::into_owned)
            .expect("a kept piece names a message of its list"),
        Piece::Masked { index, patches } => list
            .get(index)
            .map(|o| crate::mapping::patched(&o, &patches))
            .expect("a masked piece names a message of its list"),
    }
}

/// Appends `next`'s blocks to `prev`; fields `prev` lacks are taken from `next`.
pub(super) fn merge(prev: &mut Out, next: Out, list: Source<'_>) {
    let mut value = value_of(
        std::mem::replace(&mut prev.piece, Piece::New(Value::Null)),
        list,
    );
    let next_value = value_of(next.piece, list);
    let mut content = content_blocks(&value);
    content.extend(content_blocks(&next_value));
    if let (Value::Object(p), Value::Object(n)) = (&mut value, next_value) {
        for (k, v) in n {
            if k != "content" && !p.contains_key(&k) {
                p.insert(k, v);
            }
        }
        p.insert("content".into(), Value::Array(content));
    }
    prev.piece = Piece::New(value);
    prev.last = next.last;
}

/// A message's content as blocks: string content becomes one text block.
pub(super) fn content_blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::Array(b)) => b.clone(),
        Some(Value::String(s)) if !s.is_empty() => {
            let mut text = Map::new();
            text.insert("type".into(), Value::from("text"));
            text.insert("text".into(), Value::from(s.as_str()));
            vec![Value::Object(text)]
        }
        _ => Vec::new(),
    }
}
