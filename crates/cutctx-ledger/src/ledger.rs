//! The ledger file: appending under a lock with fsync, reading, verifying, head pins.
//!
//! What to write and how to read it is `cutctx_receipts::chain`, which works on text; this
//! module only opens, locks, writes, syncs and reads files around it.
//!
//! **Appending** ([`Ledger::append`]) mirrors arcaeon's `Ledger.append`: `ts` is stamped when
//! absent, any `chain` is replaced, and under an exclusive advisory lock on the sidecar
//! `<path>.lock` (the same file and the same `flock` arcaeon takes, so Rust and Python writers
//! exclude each other) the previous chain is read from the file's tail, the row is chained,
//! and `\n` (when the file does not end in one, healing a torn line) plus the row plus `\n` is
//! written with one `write_all` on an `O_APPEND` handle, then `fsync`ed and checked to have
//! landed.
//!
//! * **Crashes.** A crash mid-write can leave only the *last* line torn. The torn line fails to
//!   parse, so it is reported (as `LEDGER_TORN_LINE` while it is last, as an unparseable line
//!   once healed), never accepted; the rows before it are untouched, and the next append
//!   chains from the last complete row, so the damage is one reported line.
//! * **Concurrency.** Reading the tail and writing happen under the lock, so two processes
//!   appending at once serialize: lines never interleave and the chain never forks. Unlike
//!   arcaeon (which proceeds *unlocked* after 15 s), a lock not obtained within the timeout is
//!   an error and nothing is written.
//! * **The previous chain** is exactly arcaeon's `_last_chain`: the `chain` of the last line
//!   that parses as an object (scanning back past torn or corrupt lines), or `genesis` when
//!   that value is absent or Python-falsy (`null`, `""`, ...). An unchained row written out
//!   of band therefore restarts the chain from `genesis`, which is what arcaeon's
//!   `declare_break` (without `resume_prev`) expects of the next row.
//!
//! **Reading** follows arcaeon (see [`cutctx_receipts::chain`]); [`verify_file`], [`Ledger::head`] and
//! [`chain_at`] reproduce `verify_file`, `Ledger.head` and `chain_at`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cutctx_receipts::chain::{self, Chained, FileVerdict, GENESIS, ParsedRow};
use cutctx_receipts::json::{self, Object, Value};
use cutctx_receipts::{
    Audit, AuditOptions, Clock, CompactionReceipt, Head, Labels, ReceiptError, audit_text,
};

/// How long [`Ledger::append`] waits for the lock by default.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

const SCAN_CHUNK: u64 = 8192;
const SCAN_CHUNK_MAX: u64 = 1 << 20;

/// A hash-chained JSONL ledger at a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    path: PathBuf,
    lock_timeout: Duration,
}

/// What one append wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Appended {
    /// The row's chain value.
    pub chain: String,
    /// The row as written, `ts` and `chain` included.
    pub row: Object,
    /// The line as written, without its newline.
    pub line: String,
    /// Whether a missing final newline was written first (a torn last line was healed).
    pub healed: bool,
}

impl Ledger {
    /// The ledger at `path` (created on first append).
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        }
    }

    /// The same ledger with another lock timeout.
    #[must_use]
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }

    /// The ledger's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sidecar lock file: `<path>.lock`.
    #[must_use]
    pub fn lock_path(&self) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(".lock");
        PathBuf::from(p)
    }

    fn lock(&self) -> Result<File, ReceiptError> {
        let lock_path = self.lock_path();
        let file = private(OpenOptions::new().read(true).write(true))
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| io_error("open", &lock_path, &e))?;
        let start = Instant::now();
        let mut delay = Duration::from_millis(1);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) => {
                    if start.elapsed() >= self.lock_timeout {
                        return Err(ReceiptError::LockTimeout {
                            path: lock_path.display().to_string(),
                            waited_ms: start.elapsed().as_millis(),
                        });
                    }
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(io_error("lock", &lock_path, &e));
                }
            }
        }
    }

    /// Appends one record and returns what was written.
    ///
    /// # Errors
    ///
    /// A record that cannot be written as strict JSON (NaN, a lone surrogate, too deep), a lock
    /// not obtained in time, or a file system failure. Nothing is written on error, except
    /// that a file system failure in the middle of the write may leave a torn last line,
    /// which the next append heals and verification reports.
    pub fn append(&self, record: &Object, clock: &dyn Clock) -> Result<Appended, ReceiptError> {
        let stamped = chain::stamped(record, clock);
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| io_error("create", parent, &e))?;
        }
        let _lock = self.lock()?;
        let prev = self.prev_for_append()?;
        // An unwritable row (NaN, a lone surrogate) is refused here, before any byte is written.
        let Chained { chain, row, line } = chain::chained(stamped, &prev)?;
        let existed = self.path.exists();
        let mut file = private(OpenOptions::new().read(true).append(true))
            .create(true)
            .open(&self.path)
            .map_err(|e| io_error("open", &self.path, &e))?;
        let before = file
            .metadata()
            .map_err(|e| io_error("stat", &self.path, &e))?
            .len();
        let mut healed = false;
        if before > 0 {
            let mut last = [0_u8; 1];
            file.seek(SeekFrom::Start(before - 1))
                .and_then(|_| file.read_exact(&mut last))
                .map_err(|e| io_error("read", &self.path, &e))?;
            healed = last[0] != b'\n';
        }
        let mut payload = Vec::with_capacity(line.len() + 2);
        if healed {
            payload.push(b'\n');
        }
        payload.extend_from_slice(line.as_bytes());
        payload.push(b'\n');
        file.write_all(&payload)
            .and_then(|()| file.flush())
            .map_err(|e| io_error("write", &self.path, &e))?;
        sync(&file).map_err(|e| io_error("sync", &self.path, &e))?;
        let landed = file
            .metadata()
            .map_err(|e| io_error("stat", &self.path, &e))?
            .len();
        let wrote = payload.len() as u64;
        if landed < before.saturating_add(wrote) {
            return Err(ReceiptError::WriteLost {
                path: self.path.display().to_string(),
                wrote,
                holds: landed,
            });
        }
        if !existed {
            // Make the new directory entry durable too (best effort: not every platform or
            // file system can open or sync a directory).
            if let Some(dir) = self.path.parent() {
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                if let Ok(d) = File::open(dir) {
                    let _ = d.sync_all();
                }
            }
        }
        Ok(Appended {
            chain,
            row,
            line,
            healed,
        })
    }

    /// Seals `receipt` into this ledger: builds its row, appends it, and only then marks the
    /// receipt sealed (a failed append leaves it open, as in arcaeon).
    ///
    /// # Errors
    ///
    /// As [`CompactionReceipt::seal`] and [`Ledger::append`].
    pub fn seal(
        &self,
        receipt: &mut CompactionReceipt,
        labels: &Labels,
        clock: &dyn Clock,
    ) -> Result<Appended, ReceiptError> {
        let row = receipt.prepare(labels, clock)?;
        let appended = self.append(&row, clock)?;
        receipt.mark_sealed();
        Ok(appended)
    }

    /// Names a break instead of hiding it (arcaeon's `declare_break`): appends
    /// `{"op": "chain_break_declared", "orphan_line", "orphan_sha256", "why"[, "resume_prev"]}`,
    /// pinning the orphan line's exact (stripped) bytes. Verification then reports the break
    /// as declared and the verdict as bounded, never as verified; strict mode ignores it. It
    /// defends against forgetting, not against anyone who can write the file.
    ///
    /// # Errors
    ///
    /// [`ReceiptError::Malformed`] for a blank `why`, a line outside the file or a blank line;
    /// otherwise as [`Ledger::append`].
    pub fn declare_break(
        &self,
        orphan_line: usize,
        why: &str,
        resume_prev: Option<&str>,
        clock: &dyn Clock,
    ) -> Result<Appended, ReceiptError> {
        // A blank `why` is refused before the file is read, as arcaeon does.
        chain::declaration_why(why)?;
        let text = self.read_text()?;
        let source = self.path.display().to_string();
        let row = chain::break_declaration(&text, &source, orphan_line, why, resume_prev)?;
        self.append(&row, clock)
    }

    /// The `prev` for the next row: [`Ledger::last_chain`] as the chain rule hashes it
    /// (generalized UTF-8, so a claimed chain holding a lone surrogate hashes as in Python).
    fn prev_for_append(&self) -> Result<Vec<u8>, ReceiptError> {
        Ok(chain::prev_after(self.last_row()?.as_ref()))
    }

    /// arcaeon's `_last_chain`: the chain of the last line that parses as an object, as
    /// Python's `str()` of `obj.get("chain") or "genesis"`.
    ///
    /// # Errors
    ///
    /// A file that exists but cannot be read.
    pub fn last_chain(&self) -> Result<String, ReceiptError> {
        Ok(chain::last_chain(self.last_row()?.as_ref()))
    }

    /// The last line that parses as an object, if any.
    fn last_row(&self) -> Result<Option<Object>, ReceiptError> {
        let mut found = None;
        self.scan_back(|obj| {
            found = Some(obj.clone());
            true
        })?;
        Ok(found)
    }

    /// Walks lines backwards (split on `\n`, ASCII-stripped, lossily decoded, as arcaeon's
    /// tail scan does) until `stop` returns true for a line that parses as an object.
    fn scan_back(&self, mut stop: impl FnMut(&Object) -> bool) -> Result<(), ReceiptError> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_error("open", &self.path, &e)),
        };
        let io = |e: std::io::Error| io_error("read", &self.path, &e);
        let mut end = file.seek(SeekFrom::End(0)).map_err(io)?;
        while end > 0 {
            let start = line_start_before(&mut file, end).map_err(io)?;
            let mut raw = vec![0_u8; usize::try_from(end - start).unwrap_or(0)];
            file.seek(SeekFrom::Start(start))
                .and_then(|_| file.read_exact(&mut raw))
                .map_err(io)?;
            let trimmed = raw.trim_ascii();
            if !trimmed.is_empty() {
                let text = String::from_utf8_lossy(trimmed);
                if let Ok(parsed) = json::parse(&text)
                    && let Value::Object(obj) = parsed.value
                    && stop(&obj)
                {
                    return Ok(());
                }
            }
            if start == 0 {
                break;
            }
            end = start - 1;
        }
        Ok(())
    }

    /// The decoded text of the ledger.
    ///
    /// # Errors
    ///
    /// A file that cannot be read.
    pub fn read_text(&self) -> Result<String, ReceiptError> {
        std::fs::read(&self.path)
            .map(chain::decode_owned)
            .map_err(|e| io_error("read", &self.path, &e))
    }

    /// Every line that parses as a JSON object, with its line number (arcaeon's iteration,
    /// restricted to rows).
    ///
    /// # Errors
    ///
    /// A file that cannot be read.
    pub fn rows(&self) -> Result<Vec<ParsedRow>, ReceiptError> {
        Ok(chain::verify_text(&self.read_text()?, false).1)
    }

    /// The ledger's head, as arcaeon's `Ledger.head()`: a missing or empty ledger is a clean
    /// genesis head; a broken one carries its first break (and refuses to pin).
    #[must_use]
    pub fn head(&self, clock: &dyn Clock) -> Head {
        let verdict = verify_file(&self.path, false);
        let (mut ok, mut first_break) = (verdict.ok, verdict.first_break.clone());
        let absent = matches!(
            std::fs::metadata(&self.path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
        if (ok == Some(false) && absent) || verdict.verified_scope == "empty" {
            ok = Some(true);
            first_break = None;
        }
        let chain = match self.last_chain() {
            Ok(c) => c,
            Err(e) => {
                ok = Some(false);
                first_break.get_or_insert_with(|| format!("unreadable: {e}"));
                GENESIS.to_owned()
            }
        };
        Head {
            chain,
            rows: verdict.rows,
            as_of: clock.now_utc(),
            ok,
            first_break,
        }
    }

    /// Audits the ledger (see [`cutctx_receipts::audit`]).
    ///
    /// # Errors
    ///
    /// A file that cannot be read.
    pub fn audit(&self, options: AuditOptions<'_>) -> Result<Audit, ReceiptError> {
        Ok(audit_text(&self.read_text()?, options))
    }
}

/// [`ReceiptError::Io`] for a file system failure while doing `action` on `path`.
fn io_error(action: &'static str, path: &Path, e: &std::io::Error) -> ReceiptError {
    ReceiptError::Io {
        action,
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// `fsync`, tolerating file systems that cannot (arcaeon's floor is the flush).
fn sync(file: &File) -> std::io::Result<()> {
    match file.sync_all() {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::Unsupported | std::io::ErrorKind::InvalidInput
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// The offset just after the last `\n` strictly before `end`, else 0, reading backwards in
/// doubling blocks (so a long line costs one pass over it).
fn line_start_before(file: &mut File, end: u64) -> std::io::Result<u64> {
    let mut pos = end;
    let mut chunk = SCAN_CHUNK;
    let mut buf = Vec::new();
    while pos > 0 {
        let start = pos.saturating_sub(chunk);
        buf.resize(usize::try_from(pos - start).unwrap_or(0), 0);
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        pos = start;
        chunk = (chunk * 2).min(SCAN_CHUNK_MAX);
    }
    Ok(0)
}

/// arcaeon's `verify_file`: an unreadable file is a break (`unreadable: <error>`).
#[must_use]
pub fn verify_file(path: &Path, strict: bool) -> FileVerdict {
    match std::fs::read(path) {
        // The verdict only: each row is dropped once the chain rule has read it.
        Ok(bytes) => chain::verify_text_with(&chain::decode_owned(bytes), strict, drop),
        Err(e) => FileVerdict {
            ok: Some(false),
            first_break: Some(format!("unreadable: {e}")),
            breaks: 1,
            verified_scope: "full".to_owned(),
            ..FileVerdict::default()
        },
    }
}

/// arcaeon's `chain_at`: the chain of the `n`-th row, `genesis` for 0, `None` when the file
/// cannot be read, has fewer rows, or that row has no chain.
#[must_use]
pub fn chain_at(path: &Path, n: usize) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    chain::chain_at(&chain::decode_owned(bytes), n)
}

/// `o`, creating its file readable and writable by its owner alone (a ledger records what
/// went in and out of a model; its lock file goes with it). An existing file keeps its mode.
fn private(o: &mut OpenOptions) -> &mut OpenOptions {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    o
}
