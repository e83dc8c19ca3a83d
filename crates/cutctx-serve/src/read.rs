//! The first phase of a model call: read it. Its body is collected under `--max-body`,
//! decoded from its `Content-Encoding` (gzip, zstd) under the same limit, parsed once, and
//! checked for a history the session can work on; its items that compaction carries untouched
//! are counted. (The chained digests of its history are taken once, in [`crate::prior`].)

use bytes::Bytes;
use cutctx_ops::provider::{history, list_key, opaque_items};
use cutctx_ops::{Format, OpsError, details};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::encoding::{self, Coding, Failed};
use crate::proxy::App;
use crate::respond::{Body, error, label, log, too_large};
use crate::route::Provider;
use crate::unreadable::{Reason, Unreadable};

/// Why a model call goes out untouched or is refused.
pub(crate) enum Undecided {
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
pub(crate) fn because(reason: Reason) -> impl FnOnce(OpsError) -> Undecided {
    move |e| Undecided::Unreadable(Unreadable::new(reason, e))
}

/// Runs `f` on the blocking pool: parsing and compacting a large request takes milliseconds,
/// which the runtime's threads spend answering other sessions meanwhile.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Undecided> + Send + 'static,
) -> Result<T, Undecided> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        Undecided::from(OpsError::internal(
            format!("a step of the call failed: {e}"),
            details! {},
        ))
    })?
}

/// A header the proxy reads and never forwards (`x-cutctx-session` is read in [`names`]).
pub(crate) const BYPASS_HEADER: &str = "x-cutctx-bypass";

/// The header naming a `/v1/compact` body's format.
pub(crate) const FORMAT_HEADER: &str = "x-cutctx-format";

/// A request body: the bytes as they came, and what they read as.
pub(crate) struct Payload {
    /// As received (still encoded, when it was).
    pub(crate) raw: Bytes,
    /// The body decoded from its `Content-Encoding`; why not, when it could not be.
    pub(crate) plain: Result<Bytes, Unreadable>,
}

impl Payload {
    /// The bytes to read the body's shape from: decoded when they could be.
    pub(crate) fn readable(&self) -> &[u8] {
        self.plain.as_ref().map_or(&self.raw, |b| b)
    }
}

/// Reads the body off a request under `--max-body`, each chunk within `--header-timeout-ms`
/// of the one before: the bytes, or the response refusing them (413 over the limit, 408 for a
/// body that stalls, 400 when the client's connection failed).
pub(crate) async fn collect(
    app: &App,
    body: Incoming,
    format: Option<Format>,
    provider: Provider,
) -> Result<Bytes, Response<Body>> {
    let expected = usize::try_from(hyper::body::Body::size_hint(&body).lower())
        .unwrap_or(usize::MAX)
        .min(app.settings.max_body);
    let mut limited = Limited::new(body, app.settings.max_body);
    let mut chunks = Gathered::new(expected);
    loop {
        let frame = tokio::time::timeout(app.settings.header_timeout, limited.frame()).await;
        match frame {
            Err(_) => {
                app.metrics.request(label(format), "body_timeout");
                let ms = app.settings.header_timeout.as_millis();
                return Err(error(
                    provider,
                    StatusCode::REQUEST_TIMEOUT,
                    "cutctx_request_timeout",
                    &format!("the request body paused for over {ms} ms (--header-timeout-ms)"),
                ));
            }
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    chunks.add(data);
                }
            }
            Ok(Some(Err(e))) if e.downcast_ref::<LengthLimitError>().is_some() => {
                app.metrics.request(label(format), "too_large");
                return Err(too_large(provider, app.settings.max_body, "is"));
            }
            Ok(Some(Err(_))) => {
                app.metrics.request(label(format), "unreadable");
                return Err(error(
                    provider,
                    StatusCode::BAD_REQUEST,
                    "cutctx_unreadable_request",
                    "the request body could not be read",
                ));
            }
        }
    }
    Ok(chunks.into_bytes())
}

/// A body's chunks gathered into one buffer as they come, each freed once copied: a body is
/// held once (twice only for the chunk in hand), and one that came in one chunk is not copied.
enum Gathered {
    /// The body is expected to be this long (its `Content-Length`); nothing yet.
    Empty(usize),
    /// One chunk.
    One(Bytes, usize),
    /// Several, copied into one buffer sized for the whole body.
    Many(Vec<u8>),
}

impl Gathered {
    const fn new(expected: usize) -> Self {
        Self::Empty(expected)
    }

    fn add(&mut self, data: Bytes) {
        *self = match std::mem::replace(self, Self::Empty(0)) {
            Self::Empty(expected) => Self::One(data, expected),
            Self::One(first, expected) => {
                let mut all = Vec::with_capacity(expected.max(first.len() + data.len()));
                all.extend_from_slice(&first);
                all.extend_from_slice(&data);
                Self::Many(all)
            }
            Self::Many(mut all) => {
                all.extend_from_slice(&data);
                Self::Many(all)
            }
        };
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Self::Empty(_) => Bytes::new(),
            Self::One(b, _) => b,
            Self::Many(all) => Bytes::from(all),
        }
    }
}

/// `raw` with its `Content-Encoding` undone (gzip, zstd) under `--max-body`: the payload, or
/// the 413 refusing a body that decodes to more (counted as `too_large` for `format`). A
/// coding the proxy does not know, or a body that does not decode, leaves the payload
/// unreadable, for reason `encoding`.
pub(crate) async fn payload(
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
            details! { "encoding" => coding.as_str() },
        ),
    )
}

/// What a model call's body says, read.
pub(crate) struct Read {
    pub(crate) request: Value,
    pub(crate) window: u64,
}

/// Reads a model call's body: JSON, an object, with a history the session can work on.
pub(crate) fn read(app: &App, format: Format, request: Value) -> Result<Read, Undecided> {
    if !request.is_object() {
        return Err(because(Reason::NotObject)(OpsError::input(
            "the request body is not a JSON object",
            details! {},
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
                list_key(format)
            ),
            details! { "key" => list_key(format) },
        )));
    }
    count_opaque(app, format, &request);
    Ok(Read { request, window })
}

/// `bytes` as UTF-8 JSON.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, Undecided> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        because(Reason::NotJson)(OpsError::input(
            format!(
                "the request body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
            details! { "offset" => e.valid_up_to() },
        ))
    })?;
    serde_json::from_str(text).map_err(|e| {
        because(Reason::NotJson)(OpsError::input(
            format!(
                "the request body is not JSON (line {}, column {})",
                e.line(),
                e.column()
            ),
            details! { "line" => e.line(), "column" => e.column() },
        ))
    })
}

/// Counts the items of `request` that compaction carries untouched, by reason, and logs how
/// many of each (reasons and figures, never content).
fn count_opaque(app: &App, format: Format, request: &Value) {
    let found = opaque_items(format, request);
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

/// The format of a `/v1/compact` body: the header's, else the one its shape suggests
/// ([`cutctx_ops::provider::guess_format`]).
pub(crate) fn compact_format(headers: &HeaderMap, body: &Value) -> Result<Format, OpsError> {
    if let Some(v) = headers.get(FORMAT_HEADER) {
        let name = v.to_str().unwrap_or("");
        return name
            .parse::<Format>()
            .map_err(cutctx_ops::formats::from_format);
    }
    Ok(cutctx_ops::provider::guess_format(body))
}
