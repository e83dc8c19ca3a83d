//! Where the sessions' state lives: SQLite (WAL, `--sqlite-sync`, one transaction per
//! call, committed before the call's response is forwarded, so a killed proxy restarts where
//! it stopped) or memory.
//!
//! SQLite's connection belongs to one store thread ([`Worker`]): a call hands it a job and
//! waits for the answer from the blocking pool, never on the async runtime's threads and never
//! behind a lock held while SQLite works. The memory store's map is locked for the map
//! operation alone.
//!
//! A row holds the session state document (the file form of `cutctx_ops::session::Session::state_json`:
//! digests, ranges, and the messages the compaction wrote), the history length and digest it
//! describes (the index a request's history is looked up by), and the calibration the
//! provider's usage taught: never an API key, never a request.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use cutctx_ops::OpsError;
use cutctx_ops::details;
use rusqlite::{Connection, OptionalExtension, params};

use crate::options::{SqliteSync, StateSpec};

/// One stored session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The format's name (`openai-chat`, ...).
    pub(crate) format: String,
    /// How many history messages the state describes.
    pub(crate) messages: u64,
    /// The chained digest of those messages, in hex.
    pub(crate) digest: String,
    /// The session state document.
    pub(crate) state: String,
    /// The provider's prompt count over cutctx's estimate of the last request sent, clamped.
    pub(crate) ratio: f64,
    /// The provider's cached prompt tokens at the last call (its confirmed cached prefix).
    pub(crate) cached_tokens: u64,
    /// Seconds since the epoch of the last write.
    pub(crate) updated: u64,
}

/// The sessions' store. Its calls block: make them from the blocking pool.
pub(crate) enum Store {
    /// SQLite, one connection on the store thread (each job is one short transaction).
    Sqlite(Worker),
    /// Memory.
    Memory(Mutex<BTreeMap<String, Row>>),
}

fn store_error(what: &str, e: &dyn std::fmt::Display) -> OpsError {
    OpsError {
        code: "STATE_STORE_ERROR",
        message: format!("the session store failed to {what}: {e}"),
        details: details! { "document" => "session store" },
    }
}

fn poisoned() -> OpsError {
    OpsError::internal("the session store's lock was poisoned", details! {})
}

/// Seconds since the epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    messages INTEGER NOT NULL,
    digest TEXT NOT NULL,
    state TEXT NOT NULL,
    ratio REAL NOT NULL DEFAULT 1.0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    updated INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_history ON sessions (format, digest);
CREATE INDEX IF NOT EXISTS sessions_by_age ON sessions (updated);
";

impl Store {
    /// Opens the store `spec` names, creating the database and its table when absent.
    pub(crate) fn open(spec: &StateSpec, sync: SqliteSync) -> Result<Self, OpsError> {
        match spec {
            StateSpec::Memory => Ok(Self::Memory(Mutex::new(BTreeMap::new()))),
            StateSpec::Sqlite(path) => Ok(Self::Sqlite(Worker::start(open_sqlite(path, sync)?)?)),
        }
    }

    /// The most recently used session of `format` whose history is a leading part of the
    /// request's: `digests[k]` names the request's first `k` messages; the longest wins.
    pub(crate) fn find_extending(
        &self,
        format: &str,
        digests: &[String],
    ) -> Result<Option<String>, OpsError> {
        match self {
            Self::Sqlite(w) => {
                let (format, digests) = (format.to_owned(), digests.to_vec());
                w.call(move |c| {
                let mut q = c
                    .prepare_cached(
                        "SELECT id FROM sessions WHERE format = ?1 AND digest = ?2 AND messages = ?3 ORDER BY updated DESC, id LIMIT 1",
                    )
                    .map_err(|e| store_error("look a history up", &e))?;
                // The longest first; the empty history names no conversation.
                for (k, d) in digests.iter().enumerate().skip(1).rev() {
                    let found: Option<String> = q
                        .query_row(params![format, d, k as i64], |r| r.get(0))
                        .optional()
                        .map_err(|e| store_error("look a history up", &e))?;
                    if found.is_some() {
                        return Ok(found);
                    }
                }
                Ok(None)
                })?
            }
            Self::Memory(m) => {
                let m = m.lock().map_err(|_| poisoned())?;
                Ok(m.iter()
                    .filter(|(_, r)| {
                        r.format == format
                            && r.messages > 0
                            && usize::try_from(r.messages)
                                .ok()
                                .and_then(|k| digests.get(k))
                                .is_some_and(|d| *d == r.digest)
                    })
                    .max_by(|a, b| {
                        (a.1.messages, a.1.updated)
                            .cmp(&(b.1.messages, b.1.updated))
                            .then_with(|| b.0.cmp(a.0))
                    })
                    .map(|(id, _)| id.clone()))
            }
        }
    }

    /// The session `id`, when stored.
    pub(crate) fn load(&self, id: &str) -> Result<Option<Row>, OpsError> {
        match self {
            Self::Sqlite(w) => {
                let id = id.to_owned();
                w.call(move |c| {
                // Each statement is prepared once per connection and cached by SQLite's handle.
                c.prepare_cached(
                    "SELECT format, messages, digest, state, ratio, cached_tokens, updated FROM sessions WHERE id = ?1",
                )
                .and_then(|mut q| q.query_row(
                    params![id],
                    |r| {
                        Ok(Row {
                            format: r.get(0)?,
                            messages: r.get::<_, i64>(1)?.try_into().unwrap_or(0),
                            digest: r.get(2)?,
                            state: r.get(3)?,
                            ratio: r.get(4)?,
                            cached_tokens: r.get::<_, i64>(5)?.try_into().unwrap_or(0),
                            updated: r.get::<_, i64>(6)?.try_into().unwrap_or(0),
                        })
                    },
                ))
                .optional()
                .map_err(|e| store_error("read a session", &e))
                })?
            }
            Self::Memory(m) => Ok(m.lock().map_err(|_| poisoned())?.get(id).cloned()),
        }
    }

    /// Writes session `id` (one transaction, committed durably on return), then forgets the
    /// sessions older than `max_age` seconds and all but the `max_sessions` most recent.
    pub(crate) fn save(
        &self,
        id: &str,
        row: &Row,
        max_age: u64,
        max_sessions: u64,
    ) -> Result<(), OpsError> {
        let oldest = row.updated.saturating_sub(max_age);
        match self {
            Self::Sqlite(w) => {
                let (id, row) = (id.to_owned(), row.clone());
                let write = move |c: &mut Connection| -> rusqlite::Result<()> {
                    let tx = c.transaction()?;
                    tx.prepare_cached(
                        "INSERT INTO sessions (id, format, messages, digest, state, ratio, cached_tokens, updated)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                         ON CONFLICT (id) DO UPDATE SET format = excluded.format, messages = excluded.messages,
                           digest = excluded.digest, state = excluded.state, ratio = excluded.ratio,
                           cached_tokens = excluded.cached_tokens, updated = excluded.updated",
                    )?
                    .execute(
                        params![
                            id,
                            row.format,
                            i64::try_from(row.messages).unwrap_or(i64::MAX),
                            row.digest,
                            row.state,
                            row.ratio,
                            i64::try_from(row.cached_tokens).unwrap_or(i64::MAX),
                            i64::try_from(row.updated).unwrap_or(i64::MAX),
                        ],
                    )?;
                    tx.prepare_cached("DELETE FROM sessions WHERE updated < ?1")?
                        .execute(params![i64::try_from(oldest).unwrap_or(i64::MAX)])?;
                    tx.prepare_cached(
                        "DELETE FROM sessions WHERE id IN (SELECT id FROM sessions ORDER BY updated DESC, id LIMIT -1 OFFSET ?1)",
                    )?
                    .execute(
                        params![i64::try_from(max_sessions).unwrap_or(i64::MAX)],
                    )?;
                    tx.commit()
                };
                w.call(move |c| write(c).map_err(|e| store_error("write a session", &e)))?
            }
            Self::Memory(m) => {
                let mut m = m.lock().map_err(|_| poisoned())?;
                m.insert(id.to_owned(), row.clone());
                m.retain(|_, r| r.updated >= oldest);
                let max = usize::try_from(max_sessions).unwrap_or(usize::MAX);
                if m.len() > max {
                    let mut by_age: Vec<(u64, String)> =
                        m.iter().map(|(k, r)| (r.updated, k.clone())).collect();
                    by_age.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                    for (_, k) in by_age.into_iter().skip(max) {
                        m.remove(&k);
                    }
                }
                Ok(())
            }
        }
    }

    /// Records what the provider's usage said of session `id`'s last call.
    pub(crate) fn record_usage(
        &self,
        id: &str,
        ratio: f64,
        cached_tokens: u64,
    ) -> Result<(), OpsError> {
        match self {
            Self::Sqlite(w) => {
                let id = id.to_owned();
                w.call(move |c| {
                    c.prepare_cached(
                        "UPDATE sessions SET ratio = ?2, cached_tokens = ?3 WHERE id = ?1",
                    )
                    .and_then(|mut q| {
                        q.execute(params![
                            id,
                            ratio,
                            i64::try_from(cached_tokens).unwrap_or(i64::MAX)
                        ])
                    })
                    .map(drop)
                    .map_err(|e| store_error("record a call's usage", &e))
                })?
            }
            Self::Memory(m) => {
                if let Some(r) = m.lock().map_err(|_| poisoned())?.get_mut(id) {
                    r.ratio = ratio;
                    r.cached_tokens = cached_tokens;
                }
                Ok(())
            }
        }
    }
}

/// A job for the store thread.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The store thread: the one owner of the SQLite connection, running the jobs it is handed in
/// the order they came.
pub(crate) struct Worker {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Worker {
    /// Starts the store thread on `connection`.
    fn start(mut connection: Connection) -> Result<Self, OpsError> {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("cutctx-store".to_owned())
            .spawn(move || {
                // Ends when the store is dropped and the last job has run.
                for job in queue {
                    job(&mut connection);
                }
            })
            .map_err(|e| store_error("start its thread", &e))?;
        Ok(Self { jobs })
    }

    /// Runs `f` on the store thread and waits for its answer (a blocking wait: call it from
    /// the blocking pool).
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, OpsError> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |c| {
                let _ = answer.send(f(c));
            }))
            .map_err(|_| store_error("take a job", &"its thread has stopped"))?;
        answered
            .recv()
            .map_err(|_| store_error("answer", &"its thread has stopped"))
    }
}

fn open_sqlite(path: &Path, sync: SqliteSync) -> Result<Connection, OpsError> {
    let fail = |e: &dyn std::fmt::Display| {
        OpsError::input(
            format!("cannot open the session store {}: {e}", path.display()),
            details! { "path" => path.display().to_string(), "document" => "session store" },
        )
    };
    let c = Connection::open(path).map_err(|e| fail(&e))?;
    // WAL: a reader never waits for the writer, and a commit is one append. NORMAL: the
    // append is in the log (the operating system's) when the commit returns, so a killed
    // proxy keeps every call it answered; FULL also syncs it, so a lost machine does too, for
    // an fsync per call (which, measured, is most of what the proxy adds under load).
    c.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| fail(&e))?;
    let level = match sync {
        SqliteSync::Normal => "NORMAL",
        SqliteSync::Full => "FULL",
    };
    c.pragma_update(None, "synchronous", level)
        .map_err(|e| fail(&e))?;
    c.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| fail(&e))?;
    c.execute_batch(SCHEMA).map_err(|e| fail(&e))?;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(messages: u64, digest: &str, updated: u64) -> Row {
        Row {
            format: "openai-chat".into(),
            messages,
            digest: digest.into(),
            state: "{}".into(),
            ratio: 1.0,
            cached_tokens: 0,
            updated,
        }
    }

    fn both() -> Vec<(Store, std::path::PathBuf)> {
        let dir = std::env::temp_dir().join(format!("cutctx-serve-store-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{}.db", now_secs()));
        let _ = std::fs::remove_file(&path);
        vec![
            (
                Store::open(&StateSpec::Memory, SqliteSync::Normal).expect("memory"),
                path.clone(),
            ),
            (
                Store::open(&StateSpec::Sqlite(path.clone()), SqliteSync::Full).expect("sqlite"),
                path,
            ),
        ]
    }

    #[test]
    fn the_longest_recorded_history_wins_and_expiry_forgets() {
        for (s, _) in both() {
            s.save("a", &row(1, "d1", 100), 1000, 10).expect("save");
            s.save("b", &row(3, "d3", 100), 1000, 10).expect("save");
            s.save("c", &row(2, "x2", 100), 1000, 10).expect("save");
            let digests: Vec<String> = ["d0", "d1", "d2", "d3", "d4"].map(String::from).to_vec();
            assert_eq!(
                s.find_extending("openai-chat", &digests)
                    .expect("find")
                    .as_deref(),
                Some("b")
            );
            assert_eq!(s.find_extending("anthropic", &digests).expect("find"), None);
            s.record_usage("b", 1.5, 7).expect("usage");
            let b = s.load("b").expect("load").expect("there");
            assert!((b.ratio - 1.5).abs() < 1e-9 && b.cached_tokens == 7);
            // Too old, then too many.
            s.save("d", &row(1, "z", 2000), 1000, 10).expect("save");
            assert_eq!(s.load("a").expect("load"), None);
            s.save("e", &row(1, "z", 2001), 1000, 1).expect("save");
            assert_eq!(s.load("d").expect("load"), None);
            assert!(s.load("e").expect("load").is_some());
        }
    }
}
