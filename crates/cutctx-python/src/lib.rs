//! `cutctx._core`: the extension module behind the `cutctx` Python package.
//!
//! The Python package (`python/cutctx/`) is laid out as CutCtx 0.1.0's modules are; its types,
//! policies, rules and executor are the classes and functions of this module, each a thin
//! wrapper sharing the Rust core's values (`Arc`s, never copies of content). Converting a
//! `Transcript` of existing turns clones each turn's `Arc`s without validating its fields again,
//! and a compacted view creates a Python object per turn only when its `turns` are read.
//!
//! Errors are the core's [`cutctx::CompactionError`], raised as the Python classes the package
//! binds at import (`_bind`): `ValidationError` and the three `CompactionError` subclasses, with
//! the core's message and `details`.
//!
//! No `unsafe` is written here; PyO3's generated glue is the one exception to the workspace's
//! `forbid(unsafe_code)`, and `cargo xtask tidy` scans this crate for a hand-written `unsafe`.

#![deny(unsafe_code)]

mod batch;
pub mod formats;
mod invariants;
mod plan;
mod policies;
pub mod receipts;
mod registry;
mod session;
mod types;

use pyo3::prelude::*;

/// The module `cutctx._core`.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(registry::bind, m)?)?;
    m.add_class::<types::PyTurn>()?;
    m.add_class::<types::PyTranscript>()?;
    m.add_class::<types::PyBudget>()?;
    m.add_class::<types::PyReplacement>()?;
    m.add_class::<types::PyTurnAction>()?;
    m.add_class::<types::PyRequest>()?;
    m.add_class::<plan::PyPlan>()?;
    m.add_class::<plan::PyReport>()?;
    m.add_class::<plan::PyCompacted>()?;
    m.add_function(wrap_pyfunction!(plan::apply, m)?)?;
    m.add_class::<policies::PolicyCore>()?;
    m.add_function(wrap_pyfunction!(policies::drop_oldest_core, m)?)?;
    m.add_function(wrap_pyfunction!(policies::masking_core, m)?)?;
    m.add_function(wrap_pyfunction!(policies::summarizing_core, m)?)?;
    m.add_function(wrap_pyfunction!(policies::chain_core, m)?)?;
    m.add_function(wrap_pyfunction!(policies::group_id_for, m)?)?;
    m.add_function(wrap_pyfunction!(policies::stub_for, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::exchanges, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::untouchable_turn_ids, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::untouchable_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::removable_turn_ids, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::require_satisfiable_budget, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::estimate_after, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::build_plan, m)?)?;
    m.add_function(wrap_pyfunction!(invariants::validate_plan, m)?)?;
    // What the package knows of the providers and of its defaults, read here rather than copied.
    m.add("DEFAULT_PLACEHOLDER", cutctx::DEFAULT_PLACEHOLDER)?;
    m.add(
        "NO_SUMMARIZER_POLICY",
        cutctx_ops::session::NO_SUMMARIZER_POLICY,
    )?;
    m.add(
        "FORMATS",
        cutctx::formats::Format::ALL.map(cutctx::formats::Format::as_str),
    )?;
    m.add("LIST_KEYS", list_keys(m.py())?)?;
    m.add("SUMMARY_INSTRUCTION", cutctx::session::SUMMARY_INSTRUCTION)?;
    // The shipped policies' defaults, read by the Python classes' signatures.
    m.add(
        "DEFAULT_KEEP_RECENT_RESULTS",
        cutctx::ObservationMaskingPolicy::DEFAULT_KEEP_RECENT_RESULTS,
    )?;
    m.add(
        "DEFAULT_TARGET_RATIO",
        cutctx::SummarizingPolicy::DEFAULT_TARGET_RATIO,
    )?;
    m.add(
        "DEFAULT_MIN_SPAN_TURNS",
        cutctx::SummarizingPolicy::DEFAULT_MIN_SPAN_TURNS,
    )?;
    formats::register(m.py(), m)?;
    receipts::register(m.py(), m)?;
    session::register(m.py(), m)?;
    Ok(())
}

/// The key of each format's message list, by format name.
fn list_keys(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let keys = pyo3::types::PyDict::new(py);
    for format in cutctx::formats::Format::ALL {
        keys.set_item(format.as_str(), cutctx::formats::list_key(format))?;
    }
    Ok(keys)
}
