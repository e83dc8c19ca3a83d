//! A whole file replaced atomically ([`AtomicFile`], [`write_atomically`]): its content written
//! to a temporary file beside it, synced and renamed over it, so that the file is either as it
//! was or entirely the new content, and no temporary file is left behind. A path that is not a
//! regular file (a pipe, a terminal) is written through, not replaced.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::output_error;
use crate::OpsError;

/// How many temporary names a file write tries before giving up: another process with the
/// same id (in another container, or a leftover of a crashed run) may hold the first.
const TEMPORARY_NAMES: u32 = 16;

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
/// it fail halfway. One writer, [`AtomicFile`], for every file an operation replaces.
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
    use crate::OUTPUT_ERROR;

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

    #[cfg(unix)]
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
