//! The second and third phases of a model call: identify its conversation (the session its
//! name or its history finds within its tenant's scope, [`crate::tenant`]) and decide what to
//! send (one step of the typed session, the new state committed before anything is
//! forwarded). Both run, with the read, in one trip to the blocking pool, and the session's
//! lock is given back as soon as its state is committed: no call waits while another's
//! response streams. A request the session cannot read or compact is counted and forwarded as
//! it came (fail-open) or refused (`--fail-closed`). A state that does not read is
//! quarantined and the conversation starts a fresh session, and a store that fails leaves the
//! call to a fresh session too: a lost state never sends a history over the window.

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
use crate::respond::{Body, bounded, error, log};
use crate::route::Provider;
use crate::sessions::Held;
use crate::store::{Limits, Row, Saved, checkpoint, now_secs};
use crate::summaries;
use crate::tenant::{self, Keyed};
use crate::unreadable::{Reason, Unreadable};

/// The state a call committed: what a refusal of its credential rolls back, and what its
/// usage is recorded against.
pub(crate) struct Commit {
    /// The session's id.
    pub(crate) id: String,
    /// Its row before the call (`None`: the call made it).
    pub(crate) before: Option<Row>,
    /// The row the call wrote.
    pub(crate) wrote: Row,
}

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
    /// The state this call committed, when it did.
    pub(crate) commit: Option<Commit>,
    /// The session's id as the log shows it: a short keyed hash.
    pub(crate) log_id: String,
    /// A summary to make in the background, after the call has gone on.
    pub(crate) pending: Option<crate::summaries::Pending>,
}

/// What one step of the session made of a call.
struct Stepped {
    commit: Option<Commit>,
    pending: Option<crate::summaries::Pending>,
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
    call: (&HeaderMap, &str),
    plain: Result<Bytes, Unreadable>,
    parsed: Option<Value>,
) -> Result<Decided, Undecided> {
    let bytes = plain.map_err(Undecided::Unreadable)?;
    let (app, headers, tenant) = (Arc::clone(app), call.0.clone(), call.1.to_owned());
    blocking(move || decide_here(&app, format, (&headers, &tenant), &bytes, parsed)).await
}

/// The id of the session a request of `format` names `name`, in its tenant's `scope`: a name
/// given to the proxy (`x-cutctx-session`) is one session per tenant whatever the request's
/// untouchable part; a client's own session id is one per scope (so its side calls on
/// another model or prompt keep sessions of their own).
fn named_id(
    secret: &[u8; 32],
    (tenant, scope): (&str, &str),
    format: Format,
    name: &names::Name,
) -> String {
    let within = match name.source {
        Source::Cutctx => tenant,
        _ => scope,
    };
    let id = Keyed::new(secret, "cutctx-serve named session")
        .part(within.as_bytes())
        .part(name.key.as_bytes())
        .hex();
    format!("named-{}-{id}", format.as_str())
}

/// [`decide`], on the blocking pool.
fn decide_here(
    app: &App,
    format: Format,
    (headers, tenant): (&HeaderMap, &str),
    bytes: &Bytes,
    parsed: Option<Value>,
) -> Result<Decided, Undecided> {
    let request = match parsed {
        Some(v) => v,
        None => parse(bytes)?,
    };
    let read = read(app, format, request)?;
    let secret = app.store.secret();
    let scope = tenant::scope(secret, tenant, format, &read.request);
    let (mut held, source, hashed) = match names::name(format, headers, &read.request) {
        Some(name) => {
            let id = named_id(secret, (tenant, &scope), format, &name);
            (app.locks.hold_named(&app.store, id), name.source, None)
        }
        None => {
            let messages = history(format, &read.request);
            let hashed = prior::hash(format, bytes, messages, None);
            let held = app.locks.hold_extended(&app.store, &scope, &hashed.digests);
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
    let log_id = tenant::short(secret, &held.id);
    let owner = (tenant.to_owned(), scope);
    let stepped = step(
        app,
        (format, owner, headers, &log_id),
        bytes,
        (read, hashed),
        named,
        &mut held,
    )?;
    // The lock goes here, with `held`: the state is committed.
    drop(held);
    Ok(Decided {
        body: stepped.body,
        changed: stepped.changed,
        fired: stepped.fired,
        tokens_in: stepped.tokens_in,
        tokens_out: stepped.tokens_out,
        source,
        started,
        restarted: stepped.restarted,
        commit: stepped.commit,
        log_id,
        pending: stepped.pending,
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
    let made = held.slot.take(row, |state| {
        let options = app.settings.session_options(format, window);
        match state {
            Some(text) => Session::restore(&options, text),
            None => Session::new(&options),
        }
    });
    let mut session = match made {
        Ok(s) => s,
        Err(e) if row.is_some() => {
            quarantine(app, held, e.code);
            Session::new(&app.settings.session_options(format, window))?
        }
        Err(e) => return Err(e),
    };
    session.set_window(window)?;
    Ok(session)
}

/// Moves `held`'s row, whose state did not read (`code`), to the quarantine: the
/// conversation goes on with a fresh session.
fn quarantine(app: &App, held: &mut Held, code: &'static str) {
    held.row = None;
    add(&app.metrics.quarantined, 1);
    log(&json!({"event": "session_quarantined", "code": code,
        "session_id": tenant::short(app.store.secret(), &held.id)}));
    if let Err(e) = app.store.quarantine(&held.id, code) {
        log(&json!({"event": "store_error", "code": e.code, "message": bounded(&e.message)}));
    }
}

/// One step of the session `held` for the call `bytes`, read as `read`: the body to send, the
/// receipt appended, the new state committed (and kept typed in the session's slot).
fn step(
    app: &App,
    (format, (tenant, scope), headers, log_id): (Format, (String, String), &HeaderMap, &str),
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
    let pending = match &app.settings.summarizer {
        Some(s) if s.at_firing() => {
            summaries::at_firing(app, (format, headers, log_id), &mut session, &read.request);
            None
        }
        Some(_) if held.kept => summaries::ahead(
            app,
            (format, headers, window),
            (&held.id, log_id),
            &session,
            &read.request,
        ),
        _ => None,
    };
    let prepared = session.step(read.request, call).map_err(on_session)?;
    let fired = prepared.firing.is_some() || prepared.swapped.is_some();
    // A summary asked for the request this call sends is of no use once it fired.
    let pending = pending.filter(|_| !fired);
    summaries::count_firing(app, format, &prepared, log_id);
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
    let messages = prepared.key.messages as u64;
    let at = usize::try_from(checkpoint(messages)).unwrap_or(usize::MAX);
    let row = Row {
        tenant,
        scope,
        format: format.as_str().to_owned(),
        messages,
        digest: prepared.key.digest.clone(),
        checkpoint_digest: hashed.digests.get(at).cloned().unwrap_or_default(),
        state: session.state_json().unwrap_or_default(),
        ratio,
        cached_tokens: held.row.as_ref().map_or(0, |r| r.cached_tokens),
        updated: now_secs(),
    };
    for line in prepared.notice.iter().chain(&prepared.reasoning) {
        log(&json!({"event": "session", "format": format.as_str(), "notice": bounded(line)}));
    }
    // Committed before anything is forwarded: a proxy killed after this point restarts with
    // the session as this call left it.
    let commit = held.kept.then(|| commit(app, held, row, session)).flatten();
    if named && commit.is_some() {
        held.slot.prior = Prior::keep(bytes.clone(), hashed, &app.bodies);
    }
    Ok(Stepped {
        commit,
        pending,
        body,
        changed,
        fired,
        restarted: prepared.notice.is_some(),
        tokens_in: prepared.tokens_in,
        tokens_out: if changed {
            prepared.tokens_out
        } else {
            prepared.tokens_in
        },
    })
}

/// Writes `row`, `held`'s new state, and keeps `session` typed in its slot: the commit, or
/// `None` when the store did not keep it (full, or failed: logged, and the call goes on).
fn commit(app: &App, held: &mut Held, row: Row, session: Session) -> Option<Commit> {
    let settings = &app.settings;
    let limits = Limits {
        max_age: settings.max_age_secs,
        max_sessions: settings.max_sessions,
        per_tenant: settings.max_sessions_per_tenant,
    };
    match app.store.save(&held.id, &row, limits) {
        Ok(Saved::Stored) => {
            held.slot.keep(session, row.clone());
            Some(Commit {
                id: held.id.clone(),
                before: held.row.take(),
                wrote: row,
            })
        }
        Ok(Saved::Full) => {
            add(&app.metrics.store_full, 1);
            log(&json!({"event": "store_full", "max_sessions": settings.max_sessions}));
            None
        }
        Err(e) => {
            log(&json!({"event": "store_error", "code": e.code, "message": bounded(&e.message)}));
            None
        }
    }
}

/// Offers the summary `answer` made in the background for `pending` to its session, held as
/// any call holds it, and commits the state that keeps it; a session that moved on, or could
/// not be had in time, leaves it unused (counted).
pub(crate) fn offer_ahead(app: &App, pending: &crate::summaries::Pending, answer: &Value) {
    let mut held = app.locks.hold_named(&app.store, pending.id.clone());
    let Some(before) = held.row.clone().filter(|_| held.kept) else {
        app.metrics.summary(pending.ask.kind.as_str(), "stale");
        return;
    };
    let Ok(mut session) = session_of(app, pending.format, &mut held, pending.window) else {
        app.metrics.summary(pending.ask.kind.as_str(), "stale");
        return;
    };
    if !summaries::offer(app, &mut session, &pending.ask, answer, &pending.log_id) {
        return;
    }
    let row = Row {
        state: session.state_json().unwrap_or_default(),
        updated: now_secs(),
        ..before
    };
    commit(app, &mut held, row, session);
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
