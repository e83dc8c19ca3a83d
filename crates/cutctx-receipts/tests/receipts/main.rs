//! `cutctx-receipts` end to end: arcaeon's vectors and sample ledger, the receipt life cycle,
//! hostile rows and receipts for cutctx's own compactions, all over text and bytes (the ledger
//! file is `cutctx-ledger`'s test binary).
//!
//! The conformance data lives in the shared folder beside the project
//! (`../shared/conformance/receipts`, which CI always has); when it is absent those tests say
//! so and pass.

mod hostile;
mod lifecycle;
mod sample;
mod support;
mod transcript;
mod vectors;
