//! Reading an input file: whole into memory, on two threads when it is large, each taking the
//! next piece of the file while pieces remain; or, for a large request, where it lies
//! ([`RequestFile`]), a window at a time. On a large request most of a whole read's time is
//! the copy out of the page cache and the first touch of each page of the buffer, and both
//! split cleanly by offset; read where it lies, the pages are never touched at all.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Below this size one thread reads the file: a second costs more than it saves.
const PARALLEL_BYTES: u64 = 4 << 20;

/// How much of the file one read takes: small enough that a thread that starts late, or is
/// held off its core for a while, still finds pieces left to read; large enough that taking
/// one costs nothing beside copying it.
const PIECE_BYTES: usize = 2 << 20;

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
    file: File,
    len: usize,
    stamp: Stamp,
    /// This opening's own number: a reader's window of one file is never taken for another's.
    id: u64,
}

/// What says whether a file changed: its identity, length and the times of its last change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
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
            file,
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
        let copied = out.copy_from(&self.file, range.start as u64, len)?;
        if copied == len {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, CHANGED))
        }
    }

    /// The whole file, as [`read_file`] reads it: for a request that is not read where it
    /// lies after all.
    ///
    /// # Errors
    ///
    /// Whatever reading fails with.
    pub fn read_whole(&self) -> io::Result<Vec<u8>> {
        read_from_len(&self.file, self.len)
    }

    /// Whether the file is the one opened, unchanged since.
    ///
    /// # Errors
    ///
    /// An error (of kind `Other`) saying that the file changed while it was read, or whatever
    /// reading its metadata fails with.
    pub fn unchanged(&self) -> io::Result<()> {
        if Stamp::of(&self.file.metadata()?) == self.stamp {
            Ok(())
        } else {
            Err(io::Error::other(CHANGED))
        }
    }
}

/// What [`RequestFile::unchanged`] says of a file that changed.
pub(crate) const CHANGED: &str = "the file changed while it was read";

/// The bytes of the file at `path`, as [`std::fs::read`] gives them.
///
/// A regular file of 4 MiB or more is read on two threads, in pieces of 2 MiB, each thread
/// taking the next piece left when it is done with one, then whatever the file gained
/// meanwhile is read after them, as a read to the end would; a file that shrinks while it is
/// read is an error (`UnexpectedEof`), as it would be for any reader of a file that changes
/// under it.
///
/// Pieces, not halves: a thread just started may wait for a core (on a 2-core machine, a
/// median of 0.7 ms and up to 3 ms, beside some 13 ms for a 48 MB read), and with halves the
/// thread that runs first then finishes its own and waits, the read often as slow as on one
/// thread. With pieces the thread that runs reads what the other has not begun. The second
/// reader is a job of the pool the caller works for, when it works for one (see
/// `cutctx::model::beside`).
///
/// ```
/// let path = std::env::temp_dir().join(format!("cutctx-input-doc-{}", std::process::id()));
/// std::fs::write(&path, b"{}")?;
/// assert_eq!(cutctx_ops::input::read_file(&path)?, b"{}");
/// std::fs::remove_file(&path)?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
///
/// Whatever opening or reading the file fails with.
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let len = match usize::try_from(meta.len()) {
        Ok(len) if meta.is_file() && meta.len() >= PARALLEL_BYTES && two => len,
        _ => {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            return Ok(bytes);
        }
    };
    read_from_len(&file, len)
}

/// The bytes of `file`, found `len` long: those `len` read in pieces on two threads, then
/// whatever the file gained meanwhile.
fn read_from_len(file: &File, len: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    let pieces = Mutex::new(bytes.chunks_mut(PIECE_BYTES).enumerate());
    let read = || read_pieces(file, &pieces);
    let (mine, theirs) = cutctx::model::beside::beside_one(read, read);
    mine.and(theirs.unwrap_or_else(|_| Err(io::Error::other("the reading thread was lost"))))?;
    let mut file = file;
    file.seek(SeekFrom::Start(len as u64))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

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

/// Reads the pieces of `file` that `pieces` hands out (the piece's index and its room in the
/// buffer) until none is left, or until this thread's read or another's has failed: a failed
/// read takes every piece left, so that the other thread stops at its next.
fn read_pieces<'a>(
    file: &File,
    pieces: &Mutex<impl Iterator<Item = (usize, &'a mut [u8])>>,
) -> io::Result<()> {
    loop {
        // Nothing panics holding the lock; were it poisoned, this thread stops, and the
        // result of the reader that panicked reports it.
        let next = pieces.lock().map_or(None, |mut pieces| pieces.next());
        let Some((index, room)) = next else {
            return Ok(());
        };
        if let Err(e) = file.read_exact_at(room, (index * PIECE_BYTES) as u64) {
            if let Ok(mut pieces) = pieces.lock() {
                pieces.by_ref().for_each(drop);
            }
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("cutctx-input-{name}-{}", std::process::id()));
        std::fs::write(&path, bytes).expect("a temporary file");
        path
    }

    #[test]
    fn large_and_small_files_read_as_they_are() {
        // Past the size that starts the second thread: pieces whole, a last one short, a last
        // one of a byte, each byte in its place (a piece read at another's offset shows).
        let bytes_of = |len: usize| -> Vec<u8> { (0..len).map(|i| (i * 31 % 251) as u8).collect() };
        let large = bytes_of(PARALLEL_BYTES as usize * 2 + 7);
        let whole = bytes_of(PIECE_BYTES * 3);
        let one_over = bytes_of(PIECE_BYTES * 3 + 1);
        for (name, bytes) in [
            ("large", large.as_slice()),
            ("whole-pieces", whole.as_slice()),
            ("one-over", one_over.as_slice()),
            ("small", b"{\"a\":1}".as_slice()),
            ("empty", b"".as_slice()),
        ] {
            let path = temp(name, bytes);
            let read = read_file(&path).expect("reads");
            std::fs::remove_file(&path).expect("removed");
            assert_eq!(read, bytes, "{name}");
        }
    }

    #[test]
    fn a_read_that_fails_takes_the_pieces_left() {
        // A file shorter than the room for it, as one that shrinks while it is read: the piece
        // past its end fails, and no piece is left for the other thread to read.
        let path = temp("short", &vec![7; PIECE_BYTES + 10]);
        let file = File::open(&path).expect("opens");
        let mut room = vec![0; PIECE_BYTES * 4];
        let pieces = Mutex::new(room.chunks_mut(PIECE_BYTES).enumerate());
        let read = read_pieces(&file, &pieces);
        std::fs::remove_file(&path).expect("removed");
        assert_eq!(
            read.expect_err("short").kind(),
            io::ErrorKind::UnexpectedEof
        );
        assert_eq!(
            pieces.lock().expect("not poisoned").next().map(|(i, _)| i),
            None
        );
        assert!(
            room[..PIECE_BYTES].iter().all(|&b| b == 7),
            "the first piece was read"
        );
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let path = std::env::temp_dir().join("cutctx-input-no-such-file");
        assert_eq!(
            read_file(&path).expect_err("missing").kind(),
            io::ErrorKind::NotFound
        );
    }
}
