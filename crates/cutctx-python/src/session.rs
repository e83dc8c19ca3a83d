//! `cutctx._core.session`: a session held in memory, for Python: the operations library's typed
//! session (`cutctx_ops::session::Session`), the one `cutctx session` steps once per call. Its
//! state lives here in the object, typed, and is written out only when asked for, so the same
//! requests give the same bytes as the command, call for call.
//!
//! A session serializes its calls (a lock around the state) and releases the interpreter lock
//! while Rust works, and while it waits for that lock, so that threads sharing one session never
//! hold the interpreter waiting on each other. A `summarize` callable is called with the
//! interpreter lock held, as any Python code is.
//!
//! Summaries made ahead (an async summarizer, `Session.aprepare`): `ask_json` keeps the
//! session's [`SummaryAsk`] and hands back the request the caller's model is to read (the
//! prefix as last sent plus the instruction); `offer_text` gives it the summary, which the call
//! that crosses the trigger swaps in.

use std::sync::Mutex;

use cutctx::formats::Format;
use cutctx::model::details;
use cutctx_ops::OpsError;
use cutctx_ops::session::ahead::{SummaryAsk, SummaryKind};
use cutctx_ops::session::{Appended, Breakpoints, Call, Session, SessionOptions, Tuning};
use cutctx_ops::summarizer::Summarizer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_json::Value;

use crate::formats::{CallableSummarizer, Coded, Failure, summarizer_failure, text_of, to_pyerr};

/// One conversation's session: its settings and the typed session, held in memory.
#[pyclass(module = "cutctx._core.session", name = "SessionCore", frozen)]
pub(crate) struct SessionCore {
    options: SessionOptions,
    session: Mutex<Session>,
    /// The summary asked ahead and not yet offered.
    asked: Mutex<Option<SummaryAsk>>,
}

/// What one call produced: the request to send (`None` when it is the request as given and
/// the caller asked to be told so rather than given its bytes back), whether it compacted, and
/// the lines the command would print on standard error.
type Prepared = (Option<Vec<u8>>, bool, Vec<String>);

/// A `summarize` callable called from Rust running without the interpreter lock: each call
/// takes the lock back, as [`CallableSummarizer`] does its work with it held.
struct Attaching {
    callable: Py<PyAny>,
    raised: Option<PyErr>,
}

impl Summarizer for Attaching {
    fn summarize(&mut self, group_id: &str, input: &Value) -> Result<String, OpsError> {
        Python::attach(|py| {
            let mut inner = CallableSummarizer {
                py,
                callable: self.callable.bind(py),
                raised: None,
            };
            let out = inner.summarize(group_id, input);
            self.raised = inner.raised.take();
            out
        })
    }

    fn what(&self) -> &'static str {
        "the summarize callable returned"
    }
}

/// The failure of a call whose lock was poisoned by an earlier panic.
fn poisoned() -> Coded {
    Coded::validation(
        "an earlier call on this session panicked; its state is not trusted",
        details! { "document" => "session state" },
    )
}

impl SessionCore {
    /// One call, run without the interpreter lock: waiting for another thread's call on this
    /// session must not hold it, since that call may need it for its summarizer.
    fn run(
        &self,
        py: Python<'_>,
        text: &str,
        summarize: Option<Py<PyAny>>,
        pin: &[String],
        as_given: bool,
    ) -> Result<Prepared, Failure> {
        py.detach(|| {
            let request: Value = cutctx_ops::parse_json("the request", text)?;
            let mut session = self.session.lock().map_err(|_| poisoned())?;
            let mut attaching = summarize.map(|callable| Attaching {
                callable,
                raised: None,
            });
            let summarizer = attaching.as_mut().map(|a| a as &mut dyn Summarizer);
            // A failed step leaves the session as it was, as the command leaves its file.
            let call = Call {
                summarizer,
                pin,
                digests: None,
            };
            let out = session.step(request, call).map_err(|e| {
                summarizer_failure(e, attaching.as_mut().and_then(|a| a.raised.take()))
            })?;
            let output = if as_given && !out.changed {
                None
            } else {
                Some(out.written(self.options.format, text)?.into_bytes())
            };
            let notes = out
                .repairs
                .into_iter()
                .chain(out.notice)
                .chain(out.reasoning)
                .collect();
            let mut notes: Vec<String> = notes;
            if let Some(swapped) = &out.swapped {
                notes.push(format!(
                    "cutctx session: fired by swapping in the summary made ahead ({} tokens before, {} after)",
                    swapped.before_tokens, swapped.after_tokens
                ));
            }
            Ok((
                output,
                out.firing.is_some() || out.swapped.is_some(),
                notes,
            ))
        })
    }
}

#[pymethods]
impl SessionCore {
    /// `SessionCore(format, window, ...)`: the options of `cutctx session`, checked now.
    #[new]
    #[pyo3(signature = (
        format, window, *, trigger = None, target = None, policy = None, prompt_id = None,
        estimator = None, protected_recent_turns = None, reserve_output = 0, reasoning = "strip",
        cache_breakpoints = false, repair = false, summarizes = false, state = None
    ))]
    #[expect(
        clippy::too_many_arguments,
        reason = "one argument per option of cutctx session, all keyword-only"
    )]
    fn new(
        py: Python<'_>,
        format: &str,
        window: u64,
        trigger: Option<f64>,
        target: Option<f64>,
        policy: Option<String>,
        prompt_id: Option<String>,
        estimator: Option<String>,
        protected_recent_turns: Option<u64>,
        reserve_output: u64,
        reasoning: &str,
        cache_breakpoints: bool,
        repair: bool,
        summarizes: bool,
        state: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let build = || -> Result<Self, Failure> {
            let format: Format = format.parse()?;
            let options = SessionOptions {
                format,
                window,
                tuning: Tuning {
                    trigger,
                    target,
                    policy,
                    prompt_id,
                    estimator,
                    protected_recent: protected_recent_turns,
                    reserve_output,
                    reasoning: reasoning.parse()?,
                    fire_early: false,
                    summarizes,
                    front_end: cutctx_ops::summarizer::FrontEnd::Python,
                },
                summarize_with: None,
                cache_breakpoints: if cache_breakpoints {
                    Breakpoints::Auto
                } else {
                    Breakpoints::Off
                },
                repair,
                pin: Vec::new(),
            };
            let session = match state {
                None => Session::new(&options)?,
                Some(data) => Session::restore(&options, text_of(data)?)?,
            };
            Ok(Self {
                options,
                session: Mutex::new(session),
                asked: Mutex::new(None),
            })
        };
        build().map_err(|f| to_pyerr(py, f))
    }

    /// `prepare_json(data, summarize=None, pin=[], as_given=False)` → `(request bytes, fired,
    /// notes)`: one call of the session on the whole history `data` (JSON as bytes or str);
    /// `pin` names the tool calls whose results a firing at this call keeps as they are
    /// (`--pin`). With `as_given`, the request bytes are `None` when the request to send is
    /// `data` itself, byte for byte (a caller that holds it as an object keeps that).
    #[pyo3(signature = (data, summarize = None, pin = Vec::new(), as_given = false))]
    fn prepare_json<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        summarize: Option<&Bound<'py, PyAny>>,
        pin: Vec<String>,
        as_given: bool,
    ) -> PyResult<(Option<Bound<'py, PyBytes>>, bool, Vec<String>)> {
        let run = || -> Result<Prepared, Failure> {
            let text = text_of(data)?;
            self.run(
                py,
                text,
                summarize.map(|f| f.clone().unbind()),
                &pin,
                as_given,
            )
        };
        let (output, fired, notes) = run().map_err(|f| to_pyerr(py, f))?;
        Ok((output.map(|o| PyBytes::new(py, &o)), fired, notes))
    }

    /// `append_json(data)` → `True`, `False` or `None`: the session's next call, given only
    /// the messages appended to the last call's history (`data`, a JSON array as bytes or
    /// str). `True`: send the last request sent with them appended (the state has taken them
    /// in); `False`: they cross the trigger, so make the full call with `prepare_json` (the
    /// state is as it was); `None`: the last call left nothing open (none yet, a repaired
    /// request, a Responses `input` that is one string), so make the full call.
    fn append_json(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
        let run = || -> Result<Option<bool>, Failure> {
            let text = text_of(data)?;
            py.detach(|| {
                let mut session = self.session.lock().map_err(|_| poisoned())?;
                if !session.can_append() {
                    return Ok(None);
                }
                Ok(Some(matches!(
                    session.append_text(text)?,
                    Appended::Send { .. }
                )))
            })
        };
        run().map_err(|f| to_pyerr(py, f))
    }

    /// `ask_json(data, at)` → `None`, or `(request bytes, covered)`: the summary this session
    /// wants made ahead of its next firing for the whole history `data`, once the request as
    /// the session sends it is over `at` of the trigger and none waits. The request is what the
    /// caller's model reads (the prefix as last sent plus the summarizing instruction, not
    /// streamed); `covered` is how many messages the summary replaces. The ask is kept until
    /// `offer_text`, replacing any earlier one.
    fn ask_json<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        at: f64,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, usize)>> {
        let run = || -> Result<Option<(Vec<u8>, usize)>, Failure> {
            let text = text_of(data)?;
            py.detach(|| {
                let request: Value = cutctx_ops::parse_json("the request", text)?;
                let session = self.session.lock().map_err(|_| poisoned())?;
                let Some(ask) = session.summary_ask(&request, SummaryKind::Cached, at, None)?
                else {
                    return Ok(None);
                };
                let out = (ask.request.to_string().into_bytes(), ask.covered);
                *self.asked.lock().map_err(|_| poisoned())? = Some(ask);
                Ok(Some(out))
            })
        };
        let out = run().map_err(|f| to_pyerr(py, f))?;
        Ok(out.map(|(bytes, covered)| (PyBytes::new(py, &bytes), covered)))
    }

    /// `offer_text(summary)` → whether the session keeps it: the summary of the ask `ask_json`
    /// last made, for its next firing. `False` when there is no ask, or it no longer applies
    /// (a firing came first); an empty summary raises `FormatCompactionError`.
    fn offer_text(&self, py: Python<'_>, summary: &str) -> PyResult<bool> {
        let run = || -> Result<bool, Failure> {
            py.detach(|| {
                let Some(ask) = self.asked.lock().map_err(|_| poisoned())?.take() else {
                    return Ok(false);
                };
                let mut session = self.session.lock().map_err(|_| poisoned())?;
                Ok(session.offer_summary_text(&ask, summary)?)
            })
        };
        run().map_err(|f| to_pyerr(py, f))
    }

    /// The state as `cutctx session` writes it to its file, or `None` before the first call.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let text = py
            .detach(|| self.session.lock().map(|s| s.state_json()).map_err(drop))
            .map_err(|_| to_pyerr(py, Failure::from(poisoned())))?;
        Ok(text.map(|s| PyBytes::new(py, s.as_bytes())))
    }

    /// The request format's name.
    #[getter]
    fn format(&self) -> &'static str {
        self.options.format.as_str()
    }

    /// The window, in tokens.
    #[getter]
    fn window(&self) -> u64 {
        self.options.window
    }
}

/// Adds the submodule `cutctx._core.session` to `m`.
///
/// # Errors
///
/// When the interpreter refuses to create the module or its class.
pub(crate) fn register(py: Python<'_>, m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(py, "session")?;
    sub.add_class::<SessionCore>()?;
    m.add_submodule(&sub)?;
    Ok(())
}
