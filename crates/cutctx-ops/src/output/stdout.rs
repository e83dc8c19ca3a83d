//! Standard output written through a buffer of its own, straight to the descriptor ([`Stdout`]),
//! and ranges of a file written into an output by the kernel where the system allows it
//! ([`CopyFrom`]). Where the descriptor cannot be had (it is closed, or the system has no way
//! to duplicate it), the usual `Stdout` is written instead.

use std::io::Write;

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
        match stdout_file(&stdout) {
            Ok(file) => Self(StdoutTarget::File(std::io::BufWriter::with_capacity(
                STDOUT_BUFFER_BYTES,
                file,
            ))),
            Err(_) => Self(StdoutTarget::Locked(stdout.lock())),
        }
    }
}

/// Standard output's descriptor, duplicated, as a file.
///
/// # Errors
///
/// Whatever duplicating it fails with (it is closed, say).
#[cfg(unix)]
fn stdout_file(stdout: &std::io::Stdout) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    Ok(std::fs::File::from(stdout.as_fd().try_clone_to_owned()?))
}

/// Standard output's handle, duplicated, as a file.
///
/// # Errors
///
/// Whatever duplicating it fails with (it is closed, say).
#[cfg(windows)]
fn stdout_file(stdout: &std::io::Stdout) -> std::io::Result<std::fs::File> {
    use std::os::windows::io::AsHandle;
    Ok(std::fs::File::from(
        stdout.as_handle().try_clone_to_owned()?,
    ))
}

/// Where the system has no descriptor to duplicate: always an error, so that the usual
/// `Stdout` is written.
///
/// # Errors
///
/// Always, `Unsupported`.
#[cfg(not(any(unix, windows)))]
fn stdout_file(_stdout: &std::io::Stdout) -> std::io::Result<std::fs::File> {
    Err(std::io::ErrorKind::Unsupported.into())
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
