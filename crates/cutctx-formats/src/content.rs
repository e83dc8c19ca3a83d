//! What a turn built from a provider message says, and what it is estimated at.
//!
//! A turn's content is the text the model would read (text parts, tool-call names and
//! arguments, tool outputs, thinking and reasoning summaries), pieces joined by a newline, with
//! a marker such as `[image]` for each media part. Its estimate is the estimator's count for the
//! text alone plus [`MEDIA_TOKEN_ESTIMATE`] for each media part.

use std::sync::{Arc, LazyLock};

use cutctx_policies::TokenEstimator;
use serde_json::Value;

use crate::hand_read::{Str, Written};

/// The fixed estimate of one image, file, document or audio part, in tokens.
///
/// 765 is what OpenAI bills a 1024 × 1024 image at high detail (85 + 4 × 170), and close to
/// what Anthropic bills a 1,000 × 750 image (about width × height / 750). Media sizes are not
/// read: a fixed figure keeps estimates stable and independent of the encoding.
pub const MEDIA_TOKEN_ESTIMATE: u64 = 765;

/// The content of every turn whose content is left in the request: one allocation, shared.
static EMPTY: LazyLock<Arc<str>> = LazyLock::new(|| Arc::from(""));

/// Decodes a written piece onto `out`. [`Lex::written`](crate::hand_read::Lex::written) checked
/// that it decodes: a piece that does not is a broken invariant.
fn decode_written(piece: Written<'_>, out: &mut String) {
    let decoded = piece.decode_onto(out);
    debug_assert!(decoded.is_some(), "a written piece was checked to decode");
}

/// The text of one turn under construction.
///
/// Most turns are one piece of the message (a tool result, a user's text): that piece is held
/// borrowed until a second one comes, so its text is copied once, into the turn's content.
#[derive(Debug, Default)]
pub(crate) struct Text<'a> {
    /// The only piece so far, borrowed; `text` is empty while it is set.
    single: Option<&'a str>,
    /// The only piece so far, left as the request writes it (see [`Written`]): decoded only
    /// when another piece joins it, else the turn's content is read from the request when
    /// needed. `text` is empty while it is set.
    written: Option<Written<'a>>,
    /// What the model reads, pieces joined by `\n`.
    text: String,
    /// The same with media markers (the turn's content), once there is a marker; until then
    /// the content is `text` itself, and a turn without media (most turns, tool results
    /// among them) builds its text once instead of twice.
    content: Option<String>,
    /// How many media parts.
    media: u64,
}

impl<'a> Text<'a> {
    pub(crate) fn push(&mut self, piece: &'a str) {
        if piece.is_empty() {
            return;
        }
        if self.is_unstarted() {
            self.single = Some(piece);
            return;
        }
        self.append(piece);
    }

    /// A string of a message, decoded or as written.
    pub(crate) fn push_str(&mut self, piece: &'a Str<'_>) {
        match piece {
            Str::Decoded(text) => self.push(text),
            Str::Written(written) => self.push_written(*written),
        }
    }

    /// A piece as the request writes it: held so while it is the only one.
    pub(crate) fn push_written(&mut self, piece: Written<'a>) {
        if piece.is_empty() {
            return;
        }
        if self.is_unstarted() {
            self.written = Some(piece);
            return;
        }
        self.own();
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        let from = self.text.len();
        decode_written(piece, &mut self.text);
        if let Some(content) = &mut self.content {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&self.text[from..]);
        }
    }

    /// Whether nothing was pushed yet.
    fn is_unstarted(&self) -> bool {
        self.single.is_none()
            && self.written.is_none()
            && self.text.is_empty()
            && self.content.is_none()
    }

    /// The borrowed or written piece, copied into `text` before another joins it.
    fn own(&mut self) {
        if let Some(single) = self.single.take() {
            self.text.push_str(single);
        }
        if let Some(written) = self.written.take() {
            decode_written(written, &mut self.text);
        }
    }

    fn append(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.own();
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(piece);
        if let Some(content) = &mut self.content {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(piece);
        }
    }

    fn push_media(&mut self, marker: &str) {
        self.own();
        self.media = self.media.saturating_add(1);
        let content = self.content.get_or_insert_with(|| self.text.clone());
        if !content.is_empty() {
            content.push('\n');
        }
        content.push_str(marker);
    }

    /// A JSON value the model reads verbatim (arguments given as an object, unknown parts).
    pub(crate) fn push_json(&mut self, v: &'a Value) {
        match v {
            Value::Null => {}
            Value::String(s) => self.push(s),
            other => self.append(&other.to_string()),
        }
    }

    /// An object as [`Text::push_json`] writes it, given written already (by
    /// [`crate::tool_input::plain_object`]).
    pub(crate) fn push_json_text(&mut self, written: &str) {
        self.append(written);
    }

    /// Message content: a string, an array of parts, or null.
    pub(crate) fn push_content(&mut self, v: &'a Value) {
        match v {
            Value::Null => {}
            Value::String(s) => self.push(s),
            Value::Array(parts) => {
                for part in parts {
                    self.push_part(part);
                }
            }
            other => self.push_json(other),
        }
    }

    /// One content part or block, of any of the three formats.
    pub(crate) fn push_part(&mut self, part: &'a Value) {
        let Value::Object(map) = part else {
            self.push_json(part);
            return;
        };
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| map.get(key).and_then(Value::as_str);
        match kind {
            "text" | "input_text" | "output_text" | "summary_text" | "reasoning_text" => {
                self.push(text("text").unwrap_or(""));
            }
            "refusal" => self.push(text("refusal").unwrap_or("")),
            "thinking" => self.push(text("thinking").unwrap_or("")),
            // Encrypted: the provider expands or strips it; its size says little.
            "redacted_thinking" => {}
            "image" | "image_url" | "input_image" => self.push_media("[image]"),
            "input_audio" | "audio" => self.push_media("[audio]"),
            "file" | "input_file" | "document" => {
                let source = map.get("source");
                let source_text = source
                    .filter(|s| s.get("type").and_then(Value::as_str) == Some("text"))
                    .and_then(|s| s.get("data"))
                    .and_then(Value::as_str);
                match source_text.or_else(|| text("text")) {
                    Some(t) => self.push(t),
                    None => self.push_media("[file]"),
                }
            }
            "tool_use" | "server_tool_use" | "mcp_tool_use" => {
                self.push(text("name").unwrap_or(""));
                self.push_json(map.get("input").unwrap_or(&Value::Null));
            }
            "tool_result" | "mcp_tool_result" => {
                self.push_content(map.get("content").unwrap_or(&Value::Null));
            }
            _ => match text("text") {
                Some(t) => self.push(t),
                // An unknown part: count what it says, as JSON (conservative).
                None => self.push_json(part),
            },
        }
    }

    /// The turn's content and its estimate under `estimator`; with the piece left as written
    /// when it is the only one and the estimate needs only its length (the content is then
    /// empty, to be read from the request).
    pub(crate) fn finish_deferring(
        mut self,
        estimator: &dyn TokenEstimator,
    ) -> (Arc<str>, u64, Option<Written<'a>>) {
        if let Some(written) = self.written
            && let Some(estimate) = estimator.estimate_chars(written.chars())
        {
            return (Arc::clone(&EMPTY), estimate, Some(written));
        }
        self.own();
        let (content, estimate) = self.finish(estimator);
        (content, estimate, None)
    }

    /// The turn's content and its estimate under `estimator`.
    pub(crate) fn finish(mut self, estimator: &dyn TokenEstimator) -> (Arc<str>, u64) {
        self.own();
        let read = self.single.unwrap_or(&self.text);
        let estimate = estimator
            .estimate_tokens(read)
            .saturating_add(self.media.saturating_mul(MEDIA_TOKEN_ESTIMATE));
        let content: Arc<str> = match (self.single, self.content) {
            (Some(single), _) => Arc::from(single),
            (None, Some(content)) => Arc::from(content),
            (None, None) => Arc::from(self.text),
        };
        (content, estimate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cutctx_policies::CharRatioEstimator;
    use serde_json::json;

    #[test]
    fn media_parts_are_markers_in_content_and_a_fixed_figure_in_the_estimate() {
        let parts = json!([
            {"type": "text", "text": "abcd"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "efgh"}
        ]);
        let mut t = Text::default();
        t.push_content(&parts);
        let (content, estimate) = t.finish(&CharRatioEstimator::default());
        assert_eq!(&*content, "abcd\n[image]\nefgh");
        // "abcd\nefgh" is 9 code points: 3 tokens at 4 per token.
        assert_eq!(estimate, 3 + MEDIA_TOKEN_ESTIMATE);
    }

    #[test]
    fn unknown_parts_count_as_their_json() {
        let part = json!({"type": "mystery", "n": 1});
        let mut t = Text::default();
        t.push_part(&part);
        let (content, _) = t.finish(&CharRatioEstimator::default());
        assert_eq!(&*content, r#"{"n":1,"type":"mystery"}"#);
    }

    #[test]
    fn a_single_piece_is_the_content_and_joins_what_follows() {
        let estimator = CharRatioEstimator::default();
        let mut t = Text::default();
        t.push("result");
        assert_eq!(&*t.finish(&estimator).0, "result");
        let image = json!({"type": "image"});
        let mut t = Text::default();
        t.push("result");
        t.push_part(&image);
        t.push("after");
        let (content, estimate) = t.finish(&estimator);
        assert_eq!(&*content, "result\n[image]\nafter");
        // "result\nafter" is 12 code points: 3 tokens at 4 per token.
        assert_eq!(estimate, 3 + MEDIA_TOKEN_ESTIMATE);
    }
}
