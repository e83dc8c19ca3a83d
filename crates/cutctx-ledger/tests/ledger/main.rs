//! `cutctx-ledger` end to end: the ledger file in one process (appending, healing a torn line,
//! the tail scan, declared breaks, the lock, head pins), real processes (concurrent writers,
//! crashes mid-write), receipts sealed into a file, and the ledger `scripts/arcaeon-check.sh`
//! holds to arcaeon's verifier.
//!
//! The conformance data lives in the shared folder beside the project
//! (`../shared/conformance/receipts`, which CI always has); when it is absent those tests say
//! so and pass.

mod interop;
mod ledger_file;
mod processes;
mod receipts;
mod support;
