//! The last phase of a call: relay the upstream's response to the client unchanged, streamed
//! chunk by chunk, while its usage is read; then account for it: the call's metrics and log
//! line, and the calibration its usage teaches the session (recorded from the blocking pool,
//! before the session's lock goes).

use std::sync::Arc;

use cutctx_ops::Format;
use http_body_util::BodyExt;
use hyper::Response;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap};
use serde_json::json;

use crate::decide::Decided;
use crate::forward::hop_by_hop;
use crate::metrics::{Metrics, add};
use crate::proxy::App;
use crate::respond::{Body, label, log};
use crate::upstream::{End, pump};
use crate::usage::Tap;

/// The upstream's response as the client gets it: status and headers (less hop-by-hop), the
/// body pumped chunk by chunk through the usage tap.
pub(crate) fn stream_back(
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
            if let (Some(t), Some(_)) = (tap, decided.as_ref()) {
                // A stream cut after its usage event still reported (and billed) it: an SDK
                // closes once it reads the last event, which may be before the body's end.
                usage = match end {
                    End::Complete => t.finish(),
                    End::Failed | End::Cancelled => t.seen(),
                };
            }
            log(&json!({
                "event": "response", "format": fmt, "outcome": outcome, "status": status,
                "end": end_name(end), "provider_prompt": usage.map(|u| u.prompt),
                "provider_cached": usage.map(|u| u.cached),
                "tokens_in": decided.as_ref().map(|d| d.tokens_in),
                "tokens_out": decided.as_ref().map(|d| d.tokens_out),
                "session": decided.as_ref().map(|d| d.source.as_str()),
                "session_id": decided.as_ref().map(|d| d.log_id.as_str()),
                "new_session": decided.as_ref().map(|d| d.started),
                "restarted": decided.as_ref().map(|d| d.restarted),
            }));
            // The usage calibrates the session the call committed (a write on the blocking
            // pool; no lock: a later call of the session keeps its own).
            if let (Some(u), Some(d)) = (usage, decided) {
                count_usage(&app2.metrics, u);
                if let Some(commit) = d.commit {
                    tokio::task::spawn_blocking(move || {
                        record(&app2, (&commit.id, &commit.wrote.digest), d.tokens_out, u);
                    });
                }
            }
        },
    );
    Response::from_parts(rparts, piped.boxed())
}

pub(crate) fn count_decided(metrics: &Metrics, format: Format, d: &Decided, outcome: &'static str) {
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
/// Blocks on the store: call it from the blocking pool.
pub(crate) fn record(
    app: &App,
    (id, digest): (&str, &str),
    tokens_out: u64,
    usage: crate::usage::Usage,
) {
    if tokens_out == 0 || usage.prompt == 0 {
        return;
    }
    #[expect(clippy::cast_precision_loss, reason = "a ratio of two token counts")]
    let ratio = (usage.prompt as f64 / tokens_out as f64).clamp(0.5, 2.0);
    if let Err(e) = app.store.record_usage(id, digest, ratio, usage.cached) {
        log(
            &json!({"event": "store_error", "code": e.code, "message": crate::respond::bounded(&e.message)}),
        );
    }
}

/// Counts what the provider's usage said it cached, and did not.
fn count_usage(metrics: &Metrics, usage: crate::usage::Usage) {
    add(&metrics.provider_cached, usage.cached);
    add(
        &metrics.provider_uncached,
        usage.prompt.saturating_sub(usage.cached),
    );
}

/// How a pumped response ended, for the log.
pub(crate) const fn end_name(end: End) -> &'static str {
    match end {
        End::Complete => "complete",
        End::Failed => "failed",
        End::Cancelled => "cancelled",
    }
}
