//! The vocabulary: turns, transcripts, budgets, actions, replacements and requests.
//!
//! Each class holds the core's value and converts a field to Python only when it is read.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use cutctx::model::wire::WireInt;
use cutctx::model::{
    Action, ActionView, CompactionBudget, Role, SummarizationRequest, Transcript, TranscriptTurn,
    TurnAction, TurnRecord, TurnReplacement,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::plan::PyPlan;
use crate::registry::{self, IntoPy};

/// Reads a role: a `Role` member or its value.
pub(crate) fn parse_role(value: &Bound<'_, PyAny>) -> PyResult<Role> {
    let text: String = value.extract()?;
    match text.as_str() {
        "system" => Ok(Role::System),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        _ => Err(PyTypeError::new_err(format!(
            "role must be a Role (system, user, assistant or tool); got {}",
            value.repr()?
        ))),
    }
}

/// Reads an action: an `Action` member or its value.
pub(crate) fn parse_action(value: &Bound<'_, PyAny>) -> PyResult<Action> {
    let text: String = value.extract()?;
    match text.as_str() {
        "keep" => Ok(Action::Keep),
        "mask" => Ok(Action::Mask),
        "summarize" => Ok(Action::Summarize),
        "drop" => Ok(Action::Drop),
        _ => Err(PyTypeError::new_err(format!(
            "action must be an Action (keep, mask, summarize or drop); got {}",
            value.repr()?
        ))),
    }
}

/// A hash of a value's `Hash`, for `__hash__`.
fn hash_of(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// One turn of a transcript. Frozen; equal by value; not hashable (its metadata is a mapping).
///
/// ```text
/// >>> from cutctx import Role, TranscriptTurn
/// >>> TranscriptTurn("u1", Role.USER, "hello", 2).token_estimate
/// 2
/// ```
#[pyclass(frozen, module = "cutctx.types", name = "TranscriptTurn")]
pub(crate) struct PyTurn {
    pub(crate) inner: TranscriptTurn,
}

impl PyTurn {
    /// A Python turn around a core turn.
    pub(crate) fn wrap(py: Python<'_>, inner: TranscriptTurn) -> PyResult<Py<Self>> {
        Py::new(py, Self { inner })
    }
}

#[pymethods]
impl PyTurn {
    #[new]
    #[pyo3(signature = (turn_id, role, content, token_estimate, tool_call_id=None, pinned=false, metadata=None))]
    fn new(
        turn_id: String,
        role: &Bound<'_, PyAny>,
        content: String,
        token_estimate: i128,
        tool_call_id: Option<String>,
        pinned: bool,
        metadata: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let py = role.py();
        let role = parse_role(role)?;
        let mut map = BTreeMap::new();
        if let Some(metadata) = metadata {
            // Copied, so that the caller's later changes to its mapping cannot reach the turn.
            let items = metadata.call_method0("items")?;
            for item in items.try_iter()? {
                let (key, value): (String, String) = item?.extract()?;
                map.insert(key, value);
            }
        }
        let record = TurnRecord {
            turn_id,
            role,
            content,
            token_estimate: WireInt(token_estimate),
            tool_call_id,
            pinned,
            metadata: map,
        };
        let inner = TranscriptTurn::try_from(record).py(py)?;
        Ok(Self { inner })
    }

    /// The caller's identifier, unique within a transcript.
    #[getter]
    fn turn_id(&self) -> &str {
        self.inner.turn_id()
    }

    /// Who produced the turn (a `Role`).
    #[getter]
    fn role(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        registry::role_object(py, self.inner.role())
    }

    /// The turn's text.
    #[getter]
    fn content(&self) -> &str {
        self.inner.content()
    }

    /// The caller's token estimate for the turn.
    #[getter]
    fn token_estimate(&self) -> u64 {
        self.inner.token_estimate()
    }

    /// The correlation id of the tool exchange the turn belongs to, or `None`.
    #[getter]
    fn tool_call_id(&self) -> Option<&str> {
        self.inner.tool_call_id()
    }

    /// Whether the turn is untouchable under every policy.
    #[getter]
    fn pinned(&self) -> bool {
        self.inner.pinned()
    }

    /// The caller's key/value context, as a read-only mapping.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let dict = PyDict::new(py);
        for (key, value) in self.inner.metadata().iter() {
            dict.set_item(key, value)?;
        }
        registry::mapping_proxy(dict)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => (self.inner == other.get().inner)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let this = slf.get();
        let metadata = Self::metadata(this, py)?;
        Ok(format!(
            "TranscriptTurn(turn_id={}, role={}, content={}, token_estimate={}, tool_call_id={}, \
             pinned={}, metadata={})",
            slf.getattr("turn_id")?.repr()?,
            slf.getattr("role")?.repr()?,
            slf.getattr("content")?.repr()?,
            this.inner.token_estimate(),
            slf.getattr("tool_call_id")?.repr()?,
            if this.inner.pinned() { "True" } else { "False" },
            metadata.repr()?,
        ))
    }
}

/// An ordered body of turns, oldest first. Frozen; equal by value.
///
/// Built from existing turns, it shares their values; a view the executor returns creates its
/// Python turns only when `turns` is first read.
#[pyclass(frozen, module = "cutctx.types", name = "Transcript")]
pub(crate) struct PyTranscript {
    pub(crate) inner: Transcript,
    turns: PyOnceLock<Py<PyTuple>>,
    /// For a compacted view: the transcript and plan it was applied from, so that a kept
    /// turn is the input's own Python object.
    origin: Option<(Py<PyTranscript>, Py<PyPlan>)>,
}

impl PyTranscript {
    /// A Python transcript around a core one, its turns made on first read.
    pub(crate) fn wrap(py: Python<'_>, inner: Transcript) -> PyResult<Py<Self>> {
        Py::new(
            py,
            Self {
                inner,
                turns: PyOnceLock::new(),
                origin: None,
            },
        )
    }

    /// The view `plan` made of `source`: its kept turns are `source`'s own objects.
    pub(crate) fn view(
        py: Python<'_>,
        inner: Transcript,
        source: Py<PyTranscript>,
        plan: Py<PyPlan>,
    ) -> PyResult<Py<Self>> {
        Py::new(
            py,
            Self {
                inner,
                turns: PyOnceLock::new(),
                origin: Some((source, plan)),
            },
        )
    }

    /// The view's turns, reusing the source's objects for kept turns; `None` when the view
    /// does not line up with its plan (then every turn is made anew).
    fn view_turns(&self, py: Python<'_>) -> PyResult<Option<Vec<Py<PyAny>>>> {
        let Some((source, plan)) = &self.origin else {
            return Ok(None);
        };
        let source_turns = source.get().turns(py)?;
        let view = self.inner.turns();
        let mut out = Vec::with_capacity(view.len());
        let mut groups = BTreeSet::new();
        for (position, action) in plan.get().inner.actions.iter().enumerate() {
            let made = match action.view() {
                ActionView::Keep => {
                    out.push(source_turns.get_item(position)?.unbind());
                    continue;
                }
                ActionView::Mask(_) => true,
                ActionView::Summarize(group) => groups.insert(group),
                ActionView::Drop => false,
            };
            if made {
                let Some(turn) = view.get(out.len()) else {
                    return Ok(None);
                };
                out.push(PyTurn::wrap(py, turn.clone())?.into_any());
            }
        }
        Ok((out.len() == view.len()).then_some(out))
    }
}

#[pymethods]
impl PyTranscript {
    #[new]
    #[pyo3(signature = (turns=None))]
    fn new(py: Python<'_>, turns: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let tuple = match turns {
            None => PyTuple::empty(py),
            Some(turns) => match turns.cast::<PyTuple>() {
                Ok(tuple) => tuple.clone(),
                Err(_) => PyTuple::new(py, turns.try_iter()?.collect::<PyResult<Vec<_>>>()?)?,
            },
        };
        // Borrowed from the tuple, which holds them: no reference count is changed per turn.
        let mut held = Vec::with_capacity(tuple.len());
        for item in tuple.iter_borrowed() {
            held.push(item.cast::<PyTurn>().map_err(|_| {
                PyTypeError::new_err("a Transcript's turns must be TranscriptTurn values")
            })?);
        }
        // The turns were validated when they were made; the core copies their ids into its
        // own layout and shares their contents, without the interpreter lock: the turns are
        // frozen, and the tuple keeps them alive.
        let refs: Vec<&TranscriptTurn> = held.iter().map(|turn| &turn.get().inner).collect();
        let inner = py.detach(|| Transcript::from_copies(&refs)).py(py)?;
        let cell = PyOnceLock::new();
        let _ = cell.set(py, tuple.unbind());
        Ok(Self {
            inner,
            turns: cell,
            origin: None,
        })
    }

    /// The turns, oldest first, as a tuple.
    #[getter]
    fn turns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let tuple = self
            .turns
            .get_or_try_init(py, || -> PyResult<Py<PyTuple>> {
                if let Some(turns) = self.view_turns(py)? {
                    return Ok(PyTuple::new(py, turns)?.unbind());
                }
                let turns = self
                    .inner
                    .turns()
                    .iter()
                    .map(|turn| PyTurn::wrap(py, turn.clone()))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(PyTuple::new(py, turns)?.unbind())
            })?;
        Ok(tuple.bind(py).clone())
    }

    /// The sum of the turns' declared estimates.
    fn token_estimate(&self) -> u64 {
        self.inner.token_estimate()
    }

    /// The turn ids in transcript order.
    fn turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.turn_id_arcs().iter())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => (self.inner == other.get().inner)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("Transcript(turns={})", self.turns(py)?.repr()?))
    }
}

/// The window a transcript must fit, and the tail no policy may touch. Frozen; hashable.
#[pyclass(frozen, eq, hash, module = "cutctx.types", name = "CompactionBudget")]
#[derive(PartialEq, Eq, Hash)]
pub(crate) struct PyBudget {
    pub(crate) inner: CompactionBudget,
}

#[pymethods]
impl PyBudget {
    #[new]
    #[pyo3(signature = (max_tokens, protected_recent_turns=4))]
    fn new(py: Python<'_>, max_tokens: i128, protected_recent_turns: i128) -> PyResult<Self> {
        let inner = CompactionBudget::from_signed(max_tokens, protected_recent_turns).py(py)?;
        Ok(Self { inner })
    }

    /// The estimate the compacted view must not exceed.
    #[getter]
    fn max_tokens(&self) -> u64 {
        self.inner.max_tokens
    }

    /// How many turns at the end of the transcript are untouchable.
    #[getter]
    fn protected_recent_turns(&self) -> u64 {
        self.inner.protected_recent_turns
    }

    fn __repr__(&self) -> String {
        format!(
            "CompactionBudget(max_tokens={}, protected_recent_turns={})",
            self.inner.max_tokens, self.inner.protected_recent_turns
        )
    }
}

/// The body a mask puts in a turn's place, and its estimate. Frozen; hashable.
#[pyclass(frozen, module = "cutctx.types", name = "TurnReplacement")]
pub(crate) struct PyReplacement {
    pub(crate) inner: TurnReplacement,
}

#[pymethods]
impl PyReplacement {
    #[new]
    fn new(py: Python<'_>, content: String, token_estimate: i128) -> PyResult<Self> {
        let Ok(estimate) = u64::try_from(token_estimate) else {
            let details = PyDict::new(py);
            details.set_item("token_estimate", token_estimate)?;
            return Err(registry::validation(
                py,
                format!(
                    "A TurnReplacement's token_estimate must not be negative or beyond 64 bits; \
                     got {token_estimate}."
                ),
                &details,
            ));
        };
        Ok(Self {
            inner: TurnReplacement {
                content: Arc::from(content),
                token_estimate: estimate,
            },
        })
    }

    /// The substitute text.
    #[getter]
    fn content(&self) -> &str {
        &self.inner.content
    }

    /// What the substitute is estimated to cost.
    #[getter]
    fn token_estimate(&self) -> u64 {
        self.inner.token_estimate
    }

    /// The JSON-shaped form used in plans.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        replacement_dict(py, &self.inner)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => (self.inner == other.get().inner)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> u64 {
        hash_of(&(&*self.inner.content, self.inner.token_estimate))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TurnReplacement(content={}, token_estimate={})",
            pyo3::types::PyString::new(py, &self.inner.content).repr()?,
            self.inner.token_estimate
        ))
    }
}

/// `{"content": ..., "token_estimate": ...}`.
pub(crate) fn replacement_dict<'py>(
    py: Python<'py>,
    r: &TurnReplacement,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("content", &*r.content)?;
    dict.set_item("token_estimate", r.token_estimate)?;
    Ok(dict)
}

/// What a plan does to one turn. Frozen; hashable.
#[pyclass(frozen, module = "cutctx.types", name = "TurnAction")]
pub(crate) struct PyTurnAction {
    pub(crate) inner: TurnAction,
}

#[pymethods]
impl PyTurnAction {
    #[new]
    #[pyo3(signature = (turn_id, action, summary_group=None, replacement=None))]
    fn new(
        py: Python<'_>,
        turn_id: String,
        action: &Bound<'_, PyAny>,
        summary_group: Option<String>,
        replacement: Option<PyRef<'_, PyReplacement>>,
    ) -> PyResult<Self> {
        let action = parse_action(action)?;
        let inner = TurnAction::new(
            turn_id,
            action,
            summary_group.map(Arc::from),
            replacement.map(|r| r.inner.clone()),
        )
        .py(py)?;
        Ok(Self { inner })
    }

    /// The turn this action is about.
    #[getter]
    fn turn_id(&self) -> &str {
        self.inner.turn_id()
    }

    /// What happens to it (an `Action`).
    #[getter]
    fn action(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        registry::action_object(py, self.inner.action())
    }

    /// The summarization group consuming the turn, set exactly for `SUMMARIZE`.
    #[getter]
    fn summary_group(&self) -> Option<&str> {
        self.inner.summary_group()
    }

    /// The stub substituted for the turn's body, set exactly for `MASK`.
    #[getter]
    fn replacement(&self, py: Python<'_>) -> PyResult<Option<Py<PyReplacement>>> {
        self.inner
            .replacement()
            .map(|r| Py::new(py, PyReplacement { inner: r.clone() }))
            .transpose()
    }

    /// The JSON-shaped form used in plans.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        action_dict(py, &self.inner)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => (self.inner == other.get().inner)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> u64 {
        let replacement = self
            .inner
            .replacement()
            .map(|r| (r.content.to_string(), r.token_estimate));
        hash_of(&(
            self.inner.turn_id(),
            self.inner.action().as_str(),
            self.inner.summary_group(),
            replacement,
        ))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "TurnAction(turn_id={}, action={}, summary_group={}, replacement={})",
            slf.getattr("turn_id")?.repr()?,
            slf.getattr("action")?.repr()?,
            slf.getattr("summary_group")?.repr()?,
            slf.getattr("replacement")?.repr()?,
        ))
    }
}

/// `{"turn_id", "action", "summary_group", "replacement"}`, in the reference's key order.
pub(crate) fn action_dict<'py>(py: Python<'py>, a: &TurnAction) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("turn_id", a.turn_id())?;
    dict.set_item("action", a.action().as_str())?;
    dict.set_item("summary_group", a.summary_group())?;
    match a.replacement() {
        Some(r) => dict.set_item("replacement", replacement_dict(py, r)?)?,
        None => dict.set_item("replacement", py.None())?,
    }
    Ok(dict)
}

/// Work the caller must do before a plan can be applied. Frozen; hashable.
#[pyclass(frozen, module = "cutctx.types", name = "SummarizationRequest")]
pub(crate) struct PyRequest {
    pub(crate) inner: SummarizationRequest,
}

#[pymethods]
impl PyRequest {
    #[new]
    fn new(
        py: Python<'_>,
        group_id: String,
        turn_ids: &Bound<'_, PyAny>,
        target_tokens: i128,
        prompt_id: String,
    ) -> PyResult<Self> {
        let ids = turn_ids
            .try_iter()?
            .map(|id| {
                id.and_then(|id| id.extract::<String>())
                    .map(Arc::<str>::from)
            })
            .collect::<PyResult<Vec<_>>>()?;
        // The core checks every other rule first, as the reference does; a negative target is
        // the last of them and is outside the core's unsigned figures.
        let target = u64::try_from(target_tokens).unwrap_or(0);
        let inner = SummarizationRequest::new(group_id, ids, target, prompt_id).py(py)?;
        if target_tokens < 0 || u64::try_from(target_tokens).is_err() {
            let details = PyDict::new(py);
            details.set_item("group_id", inner.group_id())?;
            details.set_item("target_tokens", target_tokens)?;
            let group = pyo3::types::PyString::new(py, inner.group_id()).repr()?;
            return Err(registry::validation(
                py,
                format!(
                    "Summarization request {group} has a negative target_tokens or one beyond \
                     64 bits ({target_tokens})."
                ),
                &details,
            ));
        }
        Ok(Self { inner })
    }

    /// Names the request within its plan.
    #[getter]
    fn group_id(&self) -> &str {
        self.inner.group_id()
    }

    /// The turns folded into it, in transcript order.
    #[getter]
    fn turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.turn_ids().iter())
    }

    /// The estimate the summary is planned to cost.
    #[getter]
    fn target_tokens(&self) -> u64 {
        self.inner.target_tokens()
    }

    /// The versioned prompt record that produces the summary: a name, never text.
    #[getter]
    fn prompt_id(&self) -> &str {
        self.inner.prompt_id()
    }

    /// The id the executor gives the summary turn: `summary:<group_id>`.
    #[getter]
    fn summary_turn_id(&self) -> String {
        self.inner.summary_turn_id()
    }

    /// The JSON-shaped form used in plans.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        request_dict(py, &self.inner)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => (self.inner == other.get().inner)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> u64 {
        hash_of(&(
            self.inner.group_id(),
            self.inner.turn_ids(),
            self.inner.target_tokens(),
            self.inner.prompt_id(),
        ))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "SummarizationRequest(group_id={}, turn_ids={}, target_tokens={}, prompt_id={})",
            slf.getattr("group_id")?.repr()?,
            slf.getattr("turn_ids")?.repr()?,
            slf.get().inner.target_tokens(),
            slf.getattr("prompt_id")?.repr()?,
        ))
    }
}

/// `{"group_id", "turn_ids", "target_tokens", "prompt_id"}`, in the reference's key order.
pub(crate) fn request_dict<'py>(
    py: Python<'py>,
    r: &SummarizationRequest,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("group_id", r.group_id())?;
    dict.set_item("turn_ids", registry::str_list(py, r.turn_ids().iter())?)?;
    dict.set_item("target_tokens", r.target_tokens())?;
    dict.set_item("prompt_id", r.prompt_id())?;
    Ok(dict)
}
