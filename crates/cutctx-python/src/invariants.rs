//! `cutctx._invariants`: the rules' own functions, answered by the core's `Analysis`.

use cutctx::invariants::{self as rules, Analysis, Decisions};
use cutctx::model::PlanDraft;
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyTuple};

use crate::plan::{PyPlan, extract_actions, extract_requests};
use crate::registry::{self, IntoPy};
use crate::types::{PyBudget, PyTranscript};

/// The tool exchanges: tuples of turn ids, by each exchange's earliest turn.
#[pyfunction]
pub(crate) fn exchanges<'py>(
    py: Python<'py>,
    transcript: PyRef<'_, PyTranscript>,
) -> PyResult<Bound<'py, PyTuple>> {
    let ids = transcript.inner.turn_id_arcs();
    let groups = transcript
        .inner
        .exchanges()
        .iter()
        .map(|members| registry::str_tuple(py, members.iter().map(|&p| &ids[p])))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, groups)
}

fn id_set<'py>(
    py: Python<'py>,
    transcript: &PyTranscript,
    flags: &[bool],
) -> PyResult<Bound<'py, PyFrozenSet>> {
    let ids = transcript.inner.turn_id_arcs();
    let chosen: Vec<&str> = flags
        .iter()
        .zip(ids)
        .filter(|(flag, _)| **flag)
        .map(|(_, id)| &**id)
        .collect();
    PyFrozenSet::new(py, chosen)
}

/// Every system turn, every pinned turn and the protected tail.
#[pyfunction]
pub(crate) fn untouchable_turn_ids<'py>(
    py: Python<'py>,
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
) -> PyResult<Bound<'py, PyFrozenSet>> {
    let analysis = Analysis::of(&transcript.inner, &budget.inner);
    id_set(py, &transcript, analysis.untouchable())
}

/// The untouchable turns' combined estimate: the floor no policy can go below.
#[pyfunction]
pub(crate) fn untouchable_tokens(
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
) -> u64 {
    Analysis::of(&transcript.inner, &budget.inner).untouchable_tokens()
}

/// The turns a policy may remove: the untouchable set closed over tool exchanges.
#[pyfunction]
pub(crate) fn removable_turn_ids<'py>(
    py: Python<'py>,
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
) -> PyResult<Bound<'py, PyFrozenSet>> {
    let analysis = Analysis::of(&transcript.inner, &budget.inner);
    id_set(py, &transcript, analysis.removable())
}

/// Refuses a budget below the untouchable floor (`BudgetUnsatisfiable`).
#[pyfunction]
pub(crate) fn require_satisfiable_budget(
    py: Python<'_>,
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
) -> PyResult<()> {
    rules::require_satisfiable_budget(&transcript.inner, &budget.inner).py(py)
}

/// The estimate of the view these actions and requests would produce.
#[pyfunction]
pub(crate) fn estimate_after(
    transcript: PyRef<'_, PyTranscript>,
    actions: &Bound<'_, PyAny>,
    summarization_requests: &Bound<'_, PyAny>,
) -> PyResult<u128> {
    let actions = extract_actions(actions)?;
    let requests = extract_requests(summarization_requests)?;
    Ok(rules::estimate_after(
        &transcript.inner,
        &actions,
        &requests,
    ))
}

/// A validated plan from a policy's decisions, its figures derived.
#[pyfunction]
#[pyo3(signature = (*, transcript, budget, actions, summarization_requests=None, policy_name, policy_version, estimator_ratio=None))]
#[expect(
    clippy::too_many_arguments,
    reason = "the reference's keyword arguments"
)]
pub(crate) fn build_plan(
    py: Python<'_>,
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
    actions: &Bound<'_, PyAny>,
    summarization_requests: Option<&Bound<'_, PyAny>>,
    policy_name: &str,
    policy_version: &str,
    estimator_ratio: Option<f64>,
) -> PyResult<Py<PyPlan>> {
    let decisions = Decisions {
        actions: extract_actions(actions)?,
        summarization_requests: match summarization_requests {
            Some(requests) => extract_requests(requests)?,
            None => Vec::new(),
        },
        estimator_ratio,
    };
    let analysis = Analysis::of(&transcript.inner, &budget.inner);
    let plan = rules::build_plan(
        &transcript.inner,
        &analysis,
        decisions,
        policy_name,
        policy_version,
    )
    .py(py)?;
    PyPlan::wrap(py, plan)
}

/// Refuses a plan that breaks any rule for `transcript` under `budget`.
#[pyfunction]
pub(crate) fn validate_plan(
    py: Python<'_>,
    plan: PyRef<'_, PyPlan>,
    transcript: PyRef<'_, PyTranscript>,
    budget: PyRef<'_, PyBudget>,
) -> PyResult<()> {
    let draft: PlanDraft = plan.inner.draft().clone();
    cutctx::CompactionPlan::validate(draft, &transcript.inner, &budget.inner)
        .map(drop)
        .py(py)
}
