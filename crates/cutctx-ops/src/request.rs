//! The request document `plan`, `compact` and `apply` take (a transcript, a budget, a policy
//! and summaries), read into a [`Request`] for any front end.
//!
//! There are several readings, and one result: the strict pass reads the document whole
//! (unknown keys refused, the policy built by `cutctx-policies`' registry) and is the source of
//! every error; a large text or a reader is read in pieces, its turns built on every core
//! ([`parse`], [`parse_reader`]); and a request can be read with each turn's content left where
//! it lies, in its text or its file ([`parse_leaving`], [`parse_leaving_file`]). Each quick
//! reading gives exactly what the strict pass gives, and leaves anything unusual to it.
//!
//! * `wire.rs`: the document's wire form, the strict pass and the checks in the reference's
//!   order; `left.rs`: where a content was left ([`Left`], [`Leaving`]);
//! * `record.rs` reads the usual turn record quickly, `scan.rs` finds the array and its
//!   elements, `builder.rs` builds the turns of a run of elements as they are read;
//! * `split.rs` reads a run of elements on several threads from cuts at a guess, the one driver
//!   of every reading in parts; `pieces.rs` reads a text or a reader a piece at a time,
//!   `leaving.rs` a text held whole with its contents left, `leaving_file.rs` a file where it
//!   lies.

use std::collections::BTreeMap;

use cutctx::{CompactionBudget, CompactionPolicy, Transcript};

use crate::error::OpsError;

mod builder;
mod leaving;
mod leaving_file;
mod left;
mod pieces;
mod record;
mod scan;
mod split;
#[cfg(test)]
mod tests;
mod wire;

pub use leaving::parse_leaving;
pub use leaving_file::parse_leaving_file;
#[cfg(test)]
pub(crate) use leaving_file::parse_leaving_file_in;
pub use left::{Leaving, Left};
pub use pieces::parse_reader;

/// A parsed, validated request.
pub struct Request {
    /// The transcript.
    pub transcript: Transcript,
    /// The budget.
    pub budget: CompactionBudget,
    /// The policy.
    pub policy: Box<dyn CompactionPolicy>,
    /// The supplied summaries, by group id.
    pub summaries: BTreeMap<String, String>,
}

/// Parses and validates a request document: a large one in pieces, its turns built on every
/// core, any other (and any the pieces find amiss) in one strict pass.
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON, `VALIDATION_ERROR` for a malformed request.
pub fn parse(text: &str) -> Result<Request, OpsError> {
    match pieces::read_large(text) {
        Some((turns, wire)) => wire::finish(Transcript::with_packed_ids(turns), wire),
        None => wire::parse_whole(text),
    }
}
