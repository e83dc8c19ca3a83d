//! The cutctx receipts ledger on disk: appending rows under an advisory lock with `fsync`,
//! reading, verifying and pinning a ledger file, and the system clock.
//!
//! Everything about *what* a ledger holds (the chain rule, receipts, the verification walk,
//! pins) is the pure `cutctx-receipts`, which works on text and bytes. This crate is the thin
//! impure edge around it: it opens files, takes the lock arcaeon takes, sleeps while waiting
//! for it, syncs, and reads the system clock. Errors are `cutctx_receipts::ReceiptError`, with
//! the same codes (`LEDGER_IO_ERROR`, `LEDGER_LOCK_TIMEOUT`, `LEDGER_WRITE_LOST`, ...).
//!
//! ```
//! use cutctx_ledger::{Ledger, ledger::verify_file};
//! use cutctx_receipts::{CompactionReceipt, FixedClock, Item, Labels};
//!
//! let dir = std::env::temp_dir().join(format!("cutctx-ledger-doc-{}", std::process::id()));
//! let ledger = Ledger::new(dir.join("receipts.jsonl"));
//! let clock = FixedClock::new("2026-08-15T00:00:00Z");
//! let mut receipt = CompactionReceipt::open(&[Item::Str("a".into())], &clock)?;
//! receipt.record_kept(&[])?;
//! let appended = ledger.seal(&mut receipt, &Labels::new("me", "drop-all"), &clock)?;
//! assert!(receipt.is_sealed());
//! assert_eq!(ledger.last_chain()?, appended.chain);
//! assert_eq!(verify_file(ledger.path(), true).ok, Some(true));
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), cutctx_receipts::ReceiptError>(())
//! ```
#![forbid(unsafe_code)]

pub mod clock;
pub mod ledger;

pub use clock::SystemClock;
pub use ledger::{Appended, Ledger};
