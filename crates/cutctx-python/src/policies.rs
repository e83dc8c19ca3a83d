//! The shipped policies, the chain, and policies and estimators written in Python.
//!
//! A shipped policy is a `PolicyCore` around the core's policy. A chain's members are the
//! cores of shipped policies (the chain then decides in Rust, over shapes and deferred
//! masks) or any Python object with `name`, `version` and `decide`, which the chain calls
//! back through the core's `CompactionPolicy` trait, handing it a `Transcript` that shares the
//! projection's values.
//!
//! A Python exception raised inside a callback cannot cross the core's error type, so it is
//! kept aside (per thread: callbacks run on the thread that asked for the decision) and raised
//! as it was once the core returns.

use std::cell::RefCell;
use std::sync::Arc;

use cutctx::invariants::Analysis;
use cutctx::model::Parallelism;
use cutctx::model::canonical::{push_sha256_of_str, sha256_of_joined};
use cutctx::{
    CharRatioEstimator, CompactionBudget, CompactionError, CompactionPlan, CompactionPolicy,
    ContentDigests, DeferredMasks, DropOldestPolicy, ObservationMaskingPolicy, PolicyChain, Reads,
    Shape, ShapeDecision, SummarizingPolicy, TokenEstimator, Transcript,
};
use pyo3::prelude::*;

use crate::plan::PyPlan;
use crate::registry::IntoPy;
use crate::types::{PyBudget, PyTranscript, PyTurn};

thread_local! {
    /// The first exception a Python callback raised during the current decision.
    static PENDING: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps `err` to raise once the core returns, and gives the core an error to stop on.
fn keep_aside(err: PyErr) -> CompactionError {
    PENDING.with(|pending| {
        let mut pending = pending.borrow_mut();
        if pending.is_none() {
            *pending = Some(err);
        }
    });
    CompactionError::validation(
        "a policy or estimator written in Python raised an exception",
        cutctx::model::Details::new(),
    )
}

/// Runs a decision, raising a callback's own exception in place of the core's stand-in.
fn decide_raising<T>(
    py: Python<'_>,
    run: impl FnOnce() -> Result<T, CompactionError>,
) -> PyResult<T> {
    PENDING.with(|pending| pending.borrow_mut().take());
    let result = run();
    let pending = PENDING.with(|pending| pending.borrow_mut().take());
    match (pending, result) {
        (Some(err), _) => Err(err),
        (None, result) => result.py(py),
    }
}

/// A shipped policy (or chain) held by the core: `decide(transcript, budget)`.
#[pyclass(frozen, module = "cutctx._core", name = "PolicyCore")]
pub(crate) struct PolicyCore {
    inner: Arc<dyn CompactionPolicy>,
}

#[pymethods]
impl PolicyCore {
    /// The plan for `transcript` under `budget`.
    fn decide(
        &self,
        py: Python<'_>,
        transcript: PyRef<'_, PyTranscript>,
        budget: PyRef<'_, PyBudget>,
    ) -> PyResult<Py<PyPlan>> {
        let plan = decide_raising(py, || self.inner.decide(&transcript.inner, &budget.inner))?;
        PyPlan::wrap(py, plan)
    }

    /// The policy's name, as plans record it.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The policy's version.
    #[getter]
    fn version(&self) -> &str {
        self.inner.version()
    }
}

fn core(policy: impl CompactionPolicy + 'static) -> PolicyCore {
    PolicyCore {
        inner: Arc::new(policy),
    }
}

/// The core of `DropOldestPolicy`.
#[pyfunction]
pub(crate) fn drop_oldest_core() -> PolicyCore {
    core(DropOldestPolicy)
}

/// The core of `SummarizingPolicy`; its arguments' types are checked by the caller.
#[pyfunction]
pub(crate) fn summarizing_core(
    py: Python<'_>,
    prompt_id: String,
    target_ratio: f64,
    min_span_turns: usize,
) -> PyResult<PolicyCore> {
    let policy = SummarizingPolicy::new(prompt_id)
        .and_then(|p| p.with_target_ratio(target_ratio))
        .and_then(|p| p.with_min_span_turns(min_span_turns))
        .py(py)?;
    Ok(core(policy))
}

/// The core of `ObservationMaskingPolicy`. `estimator` is an injected Python estimator;
/// `injected_ratio` the ratio of an injected `CharRatioEstimator`, estimated in Rust. Either
/// way the plans record no ratio, as the reference's do for any injected estimator.
#[pyfunction]
#[pyo3(signature = (keep_recent_results, placeholder, estimator=None, injected_ratio=None))]
pub(crate) fn masking_core(
    py: Python<'_>,
    keep_recent_results: usize,
    placeholder: String,
    estimator: Option<Py<PyAny>>,
    injected_ratio: Option<f64>,
) -> PyResult<PolicyCore> {
    let mut policy = ObservationMaskingPolicy::new(keep_recent_results)
        .and_then(|p| p.with_placeholder(placeholder))
        .py(py)?;
    if let Some(ratio) = injected_ratio {
        policy = policy.with_estimator(Box::new(CharRatioEstimator::new(ratio).py(py)?));
    } else if let Some(estimator) = estimator {
        // Called back on this thread only: no worker thread may wait on the interpreter.
        policy = policy
            .with_estimator(Box::new(PyEstimator(estimator)))
            .with_parallelism(Parallelism::Sequential);
    }
    Ok(core(policy))
}

/// The core of `PolicyChain`: each member a `PolicyCore` or a Python policy object.
#[pyfunction]
pub(crate) fn chain_core(py: Python<'_>, members: Vec<Bound<'_, PyAny>>) -> PyResult<PolicyCore> {
    let mut policies: Vec<Box<dyn CompactionPolicy>> = Vec::with_capacity(members.len());
    let mut sequential = false;
    for member in members {
        if let Ok(shipped) = member.cast::<PolicyCore>() {
            policies.push(Box::new(Shared(Arc::clone(&shipped.get().inner))));
        } else {
            sequential = true;
            policies.push(Box::new(PyPolicy {
                name: member.getattr("name")?.extract()?,
                version: member.getattr("version")?.extract()?,
                object: member.unbind(),
            }));
        }
    }
    let chain = PolicyChain::new(policies).py(py)?;
    Ok(core(if sequential {
        chain.with_parallelism(Parallelism::Sequential)
    } else {
        chain
    }))
}

/// `span-` and the first sixteen hex digits of the sha256 of the ids joined by NUL.
#[pyfunction]
pub(crate) fn group_id_for(turn_ids: Vec<String>) -> String {
    let digest = sha256_of_joined(&turn_ids, "\u{0}");
    format!(
        "{}{}",
        cutctx::GROUP_ID_PREFIX,
        digest.get(..16).unwrap_or(&digest)
    )
}

/// The text that replaces a masked turn's body: the label, the estimate and the digest.
#[pyfunction]
pub(crate) fn stub_for(turn: PyRef<'_, PyTurn>, placeholder: &str) -> String {
    let mut stub = format!(
        "{placeholder} (original: {} tokens, sha256:",
        turn.inner.token_estimate()
    );
    push_sha256_of_str(&mut stub, turn.inner.content());
    stub.push(')');
    stub
}

/// A shipped policy shared between its Python object and the chains it is a member of.
struct Shared(Arc<dyn CompactionPolicy>);

impl CompactionPolicy for Shared {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn version(&self) -> &str {
        self.0.version()
    }

    fn decide(
        &self,
        transcript: &Transcript,
        budget: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        self.0.decide(transcript, budget)
    }

    fn decide_with_analysis(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
    ) -> Result<CompactionPlan, CompactionError> {
        self.0.decide_with_analysis(transcript, analysis)
    }

    fn reads(&self) -> Reads {
        self.0.reads()
    }

    fn decide_shape(&self, shape: &Shape<'_>) -> Option<Result<ShapeDecision, CompactionError>> {
        self.0.decide_shape(shape)
    }

    fn decide_masks(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
    ) -> Option<Result<DeferredMasks, CompactionError>> {
        self.0.decide_masks(transcript, analysis)
    }

    fn decide_with_digests(
        &self,
        transcript: &Transcript,
        analysis: &Analysis,
        digests: &dyn ContentDigests,
    ) -> Option<Result<CompactionPlan, CompactionError>> {
        self.0.decide_with_digests(transcript, analysis, digests)
    }
}

/// A policy written in Python, called back with a `Transcript` sharing the projection.
struct PyPolicy {
    object: Py<PyAny>,
    name: String,
    version: String,
}

impl CompactionPolicy for PyPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn decide(
        &self,
        transcript: &Transcript,
        budget: &CompactionBudget,
    ) -> Result<CompactionPlan, CompactionError> {
        Python::attach(|py| {
            let call = || -> PyResult<CompactionPlan> {
                let transcript = PyTranscript::wrap(py, transcript.clone())?;
                let budget = Py::new(py, PyBudget { inner: *budget })?;
                let plan = self
                    .object
                    .bind(py)
                    .call_method1("decide", (transcript, budget))?;
                let plan = plan.cast::<PyPlan>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "policy {:?} returned something other than a CompactionPlan",
                        self.name
                    ))
                })?;
                Ok(plan.get().inner.clone())
            };
            call().map_err(keep_aside)
        })
    }
}

/// A token estimator written in Python (`estimate_tokens(text) -> int`).
struct PyEstimator(Py<PyAny>);

impl TokenEstimator for PyEstimator {
    fn estimate_tokens(&self, text: &str) -> u64 {
        Python::attach(|py| {
            let estimate = self
                .0
                .bind(py)
                .call_method1("estimate_tokens", (text,))
                .and_then(|value| value.extract::<u64>());
            estimate.unwrap_or_else(|err| {
                let _ = keep_aside(err);
                // Never used: the decision is refused with the estimator's own error.
                u64::MAX
            })
        })
    }
}
