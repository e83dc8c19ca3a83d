//! What a plan does to one turn: the action, its replacement text, and their wire forms.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{CompactionError, details, py_repr_str};

/// What a plan does to one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The turn stays as it is.
    Keep,
    /// A tool result is replaced by a stub carrying its digest; the turn stays in place.
    Mask,
    /// The turn is folded into a summary the caller writes.
    Summarize,
    /// The turn leaves the view.
    Drop,
}

impl Action {
    /// The wire value: `"keep"`, `"mask"`, `"summarize"` or `"drop"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Keep => "keep",
            Self::Mask => "mask",
            Self::Summarize => "summarize",
            Self::Drop => "drop",
        }
    }

    /// Whether the action takes the turn out of the view (`drop` and `summarize`).
    #[must_use]
    pub const fn is_removal(self) -> bool {
        matches!(self, Self::Drop | Self::Summarize)
    }
}

impl<'de> Deserialize<'de> for Action {
    /// Only the four strings: a derived enum would also take `{"keep": null}`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = crate::wire::WireStr::deserialize(d)?.0;
        match s.as_str() {
            "keep" => Ok(Self::Keep),
            "mask" => Ok(Self::Mask),
            "summarize" => Ok(Self::Summarize),
            "drop" => Ok(Self::Drop),
            _ => Err(serde::de::Error::custom(
                "action must be one of \"keep\", \"mask\", \"summarize\", \"drop\"",
            )),
        }
    }
}

/// The stub that replaces a masked turn: its new content and estimate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnReplacement {
    // Fields in code point order: the canonical writer relies on it.
    /// The stub text.
    pub content: Arc<str>,
    /// The stub's estimate.
    pub token_estimate: u64,
}

/// One turn's action. `summary_group` is set exactly for `summarize`, `replacement` exactly
/// for `mask`; the constructors enforce it.
///
/// ```
/// use cutctx_model::{Action, TurnAction};
/// assert!(TurnAction::keep("a").summary_group().is_none());
/// assert!(TurnAction::new("a", Action::Summarize, None, None).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "crate::wire::ObjectOnly<TurnActionRecord>")]
pub struct TurnAction {
    pub(crate) what: What,
    pub(crate) turn_id: Arc<str>,
}

/// The action with what only it carries: one field where the wire has three, so that a plan
/// of a hundred thousand actions is a quarter smaller in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum What {
    Keep,
    Drop,
    Mask(TurnReplacement),
    Summarize(Arc<str>),
}

impl Serialize for TurnAction {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // Keys in code point order, as the canonical form wants them.
        let mut st = serializer.serialize_struct("TurnAction", 4)?;
        st.serialize_field("action", &self.action())?;
        st.serialize_field("replacement", &self.replacement())?;
        st.serialize_field("summary_group", &self.summary_group())?;
        st.serialize_field("turn_id", &*self.turn_id)?;
        st.end()
    }
}

impl TurnAction {
    /// An action, checked.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `summary_group` is not set exactly for `summarize`, or
    /// `replacement` not exactly for `mask` (details: `turn_id`, `action`).
    pub fn new(
        turn_id: impl Into<Arc<str>>,
        action: Action,
        summary_group: Option<Arc<str>>,
        replacement: Option<TurnReplacement>,
    ) -> Result<Self, CompactionError> {
        let turn_id = turn_id.into();
        if summary_group.is_some() != (action == Action::Summarize) {
            return Err(CompactionError::validation(
                format!(
                    "summary_group is set exactly when the action is summarize; turn {} has \
                     action {} and summary_group={}.",
                    py_repr_str(&turn_id),
                    py_repr_str(action.as_str()),
                    summary_group
                        .as_deref()
                        .map_or_else(|| "None".to_owned(), py_repr_str),
                ),
                details! { "turn_id" => &*turn_id, "action" => action.as_str() },
            ));
        }
        if replacement.is_some() != (action == Action::Mask) {
            return Err(CompactionError::validation(
                format!(
                    "replacement is set exactly when the action is mask; turn {} has action {} \
                     and {}.",
                    py_repr_str(&turn_id),
                    py_repr_str(action.as_str()),
                    if replacement.is_some() {
                        "a replacement"
                    } else {
                        "none"
                    },
                ),
                details! { "turn_id" => &*turn_id, "action" => action.as_str() },
            ));
        }
        let what = match (action, replacement, summary_group) {
            (Action::Mask, Some(r), _) => What::Mask(r),
            (Action::Summarize, _, Some(g)) => What::Summarize(g),
            (Action::Drop, _, _) => What::Drop,
            // Keep, and the pairs refused above.
            _ => What::Keep,
        };
        Ok(Self { what, turn_id })
    }

    /// `keep` for this turn.
    #[must_use]
    pub fn keep(turn_id: impl Into<Arc<str>>) -> Self {
        Self {
            what: What::Keep,
            turn_id: turn_id.into(),
        }
    }

    /// `drop` for this turn.
    #[must_use]
    pub fn drop_turn(turn_id: impl Into<Arc<str>>) -> Self {
        Self {
            what: What::Drop,
            turn_id: turn_id.into(),
        }
    }

    /// `mask` for this turn, with its stub.
    #[must_use]
    pub fn mask(turn_id: impl Into<Arc<str>>, replacement: TurnReplacement) -> Self {
        Self {
            what: What::Mask(replacement),
            turn_id: turn_id.into(),
        }
    }

    /// `summarize` for this turn, into `group`.
    #[must_use]
    pub fn summarize(turn_id: impl Into<Arc<str>>, group: Arc<str>) -> Self {
        Self {
            what: What::Summarize(group),
            turn_id: turn_id.into(),
        }
    }

    /// The turn acted on.
    #[must_use]
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The turn's id as a shared string.
    #[must_use]
    pub const fn turn_id_arc(&self) -> &Arc<str> {
        &self.turn_id
    }

    /// Whether this action names `turn`: a pointer comparison when the action was built from
    /// the turn's own id, a string comparison otherwise.
    #[must_use]
    pub fn names(&self, turn: &crate::TranscriptTurn) -> bool {
        self.names_id(turn.turn_id_arc())
    }

    /// Whether this action names the turn whose id is `id`, compared as [`TurnAction::names`]
    /// does.
    #[must_use]
    pub fn names_id(&self, id: &Arc<str>) -> bool {
        Arc::ptr_eq(&self.turn_id, id) || *self.turn_id == **id
    }

    /// The action.
    #[must_use]
    pub const fn action(&self) -> Action {
        match self.what {
            What::Keep => Action::Keep,
            What::Drop => Action::Drop,
            What::Mask(_) => Action::Mask,
            What::Summarize(_) => Action::Summarize,
        }
    }

    /// The group, for `summarize`.
    #[must_use]
    pub fn summary_group(&self) -> Option<&str> {
        self.summary_group_arc().map(|g| &**g)
    }

    /// The group as a shared string, for `summarize`.
    #[must_use]
    pub const fn summary_group_arc(&self) -> Option<&Arc<str>> {
        match &self.what {
            What::Summarize(g) => Some(g),
            _ => None,
        }
    }

    /// Whether two actions name the same summary group (or both none): by pointer first, as
    /// one policy's actions share one group string.
    #[must_use]
    pub fn same_group(&self, other: &Self) -> bool {
        match (self.summary_group_arc(), other.summary_group_arc()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        }
    }

    /// The stub, for `mask`.
    #[must_use]
    pub const fn replacement(&self) -> Option<&TurnReplacement> {
        match &self.what {
            What::Mask(r) => Some(r),
            _ => None,
        }
    }

    /// The action with what only it carries: a stub for `mask`, a group for `summarize`.
    ///
    /// Matching on this instead of [`TurnAction::action`] leaves no "mask without a stub" or
    /// "summarize without a group" case to handle: the type has none.
    ///
    /// ```
    /// use cutctx_model::{ActionView, TurnAction};
    /// let action = TurnAction::summarize("t1", "g".into());
    /// assert!(matches!(action.view(), ActionView::Summarize(g) if &**g == "g"));
    /// ```
    #[must_use]
    pub const fn view(&self) -> ActionView<'_> {
        match &self.what {
            What::Keep => ActionView::Keep,
            What::Drop => ActionView::Drop,
            What::Mask(r) => ActionView::Mask(r),
            What::Summarize(g) => ActionView::Summarize(g),
        }
    }
}

/// A [`TurnAction`]'s action together with what only it carries; see [`TurnAction::view`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionView<'a> {
    /// The turn stays as it is.
    Keep,
    /// The turn leaves the view.
    Drop,
    /// The turn is replaced by this stub.
    Mask(&'a TurnReplacement),
    /// The turn is folded into this summary group.
    Summarize(&'a Arc<str>),
}

/// The wire form of a [`TurnAction`]: all four keys, absent values as `null`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnActionRecord {
    /// The turn.
    pub turn_id: String,
    /// The action.
    pub action: Action,
    /// The group, for `summarize`.
    #[serde(default)]
    pub summary_group: Option<String>,
    /// The stub, for `mask`.
    #[serde(default)]
    pub replacement: Option<crate::wire::ObjectOnly<TurnReplacement>>,
}

impl TryFrom<crate::wire::ObjectOnly<TurnActionRecord>> for TurnAction {
    type Error = CompactionError;

    fn try_from(r: crate::wire::ObjectOnly<TurnActionRecord>) -> Result<Self, Self::Error> {
        let r = r.0;
        Self::new(
            r.turn_id,
            r.action,
            r.summary_group.map(Arc::from),
            r.replacement.map(|o| o.0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_action_is_an_id_and_one_tagged_field() {
        // 16 bytes of id, 24 of stub, a tag: a plan of 100,000 actions is 4.8 MB, not 6.4.
        assert_eq!(std::mem::size_of::<TurnAction>(), 48);
    }

    #[test]
    fn actions_serialize_all_four_keys_in_code_point_order() {
        let group: Arc<str> = Arc::from("g");
        let stub = TurnReplacement {
            content: Arc::from("[masked]"),
            token_estimate: 3,
        };
        let cases = [
            (
                TurnAction::keep("k"),
                r#"{"action":"keep","replacement":null,"summary_group":null,"turn_id":"k"}"#,
            ),
            (
                TurnAction::drop_turn("d"),
                r#"{"action":"drop","replacement":null,"summary_group":null,"turn_id":"d"}"#,
            ),
            (
                TurnAction::mask("m", stub),
                r#"{"action":"mask","replacement":{"content":"[masked]","token_estimate":3},"summary_group":null,"turn_id":"m"}"#,
            ),
            (
                TurnAction::summarize("s", group),
                r#"{"action":"summarize","replacement":null,"summary_group":"g","turn_id":"s"}"#,
            ),
        ];
        for (action, expected) in cases {
            assert_eq!(
                serde_json::to_string(&action).ok().as_deref(),
                Some(expected)
            );
        }
    }

    #[test]
    fn action_shape_is_checked_on_the_wire() {
        let bad = r#"{"action":"mask","replacement":null,"summary_group":null,"turn_id":"t"}"#;
        assert!(serde_json::from_str::<TurnAction>(bad).is_err());
        let bad = r#"{"action":"keep","replacement":null,"summary_group":"g","turn_id":"t"}"#;
        assert!(serde_json::from_str::<TurnAction>(bad).is_err());
    }
}
