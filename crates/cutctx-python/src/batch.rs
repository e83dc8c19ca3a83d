//! `cutctx._core.formats.compact_batch_json`: a batch of provider requests through the
//! operations library's batch (`cutctx_ops::batch::compact_all`), the workers and the function
//! behind `cutctx batch`, so each output is byte for byte that command's line.
//!
//! The texts are copied out of Python once, the whole batch is compacted on every core without
//! the interpreter lock, and a failed request becomes `None` beside its error, as `cutctx
//! batch` writes `null` and lists the error; one failure never stops the batch.

use std::num::NonZeroUsize;

use cutctx::formats::Format;
use cutctx_ops::formats::{self, FormatOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// One failed request: its position in the batch, the CLI's code, and the message.
type Failed = (usize, &'static str, String);

/// `compact_batch_json(requests, format, max_tokens, ...)` → `(outputs, errors, reports)`:
/// `outputs[i]` is the compacted request's JSON without its final newline, or `None` when
/// request `i` failed; `errors` lists `(i, code, message)` for those; with `reports`,
/// `reports[i]` is what `--report FILE` would hold for request `i` (without its newline:
/// the whole prompt's figures, and the repairs with `repair`), else the list is empty.
#[pyfunction]
#[pyo3(signature = (
    requests, format, max_tokens, *, protected_recent_turns = None, policy = None,
    prompt_id = None, estimator = None, reserve_output = None, repair = false, reports = false,
    jobs = None, reasoning = "strip"
))]
#[expect(
    clippy::too_many_arguments,
    reason = "one argument per CLI option, all keyword-only"
)]
#[expect(
    clippy::type_complexity,
    reason = "the Python signature: lists of optional bytes and a list of error tuples"
)]
fn compact_batch_json<'py>(
    py: Python<'py>,
    requests: Vec<Bound<'py, PyAny>>,
    format: &str,
    max_tokens: u64,
    protected_recent_turns: Option<u64>,
    policy: Option<String>,
    prompt_id: Option<String>,
    estimator: Option<String>,
    reserve_output: Option<u64>,
    repair: bool,
    reports: bool,
    jobs: Option<NonZeroUsize>,
    reasoning: &str,
) -> PyResult<(
    Vec<Option<Bound<'py, PyBytes>>>,
    Vec<Failed>,
    Vec<Option<Bound<'py, PyBytes>>>,
)> {
    // An unknown name fails as `compact_json` fails on it: `FORMAT_UNSUPPORTED`.
    let format: Format = format.parse().map_err(|e: cutctx::formats::FormatError| {
        crate::formats::to_pyerr(py, crate::formats::Failure::from(e))
    })?;
    let reasoning = reasoning
        .parse()
        .map_err(|e: cutctx::formats::FormatError| {
            crate::formats::to_pyerr(py, crate::formats::Failure::from(e))
        })?;
    let args = FormatOptions {
        format: Some(format),
        max_tokens: Some(max_tokens),
        protected_recent: protected_recent_turns,
        policy,
        prompt_id,
        estimator,
        reserve_output,
        repair,
        reasoning,
        ..FormatOptions::default()
    };
    // Copied out while the lock is held; the work below runs without it.
    let texts: Vec<Result<String, Failed>> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| text_of(i, r))
        .collect();
    let results: Vec<Result<(String, String), Failed>> = py.detach(|| {
        let mut results: Vec<Option<Result<(String, String), Failed>>> =
            std::iter::repeat_with(|| None).take(texts.len()).collect();
        let (mut positions, mut valid) = (Vec::new(), Vec::new());
        for (i, text) in texts.into_iter().enumerate() {
            match text {
                Ok(text) => {
                    positions.push(i);
                    valid.push(text);
                }
                Err(failed) => results[i] = Some(Err(failed)),
            }
        }
        let keep = formats::Keep {
            compaction: false,
            report: reports,
        };
        let done = cutctx_ops::batch::compact_all(&args, &valid, None, keep, jobs);
        for (i, out) in positions.into_iter().zip(done) {
            results[i] = Some(out.map_err(|e| (i, e.code, e.message)).map(|out| {
                let (mut line, mut report) = (out.output.output, out.output.report);
                if line.ends_with('\n') {
                    line.pop();
                }
                // Made only when asked for; without its newline.
                report.pop();
                (line, report)
            }));
        }
        results
            .into_iter()
            .map(|r| r.expect("every request is either failed before or compacted"))
            .collect()
    });
    let mut outputs = Vec::with_capacity(results.len());
    let mut errors = Vec::new();
    let mut listed = Vec::with_capacity(if reports { results.len() } else { 0 });
    for result in results {
        match result {
            Ok((line, report)) => {
                outputs.push(Some(PyBytes::new(py, line.as_bytes())));
                if reports {
                    listed.push(Some(PyBytes::new(py, report.as_bytes())));
                }
            }
            Err(e) => {
                outputs.push(None);
                errors.push(e);
                if reports {
                    listed.push(None);
                }
            }
        }
    }
    Ok((outputs, errors, listed))
}

/// The UTF-8 text of one request (bytes or str), or its failure as `cutctx batch` names it.
fn text_of(i: usize, request: &Bound<'_, PyAny>) -> Result<String, Failed> {
    if let Ok(b) = request.cast::<PyBytes>() {
        return String::from_utf8(b.as_bytes().to_vec()).map_err(|e| {
            (
                i,
                cutctx_ops::INPUT_ERROR,
                format!(
                    "the line is not UTF-8: invalid byte at offset {}",
                    e.utf8_error().valid_up_to()
                ),
            )
        });
    }
    if let Ok(s) = request.cast::<PyString>() {
        return s.to_str().map(str::to_owned).map_err(|_| {
            (
                i,
                cutctx_ops::INPUT_ERROR,
                "the line is not UTF-8: it holds a lone surrogate".to_owned(),
            )
        });
    }
    Err((
        i,
        cutctx_ops::INPUT_ERROR,
        "a request must be bytes or str holding JSON".to_owned(),
    ))
}

/// Adds `compact_batch_json` to `cutctx._core.formats`.
///
/// # Errors
///
/// When the interpreter refuses the attribute.
pub(crate) fn register(formats: &Bound<'_, PyModule>) -> PyResult<()> {
    formats.add_function(wrap_pyfunction!(compact_batch_json, formats)?)
}
