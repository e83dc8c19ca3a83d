//! Writing the CLI's outputs so that none is lost quietly: standard output, whose failure is
//! an [`OUTPUT_ERROR`], and whole files such as `--report`, written
//! atomically through a temporary file in the same directory.
//!
//! * Standard output gets the output in one `write_all` and a flush. A failure (a full disk,
//!   a device error) is `OUTPUT_ERROR` with `{"target": "stdout", "kind": …}`; part of the output
//!   may have reached the stream before the failure, which the exit status then disowns. A
//!   closed pipe is the reader's choice, not a fault: it is [`Delivery::ReaderGone`], reported
//!   by nothing but the exit status [`CLOSED_PIPE_STATUS`].
//! * A whole file is written to `.NAME.tmp-<pid>` beside it, flushed and synced, then renamed
//!   over it, so the file is either as it was or entirely the new content. On any failure the
//!   temporary file is removed and the error is `OUTPUT_ERROR` with
//!   `{"target": …, "kind": …, "path": …}`.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::{OUTPUT_ERROR, OpsError};

/// The exit status when standard output is a pipe whose reader has gone: 128 + `SIGPIPE` (13),
/// what a shell reports for a program the closed pipe ended.
pub const CLOSED_PIPE_STATUS: u8 = 141;

/// How many temporary names a file write tries before giving up: another process with the
/// same id (in another container, or a leftover of a crashed run) may hold the first.
const TEMPORARY_NAMES: u32 = 16;

/// What became of an output on standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Written whole and flushed.
    Written,
    /// The reader closed the pipe: nobody wants the rest.
    ReaderGone,
}

/// The stable name of an I/O error's kind, as it appears in `details.kind`: the
/// `std::io::ErrorKind` variant, for example `StorageFull`, `NotFound` or `IsADirectory`.
fn kind_name(kind: ErrorKind) -> String {
    format!("{kind:?}")
}

/// An [`OUTPUT_ERROR`] for writing `target` (`stdout`, `report`), at `path` for a file.
pub(crate) fn output_error(target: &str, path: Option<&Path>, e: &std::io::Error) -> OpsError {
    let mut details = cutctx::model::details! { "target" => target, "kind" => kind_name(e.kind()) };
    let message = match path {
        Some(p) => {
            details.insert(
                "path".to_owned(),
                serde_json::Value::from(p.display().to_string()),
            );
            format!("cannot write the {target} to {}: {e}", p.display())
        }
        None => format!("cannot write to standard output: {e}"),
    };
    OpsError {
        code: OUTPUT_ERROR,
        message,
        details,
    }
}

/// Writes `bytes` to `out` (standard output, in the binary) and flushes it.
///
/// # Errors
///
/// `OUTPUT_ERROR` with `{"target": "stdout", "kind": …}` when the write or the flush fails for
/// any reason but a closed pipe.
pub fn deliver(out: &mut impl Write, bytes: &[u8]) -> Result<Delivery, OpsError> {
    deliver_with(out, |out| out.write_all(bytes).and_then(|()| out.flush()))
}

/// As [`deliver`], the output written and flushed by `write`, for an output written as it
/// is made.
///
/// # Errors
///
/// As [`deliver`].
pub fn deliver_with<W: Write>(
    out: &mut W,
    write: impl FnOnce(&mut W) -> std::io::Result<()>,
) -> Result<Delivery, OpsError> {
    match write(out) {
        Ok(()) => Ok(Delivery::Written),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(Delivery::ReaderGone),
        // The writer failed on what it read, not on the output: that error, as it is.
        Err(e) => match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<OpsError>())
        {
            Some(input) => Err(input.clone()),
            None => Err(output_error("stdout", None, &e)),
        },
    }
}

/// Standard output for a command's one output: written through a buffer of its own straight
/// to the descriptor, not through Rust's `Stdout`, which buffers by line and so looks for the
/// last newline in everything written to it (the whole of a large output, which holds one
/// newline, at its end). Every writer of an output ends with [`Write::flush`], which says
/// whether the last of it was written (dropping it writes what it holds and drops any error).
///
/// ```
/// use std::io::Write;
/// let mut out = cutctx_ops::output::Stdout::new();
/// out.write_all(b"")?;
/// out.flush()?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Stdout(StdoutTarget);

enum StdoutTarget {
    File(std::io::BufWriter<std::fs::File>),
    /// Where the descriptor cannot be duplicated (it is closed, say): the usual `Stdout`,
    /// which reports the failure as it writes.
    Locked(std::io::StdoutLock<'static>),
}

/// The buffer of [`Stdout`]: larger writes go to the descriptor directly.
const STDOUT_BUFFER_BYTES: usize = 64 << 10;

impl Stdout {
    /// Standard output, after whatever was written to Rust's `Stdout` before (flushed).
    #[must_use]
    pub fn new() -> Self {
        let stdout = std::io::stdout();
        let _ = stdout.lock().flush();
        match stdout.as_fd().try_clone_to_owned() {
            Ok(fd) => Self(StdoutTarget::File(std::io::BufWriter::with_capacity(
                STDOUT_BUFFER_BYTES,
                std::fs::File::from(fd),
            ))),
            Err(_) => Self(StdoutTarget::Locked(stdout.lock())),
        }
    }
}

impl Stdout {
    /// A writer of this kind onto `file`, as standard output is written when it is a file.
    #[cfg(test)]
    pub(crate) fn of_file(file: std::fs::File) -> Self {
        Self(StdoutTarget::File(std::io::BufWriter::with_capacity(
            STDOUT_BUFFER_BYTES,
            file,
        )))
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.0 {
            StdoutTarget::File(f) => f.write(buf),
            StdoutTarget::Locked(l) => l.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match &mut self.0 {
            StdoutTarget::File(f) => f.write_all(buf),
            StdoutTarget::Locked(l) => l.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.0 {
            StdoutTarget::File(f) => f.flush(),
            StdoutTarget::Locked(l) => l.flush(),
        }
    }
}

/// An output that takes a range of a file straight from the file: [`Stdout`] through
/// `std::io::copy`, which has the kernel copy it (`copy_file_range` into a regular file,
/// `sendfile` into a device) where the system allows it and otherwise reads it through the
/// output's own buffer, never through a buffer of the caller's; a vector reads it in.
///
/// ```
/// use cutctx_ops::output::CopyFrom;
/// let path = std::env::temp_dir().join(format!("cutctx-copy-from-doc-{}", std::process::id()));
/// std::fs::write(&path, b"0123456789")?;
/// let mut out = b"<".to_vec();
/// assert_eq!(out.copy_from(&std::fs::File::open(&path)?, 3, 4)?, 4);
/// assert_eq!(out, b"<3456");
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait CopyFrom: Write {
    /// Writes `len` bytes of `file` from `offset` (its position moved past them): how many
    /// were written, fewer when the file ends first.
    ///
    /// # Errors
    ///
    /// Whatever reading the file or writing the output fails with.
    fn copy_from(&mut self, file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<u64>;
}

/// `len` bytes of `file` from `offset` written into `out` by `std::io::copy`, which copies
/// in the kernel for the standard library's own files and buffered writers.
fn copy_range(
    file: &std::fs::File,
    offset: u64,
    len: u64,
    out: &mut impl Write,
) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut from = file;
    from.seek(SeekFrom::Start(offset))?;
    std::io::copy(&mut from.take(len), out)
}

impl CopyFrom for Stdout {
    fn copy_from(&mut self, file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<u64> {
        match &mut self.0 {
            StdoutTarget::File(f) => copy_range(file, offset, len, f),
            StdoutTarget::Locked(l) => copy_range(file, offset, len, l),
        }
    }
}

impl CopyFrom for Vec<u8> {
    fn copy_from(&mut self, file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<u64> {
        copy_range(file, offset, len, self)
    }
}

/// Replaces the file at `path` with `bytes`, atomically: afterwards it holds either what it
/// held before (or is still absent) or exactly `bytes`, and no temporary file remains. A path
/// that exists and is not a regular file (a pipe, a terminal, `/dev/stderr`) is written
/// directly: a rename would destroy it.
/// `target` names the output in the error (`report`).
///
/// # Errors
///
/// `OUTPUT_ERROR` with `{"target", "kind", "path"}` when the temporary file cannot be created,
/// written or synced, or cannot be renamed over `path` (a directory, say).
pub fn write_atomically(path: &Path, bytes: &[u8], target: &str) -> Result<(), OpsError> {
    write_atomically_with(path, |file| file.write_all(bytes))
        .map_err(|e| output_error(target, Some(path), &e))
}

/// [`write_atomically`] with the writing of the content given as `fill`, so that tests can make
/// it fail halfway. One writer, [`AtomicFile`], for every file the CLI replaces.
fn write_atomically_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path).map_err(|(_, e)| e)?;
    // On failure, dropping `file` removes its temporary file and leaves `path` as it was.
    fill(file.writer()?)?;
    file.commit().map_err(|(_, e)| e)
}

/// A file written piece by piece and put in place whole: its content goes to a temporary file
/// beside it, which [`AtomicFile::commit`] syncs and renames over the path. Dropped without
/// a commit, it removes the temporary file and leaves the path as it was.
///
/// A path that exists and is not a regular file (a terminal, a pipe, `/dev/stderr`) cannot be
/// replaced by a rename without destroying it: it is written directly instead.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    /// `None` when the path is written directly.
    temporary: Option<PathBuf>,
    file: Option<std::io::BufWriter<File>>,
}

impl AtomicFile {
    /// Starts replacing the file at `path`.
    ///
    /// # Errors
    ///
    /// The path, and the error, when the temporary file cannot be created beside it.
    pub fn create(path: &Path) -> Result<Self, (PathBuf, std::io::Error)> {
        let fail = |e| (path.to_owned(), e);
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            let file = OpenOptions::new().write(true).open(path).map_err(fail)?;
            return Ok(Self {
                path: path.to_owned(),
                temporary: None,
                file: Some(std::io::BufWriter::new(file)),
            });
        }
        let name = path.file_name().ok_or_else(|| {
            fail(std::io::Error::new(
                ErrorKind::IsADirectory,
                "the path names a directory",
            ))
        })?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let (temporary, file) = create_temporary(&dir, &name.to_string_lossy()).map_err(fail)?;
        Ok(Self {
            path: path.to_owned(),
            temporary: Some(temporary),
            file: Some(std::io::BufWriter::new(file)),
        })
    }

    /// The writer of the content; an error once the file has been committed.
    fn writer(&mut self) -> std::io::Result<&mut std::io::BufWriter<File>> {
        self.file
            .as_mut()
            .ok_or_else(|| ErrorKind::BrokenPipe.into())
    }

    /// Appends `bytes` to the content.
    ///
    /// # Errors
    ///
    /// The path, and the error, when the temporary file cannot be written.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
        match self.file.as_mut() {
            Some(f) => f.write_all(bytes).map_err(|e| (self.path.clone(), e)),
            None => Err((self.path.clone(), ErrorKind::BrokenPipe.into())),
        }
    }

    /// Flushes and syncs the content and renames it over the path.
    ///
    /// # Errors
    ///
    /// The path, and the error, when any step fails; the temporary file is then removed.
    pub fn commit(mut self) -> Result<(), (PathBuf, std::io::Error)> {
        let file = self.file.take();
        let result = match file {
            Some(f) => f
                .into_inner()
                .map_err(std::io::IntoInnerError::into_error)
                .and_then(|f| match &self.temporary {
                    // On disk before the rename: a crash never leaves the new name on
                    // missing content.
                    Some(temporary) => f
                        .sync_all()
                        .and_then(|()| std::fs::rename(temporary, &self.path)),
                    None => Ok(()),
                }),
            None => Err(ErrorKind::BrokenPipe.into()),
        };
        if result.is_ok() {
            // Renamed: the name is the target's now, and `drop` must not remove it.
            self.temporary = None;
        }
        result.map_err(|e| (self.path.clone(), e))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        // Committed files have no temporary left; any other leaves nothing behind either.
        if let Some(temporary) = &self.temporary {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

/// Creates a new temporary file `.NAME.tmp-<pid>` (then `-1`, `-2`, … if taken) in `dir`;
/// never opens a file that already exists.
fn create_temporary(dir: &Path, name: &str) -> std::io::Result<(PathBuf, File)> {
    let pid = std::process::id();
    let mut last = None;
    for n in 0..TEMPORARY_NAMES {
        let file_name = if n == 0 {
            format!(".{name}.tmp-{pid}")
        } else {
            format!(".{name}.tmp-{pid}-{n}")
        };
        let temporary = dir.join(file_name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
        {
            Ok(file) => return Ok((temporary, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(ErrorKind::AlreadyExists)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty folder for one test, under the system's temporary folder; a test that
    /// passes removes it with [`done`].
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir()
            .join(format!("cutctx-output-{}", std::process::id()))
            .join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
        dir
    }

    /// Removes a passing test's folder; a failing test leaves it for a look.
    fn done(dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        // The process's folder goes with its last test (removing a folder still in use fails,
        // which is what leaves it to the others).
        if let Some(parent) = dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }

    /// The names in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("the folder can be listed")
            .map(|e| {
                e.expect("an entry can be read")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }

    /// A writer that accepts `room` bytes, then fails as a full disk does.
    struct Full {
        room: usize,
        kind: ErrorKind,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(self.kind));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_full_stream_is_an_output_error_naming_stdout_and_the_kind() {
        let mut out = Full {
            room: 3,
            kind: ErrorKind::StorageFull,
        };
        let err = deliver(&mut out, b"{\"plan\":{}}\n").expect_err("the stream is full");
        assert_eq!(err.code, OUTPUT_ERROR);
        assert_eq!(err.exit_status(), 6);
        assert_eq!(err.details["target"], "stdout");
        assert_eq!(err.details["kind"], "StorageFull");
        assert!(!err.details.contains_key("path"));
    }

    #[test]
    fn a_closed_pipe_is_the_reader_gone_and_a_good_stream_is_written() {
        let mut gone = Full {
            room: 0,
            kind: ErrorKind::BrokenPipe,
        };
        assert_eq!(deliver(&mut gone, b"x\n"), Ok(Delivery::ReaderGone));
        let mut good = Vec::new();
        assert_eq!(deliver(&mut good, b"x\n"), Ok(Delivery::Written));
        assert_eq!(good, b"x\n");
    }

    #[test]
    fn a_file_is_replaced_whole_and_no_temporary_file_remains() {
        let dir = scratch("replaced");
        let path = dir.join("report.json");
        std::fs::write(&path, "old").expect("written");
        write_atomically(&path, b"new\n", "report").expect("the report is written");
        assert_eq!(std::fs::read(&path).expect("read"), b"new\n");
        assert_eq!(listing(&dir), ["report.json"]);
        done(&dir);
    }

    #[test]
    fn a_failure_halfway_leaves_the_old_file_and_no_temporary_file() {
        let dir = scratch("halfway");
        let path = dir.join("report.json");
        std::fs::write(&path, "old").expect("written");
        let err = write_atomically_with(&path, |file| {
            file.write_all(b"{\"plan\":")?;
            Err(std::io::Error::from(ErrorKind::StorageFull))
        })
        .expect_err("the write fails");
        assert_eq!(err.kind(), ErrorKind::StorageFull);
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
        assert_eq!(listing(&dir), ["report.json"]);
        done(&dir);
    }

    #[test]
    fn a_pipe_in_the_way_is_written_through_not_replaced() {
        use std::os::unix::fs::FileTypeExt as _;
        let dir = scratch("pipe");
        let path = dir.join("report.fifo");
        match std::process::Command::new("mkfifo").arg(&path).status() {
            Ok(status) if status.success() => {}
            _ => {
                eprintln!("skipped: mkfifo is not available here");
                done(&dir);
                return;
            }
        }
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || std::fs::read(path).expect("the pipe can be read"))
        };
        write_atomically(&path, b"new\n", "report").expect("written through the pipe");
        // Checked before joining: a pipe replaced by a file would leave the reader waiting.
        let kind = std::fs::symlink_metadata(&path)
            .expect("still there")
            .file_type();
        assert!(
            kind.is_fifo(),
            "the pipe is left a pipe, not replaced by a file"
        );
        assert_eq!(reader.join().expect("the reader ends"), b"new\n");
        assert_eq!(listing(&dir), ["report.fifo"]);
        done(&dir);
    }

    #[test]
    fn a_directory_in_the_way_is_an_output_error_and_no_temporary_file_remains() {
        let dir = scratch("directory");
        let path = dir.join("report.json");
        std::fs::create_dir(&path).expect("a directory in the way");
        let err = write_atomically(&path, b"new\n", "report").expect_err("cannot replace");
        assert_eq!(err.code, OUTPUT_ERROR);
        assert_eq!(err.details["target"], "report");
        assert_eq!(err.details["kind"], "IsADirectory");
        assert_eq!(
            err.details["path"],
            serde_json::Value::from(path.display().to_string())
        );
        assert_eq!(listing(&dir), ["report.json"]);
        assert!(path.is_dir(), "the directory is left as it was");
        done(&dir);
    }

    #[test]
    fn a_parent_that_is_a_file_is_an_output_error() {
        let dir = scratch("parent-file");
        let parent = dir.join("request.json");
        std::fs::write(&parent, "{}").expect("written");
        let err = write_atomically(&parent.join("report.json"), b"new\n", "report")
            .expect_err("no folder to write in");
        assert_eq!(err.details["kind"], "NotADirectory");
        assert_eq!(listing(&dir), ["request.json"]);
        done(&dir);
    }

    #[test]
    fn a_taken_temporary_name_is_skipped_not_overwritten() {
        let dir = scratch("taken");
        let taken = dir.join(format!(".report.json.tmp-{}", std::process::id()));
        std::fs::write(&taken, "someone else's").expect("written");
        write_atomically(&dir.join("report.json"), b"new\n", "report").expect("written");
        assert_eq!(std::fs::read(&taken).expect("read"), b"someone else's");
        assert_eq!(
            std::fs::read(dir.join("report.json")).expect("read"),
            b"new\n"
        );
        done(&dir);
    }
}
