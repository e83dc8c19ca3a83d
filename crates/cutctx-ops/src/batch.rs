//! Many provider requests compacted on every core, each exactly as the compaction of one
//! provider request compacts it ([`formats::compact_detailed`](crate::formats::compact_detailed)),
//! for every front end: a JSONL file of any size streamed line by line ([`run`], and
//! [`run_command`] as the binary runs it), or requests held in memory ([`compact_all`]). One
//! output per input, in the input's order; a request that fits comes back byte for byte, and
//! one that fails becomes `null` (its error, never with content, to an errors file), so that
//! output N always answers input N.
//!
//! * `pipeline.rs`: the stream, a bounded pipeline of a reader, workers and a writer;
//! * `in_memory.rs`: the requests of a caller that holds them, on the same workers' terms;
//! * `line.rs`: one request through the compaction, behind a guard that makes a defect the
//!   request's own failure;
//! * `input.rs`: the input opened, gzip or zstd decompressed as it is read;
//! * `command.rs`: the run with standard output, a progress bar and the summary.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use crate::formats::FormatOptions;

mod command;
mod in_memory;
mod input;
mod line;
mod pipeline;

pub use command::run_command;
pub use in_memory::compact_all;
pub use input::{decompressing, open_input};
pub use pipeline::{Io, run};

/// The exit status when the run completed but at least one line failed (see `--errors`).
pub const SOME_LINES_FAILED_STATUS: u8 = 1;

/// The options of `cutctx batch`.
#[derive(Debug, Clone)]
pub struct BatchOptions {
    /// The JSONL file of requests (`.gz` and `.zst` read directly), or `-` for standard input.
    pub input: PathBuf,
    /// The format, budget and policy, as `cutctx compact --format` takes them.
    pub format: FormatOptions,
    /// A JSON object {group_id: summary} fulfilling every line's summarization requests.
    pub summaries: Option<PathBuf>,
    /// How many lines are compacted at once (default: every core).
    pub jobs: Option<NonZeroUsize>,
    /// Write one JSON line per failed input line to this file: `{"code", "details", "line",
    /// "message"}` (replaced atomically at the end of the run).
    pub errors: Option<PathBuf>,
    /// Append one receipt per compacted line (not for unchanged or failed ones) to this ledger.
    pub ledger: Option<PathBuf>,
    /// The compactor the receipts name (default `cutctx/<version>`).
    pub compactor: Option<String>,
}

/// What a run did, line by line, as the summary reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Lines read.
    pub lines: u64,
    /// Lines whose request was compacted.
    pub compacted: u64,
    /// Lines whose request already fitted, written back as they were.
    pub unchanged: u64,
    /// Lines that failed, written as `null`.
    pub failed: u64,
    /// Drops `--repair` made, over every line that did not fail.
    pub repairs: u64,
    /// The whole prompts of the requests that did not fail, before, in estimated tokens:
    /// tools, system, messages and the output reserve, as `cutctx estimate` totals them.
    pub tokens_before: u64,
    /// Their whole prompts after, counted the same way.
    pub tokens_after: u64,
}

impl Summary {
    /// One line for people: `N lines: C compacted, U unchanged, F failed; R repairs; tokens B
    /// -> A`.
    ///
    /// ```
    /// let s = cutctx_ops::batch::Summary { lines: 3, compacted: 1, unchanged: 1, failed: 1,
    ///     repairs: 2, tokens_before: 900, tokens_after: 400 };
    /// assert_eq!(s.text(), "3 lines: 1 compacted, 1 unchanged, 1 failed; 2 repairs; tokens 900 -> 400");
    /// ```
    #[must_use]
    pub fn text(&self) -> String {
        format!(
            "{} lines: {} compacted, {} unchanged, {} failed; {} repairs; tokens {} -> {}",
            self.lines,
            self.compacted,
            self.unchanged,
            self.failed,
            self.repairs,
            self.tokens_before,
            self.tokens_after
        )
    }

    /// The same as canonical JSON (keys sorted), for programs.
    #[must_use]
    pub fn json(&self) -> String {
        cutctx::model::canonical::canonical_json_value(&serde_json::json!({
            "lines": self.lines,
            "compacted": self.compacted,
            "unchanged": self.unchanged,
            "failed": self.failed,
            "repairs": self.repairs,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
        }))
    }
}

/// How many chunks of lines may be in flight at once (read and not yet written) for `jobs`
/// workers.
#[must_use]
pub fn window(jobs: NonZeroUsize) -> usize {
    jobs.get().saturating_mul(4)
}

/// The most lines in one chunk.
pub const CHUNK_LINES: usize = 32;

/// A chunk takes no further line once its lines hold this many bytes (a longer line still
/// makes a chunk of its own).
pub const CHUNK_BYTES: usize = 1 << 20;

/// How a run ended when it did not fail as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every line was read and answered.
    Complete(Summary),
    /// The output's reader closed the pipe; the run stopped there. The summary counts the lines
    /// handed to the output, which writes a run of lines at once.
    ReaderGone(Summary),
}

#[cfg(test)]
mod tests {
    use super::line::guarded;

    #[test]
    fn a_panic_while_compacting_a_line_fails_that_line_only() {
        let failed =
            guarded::<()>(|| panic!("a defect")).expect_err("the panic is the line's failure");
        assert_eq!(failed.code, crate::error::INTERNAL_ERROR);
    }
}
