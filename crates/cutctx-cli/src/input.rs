//! Reading a whole input file into memory: on two threads when it is large, each copying its
//! half. On a large request most of a read's time is the copy out of the page cache and the
//! first touch of each page of the buffer, and both split cleanly by offset.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Below this size one thread reads the file: a second costs more than it saves.
const PARALLEL_BYTES: u64 = 4 << 20;

/// The bytes of the file at `path`, as [`std::fs::read`] gives them.
///
/// A regular file of 4 MiB or more is read in two halves at once, then whatever the file
/// gained meanwhile is read after them, as a read to the end would; a file that shrinks while
/// it is read is an error (`UnexpectedEof`), as it would be for any reader of a file that
/// changes under it.
///
/// ```
/// let path = std::env::temp_dir().join(format!("cutctx-input-doc-{}", std::process::id()));
/// std::fs::write(&path, b"{}")?;
/// assert_eq!(cutctx_cli::input::read_file(&path)?, b"{}");
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
    let mut bytes = vec![0; len];
    let half = len / 2;
    let (front, back) = bytes.split_at_mut(half);
    std::thread::scope(|scope| {
        let file = &file;
        let reader = scope.spawn(move || file.read_exact_at(back, half as u64));
        let first = file.read_exact_at(front, 0);
        let second = reader
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the reading thread was lost")));
        first.and(second)
    })?;
    file.seek(SeekFrom::Start(meta.len()))?;
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
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
        // Past the size that starts the second thread, with a length that does not halve.
        let large: Vec<u8> = (0..(PARALLEL_BYTES as usize) * 2 + 7)
            .map(|i| (i * 31 % 251) as u8)
            .collect();
        for (name, bytes) in [
            ("large", large.as_slice()),
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
    fn a_missing_file_is_an_error() {
        let path = std::env::temp_dir().join("cutctx-input-no-such-file");
        assert_eq!(
            read_file(&path).expect_err("missing").kind(),
            io::ErrorKind::NotFound
        );
    }
}
