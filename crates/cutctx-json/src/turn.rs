//! The seven-key turn object, the one place its shape is written.

use crate::{Sink, Writer};

/// A transcript turn's fields, as [`write_turn`] takes them: the model sits above this crate,
/// so its turn arrives as plain values.
///
/// ```
/// use cutctx_json::{Style, TurnFields, Writer, write_turn};
/// let mut out = String::new();
/// let turn = TurnFields {
///     content: "hi",
///     metadata: [("k", "v")],
///     pinned: false,
///     role: "user",
///     token_estimate: 1,
///     tool_call_id: None,
///     turn_id: "u1",
/// };
/// write_turn(&mut Writer::new(&mut out, Style::CANONICAL), turn);
/// assert_eq!(
///     out,
///     r#"{"content":"hi","metadata":{"k":"v"},"pinned":false,"role":"user","token_estimate":1,"tool_call_id":null,"turn_id":"u1"}"#
/// );
/// ```
#[derive(Debug, Clone)]
pub struct TurnFields<'a, M> {
    /// The text.
    pub content: &'a str,
    /// The metadata entries, in code point order of their keys.
    pub metadata: M,
    /// Whether the turn is pinned.
    pub pinned: bool,
    /// The role's wire name.
    pub role: &'a str,
    /// The token estimate.
    pub token_estimate: u64,
    /// The tool call id, if any.
    pub tool_call_id: Option<&'a str>,
    /// The id.
    pub turn_id: &'a str,
}

/// Writes a turn as its JSON object: all seven keys, in code point order (the order both the
/// reference's `sort_keys=True` and json-c14n give), with the style's separators.
pub fn write_turn<'a, S, M>(w: &mut Writer<'_, S>, turn: TurnFields<'a, M>)
where
    S: Sink + ?Sized,
    M: IntoIterator<Item = (&'a str, &'a str)>,
{
    let content = turn.content;
    write_turn_with(w, turn, |w| w.str(content));
}

/// As [`write_turn`], the content's value written by `content` in place of
/// [`TurnFields::content`]: for a writer that holds the content as a JSON string literal
/// already (a request's text, copied), where decoding it to write it again would only cost.
///
/// ```
/// use cutctx_json::{Style, TurnFields, Writer, write_turn_with};
/// let mut out = String::new();
/// let turn = TurnFields {
///     content: "",
///     metadata: [],
///     pinned: false,
///     role: "tool",
///     token_estimate: 2,
///     tool_call_id: Some("c"),
///     turn_id: "t1",
/// };
/// write_turn_with(&mut Writer::new(&mut out, Style::CANONICAL), turn, |w| {
///     w.raw(r#""as \"written\"""#)
/// });
/// assert!(out.starts_with(r#"{"content":"as \"written\"","metadata":{}"#));
/// ```
pub fn write_turn_with<'a, S, M>(
    w: &mut Writer<'_, S>,
    turn: TurnFields<'a, M>,
    content: impl FnOnce(&mut Writer<'_, S>),
) where
    S: Sink + ?Sized,
    M: IntoIterator<Item = (&'a str, &'a str)>,
{
    let key = |w: &mut Writer<'_, S>, first: bool, name: &str| {
        if !first {
            w.item_separator();
        }
        w.raw(name);
        w.key_separator();
    };
    w.raw("{");
    key(w, true, "\"content\"");
    content(w);
    key(w, false, "\"metadata\"");
    w.str_map(turn.metadata);
    key(w, false, "\"pinned\"");
    w.bool(turn.pinned);
    key(w, false, "\"role\"");
    w.str(turn.role);
    key(w, false, "\"token_estimate\"");
    w.u64(turn.token_estimate);
    key(w, false, "\"tool_call_id\"");
    w.opt_str(turn.tool_call_id);
    key(w, false, "\"turn_id\"");
    w.str(turn.turn_id);
    w.raw("}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Style;

    fn turn(style: Style, tool_call_id: Option<&str>) -> String {
        let mut out = String::new();
        let fields = TurnFields {
            content: "a\"\n",
            metadata: [("a", "1"), ("é", "2")],
            pinned: true,
            role: "tool",
            token_estimate: 42,
            tool_call_id,
            turn_id: "t",
        };
        write_turn(&mut Writer::new(&mut out, style), fields);
        out
    }

    #[test]
    fn all_seven_keys_in_code_point_order_with_the_styles_separators() {
        assert_eq!(
            turn(Style::CANONICAL, Some("c1")),
            "{\"content\":\"a\\\"\\n\",\"metadata\":{\"a\":\"1\",\"é\":\"2\"},\"pinned\":true,\
             \"role\":\"tool\",\"token_estimate\":42,\"tool_call_id\":\"c1\",\"turn_id\":\"t\"}"
        );
        assert_eq!(
            turn(Style::CHAIN_BODY, None),
            "{\"content\": \"a\\\"\\n\", \"metadata\": {\"a\": \"1\", \"é\": \"2\"}, \
             \"pinned\": true, \"role\": \"tool\", \"token_estimate\": 42, \
             \"tool_call_id\": null, \"turn_id\": \"t\"}"
        );
    }

    #[test]
    fn the_turn_parses_as_json_with_every_field() {
        let text = turn(Style::C14N, None);
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(v["content"], "a\"\n");
        assert_eq!(v["metadata"]["é"], "2");
        assert_eq!(v["token_estimate"], 42);
        assert!(v["tool_call_id"].is_null());
    }
}
