//! A large request's file opened to be read where it lies ([`RequestFile`]): a range at a
//! time, at its offset, by whichever thread needs it, and checked unchanged since it was
//! opened before the output that copies from it is written.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::platform::{FileAt, Stamp};

/// The smallest request read where it lies: below it, holding the text costs little.
const WHERE_IT_LIES_FROM_BYTES: u64 = 4 << 20;

/// A regular file holding a request, opened to be read where it lies: a range at a time, at
/// its offset, into a buffer the reader keeps (`cutctx::request::parse_leaving_file` and the
/// view's writer), instead of whole into memory. Each page of a buffer holding a whole
/// request is touched for the first time when the request is copied into it, and on many
/// machines that first touch costs more than the copy; a few buffers of a window each are
/// touched once and read from the caches.
///
/// A file read twice must not change in between: what [`RequestFile::open`] found (the
/// length, the times of the last change, the file itself) is checked again by
/// [`RequestFile::unchanged`], which the writer calls before the output's first byte and
/// before the view's last part.
///
/// ```
/// use cutctx_ops::input::RequestFile;
/// let path = std::env::temp_dir().join(format!("cutctx-request-file-doc-{}", std::process::id()));
/// std::fs::write(&path, vec![b' '; 5 << 20])?;
/// let file = RequestFile::open(&path)?.expect("large enough to read where it lies");
/// let mut room = [0u8; 3];
/// file.read_at(&mut room, 10)?;
/// assert_eq!((file.len(), &room), (5 << 20, b"   "));
/// file.unchanged()?;
/// std::fs::write(&path, b"{}")?;
/// assert!(file.unchanged().is_err());
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct RequestFile {
    file: FileAt,
    len: usize,
    stamp: Stamp,
    /// This opening's own number: a reader's window of one file is never taken for another's.
    id: u64,
}

impl RequestFile {
    /// The file at `path`, when it is a regular file of at least 4 MiB whose offsets fit 32
    /// bits (as the offsets of the contents left in it do); `None` for any other, to be read
    /// whole.
    ///
    /// # Errors
    ///
    /// Whatever opening the file or reading its metadata fails with.
    pub fn open(path: &Path) -> io::Result<Option<Self>> {
        Self::open_from(path, WHERE_IT_LIES_FROM_BYTES)
    }

    /// [`RequestFile::open`], for a file of at least `least` bytes.
    pub(crate) fn open_from(path: &Path, least: u64) -> io::Result<Option<Self>> {
        static OPENED: AtomicU64 = AtomicU64::new(0);
        let file = File::open(path)?;
        let meta = file.metadata()?;
        let fits = u32::try_from(meta.len()).is_ok();
        if !meta.is_file() || meta.len() < least || !fits {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(meta.len()) else {
            return Ok(None);
        };
        Ok(Some(Self {
            file: FileAt::new(file),
            len,
            stamp: Stamp::of(&meta),
            id: OPENED.fetch_add(1, Ordering::Relaxed),
        }))
    }

    /// The file's length when it was opened.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the file was empty when it was opened (never, for a file [`RequestFile::open`]
    /// gives).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// This opening's own number.
    pub(crate) const fn id(&self) -> u64 {
        self.id
    }

    /// Fills `room` with the file's bytes from `offset`.
    ///
    /// # Errors
    ///
    /// Whatever reading fails with; `UnexpectedEof` when the file ends first.
    pub fn read_at(&self, room: &mut [u8], offset: usize) -> io::Result<()> {
        self.file.read_exact_at(room, offset as u64)
    }

    /// Writes the bytes at `range` into `out` straight from the file (see
    /// [`crate::output::CopyFrom`]).
    ///
    /// # Errors
    ///
    /// An error of kind `UnexpectedEof` saying that the file changed when it ends before
    /// `range` does; whatever copying fails with.
    pub(crate) fn copy_to(
        &self,
        range: std::ops::Range<usize>,
        out: &mut impl crate::output::CopyFrom,
    ) -> io::Result<()> {
        let len = range.len() as u64;
        let copied = out.copy_from(self.file.file(), range.start as u64, len)?;
        if copied == len {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, CHANGED))
        }
    }

    /// The whole file, as [`read_file`](super::read_file) reads it: for a request that is not
    /// read where it lies after all.
    ///
    /// # Errors
    ///
    /// Whatever reading fails with.
    pub fn read_whole(&self) -> io::Result<Vec<u8>> {
        super::read_from_len(&self.file, self.len)
    }

    /// Whether the file is the one opened, unchanged since.
    ///
    /// # Errors
    ///
    /// An error (of kind `Other`) saying that the file changed while it was read, or whatever
    /// reading its metadata fails with.
    pub fn unchanged(&self) -> io::Result<()> {
        if Stamp::of(&self.file.file().metadata()?) == self.stamp {
            Ok(())
        } else {
            Err(io::Error::other(CHANGED))
        }
    }
}

/// What [`RequestFile::unchanged`] says of a file that changed.
pub(crate) const CHANGED: &str = "the file changed while it was read";

/// `bytes` in a temporary file named for `name` (and for the test thread writing it), opened
/// to be read where it lies whatever its size: for the tests of every reader of such a file.
#[cfg(test)]
pub(crate) fn temp_request_file(name: &str, bytes: &[u8]) -> (std::path::PathBuf, RequestFile) {
    let path = std::env::temp_dir().join(format!(
        "cutctx-request-file-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&path, bytes).expect("a temporary file");
    let file = RequestFile::open_from(&path, 0)
        .expect("opens")
        .and_then(|file| (file.len() == bytes.len()).then_some(file))
        .expect("a regular file, as written");
    (path, file)
}
