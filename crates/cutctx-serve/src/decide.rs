//! The second and third phases of a model call: identify its conversation (the session its
//! name or its history finds, held under the session's lock) and decide what to send (one step
//! of the typed session the lock guards, the new state committed before anything is
//! forwarded). Both run, with the read, in one trip to the blocking pool. A request the session cannot read or compact is counted and forwarded as it
//! came (fail-open) or refused (`--fail-closed`).

use std::sync::Arc;

use bytes::Bytes;
use cutctx_ops::provider::history;
use cutctx_ops::session::{Call, Session};
use cutctx_ops::{Format, OpsError, details};
use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use crate::metrics::add;
use crate::names::{self, Source};
use crate::prior::{self, Hashed, Prior};
use crate::proxy::App;
use crate::read::{Read, Undecided, because, blocking, parse, read};
use crate::respond::{Body, error, log};
use crate::route::Provider;
use crate::sessions::Held;
use crate::store::{Row, now_secs};
use crate::unreadable::{Reason, Unreadable};

/// What the session made of one model call.
pub(crate) struct Decided {
    /// The body to send: the session's request when `changed`, else the body as read.
    pub(crate) body: Bytes,
    /// Whether the session changed the request (then it is sent plain, as `body`); when it
    /// did not, the bytes that came in are sent, with their `Content-Encoding`.
    pub(crate) changed: bool,
    /// Whether this call fired.
    pub(crate) fired: bool,
    /// Estimates of the prompt as received and as sent.
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    /// What found the session, whether this call started it, and whether its state started
    /// over (the history was rewound or changed).
    pub(crate) source: Source,
    pub(crate) started: bool,
    pub(crate) restarted: bool,
    /// The session, held until the response has been streamed.
    pub(crate) held: Held,
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

/// Reads, identifies and decides a model call of `format` whose body reads as `plain`
/// (already parsed as `parsed`, when it was), in one trip to the blocking pool: the request
/// parsed, held, stepped and freed on one thread, the store's answers awaited there.
pub(crate) async fn decide(
    app: &Arc<App>,
    format: Format,
    headers: &HeaderMap,
    plain: Result<Bytes, Unreadable>,
    parsed: Option<Value>,
) -> Result<Decided, Undecided> {
    let bytes = plain.map_err(Undecided::Unreadable)?;
    let (app, headers) = (Arc::clone(app), headers.clone());
    blocking(move || decide_here(&app, format, &headers, &bytes, parsed)).await
}

/// [`decide`], on the blocking pool.
fn decide_here(
    app: &App,
    format: Format,
    headers: &HeaderMap,
    bytes: &Bytes,
    parsed: Option<Value>,
) -> Result<Decided, Undecided> {
    let request = match parsed {
        Some(v) => v,
        None => parse(bytes)?,
    };
    let read = read(app, format, request)?;
    let (mut held, source, hashed) = match names::name(format, headers, &read.request) {
        Some(name) => {
            let held = app.locks.hold_named(&app.store, format, &name.key)?;
            (held, name.source, None)
        }
        None => {
            let messages = history(format, &read.request);
            let hashed = prior::hash(format, bytes, messages, None);
            let held = app
                .locks
                .hold_extended(&app.store, format, &hashed.digests)?;
            (held, Source::History, Some(hashed))
        }
    };
    let started = held.row.is_none();
    let named = hashed.is_none();
    // A named session's history is hashed from where its last body's grew.
    let hashed = hashed.unwrap_or_else(|| {
        let messages = history(format, &read.request);
        prior::hash(format, bytes, messages, held.slot.prior.as_ref())
    });
    let stepped = step(app, format, bytes, (read, hashed), named, &mut held)?;
    Ok(Decided {
        body: stepped.body,
        changed: stepped.changed,
        fired: stepped.fired,
        tokens_in: stepped.tokens_in,
        tokens_out: stepped.tokens_out,
        source,
        started,
        restarted: stepped.restarted,
        held,
    })
}

/// The window of a session whose provider counts `ratio` tokens for each one estimated: in
/// estimated tokens, that much smaller (or larger).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "a window of tokens scaled by a ratio in [0.5, 2], rounded down"
)]
fn effective_window(window: u64, ratio: f64) -> u64 {
    (((window as f64) / ratio).floor() as u64).max(1)
}

/// The typed session of `held` for a call of `format` against `window`: the one its slot
/// holds, else read from its row, else new.
fn session_of(
    app: &App,
    format: Format,
    held: &mut Held,
    window: u64,
) -> Result<Session, OpsError> {
    let row = held.row.as_ref().filter(|r| r.format == format.as_str());
    // The settings are read only when the slot holds no session for this row.
    let mut session = held.slot.take(row, |state| {
        let options = app.settings.session_options(format, window);
        match state {
            Some(text) => Session::restore(&options, text),
            None => Session::new(&options),
        }
    })?;
    session.set_window(window)?;
    Ok(session)
}

/// One step of the session `held` for the call `bytes`, read as `read`: the body to send, the
/// receipt appended, the new state committed (and kept typed in the session's slot).
fn step(
    app: &App,
    format: Format,
    bytes: &Bytes,
    (read, hashed): (Read, Hashed),
    named: bool,
    held: &mut Held,
) -> Result<Stepped, Undecided> {
    let ratio = held.row.as_ref().map_or(1.0, |r| r.ratio).clamp(0.5, 2.0);
    let window = effective_window(read.window, ratio);
    let on_session = |e: OpsError| because(Reason::of_session(&e))(e);
    let mut session = session_of(app, format, held, window).map_err(on_session)?;
    let call = Call {
        digests: Some(&hashed.digests),
        ..Call::default()
    };
    let prepared = session.step(read.request, call).map_err(on_session)?;
    let (body, changed) = match prepared.changed {
        false => (bytes.clone(), false),
        true => {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                OpsError::internal("the body read as UTF-8 no longer does", details! {})
            })?;
            let written = prepared.written(format, text)?;
            if written == text || written.strip_suffix('\n') == Some(text) {
                (bytes.clone(), false)
            } else {
                (Bytes::from(written), true)
            }
        }
    };
    if let (Some(ledger), Some(firing)) = (&app.settings.ledger, &prepared.firing) {
        cutctx_ops::ledger::append_firing(ledger, None, firing, &cutctx_ops::ledger::SystemClock)?;
    }
    let row = Row {
        format: format.as_str().to_owned(),
        messages: prepared.key.messages as u64,
        digest: prepared.key.digest.clone(),
        state: session.state_json().unwrap_or_default(),
        ratio,
        cached_tokens: held.row.as_ref().map_or(0, |r| r.cached_tokens),
        updated: now_secs(),
    };
    // Committed before anything is forwarded: a proxy killed after this point restarts with
    // the session as this call left it.
    let settings = &app.settings;
    app.store
        .save(&held.id, &row, settings.max_age_secs, settings.max_sessions)?;
    held.slot.keep(session, row);
    if named {
        held.slot.prior = Prior::keep(bytes.clone(), hashed, &app.bodies);
    }
    for line in prepared.notice.iter().chain(&prepared.reasoning) {
        log(&json!({"event": "session", "format": format.as_str(), "notice": line}));
    }
    Ok(Stepped {
        body,
        changed,
        fired: prepared.firing.is_some(),
        restarted: prepared.notice.is_some(),
        tokens_in: prepared.tokens_in,
        tokens_out: if changed {
            prepared.tokens_out
        } else {
            prepared.tokens_in
        },
    })
}

/// Counts and logs a call of `format` to `path` the proxy could not read or compact: the
/// refusal to answer with when `--fail-closed`, else `None` (it is forwarded as it came).
pub(crate) fn refuse_or_count(
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
