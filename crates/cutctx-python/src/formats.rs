//! `cutctx._core.formats`: compaction of OpenAI Chat, OpenAI Responses and Anthropic requests
//! for Python, as `cutctx compact --format F` does it, and their counts as `cutctx estimate`.
//!
//! The request arrives as JSON text (bytes or str) and leaves as JSON bytes: no Python object is
//! built per message, so the cost is the Rust parse, plan, apply and write. The steps are the
//! operations library's own functions (`cutctx_ops::formats::prepare` and `finish`, `estimate`), which `cutctx compact --format` runs too, so the output
//! is byte for byte the command's standard output, and the report is its `--report` file, with
//! the whole prompt's figures and the repairs. The one addition is `summarize`, a Python
//! callable standing where the CLI runs `--summarize-with CMD`: it gets the same JSON document,
//! as a dict.
//!
//! Failures raise `cutctx.formats.FormatCompactionError` with the CLI's stable code, its
//! message, and details that name ids and figures.

use std::collections::BTreeMap;

use cutctx::formats::{Format, FormatError};
use cutctx::model::details;
use cutctx::{Details, ErrorCode};
use cutctx_ops::OpsError;
use cutctx_ops::formats::{self as ops, FormatOptions, Prepared};
use cutctx_ops::summarizer::{SUMMARIZER_ERROR, Summarizer};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyType};
use serde_json::Value;

/// The CLI's code for options that do not go together.
const USAGE_ERROR: &str = "USAGE_ERROR";

create_exception!(
    cutctx.formats,
    FormatCompactionError,
    PyException,
    "A provider request could not be compacted; `code`, `message` and `details` say why."
);

/// The failure of one call, before it becomes a Python exception: the code, message and
/// details the CLI would print, or an exception a callback raised, passed through as the cause.
pub(crate) enum Failure {
    Cli(Coded),
    Callback(Coded, PyErr),
}

impl From<Coded> for Failure {
    fn from(e: Coded) -> Self {
        Self::Cli(e)
    }
}

impl From<cutctx::CompactionError> for Failure {
    fn from(e: cutctx::CompactionError) -> Self {
        Self::Cli(Coded::from(e))
    }
}

impl From<FormatError> for Failure {
    fn from(e: FormatError) -> Self {
        Self::Cli(Coded {
            code: e.code(),
            message: e.message(),
            details: e.details(),
        })
    }
}

/// A failure as the CLI reports it: a stable code, one line for people, and details that name
/// ids and figures. `cutctx._core.receipts` raises the same shape.
pub(crate) struct Coded {
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) details: Details,
}

impl Coded {
    pub(crate) fn input(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: "INPUT_ERROR",
            message: message.into(),
            details,
        }
    }

    pub(crate) fn validation(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: ErrorCode::Validation.as_str(),
            message: message.into(),
            details,
        }
    }
}

impl From<cutctx::CompactionError> for Coded {
    fn from(e: cutctx::CompactionError) -> Self {
        Self {
            code: e.code().as_str(),
            message: e.message().to_owned(),
            details: e.details().clone(),
        }
    }
}

/// Builds `exception(message)` with `code`, `message` and `details` (a dict) as attributes.
pub(crate) fn raise(py: Python<'_>, exception: &Bound<'_, PyType>, e: &Coded) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let instance = exception.call1((e.message.as_str(),))?;
        instance.setattr("code", e.code)?;
        instance.setattr("message", e.message.as_str())?;
        let details = Value::Object(e.details.clone().into_iter().collect());
        instance.setattr("details", json_to_py(py, &details)?)?;
        Ok(PyErr::from_value(instance))
    };
    build().unwrap_or_else(|err| err)
}

/// A JSON value as Python objects, through the standard `json` module: only small documents
/// (details, a summarizer's input, a verdict) take this road.
pub(crate) fn json_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (v.to_string(),))
}

/// `f` as the `FormatCompactionError` it raises.
pub(crate) fn to_pyerr(py: Python<'_>, f: Failure) -> PyErr {
    let ty = py.get_type::<FormatCompactionError>();
    match f {
        Failure::Cli(e) => raise(py, &ty, &e),
        Failure::Callback(e, cause) => {
            let err = raise(py, &ty, &e);
            err.set_cause(py, Some(cause));
            err
        }
    }
}

fn usage(message: &str, option: &str) -> Coded {
    Coded {
        code: USAGE_ERROR,
        message: message.to_owned(),
        details: details! { "option" => option },
    }
}

impl From<OpsError> for Coded {
    fn from(e: OpsError) -> Self {
        Self {
            code: e.code,
            message: e.message,
            details: e.details,
        }
    }
}

impl From<OpsError> for Failure {
    fn from(e: OpsError) -> Self {
        Self::Cli(Coded::from(e))
    }
}

/// The failure of an operation that called a `summarize` callable: the operations' error `e`
/// with its code, message and details, and, when the callable raised (`raised`), that
/// exception kept as the cause of the `FormatCompactionError` raised in its place. Used by
/// `compact_json` and by `SessionCore`'s calls alike, so both name a summarizer's failure the
/// same way.
pub(crate) fn summarizer_failure(e: OpsError, raised: Option<PyErr>) -> Failure {
    match raised {
        Some(cause) => Failure::Callback(Coded::from(e), cause),
        None => Failure::from(e),
    }
}

/// `summaries` as a map of strings; anything else is the caller's mistake, named by group id.
fn summaries_of(d: Option<&Bound<'_, PyDict>>) -> Result<BTreeMap<String, String>, Coded> {
    let mut map = BTreeMap::new();
    let Some(d) = d else { return Ok(map) };
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| {
            Coded::validation(
                "summaries must be keyed by group id strings.",
                details! { "document" => "summaries" },
            )
        })?;
        let value: String = v.extract().map_err(|_| {
            Coded::validation(
                format!("the summary of group {key} must be a string."),
                details! { "document" => "summaries", "group_id" => key.as_str() },
            )
        })?;
        map.insert(key, value);
    }
    Ok(map)
}

/// A Python `summarize` callable as the operations' [`Summarizer`]: it gets the document
/// `--summarize-with` sends its command, as a dict, and returns the summary. An exception it
/// raises is kept, to be the cause of the `FormatCompactionError` raised in its place.
pub(crate) struct CallableSummarizer<'a, 'py> {
    pub(crate) py: Python<'py>,
    pub(crate) callable: &'a Bound<'py, PyAny>,
    pub(crate) raised: Option<PyErr>,
}

impl Summarizer for CallableSummarizer<'_, '_> {
    fn summarize(&mut self, group_id: &str, input: &Value) -> Result<String, OpsError> {
        let fail = |message: String| OpsError {
            code: SUMMARIZER_ERROR,
            message,
            details: details! { "group_id" => group_id },
        };
        let called = json_to_py(self.py, input).and_then(|arg| self.callable.call1((arg,)));
        let returned = called.map_err(|cause| {
            self.raised = Some(cause);
            fail(format!(
                "the summarize callable raised for group {group_id}."
            ))
        })?;
        returned.extract().map_err(|_| {
            fail(format!(
                "the summarize callable returned something other than a string for group {group_id}."
            ))
        })
    }

    fn what(&self) -> &'static str {
        "the summarize callable returned"
    }
}

/// One call of `summarize` per request of the plan, in order, as `--summarize-with` runs its
/// command ([`Prepared::summaries_from`]).
fn run_summarize(
    py: Python<'_>,
    summarize: &Bound<'_, PyAny>,
    p: &mut Prepared,
    text: &str,
) -> Result<BTreeMap<String, String>, Failure> {
    let mut summarizer = CallableSummarizer {
        py,
        callable: summarize,
        raised: None,
    };
    p.summaries_from(&mut summarizer, text)
        .map_err(|e| summarizer_failure(e, summarizer.raised.take()))
}

/// The UTF-8 text of a request given as bytes or str, borrowed: never copied into a Python str.
pub(crate) fn text_of<'a>(data: &'a Bound<'_, PyAny>) -> Result<&'a str, Coded> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes()).map_err(|e| {
            Coded::input(
                format!(
                    "the transcript is not UTF-8: invalid byte at offset {}",
                    e.valid_up_to()
                ),
                details! { "document" => "the transcript", "offset" => e.valid_up_to() },
            )
        });
    }
    if let Ok(s) = data.cast::<PyString>() {
        return s.to_str().map_err(|_| {
            Coded::input(
                "the transcript is not UTF-8: it holds a lone surrogate",
                details! { "document" => "the transcript" },
            )
        });
    }
    Err(Coded::input(
        "the transcript must be bytes or str holding JSON",
        details! { "document" => "the transcript" },
    ))
}

/// `compact_json(data, format, max_tokens, ...)` → `(request bytes, report bytes or None)`.
/// With `report=False` the report is not made (`None`): nor is the plan hashed, which for a
/// long transcript costs as much as reading it.
#[pyfunction]
#[pyo3(signature = (
    data, format, max_tokens, *, protected_recent_turns = None, policy = None, prompt_id = None,
    estimator = None, summaries = None, summarize = None, reserve_output = None, repair = false,
    report = true, reasoning = "strip"
))]
#[expect(
    clippy::too_many_arguments,
    reason = "one argument per CLI option, all keyword-only"
)]
fn compact_json<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    format: &str,
    max_tokens: u64,
    protected_recent_turns: Option<u64>,
    policy: Option<String>,
    prompt_id: Option<String>,
    estimator: Option<String>,
    summaries: Option<&Bound<'py, PyDict>>,
    summarize: Option<&Bound<'py, PyAny>>,
    reserve_output: Option<u64>,
    repair: bool,
    report: bool,
    reasoning: &str,
) -> PyResult<(Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)> {
    let run = || -> Result<(String, String), Failure> {
        if summaries.is_some() && summarize.is_some() {
            return Err(usage("give summaries or summarize, not both", "summarize").into());
        }
        let format: Format = format.parse()?;
        let args = FormatOptions {
            format: Some(format),
            max_tokens: Some(max_tokens),
            protected_recent: protected_recent_turns,
            policy,
            prompt_id,
            estimator,
            reserve_output,
            repair,
            reasoning: reasoning.parse()?,
            summarizes: summaries.is_some() || summarize.is_some(),
            front_end: cutctx_ops::summarizer::FrontEnd::Python,
            ..FormatOptions::default()
        };
        let given = summaries_of(summaries)?;
        let text = text_of(data)?;
        // The Rust work runs without the interpreter lock unless a Python callable has to be
        // called in the middle.
        let mut prepared = py.detach(|| ops::prepare(&args, text))?;
        let made = match summarize {
            None => given,
            Some(f) => run_summarize(py, f, &mut prepared, text)?,
        };
        let keep = ops::Keep {
            compaction: false,
            report,
        };
        let done = py.detach(|| ops::finish(prepared, text, &made, keep))?;
        Ok((done.output.output, done.output.report))
    };
    let (output, report_text) = run().map_err(|f| to_pyerr(py, f))?;
    Ok((
        PyBytes::new(py, output.as_bytes()),
        report.then(|| PyBytes::new(py, report_text.as_bytes())),
    ))
}

/// `estimate_json(data, format, ...)` → what `cutctx estimate --format F` prints, as bytes.
#[pyfunction]
#[pyo3(signature = (data, format, *, estimator = None, reserve_output = None, repair = false))]
fn estimate_json<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    format: &str,
    estimator: Option<String>,
    reserve_output: Option<u64>,
    repair: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let run = || -> Result<String, Failure> {
        let format = format.parse::<Format>()?;
        let text = text_of(data)?;
        Ok(py
            .detach(|| ops::estimate(format, estimator.as_deref(), reserve_output, repair, text))?)
    };
    let out = run().map_err(|f| to_pyerr(py, f))?;
    Ok(PyBytes::new(py, out.as_bytes()))
}

/// Adds the submodule `cutctx._core.formats` to `m`.
///
/// # Errors
///
/// When the interpreter refuses to create the module or one of its attributes.
pub fn register(py: Python<'_>, m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(py, "formats")?;
    sub.add_function(wrap_pyfunction!(compact_json, &sub)?)?;
    sub.add_function(wrap_pyfunction!(estimate_json, &sub)?)?;
    crate::batch::register(&sub)?;
    sub.add(
        "FormatCompactionError",
        py.get_type::<FormatCompactionError>(),
    )?;
    sub.add("DEFAULT_PROMPT_ID", ops::DEFAULT_PROMPT_ID)?;
    sub.add("DEFAULT_POLICY", ops::DEFAULT_POLICY)?;
    sub.add("FORMATS", Format::ALL.map(Format::as_str))?;
    sub.add("POLICY_NAMES", cutctx::formats::POLICY_NAMES)?;
    m.add_submodule(&sub)?;
    Ok(())
}
