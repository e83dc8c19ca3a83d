//! One turn of a transcript: its role, its fields and their wire form.

use std::collections::BTreeMap;
use std::sync::Arc;

use cutctx_json::TurnFields;
use serde::{Deserialize, Serialize};

use crate::wire::WireText;
use crate::{CompactionError, details, py_repr_str};

/// A turn's metadata: string to string, opaque to every policy, never in plan or report bytes.
///
/// Shared behind an `Arc`, so a view that keeps a turn does not copy its metadata.
pub type Metadata = Arc<BTreeMap<String, String>>;

/// The empty metadata most turns have, shared: one for each thread, because every turn a
/// thread builds takes a reference to it, and threads building turns side by side (a large
/// request read in parts) would otherwise each wait for the other's hold on one counter.
fn empty_metadata() -> Metadata {
    thread_local! {
        static EMPTY: Metadata = Arc::new(BTreeMap::new());
    }
    EMPTY.with(Arc::clone)
}

/// Who spoke a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions. Every system turn is untouchable.
    System,
    /// The user.
    User,
    /// The model, possibly issuing tool calls.
    Assistant,
    /// A tool's result. Only tool turns are ever masked.
    Tool,
}

impl Role {
    /// The role's wire value: `"system"`, `"user"`, `"assistant"` or `"tool"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

impl<'de> Deserialize<'de> for Role {
    /// Only the four strings: a derived enum would also take `{"user": null}`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = crate::wire::WireStr::deserialize(d)?.0;
        match s.as_str() {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            "tool" => Ok(Self::Tool),
            _ => Err(serde::de::Error::custom(
                "role must be one of \"system\", \"user\", \"assistant\", \"tool\"",
            )),
        }
    }
}

/// One turn of a transcript. Immutable once built; equality is by value.
///
/// `content` and `metadata` are reference-counted, so cloning a turn (as a view that keeps it
/// does) shares them rather than copying what may be megabytes of tool output.
///
/// ```
/// use cutctx_model::{Role, TranscriptTurn};
/// let t = TranscriptTurn::new("t1", Role::Tool, "result text", 3)?
///     .with_tool_call_id("c1")
///     .with_pinned(false);
/// assert_eq!(t.tool_call_id(), Some("c1"));
/// assert!(TranscriptTurn::new("", Role::User, "x", 1).is_err());
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "crate::wire::ObjectOnly<TurnRecord>")]
pub struct TranscriptTurn {
    // Fields in code point order: the canonical writer relies on it.
    pub(crate) content: Arc<str>,
    pub(crate) metadata: Metadata,
    pub(crate) pinned: bool,
    pub(crate) role: Role,
    pub(crate) token_estimate: u64,
    pub(crate) tool_call_id: Option<Arc<str>>,
    pub(crate) turn_id: Arc<str>,
}

impl TranscriptTurn {
    /// A turn with no `tool_call_id`, unpinned, with empty metadata.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `turn_id` is empty (details: `role`).
    pub fn new(
        turn_id: impl Into<Arc<str>>,
        role: Role,
        content: impl Into<Arc<str>>,
        token_estimate: u64,
    ) -> Result<Self, CompactionError> {
        let turn_id = turn_id.into();
        if turn_id.is_empty() {
            return Err(CompactionError::validation(
                "A turn needs a non-empty turn_id: plans name turns by id, and two empty ids \
                 could not be told apart.",
                details! { "role" => role.as_str() },
            ));
        }
        Ok(Self {
            content: content.into(),
            metadata: empty_metadata(),
            pinned: false,
            role,
            token_estimate,
            tool_call_id: None,
            turn_id,
        })
    }

    /// The same turn with this exchange correlation id.
    #[must_use]
    pub fn with_tool_call_id(mut self, tool_call_id: impl Into<Arc<str>>) -> Self {
        self.tool_call_id = Some(tool_call_id.into());
        self
    }

    /// The same turn with `tool_call_id` set or cleared.
    #[must_use]
    pub fn with_tool_call_id_opt(mut self, tool_call_id: Option<Arc<str>>) -> Self {
        self.tool_call_id = tool_call_id;
        self
    }

    /// The same turn, pinned or not.
    #[must_use]
    pub fn with_pinned(mut self, pinned: bool) -> Self {
        self.pinned = pinned;
        self
    }

    /// The same turn with this metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: impl Into<Metadata>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// The same turn with its content and estimate replaced (used for masks and stand-ins).
    #[must_use]
    pub fn with_content(mut self, content: Arc<str>, token_estimate: u64) -> Self {
        self.content = content;
        self.token_estimate = token_estimate;
        self
    }

    /// A copy of this turn with other content and estimate, built without touching this
    /// turn's content (whose reference count sits next to the text, far from the turn).
    #[must_use]
    pub fn with_replaced_content(&self, content: Arc<str>, token_estimate: u64) -> Self {
        Self {
            content,
            metadata: Arc::clone(&self.metadata),
            pinned: self.pinned,
            role: self.role,
            token_estimate,
            tool_call_id: self.tool_call_id.clone(),
            turn_id: Arc::clone(&self.turn_id),
        }
    }

    /// The turn's id, unique within its transcript.
    #[must_use]
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The id as a shared string, for cheap copies into plans and views.
    #[must_use]
    pub fn turn_id_arc(&self) -> &Arc<str> {
        &self.turn_id
    }

    /// Who spoke.
    #[must_use]
    pub const fn role(&self) -> Role {
        self.role
    }

    /// The content. Opaque: only masking reads it, to hash it.
    #[must_use]
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The content as a shared string.
    #[must_use]
    pub fn content_arc(&self) -> &Arc<str> {
        &self.content
    }

    /// The caller's token estimate. Never re-estimated.
    #[must_use]
    pub const fn token_estimate(&self) -> u64 {
        self.token_estimate
    }

    /// The exchange correlation id: every turn sharing it belongs to one exchange.
    #[must_use]
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref()
    }

    /// Whether the turn is pinned (untouchable).
    #[must_use]
    pub const fn pinned(&self) -> bool {
        self.pinned
    }

    /// The turn's fields as `cutctx_json` writes its seven-key object.
    ///
    /// ```
    /// use cutctx_json::{Style, Writer, write_turn};
    /// use cutctx_model::{Role, TranscriptTurn};
    /// let turn = TranscriptTurn::new("u1", Role::User, "hi", 1)?;
    /// let mut out = String::new();
    /// write_turn(&mut Writer::new(&mut out, Style::CANONICAL), turn.json_fields());
    /// assert_eq!(out, cutctx_model::canonical::canonical_json(&turn)?);
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    #[must_use]
    pub fn json_fields(&self) -> TurnFields<'_, impl Iterator<Item = (&str, &str)> + Clone> {
        TurnFields {
            content: &self.content,
            metadata: self.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            pinned: self.pinned,
            role: self.role.as_str(),
            token_estimate: self.token_estimate,
            tool_call_id: self.tool_call_id.as_deref(),
            turn_id: &self.turn_id,
        }
    }

    /// The metadata.
    #[must_use]
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }
}

/// The wire form of a turn, as a request document spells it.
///
/// Missing keys take the defaults of the CLI contract; unknown keys are refused. Integers are
/// read wide so that a negative or oversized estimate gets a precise error rather than a
/// generic type error.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRecord {
    /// Must be non-empty.
    pub turn_id: String,
    /// One of the four roles.
    pub role: Role,
    /// Defaults to `""`.
    #[serde(default)]
    pub content: String,
    /// Must be an integer `>= 0`.
    pub token_estimate: crate::wire::WireInt,
    /// Defaults to `null`.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Defaults to `false`.
    #[serde(default)]
    pub pinned: bool,
    /// Defaults to `{}`. A repeated key is refused.
    #[serde(default, deserialize_with = "crate::wire::unique_string_map")]
    pub metadata: BTreeMap<String, String>,
}

impl TryFrom<crate::wire::ObjectOnly<TurnRecord>> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: crate::wire::ObjectOnly<TurnRecord>) -> Result<Self, Self::Error> {
        Self::try_from(r.0)
    }
}

impl TryFrom<TurnRecord> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: TurnRecord) -> Result<Self, Self::Error> {
        Self::try_from(SharedTurnRecord {
            turn_id: WireText(Arc::from(r.turn_id)),
            role: r.role,
            content: WireText(Arc::from(r.content)),
            token_estimate: r.token_estimate,
            tool_call_id: r.tool_call_id.map(|id| WireText(Arc::from(id))),
            pinned: r.pinned,
            metadata: r.metadata,
        })
    }
}

/// [`TurnRecord`] with its text read straight into the shared strings a [`TranscriptTurn`]
/// holds: the same keys, defaults and errors, one copy of each string fewer. For reading
/// large documents.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedTurnRecord {
    /// Must be non-empty.
    pub turn_id: WireText,
    /// One of the four roles.
    pub role: Role,
    /// Defaults to `""`.
    #[serde(default)]
    pub content: WireText,
    /// Must be an integer `>= 0`.
    pub token_estimate: crate::wire::WireInt,
    /// Defaults to `null`.
    #[serde(default)]
    pub tool_call_id: Option<WireText>,
    /// Defaults to `false`.
    #[serde(default)]
    pub pinned: bool,
    /// Defaults to `{}`. A repeated key is refused.
    #[serde(default, deserialize_with = "crate::wire::unique_string_map")]
    pub metadata: BTreeMap<String, String>,
}

impl TryFrom<crate::wire::ObjectOnly<SharedTurnRecord>> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: crate::wire::ObjectOnly<SharedTurnRecord>) -> Result<Self, Self::Error> {
        Self::try_from(r.0)
    }
}

impl TryFrom<SharedTurnRecord> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: SharedTurnRecord) -> Result<Self, Self::Error> {
        let turn_id = r.turn_id.0;
        if turn_id.is_empty() {
            return Self::new("", r.role, "", 0);
        }
        let estimate = u64::try_from(r.token_estimate.0).map_err(|_| {
            let message = if r.token_estimate.0 < 0 {
                format!(
                    "token_estimate must not be negative; turn {} declares {}. A negative \
                     estimate would let a total fall below its untouchable floor.",
                    py_repr_str(&turn_id),
                    r.token_estimate.0
                )
            } else {
                format!(
                    "token_estimate of turn {} is {}, beyond the largest supported estimate {}.",
                    py_repr_str(&turn_id),
                    r.token_estimate.0,
                    u64::MAX
                )
            };
            CompactionError::validation(
                message,
                details! { "turn_id" => &*turn_id, "token_estimate" => r.token_estimate.0.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        let metadata = if r.metadata.is_empty() {
            empty_metadata()
        } else {
            Arc::new(r.metadata)
        };
        Ok(Self::new(turn_id, r.role, r.content.0, estimate)?
            .with_tool_call_id_opt(r.tool_call_id.map(|id| id.0))
            .with_pinned(r.pinned)
            .with_metadata(metadata))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, Transcript};

    fn turn(id: &str, est: u64) -> TranscriptTurn {
        TranscriptTurn::new(id, Role::User, format!("content of {id}"), est).expect("valid turn")
    }

    #[test]
    fn empty_turn_id_is_refused_with_role_in_details() {
        let e = TranscriptTurn::new("", Role::Tool, "x", 1).expect_err("empty id");
        assert_eq!(e.code(), ErrorCode::Validation);
        assert_eq!(e.details()["role"], "tool");
    }

    #[test]
    fn negative_estimate_from_the_wire_is_refused_with_id_and_figure() {
        let r: TurnRecord =
            serde_json::from_str(r#"{"turn_id":"a","role":"user","token_estimate":-3}"#)
                .expect("wire parses");
        let e = TranscriptTurn::try_from(r).expect_err("negative");
        assert_eq!(e.details()["turn_id"], "a");
        assert_eq!(e.details()["token_estimate"], -3);
        assert!(e.message().contains("'a'"));
    }

    #[test]
    fn wire_defaults_and_unknown_keys() {
        let t: TranscriptTurn =
            serde_json::from_str(r#"{"turn_id":"a","role":"tool","token_estimate":2}"#)
                .expect("defaults");
        assert_eq!(
            (t.content(), t.tool_call_id(), t.pinned()),
            ("", None, false)
        );
        assert!(t.metadata().is_empty());
        assert!(
            serde_json::from_str::<TranscriptTurn>(
                r#"{"turn_id":"a","role":"tool","token_estimate":2,"pin":true}"#
            )
            .is_err()
        );
        assert!(
            serde_json::from_str::<TranscriptTurn>(
                r#"{"turn_id":"a","role":"tool","token_estimate":2.0}"#
            )
            .is_err()
        );
    }

    #[test]
    fn turn_serializes_all_seven_keys_in_order() {
        let t = turn("a", 3);
        let s = crate::canonical::canonical_json(&t).expect("turn");
        assert_eq!(
            s,
            r#"{"content":"content of a","metadata":{},"pinned":false,"role":"user","token_estimate":3,"tool_call_id":null,"turn_id":"a"}"#
        );
        let one = Transcript::new(vec![t]).expect("valid");
        assert_eq!(one.canonical_json(), format!("[{s}]"));
    }

    #[test]
    fn ids_in_messages_are_quoted_as_cpython_quotes_them() {
        // CPython: repr('a\xa0b') == "'a\\xa0b'", U+00A0 is not printable (Zs).
        assert_eq!(py_repr_str("a\u{a0}b"), "'a\\xa0b'");
        assert_eq!(py_repr_str("x\u{85}\u{ad}\u{2028}"), "'x\\x85\\xad\\u2028'");
    }

    #[test]
    fn clones_share_content() {
        let t = turn("a", 3);
        let c = t.clone();
        assert!(Arc::ptr_eq(t.content_arc(), c.content_arc()));
    }
}
