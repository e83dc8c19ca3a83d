//! A model call the proxy could not read or compact: why (the `reason` label of
//! `cutctx_serve_unreadable_total`), the error, and the log line that says so with codes,
//! rule names, path kinds and figures, never content or ids.

use cutctx_ops::OpsError;
use serde_json::{Map, Value, json};

/// Why a request could not be read or compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Its `Content-Encoding` is not one the proxy decodes, or the body does not decode.
    Encoding,
    /// The body is not UTF-8 JSON.
    NotJson,
    /// The body is JSON but not an object.
    NotObject,
    /// It has no message list with a message in it.
    NoMessages,
    /// The session refused it as invalid for its provider (a rule of the format).
    Rule,
    /// The session could not compact it (a window its untouchable part cannot fit, a
    /// summarizing policy with no summarizer).
    Compaction,
    /// The proxy itself failed (its store, its ledger).
    Internal,
}

impl Reason {
    /// Its label.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Encoding => "encoding",
            Self::NotJson => "not_json",
            Self::NotObject => "not_object",
            Self::NoMessages => "no_messages",
            Self::Rule => "rule",
            Self::Compaction => "compaction",
            Self::Internal => "internal",
        }
    }

    /// The reason for an error the session returned: a compaction failure, or a request the
    /// format's rules refuse.
    pub(crate) fn of_session(e: &OpsError) -> Self {
        if e.code.starts_with("COMPACTION_") {
            Self::Compaction
        } else {
            Self::Rule
        }
    }
}

/// A request that could not be read or compacted.
#[derive(Debug)]
pub(crate) struct Unreadable {
    /// Why.
    pub(crate) reason: Reason,
    /// The error (its message goes to the client with `--fail-closed`, never to the log).
    pub(crate) error: OpsError,
}

impl Unreadable {
    /// `error`, for `reason`.
    pub(crate) const fn new(reason: Reason, error: OpsError) -> Self {
        Self { reason, error }
    }

    /// The log line: the format, the endpoint's path, the reason, the error's code, and from
    /// its details the rule, the kind of JSON path (`messages[].content[]`, indices dropped),
    /// the index and the encoding, when present. Never its message, an id or any content.
    pub(crate) fn event(&self, format: &str, endpoint: &str, fail_closed: bool) -> Value {
        let mut line = Map::new();
        line.insert("event".into(), json!("unreadable"));
        line.insert("format".into(), json!(format));
        line.insert("path".into(), json!(endpoint));
        line.insert("reason".into(), json!(self.reason.as_str()));
        line.insert("code".into(), json!(self.error.code));
        let details = &self.error.details;
        if let Some(rule) = details
            .get("rule")
            .and_then(Value::as_str)
            .filter(|r| is_word(r))
        {
            line.insert("rule".into(), json!(rule));
        }
        if let Some(kind) = details
            .get("path")
            .and_then(Value::as_str)
            .and_then(path_kind)
        {
            line.insert("path_kind".into(), json!(kind));
        }
        for figure in ["index", "line", "column", "offset"] {
            if let Some(n) = details.get(figure).and_then(Value::as_u64) {
                line.insert(figure.into(), json!(n));
            }
        }
        if let Some(e) = details
            .get("encoding")
            .and_then(Value::as_str)
            .filter(|e| is_word(e))
        {
            line.insert("encoding".into(), json!(e));
        }
        line.insert("fail_closed".into(), json!(fail_closed));
        Value::Object(line)
    }
}

/// Whether `s` is a short word of the proxy's or a format's vocabulary (letters, digits,
/// `_`, `-`), as a rule's or an encoding's name is.
fn is_word(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The kind of a JSON path such as `messages[3].content[1]`: `messages[].content[]`. `None`
/// for a path with anything but field names and indices in it, so that nothing a client
/// wrote can reach the log through it.
fn path_kind(path: &str) -> Option<String> {
    let mut kind = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' if !in_index => {
                in_index = true;
                kind.push('[');
            }
            ']' if in_index => {
                in_index = false;
                kind.push(']');
            }
            '0'..='9' if in_index => {}
            c if !in_index && (c.is_ascii_alphanumeric() || c == '_' || c == '.') => kind.push(c),
            _ => return None,
        }
    }
    (!in_index && !kind.is_empty() && kind.len() <= 128).then_some(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_keeps_its_kind_and_nothing_else() {
        assert_eq!(
            path_kind("messages[3].content[12]").as_deref(),
            Some("messages[].content[]")
        );
        assert_eq!(
            path_kind("input[0].call_id").as_deref(),
            Some("input[].call_id")
        );
        assert_eq!(path_kind("messages[\"secret\"]"), None);
        assert_eq!(path_kind("messages[3"), None);
        assert_eq!(path_kind("a b"), None);
    }

    #[test]
    fn the_log_line_names_the_rule_and_path_kind_never_the_message_or_id() {
        let error = OpsError {
            code: "VALIDATION_ERROR",
            message: "call `secret_call` has no result: the weather in Paris".into(),
            details: cutctx_ops::details! {
                "rule" => "call_without_result", "path" => "messages[4].tool_calls[0]",
                "index" => 4_u64, "id" => "secret_call"
            },
        };
        let u = Unreadable::new(Reason::of_session(&error), error);
        let line = u.event("openai-chat", "/v1/chat/completions", false);
        assert_eq!(
            line,
            json!({"event": "unreadable", "format": "openai-chat", "path": "/v1/chat/completions",
                "reason": "rule", "code": "VALIDATION_ERROR", "rule": "call_without_result",
                "path_kind": "messages[].tool_calls[]", "index": 4, "fail_closed": false})
        );
        assert!(!line.to_string().contains("secret"));
        let budget = OpsError {
            code: "COMPACTION_BUDGET_UNSATISFIABLE",
            message: String::new(),
            details: cutctx_ops::details! {},
        };
        assert_eq!(Reason::of_session(&budget), Reason::Compaction);
    }
}
