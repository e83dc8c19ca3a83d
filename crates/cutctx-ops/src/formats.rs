//! A provider request compacted, or estimated, in its own format, for every front end: an
//! OpenAI Chat Completions request (or its `messages` array), an OpenAI Responses request (or
//! its `input` list) or an Anthropic Messages request (or its `messages` array) in, the
//! compacted request out in the same format and shape. A request that fits comes back byte for
//! byte; the output is handed over only once everything that can fail but writing it has been
//! checked.
//!
//! Summaries come from a summaries document (a JSON object `{group_id: text}`), from a
//! `summarize_with` command run once per summarization request (see
//! [`CommandSummarizer`](crate::summarizer::CommandSummarizer)), or, for a front end with its
//! own model, from a [`Summarizer`](crate::summarizer::Summarizer) between the two halves
//! ([`prepare`], [`Prepared::summaries_from`], [`finish`]). Without any, a plan that needs
//! summaries fails with `COMPACTION_SUMMARY_MISSING` and the requests in the message.
//!
//! * `options.rs`: what a front end passes and gets back ([`FormatOptions`], [`FormatOutput`],
//!   [`Detailed`], [`Keep`]);
//! * `compact.rs`: the whole compaction over texts ([`compact`], [`compact_detailed`],
//!   [`compact_owned`]), `streamed.rs` its output written as it is made ([`Streamed`]);
//! * `prepare.rs` and `finish.rs`: its two halves; `policy.rs` the policy the options name;
//!   `summaries.rs` the summaries document and the rule that every request has one;
//! * `estimate.rs`: the whole prompt counted part by part ([`estimate`]);
//! * `errors.rs`: a format's errors as the operations' ([`from_format`]); `notices.rs`: the
//!   lines for standard error.

mod compact;
mod errors;
mod estimate;
mod finish;
mod notices;
mod options;
mod policy;
mod prepare;
mod streamed;
mod summaries;

pub use compact::{compact, compact_detailed, compact_owned};
pub use errors::from_format;
pub use estimate::estimate;
pub use finish::finish;
pub(crate) use notices::repair_line;
pub use options::{Detailed, FormatOptions, FormatOutput, Keep};
pub(crate) use policy::named_policy;
pub use prepare::{Prepared, prepare};
pub use streamed::Streamed;

pub use crate::summarizer::SUMMARIZER_ERROR;

pub use cutctx::policies::registry::{DEFAULT_POLICY, DEFAULT_PROMPT_ID};
