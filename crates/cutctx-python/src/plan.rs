//! Plans, reports, compacted views, and applying a plan.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use cutctx::model::{CompactionReport, PlanDraft, SummarizationRequest, TurnAction};
use cutctx::{CompactionPlan, executor};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::registry::{self, IntoPy};
use crate::types::{self, PyBudget, PyRequest, PyTranscript, PyTurnAction};

/// What a policy decided for one transcript against one budget: validated, always.
///
/// Built by a policy, by `build_plan`, or directly with the `transcript` and `budget` it is a
/// plan for, which are checked against it and then not kept.
#[pyclass(frozen, module = "cutctx.types", name = "CompactionPlan")]
pub(crate) struct PyPlan {
    pub(crate) inner: CompactionPlan,
    actions: PyOnceLock<Py<PyTuple>>,
    requests: PyOnceLock<Py<PyTuple>>,
}

impl PyPlan {
    /// A Python plan around a validated core plan.
    pub(crate) fn wrap(py: Python<'_>, inner: CompactionPlan) -> PyResult<Py<Self>> {
        Py::new(
            py,
            Self {
                inner,
                actions: PyOnceLock::new(),
                requests: PyOnceLock::new(),
            },
        )
    }
}

/// Reads a sequence of `TurnAction` values.
pub(crate) fn extract_actions(actions: &Bound<'_, PyAny>) -> PyResult<Vec<TurnAction>> {
    let mut out = Vec::new();
    for item in actions.try_iter()? {
        out.push(item?.cast::<PyTurnAction>()?.get().inner.clone());
    }
    Ok(out)
}

/// Reads a sequence of `SummarizationRequest` values.
pub(crate) fn extract_requests(requests: &Bound<'_, PyAny>) -> PyResult<Vec<SummarizationRequest>> {
    let mut out = Vec::new();
    for item in requests.try_iter()? {
        out.push(item?.cast::<PyRequest>()?.get().inner.clone());
    }
    Ok(out)
}

/// A declared figure: a negative one cannot be right, and is declared as the largest, which
/// the arithmetic rule then refuses with the figures it derived.
fn figure(value: i128) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

#[pymethods]
impl PyPlan {
    #[new]
    #[pyo3(signature = (*, actions, summarization_requests=None, tokens_before, tokens_after_estimate, policy_name, policy_version, estimator_ratio=None, budget_unmet=false, transcript, budget))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the reference's keyword arguments"
    )]
    fn new(
        py: Python<'_>,
        actions: &Bound<'_, PyAny>,
        summarization_requests: Option<&Bound<'_, PyAny>>,
        tokens_before: i128,
        tokens_after_estimate: i128,
        policy_name: String,
        policy_version: String,
        estimator_ratio: Option<f64>,
        budget_unmet: bool,
        transcript: PyRef<'_, PyTranscript>,
        budget: PyRef<'_, PyBudget>,
    ) -> PyResult<Self> {
        let draft = PlanDraft {
            actions: extract_actions(actions)?,
            budget_unmet,
            estimator_ratio,
            policy_name,
            policy_version,
            summarization_requests: match summarization_requests {
                Some(requests) => extract_requests(requests)?,
                None => Vec::new(),
            },
            tokens_after_estimate: figure(tokens_after_estimate),
            tokens_before: figure(tokens_before),
        };
        let inner = CompactionPlan::validate(draft, &transcript.inner, &budget.inner).py(py)?;
        Ok(Self {
            inner,
            actions: PyOnceLock::new(),
            requests: PyOnceLock::new(),
        })
    }

    /// One action per turn, in transcript order.
    #[getter]
    fn actions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let tuple = self
            .actions
            .get_or_try_init(py, || -> PyResult<Py<PyTuple>> {
                let items = self
                    .inner
                    .actions
                    .iter()
                    .map(|a| Py::new(py, PyTurnAction { inner: a.clone() }))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(PyTuple::new(py, items)?.unbind())
            })?;
        Ok(tuple.bind(py).clone())
    }

    /// The requests the caller must fulfil, by the position of each group's first turn.
    #[getter]
    fn summarization_requests<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let tuple = self
            .requests
            .get_or_try_init(py, || -> PyResult<Py<PyTuple>> {
                let items = self
                    .inner
                    .summarization_requests
                    .iter()
                    .map(|r| Py::new(py, PyRequest { inner: r.clone() }))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(PyTuple::new(py, items)?.unbind())
            })?;
        Ok(tuple.bind(py).clone())
    }

    /// The transcript's estimate.
    #[getter]
    fn tokens_before(&self) -> u64 {
        self.inner.tokens_before
    }

    /// The applied view's estimate.
    #[getter]
    fn tokens_after_estimate(&self) -> u64 {
        self.inner.tokens_after_estimate
    }

    /// The deciding policy's name.
    #[getter]
    fn policy_name(&self) -> &str {
        &self.inner.policy_name
    }

    /// The deciding policy's version.
    #[getter]
    fn policy_version(&self) -> &str {
        &self.inner.policy_version
    }

    /// The default estimator's ratio when it produced a figure on this plan, else `None`.
    #[getter]
    fn estimator_ratio(&self) -> Option<f64> {
        self.inner.estimator_ratio
    }

    /// Whether the plan is still over budget.
    #[getter]
    fn budget_unmet(&self) -> bool {
        self.inner.budget_unmet
    }

    /// The JSON-shaped form: the golden format, and what a caller persists.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        dict.set_item("policy_name", &self.inner.policy_name)?;
        dict.set_item("policy_version", &self.inner.policy_version)?;
        dict.set_item("tokens_before", self.inner.tokens_before)?;
        dict.set_item("tokens_after_estimate", self.inner.tokens_after_estimate)?;
        dict.set_item("estimator_ratio", self.inner.estimator_ratio)?;
        dict.set_item("budget_unmet", self.inner.budget_unmet)?;
        let actions = PyList::empty(py);
        for action in &self.inner.actions {
            actions.append(types::action_dict(py, action)?)?;
        }
        dict.set_item("actions", actions)?;
        let requests = PyList::empty(py);
        for request in &self.inner.summarization_requests {
            requests.append(types::request_dict(py, request)?)?;
        }
        dict.set_item("summarization_requests", requests)?;
        Ok(dict)
    }

    /// The sha256 of the plan's canonical JSON: the id a report is linked by.
    fn plan_hash(&self) -> String {
        self.inner.plan_hash()
    }

    /// The plan's canonical JSON, byte-identical for equal plans.
    fn canonical_json(&self) -> String {
        self.inner.canonical_json()
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
        // Equal plans have equal bytes, so their hashes agree.
        let digest = self.inner.plan_hash();
        u64::from_str_radix(digest.get(..15).unwrap_or("0"), 16).unwrap_or(0)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = slf.get();
        Ok(format!(
            "CompactionPlan(actions={}, summarization_requests={}, tokens_before={}, \
             tokens_after_estimate={}, policy_name={}, policy_version={}, estimator_ratio={}, \
             budget_unmet={})",
            slf.getattr("actions")?.repr()?,
            slf.getattr("summarization_requests")?.repr()?,
            this.inner.tokens_before,
            this.inner.tokens_after_estimate,
            slf.getattr("policy_name")?.repr()?,
            slf.getattr("policy_version")?.repr()?,
            slf.getattr("estimator_ratio")?.repr()?,
            if this.inner.budget_unmet {
                "True"
            } else {
                "False"
            },
        ))
    }
}

/// What was done to a transcript: the `context.compacted` event body. Frozen; hashable.
///
/// A report `apply` makes carries its plan's hash only once it is read: hashing a large plan
/// costs more than the rest of applying it, and a caller sending the view on may never read
/// the report.
#[pyclass(frozen, module = "cutctx.types", name = "CompactionReport")]
pub(crate) struct PyReport {
    /// The report; its `plan_hash` is empty while `plan` is set.
    inner: CompactionReport,
    /// The plan whose hash the report carries, when not hashed yet.
    plan: Option<Py<PyPlan>>,
    /// `plan`'s hash, made on first read.
    hash: OnceLock<String>,
}

impl PyReport {
    /// The plan's hash, made now if it was left for later.
    fn plan_hash_str(&self) -> &str {
        match &self.plan {
            Some(plan) => self.hash.get_or_init(|| plan.get().inner.plan_hash()),
            None => &self.inner.plan_hash,
        }
    }

    /// Equal by value, the plan's hash included however it was made.
    fn same(&self, other: &Self) -> bool {
        // Every field but the hash, by name: a field added to the report cannot be missed.
        let CompactionReport {
            budget_unmet,
            dropped_turn_ids,
            estimator_ratio,
            kept_turn_ids,
            masked_turn_ids,
            plan_hash: _,
            policy_name,
            policy_version,
            summarized_turn_ids,
            summary_turn_ids,
            tokens_after_estimate,
            tokens_before,
            turns_after,
            turns_before,
        } = &self.inner;
        let o = &other.inner;
        *budget_unmet == o.budget_unmet
            && *dropped_turn_ids == o.dropped_turn_ids
            && *estimator_ratio == o.estimator_ratio
            && *kept_turn_ids == o.kept_turn_ids
            && *masked_turn_ids == o.masked_turn_ids
            && *policy_name == o.policy_name
            && *policy_version == o.policy_version
            && *summarized_turn_ids == o.summarized_turn_ids
            && *summary_turn_ids == o.summary_turn_ids
            && *tokens_after_estimate == o.tokens_after_estimate
            && *tokens_before == o.tokens_before
            && *turns_after == o.turns_after
            && *turns_before == o.turns_before
            && self.plan_hash_str() == other.plan_hash_str()
    }
}

fn ids(items: &Bound<'_, PyAny>) -> PyResult<Vec<Arc<str>>> {
    items
        .try_iter()?
        .map(|id| {
            id.and_then(|id| id.extract::<String>())
                .map(Arc::<str>::from)
        })
        .collect()
}

/// The report's fields, in the reference's order, as `(name, value)`.
fn report_items<'py>(
    py: Python<'py>,
    report: &PyReport,
) -> PyResult<Vec<(&'static str, Bound<'py, PyAny>)>> {
    let r = &report.inner;
    let list = |v: &[Arc<str>]| registry::str_list(py, v.iter()).map(Bound::into_any);
    Ok(vec![
        (
            "plan_hash",
            report.plan_hash_str().into_pyobject(py)?.into_any(),
        ),
        (
            "policy_name",
            r.policy_name.as_str().into_pyobject(py)?.into_any(),
        ),
        (
            "policy_version",
            r.policy_version.as_str().into_pyobject(py)?.into_any(),
        ),
        (
            "tokens_before",
            r.tokens_before.into_pyobject(py)?.into_any(),
        ),
        (
            "tokens_after_estimate",
            r.tokens_after_estimate.into_pyobject(py)?.into_any(),
        ),
        (
            "estimator_ratio",
            r.estimator_ratio.into_pyobject(py)?.into_any(),
        ),
        (
            "budget_unmet",
            r.budget_unmet.into_pyobject(py)?.to_owned().into_any(),
        ),
        ("turns_before", r.turns_before.into_pyobject(py)?.into_any()),
        ("turns_after", r.turns_after.into_pyobject(py)?.into_any()),
        ("kept_turn_ids", list(&r.kept_turn_ids)?),
        ("masked_turn_ids", list(&r.masked_turn_ids)?),
        ("summarized_turn_ids", list(&r.summarized_turn_ids)?),
        ("dropped_turn_ids", list(&r.dropped_turn_ids)?),
        (
            "summary_turn_ids",
            registry::str_list(py, r.summary_turn_ids.iter())?.into_any(),
        ),
    ])
}

#[pymethods]
impl PyReport {
    #[new]
    #[pyo3(signature = (*, plan_hash, policy_name, policy_version, tokens_before, tokens_after_estimate, estimator_ratio, budget_unmet, turns_before, turns_after, kept_turn_ids, masked_turn_ids, summarized_turn_ids, dropped_turn_ids, summary_turn_ids))]
    #[expect(
        clippy::too_many_arguments,
        reason = "the reference's keyword arguments"
    )]
    fn new(
        plan_hash: String,
        policy_name: String,
        policy_version: String,
        tokens_before: u64,
        tokens_after_estimate: u64,
        estimator_ratio: Option<f64>,
        budget_unmet: bool,
        turns_before: u64,
        turns_after: u64,
        kept_turn_ids: &Bound<'_, PyAny>,
        masked_turn_ids: &Bound<'_, PyAny>,
        summarized_turn_ids: &Bound<'_, PyAny>,
        dropped_turn_ids: &Bound<'_, PyAny>,
        summary_turn_ids: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: CompactionReport {
                budget_unmet,
                dropped_turn_ids: ids(dropped_turn_ids)?,
                estimator_ratio,
                kept_turn_ids: ids(kept_turn_ids)?,
                masked_turn_ids: ids(masked_turn_ids)?,
                plan_hash,
                policy_name,
                policy_version,
                summarized_turn_ids: ids(summarized_turn_ids)?,
                summary_turn_ids: ids(summary_turn_ids)?
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                tokens_after_estimate,
                tokens_before,
                turns_after,
                turns_before,
            },
            plan: None,
            hash: OnceLock::new(),
        })
    }

    /// The plan's hash: the audit link back to the plan.
    #[getter]
    fn plan_hash(&self) -> &str {
        self.plan_hash_str()
    }

    /// From the plan.
    #[getter]
    fn policy_name(&self) -> &str {
        &self.inner.policy_name
    }

    /// From the plan.
    #[getter]
    fn policy_version(&self) -> &str {
        &self.inner.policy_version
    }

    /// From the plan.
    #[getter]
    fn tokens_before(&self) -> u64 {
        self.inner.tokens_before
    }

    /// From the plan; an estimate, never a count.
    #[getter]
    fn tokens_after_estimate(&self) -> u64 {
        self.inner.tokens_after_estimate
    }

    /// From the plan.
    #[getter]
    fn estimator_ratio(&self) -> Option<f64> {
        self.inner.estimator_ratio
    }

    /// From the plan.
    #[getter]
    fn budget_unmet(&self) -> bool {
        self.inner.budget_unmet
    }

    /// How many turns went in.
    #[getter]
    fn turns_before(&self) -> u64 {
        self.inner.turns_before
    }

    /// How many are in the view, summary turns included.
    #[getter]
    fn turns_after(&self) -> u64 {
        self.inner.turns_after
    }

    /// Passed through unchanged, in transcript order.
    #[getter]
    fn kept_turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.kept_turn_ids.iter())
    }

    /// Body replaced by a stub, in transcript order.
    #[getter]
    fn masked_turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.masked_turn_ids.iter())
    }

    /// Folded into a summary, in transcript order.
    #[getter]
    fn summarized_turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.summarized_turn_ids.iter())
    }

    /// Removed from the view, in transcript order.
    #[getter]
    fn dropped_turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.dropped_turn_ids.iter())
    }

    /// The summary turns that replaced them, in plan order.
    #[getter]
    fn summary_turn_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        registry::str_tuple(py, self.inner.summary_turn_ids.iter())
    }

    /// The `context.compacted` event body, ready to serialize.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in report_items(py, self)? {
            dict.set_item(key, value)?;
        }
        Ok(dict)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => self
                .same(other.get())
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind(),
            Err(_) => py.NotImplemented(),
        })
    }

    fn __hash__(&self) -> u64 {
        u64::from_str_radix(self.plan_hash_str().get(..15).unwrap_or("0"), 16)
            .unwrap_or(0)
            .wrapping_add(self.inner.turns_after)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let parts = report_items(py, self)?
            .into_iter()
            .map(|(key, value)| {
                // The id lists are tuples on the report itself.
                let value = match value.cast::<PyList>() {
                    Ok(list) => list.to_tuple().into_any(),
                    Err(_) => value,
                };
                Ok(format!("{key}={}", value.repr()?))
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!("CompactionReport({})", parts.join(", ")))
    }
}

/// The view to send, and the account of how it was reached.
#[pyclass(frozen, module = "cutctx.types", name = "CompactedTranscript")]
pub(crate) struct PyCompacted {
    transcript: Py<PyTranscript>,
    report: Py<PyReport>,
}

#[pymethods]
impl PyCompacted {
    #[new]
    fn new(transcript: Py<PyTranscript>, report: Py<PyReport>) -> Self {
        Self { transcript, report }
    }

    /// The compacted view: a new transcript.
    #[getter]
    fn transcript(&self, py: Python<'_>) -> Py<PyTranscript> {
        self.transcript.clone_ref(py)
    }

    /// What was done, as the `context.compacted` event body.
    #[getter]
    fn report(&self, py: Python<'_>) -> Py<PyReport> {
        self.report.clone_ref(py)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        Ok(match other.cast::<Self>() {
            Ok(other) => {
                let other = other.get();
                let same = self.transcript.get().inner == other.transcript.get().inner
                    && self.report.get().same(other.report.get());
                same.into_pyobject(py)?.to_owned().into_any().unbind()
            }
            Err(_) => py.NotImplemented(),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "CompactedTranscript(transcript={}, report={})",
            self.transcript.bind(py).repr()?,
            self.report.bind(py).repr()?
        ))
    }
}

/// Applies `plan` to `transcript` with the caller's `summaries` (keyed by group id).
///
/// Only the plan's own groups are looked up in `summaries`: entries for other groups are
/// ignored, as the reference ignores them.
#[pyfunction]
pub(crate) fn apply(
    py: Python<'_>,
    transcript: Bound<'_, PyTranscript>,
    plan: Bound<'_, PyPlan>,
    summaries: &Bound<'_, PyAny>,
) -> PyResult<PyCompacted> {
    let (source, planned) = (transcript.get(), plan.get());
    let mut supplied = BTreeMap::new();
    for request in &planned.inner.summarization_requests {
        let key = request.group_id();
        if summaries.contains(key)? {
            let text: String = summaries.get_item(key)?.extract()?;
            supplied.insert(key.to_owned(), text);
        }
    }
    // Pure Rust from here: other Python threads run meanwhile. The plan's hash is made when the
    // report's is first read.
    let compacted = py
        .detach(|| executor::apply_unhashed(&source.inner, &planned.inner, &supplied))
        .py(py)?;
    Ok(PyCompacted {
        transcript: PyTranscript::view(
            py,
            compacted.transcript,
            transcript.unbind(),
            plan.clone().unbind(),
        )?,
        report: Py::new(
            py,
            PyReport {
                inner: compacted.report,
                plan: Some(plan.unbind()),
                hash: OnceLock::new(),
            },
        )?,
    })
}
