//! The catalogue of hostile inputs: every case under `tests/bad-input/` run through the built
//! `cutctx` binary in both error formats, plus a guard that input cost grows linearly.
//!
//! A case is a folder holding `case.json` (the command, the expected code and exit status, and
//! what must not happen) beside its input files; `tests/bad-input/README.md` describes the
//! format. Every case must fail with its exact code and status, print nothing on standard
//! output (a `ledger verify` verdict excepted), and never echo the content planted in its
//! inputs. A case marked `xfail` documents a known bug: it is reported, not failed on, and it
//! fails the suite once it passes, so that the mark is removed with the fix.
//!
//! The tests in this binary run one at a time ([`serial`]): the bounds test measures time, and
//! the catalogue must not disturb it.

mod bounds;
mod case;
mod cases;
mod process;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// The text planted in every content field and metadata value of the catalogue's inputs. It
/// must never reach standard error, in either error format.
pub(crate) const SECRET: &str = "SECRET-TURN-CONTENT-7f3a";

/// The folder of cases: `tests/bad-input/` at the workspace root.
pub(crate) fn catalogue_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/bad-input")
}

/// A scratch folder for this binary, under Cargo's per-target temporary directory.
pub(crate) fn scratch_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("catalogue")
}

/// Holds the other tests of this binary off while one runs.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
