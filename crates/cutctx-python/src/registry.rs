//! The Python classes the core's values and errors become, bound once by the package at import.
//!
//! Roles, actions and error classes are defined in Python (`cutctx.types`, `cutctx.errors`) so
//! that they are what the reference's callers expect (a `StrEnum`, subclasses of
//! `baseaicore.SuiteError`); this module keeps one reference to each and turns core values
//! into them.

use cutctx::model::{Action, CompactionError, ErrorCode, Role};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::Value;

/// The bound classes and members.
struct Registry {
    validation_error: Py<PyAny>,
    budget_unsatisfiable: Py<PyAny>,
    summary_missing: Py<PyAny>,
    plan_mismatch: Py<PyAny>,
    /// `Role.SYSTEM`, `USER`, `ASSISTANT`, `TOOL`, in that order.
    roles: [Py<PyAny>; 4],
    /// `Action.KEEP`, `MASK`, `SUMMARIZE`, `DROP`, in that order.
    actions: [Py<PyAny>; 4],
    /// `types.MappingProxyType`.
    mapping_proxy: Py<PyAny>,
}

static REGISTRY: PyOnceLock<Registry> = PyOnceLock::new();

/// Binds the package's classes; called once by `cutctx.types` at import.
#[pyfunction]
#[pyo3(name = "_bind")]
#[expect(clippy::too_many_arguments, reason = "one argument per bound class")]
pub(crate) fn bind(
    py: Python<'_>,
    validation_error: Py<PyAny>,
    budget_unsatisfiable: Py<PyAny>,
    summary_missing: Py<PyAny>,
    plan_mismatch: Py<PyAny>,
    role: &Bound<'_, PyAny>,
    action: &Bound<'_, PyAny>,
    mapping_proxy: Py<PyAny>,
) -> PyResult<()> {
    let member = |cls: &Bound<'_, PyAny>, name: &str| cls.getattr(name).map(Bound::unbind);
    let registry = Registry {
        validation_error,
        budget_unsatisfiable,
        summary_missing,
        plan_mismatch,
        roles: [
            member(role, "SYSTEM")?,
            member(role, "USER")?,
            member(role, "ASSISTANT")?,
            member(role, "TOOL")?,
        ],
        actions: [
            member(action, "KEEP")?,
            member(action, "MASK")?,
            member(action, "SUMMARIZE")?,
            member(action, "DROP")?,
        ],
        mapping_proxy,
    };
    // A second import of the package (a reload) keeps the first binding: the classes of the
    // first are the ones values already made refer to.
    let _ = REGISTRY.set(py, registry);
    Ok(())
}

fn registry(py: Python<'_>) -> PyResult<&Registry> {
    REGISTRY.get(py).ok_or_else(|| {
        PyRuntimeError::new_err("cutctx._core is used through the cutctx package: import cutctx")
    })
}

/// The Python `Role` member for `role`.
pub(crate) fn role_object(py: Python<'_>, role: Role) -> PyResult<Py<PyAny>> {
    let index = match role {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    };
    Ok(registry(py)?.roles[index].clone_ref(py))
}

/// The Python `Action` member for `action`.
pub(crate) fn action_object(py: Python<'_>, action: Action) -> PyResult<Py<PyAny>> {
    let index = match action {
        Action::Keep => 0,
        Action::Mask => 1,
        Action::Summarize => 2,
        Action::Drop => 3,
    };
    Ok(registry(py)?.actions[index].clone_ref(py))
}

/// A read-only mapping over `dict`, as the reference's turns hold their metadata.
pub(crate) fn mapping_proxy<'py>(dict: Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
    let py = dict.py();
    registry(py)?.mapping_proxy.bind(py).call1((dict,))
}

/// A `ValidationError` with `message` and `details`.
pub(crate) fn validation(py: Python<'_>, message: String, details: &Bound<'_, PyDict>) -> PyErr {
    match registry(py) {
        Ok(r) => raise(py, &r.validation_error, message, details),
        Err(err) => err,
    }
}

fn raise(py: Python<'_>, class: &Py<PyAny>, message: String, details: &Bound<'_, PyDict>) -> PyErr {
    let kwargs = PyDict::new(py);
    if let Err(err) = kwargs.set_item("details", details) {
        return err;
    }
    match class.bind(py).call((message,), Some(&kwargs)) {
        Ok(instance) => PyErr::from_value(instance),
        Err(err) => err,
    }
}

/// The core's error as the package's Python exception of the same code.
pub(crate) fn error(py: Python<'_>, err: &CompactionError) -> PyErr {
    let r = match registry(py) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let class = match err.code() {
        ErrorCode::BudgetUnsatisfiable => &r.budget_unsatisfiable,
        ErrorCode::SummaryMissing => &r.summary_missing,
        ErrorCode::PlanMismatch => &r.plan_mismatch,
        // `ErrorCode` is non-exhaustive; anything new is a refusal of the input.
        _ => &r.validation_error,
    };
    let details = PyDict::new(py);
    for (key, value) in err.details() {
        match json_to_py(py, value) {
            Ok(value) => {
                if let Err(e) = details.set_item(key, value) {
                    return e;
                }
            }
            Err(e) => return e,
        }
    }
    raise(py, class, python_message(err), &details)
}

/// The message the Python package gives for `err`: the core's, but for a missing summary,
/// whose wording in CutCtx 0.1.0 points its users to their own inference path. Programs that
/// match on the reference's message keep working; the command line keeps the core's wording.
fn python_message(err: &CompactionError) -> String {
    if err.code() == ErrorCode::SummaryMissing
        && let Some(group) = err.details().get("group_id").and_then(|g| g.as_str())
    {
        return format!(
            "Summarization group {} has no supplied summary. CutCtx plans a summarization and \
             never performs it (ADR-0052): fulfil the request through your own governed \
             inference path \u{2014} on a local tier when the transcript is confidential \
             \u{2014} and pass the text back in `summaries`.",
            cutctx::model::py_repr_str(group)
        );
    }
    err.message().to_owned()
}

/// Maps a core result into a Python one.
pub(crate) trait IntoPy<T> {
    /// The value, or the error as the package's exception.
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, CompactionError> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|err| error(py, &err))
    }
}

/// A JSON value as the Python value `json.loads` would give.
pub(crate) fn json_to_py(py: Python<'_>, value: &Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                // Integers beyond 64 bits keep their digits: Python's `int` reads them exactly.
                match n.as_f64() {
                    Some(f)
                        if !n
                            .to_string()
                            .chars()
                            .all(|c| c.is_ascii_digit() || c == '-') =>
                    {
                        f.into_pyobject(py)?.into_any().unbind()
                    }
                    _ => py
                        .get_type::<pyo3::types::PyInt>()
                        .call1((n.to_string(),))?
                        .unbind(),
                }
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| json_to_py(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, json_to_py(py, item)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

/// A tuple of Python strings from shared ids.
pub(crate) fn str_tuple<'py, S: AsRef<str>>(
    py: Python<'py>,
    ids: impl IntoIterator<Item = S, IntoIter: ExactSizeIterator>,
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        ids.into_iter()
            .map(|s| pyo3::types::PyString::new(py, s.as_ref())),
    )
}

/// A list of Python strings from shared ids.
pub(crate) fn str_list<'py, S: AsRef<str>>(
    py: Python<'py>,
    ids: impl IntoIterator<Item = S, IntoIter: ExactSizeIterator>,
) -> PyResult<Bound<'py, PyList>> {
    PyList::new(
        py,
        ids.into_iter()
            .map(|s| pyo3::types::PyString::new(py, s.as_ref())),
    )
}
