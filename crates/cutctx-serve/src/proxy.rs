//! The handler of one request, as phases, each a function with one job:
//!
//! 1. **route** ([`crate::route`]): health, metrics, `/v1/compact`, a model call, or a path
//!    passed through;
//! 2. **read** ([`crate::read`]): the body under the limit, decoded, parsed once, its history's
//!    digests taken once;
//! 3. **identify and decide** ([`crate::decide`]): the conversation's session held, one step of
//!    it, its state committed;
//! 4. **forward** ([`crate::forward`]): the upstream request, sent;
//! 5. **relay and account** ([`crate::relay`]): the response streamed back unchanged while its
//!    usage is read, then the metrics, the log line and the calibration.
//!
//! What goes upstream is either the bytes that came in, with their `Content-Encoding`, or
//! the session's compacted request, plain. A request the proxy cannot read or compact is
//! forwarded unchanged and counted by reason (fail-open), or refused with 400 in the
//! provider's error shape (`--fail-closed`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cutctx_ops::Format;
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Request, Response, StatusCode};

use crate::decide::{Decided, decide, refuse_or_count};
use crate::forward::{forward, upstream_request};
use crate::metrics::{Metrics, add};
use crate::options::Settings;
use crate::read::{BYPASS_HEADER, Undecided, collect, compact_format, parse, payload};
use crate::relay::{count_decided, stream_back};
use crate::respond::{Body, as_received, endpoint, error, label, text};
use crate::route::{Provider, Route, route};
use crate::sessions::Locks;
use crate::store::Store;
use crate::tenant;
use crate::upstream::Upstream;

pub(crate) use crate::respond::log;

/// Everything a request's handling shares.
pub(crate) struct App {
    pub(crate) settings: Settings,
    pub(crate) store: Arc<Store>,
    pub(crate) upstream: Upstream,
    pub(crate) metrics: Metrics,
    pub(crate) locks: Locks,
    /// The budget of the bodies named sessions keep ([`crate::prior`]).
    pub(crate) bodies: Arc<crate::prior::Budget>,
    /// What the proxy's summaries share across calls.
    pub(crate) summaries: crate::summaries::Shared,
}

/// What goes upstream for one call.
pub(crate) struct Outgoing {
    /// The body.
    pub(crate) body: Bytes,
    /// Whether it is the session's request, sent plain (its `Content-Encoding` dropped);
    /// otherwise it is the bytes that came in, sent with theirs.
    pub(crate) plain: bool,
    /// The outcome, for metrics and the log.
    pub(crate) outcome: &'static str,
    /// The session's decision, when it made one.
    pub(crate) decided: Option<Decided>,
}

impl Outgoing {
    /// The bytes that came in, sent as they came.
    const fn as_received(body: Bytes, outcome: &'static str) -> Self {
        Self {
            body,
            plain: false,
            outcome,
            decided: None,
        }
    }
}

/// Handles one request; never fails (every failure is a response).
pub(crate) async fn handle(
    app: Arc<App>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let routed = route(request.method(), request.uri().path());
    if routed == Route::Health {
        return Ok(text(StatusCode::OK, "text/plain", "ok".to_owned()));
    }
    let token = match app.settings.auth.check(request.headers()) {
        Ok(token) => token.map(str::to_owned),
        Err(()) => return Ok(unauthorized(&app, request.uri().path())),
    };
    let tenant = tenant::tenant(app.store.secret(), request.headers(), token.as_deref());
    let format = match routed {
        Route::Health => unreachable!("answered above"),
        Route::Metrics => {
            let page = app.metrics.render();
            return Ok(text(StatusCode::OK, "text/plain; version=0.0.4", page));
        }
        Route::Handled(f) => Some(f),
        Route::Compact | Route::Pass(_) => None,
    };
    let provider = match routed {
        Route::Pass(p) => p,
        _ => format.map_or(Provider::OpenAi, Provider::of),
    };
    let (parts, body) = request.into_parts();
    let raw = match collect(&app, body, format, provider).await {
        Ok(b) => b,
        Err(refusal) => return Ok(refusal),
    };
    if routed == Route::Compact {
        return Ok(compact(&app, (&parts.headers, &tenant), raw).await);
    }
    let out = match format {
        Some(f) => match model_call(&app, f, (&parts.headers, &tenant), raw, provider).await {
            Ok(out) => out,
            Err(refusal) => return Ok(refusal),
        },
        None => {
            add(&app.metrics.passthrough, 1);
            Outgoing::as_received(raw, "passthrough")
        }
    };
    if out.decided.is_none() {
        app.metrics.request(label(format), out.outcome);
    }
    let upstream = match upstream_request(&app, &parts, provider, &out) {
        Ok(r) => r,
        Err(refusal) => return Ok(refusal),
    };
    app.metrics.added(started.elapsed());
    Ok(match forward(&app, upstream, format, provider).await {
        Ok(response) => {
            let decided = refused_credential(&app, response.status(), out.decided).await;
            stream_back(&app, response, format, out.outcome, decided)
        }
        Err(refusal) => refusal,
    })
}

/// The 401 for a request without the proxy's token (or with a wrong one), in the shape of the
/// provider that owns `path`.
fn unauthorized(app: &App, path: &str) -> Response<Body> {
    add(&app.metrics.unauthorized, 1);
    app.metrics.request("other", "unauthorized");
    let mut r = error(
        Provider::owning(path),
        StatusCode::UNAUTHORIZED,
        "cutctx_unauthorized",
        "this proxy needs its own token: send it as `x-cutctx-auth: TOKEN` (or `Proxy-Authorization: Bearer TOKEN`); it is not the provider's API key",
    );
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer realm=\"cutctx serve\""),
    );
    r
}

/// A call the provider refused for its credential (401, 403) changes no session: the state
/// it committed is rolled back before the refusal reaches the client. Other answers keep it.
async fn refused_credential(
    app: &Arc<App>,
    status: StatusCode,
    decided: Option<Decided>,
) -> Option<Decided> {
    let refused = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN);
    let mut decided = decided?;
    if !refused {
        return Some(decided);
    }
    if let Some(commit) = decided.commit.take() {
        let app = Arc::clone(app);
        let _ = tokio::task::spawn_blocking(move || {
            match app
                .store
                .roll_back(&commit.id, commit.before.as_ref(), &commit.wrote)
            {
                Ok(()) => add(&app.metrics.rolled_back, 1),
                Err(e) => log(&serde_json::json!({"event": "store_error", "code": e.code,
                    "message": crate::respond::bounded(&e.message)})),
            }
        })
        .await;
    }
    Some(decided)
}

/// Decides what a model call of `format` sends: the session's request, or (bypassed, not one
/// the session handles, unreadable) the bytes as they came; or the response refusing it.
async fn model_call(
    app: &Arc<App>,
    format: Format,
    (headers, tenant): (&HeaderMap, &str),
    raw: Bytes,
    provider: Provider,
) -> Result<Outgoing, Response<Body>> {
    if headers
        .get(BYPASS_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1")
    {
        add(&app.metrics.passthrough, 1);
        return Ok(Outgoing::as_received(raw, "bypass"));
    }
    let payload = payload(app, headers, raw.clone(), Some(format), provider).await?;
    let mut out = Outgoing::as_received(raw, "passthrough");
    match decide(app, format, (headers, tenant), payload.plain, None).await {
        Ok(mut d) => {
            if let Some(pending) = d.pending.take() {
                // Made beside the call, which goes on at once.
                tokio::spawn(crate::summaries::run(Arc::clone(app), pending));
            }
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

/// `POST /v1/compact`: what would be sent for this request (the session updated as if it had
/// been), without sending it. A request sent as it came is answered as it came, encoded as it
/// was; one the session changed, plain.
async fn compact(
    app: &Arc<App>,
    (headers, tenant): (&HeaderMap, &str),
    raw: Bytes,
) -> Response<Body> {
    let payload = match payload(app, headers, raw, None, Provider::OpenAi).await {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    // Parsed once: the format is guessed from the value the session then reads.
    let parsed = parse(payload.readable()).ok();
    let format = match compact_format(headers, parsed.as_ref().unwrap_or(&serde_json::Value::Null))
    {
        Ok(f) => f,
        Err(e) => {
            let code = "cutctx_unreadable_request";
            return error(Provider::OpenAi, StatusCode::BAD_REQUEST, code, &e.message);
        }
    };
    let provider = Provider::of(format);
    let raw = payload.raw;
    let parsed = parsed.filter(|_| payload.plain.is_ok());
    match decide(app, format, (headers, tenant), payload.plain, parsed).await {
        Ok(d) => {
            count_decided(&app.metrics, format, &d, "compact");
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

#[cfg(test)]
mod tests {
    use hyper::header::{HeaderName, HeaderValue};

    use super::*;
    use crate::forward::forwarded_headers;
    use crate::read::FORMAT_HEADER;

    fn format_of(header: Option<&str>, body: &str) -> Result<Format, cutctx_ops::OpsError> {
        let mut h = HeaderMap::new();
        if let Some(v) = header {
            h.insert(FORMAT_HEADER, HeaderValue::from_str(v).expect("header"));
        }
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        compact_format(&h, &body)
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
