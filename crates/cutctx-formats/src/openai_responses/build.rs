//! The Responses turns: [`Build`] maps each message (as a value, or as a hand-read
//! [`Plain`]) to cutctx turns and the sources they came from.

use super::*;

/// The model step being read: its key, whether it began with reasoning, and the kind of its
/// last item.
#[derive(Debug)]
pub(super) struct Step {
    pub(super) key: Arc<str>,
    pub(super) reasoning: bool,
    pub(super) last: Kind<'static>,
}

/// Maps a valid Responses document to turns.
pub(crate) fn build(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Built, FormatError> {
    let mut build = Build::start(document, estimator)?;
    let items = match input(document)? {
        Input::Text(s) => {
            let mut t = Text::default();
            t.push(s);
            let (content, estimate) = t.finish(estimator);
            build.built.push(
                TranscriptTurn::new("m0", Role::User, content, estimate)?,
                TurnSource::InputText,
            );
            return Ok(build.built);
        }
        Input::Items(items) => items,
    };
    for (i, item) in items.iter().enumerate() {
        build.item(i, item, estimator)?;
    }
    Ok(build.built)
}

/// The turns, item by item.
#[derive(Debug, Default)]
pub(crate) struct Build {
    pub(crate) built: Built,
    /// call_id -> the key of the step that made the call, for the calls since the last
    /// prompt: looked up by each output, hashed, never iterated. An output answers a call
    /// made since the last prompt (the check refuses any other list, and the turns built for
    /// it are dropped), so the calls before a prompt are let go at the prompt: the map holds
    /// a step's calls, not every call of the request.
    pub(super) calls: IdHashMap<String, Arc<str>>,
    /// The keys of the steps since the last prompt that began with reasoning.
    pub(super) reasoning_steps: BTreeSet<Arc<str>>,
    pub(super) step: Option<Step>,
    pub(super) ids: MessageIds,
}

impl Build {
    /// The same, with room for the turns of `n` items and their ids made ahead (a step's
    /// key is then its first turn's id, shared).
    pub(crate) fn sized(mut self, n: usize) -> Self {
        self.built.turns.reserve(n);
        self.built.sources.reserve(n);
        self.ids = MessageIds::ahead(n);
        self
    }

    /// The turns of a request's top-level fields: `instructions`, the system turn.
    pub(crate) fn start(
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        let mut build = Self::default();
        if let Some(turn) = instructions_turn(document, estimator)? {
            build.built.push(turn, TurnSource::System);
        }
        Ok(build)
    }

    /// The turns of a list whose length is not known yet, with room for `capacity` of them,
    /// before the request's top-level fields are known: [`Build::finish_growing`] puts their
    /// turn first.
    pub(crate) fn growing(capacity: usize) -> Self {
        Self {
            built: Built::with_capacity(capacity),
            ids: MessageIds::growing(),
            ..Self::default()
        }
    }

    /// The turns of a list read as [`Build::growing`] says, with the turn of the request's
    /// `instructions` put first, as [`Build::start`] would have.
    pub(crate) fn finish_growing(
        mut self,
        document: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<Self, FormatError> {
        if let Some(turn) = instructions_turn(document, estimator)? {
            self.built.insert_first(turn, TurnSource::System);
        }
        Ok(self)
    }

    /// The turn of item `i`, which the check accepted.
    pub(crate) fn item(
        &mut self,
        i: usize,
        item: &Value,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let k = kind(i, item)?;
        let mut text = Text::default();
        match k {
            Kind::Prompt(_) => text.push_content(item.get("content").unwrap_or(&Value::Null)),
            Kind::Output(..) => text.push_content(item.get("output").unwrap_or(&Value::Null)),
            _ => model_text(&mut text, item),
        }
        self.push(i, k, text, estimator)?;
        if untouchable_item(item).is_some() {
            // Carried untouched, in its place: its step goes with it.
            self.built.pin_last();
        }
        Ok(())
    }

    /// The turn of item `i`, read as a [`Plain`] item: the turn [`Build::item`] makes of its
    /// value.
    pub(crate) fn plain(
        &mut self,
        i: usize,
        item: &Plain<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let mut text = Text::default();
        // The pieces in the order the value path reads them: content (or output), then a
        // call's name and arguments.
        for piece in &item.content {
            text.push_str(piece);
        }
        for piece in item.name.iter().chain(&item.arguments) {
            text.push(piece);
        }
        self.push(i, item.kind(), text, estimator)
    }

    /// Lets the calls since the last prompt go, at a prompt: no output after it answers one.
    /// A map grown far past what it holds (a step of many parallel calls, long gone) is
    /// replaced rather than cleared, so that clearing costs what was put in, not what the
    /// largest step once needed.
    fn forget_calls(&mut self) {
        if self.calls.capacity() > 4 * self.calls.len() + 16 {
            self.calls = IdHashMap::default();
        } else {
            self.calls.clear();
        }
        self.reasoning_steps.clear();
    }

    /// Adds the turn of item `i`, of kind `k` and text `text`, to its step.
    fn push(
        &mut self,
        i: usize,
        k: Kind<'_>,
        text: Text<'_>,
        estimator: &dyn TokenEstimator,
    ) -> Result<(), FormatError> {
        let id = self.ids.get(i);
        let (role, key) = match k {
            Kind::Prompt(role) => {
                self.step = None;
                self.forget_calls();
                (role, None)
            }
            Kind::Output(_, call_id) => {
                let key = self.calls.get(call_id).cloned();
                // The open step is the step of the previous item.
                self.step = key.as_ref().map(|key| Step {
                    key: Arc::clone(key),
                    reasoning: self.reasoning_steps.contains(key),
                    last: k.erased(),
                });
                (Role::Tool, key)
            }
            Kind::Reasoning | Kind::Call(..) | Kind::Answer | Kind::Other => {
                let joins = self.step.as_ref().is_some_and(|s| match (s.last, k) {
                    // Consecutive reasoning, or whatever the reasoning precedes.
                    (Kind::Reasoning, _) => true,
                    // A new reasoning item is a new step.
                    (_, Kind::Reasoning) => false,
                    // Parallel calls, and items of the step after its calls.
                    (Kind::Call(..) | Kind::Answer | Kind::Other, _) => true,
                    // A call after an output: interleaved parallel calls of a reasoning step.
                    (Kind::Output(..), Kind::Call(..)) => s.reasoning,
                    _ => false,
                });
                let grouped = matches!(k, Kind::Reasoning | Kind::Call(..));
                let key = match self.step.as_mut() {
                    Some(s) if joins => {
                        s.last = k.erased();
                        Some(Arc::clone(&s.key))
                    }
                    _ if grouped => {
                        let key = Arc::clone(&id);
                        if k == Kind::Reasoning {
                            self.reasoning_steps.insert(Arc::clone(&key));
                        }
                        self.step = Some(Step {
                            key: Arc::clone(&key),
                            reasoning: k == Kind::Reasoning,
                            last: k.erased(),
                        });
                        Some(key)
                    }
                    _ => {
                        self.step = None;
                        None
                    }
                };
                if let (Kind::Call(_, call_id), Some(key)) = (k, &key) {
                    self.calls.insert(call_id.to_owned(), Arc::clone(key));
                }
                (Role::Assistant, key)
            }
        };
        let (content, estimate, written) = text.finish_deferring(estimator);
        let turn = TranscriptTurn::new(id, role, content, estimate)?.with_tool_call_id_opt(key);
        self.built
            .push_deferring(turn, TurnSource::Message(i), written);
        Ok(())
    }
}

/// The system turn of a request's `instructions`, when it has them.
pub(super) fn instructions_turn(
    document: &Value,
    estimator: &dyn TokenEstimator,
) -> Result<Option<TranscriptTurn>, FormatError> {
    let Some(text) = instructions(document)? else {
        return Ok(None);
    };
    let mut t = Text::default();
    t.push(text);
    let (content, estimate) = t.finish(estimator);
    Ok(Some(TranscriptTurn::new(
        "instructions",
        Role::System,
        content,
        estimate,
    )?))
}

/// The text of a model item: message content, reasoning summaries, call names and arguments.
pub(super) fn model_text<'a>(text: &mut Text<'a>, item: &'a Value) {
    if let Some(c) = item.get("content") {
        text.push_content(c);
    }
    if let Some(Value::Array(summary)) = item.get("summary") {
        for part in summary {
            text.push_part(part);
        }
    }
    for key in ["name", "arguments", "input", "action", "operation", "query"] {
        if let Some(v) = item.get(key) {
            text.push_json(v);
        }
    }
}
