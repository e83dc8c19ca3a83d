//! Reading an input file: whole into memory ([`read_file`]), on two threads when it is large,
//! each taking the next piece of the file while pieces remain; or, for a large request, where
//! it lies ([`RequestFile`], in `request_file.rs`), a window at a time. On a large request most
//! of a whole read's time is the copy out of the page cache and the first touch of each page
//! of the buffer, and both split cleanly by offset; read where it lies, the pages are never
//! touched at all. What this asks of the system (a read at an offset, what says a file
//! changed) is in `platform.rs`, with a portable fallback where Unix's calls are not to be had.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;

mod platform;
mod request_file;

pub(crate) use request_file::CHANGED;
pub use request_file::RequestFile;
#[cfg(test)]
pub(crate) use request_file::temp_request_file;

use platform::FileAt;

/// Below this size one thread reads the file: a second costs more than it saves.
const PARALLEL_BYTES: u64 = 4 << 20;

/// How much of the file one read takes: small enough that a thread that starts late, or is
/// held off its core for a while, still finds pieces left to read; large enough that taking
/// one costs nothing beside copying it.
const PIECE_BYTES: usize = 2 << 20;

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
    read_from_len(&FileAt::new(file), len)
}

/// The bytes of `file`, found `len` long: those `len` read in pieces on two threads, then
/// whatever the file gained meanwhile.
fn read_from_len(file: &FileAt, len: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; len];
    let pieces = Mutex::new(bytes.chunks_mut(PIECE_BYTES).enumerate());
    let read = || read_pieces(file, &pieces);
    let (mine, theirs) = cutctx::model::beside::beside_one(read, read);
    mine.and(theirs.unwrap_or_else(|_| Err(io::Error::other("the reading thread was lost"))))?;
    let mut file = file.file();
    file.seek(SeekFrom::Start(len as u64))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the pieces of `file` that `pieces` hands out (the piece's index and its room in the
/// buffer) until none is left, or until this thread's read or another's has failed: a failed
/// read takes every piece left, so that the other thread stops at its next.
fn read_pieces<'a>(
    file: &FileAt,
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
        let file = FileAt::new(File::open(&path).expect("opens"));
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
