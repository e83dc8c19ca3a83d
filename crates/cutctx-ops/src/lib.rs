//! The operations every cutctx front end runs: plan, compact and apply a request document,
//! compact or estimate a provider request, step a session, replay a run, and batch many
//! requests. The `cutctx` binary, the Python package and any later front end call these and
//! nothing below them, so an output is byte for byte the same whichever front end made it.
//!
//! Each operation takes the text of its documents and plain option structs, and returns the
//! exact bytes to print, or an [`OpsError`] with the stable code, exit status and details every
//! front end reports. `plan`, `compact` and `apply` touch no files or streams; [`input`] reads
//! a large request where it lies in its file, [`ledger`] reads and appends the ledger file it
//! is given, [`summarizer`] starts the `summarize_with` command when asked to, and [`output`]
//! writes whole files and output streams so that a failure is never quiet.
//!
//! One job per module: the request document's operations ([`plan()`], [`compact()`],
//! [`apply()`], each in its own file, over [`request`], the document read, and
//! [`Compacted`], the compaction done and its output written); a provider request's
//! compaction and estimate ([`formats`]); many of them at once ([`batch`]); sessions
//! ([`session`]), receipts and the ledger ([`ledger`]); and the error every front end reports
//! ([`OpsError`]).
//!
//! ```
//! let request = r#"{"budget":{"max_tokens":100},"policy":{"name":"drop_oldest"},
//!     "transcript":[{"turn_id":"u1","role":"user","content":"hi","token_estimate":2}]}"#;
//! let plan = cutctx_ops::plan(request)?;
//! assert!(plan.starts_with('{') && plan.ends_with("}\n"));
//! # Ok::<(), cutctx_ops::OpsError>(())
//! ```
#![forbid(unsafe_code)]

mod apply;
pub mod batch;
mod compact;
mod compacted;
mod compacted_file;
mod error;
pub mod formats;
pub mod input;
pub mod ledger;
pub mod output;
mod plan;
mod plan_head;
pub mod provider;
pub mod replay;
pub mod request;
mod request_text;
pub mod session;
pub mod summarizer;
mod svg;
#[cfg(test)]
mod tests;
mod text;
mod two_threads;

// What a front end names of the layers below, so that it depends on this crate alone.
pub use cutctx::formats::{Format, ReasoningMode};
pub use cutctx::model::details;
pub use error::{INPUT_ERROR, INTERNAL_ERROR, OUTPUT_ERROR, OpsError, USAGE_ERROR, parse_json};

pub use apply::{apply, apply_file, apply_text};
pub use compact::{compact, compact_file, compact_reader, compact_retaining, compact_text};
pub use compacted::Compacted;
pub use compacted_file::CompactedFile;
pub use plan::{plan, plan_file};
