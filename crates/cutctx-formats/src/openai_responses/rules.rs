//! The Responses rules: [`validate`] over a document, and [`Check`], the one site
//! of every rule, which each reader feeds (a value, or a hand-read [`Plain`]).

use super::*;

/// Checks a Responses document against the provider's structural rules.
///
/// # Errors
///
/// The first [`Violation`], in document order.
pub fn validate(document: &Value) -> Result<(), Violation> {
    let mut check = Check::start(document)?;
    let Input::Items(items) = input(document)? else {
        return Ok(());
    };
    for (i, item) in items.iter().enumerate() {
        check.item(i, item)?;
    }
    check.finish()
}

/// The rules, item by item: [`validate`] over a document, and the text path over one parsed
/// item at a time.
///
/// An item's shape (its kind) is checked before any pairing rule of any item: a malformed
/// item is reported wherever it is, and the first broken pairing rule only when every item is
/// well formed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Check {
    /// Calls awaiting their output since the last prompt: call_id -> (type, index).
    pub(super) pending: BTreeMap<String, (&'static str, usize)>,
    /// Calls answered since the last prompt.
    pub(super) answered: BTreeSet<String>,
    /// The previous item, when it was reasoning: the next must be a model item.
    pub(super) reasoning: Option<usize>,
    /// The first pairing rule broken, reported once every item's shape is known.
    pub(super) broken: Option<Violation>,
}

impl Check {
    /// The check of a request's top-level fields (`instructions`), before its items.
    pub(crate) fn start(document: &Value) -> Result<Self, Violation> {
        if document.is_object() {
            instructions(document)?;
        }
        Ok(Self::default())
    }

    /// Item `i`, in order: its shape now, its pairing rules unless one broke before.
    pub(crate) fn item(&mut self, i: usize, item: &Value) -> Result<(), Violation> {
        let k = kind(i, item)?;
        self.of_kind(i, k, item.get("status").is_some_and(Value::is_null));
        Ok(())
    }

    /// Item `i`, read as a [`Plain`] item: what [`Check::item`] does with its value (a plain
    /// item is always well formed, and its `status` never null).
    pub(crate) fn plain(&mut self, i: usize, item: &Plain<'_>) {
        self.of_kind(i, item.kind(), false);
    }

    /// The pairing rules for item `i` of kind `k`, unless one broke before.
    fn of_kind(&mut self, i: usize, k: Kind<'_>, null_status: bool) {
        if self.broken.is_none()
            && let Err(v) = self.rules(i, k, null_status)
        {
            self.broken = Some(v);
        }
    }

    fn rules(&mut self, i: usize, k: Kind<'_>, null_status: bool) -> Result<(), Violation> {
        if let Some(r) = self.reasoning.take()
            && !k.is_model_item()
        {
            return Err(reasoning_alone(r));
        }
        if !matches!(k, Kind::Output(..)) && null_status {
            return Err(Violation::new(
                FORMAT,
                Rule::NullStatus,
                Some(i),
                format!("{}.status", path(i)),
            ));
        }
        match k {
            Kind::Prompt(_) => {
                unanswered(&self.pending)?;
                self.pending.clear();
                self.answered.clear();
            }
            Kind::Call(ty, id) => {
                if self.pending.contains_key(id) || self.answered.contains(id) {
                    return Err(Violation::new(
                        FORMAT,
                        Rule::DuplicateCallId,
                        Some(i),
                        format!("{}.call_id", path(i)),
                    )
                    .with_id(id));
                }
                self.pending.insert(id.to_owned(), (ty, i));
            }
            Kind::Output(ty, id) => match self.pending.get(id) {
                Some((call_ty, _)) if *call_ty == ty => {
                    self.pending.remove(id);
                    self.answered.insert(id.to_owned());
                }
                _ => {
                    let rule = if self.answered.contains(id) {
                        Rule::DuplicateResult
                    } else {
                        Rule::ResultWithoutCall
                    };
                    return Err(Violation::new(
                        FORMAT,
                        rule,
                        Some(i),
                        format!("{}.call_id", path(i)),
                    )
                    .with_id(id));
                }
            },
            Kind::Reasoning => self.reasoning = Some(i),
            Kind::Answer | Kind::Other => {}
        }
        Ok(())
    }

    /// The end of the list: the first rule broken, a trailing reasoning item, or a call left
    /// without its output.
    pub(crate) fn finish(self) -> Result<(), Violation> {
        if let Some(v) = self.broken {
            return Err(v);
        }
        if let Some(r) = self.reasoning {
            return Err(reasoning_alone(r));
        }
        unanswered(&self.pending)
    }
}

/// A reasoning item at `i` not followed by a model item.
pub(super) fn reasoning_alone(i: usize) -> Violation {
    Violation::new(
        FORMAT,
        Rule::ReasoningWithoutFollowingItem,
        Some(i),
        path(i),
    )
}

pub(super) fn unanswered(
    pending: &BTreeMap<String, (&'static str, usize)>,
) -> Result<(), Violation> {
    match pending.iter().min_by_key(|(_, (_, i))| *i) {
        Some((id, (_, i))) => Err(Violation::new(
            FORMAT,
            Rule::CallWithoutResult,
            Some(*i),
            format!("{}.call_id", path(*i)),
        )
        .with_id(id)),
        None => Ok(()),
    }
}
