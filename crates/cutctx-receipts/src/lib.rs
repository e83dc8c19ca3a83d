//! Compaction receipts and a tamper-evident, hash-chained JSONL ledger, byte-compatible with
//! arcaeon 0.10.0 (`arcaeon.prove.compact` and `arcaeon.record.ledger`).
//!
//! A **receipt** records what a compaction did to its content: digests of every item before
//! (`pre`) and after (`post`), the multiset of dropped items (by digest only, never content),
//! what the compactor introduced, who compacted and how. A **ledger** chains receipts (and any
//! other rows) so that no row can be edited, deleted or reordered unseen; a **head pin** held
//! elsewhere closes the truncation gap. The format is arcaeon's, so receipts written here pass
//! arcaeon's verifier, and ledgers arcaeon wrote verify here with the same verdicts. The spec
//! is `../shared/spec/RECEIPTS.md`.
//!
//! ```text
//! json ─ digest ─ manifest ─ receipt ─ verify           pure: digests, rows, verdicts
//!          └─ transcript (cutctx turns as items)
//! chain ─ pin ─ audit                                   pure: the walk over a ledger's text
//! clock                                                 injectable time
//! ```
//!
//! The crate is pure: no file, clock or environment. The ledger *file* (append under a lock
//! with `fsync`, read, head) and the system clock are `cutctx-ledger`, a thin layer above this
//! one; [`chain`] gives it what to write ([`chain::stamped`], [`chain::chained`]) and how to
//! read what is there.
//!
//! # Example
//!
//! ```
//! use cutctx_receipts::{CompactionReceipt, FixedClock, Item, Labels, verify_receipt};
//! use cutctx_receipts::digest::digest_content;
//! use cutctx_receipts::json::Value;
//!
//! let clock = FixedClock::new("2026-08-15T00:00:00Z");
//! let pre = vec![Item::Str("the quick brown fox".into()), Item::Bytes(b"\x00\x01binary".to_vec())];
//! let post = vec![Item::Str("the quick brown fox".into()), Item::Str("summary".into())];
//! let mut receipt = CompactionReceipt::open(&pre, &clock)?;
//! receipt.record_kept(&post)?;
//! let row = receipt.seal(&Labels::new("summarizer-v2", "llm-summary"), &clock)?;
//!
//! let (pre_d, post_d) = (digest_content(&pre)?, digest_content(&post)?);
//! let verdict = verify_receipt(&Value::Object(row), Some(&pre_d), Some(&post_d));
//! assert!(verdict.ok);
//! assert_eq!(verdict.verified_scope, "full");
//! # Ok::<(), cutctx_receipts::ReceiptError>(())
//! ```
//!
//! Verifying a ledger's text is [`chain::verify_text`] (arcaeon's verdict) or [`audit_text`]
//! (chain, every receipt, content and pin, with every failure listed).
#![forbid(unsafe_code)]

pub mod audit;
pub mod chain;
pub mod clock;
pub mod content;
pub mod digest;
mod error;
pub mod json;
pub mod manifest;
pub mod pin;
pub mod pyrepr;
pub mod receipt;
pub mod transcript;
pub mod verify;

pub use audit::{Audit, AuditOptions, Failure, audit_text};
pub use chain::{Break, BreakKind, FileVerdict};
pub use clock::{Clock, FixedClock, SteppingClock};
pub use content::SideContent;
pub use digest::{ContentDigest, Item, ItemDigest};
pub use error::ReceiptError;
pub use pin::{Head, Pin, PinStatus, PinVerdict};
pub use receipt::{CompactionReceipt, Labels, Schema};
pub use transcript::receipt_for_compaction;
pub use verify::{ContentCheck, ReceiptVerdict, verify_receipt};
