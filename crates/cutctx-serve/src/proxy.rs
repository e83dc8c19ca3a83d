//! The handler of one request: route it, read its body under the limit, let its session
//! decide what to send (or pass it through), forward it, and stream the response back
//! unchanged while its usage is read.
//!
//! A request the proxy cannot read or compact is forwarded unchanged and counted
//! (fail-open), or refused with 400 in the provider's error shape (`--fail-closed`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cutctx::formats::{EstimatorSpec, Format};
use cutctx::session::{SessionState, history, history_digests, prompt_tokens};
use cutctx_ops::OpsError;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::metrics::{Metrics, add};
use crate::options::Settings;
use crate::route::{Provider, Route, route};
use crate::sessions::{Held, Locks};
use crate::store::{Row, Store, now_secs};
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

/// A header the proxy reads and never forwards.
const SESSION_HEADER: &str = "x-cutctx-session";
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
    /// The body to send.
    body: Bytes,
    /// Whether this call fired.
    fired: bool,
    /// Estimates of the prompt as received and as sent.
    tokens_in: u64,
    tokens_out: u64,
    /// The session, held until the response has been streamed.
    held: Held,
}

/// Why a model call goes out untouched or is refused.
enum Undecided {
    /// The request is not one the session handles (`previous_response_id`, no message list):
    /// forwarded as it is.
    Pass,
    /// It cannot be read or compacted: forwarded unchanged (fail-open) or refused.
    Unreadable(OpsError),
}

impl From<OpsError> for Undecided {
    fn from(e: OpsError) -> Self {
        Self::Unreadable(e)
    }
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
    fired: bool,
    tokens_in: u64,
    tokens_out: u64,
}

/// Runs `f` on the blocking pool: parsing and compacting a large request takes milliseconds,
/// which the runtime's threads spend answering other sessions meanwhile.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Undecided> + Send + 'static,
) -> Result<T, Undecided> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Undecided::Unreadable(OpsError::internal(
            format!("a step of the call failed: {e}"),
            cutctx::model::details! {},
        ))
    })?
}

/// Runs the session's step for a model call of `format` with body `bytes`.
async fn decide(
    app: &Arc<App>,
    format: Format,
    headers: &HeaderMap,
    bytes: &Bytes,
) -> Result<Decided, Undecided> {
    let read = {
        let (app, bytes) = (Arc::clone(app), bytes.clone());
        blocking(move || read(&app, format, &bytes)).await?
    };
    let named = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let held = app
        .locks
        .hold(&app.store, format, named, &read.digests)
        .await?;
    let stepped = {
        let (app, bytes, row, id) = (
            Arc::clone(app),
            bytes.clone(),
            held.row.clone(),
            held.id.clone(),
        );
        blocking(move || step(&app, format, &bytes, read, row.as_ref(), &id)).await?
    };
    Ok(Decided {
        body: stepped.body,
        fired: stepped.fired,
        tokens_in: stepped.tokens_in,
        tokens_out: stepped.tokens_out,
        held,
    })
}

/// Reads a model call's body: JSON, an object, with a history the session can work on.
fn read(app: &App, format: Format, bytes: &[u8]) -> Result<Read, Undecided> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        OpsError::input(
            format!(
                "the request body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
            cutctx::model::details! { "offset" => e.valid_up_to() },
        )
    })?;
    let request: Value = serde_json::from_str(text).map_err(|e| {
        OpsError::input(
            format!(
                "the request body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
            cutctx::model::details! { "line" => e.line(), "column" => e.column() },
        )
    })?;
    if !request.is_object() {
        return Err(Undecided::Unreadable(OpsError::input(
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
        if format == Format::OpenAiResponses && request.get("input").is_none_or(Value::is_string) {
            // A Responses `input` string (or none, as with a stored prompt) is a valid request
            // with no history: nothing a session could compact or find, and no session is
            // made for it.
            return Err(Undecided::Pass);
        }
        // Chat Completions and Messages require a non-empty list: the provider would refuse
        // this request, so it is unreadable (forwarded and counted, or refused when closed).
        return Err(Undecided::Unreadable(OpsError::validation(
            format!(
                "the request has no {} list with a message in it",
                cutctx::formats::list_key(format)
            ),
            cutctx::model::details! { "key" => cutctx::formats::list_key(format) },
        )));
    }
    let digests = history_digests(format, messages);
    Ok(Read {
        request,
        window,
        digests,
    })
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
    let out = cutctx_ops::session::session_with(&options, text, state, None)?;
    let untouched = out.output == text || out.output.strip_suffix('\n') == Some(text);
    let spec: EstimatorSpec = app
        .settings
        .tuning
        .estimator
        .as_deref()
        .map_or_else(|| Ok(EstimatorSpec::default()), str::parse)
        .map_err(cutctx_ops::formats::from_format)?;
    let estimator = spec.estimator().map_err(cutctx_ops::formats::from_format)?;
    let tokens_in = prompt_tokens(format, &read.request, estimator.as_ref())
        .map_err(cutctx_ops::formats::from_format)?;
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
        fired: out.firing.is_some(),
        tokens_in,
        tokens_out,
    })
}

/// The format of a `/v1/compact` body: the header's, else the body's shape (`input`:
/// Responses; a `claude*` model: Anthropic; a `gpt-*` or `o<digit>*` model: Chat; a top-level
/// `system`, or `max_tokens` with no OpenAI-only role or field: Anthropic; otherwise Chat).
fn compact_format(headers: &HeaderMap, bytes: &[u8]) -> Result<Format, OpsError> {
    if let Some(v) = headers.get(FORMAT_HEADER) {
        let name = v.to_str().unwrap_or("");
        return name
            .parse::<Format>()
            .map_err(cutctx_ops::formats::from_format);
    }
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    if v.get("input").is_some() {
        return Ok(Format::OpenAiResponses);
    }
    let model = v.get("model").and_then(Value::as_str).unwrap_or("");
    if model.starts_with("claude") {
        return Ok(Format::Anthropic);
    }
    if model.starts_with("gpt-")
        || model
            .strip_prefix('o')
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Ok(Format::OpenAiChat);
    }
    let openai_only = v
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|ms| {
            ms.iter().any(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("system" | "developer" | "tool")
                ) || m.get("tool_calls").is_some()
            })
        });
    if v.get("system").is_some() || (v.get("max_tokens").is_some() && !openai_only) {
        Ok(Format::Anthropic)
    } else {
        Ok(Format::OpenAiChat)
    }
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
    let compact = routed == Route::Compact;
    let compact_format = |bytes: &[u8]| compact_format(&parts.headers, bytes);
    let provider = match routed {
        Route::Pass(p) => p,
        _ => format.map_or(Provider::OpenAi, Provider::of),
    };
    let bytes = match Limited::new(body, app.settings.max_body).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let too_large = e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            app.metrics.request(
                label(format),
                if too_large { "too_large" } else { "unreadable" },
            );
            return Ok(if too_large {
                error(
                    provider,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "cutctx_request_too_large",
                    &format!(
                        "the request body is over the proxy's limit of {} bytes (--max-body)",
                        app.settings.max_body
                    ),
                )
            } else {
                error(
                    provider,
                    StatusCode::BAD_REQUEST,
                    "cutctx_unreadable_request",
                    "the request body could not be read",
                )
            });
        }
    };
    if compact {
        let format = match compact_format(&bytes) {
            Ok(f) => f,
            Err(e) => {
                return Ok(error(
                    Provider::OpenAi,
                    StatusCode::BAD_REQUEST,
                    "cutctx_unreadable_request",
                    &e.message,
                ));
            }
        };
        let provider = Provider::of(format);
        return Ok(match decide(&app, format, &parts.headers, &bytes).await {
            Ok(d) => {
                count_decided(&app.metrics, format, &d, "compact");
                drop(d.held);
                text(StatusCode::OK, "application/json", d.body)
            }
            Err(Undecided::Pass) => text(StatusCode::OK, "application/json", bytes),
            Err(Undecided::Unreadable(e)) if app.settings.fail_closed => {
                app.metrics.request(format.as_str(), "fail_closed");
                error(
                    provider,
                    StatusCode::BAD_REQUEST,
                    "cutctx_unreadable_request",
                    &format!("{}: {}", e.code, e.message),
                )
            }
            Err(Undecided::Unreadable(e)) => {
                add(&app.metrics.fail_open, 1);
                app.metrics.request(format.as_str(), "fail_open");
                log(
                    &json!({"event": "fail_open", "format": format.as_str(), "code": e.code, "message": e.message}),
                );
                text(StatusCode::OK, "application/json", bytes)
            }
        });
    }
    let bypass = parts
        .headers
        .get(BYPASS_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1");
    let mut outcome = "passthrough";
    let mut sent = bytes.clone();
    let mut decided = None;
    if let (Some(f), false) = (format, bypass) {
        match decide(&app, f, &parts.headers, &bytes).await {
            Ok(d) => {
                outcome = if d.fired { "fired" } else { "fits" };
                count_decided(&app.metrics, f, &d, outcome);
                sent = d.body.clone();
                decided = Some(d);
            }
            Err(Undecided::Pass) => add(&app.metrics.passthrough, 1),
            Err(Undecided::Unreadable(e)) => {
                log(
                    &json!({"event": "unreadable", "format": f.as_str(), "code": e.code, "message": e.message, "fail_closed": app.settings.fail_closed}),
                );
                if app.settings.fail_closed {
                    app.metrics.request(f.as_str(), "fail_closed");
                    return Ok(error(
                        provider,
                        StatusCode::BAD_REQUEST,
                        "cutctx_unreadable_request",
                        &format!("{}: {}", e.code, e.message),
                    ));
                }
                add(&app.metrics.fail_open, 1);
                outcome = "fail_open";
            }
        }
    } else {
        if bypass {
            outcome = "bypass";
        }
        add(&app.metrics.passthrough, 1);
    }
    if decided.is_none() {
        app.metrics.request(label(format), outcome);
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
    let mut upstream_request = Request::new(Full::new(sent));
    *upstream_request.method_mut() = parts.method.clone();
    *upstream_request.headers_mut() = forwarded_headers(&parts.headers);
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
            return Ok(error(
                provider,
                StatusCode::GATEWAY_TIMEOUT,
                "cutctx_upstream_timeout",
                &format!(
                    "the upstream did not answer within {} ms",
                    app.settings.upstream_timeout.as_millis()
                ),
            ));
        }
        Err(Failure::Unreachable(why)) => {
            log(&json!({"event": "upstream_unreachable", "format": label(format), "why": why}));
            app.metrics.request(label(format), "upstream_unreachable");
            return Ok(error(
                provider,
                StatusCode::BAD_GATEWAY,
                "cutctx_upstream_unreachable",
                &format!("the upstream could not be reached: {why}"),
            ));
        }
    };
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
    let app2 = Arc::clone(&app);
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
            }));
            // The session's lock goes with the call, once its response has been streamed.
            drop(decided);
        },
    );
    Ok(Response::from_parts(rparts, piped.boxed()))
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
