//! `cutctx._core.receipts`: compaction receipts and their ledger for Python, as the CLI's
//! `receipt seal`, `ledger verify` and `ledger head` commands do them.
//!
//! Documents cross as JSON text (the Python side writes them with the standard `json` module),
//! so that an item means exactly what it means in the CLI's files: a string is hashed as its
//! UTF-8, `{"$b64": "..."}` as the bytes it encodes, anything else as json-c14n. The ledger is
//! arcaeon 0.10.0's JSONL format, appended under the ledger's advisory lock, so a ledger written
//! here verifies with `cutctx ledger verify` and with arcaeon.
//!
//! Failures raise `cutctx.receipts.ReceiptError` with the CLI's stable code (`RECEIPT_*`,
//! `LEDGER_*`, `INPUT_ERROR`), its message and details.

use std::path::{Path, PathBuf};

use cutctx::ledger::{Ledger, SystemClock};
use cutctx::model::details;
use cutctx::receipts::content::{parse_content_map, parse_items};
use cutctx::receipts::digest::Item;
use cutctx::receipts::{AuditOptions, CompactionReceipt, Labels, Pin, ReceiptError as Refusal};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::formats::{Coded, raise};

create_exception!(
    cutctx.receipts,
    ReceiptError,
    PyException,
    "A receipt could not be sealed, or a ledger could not be read; `code`, `message` and \
     `details` say why."
);

fn coded(e: &Refusal) -> Coded {
    Coded {
        code: e.code(),
        message: e.to_string(),
        details: e.details(),
    }
}

/// The same, for an error about one named document, as the CLI names it.
fn about(what: &str, e: &Refusal) -> Coded {
    let mut c = coded(e);
    c.message = format!("{what}: {}", c.message);
    c.details
        .insert("document".to_owned(), serde_json::Value::from(what));
    c
}

fn unreadable(ledger: &Path, e: &dyn std::fmt::Display) -> Coded {
    Coded::input(
        format!("cannot read the ledger at {}: {e}", ledger.display()),
        details! { "path" => ledger.display().to_string(), "document" => "the ledger" },
    )
}

fn to_pyerr(py: Python<'_>, e: &Coded) -> PyErr {
    raise(py, &py.get_type::<ReceiptError>(), e)
}

/// `seal(pre, post, ledger, compactor, method, dropped=None)` → the row as written (no newline).
#[pyfunction]
#[pyo3(signature = (pre, post, ledger, compactor, method, dropped = None))]
fn seal(
    py: Python<'_>,
    pre: &str,
    post: &str,
    ledger: PathBuf,
    compactor: &str,
    method: &str,
    dropped: Option<&str>,
) -> PyResult<String> {
    let run = || -> Result<String, Coded> {
        let items = |text: &str, what: &str| -> Result<Vec<Item>, Coded> {
            parse_items(text, what).map_err(|e| about(what, &e))
        };
        let pre = items(pre, "the pre content")?;
        let post = items(post, "the post content")?;
        let dropped = dropped.map(|t| items(t, "the dropped claim")).transpose()?;
        let clock = SystemClock;
        let mut receipt =
            CompactionReceipt::open(&pre, &clock).map_err(|e| about("the pre content", &e))?;
        receipt
            .record_kept(&post)
            .map_err(|e| about("the post content", &e))?;
        if let Some(dropped) = dropped {
            // The caller's claim is checked before anything is written.
            receipt
                .record_dropped(&dropped)
                .map_err(|e| about("the dropped claim", &e))?;
        }
        let appended = Ledger::new(&ledger)
            .seal(&mut receipt, &Labels::new(compactor, method), &clock)
            .map_err(|e| coded(&e))?;
        Ok(appended.line)
    };
    // Hashing and the locked append need no Python objects: let other threads run meanwhile.
    py.detach(run).map_err(|e| to_pyerr(py, &e))
}

/// `verify(ledger, pin=None, content=None, strict=False)` → `(exit status, verdict JSON)`:
/// 0 when nothing failed, 1 otherwise; the verdict is the CLI's, canonical, without newline.
#[pyfunction]
#[pyo3(signature = (ledger, pin = None, content = None, strict = false))]
fn verify(
    py: Python<'_>,
    ledger: PathBuf,
    pin: Option<&str>,
    content: Option<&str>,
    strict: bool,
) -> PyResult<(u8, String)> {
    let run = || -> Result<(u8, String), Coded> {
        let pin = pin
            .map(Pin::parse)
            .transpose()
            .map_err(|e| about("the pin", &e))?;
        let content = content
            .map(parse_content_map)
            .transpose()
            .map_err(|e| about("the content map", &e))?;
        let audit = Ledger::new(&ledger)
            .audit(AuditOptions {
                pin: pin.as_ref(),
                content: content.as_ref(),
                strict,
            })
            .map_err(|e| unreadable(&ledger, &e))?;
        let mut verdict = audit.to_json();
        if let Some(obj) = verdict.as_object_mut() {
            obj.insert(
                "file".to_owned(),
                serde_json::Value::from(ledger.display().to_string()),
            );
        }
        Ok((
            audit.exit_code(),
            cutctx::model::canonical::canonical_json_value(&verdict),
        ))
    };
    py.detach(run).map_err(|e| to_pyerr(py, &e))
}

/// `head(ledger)` → the pin line (no newline), refusing a ledger that does not verify.
#[pyfunction]
fn head(py: Python<'_>, ledger: PathBuf) -> PyResult<String> {
    let run = || -> Result<String, Coded> {
        // A path that exists but cannot be read as a file is unreadable input, not a verdict.
        if ledger.exists() {
            let file = std::fs::File::open(&ledger).map_err(|e| unreadable(&ledger, &e))?;
            let meta = file.metadata().map_err(|e| unreadable(&ledger, &e))?;
            if meta.is_dir() {
                return Err(unreadable(&ledger, &"it is a directory"));
            }
        }
        Ledger::new(&ledger)
            .head(&SystemClock)
            .as_pin()
            .map_err(|e| coded(&e))
    };
    py.detach(run).map_err(|e| to_pyerr(py, &e))
}

/// Adds the submodule `cutctx._core.receipts` to `m`.
///
/// # Errors
///
/// When the interpreter refuses to create the module or one of its attributes.
pub fn register(py: Python<'_>, m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(py, "receipts")?;
    sub.add_function(wrap_pyfunction!(seal, &sub)?)?;
    sub.add_function(wrap_pyfunction!(verify, &sub)?)?;
    sub.add_function(wrap_pyfunction!(head, &sub)?)?;
    sub.add("ReceiptError", py.get_type::<ReceiptError>())?;
    m.add_submodule(&sub)?;
    Ok(())
}
