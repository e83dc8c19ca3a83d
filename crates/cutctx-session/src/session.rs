//! One call of a session: decide whether the request to send would cross the trigger, compact
//! once down to the target when it would, and otherwise re-send the earlier compaction's
//! prefix byte for byte with the new messages appended.

use std::collections::{BTreeMap, BTreeSet};

use cutctx_formats::message_list as history;
use cutctx_formats::{
    Format, FormatError, ProviderTranscript, ReasoningMode, ReasoningOutcome, fixed_tokens,
    list_key,
};
use cutctx_invariants::CompactionPlan;
use cutctx_model::{
    CompactedTranscript, CompactionBudget, CompactionError, SummarizationRequest, Transcript,
    details,
};
use cutctx_policies::{CompactionPolicy, TokenEstimator};
use serde_json::Value;

use crate::count::{messages_tokens, prompt_tokens};
use crate::early::EarlyFiring;
use crate::known::Known;
use crate::state::{PrefixItem, SessionState};

/// A session's settings. The same settings are expected at every call, but nothing breaks
/// when they change: the next call simply decides with the new ones.
pub struct SessionConfig {
    /// The format of the requests.
    pub format: Format,
    /// The provider's window, in estimated tokens: the whole prompt plus `reserve_output`.
    pub window: u64,
    /// Tokens kept free for the answer.
    pub reserve_output: u64,
    /// Fire when the request to send would exceed `trigger × window`.
    pub trigger: f64,
    /// When firing, compact down to the untouchable part plus `target` of the room the window
    /// leaves above it.
    pub target: f64,
    /// How many of the most recent turns are never touched.
    pub protected_recent: u64,
    /// The policy a firing compacts with.
    pub policy: Box<dyn CompactionPolicy>,
    /// How messages and the rest of the request are counted.
    pub estimator: Box<dyn TokenEstimator>,
    /// Anthropic: mark the end of the compacted prefix with `cache_control` after a firing.
    pub cache_breakpoints: bool,
    /// What a firing does with the thinking blocks and reasoning items after the first
    /// message it changes ([`ReasoningMode`]).
    pub reasoning: ReasoningMode,
    /// The calls whose results a firing must keep as they are (and so their calls): tool
    /// call ids ([`cutctx_formats::ProviderTranscript::pin_results`]). Empty for none.
    pub pinned_results: BTreeSet<String>,
    /// Fire below the trigger where the cache model predicts that it pays ([`EarlyFiring`]);
    /// `None` (the default) fires only at the trigger.
    pub early: Option<EarlyFiring>,
}

impl SessionConfig {
    /// The default trigger: fire only when the request would not fit the window any more.
    /// A lower trigger fires earlier and more often, each firing a bust, for no gain: the
    /// window is the only hard limit.
    pub const DEFAULT_TRIGGER: f64 = 1.0;
    /// The default target: cut to a fifth of the room the window leaves above the untouchable
    /// part (everything but the messages, the system turns, the protected recent turns, the
    /// reserve). A firing re-bills everything after the first message it changes at the
    /// uncached price (Anthropic: 1.25x instead of 0.1x), so a firing is worth its bust only
    /// if the calls before the next one are many: cutting deep leaves the most room to grow
    /// into. Cutting to the floor itself (0.0) saves a little more on the 200 tau-bench
    /// replays (0.859x of stateless cost at the 70% window, against 0.864x at 0.2, 0.879x at
    /// 0.5 and 0.906x at 0.8, every strategy marked alike) but leaves nothing of the older
    /// context; 0.2 keeps some for a small price.
    pub const DEFAULT_TARGET: f64 = 0.2;

    /// Checks the figures: `0 <= target < trigger <= 1` and a window above the reserve.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` naming the figure.
    pub fn check(&self) -> Result<(), CompactionError> {
        let ok = self.target >= 0.0 && self.target < self.trigger && self.trigger <= 1.0;
        if !ok || !self.target.is_finite() || !self.trigger.is_finite() {
            return Err(CompactionError::validation(
                "the session needs 0 <= target < trigger <= 1",
                details! { "target" => self.target, "trigger" => self.trigger },
            ));
        }
        if self.window <= self.reserve_output {
            return Err(CompactionError::validation(
                "the window must be larger than the output reserve",
                details! { "window" => self.window, "reserve_output" => self.reserve_output },
            ));
        }
        Ok(())
    }

    pub(crate) fn trigger_tokens(&self) -> u64 {
        fraction(self.window, self.trigger)
    }
}

/// The share `f` of `tokens`, rounded down: the one rule by which a session, the replay and the
/// front ends take a fraction of a window or a count.
///
/// ```
/// assert_eq!(cutctx_session::fraction(1_000, 0.7), 700);
/// assert_eq!(cutctx_session::fraction(999, 0.5), 499);
/// ```
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "windows are far below 2^52 tokens; the product is floored on purpose"
)]
pub fn fraction(tokens: u64, f: f64) -> u64 {
    (tokens as f64 * f).floor() as u64
}

/// Why a session started again instead of continuing the state it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// The history holds fewer messages than the state describes.
    Rewound {
        /// Messages the state describes.
        known: usize,
        /// Messages in the history.
        given: usize,
    },
    /// The history's first messages are not the ones the state describes (edited, or
    /// another conversation).
    Diverged {
        /// Messages the state describes.
        known: usize,
    },
}

/// What a firing did.
#[derive(Debug, Clone)]
pub struct Firing {
    /// The whole prompt before compaction, with the reserve.
    pub before_tokens: u64,
    /// The whole prompt after compaction, with the reserve.
    pub after_tokens: u64,
    /// The transcript the plan was made for (the full history).
    pub input: Transcript,
    /// The plan applied.
    pub plan: CompactionPlan,
    /// The view and the report.
    pub compacted: CompactedTranscript,
    /// The thinking blocks and reasoning items the firing invalidated, removed or kept as
    /// [`SessionConfig::reasoning`] says: the model no longer sees what they held.
    pub reasoning: ReasoningOutcome,
}

/// The result of one call.
#[derive(Debug, Clone)]
pub struct Step {
    /// The request to send.
    pub request: Value,
    /// The state to keep for the next call.
    pub state: SessionState,
    /// Whether (and how) this call compacted.
    pub firing: Option<Firing>,
    /// When this call fired by swapping in a summary made ahead ([`crate::ahead`]) instead of
    /// compacting with the policy: its kind (`native`, `cached`) and the whole prompt sent,
    /// with the reserve.
    pub swapped: Option<Swapped>,
    /// Whether the given state was set aside, and why.
    pub restarted: Option<Restart>,
    /// The request's whole prompt with the reserve, as the trigger saw it.
    pub prompt_tokens: u64,
    /// When the request crossed the trigger but the firing was held off: where the tool
    /// loop in progress starts whose reasoning a firing would invalidate. The request still
    /// fits the window, except under Anthropic's manual thinking, where no valid compaction
    /// exists inside the loop and [`Step::over_window`] says the request is over it. See
    /// [`step`].
    pub held_off: Option<usize>,
    /// Whether the request sent is over the window: a firing held off in a manual-thinking
    /// tool loop whose thinking any compaction would invalidate (`FORMAT_REASONING_OPEN_TOOL_LOOP`).
    /// The request is then the session's own (its compacted prefix, the new messages
    /// appended), the one the loop's thinking was made against, never the whole history.
    pub over_window: bool,
    /// The estimate of everything in the request but its messages, for [`push`].
    pub fixed_tokens: u64,
    /// The request's validation, open at the end of its history, so that the next call's
    /// appended messages are checked alone; `None` when the request has no message list (a
    /// Responses `input` that is one string).
    pub validation: Option<cutctx_formats::OpenValidation>,
}

/// A firing that swapped in a summary made ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swapped {
    /// How the summary was made.
    pub kind: crate::ahead::SummaryKind,
    /// The whole prompt before, with the reserve.
    pub before_tokens: u64,
    /// The whole prompt sent, with the reserve.
    pub after_tokens: u64,
}

/// How the request to send is made.
enum Sent {
    /// The request as given: nothing was ever compacted.
    AsGiven,
    /// The request with its list rebuilt from the state.
    Built(Value),
}

/// A [`Step`] but its request, which [`Sent`] says how to make.
struct Outcome {
    sent: Sent,
    state: SessionState,
    firing: Option<Firing>,
    swapped: Option<Swapped>,
    restarted: Option<Restart>,
    prompt_tokens: u64,
    held_off: Option<usize>,
    over_window: bool,
    fixed_tokens: u64,
    validation: Option<cutctx_formats::OpenValidation>,
}

impl Outcome {
    /// The step, the request as given made by `given` when it is sent as it came.
    fn into_step(self, given: impl FnOnce() -> Value) -> Step {
        Step {
            request: match self.sent {
                Sent::AsGiven => given(),
                Sent::Built(built) => built,
            },
            state: self.state,
            firing: self.firing,
            swapped: self.swapped,
            restarted: self.restarted,
            prompt_tokens: self.prompt_tokens,
            held_off: self.held_off,
            over_window: self.over_window,
            fixed_tokens: self.fixed_tokens,
            validation: self.validation,
        }
    }
}

/// What [`push`] says about new messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send what was sent last time with the new messages appended.
    Append {
        /// The whole prompt with the reserve.
        prompt_tokens: u64,
    },
    /// The request would cross the trigger, [`SessionConfig::early`] is set (its rule
    /// weighs the whole history), or the last firing let the task go (a firing may bring it
    /// back): call [`step`] with the full history, which may still append.
    Fire {
        /// The whole prompt with the reserve, before compaction.
        prompt_tokens: u64,
    },
}

/// A summarizer: the summary text for one request of a plan.
pub type Summarize<'a, E> =
    dyn FnMut(&ProviderTranscript, &SummarizationRequest) -> Result<String, E> + 'a;

/// One call: `request` holds the whole history, `previous` the state of the last call (or
/// `None` for a new session). Returns the request to send and the state to keep.
///
/// Between firings the request's message list is the previous one plus the new messages:
/// the prefix is rebuilt from the state (kept messages by reference to the history, written
/// ones as stored), never recomputed. A history that does not extend the one in `previous`
/// starts a new session ([`Step::restarted`] says why).
///
/// A request over the trigger fires, unless it still fits the window and ends in a tool loop
/// in progress whose reasoning a firing would invalidate: then the firing is held off
/// ([`Step::held_off`]) until the loop has its answer or the window forces it. Where the
/// window forces it but no valid compaction exists (a manual-thinking Anthropic loop whose
/// last assistant message must keep its thinking), the firing stays held off and the request
/// is the session's own, over the window ([`Step::over_window`]): the loop's thinking was made
/// against that prefix, so it stays valid, and it is the smallest valid request there is.
/// With [`SessionConfig::early`], a request under the trigger also fires where
/// [`EarlyFiring::pays`] says a firing now costs less over the calls to come.
///
/// # Errors
///
/// `FORMAT_*` for a request its provider would refuse; `VALIDATION_ERROR` for bad settings or
/// a state of another format; `COMPACTION_BUDGET_UNSATISFIABLE` when the untouchable part of
/// the request cannot fit the window; the summarizer's own error.
pub fn step<E: From<FormatError>>(
    config: &SessionConfig,
    previous: Option<&SessionState>,
    request: &Value,
    summarize: &mut Summarize<'_, E>,
) -> Result<Step, E> {
    let mut lent = Lent::Borrowed(request);
    let outcome = decide(config, previous, &mut lent, &Known::default(), summarize)?;
    Ok(outcome.into_step(|| request.clone()))
}

/// [`step`] for a caller that holds its session in memory and owns the parsed request: what
/// it already knows ([`Known`]: the history's digests it found the session by, the last call)
/// is not read again, and a request sent as it came is handed back, not copied. A call that
/// does not fire then costs time in proportion to its new messages and the request's other
/// fields; the same rules, read faster.
///
/// # Errors
///
/// As [`step`].
pub fn step_known<E: From<FormatError>>(
    config: &SessionConfig,
    previous: Option<&SessionState>,
    request: Value,
    known: &Known<'_>,
    summarize: &mut Summarize<'_, E>,
) -> Result<KnownStep, E> {
    let mut request = request;
    let mut outcome = decide(
        config,
        previous,
        &mut Lent::Owned(&mut request),
        known,
        summarize,
    )?;
    let last = outcome.validation.take().and_then(|validation| {
        crate::LastCall::of(config.format, &request, validation, outcome.fixed_tokens)
    });
    Ok(match outcome.sent {
        Sent::AsGiven => KnownStep {
            step: outcome.into_step(|| request),
            last,
            received: None,
        },
        Sent::Built(_) => KnownStep {
            step: outcome.into_step(Value::default),
            last,
            received: Some(request),
        },
    })
}

/// What [`step_known`] made of a request.
#[derive(Debug)]
pub struct KnownStep {
    /// The step; its `validation` is in [`KnownStep::last`].
    pub step: Step,
    /// The last call, for the next one's [`Known`]; `None` when the request has no list to
    /// continue.
    pub last: Option<crate::LastCall>,
    /// The request as received when the step sends another; `None` when it sends this one
    /// ([`Step::request`]).
    pub received: Option<Value>,
}

impl KnownStep {
    /// The request as received.
    #[must_use]
    pub fn received(&self) -> &Value {
        self.received.as_ref().unwrap_or(&self.step.request)
    }
}

/// The step of `request` but the request to send, which it says how to make ([`Sent`]).
fn decide<E: From<FormatError>>(
    config: &SessionConfig,
    previous: Option<&SessionState>,
    lent: &mut Lent<'_>,
    known: &Known<'_>,
    summarize: &mut Summarize<'_, E>,
) -> Result<Outcome, E> {
    config.check().map_err(FormatError::from)?;
    let format = config.format;
    let request = lent.value();
    let messages = history(format, request);
    // The one validation of the request, kept open for a caller that appends next: the last
    // call's, taking the new messages alone, where the request continues it.
    let (validation, known_fixed) = crate::known::validate(format, request, previous, known)?;
    if cutctx_formats::asks_provider_to_compact(format, request) {
        return provider_compacts(config, request, messages, validation);
    }
    let (mut state, restarted) = continue_from(format, previous, messages, known.digests)?;
    let new = messages.get(state.messages..).unwrap_or(&[]);
    state.message_tokens += messages_tokens(format, new, config.estimator.as_ref())?;
    state.absorb(new);
    let fixed = match known_fixed {
        Some(fixed) => fixed,
        None => fixed_tokens(format, request, config.estimator.as_ref())?,
    };
    let prompt = fixed + state.message_tokens + config.reserve_output;
    let held_off = (prompt > config.trigger_tokens() && prompt <= config.window)
        .then(|| loop_with_reasoning(config, messages))
        .flatten();
    let may_fire_early = prompt <= config.trigger_tokens() && held_off.is_none();
    let must_fire = prompt > config.trigger_tokens() && held_off.is_none();
    // A native compaction keeps the kept turns' reasoning valid, so it need not wait for a
    // tool loop's answer as a policy's firing does.
    let native_ready = state
        .ready
        .as_ref()
        .is_some_and(|r| r.kind == crate::ahead::SummaryKind::Native);
    let may_swap = must_fire || (native_ready && held_off.is_some());
    if may_swap
        && let Some((kind, tokens)) = crate::ahead::swap(config, &mut state, messages, fixed)?
    {
        state.marks_system = false;
        // A provider's compaction stands for the task; a cached summary's head keeps it.
        state.task_lost = false;
        state.firings += 1;
        let sent = sent(format, request, &state)?;
        let after = fixed + tokens + config.reserve_output;
        return Ok(Outcome {
            sent,
            state,
            firing: None,
            swapped: Some(Swapped {
                kind,
                before_tokens: prompt,
                after_tokens: after,
            }),
            restarted,
            prompt_tokens: prompt,
            held_off: None,
            over_window: false,
            fixed_tokens: fixed,
            validation,
        });
    }
    // A firing reads the request lent (not copied) where the caller owns it; it is given
    // back, the same, before it is read again here.
    let early = if may_fire_early {
        fire_early(config, lent, prompt, fixed, summarize)?
    } else {
        None
    };
    let restore = if must_fire || may_swap || held_off.is_some() || early.is_some() {
        None
    } else {
        restorable_task(config, &state, lent.value(), fixed)?
    };
    let fitted = match (early, restore) {
        (Some(fitted), _) => Some(fitted),
        (None, _) if must_fire => {
            compact_to_unless_open_loop(config, lent, config.target, summarize)?
        }
        // A firing that brings the task back is only worth its write if it does.
        (None, Some(task)) => compact_to_unless_open_loop(config, lent, config.target, summarize)?
            .filter(|f| f.origins.contains(&Some(task))),
        (None, None) => None,
    };
    let request = lent.value();
    let messages = history(format, request);
    let Some(fitted) = fitted else {
        // Nothing to fire; or, when it must, a firing the window forces that no valid request
        // allows: held off, over the window, until the loop has its answer.
        let held_off = if must_fire {
            let start = cutctx_formats::open_tool_loop(format, messages);
            debug_assert!(start.is_some(), "an open-loop refusal outside a tool loop");
            Some(start.unwrap_or(messages.len()))
        } else {
            held_off
        };
        let sent = sent(format, request, &state)?;
        return Ok(Outcome {
            sent,
            state,
            firing: None,
            swapped: None,
            restarted,
            prompt_tokens: prompt,
            held_off,
            over_window: must_fire,
            fixed_tokens: fixed,
            validation,
        });
    };
    let list = history(format, &fitted.document);
    // A summary made ahead that this firing did not use is stale from here on.
    state.ready = None;
    state.prefix = references(&fitted.origins, list);
    state.prefix_len = messages.len();
    state.message_tokens = messages_tokens(format, list, config.estimator.as_ref())?;
    state.task_lost =
        task_index(format, messages).is_some_and(|t| !fitted.origins.contains(&Some(t)));
    state.marks_system = false;
    if format == Format::Anthropic && config.cache_breakpoints {
        mark_prefix_end(request, &mut state.prefix);
        state.marks_system = true;
    }
    state.firings += 1;
    let sent = sent(format, request, &state)?;
    let after = match &sent {
        Sent::Built(built) => prompt_tokens(format, built, config.estimator.as_ref())?,
        Sent::AsGiven => prompt_tokens(format, request, config.estimator.as_ref())?,
    } + config.reserve_output;
    Ok(Outcome {
        sent,
        state,
        swapped: None,
        firing: Some(Firing {
            before_tokens: prompt,
            after_tokens: after,
            input: fitted.input,
            plan: fitted.plan,
            compacted: fitted.compacted,
            reasoning: fitted.reasoning,
        }),
        restarted,
        prompt_tokens: prompt,
        held_off: None,
        over_window: false,
        fixed_tokens: fixed,
        validation,
    })
}

/// The summarizing request that reads the cache, for a firing at this call: the request the
/// session would send at this call without firing (the previous compaction's prefix rebuilt
/// from `previous`, the new messages appended; the whole history for a new session), with
/// the summarization instruction ([`SUMMARY_INSTRUCTION`]) as a final user message. Its
/// prefix is what the previous call wrote, so a provider serves it from the cache; the
/// span-only input of `ProviderTranscript::summarization_input` reads nothing.
///
/// ```
/// use cutctx_formats::{EstimatorSpec, Format, policy_named};
/// use cutctx_session::{SessionConfig, cached_summary_request};
/// use serde_json::json;
/// let config = SessionConfig {
///     format: Format::OpenAiChat, window: 500, reserve_output: 0,
///     trigger: SessionConfig::DEFAULT_TRIGGER, target: SessionConfig::DEFAULT_TARGET,
///     protected_recent: 2,
///     policy: policy_named("drop_oldest", "p", &EstimatorSpec::default())?.expect("known"),
///     estimator: EstimatorSpec::default().estimator()?, cache_breakpoints: false,
///     reasoning: cutctx_formats::ReasoningMode::Strip, pinned_results: Default::default(),
///     early: None,
/// };
/// let request = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
/// let asked = cached_summary_request(&config, None, &request)?;
/// let list = asked["messages"].as_array().expect("a list");
/// assert_eq!((list.len(), &list[0]), (2, &request["messages"][0]));
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
///
/// # Errors
///
/// `FORMAT_*` for a request without its format's shape; `VALIDATION_ERROR` for a state of
/// another format.
pub fn cached_summary_request(
    config: &SessionConfig,
    previous: Option<&SessionState>,
    request: &Value,
) -> Result<Value, FormatError> {
    let format = config.format;
    let messages = history(format, request);
    let (state, _) = continue_from(format, previous, messages, None)?;
    let would_send = materialize(format, request, &state)?;
    Ok(with_instruction(format, &would_send))
}

/// The instruction a summarizing request that reads the cache ends with
/// ([`cached_summary_request`], [`with_instruction`], [`crate::ahead`]): a summary in fixed
/// sections (the task and its constraints, files and artifacts with their paths, decisions and
/// why, errors met, next steps), merged into the earlier summary the conversation begins with
/// rather than written again from scratch. The user's own messages are not left to it: a
/// summary made ahead quotes them verbatim after the model's text
/// ([`crate::ahead::USER_QUOTE_TOKENS`]).
pub const SUMMARY_INSTRUCTION: &str = "Summarize the conversation above for a model that will continue the task, under these headings: ## Task and constraints; ## Files and artifacts (each with its path); ## Decisions and why; ## Errors met; ## Next steps. If the conversation begins with an earlier summary, merge into it: keep what still holds, correct what changed, add what is new. Keep identifiers, paths and figures exact. Reply with the summary alone.";

/// `request` (of `format`) with [`SUMMARY_INSTRUCTION`] appended to its message list as a
/// final user message ([`Descriptor::user_text`](cutctx_formats::Descriptor::user_text)): the
/// summarizing request that reads what `request` left in the cache.
///
/// ```
/// use cutctx_formats::Format;
/// use cutctx_session::{SUMMARY_INSTRUCTION, with_instruction};
/// use serde_json::json;
/// let request = json!({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "Hi"}]});
/// let asked = with_instruction(Format::Anthropic, &request);
/// assert_eq!(asked["messages"][1]["content"][0]["text"], SUMMARY_INSTRUCTION);
/// ```
#[must_use]
pub fn with_instruction(format: Format, request: &Value) -> Value {
    let mut out = request.clone();
    let message = format.descriptor().user_text(SUMMARY_INSTRUCTION);
    if let Some(Value::Array(list)) = out.get_mut(list_key(format)) {
        list.push(message);
    } else if let Value::Array(list) = &mut out {
        list.push(message);
    }
    out
}

/// Where the tool loop in progress at the end of `messages` starts, when it holds reasoning
/// a firing would invalidate ([`cutctx_formats::open_tool_loop`]); `None` with
/// [`ReasoningMode::Keep`], which sends such reasoning as it is. A firing changes the request
/// before the loop's latest reasoning (the protected turns are the newest), and the providers
/// want a tool-use turn's reasoning back intact: Anthropic advises against compacting between
/// a `tool_use` and its `tool_result`, and refuses a manual-thinking loop whose last assistant
/// message lost its thinking. So while the request still fits the window, the session waits
/// for the loop's answer rather than fire.
fn loop_with_reasoning(config: &SessionConfig, messages: &[Value]) -> Option<usize> {
    if config.reasoning == ReasoningMode::Keep {
        return None;
    }
    let start = cutctx_formats::open_tool_loop(config.format, messages)?;
    messages
        .get(start..)?
        .iter()
        .any(|m| cutctx_formats::holds_reasoning(config.format, m))
        .then_some(start)
}

/// The cheap path for a caller that keeps its session in memory and hands over only the new
/// messages (and the estimate of the rest of the request, `fixed_tokens`): advances the state
/// over `new` and says whether the request still fits under the trigger. Costs time in
/// proportion to `new` alone: the history is neither hashed nor counted again.
///
/// On [`Decision::Fire`] the state is left as it was; the caller then calls [`step`] with the
/// full history and this state, as a caller without this path would have.
///
/// # Errors
///
/// `FORMAT_ERROR` for a message without its format's shape; the state is then unchanged.
pub fn push(
    config: &SessionConfig,
    state: &mut SessionState,
    fixed_tokens: u64,
    new: &[Value],
) -> Result<Decision, FormatError> {
    let message_tokens =
        state.message_tokens + messages_tokens(config.format, new, config.estimator.as_ref())?;
    let prompt_tokens = fixed_tokens + message_tokens + config.reserve_output;
    if prompt_tokens > config.trigger_tokens() || config.early.is_some() || state.task_lost {
        // Left for step, which reads the whole history from this same state (early firing
        // weighs the whole history at every call, and so does a session whose last firing
        // let the task go, to bring it back where it fits).
        return Ok(Decision::Fire { prompt_tokens });
    }
    state.message_tokens = message_tokens;
    state.absorb(new);
    Ok(Decision::Append { prompt_tokens })
}

/// The state to continue from: `previous` when `messages` extends the history it describes,
/// a new one otherwise.
pub(crate) fn continue_from(
    format: Format,
    previous: Option<&SessionState>,
    messages: &[Value],
    digests: Option<&[String]>,
) -> Result<(SessionState, Option<Restart>), FormatError> {
    let Some(prev) = previous else {
        return Ok((SessionState::new(format), None));
    };
    if prev.format != format {
        return Err(CompactionError::validation(
            format!("the session state is for {} requests, not {}", prev.format.as_str(), format.as_str()),
            details! { "field" => "format", "state_format" => prev.format.as_str(), "format" => format.as_str() },
        )
        .into());
    }
    let Some(known) = messages.get(..prev.messages) else {
        let why = Restart::Rewound {
            known: prev.messages,
            given: messages.len(),
        };
        return Ok((SessionState::new(format), Some(why)));
    };
    if !crate::known::same_history(format, prev, known, digests) {
        return Ok((
            SessionState::new(format),
            Some(Restart::Diverged {
                known: prev.messages,
            }),
        ));
    }
    Ok((prev.clone(), None))
}

/// The step of a request that asks the provider to compact the conversation itself (a
/// Responses `compaction_trigger`): the request goes as it came, whole, since the provider
/// summarizes what it is sent; the session starts afresh, ready for the request that carries
/// the provider's `compaction` item in place of that history.
fn provider_compacts<E: From<FormatError>>(
    config: &SessionConfig,
    request: &Value,
    messages: &[Value],
    validation: Option<cutctx_formats::OpenValidation>,
) -> Result<Outcome, E> {
    let format = config.format;
    let fixed = fixed_tokens(format, request, config.estimator.as_ref())?;
    let prompt = fixed
        + messages_tokens(format, messages, config.estimator.as_ref())?
        + config.reserve_output;
    Ok(Outcome {
        sent: Sent::AsGiven,
        state: SessionState::new(format),
        firing: None,
        swapped: None,
        restarted: None,
        prompt_tokens: prompt,
        held_off: None,
        over_window: false,
        fixed_tokens: fixed,
        validation,
    })
}

/// The request to send: `request` with its message list replaced by the state's prefix and
/// the history after it; `request` itself while the session has never fired.
fn materialize(
    format: Format,
    request: &Value,
    state: &SessionState,
) -> Result<Value, FormatError> {
    Ok(match sent(format, request, state)? {
        Sent::AsGiven => request.clone(),
        Sent::Built(built) => built,
    })
}

/// What `state` sends for `request`: the request as given while nothing was ever compacted,
/// else the request with its list rebuilt from the state.
fn sent(format: Format, request: &Value, state: &SessionState) -> Result<Sent, FormatError> {
    if state.prefix_len == 0 && state.prefix.is_empty() {
        return Ok(Sent::AsGiven);
    }
    let mut out = with_list(format, request, state)?;
    if format == Format::Anthropic && state.marks_system {
        mark_system(&mut out);
    }
    Ok(Sent::Built(out))
}

/// `request` with its message list replaced by the state's prefix and the rest of the history.
pub(crate) fn with_list(
    format: Format,
    request: &Value,
    state: &SessionState,
) -> Result<Value, FormatError> {
    let messages = history(format, request);
    let mut list = Vec::with_capacity(state.prefix.len() + messages.len() - state.prefix_len);
    for item in &state.prefix {
        match item {
            PrefixItem::Keep([a, b]) => {
                let range = usize::try_from(*a).ok().zip(usize::try_from(*b).ok());
                let slice = range.and_then(|(a, b)| messages.get(a..b)).ok_or_else(|| {
                    CompactionError::validation(
                        "the session state keeps messages the history does not have",
                        details! { "from" => *a, "to" => *b, "messages" => messages.len() },
                    )
                })?;
                list.extend_from_slice(slice);
            }
            PrefixItem::Insert(m) => list.push(m.clone()),
        }
    }
    list.extend_from_slice(messages.get(state.prefix_len..).unwrap_or(&[]));
    let key = list_key(format);
    Ok(match request {
        // The other fields copied, the list made anew: the history is never copied whole.
        Value::Object(map) => {
            let mut out: serde_json::Map<String, Value> = map
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            out.insert(key.to_owned(), Value::Array(list));
            Value::Object(out)
        }
        _ => Value::Array(list),
    })
}

/// The compacted message list `list` as prefix items over the history: a message the
/// rendering kept unchanged (its origin, the index of the history's message it is) is a
/// reference, any other is stored. Consecutive references merge into one range. The origin
/// comes from the rendering, never from comparing values: two messages equal as values (a
/// 23-digit integer read as a float, the same text written with other escapes) are still two
/// messages, and the one kept is the one whose bytes are sent.
pub(crate) fn references(origins: &[Option<usize>], list: &[Value]) -> Vec<PrefixItem> {
    debug_assert_eq!(origins.len(), list.len(), "one origin per message");
    let mut items: Vec<PrefixItem> = Vec::new();
    for (m, origin) in list.iter().zip(origins) {
        match origin {
            Some(i) => {
                let (a, b) = (*i as u64, *i as u64 + 1);
                match items.last_mut() {
                    Some(PrefixItem::Keep([_, end])) if *end == a => *end = b,
                    _ => items.push(PrefixItem::Keep([a, b])),
                }
            }
            None => items.push(PrefixItem::Insert(m.clone())),
        }
    }
    items
}

/// What [`compact_to`] returns: the compacted request and how it was made.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The compacted request.
    pub document: Value,
    /// The origin of each message of `document`'s list ([`ProviderTranscript::render_traced`]).
    pub origins: Vec<Option<usize>>,
    /// The transcript the plan was made for (the whole request).
    pub input: Transcript,
    /// The plan applied.
    pub plan: CompactionPlan,
    /// The view and the report.
    pub compacted: CompactedTranscript,
    /// The thinking blocks and reasoning items the compaction invalidated.
    pub reasoning: ReasoningOutcome,
}

/// Compacts the whole `request` down to the untouchable part (tools, the reserve, system turns
/// and the protected recent turns) plus `share` of the room the window leaves above it; at
/// worst to the window itself. With `keep_task` (a session's firing) the firing keeps what
/// the model is working from (tried in turn, most kept first): the first user turn (the task statement,
/// which stays in the cached prefix across firings), the latest user turn, and the tool
/// results the latest model messages refer to.
///
/// The plan's budget and the goal are the same count (`cutctx-formats`' prompt count), so the
/// turn budget is the goal less the tools and the reserve; rendering can still differ a little
/// from the plan's estimate (stubs and summaries are estimated before they exist), so the
/// budget is lowered by any overshoot until the rendered request fits (a few rounds;
/// summaries are asked once per set of turns).
///
/// A session's firing is this with `keep_task` and the session's target; `cutctx compact
/// --max-tokens WINDOW` is this with a `share` of 1 (the window) and no task pinned, which is
/// how the replay prices stateless compaction.
///
/// # Errors
///
/// `COMPACTION_BUDGET_UNSATISFIABLE` when the untouchable part cannot fit the window or no
/// plan brings the request under it; `FORMAT_REASONING_OPEN_TOOL_LOOP` where every plan would
/// invalidate the reasoning a tool loop in progress must keep; `FORMAT_*` for a request its
/// provider would refuse; the summarizer's own error.
pub fn compact_to<E: From<FormatError>>(
    config: &SessionConfig,
    request: &Value,
    share: f64,
    keep_task: bool,
    summarize: &mut Summarize<'_, E>,
) -> Result<Fitted, E> {
    let mut lent = Lent::Borrowed(request);
    let ladder = if keep_task {
        &Keep::LADDER[..]
    } else {
        &[Keep::UNPINNED][..]
    };
    fit_down(config, &mut lent, share, ladder, summarize)?.map_err(|unfit| match unfit {
        Unfit::Budget(e) => E::from(FormatError::from(e)),
        Unfit::OpenLoop(e) => E::from(e),
    })
}

/// What a firing keeps untouched beyond the system turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Keep {
    /// The first and the latest user turns are pinned.
    users: bool,
    /// The tool results the last [`Keep::REFERRERS`] model messages refer to are pinned.
    referred: bool,
}

impl Keep {
    /// How many of the latest model messages' references a firing keeps: the current step and
    /// the few before it, whose files and outputs the next answer most often works on.
    const REFERRERS: usize = 4;

    /// The most of the room above the rest of the untouchable part that the referred results
    /// may take: half, so that a firing still frees the other half for the history. Chosen on
    /// the development runs of docs/SESSIONS.md: unbounded, they cost 1.7% more at a 30%
    /// window for 0.4 points of recall; bounded by the target's share (0.2), they kept 4.3
    /// points less.
    const REFERRED_SHARE: f64 = 0.5;

    /// A firing that pins nothing of its own (the configured pins and recent turns stay).
    const UNPINNED: Self = Self {
        users: false,
        referred: false,
    };

    /// What a session's firing tries to keep, most first, each tried where the one before
    /// leaves no plan under the window: the user turns and the referred results; then the
    /// user turns alone; at last neither, since keeping them must never cost a fit. Every
    /// rung keeps the configured recent turns: a protected turn is never touched, so a task
    /// that fits only without them is let go, and brought back at the first call where it
    /// fits ([`restorable_task`]).
    const LADDER: [Self; 3] = [
        Self {
            users: true,
            referred: true,
        },
        Self {
            users: true,
            referred: false,
        },
        Self::UNPINNED,
    ];
}

/// The first rung of `ladder` that fits (see [`fit`]); a loop whose reasoning no plan keeps
/// valid stops the descent, since keeping less never makes it valid.
fn fit_down<E: From<FormatError>>(
    config: &SessionConfig,
    lent: &mut Lent<'_>,
    share: f64,
    ladder: &[Keep],
    summarize: &mut Summarize<'_, E>,
) -> Result<Result<Fitted, Unfit>, E> {
    let mut last = None;
    for keep in ladder {
        match fit(config, lent, share, *keep, summarize)? {
            Err(Unfit::Budget(e)) => last = Some(e),
            done => return Ok(done),
        }
    }
    match last {
        Some(e) => Ok(Err(Unfit::Budget(e))),
        None => unreachable_fitted(),
    }
}

/// The firing below the trigger that [`EarlyFiring`] says pays, if any: the request is
/// `prompt` tokens with the reserve (`fixed` of them outside the messages). Checked first
/// against the least a firing could send (`fixed` and the reserve), then against its goal
/// (the untouchable part plus the target's share of the room above it), before any
/// compaction is made: no summary is asked for a firing that does not happen.
fn fire_early<E: From<FormatError>>(
    config: &SessionConfig,
    lent: &mut Lent<'_>,
    prompt: u64,
    fixed: u64,
    summarize: &mut Summarize<'_, E>,
) -> Result<Option<Fitted>, E> {
    let Some(early) = config.early else {
        return Ok(None);
    };
    let format = config.format;
    let messages = history(format, lent.value());
    let calls =
        u64::try_from(crate::calls::call_points(format, messages).len()).unwrap_or(u64::MAX);
    if calls == 0 {
        return Ok(None);
    }
    let estimator = config.estimator.as_ref();
    let growth = messages_tokens(format, messages, estimator).map_err(E::from)? / calls;
    // As many calls to come as so far, but a firing at the trigger ends the horizon.
    let calls = calls.min(config.trigger_tokens().saturating_sub(prompt) / growth.max(1));
    let least = goal_of(config, fixed + config.reserve_output, config.target);
    if !early.pays(prompt, least, growth, calls) {
        return Ok(None);
    }
    let keep = Keep::LADDER[0];
    let read = untouchable(config, lent.lend(), keep).map_err(E::from)?;
    let floor = read.floor;
    lent.give_back(read.transcript);
    if floor > config.window
        || !early.pays(prompt, goal_of(config, floor, config.target), growth, calls)
    {
        return Ok(None);
    }
    compact_to_unless_open_loop(config, lent, config.target, summarize)
}

/// A session's firing: [`compact_to`] with the task kept, `None` where no valid compaction
/// exists (`FORMAT_REASONING_OPEN_TOOL_LOOP`), which the session answers by holding off.
fn compact_to_unless_open_loop<E: From<FormatError>>(
    config: &SessionConfig,
    lent: &mut Lent<'_>,
    share: f64,
    summarize: &mut Summarize<'_, E>,
) -> Result<Option<Fitted>, E> {
    match fit_down(config, lent, share, &Keep::LADDER, summarize)? {
        Ok(fitted) => Ok(Some(fitted)),
        Err(Unfit::OpenLoop(_)) => Ok(None),
        Err(Unfit::Budget(e)) => Err(E::from(FormatError::from(e))),
    }
}

/// The index of the task statement: the history's first user message that is not tool
/// results alone.
fn task_index(format: Format, messages: &[Value]) -> Option<usize> {
    messages.iter().position(|m| is_user_message(format, m))
}

/// Whether `message` is a user message that is not tool results alone.
fn is_user_message(format: Format, message: &Value) -> bool {
    let descriptor = format.descriptor();
    message.get("role").and_then(Value::as_str) == Some(descriptor.roles.user)
        && !descriptor.is_tool_result(message)
}

/// The index of the task statement when the last firing had to let it go
/// ([`SessionState::task_lost`]) and a firing now can bring it back: where the task and the
/// latest user message fit the window with the fixed part, the reserve and the system
/// messages. The session then fires again, at the first call where they do.
fn restorable_task(
    config: &SessionConfig,
    state: &SessionState,
    request: &Value,
    fixed: u64,
) -> Result<Option<usize>, FormatError> {
    if !state.task_lost {
        return Ok(None);
    }
    let format = config.format;
    let messages = history(format, request);
    let Some(task) = task_index(format, messages) else {
        return Ok(None);
    };
    let estimator = config.estimator.as_ref();
    let latest = messages
        .iter()
        .rposition(|m| is_user_message(format, m))
        .unwrap_or(task);
    let mut needed = fixed + config.reserve_output;
    for (i, m) in messages.iter().enumerate() {
        if i == task || i == latest || cutctx_formats::is_system_message(format, m) {
            needed += cutctx_formats::message_tokens(format, m, estimator)?;
        }
    }
    Ok((needed <= config.window).then_some(task))
}

/// Why [`fit`] found no request to send.
enum Unfit {
    /// No plan fits the window (`COMPACTION_BUDGET_UNSATISFIABLE`).
    Budget(CompactionError),
    /// A plan fits, but its request is one no provider rule allows
    /// (`FORMAT_REASONING_OPEN_TOOL_LOOP`).
    OpenLoop(FormatError),
}

impl From<CompactionError> for Unfit {
    fn from(e: CompactionError) -> Self {
        Self::Budget(e)
    }
}

/// The request a firing reads: the caller's own, lent to the firing's transcript and given
/// back after (a large request is then held once), or borrowed, which the transcript copies.
enum Lent<'a> {
    /// The caller owns it; while lent, `Value::Null` stands in its place.
    Owned(&'a mut Value),
    /// The caller only borrows it.
    Borrowed(&'a Value),
}

impl Lent<'_> {
    /// The request, as it was given.
    fn value(&self) -> &Value {
        match self {
            Self::Owned(v) => v,
            Self::Borrowed(v) => v,
        }
    }

    /// The request for a transcript to own: the caller's own (taken), or a copy.
    fn lend(&mut self) -> Value {
        match self {
            Self::Owned(v) => std::mem::take(*v),
            Self::Borrowed(v) => (*v).clone(),
        }
    }

    /// Takes the request back from the `transcript` it was lent to; that transcript's turns.
    fn give_back(&mut self, transcript: ProviderTranscript) -> Transcript {
        let (document, turns) = transcript.into_parts();
        if let Self::Owned(v) = self {
            **v = document;
        }
        turns
    }
}

/// A request read for a firing, with what no firing may touch.
struct Untouchable {
    /// The request's transcript, its reasoning mode and pins set.
    transcript: ProviderTranscript,
    /// The untouchable turns' tokens: system turns, pinned and protected recent turns.
    turn_floor: u64,
    /// Those with the tools and the reserve: the least a firing can send.
    floor: u64,
}

/// Reads `request` for a firing, with the pins `keep` asks for, and counts its untouchable
/// part.
fn untouchable(
    config: &SessionConfig,
    request: Value,
    keep: Keep,
) -> Result<Untouchable, FormatError> {
    let referred = if keep.referred {
        crate::mentions::referred_results(config.format, &request, Keep::REFERRERS)
    } else {
        Vec::new()
    };
    let mut pt =
        ProviderTranscript::from_document_with(config.format, request, config.estimator.as_ref())?;
    pt.set_reasoning(config.reasoning);
    pt.pin_results(&config.pinned_results)?;
    if keep.users {
        pt.pin_first_user()?;
        pt.pin_latest_user()?;
    }
    let budget0 = CompactionBudget::new(0).with_protected_recent_turns(config.protected_recent);
    let mut analysis = cutctx_invariants::Analysis::of(pt.transcript(), &budget0);
    let count = pt.prompt_count(config.reserve_output);
    if !referred.is_empty() {
        let floor = count.tools + count.reserve + analysis.untouchable_tokens();
        let allowance = fraction(config.window.saturating_sub(floor), Keep::REFERRED_SHARE);
        let chosen = within_allowance(&pt, analysis.untouchable(), &referred, allowance);
        if !chosen.is_empty() {
            let mut pins = config.pinned_results.clone();
            pins.extend(chosen);
            pt.pin_results(&pins)?;
            analysis = cutctx_invariants::Analysis::of(pt.transcript(), &budget0);
        }
    }
    let turn_floor = analysis.untouchable_tokens();
    Ok(Untouchable {
        floor: count.tools + count.reserve + turn_floor,
        transcript: pt,
        turn_floor,
    })
}

/// Of the `referred` results (the most recently referred to first), those a firing keeps: in
/// that order, each whose result turns not already untouchable still fit in `allowance`
/// tokens with those kept before it ([`Keep::REFERRED_SHARE`] of the room above the rest of
/// the untouchable part).
fn within_allowance(
    pt: &ProviderTranscript,
    untouchable: &[bool],
    referred: &[String],
    allowance: u64,
) -> BTreeSet<String> {
    let answered = pt.answered_calls();
    let turns = pt.transcript().turns();
    let mut chosen = BTreeSet::new();
    let mut spent = 0_u64;
    for id in referred {
        let tokens: u64 = (0..turns.len())
            .filter(|&i| !untouchable[i] && answered[i] == Some(id.as_str()))
            .map(|i| turns[i].token_estimate())
            .sum();
        if tokens > 0 && spent + tokens <= allowance {
            spent += tokens;
            chosen.insert(id.clone());
        }
    }
    chosen
}

/// The tokens a firing compacts to, `share` of the way from the untouchable `floor` to the
/// window.
fn goal_of(config: &SessionConfig, floor: u64, share: f64) -> u64 {
    floor + fraction(config.window.saturating_sub(floor), share)
}

/// [`compact_to`] keeping what `keep` says; `Ok(Err(_))` when no plan fits the window or none
/// gives a valid request.
fn fit<E: From<FormatError>>(
    config: &SessionConfig,
    lent: &mut Lent<'_>,
    share: f64,
    keep: Keep,
    summarize: &mut Summarize<'_, E>,
) -> Result<Result<Fitted, Unfit>, E> {
    let read = untouchable(config, lent.lend(), keep).map_err(E::from)?;
    let attempt = fit_read(config, &read, share, summarize);
    let input = lent.give_back(read.transcript);
    Ok(match attempt? {
        Ok(a) => Ok(a.with_input(input)),
        Err(unfit) => Err(unfit),
    })
}

/// A compaction [`fit`] made, but the transcript it was made for.
struct Attempt {
    document: Value,
    origins: Vec<Option<usize>>,
    plan: CompactionPlan,
    compacted: CompactedTranscript,
    reasoning: ReasoningOutcome,
}

impl Attempt {
    fn with_input(self, input: Transcript) -> Fitted {
        Fitted {
            document: self.document,
            origins: self.origins,
            input,
            plan: self.plan,
            compacted: self.compacted,
            reasoning: self.reasoning,
        }
    }
}

/// [`fit`] over the request `read` for a firing.
fn fit_read<E: From<FormatError>>(
    config: &SessionConfig,
    read: &Untouchable,
    share: f64,
    summarize: &mut Summarize<'_, E>,
) -> Result<Result<Attempt, Unfit>, E> {
    let format = config.format;
    let estimator = config.estimator.as_ref();
    let Untouchable {
        transcript: pt,
        turn_floor,
        floor,
    } = read;
    let (turn_floor, floor) = (*turn_floor, *floor);
    let protected = config.protected_recent;
    let limit = config.window;
    if floor > limit {
        return Ok(Err(Unfit::Budget(CompactionError::BudgetUnsatisfiable {
            message: format!(
                "the untouchable part of the request (tools, system turns and the {protected} most \
                     recent turns, with the output reserve) is {floor} tokens, over the window \
                     of {limit}"
            ),
            details: details! { "untouchable_tokens" => floor, "max_tokens" => limit, "protected_recent_turns" => protected },
        })));
    }
    let goal = goal_of(config, floor, share);
    let mut summaries: BTreeMap<(Vec<String>, u64), String> = BTreeMap::new();
    let mut best: Option<(u64, Attempt)> = None;
    let mut room = goal - floor;
    for _ in 0..8 {
        let b = CompactionBudget::new(turn_floor + room).with_protected_recent_turns(protected);
        let plan = match config.policy.decide(pt.transcript(), &b) {
            Ok(plan) => plan,
            Err(e @ CompactionError::BudgetUnsatisfiable { .. }) => return Ok(Err(e.into())),
            Err(e) => return Err(E::from(FormatError::from(e))),
        };
        let mut texts = BTreeMap::new();
        for r in &plan.summarization_requests {
            let key = (
                r.turn_ids()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                r.target_tokens(),
            );
            let text = match summaries.get(&key) {
                Some(t) => t.clone(),
                None => {
                    let t = summarize(pt, r)?;
                    summaries.insert(key, t.clone());
                    t
                }
            };
            texts.insert(r.group_id().to_owned(), text);
        }
        let compacted = cutctx_executor::apply(pt.transcript(), &plan, &texts)
            .map_err(|e| E::from(FormatError::from(e)))?;
        let (document, reasoning, origins) = match pt.render_traced(&compacted.transcript) {
            Ok(rendered) => rendered,
            Err(e @ FormatError::ReasoningOpenToolLoop { .. }) => {
                return Ok(Err(Unfit::OpenLoop(e)));
            }
            Err(e) => return Err(E::from(e)),
        };
        let measured =
            prompt_tokens(format, &document, estimator).map_err(E::from)? + config.reserve_output;
        let fitted = Attempt {
            document,
            origins,
            plan,
            compacted,
            reasoning,
        };
        if measured <= goal {
            return Ok(Ok(fitted));
        }
        if best.as_ref().is_none_or(|(m, _)| measured < *m) {
            best = Some((measured, fitted));
        }
        if room == 0 {
            break;
        }
        room = room.saturating_sub((measured - goal).max(1));
    }
    match best {
        Some((measured, fitted)) if measured <= limit => Ok(Ok(fitted)),
        Some((measured, _)) => Ok(Err(Unfit::Budget(CompactionError::BudgetUnsatisfiable {
            message: format!(
                "the most the policy could compact the request to is {measured} tokens, over the window of {limit}"
            ),
            details: details! { "untouchable_tokens" => measured, "max_tokens" => limit },
        }))),
        None => unreachable_fitted(),
    }
}

/// The loop above runs at least once and either returns or records a best attempt.
fn unreachable_fitted<T, E: From<FormatError>>() -> Result<T, E> {
    Err(E::from(FormatError::from(CompactionError::validation(
        "no compaction was attempted",
        details! {},
    ))))
}

/// Anthropic: puts `cache_control` on the last block of the prefix's last message, so that
/// the provider caches everything up to it, unless the request already holds the provider's
/// limit of four marks (the user's own marks are kept, and counted).
fn mark_prefix_end(request: &Value, prefix: &mut Vec<PrefixItem>) {
    if count_marks(request) >= MAX_CACHE_MARKS {
        return;
    }
    let messages = history(Format::Anthropic, request);
    let message = match prefix.last() {
        Some(PrefixItem::Insert(m)) => m.clone(),
        Some(PrefixItem::Keep([a, b])) => {
            let (a, b) = (*a, *b);
            let Some(m) = usize::try_from(b - 1).ok().and_then(|i| messages.get(i)) else {
                return;
            };
            let m = m.clone();
            prefix.pop();
            if b - 1 > a {
                prefix.push(PrefixItem::Keep([a, b - 1]));
            }
            prefix.push(PrefixItem::Insert(m.clone()));
            m
        }
        None => return,
    };
    // Nothing follows the prefix yet: the mark takes the TTL of the client's last mark, the
    // one its later marks will follow.
    let mark = added_mark(marks_in(request).last().copied());
    if let Some(PrefixItem::Insert(last)) = prefix.last_mut() {
        *last = with_mark(message, mark);
    }
}

/// The mark the session adds: ephemeral, with the one-hour TTL when `beside` (the client's
/// mark nearest after where it goes, else nearest before) has it. The provider refuses a
/// 5-minute mark ahead of a 1-hour one, so a mark of the session's never precedes one of the
/// client's with a longer life.
fn added_mark(beside: Option<&Value>) -> Value {
    let mut mark = serde_json::json!({"type": "ephemeral"});
    if let Some(ttl) = beside
        .and_then(|m| m.get("ttl"))
        .filter(|t| t.as_str() == Some("1h"))
        && let Value::Object(map) = &mut mark
    {
        map.insert("ttl".to_owned(), ttl.clone());
    }
    mark
}

/// The `cache_control` marks of a request, in the order the provider reads them (tools,
/// system, messages).
fn marks_in(request: &Value) -> Vec<&Value> {
    ["tools", "system", list_key(Format::Anthropic)]
        .into_iter()
        .filter_map(|key| request.get(key))
        .flat_map(marks_in_value)
        .collect()
}

/// The `cache_control` marks of `value`, in document order.
fn marks_in_value(value: &Value) -> Vec<&Value> {
    fn walk<'v>(value: &'v Value, out: &mut Vec<&'v Value>) {
        match value {
            Value::Object(map) => {
                if let Some(mark) = map.get("cache_control") {
                    out.push(mark);
                }
                map.iter()
                    .filter(|(k, _)| *k != "cache_control")
                    .for_each(|(_, v)| walk(v, out));
            }
            Value::Array(list) => list.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out
}

/// Anthropic: puts `cache_control` on the last block of `system` when the request has room
/// for one more mark, so that tools and system stay cached whatever a later firing rewrites
/// (the provider looks for earlier hits only about 20 blocks back from a mark). Recomputed
/// from the request at every call, so it is the same bytes every time.
fn mark_system(request: &mut Value) {
    if count_marks(request) >= MAX_CACHE_MARKS {
        return;
    }
    // The client's mark nearest after the system's last block is its first in the messages;
    // else the nearest before is its last on the tools.
    let after = request.get("messages").map(marks_in_value);
    let before = request.get("tools").map(marks_in_value);
    let beside = after
        .and_then(|m| m.first().copied())
        .or_else(|| before.and_then(|m| m.last().copied()))
        .cloned();
    let mark = added_mark(beside.as_ref());
    let Some(system) = request.get_mut("system") else {
        return;
    };
    match system {
        Value::String(text) if !text.is_empty() => {
            *system = serde_json::json!([{"type": "text", "text": text, "cache_control": mark}]);
        }
        Value::Array(blocks) => {
            if let Some(Value::Object(block)) = blocks.last_mut() {
                block.entry("cache_control").or_insert(mark);
            }
        }
        _ => {}
    }
}

/// Anthropic accepts at most four `cache_control` marks in a request.
const MAX_CACHE_MARKS: usize = 4;

/// How many `cache_control` marks `value` holds, at any depth.
fn count_marks(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key("cache_control"))
                + map.values().map(count_marks).sum::<usize>()
        }
        Value::Array(list) => list.iter().map(count_marks).sum(),
        _ => 0,
    }
}

/// `message` with `mark` as the `cache_control` of its last content block (a string content
/// becomes one text block); unchanged when that block is already marked.
fn with_mark(mut message: Value, mark: Value) -> Value {
    let Some(content) = message.get_mut("content") else {
        return message;
    };
    if let Value::String(text) = content {
        *content = serde_json::json!([{"type": "text", "text": text, "cache_control": mark}]);
        return message;
    }
    // Never on a thinking block, which the provider does not let a mark sit on: on the last
    // block that is not one (a message of thinking alone is left unmarked).
    let last = content.as_array_mut().and_then(|l| {
        l.iter_mut()
            .rev()
            .find(|b| !cutctx_formats::anthropic::is_reasoning_block(b))
    });
    if let Some(Value::Object(block)) = last {
        block.entry("cache_control").or_insert(mark);
    }
    message
}
