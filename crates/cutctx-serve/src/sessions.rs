//! Finding a request's session: the one its name names (the digest [`crate::names`] made of
//! the name the request gives its conversation), else the stored session whose recorded
//! history the request extends (the longest such; never one whose history it diverges from),
//! else a new one. Histories are compared by the chained digests the session state itself
//! keeps ([`cutctx_ops::provider::history_digests`]), so nothing of a message is stored to find it.
//! A named session whose history the request rewinds or rewrites is the same session: its
//! state starts over there (`cutctx_ops::session::Session::step` sets a state that does not describe the
//! history aside).
//!
//! Each session has an async lock: its calls run one at a time (a call's state is the one the
//! call before it left), while other sessions' calls run beside them. The lock guards the
//! session's [`Slot`]: the typed session (`cutctx_ops::session::Session`) as the last call
//! left it, so that a call on a session in use reads no state back; the store's row is the
//! truth it is checked against, and a slot that no longer matches it is read again from it.
//! The store is read from the blocking pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cutctx_ops::Format;
use cutctx_ops::OpsError;
use cutctx_ops::session::Session;
use tokio::sync::OwnedMutexGuard;

use crate::store::{Row, Store};

/// How many sessions' locks (and typed sessions) are kept before those nobody holds are
/// forgotten: a bound on what the proxy holds in memory beside its store (about 12 KB a
/// session, measured at 10,000 idle sessions of 10 messages).
const LIVE: usize = 1024;

/// The locks of the sessions in use, each over its session's [`Slot`].
#[derive(Debug, Default)]
pub(crate) struct Locks {
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    made: AtomicU64,
}

/// What a session's lock guards: the typed session as its last call left it, with the row that
/// call stored, so that the next call knows whether the store still says the same.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    live: Option<(Session, Row)>,
    /// The last body of a named session, to hash the next one's history from where it grew.
    pub(crate) prior: Option<crate::prior::Prior>,
}

impl Slot {
    /// The typed session for `row` (the store's, `None` for a new session): the one in the
    /// slot when it is the row's, else read from the row's state, else new, by `make`.
    pub(crate) fn take(
        &mut self,
        row: Option<&Row>,
        make: impl FnOnce(Option<&str>) -> Result<Session, OpsError>,
    ) -> Result<Session, OpsError> {
        match (self.live.take(), row) {
            (Some((session, was)), Some(row)) if same_state(&was, row) => Ok(session),
            (_, row) => make(row.map(|r| r.state.as_str())),
        }
    }

    /// Keeps `session`, which the store now holds as `row`.
    pub(crate) fn keep(&mut self, session: Session, row: Row) {
        self.live = Some((session, row));
    }
}

/// Whether `a` and `b` hold the same state of the same history (the calibration a call's
/// usage records later is not the state's).
fn same_state(a: &Row, b: &Row) -> bool {
    (&a.format, a.messages, &a.digest, &a.state) == (&b.format, b.messages, &b.digest, &b.state)
}

/// A session, held: its id, its stored row (when there is one) and its lock over its slot.
pub(crate) struct Held {
    pub(crate) id: String,
    pub(crate) row: Option<Row>,
    pub(crate) slot: OwnedMutexGuard<Slot>,
}

impl Locks {
    /// Waits for session `id`'s lock: a blocking wait, on the blocking pool, so that a call is
    /// read, held and stepped on one thread (its parsed request freed where it was made).
    fn lock(&self, id: &str) -> OwnedMutexGuard<Slot> {
        let lock = {
            let mut map = self
                .map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if map.len() > LIVE {
                // Forget the locks nobody holds or waits for, and the sessions they kept typed
                // in memory (the store still holds them).
                map.retain(|_, l| Arc::strong_count(l) > 1);
            }
            Arc::clone(map.entry(id.to_owned()).or_default())
        };
        lock.blocking_lock_owned()
    }

    /// A new session id for a history whose full digest is `digest`: unique within this store
    /// (the clock and a counter), never derived from content.
    fn new_id(&self, digest: &str) -> String {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("auto-{}-{nanos:x}-{n}", digest.get(..16).unwrap_or(digest))
    }

    /// The session named by the digest `named` of the name a request of `format` gives its
    /// conversation, held, with its stored row. Blocks: call it from the blocking pool.
    pub(crate) fn hold_named(
        &self,
        store: &Store,
        format: Format,
        named: &str,
    ) -> Result<Held, OpsError> {
        let id = format!("named-{}-{named}", format.as_str());
        let slot = self.lock(&id);
        let row = store.load(&id)?;
        Ok(Held { id, row, slot })
    }

    /// The session of a request of `format` that names none, whose history has the chained
    /// digests `digests` (`digests[k]` for its first `k` messages): the stored session whose
    /// history it extends, else a new one, held. Blocks: call it from the blocking pool.
    pub(crate) fn hold_extended(
        &self,
        store: &Store,
        format: Format,
        digests: &[String],
    ) -> Result<Held, OpsError> {
        if let Some(id) = store.find_extending(format.as_str(), digests)? {
            let slot = self.lock(&id);
            // A call of the same session may have moved it on while this one waited.
            let row = store.load(&id)?;
            if let Some(row) = row.filter(|r| extends(r, digests)) {
                return Ok(Held {
                    id,
                    row: Some(row),
                    slot,
                });
            }
        }
        let id = self.new_id(digests.last().map_or("", String::as_str));
        let slot = self.lock(&id);
        Ok(Held {
            id,
            row: None,
            slot,
        })
    }
}

/// Whether the history with digests `digests` extends (or is) the one `row` describes.
fn extends(row: &Row, digests: &[String]) -> bool {
    usize::try_from(row.messages)
        .ok()
        .and_then(|k| digests.get(k))
        .is_some_and(|d| *d == row.digest)
}
