//! Finding a request's session: the one its name names (the keyed id [`crate::names`] and
//! [`crate::tenant`] made of the name a request gives its conversation), else the stored
//! session in the request's scope whose recorded history the request extends (the longest
//! such; never one whose history it diverges from), else a new one. Histories are compared by
//! the chained digests the session state itself keeps
//! ([`cutctx_ops::provider::history_digests`]), so nothing of a message is stored to find it.
//! A named session whose history the request rewinds or rewrites is the same session: its
//! state starts over there (`cutctx_ops::session::Session::step` sets a state that does not
//! describe the history aside).
//!
//! Each session has a lock, held only while a call steps the session and commits its state
//! (never while a response streams): a call's state is the one the call before it left,
//! while other sessions' calls run beside them. The wait for it is bounded ([`WAIT`]); a call
//! that could not have its session in time is stepped on a fresh session that is not kept,
//! which still compacts. The lock guards the session's [`Slot`]: the typed session
//! (`cutctx_ops::session::Session`) as the last call left it, so that a call on a session in
//! use reads no state back; the store's row is the truth it is checked against, and a slot
//! that no longer matches it is read again from it. The store is read from the blocking pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cutctx_ops::OpsError;
use cutctx_ops::session::Session;
use serde_json::json;

use crate::respond::log;
use crate::store::{Row, Store};

/// How many sessions' locks (and typed sessions) are kept before those nobody holds are
/// forgotten: a bound on what the proxy holds in memory beside its store (about 12 KB a
/// session, measured at 10,000 idle sessions of 10 messages).
const LIVE: usize = 1024;

/// The longest a call waits for its session's lock. The lock is held for a step and a
/// commit (milliseconds), so only a stalled store comes near it.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// The locks of the sessions in use, each over its session's [`Slot`].
#[derive(Debug, Default)]
pub(crate) struct Locks {
    map: Mutex<HashMap<String, Arc<Gate>>>,
    made: AtomicU64,
}

/// One session's lock: its slot, taken out while a call holds it.
#[derive(Debug)]
struct Gate {
    slot: Mutex<Option<Slot>>,
    freed: Condvar,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            slot: Mutex::new(Some(Slot::default())),
            freed: Condvar::new(),
        }
    }
}

fn unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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

/// A session's slot, held: given back to its lock when dropped.
#[derive(Debug)]
pub(crate) struct Guard {
    gate: Option<Arc<Gate>>,
    slot: Option<Slot>,
}

impl std::ops::Deref for Guard {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        self.slot
            .as_ref()
            .unwrap_or_else(|| unreachable!("a guard holds its slot until dropped"))
    }
}

impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Slot {
        self.slot
            .as_mut()
            .unwrap_or_else(|| unreachable!("a guard holds its slot until dropped"))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let (Some(gate), Some(slot)) = (self.gate.take(), self.slot.take()) {
            *unpoisoned(&gate.slot) = Some(slot);
            gate.freed.notify_one();
        }
    }
}

/// A session, held: its id, its stored row (when there is one) and its slot.
pub(crate) struct Held {
    pub(crate) id: String,
    pub(crate) row: Option<Row>,
    pub(crate) slot: Guard,
    /// Whether the session is kept: false for one stepped fresh because its own could not be
    /// had in time (its state is then neither read nor written).
    pub(crate) kept: bool,
}

impl Locks {
    /// Waits at most [`WAIT`] for session `id`'s slot (a blocking wait, on the blocking pool,
    /// so that a call is read, held and stepped on one thread).
    fn lock(&self, id: &str) -> Option<Guard> {
        let gate = {
            let mut map = unpoisoned(&self.map);
            if map.len() > LIVE {
                // Forget the locks nobody holds or waits for, and the sessions they kept typed
                // in memory (the store still holds them).
                map.retain(|_, g| Arc::strong_count(g) > 1);
            }
            Arc::clone(map.entry(id.to_owned()).or_default())
        };
        let deadline = Instant::now() + WAIT;
        let mut slot = unpoisoned(&gate.slot);
        loop {
            if let Some(s) = slot.take() {
                drop(slot);
                return Some(Guard {
                    gate: Some(gate),
                    slot: Some(s),
                });
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            slot = gate
                .freed
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Session `id` held, with `row`; or, when its lock could not be had in time, a fresh
    /// session that is not kept.
    fn held(&self, id: String, row: impl FnOnce() -> Option<Row>) -> Held {
        match self.lock(&id) {
            Some(slot) => Held {
                row: row(),
                id,
                slot,
                kept: true,
            },
            None => {
                log(&json!({"event": "session_busy", "waited_ms": WAIT.as_millis()}));
                Held {
                    id,
                    row: None,
                    slot: Guard {
                        gate: None,
                        slot: Some(Slot::default()),
                    },
                    kept: false,
                }
            }
        }
    }

    /// A new session id for a history whose scope is `scope`: unique within this store (the
    /// clock and a counter), never derived from content.
    fn new_id(&self, scope: &str) -> String {
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("auto-{}-{nanos:x}-{n}", scope.get(..16).unwrap_or(scope))
    }

    /// The named session `id` (a keyed id, [`crate::names`]), held, with its stored row.
    /// Blocks: call it from the blocking pool.
    pub(crate) fn hold_named(&self, store: &Store, id: String) -> Held {
        self.held(id.clone(), || stored(store.load(&id)))
    }

    /// The session of a request in `scope` that names none, whose history has the chained
    /// digests `digests` (`digests[k]` for its first `k` messages): the stored session whose
    /// history it extends, else a new one, held. Blocks: call it from the blocking pool.
    pub(crate) fn hold_extended(&self, store: &Store, scope: &str, digests: &[String]) -> Held {
        if let Some(id) = stored(store.find_extending(scope, digests)) {
            // A call of the same session may have moved it on while this one waited.
            let held = self.held(id.clone(), || stored(store.load(&id)));
            if !held.kept || held.row.as_ref().is_some_and(|r| extends(r, digests)) {
                return held;
            }
        }
        self.held(self.new_id(scope), || None)
    }
}

/// The store's answer, or none when it failed (logged): a call whose session cannot be read
/// starts a new one, which still compacts.
fn stored<T>(answer: Result<Option<T>, OpsError>) -> Option<T> {
    answer.unwrap_or_else(|e| {
        log(&json!({"event": "store_error", "code": e.code, "message": crate::respond::bounded(&e.message)}));
        None
    })
}

/// Whether the history with digests `digests` extends (or is) the one `row` describes.
fn extends(row: &Row, digests: &[String]) -> bool {
    usize::try_from(row.messages).is_ok_and(|k| crate::store::extended_by(k, &row.digest, digests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_slot_is_given_back_and_the_next_call_gets_it() {
        let locks = Locks::default();
        let first = locks.lock("s").expect("free");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| locks.lock("s").is_some());
            std::thread::sleep(Duration::from_millis(50));
            drop(first);
            assert!(waiter.join().expect("joined"));
        });
        // Another session is never behind this one.
        let _held = locks.lock("s").expect("free again");
        assert!(locks.lock("t").is_some());
    }
}
