//! Where summaries come from: the [`Summarizer`] trait the operations that need summaries ask,
//! one summarization request at a time, and [`CommandSummarizer`], which runs a command once
//! per request (the `summarize_with` option of a provider request's compaction and of a
//! session).
//!
//! A front end with its own model (the Python package's `summarize` callable, a server's
//! upstream) implements [`Summarizer`]; [`summarize_each`] asks it once per request of a
//! plan, in order, and holds the one rule every summarizer is held to: a summary that is
//! empty or blank is an error (`SUMMARIZER_ERROR`), never a summary.
//!
//! ```
//! use cutctx_ops::summarizer::{Summarizer, SUMMARIZER_ERROR};
//! use cutctx_ops::OpsError;
//! use serde_json::Value;
//!
//! struct FirstWords;
//! impl Summarizer for FirstWords {
//!     fn summarize(&mut self, _group_id: &str, input: &Value) -> Result<String, OpsError> {
//!         let n = input["turns"].as_array().map_or(0, Vec::len);
//!         Ok(format!("{n} turns folded"))
//!     }
//!     fn what(&self) -> &'static str {
//!         "the first-words summarizer returned"
//!     }
//! }
//! let input = serde_json::json!({"turns": [{}, {}]});
//! assert_eq!(FirstWords.summarize("g1", &input)?, "2 turns folded");
//! # Ok::<(), OpsError>(())
//! ```

use std::io::Write as _;
use std::process::{Command, Stdio};

use cutctx::SummarizationRequest;
use cutctx::model::details;
use serde_json::Value;

use crate::OpsError;

/// The code of a summarizer that could not run, failed, or gave no summary.
pub const SUMMARIZER_ERROR: &str = "SUMMARIZER_ERROR";

/// Writes the summary of one summarization request.
pub trait Summarizer {
    /// The summary of the request `group_id`, given the document
    /// `ProviderTranscript::summarization_input` makes for it (`{"format", "group_id",
    /// "prompt_id", "target_tokens", "turns", "messages"}`).
    ///
    /// # Errors
    ///
    /// `SUMMARIZER_ERROR` (with `group_id` in the details) when no summary can be made.
    fn summarize(&mut self, group_id: &str, input: &Value) -> Result<String, OpsError>;

    /// How the errors name it and what it does, as in "the summarizer command printed": the
    /// message of an empty summary is this, then "no summary for group G.".
    fn what(&self) -> &'static str;
}

/// `--summarize-with CMD`: runs `CMD` through `sh -c` (`cmd /C` on Windows) once per request,
/// with the document as JSON on its standard input, and takes its standard output, less its
/// trailing line ends, as the summary. Its standard error is the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSummarizer {
    command: String,
}

impl CommandSummarizer {
    /// The summarizer that runs `command`.
    #[must_use]
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
        }
    }
}

impl Summarizer for CommandSummarizer {
    fn summarize(&mut self, group_id: &str, input: &Value) -> Result<String, OpsError> {
        run_command(&self.command, group_id, &input.to_string())
    }

    fn what(&self) -> &'static str {
        "the summarizer command printed"
    }
}

/// Asks `summarizer` for the summary of `request`, whose document `input` is, and refuses an
/// empty or blank one.
///
/// # Errors
///
/// The summarizer's own; `SUMMARIZER_ERROR` for an empty or blank summary.
pub fn summarize_one(
    summarizer: &mut dyn Summarizer,
    request: &SummarizationRequest,
    input: &Value,
) -> Result<String, OpsError> {
    let group_id = request.group_id();
    let summary = summarizer.summarize(group_id, input)?;
    if summary.trim().is_empty() {
        return Err(OpsError {
            code: SUMMARIZER_ERROR,
            message: format!("{} no summary for group {group_id}.", summarizer.what()),
            details: details! { "group_id" => group_id },
        });
    }
    Ok(summary)
}

/// Asks `summarizer` once per request of `requests`, in order, with the document `input_of`
/// makes for each, and collects the summaries by group id ([`summarize_one`] for each).
///
/// # Errors
///
/// As [`summarize_one`], and `input_of`'s own; the first error stops the rest.
pub fn summarize_each(
    summarizer: &mut dyn Summarizer,
    requests: &[SummarizationRequest],
    mut input_of: impl FnMut(&SummarizationRequest) -> Result<Value, OpsError>,
) -> Result<std::collections::BTreeMap<String, String>, OpsError> {
    let mut summaries = std::collections::BTreeMap::new();
    for request in requests {
        let input = input_of(request)?;
        let summary = summarize_one(summarizer, request, &input)?;
        summaries.insert(request.group_id().to_owned(), summary);
    }
    Ok(summaries)
}

/// One run of `command`: `input` on its standard input, its standard output back, less its
/// trailing line ends.
fn run_command(command: &str, group_id: &str, input: &str) -> Result<String, OpsError> {
    let fail = |message: String, extra: Option<(&str, Value)>| {
        let mut d = details! { "group_id" => group_id };
        if let Some((k, v)) = extra {
            d.insert(k.to_owned(), v);
        }
        OpsError {
            code: SUMMARIZER_ERROR,
            message,
            details: d,
        }
    };
    let (shell, flag) = if cfg!(windows) {
        ("cmd", "/C")
    } else {
        ("sh", "-c")
    };
    let mut child = Command::new(shell)
        .arg(flag)
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            fail(
                format!("the summarizer command cannot be started: {e}"),
                None,
            )
        })?;
    let stdin = child.stdin.take();
    // Feed standard input from another thread, so that a command that writes before it has
    // read everything cannot block on a full pipe.
    let output = std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Some(mut stdin) = stdin {
                // A command that does not read its input is its own business.
                let _ = stdin.write_all(input.as_bytes());
            }
        });
        child.wait_with_output()
    })
    .map_err(|e| fail(format!("the summarizer command failed to run: {e}"), None))?;
    if !output.status.success() {
        let status = output.status.code();
        return Err(fail(
            format!(
                "the summarizer command failed for group {group_id} ({}); nothing was written.",
                status.map_or_else(
                    || "killed by a signal".to_owned(),
                    |c| format!("exit status {c}")
                )
            ),
            Some(("status", status.map_or(Value::Null, Value::from))),
        ));
    }
    let text = String::from_utf8(output.stdout).map_err(|_| {
        fail(
            format!("the summarizer command printed text that is not UTF-8 for group {group_id}."),
            None,
        )
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

/// The front end a caller came through: a message that asks for summaries names the option
/// of that front end, in its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrontEnd {
    /// The `cutctx` command line.
    #[default]
    CommandLine,
    /// The Python package.
    Python,
    /// `cutctx serve`.
    Proxy,
}

impl FrontEnd {
    /// What a user of this front end does with a cutctx request document (`transcript`,
    /// `budget`, `policy`) given where a provider request was expected.
    ///
    /// ```
    /// use cutctx_ops::summarizer::FrontEnd;
    /// assert!(FrontEnd::CommandLine.to_compact_a_document().contains("without --format"));
    /// ```
    #[must_use]
    pub const fn to_compact_a_document(self) -> &'static str {
        match self {
            Self::CommandLine => {
                "compact it without --format (cutctx compact REQUEST), or give the provider request itself"
            }
            Self::Python => {
                "read it with the turn API (cutctx.Transcript, cutctx.CompactionBudget and a policy), or give cutctx.formats the provider request itself"
            }
            Self::Proxy => "send the provider request itself",
        }
    }

    /// What a user of this front end does when a firing needs a summary it has no way to write.
    ///
    /// ```
    /// use cutctx_ops::summarizer::FrontEnd;
    /// assert!(FrontEnd::Python.to_have_summaries().contains("summarize="));
    /// ```
    #[must_use]
    pub const fn to_have_summaries(self) -> &'static str {
        match self {
            Self::CommandLine => "pass --summarize-with CMD, or a policy that does not summarize",
            Self::Python => {
                "pass summarize= (a callable given the summarization document), or leave policy unset (masking, then drop_oldest)"
            }
            Self::Proxy => {
                "leave --policy unset (masking, then drop_oldest) and start the proxy with --summarizer auto: its summaries are swapped in at a firing; a policy's own summary requests have no writer in the proxy"
            }
        }
    }

    /// What a user of this front end does when a compaction of a provider request lacks
    /// summaries for its plan.
    ///
    /// ```
    /// use cutctx_ops::summarizer::FrontEnd;
    /// assert!(FrontEnd::CommandLine.to_give_summaries().contains("--summaries FILE"));
    /// assert!(FrontEnd::Python.to_give_summaries().contains("summarize="));
    /// ```
    #[must_use]
    pub const fn to_give_summaries(self) -> &'static str {
        match self {
            Self::CommandLine => {
                "fulfil them with --summaries FILE (a JSON object {group_id: summary}) or --summarize-with CMD, or leave --policy unset (masking, then drop_oldest)"
            }
            Self::Python => {
                "fulfil them with summaries= (a dict {group_id: summary}) or summarize= (a callable given the summarization document), or leave policy unset (masking, then drop_oldest)"
            }
            Self::Proxy => Self::Proxy.to_have_summaries(),
        }
    }
}
