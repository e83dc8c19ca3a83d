//! The `cutctx` binary end to end: what it prints, how it exits, and how it fails.
//!
//! Every test starts the real binary (`CARGO_BIN_EXE_cutctx`) on files written to a scratch
//! folder under `CARGO_TARGET_TMPDIR`, and holds it to the contract in
//! `../shared/spec/CLI.md`: one line of canonical JSON on success; nothing on standard output,
//! the contract's exit status and, with `--error-format json`, one JSON object as the last line
//! of standard error on failure, whose details never carry turn content.

mod failures;
mod lost;
mod outputs;
mod success;
mod support;
