//! Receipts and the ledger through the CLI: `compact --ledger`, `receipt seal`, `ledger verify`
//! and `ledger head`, in-process through `cutctx_ops::ledger` and, once the subcommands are wired
//! into the binary, end to end through `CARGO_BIN_EXE_cutctx` (real processes, concurrent
//! writers included).
//!
//! The binary tests check first whether the binary knows `ledger`, and say so and pass when it
//! does not.

use cutctx_ops::ledger;

mod binary;
mod in_process;
mod support;
