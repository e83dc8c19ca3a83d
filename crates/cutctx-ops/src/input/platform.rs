//! What reading a file where it lies asks of the system: a read at an offset that any number of
//! threads make at once on one file ([`FileAt`]), and what says that a file changed since it was
//! opened ([`Stamp`]). Unix's own calls where there are some; elsewhere a portable fallback,
//! which moves the file's position for each read, one read of the file at a time, and knows a
//! file only by its length and times.

use std::fs::File;
use std::io;
#[cfg(any(not(unix), test))]
use std::sync::Mutex;

/// A file read at offsets, from any number of threads at once.
#[derive(Debug)]
pub(super) struct FileAt {
    file: File,
    /// Held, in the portable fallback, while a read moves the file's position and reads from
    /// there: two threads must not move the position under each other.
    #[cfg(any(not(unix), test))]
    position: Mutex<()>,
}

impl FileAt {
    /// `file`, to be read at offsets.
    pub(super) fn new(file: File) -> Self {
        Self {
            file,
            #[cfg(any(not(unix), test))]
            position: Mutex::new(()),
        }
    }

    /// The file itself, for what is not a read at an offset (its metadata, a read or copy from
    /// a position of its own).
    pub(super) const fn file(&self) -> &File {
        &self.file
    }

    /// Fills `room` with the file's bytes from `offset`, its position left alone.
    ///
    /// # Errors
    ///
    /// Whatever reading fails with; `UnexpectedEof` when the file ends first.
    #[cfg(unix)]
    pub(super) fn read_exact_at(&self, room: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(&self.file, room, offset)
    }

    /// Fills `room` with the file's bytes from `offset` (see [`FileAt::read_exact_seeking`]).
    ///
    /// # Errors
    ///
    /// Whatever seeking or reading fails with; `UnexpectedEof` when the file ends first.
    #[cfg(not(unix))]
    pub(super) fn read_exact_at(&self, room: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_seeking(room, offset)
    }

    /// The portable fallback of [`FileAt::read_exact_at`]: the file's position moved to
    /// `offset` and `room` read from there, one such read of the file at a time.
    ///
    /// # Errors
    ///
    /// Whatever seeking or reading fails with; `UnexpectedEof` when the file ends first.
    #[cfg(any(not(unix), test))]
    fn read_exact_seeking(&self, room: &mut [u8], offset: u64) -> io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        // Nothing panics while it is held; a poisoned lock still keeps reads apart.
        let _turn = self
            .position
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut file = &self.file;
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(room)
    }
}

/// What says whether a file changed: its identity, length and the times of its last change.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

#[cfg(unix)]
impl Stamp {
    /// The stamp of the file `meta` describes.
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// What says whether a file changed, where the system gives no portable identity: its length
/// and the times of its last change and of its making, when the system keeps them.
#[cfg(not(unix))]
pub(super) type Stamp = PortableStamp;

/// A file's length and the times of its last change and of its making: the stamp of the
/// portable fallback.
#[cfg(any(not(unix), test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PortableStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    created: Option<std::time::SystemTime>,
}

#[cfg(any(not(unix), test))]
impl PortableStamp {
    /// The stamp of the file `meta` describes.
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            created: meta.created().ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::{FileAt, PortableStamp, Stamp};

    /// The fallback reads what the system's read at an offset reads, from any number of
    /// threads at once, and its stamp sees a file grow, as the system's does.
    #[test]
    fn the_portable_fallback_reads_and_stamps_as_the_system_does() {
        let path = std::env::temp_dir().join(format!(
            "cutctx-input-platform-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let bytes: Vec<u8> = (0..100_000).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("a temporary file");
        let file = FileAt::new(std::fs::File::open(&path).expect("opens"));
        std::thread::scope(|scope| {
            for t in 0..4_u64 {
                let (file, bytes) = (&file, &bytes);
                scope.spawn(move || {
                    for k in 0..50_u64 {
                        let offset = (t * 7_919 + k * 1_511) % 99_000;
                        let (mut ours, mut theirs) = ([0_u8; 700], [0_u8; 700]);
                        file.read_exact_seeking(&mut ours, offset).expect("reads");
                        file.read_exact_at(&mut theirs, offset).expect("reads");
                        let at = usize::try_from(offset).expect("small");
                        assert!(ours == theirs && ours[..] == bytes[at..at + 700]);
                    }
                });
            }
        });
        let mut room = [0_u8; 10];
        let past = file
            .read_exact_seeking(&mut room, 99_995)
            .expect_err("short");
        assert_eq!(past.kind(), std::io::ErrorKind::UnexpectedEof);
        let meta = || file.file().metadata().expect("metadata");
        let (before, portable) = (Stamp::of(&meta()), PortableStamp::of(&meta()));
        assert_eq!(
            (Stamp::of(&meta()), PortableStamp::of(&meta())),
            (before, portable)
        );
        let mut grown = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("opens");
        grown.write_all(b"more").expect("grows");
        assert_ne!(Stamp::of(&meta()), before);
        assert_ne!(PortableStamp::of(&meta()), portable);
        std::fs::remove_file(&path).expect("removed");
    }
}
