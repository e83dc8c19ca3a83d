//! `cutctx._core.formats`: compaction of OpenAI Chat, OpenAI Responses and Anthropic requests
//! for Python, as `cutctx compact --format F` does it.
//!
//! The request arrives as JSON text (bytes or str) and leaves as JSON bytes: no Python object is
//! built per message, so the cost is the Rust parse, plan, apply and write. The steps are the
//! CLI's own library calls in the CLI's order (estimate, parse, decide, fulfil, apply, write),
//! so the output is byte for byte the command's standard output, and the report is its
//! `--report` file. The one addition is `summarize`, a Python callable standing where the CLI
//! runs `--summarize-with CMD`: it gets the same JSON document, as a dict.
//!
//! Failures raise `cutctx.formats.FormatCompactionError` with the CLI's stable code, its
//! message, and details that name ids and figures.

use std::collections::BTreeMap;

use cutctx::Details;
use cutctx::formats::{EstimatorSpec, Format, FormatError, ProviderTranscript};
use cutctx::model::details;
use cutctx::{CompactionBudget, CompactionPlan, CompactionPolicy, ErrorCode, SummarizationRequest};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyType};
use serde_json::Value;

/// The code of a `summarize` callable that raised, or returned no summary: the CLI's code for
/// a failing `--summarize-with` command.
const SUMMARIZER_ERROR: &str = "SUMMARIZER_ERROR";

/// The CLI's code for options that do not go together.
const USAGE_ERROR: &str = "USAGE_ERROR";

/// The prompt id the summarizing policies use when none is given, as in the CLI.
const DEFAULT_PROMPT_ID: &str = "compaction.summarize.v1";

create_exception!(
    cutctx.formats,
    FormatCompactionError,
    PyException,
    "A provider request could not be compacted; `code`, `message` and `details` say why."
);

/// The failure of one call, before it becomes a Python exception: the code, message and
/// details the CLI would print, or an exception a callback raised, passed through as the cause.
enum Failure {
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

fn to_pyerr(py: Python<'_>, f: Failure) -> PyErr {
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

/// The options of one compaction, as the CLI's flags name them.
struct Options {
    format: Format,
    max_tokens: u64,
    protected_recent: u64,
    policy: Option<String>,
    prompt_id: Option<String>,
    estimator: Option<String>,
}

/// The policy the options name, as the CLI builds it for `--policy NAME`.
fn policy(o: &Options, spec: EstimatorSpec) -> Result<Box<dyn CompactionPolicy>, Failure> {
    let prompt = o.prompt_id.as_deref().unwrap_or(DEFAULT_PROMPT_ID);
    let name = o.policy.as_deref().unwrap_or("default_chain");
    cutctx::formats::policy_named(name, prompt, &spec)?.ok_or_else(|| {
        Coded::validation(
            format!(
                "unknown policy {name:?}; expected drop_oldest, observation_masking, \
                 summarizing or default_chain."
            ),
            details! { "policy" => name },
        )
        .into()
    })
}

/// `COMPACTION_SUMMARY_MISSING`, listing every request without a summary, as the CLI words it.
fn require_summaries(
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
) -> Result<(), Coded> {
    let missing: Vec<&SummarizationRequest> = plan
        .summarization_requests
        .iter()
        .filter(|r| !summaries.contains_key(r.group_id()))
        .collect();
    let Some(first) = missing.first() else {
        return Ok(());
    };
    let listed = Value::Array(
        missing
            .iter()
            .map(|r| {
                serde_json::json!({
                    "group_id": r.group_id(),
                    "prompt_id": r.prompt_id(),
                    "target_tokens": r.target_tokens(),
                    "turn_ids": r.turn_ids().iter().map(|id| &**id).collect::<Vec<_>>(),
                })
            })
            .collect(),
    );
    let mut details = details! {
        "group_id" => first.group_id(),
        "prompt_id" => first.prompt_id(),
        "target_tokens" => first.target_tokens(),
        "turn_ids" => first.turn_ids().iter().map(|id| &**id).collect::<Vec<_>>(),
    };
    details.insert("requests".into(), listed.clone());
    Err(Coded {
        code: ErrorCode::SummaryMissing.as_str(),
        message: format!(
            "{} summarization request(s) have no summary; fulfil them with summaries \
             (a dict {{group_id: summary}}) or summarize (a callable). Requests: {}",
            missing.len(),
            cutctx::model::canonical::canonical_json_value(&listed)
        ),
        details,
    })
}

/// The planning half: the request mapped to turns, and the plan.
struct Planned {
    pt: ProviderTranscript,
    plan: CompactionPlan,
    /// The whole prompt's parts.
    count: cutctx::formats::PromptCount,
}

fn plan(text: &str, o: &Options) -> Result<Planned, Failure> {
    let document: Value = serde_json::from_str(text).map_err(|e| {
        Coded::input(
            format!("the transcript is not valid JSON: {}", strip_position(&e)),
            details! { "document" => "the transcript", "line" => e.line(), "column" => e.column() },
        )
    })?;
    let spec: EstimatorSpec = match &o.estimator {
        Some(s) => s.parse()?,
        None => EstimatorSpec::default(),
    };
    let estimator = spec.estimator()?;
    // The document is handed over, not copied: the transcript keeps it, and applying the plan
    // moves its kept messages into the output (as the command line does).
    let pt = ProviderTranscript::from_document_with(o.format, document, estimator.as_ref())?;
    // The whole prompt, as the command line counts it: tools and the request's own output
    // limit come out of max_tokens before the turns are planned.
    let count = pt.prompt_count(pt.requested_output()?.unwrap_or(0));
    let turn_budget = count.turn_budget(o.max_tokens)?;
    let policy = policy(o, spec)?;
    let budget = CompactionBudget::new(turn_budget).with_protected_recent_turns(o.protected_recent);
    let plan = policy.decide(pt.transcript(), &budget)?;
    Ok(Planned { pt, plan, count })
}

/// serde_json appends " at line L column C"; the details carry those already.
fn strip_position(e: &serde_json::Error) -> String {
    let m = e.to_string();
    m.rfind(" at line ")
        .map_or(m.clone(), |i| m[..i].to_owned())
}

/// The applying half: the output text (the CLI's standard output) and the report file's text.
fn finish(
    text: &str,
    o: &Options,
    p: Planned,
    summaries: &BTreeMap<String, String>,
) -> Result<(String, String), Failure> {
    require_summaries(&p.plan, summaries)?;
    let turns = p.pt.transcript().len();
    let count = p.count.clone();
    let out = p.pt.apply_into(&p.plan, summaries)?;
    let unchanged = out.report.kept_turn_ids.len() == turns;
    let output = if unchanged {
        // Nothing was compacted: the request as it was, byte for byte.
        let mut same = text.to_owned();
        if !same.ends_with('\n') {
            same.push('\n');
        }
        same
    } else {
        let written = if text.trim().contains('\n') {
            serde_json::to_string_pretty(&out.document)
        } else {
            serde_json::to_string(&out.document)
        };
        written.map_err(|e| {
            Coded::validation(
                format!("the compacted request cannot be written as JSON: {e}"),
                details! { "format" => o.format.as_str() },
            )
        })? + "\n"
    };
    let report = cutctx::formats::report_text(&p.plan, &out.report, &count, o.max_tokens, None);
    Ok((output, report))
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

/// One call of `summarize` per request of the plan, in order, as `--summarize-with` runs its
/// command: the same JSON document in (as a dict), the summary out.
fn run_summarize(
    py: Python<'_>,
    summarize: &Bound<'_, PyAny>,
    p: &Planned,
) -> Result<BTreeMap<String, String>, Failure> {
    let mut summaries = BTreeMap::new();
    for request in &p.plan.summarization_requests {
        let group = request.group_id();
        let fail = |message: String| Coded {
            code: SUMMARIZER_ERROR,
            message,
            details: details! { "group_id" => group },
        };
        let input = p.pt.summarization_input(request);
        let called = json_to_py(py, &input).and_then(|arg| summarize.call1((arg,)));
        let returned = called.map_err(|cause| {
            Failure::Callback(
                fail(format!("the summarize callable raised for group {group}.")),
                cause,
            )
        })?;
        let summary: String = returned.extract().map_err(|_| {
            fail(format!(
                "the summarize callable returned something other than a string for group {group}."
            ))
        })?;
        if summary.trim().is_empty() {
            return Err(fail(format!(
                "the summarize callable returned no summary for group {group}."
            ))
            .into());
        }
        summaries.insert(group.to_owned(), summary);
    }
    Ok(summaries)
}

/// `compact_json(data, format, max_tokens, ...)` → `(request bytes, report bytes)`.
#[pyfunction]
#[pyo3(signature = (
    data, format, max_tokens, *, protected_recent_turns = None, policy = None, prompt_id = None,
    estimator = None, summaries = None, summarize = None
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
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let run = || -> Result<(String, String), Failure> {
        if summaries.is_some() && summarize.is_some() {
            return Err(usage("give summaries or summarize, not both", "summarize").into());
        }
        let format: Format = format.parse()?;
        let o = Options {
            format,
            max_tokens,
            protected_recent: protected_recent_turns
                .unwrap_or(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS),
            policy,
            prompt_id,
            estimator,
        };
        let given = summaries_of(summaries)?;
        // The bytes are borrowed, never copied into a Python str; the Rust work runs without
        // the interpreter lock unless a Python callable has to be called in the middle.
        let text: &str = if let Ok(b) = data.cast::<PyBytes>() {
            std::str::from_utf8(b.as_bytes()).map_err(|e| {
                Coded::input(
                    format!(
                        "the transcript is not UTF-8: invalid byte at offset {}",
                        e.valid_up_to()
                    ),
                    details! { "document" => "the transcript", "offset" => e.valid_up_to() },
                )
            })?
        } else if let Ok(s) = data.cast::<PyString>() {
            s.to_str().map_err(|_| {
                Coded::input(
                    "the transcript is not UTF-8: it holds a lone surrogate",
                    details! { "document" => "the transcript" },
                )
            })?
        } else {
            return Err(Coded::input(
                "the transcript must be bytes or str holding JSON",
                details! { "document" => "the transcript" },
            )
            .into());
        };
        match summarize {
            None => py.detach(|| {
                let planned = plan(text, &o)?;
                finish(text, &o, planned, &given)
            }),
            Some(f) => {
                let planned = py.detach(|| plan(text, &o))?;
                let made = run_summarize(py, f, &planned)?;
                py.detach(|| finish(text, &o, planned, &made))
            }
        }
    };
    let (output, report) = run().map_err(|f| to_pyerr(py, f))?;
    Ok((
        PyBytes::new(py, output.as_bytes()),
        PyBytes::new(py, report.as_bytes()),
    ))
}

/// Adds the submodule `cutctx._core.formats` to `m`.
///
/// # Errors
///
/// When the interpreter refuses to create the module or one of its attributes.
pub fn register(py: Python<'_>, m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(py, "formats")?;
    sub.add_function(wrap_pyfunction!(compact_json, &sub)?)?;
    crate::batch::register(&sub)?;
    sub.add(
        "FormatCompactionError",
        py.get_type::<FormatCompactionError>(),
    )?;
    sub.add("DEFAULT_PROMPT_ID", DEFAULT_PROMPT_ID)?;
    m.add_submodule(&sub)?;
    Ok(())
}
