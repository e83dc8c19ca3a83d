//! The fourth phase of a call: forward it. The upstream request is the client's method, path
//! and headers (less hop-by-hop ones, `host`, `content-length` and the `x-cutctx-*` control
//! headers) with the body the session decided on, sent to the provider's base URL under the
//! upstream timeout.

use std::time::Instant;

use bytes::Bytes;
use cutctx_ops::Format;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde_json::json;

use crate::proxy::{App, Outgoing};
use crate::respond::{Body, error, label, log};
use crate::route::Provider;
use crate::upstream::Failure;

/// Whether a header is hop-by-hop (RFC 9110 7.6.1) and so never forwarded.
pub(crate) fn hop_by_hop(name: &HeaderName) -> bool {
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
pub(crate) fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
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

/// The request to send upstream for the client's `parts` and the body `out` decided on; the
/// 400 refusing a path that is not valid under the upstream's URL.
pub(crate) fn upstream_request(
    app: &App,
    parts: &Parts,
    provider: Provider,
    out: &Outgoing,
) -> Result<Request<Full<Bytes>>, Response<Body>> {
    let base = match provider {
        Provider::OpenAi => &app.settings.openai,
        Provider::Anthropic => &app.settings.anthropic,
    };
    let url = base.join(
        parts
            .uri
            .path_and_query()
            .map_or(parts.uri.path(), |p| p.as_str()),
    );
    let mut request = Request::new(Full::new(out.body.clone()));
    *request.method_mut() = parts.method.clone();
    *request.headers_mut() = forwarded_headers(&parts.headers);
    if out.plain {
        // The session's request is written plain: every provider reads it, and it is small
        // next to the history it replaced. hyper sets its Content-Length from the body.
        request.headers_mut().remove(header::CONTENT_ENCODING);
    }
    let uri = url.parse().map_err(|_| {
        error(
            provider,
            StatusCode::BAD_REQUEST,
            "cutctx_unreadable_request",
            "the request's path is not valid under the upstream's URL",
        )
    })?;
    *request.uri_mut() = uri;
    Ok(request)
}

/// Sends `request` upstream: its response, or the 504 or 502 answering for an upstream that
/// timed out or could not be reached.
pub(crate) async fn forward(
    app: &App,
    request: Request<Full<Bytes>>,
    format: Option<Format>,
    provider: Provider,
) -> Result<Response<Incoming>, Response<Body>> {
    let asked = Instant::now();
    let response = app.upstream.send(request).await;
    app.metrics.upstream(asked.elapsed());
    response.map_err(|failure| match failure {
        Failure::Timeout => {
            let ms = app.settings.upstream_timeout.as_millis();
            log(&json!({"event": "upstream_timeout", "format": label(format), "timeout_ms": ms}));
            app.metrics.request(label(format), "upstream_timeout");
            error(
                provider,
                StatusCode::GATEWAY_TIMEOUT,
                "cutctx_upstream_timeout",
                &format!("the upstream did not answer within {ms} ms"),
            )
        }
        Failure::Unreachable(why) => {
            log(&json!({"event": "upstream_unreachable", "format": label(format), "why": crate::respond::bounded(&why)}));
            app.metrics.request(label(format), "upstream_unreachable");
            error(
                provider,
                StatusCode::BAD_GATEWAY,
                "cutctx_upstream_unreachable",
                &format!("the upstream could not be reached: {why}"),
            )
        }
    })
}
