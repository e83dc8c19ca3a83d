//! A compacted provider request as it is written: whole, or as parts of its input's text and
//! the parts the compaction changed ([`Streamed`], written a buffered part at a time), so that
//! the whole output is never held and a request that fits is its own text.

use std::borrow::Cow;
use std::io::Write as _;

use cutctx::model::details;

use super::options::FormatOutput;
use crate::OpsError;

/// What `cutctx compact --format` writes, its compacted request to be written as it is made:
/// what [`compact_owned`](super::compact_owned) returns.
#[derive(Debug)]
pub struct Streamed {
    body: Body<'static>,
    /// As [`FormatOutput::report`].
    pub report: String,
    /// As [`FormatOutput::repairs`].
    pub repairs: Vec<String>,
    /// As [`FormatOutput::reasoning`].
    pub reasoning: Option<String>,
}

impl Streamed {
    /// The output to write: `body`, and the rest of `output` (whose own `output` is empty).
    pub(super) fn new(body: Body<'_>, output: FormatOutput) -> Self {
        Self {
            body: body.into_owned(),
            report: output.report,
            repairs: output.repairs,
            reasoning: output.reasoning,
        }
    }

    /// Writes the compacted request (the bytes [`compact`](super::compact) returns as
    /// `output`) to `out`, a buffered part at a time, and flushes it.
    ///
    /// # Errors
    ///
    /// The first error writing to `out`; part of the output may have been written.
    pub fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut buffered = std::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, out);
        self.body.write_to(&mut buffered)?;
        buffered.flush()
    }
}

/// The buffer [`Streamed::write_to`] gathers small parts in before writing them.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// A compacted request, whole or as parts of its input's text.
#[derive(Debug)]
pub(super) enum Body<'a> {
    /// The output whole, a newline included.
    Whole(String),
    /// The output written from the input's text: `parts` of `text`, and a newline when they
    /// do not end with one.
    Parts {
        text: Cow<'a, str>,
        parts: cutctx::formats::TextParts,
        newline: bool,
    },
}

impl Body<'_> {
    /// The same output, holding its input's text itself.
    fn into_owned(self) -> Body<'static> {
        match self {
            Self::Whole(text) => Body::Whole(text),
            Self::Parts {
                text,
                parts,
                newline,
            } => Body::Parts {
                text: Cow::Owned(text.into_owned()),
                parts,
                newline,
            },
        }
    }

    /// The output whole: what [`Body::write_to`] writes.
    ///
    /// # Errors
    ///
    /// `INTERNAL_ERROR` should the parts not resolve in the text they were made from.
    pub(super) fn into_text(self) -> Result<String, OpsError> {
        Ok(match self {
            Self::Whole(text) => text,
            Self::Parts {
                text,
                parts,
                newline,
            } => {
                // The parts were made from this text: they cannot fail to resolve in it, but
                // should they, the output is refused rather than printed empty.
                let mut whole = parts.to_text(&text).ok_or_else(|| {
                    OpsError::internal(
                        "the compacted request's parts do not resolve in its input's text",
                        details! { "text_bytes" => text.len() },
                    )
                })?;
                if newline {
                    whole.push('\n');
                }
                whole
            }
        })
    }

    fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        match self {
            Self::Whole(text) => out.write_all(text.as_bytes()),
            Self::Parts {
                text,
                parts,
                newline,
            } => {
                parts.write_to(text, out)?;
                if *newline {
                    out.write_all(b"\n")?;
                }
                Ok(())
            }
        }
    }
}
