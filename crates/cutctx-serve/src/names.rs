//! The name a request gives its conversation, read from what clients already send, in this
//! order: `x-cutctx-session`, `x-session-id`, the `session_id` header (Codex), the session id
//! inside Anthropic's `metadata.user_id` (Claude Code), the Responses `prompt_cache_key`
//! (Codex). A request with none is found by its history instead ([`crate::sessions`]).
//!
//! A name is opaque: only its SHA-256 digest is kept (as the store key), and it is never
//! logged. A source that is present but malformed is skipped for the next one, never an error.

use cutctx_ops::Format;
use hyper::header::HeaderMap;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Where a session's name came from (or that it had none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Source {
    /// The proxy's own `x-cutctx-session` header.
    Cutctx,
    /// An `x-session-id` header.
    SessionIdHeader,
    /// Codex's `session-id` header (`session_id` in earlier versions).
    CodexHeader,
    /// The `session_id` in Claude Code's `metadata.user_id`.
    ClaudeMetadata,
    /// Codex's Responses `prompt_cache_key`.
    PromptCacheKey,
    /// No name: the stored history the request extends.
    History,
}

impl Source {
    /// Its label in metrics and logs.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Cutctx => "x-cutctx-session",
            Self::SessionIdHeader => "x-session-id",
            Self::CodexHeader => "session_id",
            Self::ClaudeMetadata => "metadata.user_id",
            Self::PromptCacheKey => "prompt_cache_key",
            Self::History => "history",
        }
    }
}

/// A conversation's name, hashed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Name {
    /// Where it came from.
    pub(crate) source: Source,
    /// The hex SHA-256 of the name (and, for a name the client chose for itself, the model):
    /// what the store keys the session by.
    pub(crate) key: String,
}

/// The name `request` (of `format`, with `headers`) gives its conversation, the first source
/// that holds a well-formed one.
pub(crate) fn name(format: Format, headers: &HeaderMap, request: &Value) -> Option<Name> {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.trim().is_empty())
            .map(str::to_owned)
    };
    if let Some(n) = header("x-cutctx-session") {
        // Named on purpose for the proxy: one session whatever the model.
        return Some(Name {
            source: Source::Cutctx,
            key: digest(None, &n),
        });
    }
    let found = header("x-session-id")
        .map(|n| (Source::SessionIdHeader, n))
        // Codex 0.171 writes `session-id`; earlier versions `session_id`.
        .or_else(|| {
            header("session-id")
                .or_else(|| header("session_id"))
                .map(|n| (Source::CodexHeader, n))
        })
        .or_else(|| claude_session(format, request).map(|n| (Source::ClaudeMetadata, n)))
        .or_else(|| prompt_cache_key(format, request).map(|n| (Source::PromptCacheKey, n)))?;
    // A client's own session id also names its side calls and sub-agents (Claude Code sends
    // one id for all of them); those on another model keep sessions of their own instead of
    // restarting the main one at every turn. The provider's cache is per model anyway.
    let model = request.get("model").and_then(Value::as_str).unwrap_or("");
    Some(Name {
        source: found.0,
        key: digest(Some(model), &found.1),
    })
}

/// SHA-256 of `name` within `scope` (a model, or none for a name given to the proxy), in
/// hex; the scope is tagged and length-prefixed so that no two pairs collide.
fn digest(scope: Option<&str>, name: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"cutctx-serve session name\0");
    match scope {
        None => h.update([0]),
        Some(s) => {
            h.update([1]);
            h.update((s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
    }
    h.update(name.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The session id in an Anthropic request's `metadata.user_id`: Claude Code's JSON string
/// (`{"device_id":…,"account_uuid":…,"session_id":…}`), or its older
/// `user_<hash>_account_<uuid>_session_<uuid>`. Any other user id (an application's own user
/// id names a person, not a conversation) names nothing.
fn claude_session(format: Format, request: &Value) -> Option<String> {
    if format != Format::Anthropic {
        return None;
    }
    let user = request.get("metadata")?.get("user_id")?.as_str()?;
    if user.starts_with('{') {
        let inner: Value = serde_json::from_str(user).ok()?;
        let id = inner.get("session_id")?.as_str()?;
        return (!id.trim().is_empty()).then(|| id.to_owned());
    }
    let (account, id) = user.strip_prefix("user_")?.rsplit_once("_session_")?;
    let well_formed = account.contains("_account_")
        && !id.is_empty()
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    well_formed.then(|| id.to_owned())
}

/// A Responses request's `prompt_cache_key` (Codex sets it to its conversation's id).
fn prompt_cache_key(format: Format, request: &Value) -> Option<String> {
    if format != Format::OpenAiResponses {
        return None;
    }
    let key = request.get("prompt_cache_key")?.as_str()?;
    (!key.trim().is_empty()).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{HeaderName, HeaderValue};
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    fn source(format: Format, h: &[(&'static str, &'static str)], body: &Value) -> Source {
        name(format, &headers(h), body).map_or(Source::History, |n| n.source)
    }

    #[test]
    fn claude_codes_user_id_in_both_shapes() {
        let new = json!({"metadata": {"user_id": "{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"5f0c-11\"}"}});
        let old = json!({"metadata": {"user_id": "user_ab12_account__session_5f0c-11"}});
        assert_eq!(
            claude_session(Format::Anthropic, &new).as_deref(),
            Some("5f0c-11")
        );
        assert_eq!(
            claude_session(Format::Anthropic, &old).as_deref(),
            Some("5f0c-11")
        );
        // Both shapes name the same session.
        assert_eq!(
            name(Format::Anthropic, &headers(&[]), &new),
            name(Format::Anthropic, &headers(&[]), &old)
        );
        for bad in [
            json!({"metadata": {"user_id": "alice@example.com"}}),
            json!({"metadata": {"user_id": "{\"session_id\": 7}"}}),
            json!({"metadata": {"user_id": "{not json"}}),
            json!({"metadata": {"user_id": "user_ab_account__session_"}}),
            json!({"metadata": {"user_id": "user_ab_session_x y"}}),
            json!({"metadata": {"user_id": 12}}),
            json!({"metadata": "x"}),
        ] {
            assert_eq!(claude_session(Format::Anthropic, &bad), None, "{bad}");
        }
        assert_eq!(claude_session(Format::OpenAiChat, &new), None);
    }

    #[test]
    fn the_sources_in_their_order() {
        let body = json!({"model": "m", "prompt_cache_key": "k",
            "metadata": {"user_id": "{\"session_id\":\"s\"}"}});
        let all = [
            ("x-cutctx-session", "a"),
            ("x-session-id", "b"),
            ("session_id", "c"),
        ];
        assert_eq!(source(Format::OpenAiResponses, &all, &body), Source::Cutctx);
        assert_eq!(
            source(Format::OpenAiResponses, &all[1..], &body),
            Source::SessionIdHeader
        );
        assert_eq!(
            source(Format::OpenAiResponses, &all[2..], &body),
            Source::CodexHeader
        );
        // Codex 0.171 writes the header with a hyphen.
        assert_eq!(
            source(Format::OpenAiResponses, &[("session-id", "c")], &body),
            Source::CodexHeader
        );
        assert_eq!(
            source(Format::OpenAiResponses, &[], &body),
            Source::PromptCacheKey
        );
        assert_eq!(
            source(Format::Anthropic, &[], &body),
            Source::ClaudeMetadata
        );
        assert_eq!(source(Format::OpenAiChat, &[], &body), Source::History);
        assert_eq!(
            source(Format::OpenAiChat, &[("session_id", " ")], &body),
            Source::History
        );
    }

    #[test]
    fn a_name_is_kept_only_as_a_digest_scoped_by_model_unless_named_for_the_proxy() {
        let h = headers(&[("x-session-id", "conversation-1")]);
        let on =
            |model: &str| name(Format::OpenAiChat, &h, &json!({"model": model})).map(|n| n.key);
        let key = on("gpt-5").expect("named");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("conversation"));
        assert_ne!(on("gpt-5"), on("gpt-5-mini"));
        let ours = headers(&[("x-cutctx-session", "conversation-1")]);
        let mine =
            |model: &str| name(Format::OpenAiChat, &ours, &json!({"model": model})).map(|n| n.key);
        assert_eq!(mine("gpt-5"), mine("gpt-5-mini"));
    }
}
