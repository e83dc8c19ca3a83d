//! Summaries the proxy makes for its sessions (`--summarizer`), through the same upstream as
//! the conversation's own calls, with the client's own credential (never stored): the
//! provider's native compaction (Anthropic's on-demand `compaction`, OpenAI Responses'
//! `compaction_trigger`), or, where a format has none, a request that reads the cache (the
//! prefix exactly as last sent plus one instruction). The session engine decides the cut and
//! reads the answer ([`cutctx_ops::session::Session::summary_ask`]); this file sends it.
//!
//! **When.** In the background by default: once a request reaches `--summary-ahead` of the
//! trigger (0.8), its call goes on at once while the summary is made beside it, then kept in
//! the session's state; the call that crosses the trigger swaps it in without waiting. With
//! `--summary-ahead 1` the summary is made at that call, which waits for it. A firing never
//! fails for a summary: one that failed, came too late or no longer applies leaves the firing
//! to the policy (masking, then dropping), logged and counted.
//!
//! **Accounting.** Each summarizing call is its own line in the log (`"event": "summary"`: kind,
//! outcome, milliseconds, the provider's token counts, never content) and in the metrics
//! (`cutctx_serve_summaries_total{kind, outcome}`, `cutctx_serve_summary_*_tokens_total`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cutctx_ops::Format;
use cutctx_ops::session::ahead::{ANTHROPIC_COMPACTION_BETA, SummaryAsk, SummaryKind};
use cutctx_ops::session::{Prepared, Session};
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Request, StatusCode};
use serde_json::{Value, json};

use crate::forward::forwarded_headers;
use crate::metrics::add;
use crate::proxy::{App, log};
use crate::respond::endpoint;

/// The largest summarizing answer read, in bytes.
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// At most this many summaries are made in the background at once; past it a session waits
/// for a later call to ask again.
const MAX_IN_FLIGHT: usize = 64;

/// `--summarizer` and its settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summarizer {
    /// Whether the provider's own compaction is used where the format has one.
    pub(crate) native: bool,
    /// The share of the trigger from which a summary is made ahead; 1: at the firing call.
    pub(crate) ahead: f64,
    /// The model of cached-prefix summaries, when not the conversation's own.
    pub(crate) model: Option<String>,
    /// The longest a summarizing call may take, answer included.
    pub(crate) timeout: Duration,
}

impl Summarizer {
    /// The kind of summary a `format` conversation gets.
    pub(crate) const fn kind(&self, format: Format) -> SummaryKind {
        SummaryKind::for_format(format, self.native)
    }

    /// Whether summaries are made at the firing call (which waits) rather than ahead of it.
    pub(crate) fn at_firing(&self) -> bool {
        self.ahead >= 1.0
    }
}

/// What `--summarizer` names: `none` (`None`), `auto` or `native` (`Some(true)`: the
/// provider's own compaction where the format has one), `cached` (`Some(false)`).
///
/// # Errors
///
/// A message naming the flag and its values.
pub(crate) fn parse_mode(name: &str) -> Result<Option<bool>, String> {
    match name {
        "none" => Ok(None),
        "native" | "auto" => Ok(Some(true)),
        "cached" => Ok(Some(false)),
        other => Err(format!(
            "--summarizer must be none, auto, native or cached, not {other:?}"
        )),
    }
}

/// What the proxy's summaries share: the sessions whose summary is being made in the
/// background, and the models whose provider refused its native compaction.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    in_flight: InFlight,
    refused: Mutex<BTreeSet<String>>,
}

/// At most this many models are remembered as refusing native compaction.
const MAX_REFUSED: usize = 256;

impl Shared {
    /// The kind of summary a `format` conversation on `model` gets: the provider's native
    /// compaction where the format has one (`--summarizer auto` or `native`) and the provider
    /// has not refused it for this model, else a cached-prefix request.
    pub(crate) fn kind(
        &self,
        summarizer: &Summarizer,
        format: Format,
        model: Option<&str>,
    ) -> SummaryKind {
        let kind = summarizer.kind(format);
        if kind == SummaryKind::Native && self.refused(format, model) {
            return SummaryKind::Cached;
        }
        kind
    }

    fn key(format: Format, model: Option<&str>) -> String {
        format!("{}\u{0}{}", format.as_str(), model.unwrap_or(""))
    }

    fn refused(&self, format: Format, model: Option<&str>) -> bool {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&Self::key(format, model))
    }

    /// Remembers that the provider refused a native compaction for `model` (a 400): its later
    /// summaries are cached-prefix requests.
    fn refuse(&self, format: Format, model: Option<&str>) {
        let mut set = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if set.len() < MAX_REFUSED {
            set.insert(Self::key(format, model));
        }
    }
}

/// The sessions whose summary is being made in the background.
#[derive(Debug, Default)]
struct InFlight(Mutex<BTreeSet<String>>);

impl InFlight {
    /// Marks `id` as being summarized; `false` when it already is or too many are.
    fn start(&self, id: &str) -> bool {
        let mut set = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        set.len() < MAX_IN_FLIGHT && set.insert(id.to_owned())
    }

    /// `id`'s summary is made (or failed).
    fn done(&self, id: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }

    /// Whether `id`'s summary is being made.
    fn has(&self, id: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }
}

/// A summary to make in the background once the call that asked for it has gone on.
pub(crate) struct Pending {
    /// The session's id.
    pub(crate) id: String,
    /// Its id as the log shows it.
    pub(crate) log_id: String,
    pub(crate) format: Format,
    /// The window the session was stepped with.
    pub(crate) window: u64,
    /// The asking call's headers: its credential goes with the summarizing call.
    pub(crate) headers: HeaderMap,
    pub(crate) ask: SummaryAsk,
}

/// At the firing call, with `--summary-ahead 1`: makes the summary `session` wants for
/// `request` now, waiting for it (on the blocking pool), and offers it to the session, which
/// swaps it in at its step. Anything that fails is logged and counted, and the step fires with
/// the policy.
pub(crate) fn at_firing(
    app: &App,
    (format, headers, log_id): (Format, &HeaderMap, &str),
    session: &mut Session,
    request: &Value,
) {
    let Some(summarizer) = app.settings.summarizer.as_ref() else {
        return;
    };
    let kind = app.summaries.kind(summarizer, format, model_of(request));
    let ask = match session.summary_ask(request, kind, 1.0, summarizer.model.as_deref()) {
        Ok(Some(ask)) => ask,
        Ok(None) => return,
        Err(e) => return failed(app, kind, log_id, e.code),
    };
    let answer =
        tokio::runtime::Handle::current().block_on(fetch(app, format, headers, &ask, log_id));
    if let Some(answer) = answer {
        offer(app, session, &ask, &answer, log_id);
    }
}

/// Before a call's step, with `--summary-ahead` below 1: the summary to make in the
/// background when the request as the session sends it reached that share of the trigger
/// and none waits or is being made.
pub(crate) fn ahead(
    app: &App,
    (format, headers, window): (Format, &HeaderMap, u64),
    (id, log_id): (&str, &str),
    session: &Session,
    request: &Value,
) -> Option<Pending> {
    let summarizer = app.settings.summarizer.as_ref()?;
    if summarizer.at_firing() || app.summaries.in_flight.has(id) {
        return None;
    }
    let kind = app.summaries.kind(summarizer, format, model_of(request));
    let ask = session
        .summary_ask(request, kind, summarizer.ahead, summarizer.model.as_deref())
        .inspect_err(|e| failed(app, kind, log_id, e.code))
        .ok()
        .flatten()?;
    Some(Pending {
        id: id.to_owned(),
        log_id: log_id.to_owned(),
        format,
        window,
        headers: headers.clone(),
        ask,
    })
}

/// Makes `pending`'s summary, then offers it to its session, held as any call holds it.
pub(crate) async fn run(app: Arc<App>, pending: Pending) {
    if !app.summaries.in_flight.start(&pending.id) {
        return;
    }
    let answer = fetch(
        &app,
        pending.format,
        &pending.headers,
        &pending.ask,
        &pending.log_id,
    )
    .await;
    let id = pending.id.clone();
    if let Some(answer) = answer {
        let held = Arc::clone(&app);
        let _ = tokio::task::spawn_blocking(move || {
            crate::decide::offer_ahead(&held, &pending, &answer);
        })
        .await;
    }
    app.summaries.in_flight.done(&id);
}

/// Offers `answer` to `session`, counting and logging what became of it; whether the session
/// kept it.
pub(crate) fn offer(
    app: &App,
    session: &mut Session,
    ask: &SummaryAsk,
    answer: &Value,
    log_id: &str,
) -> bool {
    let kind = ask.kind;
    match session.offer_summary(ask, answer) {
        Ok(true) => {
            app.metrics.summary(kind.as_str(), "made");
            true
        }
        Ok(false) => {
            app.metrics.summary(kind.as_str(), "stale");
            log(
                &json!({"event": "summary", "kind": kind.as_str(), "outcome": "stale", "session_id": log_id}),
            );
            false
        }
        Err(e) => {
            let reason = e
                .details
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or(e.code);
            failed(app, kind, log_id, reason);
            false
        }
    }
}

/// Counts what a call's firing did with summaries: swapped one in, or (with a summarizer set)
/// compacted with the policy because none was ready.
pub(crate) fn count_firing(app: &App, format: Format, prepared: &Prepared, log_id: &str) {
    let Some(summarizer) = app.settings.summarizer.as_ref() else {
        return;
    };
    let kind = match &prepared.swapped {
        Some(swapped) => swapped.kind.as_str(),
        None => summarizer.kind(format).as_str(),
    };
    if let Some(swapped) = &prepared.swapped {
        app.metrics.summary(kind, "swapped");
        log(
            &json!({"event": "summary", "kind": kind, "outcome": "swapped", "session_id": log_id,
            "before_tokens": swapped.before_tokens, "after_tokens": swapped.after_tokens}),
        );
    } else if prepared.firing.is_some() {
        app.metrics.summary(kind, "fallback");
        log(
            &json!({"event": "summary", "kind": kind, "outcome": "fallback", "session_id": log_id}),
        );
    }
}

/// Counts and logs a summary that could not be made (`code`, never content).
fn failed(app: &App, kind: SummaryKind, log_id: &str, code: &str) {
    app.metrics.summary(kind.as_str(), "failed");
    log(
        &json!({"event": "summary", "kind": kind.as_str(), "outcome": "failed", "code": code,
        "session_id": log_id}),
    );
}

/// Sends `ask`'s request to the conversation's upstream with the client's `headers` (its
/// credential among them), and reads the JSON answer; `None` (logged and counted) for any
/// failure: a refusal, a timeout, an answer that is not JSON or too large.
async fn fetch(
    app: &App,
    format: Format,
    headers: &HeaderMap,
    ask: &SummaryAsk,
    log_id: &str,
) -> Option<Value> {
    let kind = ask.kind;
    let summarizer = app.settings.summarizer.as_ref()?;
    let started = Instant::now();
    let answer = tokio::time::timeout(summarizer.timeout, send(app, format, headers, ask))
        .await
        .unwrap_or(Err("timeout"));
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match answer {
        Ok(answer) => {
            let (input, cached, output) = usage(format, &answer);
            add(&app.metrics.summary_input_tokens, input);
            add(&app.metrics.summary_cached_tokens, cached);
            add(&app.metrics.summary_output_tokens, output);
            log(
                &json!({"event": "summary", "kind": kind.as_str(), "outcome": "answered",
                "format": format.as_str(), "session_id": log_id, "ms": ms, "covered": ask.covered,
                "input_tokens": input, "cached_tokens": cached, "output_tokens": output}),
            );
            Some(answer)
        }
        Err(code) => {
            if code == "refused" && kind == SummaryKind::Native {
                // This model has no native compaction here: cached-prefix requests from now on.
                app.summaries.refuse(format, model_of(&ask.request));
            }
            failed(app, kind, log_id, code);
            None
        }
    }
}

/// The model a request names.
fn model_of(request: &Value) -> Option<&str> {
    request.get("model").and_then(Value::as_str)
}

/// The summarizing call itself: its answer as JSON, or why not (a stable code).
async fn send(
    app: &App,
    format: Format,
    headers: &HeaderMap,
    ask: &SummaryAsk,
) -> Result<Value, &'static str> {
    let base = match format {
        Format::Anthropic => &app.settings.anthropic,
        Format::OpenAiChat | Format::OpenAiResponses => &app.settings.openai,
    };
    let body = serde_json::to_vec(&ask.request).map_err(|_| "unwritable")?;
    let mut request = Request::new(Full::new(Bytes::from(body)));
    *request.method_mut() = hyper::Method::POST;
    let mut sent = forwarded_headers(headers);
    sent.remove(header::CONTENT_ENCODING);
    sent.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    sent.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    if format == Format::Anthropic && ask.kind == SummaryKind::Native {
        let betas = sent
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .map_or_else(
                || ANTHROPIC_COMPACTION_BETA.to_owned(),
                |b| format!("{b},{ANTHROPIC_COMPACTION_BETA}"),
            );
        let value = HeaderValue::from_str(&betas).map_err(|_| "bad_header")?;
        sent.insert("anthropic-beta", value);
    }
    *request.headers_mut() = sent;
    *request.uri_mut() = base.join(endpoint(format)).parse().map_err(|_| "bad_url")?;
    let response = app.upstream.send(request).await.map_err(|f| match f {
        crate::upstream::Failure::Timeout => "timeout",
        crate::upstream::Failure::Unreachable(_) => "unreachable",
    })?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|_| "unreadable_answer")?
        .to_bytes();
    if status != StatusCode::OK {
        return Err(match status.as_u16() {
            401 | 403 => "refused_credential",
            429 => "rate_limited",
            400..=499 => "refused",
            _ => "upstream_error",
        });
    }
    serde_json::from_slice(&body).map_err(|_| "not_json")
}

/// The prompt tokens, the cached part and the output tokens a summarizing answer reports.
fn usage(format: Format, answer: &Value) -> (u64, u64, u64) {
    let fields = format.descriptor().usage;
    let Some(found) = fields.find(answer) else {
        return (0, 0, 0);
    };
    let (input, cached) = fields
        .prompt_and_cached(&fields.read(found))
        .unwrap_or((0, 0));
    let output = ["output_tokens", "completion_tokens"]
        .iter()
        .find_map(|k| found.get(*k).and_then(Value::as_u64))
        .unwrap_or(0);
    (input, cached, output)
}
