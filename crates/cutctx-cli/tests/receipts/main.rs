//! Receipts and the ledger through the CLI: `compact --ledger`, `receipt seal`, `ledger verify`
//! and `ledger head`, in-process through `src/ledger.rs` and, once the subcommands are wired
//! into the binary, end to end through `CARGO_BIN_EXE_cutctx` (real processes, concurrent
//! writers included).
//!
//! `src/ledger.rs` is compiled into this test crate directly, so these tests run whether or not
//! `lib.rs` declares the module yet; it reaches the library through the names imported here.
//! The binary tests check first whether the binary knows `ledger`, and say so and pass when it
//! does not.

#[allow(
    unreachable_pub,
    dead_code,
    reason = "the CLI module is compiled into this test crate; not every item is used here"
)]
#[path = "../../src/ledger.rs"]
mod ledger;

use cutctx_cli::{CliError, request};

mod binary;
mod in_process;
mod support;
