//! The responses the proxy writes itself, and its log: errors in the provider's own error
//! shape, plain bodies, a body returned as it came (with its `Content-Encoding`), and one line
//! of structured log per event (ids and figures, never content).

use std::convert::Infallible;

use bytes::Bytes;
use cutctx_ops::Format;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::route::Provider;

/// The body of every response the proxy gives.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// One line of the structured log on standard error: ids and figures, never content. The line
/// goes out in one write, so a process killed mid-log leaves whole lines (a pipe takes a write
/// of up to 4 KiB whole).
pub(crate) fn log(event: &Value) {
    use std::io::Write as _;
    let mut line = event.to_string();
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `s` cut to a length a log line keeps (a message of the proxy's own, never a client's text).
pub(crate) fn bounded(s: &str) -> String {
    s.chars().take(200).collect()
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// An error of the proxy's own, in `provider`'s error shape.
pub(crate) fn error(
    provider: Provider,
    status: StatusCode,
    kind: &str,
    message: &str,
) -> Response<Body> {
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

/// A body of the proxy's own.
pub(crate) fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The 413 refusal of a body that `is` (or `decodes to`) more than `limit` bytes.
pub(crate) fn too_large(provider: Provider, limit: usize, is: &str) -> Response<Body> {
    error(
        provider,
        StatusCode::PAYLOAD_TOO_LARGE,
        "cutctx_request_too_large",
        &format!("the request body {is} over the proxy's limit of {limit} bytes (--max-body)"),
    )
}

/// A body the proxy answers or sends as it came: `raw`, with the `Content-Encoding` of
/// `headers` (if any), so that it still decodes as it did.
pub(crate) fn as_received(raw: Bytes, headers: &HeaderMap) -> Response<Body> {
    let mut r = text(StatusCode::OK, "application/json", raw);
    for v in headers.get_all(header::CONTENT_ENCODING) {
        r.headers_mut().append(header::CONTENT_ENCODING, v.clone());
    }
    r
}

/// The label of `format` in metrics and logs.
pub(crate) const fn label(format: Option<Format>) -> &'static str {
    match format {
        Some(f) => f.as_str(),
        None => "other",
    }
}

/// The fixed path of the endpoint for `format`'s model calls (in logs: never the client's).
pub(crate) const fn endpoint(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "/v1/chat/completions",
        Format::OpenAiResponses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}
