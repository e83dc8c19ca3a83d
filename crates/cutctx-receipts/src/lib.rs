//! Compaction receipts and the hash-chained ledger (work in progress).
#![forbid(unsafe_code)]
