//! `cutctx-receipts` end to end: arcaeon's vectors and sample ledger, the receipt life cycle,
//! hostile rows, the ledger file (torn writes, concurrent writers, with real processes) and
//! receipts for cutctx's own compactions.
//!
//! The conformance data lives in the shared folder beside the project
//! (`../shared/conformance/receipts`, which CI always has); when it is absent those tests say
//! so and pass.

mod hostile;
mod interop;
mod ledger_file;
mod lifecycle;
mod processes;
mod sample;
mod support;
mod transcript;
mod vectors;
