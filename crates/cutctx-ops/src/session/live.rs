//! [`Session`]: one conversation's session, typed and held in memory by the front end that
//! serves it (the proxy, Python, the binary for one call).
//!
//! It is built once from its settings (the policy, the estimator and the figures are read and
//! checked then, never per call), stepped on a request already parsed, and returns what to
//! send with its token counts and the key of the history it now describes. Its state is
//! serialized only to persist it ([`Session::state_json`]) and read back only to restore it
//! ([`Session::restore`]). The text functions of [`super`] are thin wrappers over it.
//!
//! Between calls it keeps what makes the next call cheap: the whole history's estimate (so a
//! call counts only its new messages) and the request's validation held open (so an
//! [`Session::append`] checks only the appended messages).

use cutctx::formats::{Format, ProviderTranscript};
use cutctx::model::details;
use cutctx::session::{
    Decision, Firing, Known, LastCall, Restart, SessionConfig, SessionState, push,
};
use cutctx::{CompactionError, SummarizationRequest};
use serde_json::Value;

use super::{SessionOptions, config};
use crate::OpsError;
use crate::formats::from_format;
use crate::summarizer::{Summarizer, summarize_one};

/// What [`Session::append`] says about the appended messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Send what was sent last time with the messages appended: the same request the full
    /// call would give.
    Send {
        /// The whole prompt with the reserve.
        prompt_tokens: u64,
    },
    /// The request crossed the trigger (or the last call left nothing open): make the full
    /// call with the whole history ([`Session::step`]); the session is as it was before this
    /// call.
    Full,
}

/// The key of the history a session describes: how many messages, and their chained digest
/// (as [`cutctx::session::history_digests`] names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryKey {
    /// How many messages of the history the state describes.
    pub messages: usize,
    /// Their chained digest, in hex.
    pub digest: String,
}

/// What one [`Session::step`] made of a request.
#[derive(Debug)]
pub struct Prepared {
    /// The request to send: the request as given (moved back) when not [`Prepared::changed`].
    pub request: Value,
    /// Whether the request to send is not the request as given, byte for byte.
    pub changed: bool,
    /// The whole prompt as received, without the reserve, in estimated tokens.
    pub tokens_in: u64,
    /// The whole prompt as sent, without the reserve.
    pub tokens_out: u64,
    /// The firing, when this call compacted (for the ledger's receipt).
    pub firing: Option<Firing>,
    /// When this call fired by swapping in a summary made ahead
    /// ([`Session::summary_ask`], [`Session::offer_summary`]) instead.
    pub swapped: Option<cutctx::session::Swapped>,
    /// Whether the state the session held was set aside, and why.
    pub restart: Option<Restart>,
    /// The line for a front end's log when the state was set aside.
    pub notice: Option<String>,
    /// The line when a firing invalidated reasoning, or was held off so as not to.
    pub reasoning: Option<String>,
    /// What the repair dropped, one line each.
    pub repairs: Vec<String>,
    /// The key of the history the session now describes.
    pub key: HistoryKey,
    /// For each message of the list sent, the index of the request's message it is,
    /// unchanged; `None` after a repair (the list is not the request's).
    origins: Option<Vec<Option<usize>>>,
}

impl Prepared {
    /// The request to send as text, `text` being the request as it came: every message and
    /// field kept leaves with the bytes it came with (a 23-digit integer, `1e2`, `-0`, the
    /// order of its keys); only what the session made is written. Ends with a newline.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when the request cannot be written as JSON.
    pub fn written(&self, format: Format, text: &str) -> Result<String, OpsError> {
        if !self.changed {
            let mut out = text.to_owned();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            return Ok(out);
        }
        let pretty = text.trim().contains('\n');
        cutctx::formats::to_string_as_written(
            format,
            &self.request,
            text,
            self.origins.as_deref(),
            pretty,
        )
        .map(|s| s + "\n")
        .map_err(|e| {
            OpsError::validation(
                format!("the request cannot be written as JSON: {e}"),
                details! {},
            )
        })
    }
}

/// What one call brings beside its request (the default: nothing).
#[derive(Default)]
pub struct Call<'a> {
    /// Writes a firing's summaries; without one, a firing that needs them fails.
    pub summarizer: Option<&'a mut dyn Summarizer>,
    /// The tool call ids whose results this call's firing keeps as they are (and so their
    /// calls): a result the model has just retrieved.
    pub pin: &'a [String],
    /// The chained digests of the request's history
    /// ([`history_digests`](crate::provider::history_digests)), when the caller took them to
    /// find the session: the history is then not hashed again. They must be the request's own.
    pub digests: Option<&'a [String]>,
}

/// One conversation's session: its settings, built once, and its state.
///
/// ```
/// use cutctx_ops::session::{Breakpoints, Call, Session, SessionOptions, Tuning};
/// use cutctx::formats::{Format, ReasoningMode};
/// let options = SessionOptions {
///     format: Format::OpenAiChat,
///     window: 1_000,
///     tuning: Tuning {
///         trigger: None, target: None, policy: Some("drop_oldest".into()), prompt_id: None,
///         estimator: None, protected_recent: None, reserve_output: 0,
///         reasoning: ReasoningMode::Strip, fire_early: false, summarizes: false,
///         front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
///     },
///     summarize_with: None,
///     cache_breakpoints: Breakpoints::Off,
///     repair: false,
///     pin: Vec::new(),
/// };
/// let mut session = Session::new(&options)?;
/// let request = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
/// let sent = session.step(request.clone(), Call::default())?;
/// assert!(!sent.changed); // it fits: sent as it came
/// assert_eq!(sent.request, request);
/// assert_eq!(sent.key.messages, 1);
/// # Ok::<(), cutctx_ops::OpsError>(())
/// ```
pub struct Session {
    config: SessionConfig,
    front_end: crate::summarizer::FrontEnd,
    repair: bool,
    state: Option<SessionState>,
    /// The last call, whose validation and other fields the next call continues.
    last: Option<LastCall>,
    /// How many messages of the history the state describes, and their estimate, when known:
    /// a call that continues counts only its new messages.
    history_tokens: Option<(usize, u64)>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("format", &self.config.format)
            .field("window", &self.config.window)
            .field("messages", &self.state.as_ref().map(SessionState::messages))
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session with `options` (its `summarize_with` and `pin` are the caller's, per call).
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` naming a bad figure; `FORMAT_UNSUPPORTED` for an unknown policy or
    /// estimator.
    pub fn new(options: &SessionOptions) -> Result<Self, OpsError> {
        Ok(Self {
            config: config(
                options.format,
                options.window,
                &options.tuning,
                options.cache_breakpoints,
            )?,
            front_end: options.tuning.front_end,
            repair: options.repair,
            state: None,
            last: None,
            history_tokens: None,
        })
    }

    /// A session with `options` continuing from `state` (the text [`Session::state_json`]
    /// wrote, or `cutctx session --state`'s file).
    ///
    /// # Errors
    ///
    /// As [`Session::new`]; `VALIDATION_ERROR` for a state that is corrupt, of another version
    /// or of another format.
    pub fn restore(options: &SessionOptions, state: &str) -> Result<Self, OpsError> {
        let mut session = Self::new(options)?;
        session.state = Some(SessionState::from_json(state, options.format)?);
        Ok(session)
    }

    /// The requests' format.
    #[must_use]
    pub const fn format(&self) -> Format {
        self.config.format
    }

    /// The window, in tokens.
    #[must_use]
    pub const fn window(&self) -> u64 {
        self.config.window
    }

    /// Sets the window the next calls decide with (a front end that calibrates it to the
    /// provider's counts).
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when it is not above the output reserve; the window is then unchanged.
    pub fn set_window(&mut self, window: u64) -> Result<(), OpsError> {
        let was = std::mem::replace(&mut self.config.window, window);
        self.config.check().map_err(|e| {
            self.config.window = was;
            OpsError::from(e)
        })
    }

    /// The state, `None` before the first call.
    #[must_use]
    pub const fn state(&self) -> Option<&SessionState> {
        self.state.as_ref()
    }

    /// The state as `cutctx session` writes it to its file, `None` before the first call.
    #[must_use]
    pub fn state_json(&self) -> Option<String> {
        self.state.as_ref().map(SessionState::to_json)
    }

    /// One call on `request`, the whole history as the client sends it, parsed: the request to
    /// send and its counts. `call` says what this call brings beside it: the summarizer that
    /// writes a firing's summaries (none: a firing that needs them fails), the tool calls whose
    /// results this call's firing keeps, the history's digests when the caller took them.
    ///
    /// On failure the session is as it was.
    ///
    /// # Errors
    ///
    /// `FORMAT_*` for a request its provider would refuse; `COMPACTION_BUDGET_UNSATISFIABLE`
    /// when the untouchable part cannot fit the window; `COMPACTION_SUMMARY_MISSING` at a firing
    /// that needs summaries without a summarizer; the summarizer's own errors.
    pub fn step(&mut self, request: Value, call: Call<'_>) -> Result<Prepared, OpsError> {
        let format = self.config.format;
        let (request, repairs) = if self.repair {
            // Repair is a function of the history alone, so a history that grows by appending
            // repairs to a history that grows by appending, and the session continues.
            cutctx::formats::repair(format, request).map_err(from_format)?
        } else {
            (request, Vec::new())
        };
        #[cfg(debug_assertions)]
        let given = request.clone();
        self.config.pinned_results = call.pin.iter().cloned().collect();
        // The caller's digests are of the history as given, not as repaired.
        let digests = call.digests.filter(|_| !self.repair);
        let stepped = self.step_engine(request, call.summarizer, digests);
        // The pins are this call's; an append never fires, so they are not kept.
        self.config.pinned_results.clear();
        let stepped = stepped?;
        let messages = cutctx::session::history(format, stepped.received());
        let tokens_in = stepped.step.fixed_tokens + self.history_tokens(messages, &stepped.step)?;
        let step = &stepped.step;
        let untouched =
            repairs.is_empty() && step.state.prefix().0.is_empty() && step.state.prefix().1 == 0;
        let tokens_out = match (&step.firing, &step.swapped) {
            (Some(f), _) => f.after_tokens - self.config.reserve_output,
            (None, Some(s)) => s.after_tokens - self.config.reserve_output,
            (None, None) => step.prompt_tokens - self.config.reserve_output,
        };
        #[cfg(debug_assertions)]
        {
            let count = |v: &Value| {
                cutctx::session::prompt_tokens(format, v, self.config.estimator.as_ref()).ok()
            };
            debug_assert_eq!(
                Some(tokens_in),
                count(&given),
                "the running count is the request's"
            );
            debug_assert!(
                untouched || Some(tokens_out) == count(&step.request),
                "the session's count is the sent request's"
            );
        }
        // Where the sent list's messages come from, to write a changed request as it came.
        let origins =
            (repairs.is_empty() && !untouched).then(|| step.state.origins(messages.len()));
        let key = HistoryKey {
            messages: step.state.messages(),
            digest: step.state.history_digest(),
        };
        let notice = step.restarted.map(restart_line);
        let reasoning = reasoning_line(&self.config, step);
        self.last = stepped.last.filter(|_| !self.repair);
        let step = stepped.step;
        self.state = Some(step.state);
        Ok(Prepared {
            request: step.request,
            changed: !untouched,
            tokens_in,
            tokens_out: if untouched { tokens_in } else { tokens_out },
            notice,
            reasoning,
            firing: step.firing,
            swapped: step.swapped,
            restart: step.restarted,
            repairs: repairs.iter().map(crate::formats::repair_line).collect(),
            key,
            origins,
        })
    }

    /// The summary this session wants made ahead of its next firing for `request` (the whole
    /// history, as the client sends it), or `None`: while the request as the session would
    /// send it is at most `at` of the trigger, or a summary already waits. The caller sends
    /// [`SummaryAsk::request`](cutctx::session::ahead::SummaryAsk) to the provider and gives
    /// the answer to [`Session::offer_summary`]; the call that must fire then swaps it in.
    ///
    /// ```
    /// use cutctx_ops::session::{Breakpoints, Call, Session, SessionOptions, Tuning};
    /// use cutctx::session::ahead::SummaryKind;
    /// use cutctx::formats::{Format, ReasoningMode};
    /// use serde_json::json;
    /// let options = SessionOptions {
    ///     format: Format::OpenAiChat, window: 400,
    ///     tuning: Tuning {
    ///         trigger: None, target: None, policy: None, prompt_id: None, estimator: None,
    ///         protected_recent: Some(2), reserve_output: 0, reasoning: ReasoningMode::Strip,
    ///         fire_early: false, summarizes: false,
    ///         front_end: cutctx_ops::summarizer::FrontEnd::Proxy,
    ///     },
    ///     summarize_with: None, cache_breakpoints: Breakpoints::Off, repair: false, pin: Vec::new(),
    /// };
    /// let mut session = Session::new(&options)?;
    /// let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    /// for i in 0..30 {
    ///     messages.push(json!({"role": "user", "content": format!("question {i} {}", "x".repeat(60))}));
    ///     let request = json!({"model": "m", "messages": messages.clone()});
    ///     if let Some(ask) = session.summary_ask(&request, SummaryKind::Cached, 0.8, None)? {
    ///         let answer = json!({"choices": [{"message": {"role": "assistant", "content": "So far: questions."}}]});
    ///         assert!(session.offer_summary(&ask, &answer)?);
    ///     }
    ///     let sent = session.step(request, Call::default())?;
    ///     if let Some(swapped) = &sent.swapped {
    ///         assert_eq!(swapped.kind, SummaryKind::Cached);
    ///         let list = sent.request["messages"].as_array().expect("a list");
    ///         assert!(list[2]["content"].as_str().expect("text").contains("So far: questions."));
    ///         return Ok(());
    ///     }
    ///     messages.push(json!({"role": "assistant", "content": "ok"}));
    /// }
    /// panic!("the summary was never swapped in");
    /// # Ok::<(), cutctx_ops::OpsError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `FORMAT_*` for a request its provider would refuse.
    pub fn summary_ask(
        &self,
        request: &Value,
        kind: cutctx::session::ahead::SummaryKind,
        at: f64,
        model: Option<&str>,
    ) -> Result<Option<cutctx::session::ahead::SummaryAsk>, OpsError> {
        cutctx::session::ahead::ask(&self.config, self.state.as_ref(), request, kind, at, model)
            .map_err(from_format)
    }

    /// Keeps the summary `answer` (the provider's JSON answer to `ask`'s request) for the next
    /// firing; `false` when it no longer applies (a firing happened since, the history was
    /// set aside). The state is then as it was.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` with `reason` `SUMMARY_UNREADABLE` when the answer holds no
    /// compaction or no text.
    pub fn offer_summary(
        &mut self,
        ask: &cutctx::session::ahead::SummaryAsk,
        answer: &Value,
    ) -> Result<bool, OpsError> {
        let ready = ask.ready(self.config.format, answer)?;
        Ok(self.keep_ready(ready))
    }

    /// [`Session::offer_summary`] for a summary its caller's own model wrote: `text`, the
    /// answer to a cached-prefix ask's request.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` with `reason` `SUMMARY_UNREADABLE` for an empty text or a native ask.
    pub fn offer_summary_text(
        &mut self,
        ask: &cutctx::session::ahead::SummaryAsk,
        text: &str,
    ) -> Result<bool, OpsError> {
        let ready = ask.ready_text(self.config.format, text)?;
        Ok(self.keep_ready(ready))
    }

    /// Offers `ready` to the state; a summary asked at a session's first call is kept by the
    /// state it starts with.
    fn keep_ready(&mut self, ready: cutctx::session::Ready) -> bool {
        let format = self.config.format;
        self.state
            .get_or_insert_with(|| SessionState::new(format))
            .offer(ready)
    }

    /// The engine's step of `request`, with what this session knows of the last call.
    fn step_engine(
        &self,
        request: Value,
        summarizer: Option<&mut dyn Summarizer>,
        digests: Option<&[String]>,
    ) -> Result<cutctx::session::KnownStep, OpsError> {
        let known = Known {
            digests,
            last: self.last.as_ref(),
        };
        let previous = self.state.as_ref();
        // A summarizer is also given the request that reads the cache, made from the request
        // as given: it keeps a copy of it for that.
        let given = summarizer.is_some().then(|| request.clone());
        let mut summarize = summarize_with(
            (&self.config, self.front_end),
            previous,
            given.as_ref(),
            summarizer,
        );
        cutctx::session::step_known(&self.config, previous, request, &known, &mut summarize)
    }

    /// The estimate of the messages of the whole history `messages` this step took in: the
    /// last call's and the new messages' alone while the session continues, else all of them.
    fn history_tokens(
        &mut self,
        messages: &[Value],
        step: &cutctx::session::Step,
    ) -> Result<u64, OpsError> {
        let known = self
            .history_tokens
            .filter(|(k, _)| {
                step.restarted.is_none()
                    && self.state.as_ref().map(SessionState::messages) == Some(*k)
            })
            .and_then(|(k, tokens)| Some((messages.get(k..)?, tokens)));
        let total = match known {
            Some((new, tokens)) => tokens.saturating_add(self.count(new)?),
            None => self.count(messages)?,
        };
        self.history_tokens =
            (step.state.messages() == messages.len()).then_some((messages.len(), total));
        Ok(total)
    }

    /// The estimate of the messages `list`, summed.
    fn count(&self, list: &[Value]) -> Result<u64, OpsError> {
        list.iter().try_fold(0_u64, |sum, m| {
            cutctx::formats::message_tokens(self.config.format, m, self.config.estimator.as_ref())
                .map(|n| sum.saturating_add(n))
                .map_err(from_format)
        })
    }

    /// Takes in `new`, the messages appended to the history since the last call, reading
    /// them alone: checks the longer request as its provider would, advances the state, and
    /// says whether the request still fits under the trigger. Costs time in proportion to
    /// `new`, not to the history.
    ///
    /// # Errors
    ///
    /// `FORMAT_*` for messages that make the request one its provider would refuse (the
    /// session is then as it was).
    pub fn append(&mut self, new: &[Value]) -> Result<Appended, OpsError> {
        let added = self.count(new)?;
        let (Some(last), Some(state)) = (self.last.as_mut(), self.state.as_mut()) else {
            return Ok(Appended::Full);
        };
        let mut taken = last.clone();
        taken.append(new)?;
        Ok(match push(&self.config, state, last.fixed_tokens(), new)? {
            Decision::Append { prompt_tokens } => {
                *last = taken;
                self.history_tokens = self
                    .history_tokens
                    .map(|(k, t)| (k + new.len(), t.saturating_add(added)));
                Appended::Send { prompt_tokens }
            }
            // Nothing taken in: the full call reads the whole history from this state.
            Decision::Fire { .. } => Appended::Full,
        })
    }

    /// As [`Session::append`], the messages given as the text of a JSON array.
    ///
    /// # Errors
    ///
    /// `INPUT_ERROR` for a text that is not JSON, `VALIDATION_ERROR` for JSON that is not an
    /// array; as [`Session::append`].
    pub fn append_text(&mut self, text: &str) -> Result<Appended, OpsError> {
        let new: Vec<Value> = crate::error::parse_json("the appended messages", text)?;
        self.append(&new)
    }

    /// Whether [`Session::append`] can take the next call's messages: the last call left the
    /// request's list open (there was one, it was not repaired).
    #[must_use]
    pub const fn can_append(&self) -> bool {
        self.last.is_some()
    }

    /// How many messages the history holds, as the last call left it.
    #[must_use]
    pub fn messages(&self) -> usize {
        self.state.as_ref().map_or(0, SessionState::messages)
    }
}

/// The summarizer closure of one step: the caller's summarizer given the span and, beside
/// it, the request that reads the cache (the prefix as last sent plus the instruction).
fn summarize_with<'a, 's: 'a>(
    (config, front_end): (&'a SessionConfig, crate::summarizer::FrontEnd),
    previous: Option<&'a SessionState>,
    request: Option<&'a Value>,
    mut summarizer: Option<&'s mut (dyn Summarizer + 's)>,
) -> impl FnMut(&ProviderTranscript, &SummarizationRequest) -> Result<String, OpsError> + 'a {
    move |pt, r| match (summarizer.as_deref_mut(), request) {
        (Some(s), Some(request)) => {
            let mut input = pt.summarization_input(r);
            let cached = cutctx::session::cached_summary_request(config, previous, request)?;
            if let Value::Object(map) = &mut input {
                map.insert("cached_request".to_owned(), cached);
            }
            summarize_one(s, r, &input)
        }
        _ => Err(OpsError::from(CompactionError::SummaryMissing {
            message: format!(
                "the session fired and summarization request {} needs a summary; {}",
                r.group_id(),
                front_end.to_have_summaries()
            ),
            details: details! { "group_id" => r.group_id(), "target_tokens" => r.target_tokens(), "turn_ids" => r.turn_ids().iter().map(|i| &**i).collect::<Vec<_>>() },
        })),
    }
}

/// The line saying why the state was set aside.
fn restart_line(r: Restart) -> String {
    match r {
        Restart::Rewound { known, given } => format!(
            "cutctx session: the history has {given} messages, fewer than the {known} the state describes; starting a new session"
        ),
        Restart::Diverged { known } => format!(
            "cutctx session: the history's first {known} messages are not those the state describes; starting a new session"
        ),
    }
}

/// The line when a firing invalidated reasoning, or was held off so as not to.
fn reasoning_line(config: &SessionConfig, step: &cutctx::session::Step) -> Option<String> {
    step.firing
        .as_ref()
        .and_then(|f| f.reasoning.notice(config.format, config.estimator.as_ref()))
        .or_else(|| {
            step.held_off.map(|start| {
                if step.over_window {
                    format!(
                        "cutctx session: the request ({} tokens) is over the window, but any compaction would invalidate the manual thinking the tool loop in progress since message {start} must keep (FORMAT_REASONING_OPEN_TOOL_LOOP); the session's own request is sent, over the window, until the loop's answer",
                        step.prompt_tokens
                    )
                } else {
                    format!(
                        "cutctx session: the request crossed the trigger ({} tokens) but still fits the window; a firing now would invalidate the reasoning of the tool loop in progress since message {start}, so it waits for the loop's answer",
                        step.prompt_tokens
                    )
                }
            })
        })
}
