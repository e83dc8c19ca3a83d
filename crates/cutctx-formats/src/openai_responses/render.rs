//! The Responses rendering: a compacted view's items back to the provider's messages.

use super::*;

/// Renders the view items of a Responses transcript: each kept item as it was, a masked
/// output with the stub as its `output` (a message, as its `content`), each summary a new
/// item; `instructions` stays only when its turn does.
pub(crate) fn render(
    document: &Value,
    listed: Option<Source<'_>>,
    turns: &[TranscriptTurn],
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut doc = crate::mapping::shell(document, crate::list_key(FORMAT));
    let mut out: Vec<Piece> = Vec::with_capacity(items.len());
    let mut instructions_kept = false;
    let mut only_input_text = true;
    for item in items {
        let item = item?;
        match &item {
            ViewItem::Source { position, stub } => match sources.get(*position) {
                Some(TurnSource::System) => {
                    instructions_kept = true;
                    if let (Some(stub), Value::Object(map)) = (stub, &mut doc) {
                        map.insert("instructions".into(), Value::from(&**stub));
                    }
                }
                Some(TurnSource::InputText) => {
                    let text = match (stub, document.get(crate::list_key(FORMAT))) {
                        (Some(stub), _) => Value::from(&**stub),
                        (None, Some(v)) => v.clone(),
                        (None, None) => Value::from(""),
                    };
                    only_input_text &= stub.is_none();
                    let mut m = Map::new();
                    m.insert("role".into(), Value::from("user"));
                    m.insert("content".into(), text);
                    out.push(Piece::New(Value::Object(m)));
                }
                Some(TurnSource::Message(i)) => {
                    only_input_text = false;
                    let Some(list) = listed.filter(|l| l.has(*i)) else {
                        return Err(crate::mapping::bad_position(*position));
                    };
                    let piece = match stub {
                        None => Piece::Kept(*i),
                        Some(stub) => {
                            let role = turns.get(*position).map(TranscriptTurn::role);
                            let key = masked_key(*i, role, list)?;
                            Piece::masked(*i, key, stub, *position)
                        }
                    };
                    out.push(piece);
                }
                _ => return Err(crate::mapping::bad_position(*position)),
            },
            ViewItem::Summary { text } => {
                only_input_text = false;
                out.push(Piece::New(summary_item(text)));
            }
        }
    }
    if !instructions_kept && let Value::Object(map) = &mut doc {
        map.remove("instructions");
    }
    if listed.is_none() && only_input_text && out.len() == 1 {
        // The input string, kept: the document as it was.
        return Ok(Rendered {
            shell: doc,
            list: None,
        });
    }
    if out.is_empty() {
        out.push(Piece::New(crate::mapping::lead_in_message()));
    }
    Ok(Rendered {
        shell: doc,
        list: Some(out),
    })
}

/// The field of item `i` the stub replaces: an output's `output`, a message's `content`. A
/// tool turn is always an output, so only other turns are read again to know.
pub(super) fn masked_key(
    i: usize,
    role: Option<Role>,
    list: Source<'_>,
) -> Result<&'static str, FormatError> {
    if role == Some(Role::Tool) {
        return Ok("output");
    }
    let original = list.get(i).ok_or_else(|| crate::mapping::bad_position(i))?;
    match kind(i, &original)? {
        Kind::Output(..) => Ok("output"),
        Kind::Prompt(_) | Kind::Answer => Ok("content"),
        _ => Err(FormatError::unsupported(
            format!(
                "Item {i} is masked, but only messages and tool outputs have a payload a stub \
                 can replace."
            ),
            cutctx_model::details! { "index" => i, "format" => FORMAT.as_str() },
        )),
    }
}

/// A summary, as Responses spells it: an assistant message item with string content.
pub(super) fn summary_item(text: &str) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::from("message"));
    m.insert("role".into(), Value::from("assistant"));
    m.insert("content".into(), Value::from(text));
    Value::Object(m)
}
