//! Finding a request's session: the one its name names (the digest [`crate::names`] made of
//! the name the request gives its conversation), else the stored session whose recorded
//! history the request extends (the longest such; never one whose history it diverges from),
//! else a new one. Histories are compared by the chained digests the session state itself
//! keeps ([`cutctx::session::history_digests`]), so nothing of a message is stored to find it.
//! A named session whose history the request rewinds or rewrites is the same session: its
//! state starts over there ([`cutctx::session::step`] sets a state that does not describe the
//! history aside).
//!
//! Each session has an async lock: its calls run one at a time (a call's state is the one the
//! call before it left), while other sessions' calls run beside them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cutctx::formats::Format;
use cutctx_ops::OpsError;
use tokio::sync::OwnedMutexGuard;

use crate::store::{Row, Store};

/// The locks of the sessions in use.
#[derive(Debug, Default)]
pub(crate) struct Locks {
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    made: AtomicU64,
}

/// A session, held: its id, its stored row (when there is one) and its lock.
pub(crate) struct Held {
    pub(crate) id: String,
    pub(crate) row: Option<Row>,
    #[expect(
        dead_code,
        reason = "held, never read: the lock is released when it drops"
    )]
    pub(crate) guard: OwnedMutexGuard<()>,
}

impl Locks {
    /// Waits for session `id`'s lock.
    async fn lock(&self, id: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut map = self
                .map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if map.len() > 4096 {
                // Forget the locks nobody holds or waits for.
                map.retain(|_, l| Arc::strong_count(l) > 1);
            }
            Arc::clone(map.entry(id.to_owned()).or_default())
        };
        lock.lock_owned().await
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

    /// The session of a request of `format` whose history has the chained digests `digests`
    /// (`digests[k]` for its first `k` messages), named by the digest `named` of its name or
    /// not, held.
    pub(crate) async fn hold(
        &self,
        store: &Store,
        format: Format,
        named: Option<&str>,
        digests: &[String],
    ) -> Result<Held, OpsError> {
        if let Some(key) = named {
            let id = format!("named-{}-{key}", format.as_str());
            let guard = self.lock(&id).await;
            let row = store.load(&id)?;
            return Ok(Held { id, row, guard });
        }
        if let Some(id) = store.find_extending(format.as_str(), digests)? {
            let guard = self.lock(&id).await;
            // A call of the same session may have moved it on while this one waited.
            let row = store.load(&id)?;
            if let Some(row) = row.filter(|r| extends(r, digests)) {
                return Ok(Held {
                    id,
                    row: Some(row),
                    guard,
                });
            }
        }
        let id = self.new_id(digests.last().map_or("", String::as_str));
        let guard = self.lock(&id).await;
        Ok(Held {
            id,
            row: None,
            guard,
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
