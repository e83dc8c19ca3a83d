//! The Chat rendering: a compacted view's items back to the provider's messages.

use super::*;

/// Renders the view items of a Chat transcript: each kept message as it was, a masked one
/// with the stub as its `content`, each summary a new message.
pub(crate) fn render(
    document: &Value,
    list: Source<'_>,
    sources: &[TurnSource],
    items: impl ExactSizeIterator<Item = Result<ViewItem, FormatError>>,
) -> Result<Rendered, FormatError> {
    let mut out: Vec<Piece> = Vec::with_capacity(items.len());
    for item in items {
        let item = item?;
        match &item {
            ViewItem::Source { position, stub } => {
                let Some(TurnSource::Message(i)) = sources.get(*position) else {
                    return Err(crate::mapping::bad_position(*position));
                };
                if !list.has(*i) {
                    return Err(crate::mapping::bad_position(*position));
                }
                out.push(match stub {
                    None => Piece::Kept(*i),
                    Some(stub) => Piece::masked(*i, "content", stub, *position),
                });
            }
            ViewItem::Summary { text, .. } => out.push(Piece::New(summary_message(text))),
        }
    }
    if out.is_empty() {
        out.push(Piece::New(crate::mapping::lead_in_message()));
    }
    Ok(Rendered {
        shell: crate::mapping::shell(document, crate::list_key(FORMAT)),
        list: Some(out),
    })
}

/// A summary, as Chat spells it: an assistant message with string content.
pub(super) fn summary_message(text: &str) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), Value::from("assistant"));
    m.insert("content".into(), Value::from(text));
    Value::Object(m)
}

/// `original` with `key` set to `value`, every other field as it was.
pub(crate) fn with_field(original: &Value, key: &str, value: Value) -> Value {
    match original {
        // The replaced field is not cloned: it is a tool result's payload, the bulk of it.
        Value::Object(map) => {
            let mut map: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            map.insert(key.to_owned(), value);
            Value::Object(map)
        }
        other => other.clone(),
    }
}
