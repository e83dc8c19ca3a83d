//! The `cutctx` command line.
#![forbid(unsafe_code)]
fn main() {}
