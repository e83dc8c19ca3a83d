//! The handler of one request: route it, read its body under the limit (and decode it, under
//! the same limit, when it came gzip- or zstd-encoded), let its session decide what to send
//! (or pass it through), forward it, and stream the response back unchanged while its usage
//! is read.
//!
//! What goes upstream is either the bytes that came in, with their `Content-Encoding`, or
//! the session's compacted request, plain. A request the proxy cannot read or compact is
//! forwarded unchanged and counted by reason (fail-open), or refused with 400 in the
//! provider's error shape (`--fail-closed`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cutctx::formats::{EstimatorSpec, Format};
use cutctx::session::{SessionState, history, history_digests, prompt_tokens};
use cutctx_ops::OpsError;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::encoding::{self, Coding, Failed};
use crate::metrics::{Metrics, add};
use crate::names::{self, Source};
use crate::options::Settings;
use crate::route::{Provider, Route, route};
use crate::sessions::{Held, Locks};
use crate::store::{Row, Store, now_secs};
use crate::unreadable::{Reason, Unreadable};
use crate::upstream::{End, Failure, Upstream, pump};
use crate::usage::Tap;

/// The body of every response the proxy gives.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// Everything a request's handling shares.
pub(crate) struct App {
    pub(crate) settings: Settings,
    pub(crate) store: Store,
    pub(crate) upstream: Upstream,
    pub(crate) metrics: Metrics,
    pub(crate) locks: Locks,
}

/// A header the proxy reads and never forwards (`x-cutctx-session` is read in [`names`]).
const BYPASS_HEADER: &str = "x-cutctx-bypass";
const FORMAT_HEADER: &str = "x-cutctx-format";

/// One line of the structured log on standard error: ids and figures, never content.
pub(crate) fn log(event: &Value) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{event}");
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// An error of the proxy's own, in `provider`'s error shape.
fn error(provider: Provider, status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = match provider {
        Provider::OpenAi => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": kind}})
        }
        Provider::Anthropic => {
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
    };
    let mut r = Response::new(full(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn text(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The label of `format` in metrics and logs.
const fn label(format: Option<Format>) -> &'static str {
    match format {
        Some(f) => f.as_str(),
        None => "other",
    }
}

/// Whether a header is hop-by-hop (RFC 9110 7.6.1) and so never forwarded.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// The request's headers as forwarded: hop-by-hop, `host`, `content-length` (the client
/// recomputes both) and the `x-cutctx-*` control headers left out, the rest unchanged.
fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
    // The headers `Connection` names are this hop's too.
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if hop_by_hop(name)
            || named.iter().any(|n| n == name.as_str())
            || name == header::HOST
            || name == header::CONTENT_LENGTH
            || name.as_str().starts_with("x-cutctx-")
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// What the session made of one model call.
struct Decided {
    /// The body to send: the session's request when `changed`, else the body as read.
    body: Bytes,
    /// Whether the session changed the request (then it is sent plain, as `body`); when it
    /// did not, the bytes that came in are sent, with their `Content-Encoding`.
    changed: bool,
    /// Whether this call fired.
    fired: bool,
    /// Estimates of the prompt as received and as sent.
    tokens_in: u64,
    tokens_out: u64,
    /// What found the session, whether this call started it, and whether its state started
    /// over (the history was rewound or changed).
    source: Source,
    started: bool,
    restarted: bool,
    /// The session, held until the response has been streamed.
    held: Held,
}

/// Why a model call goes out untouched or is refused.
enum Undecided {
    /// The request is not one the session handles (`previous_response_id`, no message list):
    /// forwarded as it is.
    Pass,
    /// It cannot be read or compacted: forwarded unchanged (fail-open) or refused.
    Unreadable(Unreadable),
}

impl From<OpsError> for Undecided {
    /// A failure of the proxy's own (its store, its ledger): the request itself may be fine.
    fn from(e: OpsError) -> Self {
        Self::Unreadable(Unreadable::new(Reason::Internal, e))
    }
}

/// The error `e` as a request unreadable for `reason`.
fn because(reason: Reason) -> impl FnOnce(OpsError) -> Undecided {
    move |e| Undecided::Unreadable(Unreadable::new(reason, e))
}

/// What a model call's body says, read.
struct Read {
    request: Value,
    window: u64,
    digests: Vec<String>,
}

/// What one step of the session made of a call.
struct Stepped {
    body: Bytes,
    changed: bool,
    fired: bool,
    restarted: bool,
    tokens_in: u64,
    tokens_out: u64,
}

/// A request body: the bytes as they came, and what they read as.
struct Payload {
    /// As received (still encoded, when it was).
    raw: Bytes,
    /// The body decoded from its `Content-Encoding`; why not, when it could not be.
    plain: Result<Bytes, Unreadable>,
}

impl Payload {
    /// The bytes to read the body's shape from: decoded when they could be.
    fn readable(&self) -> &[u8] {
        self.plain.as_ref().map_or(&self.raw, |b| b)
    }
}

/// Runs `f` on the blocking pool: parsing and compacting a large request takes milliseconds,
/// which the runtime's threads spend answering other sessions meanwhile.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Undecided> + Send + 'static,
) -> Result<T, Undecided> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Undecided::from(OpsError::internal(
            format!("a step of the call failed: {e}"),
            cutctx::model::details! {},
        ))
    })?
}

/// Reads the body off a request under `--max-body`: the bytes, or the response refusing them
/// (413 over the limit, 400 when the client's connection failed).
async fn collect(
    app: &App,
    body: Incoming,
    format: Option<Format>,
    provider: Provider,
) -> Result<Bytes, Response<Body>> {
    match Limited::new(body, app.settings.max_body).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            app.metrics.request(label(format), "too_large");
            Err(too_large(provider, app.settings.max_body, "is"))
        }
        Err(_) => {
            app.metrics.request(label(format), "unreadable");
            Err(error(
                provider,
                StatusCode::BAD_REQUEST,
                "cutctx_unreadable_request",
                "the request body could not be read",
            ))
        }
    }
}

/// The 413 refusal of a body that `is` (or `decodes to`) more than `limit` bytes.
fn too_large(provider: Provider, limit: usize, is: &str) -> Response<Body> {
    error(
        provider,
        StatusCode::PAYLOAD_TOO_LARGE,
        "cutctx_request_too_large",
        &format!("the request body {is} over the proxy's limit of {limit} bytes (--max-body)"),
    )
}

/// `raw` with its `Content-Encoding` undone (gzip, zstd) under `--max-body`: the payload, or
/// the 413 refusing a body that decodes to more (counted as `too_large` for `format`). A
/// coding the proxy does not know, or a body that does not decode, leaves the payload
/// unreadable, for reason `encoding`.
async fn payload(
    app: &App,
    headers: &HeaderMap,
    raw: Bytes,
    format: Option<Format>,
    provider: Provider,
) -> Result<Payload, Response<Body>> {
    let coding = encoding::coding(headers);
    let plain = match coding {
        Coding::Identity => Ok(raw.clone()),
        Coding::Unknown => Err(undecodable(
            coding,
            "the request's Content-Encoding is not one the proxy decodes (one of gzip, zstd)",
        )),
        Coding::Gzip | Coding::Zstd => {
            match decode(coding, raw.clone(), app.settings.max_body).await {
                Ok(plain) => Ok(plain),
                Err(Failed::TooLarge) => {
                    let limit = app.settings.max_body;
                    app.metrics.request(label(format), "too_large");
                    log(
                        &json!({"event": "too_large", "format": label(format), "encoding": coding.as_str(), "limit": limit}),
                    );
                    return Err(too_large(provider, limit, "decodes to"));
                }
                Err(Failed::Corrupt) => Err(undecodable(
                    coding,
                    "the request body does not decode as its Content-Encoding says",
                )),
            }
        }
    };
    Ok(Payload { raw, plain })
}

/// `raw` decoded from `coding` on the blocking pool (a large body takes milliseconds). A
/// decoder that panics has met a body it cannot decode.
async fn decode(coding: Coding, raw: Bytes, limit: usize) -> Result<Bytes, Failed> {
    tokio::task::spawn_blocking(move || encoding::decode(coding, &raw, limit))
        .await
        .unwrap_or(Err(Failed::Corrupt))
        .map(Bytes::from)
}

/// A body whose `coding` cannot be undone, unreadable for reason `encoding`.
fn undecodable(coding: Coding, message: &str) -> Unreadable {
    Unreadable::new(
        Reason::Encoding,
        OpsError::input(
            format!("{message} ({})", coding.as_str()),
            cutctx::model::details! { "encoding" => coding.as_str() },
        ),
    )
}

/// Runs the session's step for a model call of `format` whose body reads as `plain`.
async fn decide(
    app: &Arc<App>,
    format: Format,
    headers: &HeaderMap,
    plain: Result<Bytes, Unreadable>,
) -> Result<Decided, Undecided> {
    let bytes = plain.map_err(Undecided::Unreadable)?;
    let read = {
        let (app, bytes) = (Arc::clone(app), bytes.clone());
        blocking(move || read(&app, format, &bytes)).await?
    };
    let name = names::name(format, headers, &read.request);
    let key = name.as_ref().map(|n| n.key.as_str());
    let held = app
        .locks
        .hold(&app.store, format, key, &read.digests)
        .await?;
    let started = held.row.is_none();
    let stepped = {
        let (app, row, id) = (Arc::clone(app), held.row.clone(), held.id.clone());
        blocking(move || step(&app, format, &bytes, read, row.as_ref(), &id)).await?
    };
    Ok(Decided {
        body: stepped.body,
        changed: stepped.changed,
        fired: stepped.fired,
        tokens_in: stepped.tokens_in,
        tokens_out: stepped.tokens_out,
        source: name.map_or(Source::History, |n| n.source),
        started,
        restarted: stepped.restarted,
        held,
    })
}

/// Reads a model call's body: JSON, an object, with a history the session can work on.
fn read(app: &App, format: Format, bytes: &[u8]) -> Result<Read, Undecided> {
    let request = parse(bytes)?;
    if !request.is_object() {
        return Err(because(Reason::NotObject)(OpsError::input(
            "the request body is not a JSON object",
            cutctx::model::details! {},
        )));
    }
    if format == Format::OpenAiResponses
        && request
            .get("previous_response_id")
            .is_some_and(|v| !v.is_null())
    {
        // The provider holds that conversation; the request carries only its new part.
        return Err(Undecided::Pass);
    }
    let window = app
        .settings
        .windows
        .window_for(request.get("model").and_then(Value::as_str));
    let messages = history(format, &request);
    if messages.is_empty() {
        if format == Format::OpenAiResponses && request.get("input").is_none_or(|i| !i.is_array()) {
            // A Responses `input` string (or none, as with a stored prompt) is a valid request
            // with no history: nothing a session could compact or find, and no session is
            // made for it. An `input` of a shape this proxy does not know (an object) is
            // carried through untouched likewise, never refused as unreadable.
            return Err(Undecided::Pass);
        }
        // Chat Completions and Messages require a non-empty list: the provider would refuse
        // this request, so it is unreadable (forwarded and counted, or refused when closed).
        return Err(because(Reason::NoMessages)(OpsError::validation(
            format!(
                "the request has no {} list with a message in it",
                cutctx::formats::list_key(format)
            ),
            cutctx::model::details! { "key" => cutctx::formats::list_key(format) },
        )));
    }
    count_opaque(app, format, &request);
    let digests = history_digests(format, messages);
    Ok(Read {
        request,
        window,
        digests,
    })
}

/// `bytes` as UTF-8 JSON.
fn parse(bytes: &[u8]) -> Result<Value, Undecided> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        because(Reason::NotJson)(OpsError::input(
            format!(
                "the request body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
            cutctx::model::details! { "offset" => e.valid_up_to() },
        ))
    })?;
    serde_json::from_str(text).map_err(|e| {
        because(Reason::NotJson)(OpsError::input(
            format!(
                "the request body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
            cutctx::model::details! { "line" => e.line(), "column" => e.column() },
        ))
    })
}

/// Counts the items of `request` that compaction carries untouched, by reason, and logs how
/// many of each (reasons and figures, never content).
fn count_opaque(app: &App, format: Format, request: &Value) {
    let found = cutctx::formats::opaque_items(format, request);
    if found.is_empty() {
        return;
    }
    let mut by_reason: std::collections::BTreeMap<&'static str, u64> = Default::default();
    for o in &found {
        *by_reason.entry(o.reason).or_insert(0) += 1;
    }
    for (reason, n) in &by_reason {
        app.metrics.opaque(format.as_str(), reason, *n);
    }
    log(&json!({"event": "opaque", "format": format.as_str(), "items": by_reason}));
}

/// One step of session `id` (stored as `row`, if it is) for the call `bytes`, read as `read`:
/// the body to send, the receipt appended, the new state committed.
fn step(
    app: &App,
    format: Format,
    bytes: &Bytes,
    read: Read,
    row: Option<&Row>,
    id: &str,
) -> Result<Stepped, Undecided> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        OpsError::internal(
            "the body read as UTF-8 no longer does",
            cutctx::model::details! {},
        )
    })?;
    let ratio = row.map_or(1.0, |r| r.ratio).clamp(0.5, 2.0);
    // The provider counts `ratio` tokens for each one estimated: the window, in estimated
    // tokens, is that much smaller (or larger).
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a window of tokens scaled by a ratio in [0.5, 2], rounded down"
    )]
    let effective = ((read.window as f64) / ratio).floor() as u64;
    let options = app.settings.session_options(format, effective.max(1));
    let state = row
        .filter(|r| r.format == format.as_str())
        .map(|r| r.state.as_str());
    let out = cutctx_ops::session::session_with(&options, text, state, None)
        .map_err(|e| because(Reason::of_session(&e))(e))?;
    let untouched = out.output == text || out.output.strip_suffix('\n') == Some(text);
    let estimator = estimator(app)?;
    let tokens_in = prompt_tokens(format, &read.request, estimator.as_ref())
        .map_err(|e| because(Reason::Rule)(cutctx_ops::formats::from_format(e)))?;
    let (body, tokens_out) = if untouched {
        (bytes.clone(), tokens_in)
    } else {
        let sent: Value = serde_json::from_str(&out.output).map_err(|e| {
            OpsError::internal(
                format!("the session's request is not JSON: {e}"),
                cutctx::model::details! {},
            )
        })?;
        let n = prompt_tokens(format, &sent, estimator.as_ref())
            .map_err(cutctx_ops::formats::from_format)?;
        (Bytes::from(out.output), n)
    };
    if let (Some(ledger), Some(firing)) = (&app.settings.ledger, &out.firing) {
        cutctx_ops::ledger::append_firing(ledger, None, firing, &cutctx::ledger::SystemClock)?;
    }
    let state = SessionState::from_json(&out.state, format).map_err(OpsError::from)?;
    let new_row = Row {
        format: format.as_str().to_owned(),
        messages: state.messages() as u64,
        digest: state.history_digest(),
        state: out.state,
        ratio,
        cached_tokens: row.map_or(0, |r| r.cached_tokens),
        updated: now_secs(),
    };
    // Committed before anything is forwarded: a proxy killed after this point restarts with
    // the session as this call left it.
    app.store.save(
        id,
        &new_row,
        app.settings.max_age_secs,
        app.settings.max_sessions,
    )?;
    for line in out.notice.iter().chain(&out.reasoning) {
        log(&json!({"event": "session", "format": format.as_str(), "notice": line}));
    }
    Ok(Stepped {
        body,
        changed: !untouched,
        fired: out.firing.is_some(),
        restarted: out.notice.is_some(),
        tokens_in,
        tokens_out,
    })
}

/// The estimator the settings name.
fn estimator(app: &App) -> Result<Box<dyn cutctx::TokenEstimator>, OpsError> {
    let spec: EstimatorSpec = app
        .settings
        .tuning
        .estimator
        .as_deref()
        .map_or_else(|| Ok(EstimatorSpec::default()), str::parse)
        .map_err(cutctx_ops::formats::from_format)?;
    spec.estimator().map_err(cutctx_ops::formats::from_format)
}

/// The format of a `/v1/compact` body: the header's, else the one its shape suggests
/// ([`cutctx::formats::guess_format`]).
fn compact_format(headers: &HeaderMap, bytes: &[u8]) -> Result<Format, OpsError> {
    if let Some(v) = headers.get(FORMAT_HEADER) {
        let name = v.to_str().unwrap_or("");
        return name
            .parse::<Format>()
            .map_err(cutctx_ops::formats::from_format);
    }
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    Ok(cutctx::formats::guess_format(&v))
}

/// The fixed path of the endpoint for `format`'s model calls (in logs: never the client's).
const fn endpoint(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "/v1/chat/completions",
        Format::OpenAiResponses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}

/// Counts and logs a call of `format` to `path` the proxy could not read or compact: the
/// refusal to answer with when `--fail-closed`, else `None` (it is forwarded as it came).
fn refuse_or_count(
    app: &App,
    format: Format,
    path: &str,
    u: &Unreadable,
    provider: Provider,
) -> Option<Response<Body>> {
    let fail_closed = app.settings.fail_closed;
    log(&u.event(format.as_str(), path, fail_closed));
    app.metrics.unreadable(format.as_str(), u.reason.as_str());
    if fail_closed {
        app.metrics.request(format.as_str(), "fail_closed");
        return Some(error(
            provider,
            StatusCode::BAD_REQUEST,
            "cutctx_unreadable_request",
            &format!("{}: {}", u.error.code, u.error.message),
        ));
    }
    add(&app.metrics.fail_open, 1);
    None
}

/// A body the proxy answers or sends as it came: `raw`, with the `Content-Encoding` of
/// `headers` (if any), so that it still decodes as it did.
fn as_received(raw: Bytes, headers: &HeaderMap) -> Response<Body> {
    let mut r = text(StatusCode::OK, "application/json", raw);
    for v in headers.get_all(header::CONTENT_ENCODING) {
        r.headers_mut().append(header::CONTENT_ENCODING, v.clone());
    }
    r
}

/// `POST /v1/compact`: what would be sent for this request (the session updated as if it had
/// been), without sending it. A request sent as it came is answered as it came, encoded as it
/// was; one the session changed, plain.
async fn compact(app: &Arc<App>, headers: &HeaderMap, raw: Bytes) -> Response<Body> {
    let payload = match payload(app, headers, raw, None, Provider::OpenAi).await {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let format = match compact_format(headers, payload.readable()) {
        Ok(f) => f,
        Err(e) => {
            return error(
                Provider::OpenAi,
                StatusCode::BAD_REQUEST,
                "cutctx_unreadable_request",
                &e.message,
            );
        }
    };
    let provider = Provider::of(format);
    let raw = payload.raw;
    match decide(app, format, headers, payload.plain).await {
        Ok(d) => {
            count_decided(&app.metrics, format, &d, "compact");
            drop(d.held);
            if d.changed {
                text(StatusCode::OK, "application/json", d.body)
            } else {
                as_received(raw, headers)
            }
        }
        Err(Undecided::Pass) => as_received(raw, headers),
        Err(Undecided::Unreadable(u)) => refuse_or_count(app, format, "/v1/compact", &u, provider)
            .unwrap_or_else(|| {
                app.metrics.request(format.as_str(), "fail_open");
                as_received(raw, headers)
            }),
    }
}

/// What goes upstream for one call.
struct Outgoing {
    /// The body.
    body: Bytes,
    /// Whether it is the session's request, sent plain (its `Content-Encoding` dropped);
    /// otherwise it is the bytes that came in, sent with theirs.
    plain: bool,
    /// The outcome, for metrics and the log.
    outcome: &'static str,
    /// The session's decision, when it made one.
    decided: Option<Decided>,
}

/// Decides what a model call of `format` sends: the session's request, or (bypassed, not one
/// the session handles, unreadable) the bytes as they came; or the response refusing it.
async fn model_call(
    app: &Arc<App>,
    format: Format,
    headers: &HeaderMap,
    raw: Bytes,
    provider: Provider,
) -> Result<Outgoing, Response<Body>> {
    let mut out = Outgoing {
        body: raw.clone(),
        plain: false,
        outcome: "passthrough",
        decided: None,
    };
    if headers
        .get(BYPASS_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1")
    {
        out.outcome = "bypass";
        add(&app.metrics.passthrough, 1);
        return Ok(out);
    }
    let payload = payload(app, headers, raw, Some(format), provider).await?;
    match decide(app, format, headers, payload.plain).await {
        Ok(d) => {
            out.outcome = if d.fired { "fired" } else { "fits" };
            count_decided(&app.metrics, format, &d, out.outcome);
            if d.changed {
                out.body = d.body.clone();
                out.plain = true;
            }
            out.decided = Some(d);
        }
        Err(Undecided::Pass) => add(&app.metrics.passthrough, 1),
        Err(Undecided::Unreadable(u)) => {
            if let Some(refusal) = refuse_or_count(app, format, endpoint(format), &u, provider) {
                return Err(refusal);
            }
            out.outcome = "fail_open";
        }
    }
    Ok(out)
}

/// Handles one request; never fails (every failure is a response).
pub(crate) async fn handle(
    app: Arc<App>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let path = request.uri().path().to_owned();
    let routed = route(request.method(), &path);
    let format = match routed {
        Route::Health => return Ok(text(StatusCode::OK, "text/plain", "ok".to_owned())),
        Route::Metrics => {
            return Ok(text(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                app.metrics.render(),
            ));
        }
        Route::Handled(f) => Some(f),
        Route::Compact | Route::Pass(_) => None,
    };
    let (parts, body) = request.into_parts();
    let provider = match routed {
        Route::Pass(p) => p,
        _ => format.map_or(Provider::OpenAi, Provider::of),
    };
    let raw = match collect(&app, body, format, provider).await {
        Ok(b) => b,
        Err(refusal) => return Ok(refusal),
    };
    if routed == Route::Compact {
        return Ok(compact(&app, &parts.headers, raw).await);
    }
    let out = match format {
        Some(f) => match model_call(&app, f, &parts.headers, raw, provider).await {
            Ok(out) => out,
            Err(refusal) => return Ok(refusal),
        },
        None => {
            add(&app.metrics.passthrough, 1);
            Outgoing {
                body: raw,
                plain: false,
                outcome: "passthrough",
                decided: None,
            }
        }
    };
    if out.decided.is_none() {
        app.metrics.request(label(format), out.outcome);
    }
    let base = match provider {
        Provider::OpenAi => &app.settings.openai,
        Provider::Anthropic => &app.settings.anthropic,
    };
    let url = base.join(
        parts
            .uri
            .path_and_query()
            .map_or(path.as_str(), |p| p.as_str()),
    );
    let mut upstream_request = Request::new(Full::new(out.body));
    *upstream_request.method_mut() = parts.method.clone();
    *upstream_request.headers_mut() = forwarded_headers(&parts.headers);
    if out.plain {
        // The session's request is written plain: every provider reads it, and it is small
        // next to the history it replaced. hyper sets its Content-Length from the body.
        upstream_request
            .headers_mut()
            .remove(header::CONTENT_ENCODING);
    }
    match url.parse() {
        Ok(uri) => *upstream_request.uri_mut() = uri,
        Err(_) => {
            return Ok(error(
                provider,
                StatusCode::BAD_REQUEST,
                "cutctx_unreadable_request",
                "the request's path is not valid under the upstream's URL",
            ));
        }
    }
    app.metrics.added(started.elapsed());
    Ok(send(
        &app,
        upstream_request,
        format,
        provider,
        out.outcome,
        out.decided,
    )
    .await)
}

/// Sends `upstream_request` and streams its response back unchanged, its usage read on the
/// way when the session decided the call.
async fn send(
    app: &Arc<App>,
    upstream_request: Request<Full<Bytes>>,
    format: Option<Format>,
    provider: Provider,
    outcome: &'static str,
    decided: Option<Decided>,
) -> Response<Body> {
    let asked = Instant::now();
    let response = app.upstream.send(upstream_request).await;
    app.metrics.upstream(asked.elapsed());
    let response = match response {
        Ok(r) => r,
        Err(Failure::Timeout) => {
            log(
                &json!({"event": "upstream_timeout", "format": label(format), "timeout_ms": app.settings.upstream_timeout.as_millis()}),
            );
            app.metrics.request(label(format), "upstream_timeout");
            return error(
                provider,
                StatusCode::GATEWAY_TIMEOUT,
                "cutctx_upstream_timeout",
                &format!(
                    "the upstream did not answer within {} ms",
                    app.settings.upstream_timeout.as_millis()
                ),
            );
        }
        Err(Failure::Unreachable(why)) => {
            log(&json!({"event": "upstream_unreachable", "format": label(format), "why": why}));
            app.metrics.request(label(format), "upstream_unreachable");
            return error(
                provider,
                StatusCode::BAD_GATEWAY,
                "cutctx_upstream_unreachable",
                &format!("the upstream could not be reached: {why}"),
            );
        }
    };
    stream_back(app, response, format, outcome, decided)
}

/// The upstream's response as the client gets it: status and headers (less hop-by-hop), the
/// body pumped chunk by chunk through the usage tap; the session's lock goes with the call
/// once the body has ended.
fn stream_back(
    app: &Arc<App>,
    response: Response<Incoming>,
    format: Option<Format>,
    outcome: &'static str,
    decided: Option<Decided>,
) -> Response<Body> {
    let (mut rparts, rbody) = response.into_parts();
    let status = rparts.status.as_u16();
    let kept: HeaderMap = std::mem::take(&mut rparts.headers)
        .into_iter()
        .filter_map(|(k, v)| k.map(|k| (k, v)))
        .filter(|(k, _)| !hop_by_hop(k))
        .collect();
    rparts.headers = kept;
    // The client's connection is HTTP/1.1 whatever the upstream's was.
    rparts.version = hyper::Version::HTTP_11;
    let sse = rparts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let gzip = rparts
        .headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    let fmt = label(format);
    let ok = rparts.status.is_success();
    let tap = format
        .filter(|_| ok && decided.is_some())
        .map(|f| Tap::new(f, sse, gzip));
    let app2 = Arc::clone(app);
    let piped = pump(
        rbody,
        app.upstream.timeout(),
        (tap, decided),
        |(tap, _), chunk| {
            if let Some(t) = tap.as_mut() {
                t.feed(chunk);
            }
        },
        move |(tap, decided), end| {
            let mut usage = None;
            if let (Some(t), Some(d)) = (tap, decided.as_ref()) {
                // A stream cut after its usage event still reported (and billed) it: an SDK
                // closes once it reads the last event, which may be before the body's end.
                usage = match end {
                    End::Complete => t.finish(),
                    End::Failed | End::Cancelled => t.seen(),
                };
                if let Some(u) = usage {
                    // A durable write: off the runtime's own work, before the lock goes.
                    tokio::task::block_in_place(|| record(&app2, &d.held.id, d.tokens_out, u));
                }
            }
            log(&json!({
                "event": "response", "format": fmt, "outcome": outcome, "status": status,
                "end": end_name(end), "provider_prompt": usage.map(|u| u.prompt),
                "provider_cached": usage.map(|u| u.cached),
                "tokens_in": decided.as_ref().map(|d| d.tokens_in),
                "tokens_out": decided.as_ref().map(|d| d.tokens_out),
                "session": decided.as_ref().map(|d| d.source.as_str()),
                "new_session": decided.as_ref().map(|d| d.started),
                "restarted": decided.as_ref().map(|d| d.restarted),
            }));
            // The session's lock goes with the call, once its response has been streamed.
            drop(decided);
        },
    );
    Response::from_parts(rparts, piped.boxed())
}

fn count_decided(metrics: &Metrics, format: Format, d: &Decided, outcome: &'static str) {
    metrics.request(format.as_str(), outcome);
    add(&metrics.tokens_in, d.tokens_in);
    add(&metrics.tokens_out, d.tokens_out);
    add(
        &metrics.saved_units,
        d.tokens_in.saturating_sub(d.tokens_out),
    );
    if d.fired {
        add(&metrics.firings, 1);
    }
    if d.started {
        metrics.session(d.source.as_str());
    }
    if d.restarted {
        add(&metrics.session_restarts, 1);
    }
}

/// Records a finished call's usage on its session: the calibration ratio (the provider's
/// prompt over cutctx's estimate of what was sent, clamped to [0.5, 2]) and the cached prefix.
pub(crate) fn record(app: &App, id: &str, tokens_out: u64, usage: crate::usage::Usage) {
    add(&app.metrics.provider_cached, usage.cached);
    add(
        &app.metrics.provider_uncached,
        usage.prompt.saturating_sub(usage.cached),
    );
    if tokens_out == 0 || usage.prompt == 0 {
        return;
    }
    #[expect(clippy::cast_precision_loss, reason = "a ratio of two token counts")]
    let ratio = (usage.prompt as f64 / tokens_out as f64).clamp(0.5, 2.0);
    if let Err(e) = app.store.record_usage(id, ratio, usage.cached) {
        log(&json!({"event": "store_error", "code": e.code, "message": e.message}));
    }
}

/// How a pumped response ended, for the log.
pub(crate) const fn end_name(end: End) -> &'static str {
    match end {
        End::Complete => "complete",
        End::Failed => "failed",
        End::Cancelled => "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format_of(header: Option<&str>, body: &str) -> Result<Format, OpsError> {
        let mut h = HeaderMap::new();
        if let Some(v) = header {
            h.insert(FORMAT_HEADER, HeaderValue::from_str(v).expect("header"));
        }
        compact_format(&h, body.as_bytes())
    }

    #[test]
    fn compact_infers_the_format_from_the_header_else_the_body() {
        let chat =
            r#"{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(format_of(None, chat).expect("f"), Format::OpenAiChat);
        assert_eq!(
            format_of(Some("anthropic"), chat).expect("f"),
            Format::Anthropic
        );
        assert!(format_of(Some("gemini"), chat).is_err());
        let claude = r#"{"model":"claude-haiku-4-5","max_tokens":5,"messages":[]}"#;
        assert_eq!(format_of(None, claude).expect("f"), Format::Anthropic);
        assert_eq!(
            format_of(None, r#"{"model":"o3","input":"hi"}"#).expect("f"),
            Format::OpenAiResponses
        );
        let unknown = r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(format_of(None, unknown).expect("f"), Format::Anthropic);
        let tool = r#"{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x","tool_call_id":"c"}]}"#;
        assert_eq!(format_of(None, tool).expect("f"), Format::OpenAiChat);
    }

    #[test]
    fn hop_by_hop_host_length_and_control_headers_are_not_forwarded() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("host", "proxy"),
            ("content-length", "9"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("x-cutctx-session", "s"),
            ("authorization", "Bearer k"),
            ("anthropic-version", "2023-06-01"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let out = forwarded_headers(&h);
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["authorization", "anthropic-version"]);
    }
}
