//! Where the sessions' state lives: SQLite, in a file (WAL, `--sqlite-sync`, one transaction
//! per call, committed before the call's response is forwarded, so a killed proxy restarts
//! where it stopped) or in memory (the same database, gone when the proxy stops).
//!
//! SQLite's connection belongs to one store thread ([`Worker`]): a call hands it a job and
//! waits for the answer from the blocking pool, never on the async runtime's threads.
//!
//! Every call's work is a few index lookups, whatever the number of sessions:
//! - a history is found by its length and digest, or by the digest at its checkpoint (the
//!   largest power of two not over its length, [`checkpoint`]), so a request of `n` messages
//!   costs at most `TRIES + log2(n)` lookups, never one per message;
//! - the sessions per tenant and in all are counted by triggers, and eviction takes the oldest
//!   by an index on age, never by a scan.
//!
//! A store that is damaged is recovered from, never a reason to stop: a file that does not
//! open or check is moved aside and a fresh one started, at startup or when a call meets the
//! damage; a row whose state does not read is moved to the quarantine table by
//! [`Store::quarantine`]. The file and its `-wal` and `-shm` are created readable by their
//! owner alone.
//!
//! A row holds the session state document (the file form of
//! `cutctx_ops::session::Session::state_json`: digests, ranges, and the messages the
//! compaction wrote), the keyed hashes of its tenant and scope ([`crate::tenant`]), the history
//! length and digests it is looked up by, and the calibration the provider's usage taught:
//! never a credential, never a request.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cutctx_ops::OpsError;
use cutctx_ops::details;
use rusqlite::{Connection, ErrorCode, OptionalExtension, params};

use crate::options::{SqliteSync, StateSpec};
use crate::respond::{bounded, log};

/// One stored session.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    /// The keyed hash of the credential its calls carry ([`crate::tenant::Tenant`]).
    pub(crate) tenant: String,
    /// The keyed hash of its tenant, format and untouchable part: the only sessions a
    /// history is looked up among.
    pub(crate) scope: String,
    /// The format's name (`openai-chat`, ...).
    pub(crate) format: String,
    /// How many history messages the state describes.
    pub(crate) messages: u64,
    /// The chained digest of those messages, in hex.
    pub(crate) digest: String,
    /// The chained digest of the first [`checkpoint`]`(messages)` of them.
    pub(crate) checkpoint_digest: String,
    /// The session state document.
    pub(crate) state: String,
    /// The provider's prompt count over cutctx's estimate of the last request sent, clamped.
    pub(crate) ratio: f64,
    /// The provider's cached prompt tokens at the last call (its confirmed cached prefix).
    pub(crate) cached_tokens: u64,
    /// Seconds since the epoch of the last write.
    pub(crate) updated: u64,
}

/// The limits a write keeps the store within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Sessions unused for longer than this many seconds are forgotten.
    pub(crate) max_age: u64,
    /// At most this many sessions in all.
    pub(crate) max_sessions: u64,
    /// At most this many sessions per tenant.
    pub(crate) per_tenant: u64,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Saved {
    /// The row is stored.
    Stored,
    /// The store is full and the tenant has no session of its own to give up: the row is not
    /// stored (the call is answered all the same; its next call starts a new session).
    Full,
}

/// The largest power of two not over `messages` (0 for none): where a history's digest is
/// kept beside its full one, so that a request is looked up at `log2(n)` checkpoints.
///
/// ```ignore
/// assert_eq!(checkpoint(5), 4);
/// ```
pub(crate) const fn checkpoint(messages: u64) -> u64 {
    if messages == 0 {
        0
    } else {
        1 << (63 - messages.leading_zeros())
    }
}

/// How many of the longest lengths a request's history is tried at exactly before its
/// checkpoints are: a client resends its history with one to a few messages more.
const TRIES: usize = 8;

/// How many sessions sharing a checkpoint are checked against a request's full digests.
const CANDIDATES: i64 = 32;

/// How many quarantined rows are kept.
const QUARANTINE: i64 = 100;

/// The sessions' store. Its calls block: make them from the blocking pool.
pub(crate) struct Store {
    worker: Worker,
    secret: [u8; 32],
    /// The log line opening it made, until the proxy listens and logs it.
    opened: std::sync::Mutex<Option<serde_json::Value>>,
}

fn store_error(what: &str, e: &dyn std::fmt::Display) -> OpsError {
    OpsError {
        code: "STATE_STORE_ERROR",
        message: format!("the session store failed to {what}: {e}"),
        details: details! { "document" => "session store" },
    }
}

/// Seconds since the epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The schema's version (`PRAGMA user_version`); a store of another version is started afresh.
const VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    format TEXT NOT NULL,
    messages INTEGER NOT NULL,
    digest TEXT NOT NULL,
    checkpoint INTEGER NOT NULL,
    checkpoint_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    ratio REAL NOT NULL DEFAULT 1.0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    updated INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_history ON sessions (scope, messages, digest);
CREATE INDEX IF NOT EXISTS sessions_by_checkpoint
    ON sessions (scope, checkpoint, checkpoint_digest, messages);
CREATE INDEX IF NOT EXISTS sessions_by_age ON sessions (updated, id);
CREATE INDEX IF NOT EXISTS sessions_by_tenant ON sessions (tenant, updated, id);
CREATE TABLE IF NOT EXISTS tenants (tenant TEXT PRIMARY KEY, sessions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS totals (one INTEGER PRIMARY KEY CHECK (one = 1), sessions INTEGER NOT NULL);
INSERT OR IGNORE INTO totals (one, sessions) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (
    id TEXT NOT NULL, tenant TEXT NOT NULL, at INTEGER NOT NULL, reason TEXT NOT NULL, state TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS sessions_counted_in AFTER INSERT ON sessions BEGIN
    INSERT INTO tenants (tenant, sessions) VALUES (NEW.tenant, 1)
        ON CONFLICT (tenant) DO UPDATE SET sessions = sessions + 1;
    UPDATE totals SET sessions = sessions + 1 WHERE one = 1;
END;
CREATE TRIGGER IF NOT EXISTS sessions_counted_out AFTER DELETE ON sessions BEGIN
    UPDATE tenants SET sessions = sessions - 1 WHERE tenant = OLD.tenant;
    DELETE FROM tenants WHERE tenant = OLD.tenant AND sessions <= 0;
    UPDATE totals SET sessions = sessions - 1 WHERE one = 1;
END;
";

const COLUMNS: &str = "tenant, scope, format, messages, digest, checkpoint_digest, state, ratio, cached_tokens, updated";

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let count =
        |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.try_into().unwrap_or(0)) };
    Ok(Row {
        tenant: r.get(0)?,
        scope: r.get(1)?,
        format: r.get(2)?,
        messages: count(3)?,
        digest: r.get(4)?,
        checkpoint_digest: r.get(5)?,
        state: r.get(6)?,
        ratio: r.get(7)?,
        cached_tokens: count(8)?,
        updated: count(9)?,
    })
}

impl Store {
    /// Opens the store `spec` names, creating it when absent and starting it afresh (the
    /// damaged file moved aside) when it does not open or check.
    pub(crate) fn open(spec: &StateSpec, sync: SqliteSync) -> Result<Self, OpsError> {
        let path = match spec {
            StateSpec::Memory => None,
            StateSpec::Sqlite(p) => Some(p.clone()),
        };
        let (mut db, note) = Db::open(path, sync)?;
        let secret = db.secret()?;
        Ok(Self {
            worker: Worker::start(db)?,
            secret,
            opened: std::sync::Mutex::new(note),
        })
    }

    /// What opening the store found to say (a damaged file moved aside), once.
    pub(crate) fn opening_note(&self) -> Option<serde_json::Value> {
        self.opened
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// The store's secret: the key of every keyed hash the proxy makes ([`crate::tenant`]),
    /// made once per store so that the ids it keeps mean nothing elsewhere.
    pub(crate) const fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// The most recently used session in `scope` whose history is a leading part of the
    /// request's: `digests[k]` names the request's first `k` messages; the longest wins.
    pub(crate) fn find_extending(
        &self,
        scope: &str,
        digests: &[String],
    ) -> Result<Option<String>, OpsError> {
        let (scope, digests) = (scope.to_owned(), digests.to_vec());
        self.worker
            .call(move |c| find(c, &scope, &digests).map(|(found, _)| found))
            .map_err(|e| store_error("look a history up", &e))
    }

    /// The session `id`, when stored.
    pub(crate) fn load(&self, id: &str) -> Result<Option<Row>, OpsError> {
        let id = id.to_owned();
        self.worker
            .call(move |c| {
                c.prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))?
                    .query_row(params![id], read_row)
                    .optional()
            })
            .map_err(|e| store_error("read a session", &e))
    }

    /// Writes session `id` (one transaction, committed on return) within `limits`: the
    /// sessions older than `max_age` forgotten, then, for a new session, the tenant's own
    /// oldest given up past its quota or a full store. Eviction never takes another tenant's
    /// session: a new tenant's session that finds the store full is not stored.
    pub(crate) fn save(&self, id: &str, row: &Row, limits: Limits) -> Result<Saved, OpsError> {
        let (id, row) = (id.to_owned(), row.clone());
        self.worker
            .call(move |c| {
                let tx = c.transaction()?;
                let saved = write(&tx, &id, &row, limits)?;
                tx.commit()?;
                Ok(saved)
            })
            .map_err(|e| store_error("write a session", &e))
    }

    /// Puts session `id` back as it was before a call that wrote `wrote` (`before`, or gone
    /// when the call made it), unless a later call has moved it on since.
    pub(crate) fn roll_back(
        &self,
        id: &str,
        before: Option<&Row>,
        wrote: &Row,
    ) -> Result<(), OpsError> {
        let (id, before, wrote) = (id.to_owned(), before.cloned(), wrote.clone());
        self.worker
            .call(move |c| {
                let tx = c.transaction()?;
                let still: Option<(i64, String)> = tx
                    .prepare_cached("SELECT messages, digest FROM sessions WHERE id = ?1")?
                    .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                if still == Some((int(wrote.messages), wrote.digest.clone())) {
                    tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                        .execute(params![id])?;
                    if let Some(before) = &before {
                        insert(&tx, &id, before)?;
                    }
                }
                tx.commit()
            })
            .map_err(|e| store_error("roll a session back", &e))
    }

    /// Moves session `id`, whose state does not read, to the quarantine table (the last
    /// [`QUARANTINE`] are kept there for a look), for `reason` (an error code).
    pub(crate) fn quarantine(&self, id: &str, reason: &'static str) -> Result<(), OpsError> {
        let id = id.to_owned();
        self.worker
            .call(move |c| {
                let tx = c.transaction()?;
                tx.prepare_cached(
                    "INSERT INTO quarantine (id, tenant, at, reason, state)
                     SELECT id, tenant, ?2, ?3, state FROM sessions WHERE id = ?1",
                )?
                .execute(params![id, int(now_secs()), reason])?;
                tx.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
                    .execute(params![id])?;
                tx.prepare_cached(
                    "DELETE FROM quarantine WHERE rowid <= (SELECT MAX(rowid) FROM quarantine) - ?1",
                )?
                .execute(params![QUARANTINE])?;
                tx.commit()
            })
            .map_err(|e| store_error("quarantine a session", &e))
    }

    /// Records what the provider's usage said of session `id`'s call that stored the history
    /// `digest`; a session moved on since keeps its own.
    pub(crate) fn record_usage(
        &self,
        id: &str,
        digest: &str,
        ratio: f64,
        cached_tokens: u64,
    ) -> Result<(), OpsError> {
        let (id, digest) = (id.to_owned(), digest.to_owned());
        self.worker
            .call(move |c| {
                c.prepare_cached(
                    "UPDATE sessions SET ratio = ?3, cached_tokens = ?4 WHERE id = ?1 AND digest = ?2",
                )?
                .execute(params![id, digest, ratio, int(cached_tokens)])
                .map(drop)
            })
            .map_err(|e| store_error("record a call's usage", &e))
    }

    /// How many sessions are stored, in all and for `tenant`.
    #[cfg(test)]
    pub(crate) fn count(&self, tenant: &str) -> Result<(u64, u64), OpsError> {
        let tenant = tenant.to_owned();
        self.worker
            .call(move |c| Ok((total(c)?, of_tenant(c, &tenant)?)))
            .map_err(|e| store_error("count the sessions", &e))
    }
}

/// [`Store::find_extending`], on the store thread; with how many lookups it made.
/// Whether a history whose chained digests are `digests` (`digests[k]` for its first `k`
/// messages) extends a stored one of `messages` messages whose digest is `digest`: the one
/// rule by which a request finds its session, here and under the session's lock.
pub(crate) fn extended_by(messages: usize, digest: &str, digests: &[String]) -> bool {
    digests.get(messages).is_some_and(|d| d == digest)
}

fn find(
    c: &Connection,
    scope: &str,
    digests: &[String],
) -> rusqlite::Result<(Option<String>, usize)> {
    let mut lookups = 0;
    let longest = digests.len().saturating_sub(1);
    let mut exact = c.prepare_cached(
        "SELECT id FROM sessions WHERE scope = ?1 AND messages = ?2 AND digest = ?3
         ORDER BY updated DESC, id LIMIT 1",
    )?;
    // The empty history names no conversation.
    for k in (1..=longest).rev().take(TRIES) {
        lookups += 1;
        let found: Option<String> = exact
            .query_row(params![scope, int(k as u64), digests[k]], |r| r.get(0))
            .optional()?;
        if found.is_some() {
            return Ok((found, lookups));
        }
    }
    let shorter = longest.saturating_sub(TRIES);
    let mut by_checkpoint = c.prepare_cached(
        "SELECT id, messages, digest FROM sessions
         WHERE scope = ?1 AND checkpoint = ?2 AND checkpoint_digest = ?3 AND messages <= ?4
         ORDER BY messages DESC, updated DESC, id LIMIT ?5",
    )?;
    let mut point = checkpoint(shorter as u64);
    while point > 0 {
        let at = usize::try_from(point).unwrap_or(usize::MAX);
        let Some(d) = digests.get(at) else { break };
        lookups += 1;
        let rows = by_checkpoint.query_map(
            params![scope, int(point), d, int(shorter as u64), CANDIDATES],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )?;
        for row in rows {
            let (id, messages, digest) = row?;
            let k = usize::try_from(messages).unwrap_or(usize::MAX);
            if extended_by(k, &digest, digests) {
                return Ok((Some(id), lookups));
            }
        }
        point /= 2;
    }
    Ok((None, lookups))
}

fn total(c: &Connection) -> rusqlite::Result<u64> {
    c.prepare_cached("SELECT sessions FROM totals WHERE one = 1")?
        .query_row([], |r| r.get::<_, i64>(0))
        .map(|n| n.try_into().unwrap_or(0))
}

fn of_tenant(c: &Connection, tenant: &str) -> rusqlite::Result<u64> {
    c.prepare_cached("SELECT sessions FROM tenants WHERE tenant = ?1")?
        .query_row(params![tenant], |r| r.get::<_, i64>(0))
        .optional()
        .map(|n| n.map_or(0, |n| n.try_into().unwrap_or(0)))
}

fn insert(c: &Connection, id: &str, row: &Row) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO sessions (id, tenant, scope, format, messages, digest, checkpoint,
           checkpoint_digest, state, ratio, cached_tokens, updated)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, scope = excluded.scope,
           format = excluded.format, messages = excluded.messages, digest = excluded.digest,
           checkpoint = excluded.checkpoint, checkpoint_digest = excluded.checkpoint_digest,
           state = excluded.state, ratio = excluded.ratio,
           cached_tokens = excluded.cached_tokens, updated = excluded.updated",
    )?
    .execute(params![
        id,
        row.tenant,
        row.scope,
        row.format,
        int(row.messages),
        row.digest,
        int(checkpoint(row.messages)),
        row.checkpoint_digest,
        row.state,
        row.ratio,
        int(row.cached_tokens),
        int(row.updated),
    ])
    .map(drop)
}

/// The oldest session of `tenant` but `keep`, forgotten; whether there was one.
fn forget_oldest(c: &Connection, tenant: &str, keep: &str) -> rusqlite::Result<bool> {
    c.prepare_cached(
        "DELETE FROM sessions WHERE id = (SELECT id FROM sessions WHERE tenant = ?1 AND id != ?2
         ORDER BY updated, id LIMIT 1)",
    )?
    .execute(params![tenant, keep])
    .map(|n| n > 0)
}

/// [`Store::save`], in its transaction.
fn write(c: &Connection, id: &str, row: &Row, limits: Limits) -> rusqlite::Result<Saved> {
    let oldest = row.updated.saturating_sub(limits.max_age);
    c.prepare_cached("DELETE FROM sessions WHERE updated < ?1")?
        .execute(params![int(oldest)])?;
    let known = c
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .query_row(params![id], |_| Ok(()))
        .optional()?
        .is_some();
    insert(c, id, row)?;
    if known {
        return Ok(Saved::Stored);
    }
    while of_tenant(c, &row.tenant)? > limits.per_tenant {
        if !forget_oldest(c, &row.tenant, id)? {
            break;
        }
    }
    if total(c)? > limits.max_sessions && !forget_oldest(c, &row.tenant, id)? {
        c.prepare_cached("DELETE FROM sessions WHERE id = ?1")?
            .execute(params![id])?;
        return Ok(Saved::Full);
    }
    Ok(Saved::Stored)
}

/// The database the store thread owns, and how to start it afresh.
struct Db {
    conn: Connection,
    path: Option<PathBuf>,
    sync: SqliteSync,
    secret: Option<[u8; 32]>,
}

impl Db {
    /// Opens the database at `path` (memory when `None`); a file that does not open or check
    /// is moved aside and a fresh one made, with the log line that says so (logged once the
    /// proxy listens: its first line says where).
    fn open(
        path: Option<PathBuf>,
        sync: SqliteSync,
    ) -> Result<(Self, Option<serde_json::Value>), OpsError> {
        let mut note = None;
        let conn = match &path {
            None => open_memory()?,
            Some(p) => match open_file(p, sync) {
                Ok(c) => c,
                Err(Opened::Damaged(why)) => {
                    note = Some(move_aside(p, &why)?);
                    open_file(p, sync).map_err(|e| e.into_error(p))?
                }
                Err(e) => return Err(e.into_error(p)),
            },
        };
        let db = Self {
            conn,
            path,
            sync,
            secret: None,
        };
        Ok((db, note))
    }

    /// The store's secret: the one it keeps, else a new one, kept.
    fn secret(&mut self) -> Result<[u8; 32], OpsError> {
        if let Some(s) = self.secret {
            return Ok(s);
        }
        let fail = |e: rusqlite::Error| store_error("keep its secret", &e);
        let kept: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'secret'", [], |r| {
                r.get(0)
            })
            .optional()
            .map_err(fail)?;
        let secret = match kept.as_deref().and_then(crate::tenant::from_hex) {
            Some(s) => s,
            None => {
                let s = crate::tenant::random_secret();
                self.keep_secret(&s).map_err(fail)?;
                s
            }
        };
        self.secret = Some(secret);
        Ok(secret)
    }

    fn keep_secret(&self, secret: &[u8; 32]) -> rusqlite::Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta (key, value) VALUES ('secret', ?1)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![crate::tenant::hex(secret)],
            )
            .map(drop)
    }

    /// After `e` (met by a job): when it says the database is damaged, moves the file aside
    /// and starts a fresh one that keeps the same secret.
    fn recover_from(&mut self, e: &rusqlite::Error) {
        if !is_damage(e) {
            return;
        }
        let fresh = match &self.path {
            None => open_memory(),
            Some(p) => move_aside(p, "a call met a damaged page").and_then(|line| {
                log(&line);
                open_file(p, self.sync).map_err(|e| e.into_error(p))
            }),
        };
        match fresh {
            Ok(conn) => {
                self.conn = conn;
                if let Some(s) = self.secret
                    && let Err(e) = self.keep_secret(&s)
                {
                    log(
                        &serde_json::json!({"event": "store_error", "code": "STATE_STORE_ERROR", "message": bounded(&e.to_string())}),
                    );
                }
            }
            Err(e) => {
                log(
                    &serde_json::json!({"event": "store_error", "code": e.code, "message": bounded(&e.message)}),
                );
            }
        }
    }
}

/// Whether `e` says the database file is damaged (not busy, not full, not a bad statement).
fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Why a file did not open.
enum Opened {
    /// It is not a sound database of this schema: move it aside.
    Damaged(String),
    /// It could not be reached (a directory that does not exist, no permission).
    Unreachable(String),
}

impl Opened {
    fn into_error(self, path: &Path) -> OpsError {
        let (Self::Damaged(why) | Self::Unreachable(why)) = self;
        OpsError::input(
            format!("cannot open the session store {}: {why}", path.display()),
            details! { "path" => path.display().to_string(), "document" => "session store" },
        )
    }
}

fn open_memory() -> Result<Connection, OpsError> {
    let c = Connection::open_in_memory().map_err(|e| store_error("open", &e))?;
    c.execute_batch(SCHEMA)
        .map_err(|e| store_error("open", &e))?;
    Ok(c)
}

/// Creates `path` readable by its owner alone when it is absent: SQLite gives its `-wal` and
/// `-shm` the database file's permissions.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    match o.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why the file at `path` is not whole, by its header: shorter than the pages its header
/// counts (cut off), or too short for a header at all. SQLite would read the missing pages as
/// empty and lose the sessions in them without a word.
fn cut_off(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let len = std::fs::metadata(path).ok()?.len();
    if len == 0 {
        return None;
    }
    let mut header = [0_u8; 100];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok();
    if !read {
        return Some(format!("it is {len} bytes, shorter than a database header"));
    }
    if !header.starts_with(b"SQLite format 3\0") {
        return Some("it does not begin with SQLite's header".to_owned());
    }
    let be16 = |i: usize| u64::from(u16::from_be_bytes([header[i], header[i + 1]]));
    let be32 = |i: usize| {
        header[i..i + 4]
            .iter()
            .fold(0_u64, |n, b| n << 8 | u64::from(*b))
    };
    let page = match be16(16) {
        1 => 65_536,
        n => n,
    };
    // The page count in the header is valid only when its two change counters agree.
    let pages = if be32(24) == be32(92) { be32(28) } else { 0 };
    (len < page * pages).then(|| {
        format!(
            "it is {len} bytes, shorter than the {pages} pages of {page} bytes its header counts"
        )
    })
}

fn open_file(path: &Path, sync: SqliteSync) -> Result<Connection, Opened> {
    create_private(path).map_err(|e| Opened::Unreachable(e.to_string()))?;
    if let Some(why) = cut_off(path) {
        return Err(Opened::Damaged(why));
    }
    let damaged = |e: rusqlite::Error| {
        if is_damage(&e) {
            Opened::Damaged(e.to_string())
        } else {
            Opened::Unreachable(e.to_string())
        }
    };
    let c = Connection::open(path).map_err(damaged)?;
    // WAL: a reader never waits for the writer, and a commit is one append. NORMAL: the
    // append is in the log (the operating system's) when the commit returns, so a killed
    // proxy keeps every call it answered; FULL also syncs it, so a lost machine does too, for
    // an fsync per call.
    c.pragma_update(None, "journal_mode", "WAL")
        .map_err(damaged)?;
    let level = match sync {
        SqliteSync::Normal => "NORMAL",
        SqliteSync::Full => "FULL",
    };
    c.pragma_update(None, "synchronous", level)
        .map_err(damaged)?;
    c.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(damaged)?;
    let check: String = c
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .map_err(|e| Opened::Damaged(e.to_string()))?;
    if check != "ok" {
        return Err(Opened::Damaged("its integrity check failed".to_owned()));
    }
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| Opened::Damaged(e.to_string()))?;
    let empty: i64 = c
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| Opened::Damaged(e.to_string()))?;
    if version != VERSION && empty > 0 {
        return Err(Opened::Damaged(format!(
            "its schema is version {version}, not {VERSION}"
        )));
    }
    c.execute_batch(SCHEMA)
        .and_then(|()| c.pragma_update(None, "user_version", VERSION))
        .map_err(|e| Opened::Damaged(e.to_string()))?;
    Ok(c)
}

/// Moves the store at `path` (and its `-wal` and `-shm`) aside to `PATH.damaged-NANOS`: the
/// log line that says so and why.
fn move_aside(path: &Path, why: &str) -> Result<serde_json::Value, OpsError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let aside = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        PathBuf::from(p)
    };
    let to = aside(&format!(".damaged-{stamp}"));
    std::fs::rename(path, &to).map_err(|e| {
        OpsError::input(
            format!(
                "the session store {} is damaged ({why}) and cannot be moved aside: {e}; move or remove it, then start again",
                path.display()
            ),
            details! { "path" => path.display().to_string(), "document" => "session store" },
        )
    })?;
    for side in ["-wal", "-shm"] {
        let from = aside(side);
        if from.exists() {
            let mut p = to.as_os_str().to_owned();
            p.push(side);
            let _ = std::fs::rename(&from, PathBuf::from(p));
        }
    }
    Ok(serde_json::json!({
        "event": "store_moved_aside", "why": bounded(why),
        "moved_to": to.display().to_string(),
    }))
}

/// A job for the store thread.
type Job = Box<dyn FnOnce(&mut Db) + Send>;

/// The store thread: the one owner of the database, running the jobs it is handed in the
/// order they came, and starting the database afresh when one meets damage. Dropping it waits
/// for the jobs handed over and closes the database (its write-ahead log checkpointed).
struct Worker {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Worker {
    /// Starts the store thread on `db`.
    fn start(mut db: Db) -> Result<Self, OpsError> {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("cutctx-store".to_owned())
            .spawn(move || {
                // Ends when the store is dropped and the last job has run.
                for job in queue {
                    job(&mut db);
                }
            })
            .map_err(|e| store_error("start its thread", &e))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Runs `f` on the store thread and waits for its answer (a blocking wait: call it from
    /// the blocking pool).
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreFailure> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        let jobs = self.jobs.as_ref().ok_or(StoreFailure::Stopped)?;
        jobs.send(Box::new(move |db: &mut Db| {
            let r = f(&mut db.conn);
            if let Err(e) = &r {
                db.recover_from(e);
            }
            let _ = answer.send(r.map_err(StoreFailure::Sqlite));
        }))
        .map_err(|_| StoreFailure::Stopped)?;
        answered.recv().map_err(|_| StoreFailure::Stopped)?
    }
}

/// Why a store job failed.
#[derive(Debug)]
enum StoreFailure {
    Sqlite(rusqlite::Error),
    Stopped,
}

impl std::fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(e) => write!(f, "{e}"),
            Self::Stopped => f.write_str("its thread has stopped"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tenant: &str, messages: u64, digest: &str, updated: u64) -> Row {
        Row {
            tenant: tenant.into(),
            scope: format!("scope-{tenant}"),
            format: "openai-chat".into(),
            messages,
            digest: digest.into(),
            checkpoint_digest: format!("d{}", checkpoint(messages)),
            state: "{}".into(),
            ratio: 1.0,
            cached_tokens: 0,
            updated,
        }
    }

    fn limits(max_sessions: u64, per_tenant: u64) -> Limits {
        Limits {
            max_age: 1000,
            max_sessions,
            per_tenant,
        }
    }

    fn memory() -> Store {
        Store::open(&StateSpec::Memory, SqliteSync::Normal).expect("memory")
    }

    fn digests(n: usize) -> Vec<String> {
        (0..=n).map(|k| format!("d{k}")).collect()
    }

    #[test]
    fn a_long_history_costs_a_few_lookups_not_one_per_message() {
        // Before: one query per message, 200,000 of them for a 200,000-message request.
        let c = open_memory().expect("memory");
        let many = digests(200_000);
        let (found, lookups) = find(&c, "scope-t", &many).expect("find");
        assert_eq!(found, None);
        assert_eq!(lookups, TRIES + 18, "8 exact lengths, then 2^17 down to 1");
        insert(&c, "far", &row("t", 1000, "d1000", 1)).expect("insert");
        let (found, lookups) = find(&c, "scope-t", &many).expect("find");
        assert_eq!(found.as_deref(), Some("far"));
        assert!(lookups <= TRIES + 18, "{lookups}");
    }

    #[test]
    fn checkpoints_are_powers_of_two() {
        let points: Vec<u64> = [0, 1, 2, 3, 4, 5, 8, 1000].map(checkpoint).to_vec();
        assert_eq!(points, [0, 1, 2, 2, 4, 4, 8, 512]);
    }

    #[test]
    fn the_longest_history_in_scope_wins_near_or_far() {
        let s = memory();
        let l = limits(10, 10);
        s.save("a", &row("t", 1, "d1", 100), l).expect("save");
        s.save("b", &row("t", 3, "d3", 100), l).expect("save");
        s.save("c", &row("t", 2, "x2", 100), l).expect("save");
        s.save("far", &row("t", 37, "d37", 100), l).expect("save");
        let find = |n| s.find_extending("scope-t", &digests(n)).expect("find");
        assert_eq!(find(4).as_deref(), Some("b"));
        // Far past the exact tries: found at its checkpoint.
        assert_eq!(find(200).as_deref(), Some("far"));
        assert_eq!(find(36).as_deref(), Some("b"));
        assert_eq!(
            s.find_extending("scope-u", &digests(4)).expect("find"),
            None
        );
        s.record_usage("b", "d3", 1.5, 7).expect("usage");
        s.record_usage("b", "stale", 1.9, 9).expect("usage");
        let b = s.load("b").expect("load").expect("there");
        assert!((b.ratio - 1.5).abs() < 1e-9 && b.cached_tokens == 7);
    }

    #[test]
    fn eviction_is_by_age_then_within_the_tenant_never_anothers() {
        let s = memory();
        s.save("old", &row("t", 1, "d1", 100), limits(10, 10))
            .expect("save");
        s.save("d", &row("t", 1, "z", 2000), limits(10, 10))
            .expect("save");
        assert_eq!(s.load("old").expect("load"), None, "too old");
        // The tenant's quota gives up its own oldest.
        s.save("e", &row("t", 1, "z", 2001), limits(10, 1))
            .expect("save");
        assert_eq!(s.load("d").expect("load"), None);
        assert_eq!(s.count("t").expect("count"), (1, 1));
        // A full store: another tenant's new session is not stored, and evicts nothing.
        let saved = s
            .save("f", &row("u", 1, "z", 2002), limits(1, 10))
            .expect("save");
        assert_eq!(saved, Saved::Full);
        assert!(s.load("e").expect("load").is_some());
        assert_eq!(s.count("u").expect("count"), (1, 0));
    }

    #[test]
    fn a_roll_back_restores_the_row_unless_moved_on() {
        let s = memory();
        let l = limits(10, 10);
        let before = row("t", 1, "d1", 100);
        s.save("a", &before, l).expect("save");
        let wrote = row("t", 3, "d3", 101);
        s.save("a", &wrote, l).expect("save");
        s.roll_back("a", Some(&before), &wrote).expect("roll back");
        assert_eq!(s.load("a").expect("load"), Some(before.clone()));
        // Made by the call: gone.
        s.save("n", &wrote, l).expect("save");
        s.roll_back("n", None, &wrote).expect("roll back");
        assert_eq!(s.load("n").expect("load"), None);
        // Moved on since: kept.
        s.save("a", &row("t", 5, "d5", 102), l).expect("save");
        s.roll_back("a", None, &wrote).expect("roll back");
        assert!(s.load("a").expect("load").is_some());
        s.quarantine("a", "STATE_ERROR").expect("quarantine");
        assert_eq!(s.load("a").expect("load"), None);
        assert_eq!(s.count("t").expect("count"), (0, 0));
    }
}
