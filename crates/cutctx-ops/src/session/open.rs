//! [`OpenSession`]: a session kept in memory between calls by a front end that hands over only
//! the messages appended since the last call, so that a call that does not fire costs time in
//! proportion to those messages, not to the history.
//!
//! It is [`session_with`](super::session_with) read faster, not a second session: the state it
//! advances is the one `cutctx session` writes, the decision is the session's own
//! [`push`](cutctx::session::push), and the appended messages are checked by the request's
//! validation held open ([`OpenValidation`]). When the messages cross the trigger it says so,
//! and the caller makes the full call with the whole history and [`OpenSession::state_json`].

use cutctx::formats::{FormatError, OpenValidation};
use cutctx::session::{Decision, SessionConfig, SessionState, push};
use serde_json::Value;

use crate::OpsError;

/// What [`OpenSession::append`] says about the appended messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Send what was sent last time with the messages appended: the same request the full
    /// call would give.
    Send {
        /// The whole prompt with the reserve.
        prompt_tokens: u64,
    },
    /// The request crossed the trigger: make the full call, with the whole history and the
    /// state [`OpenSession::state_json`] holds (which has not taken the messages in; the
    /// session is as it was before this call).
    Full,
}

/// The session after a call, held open for the next one's appended messages.
///
/// Made by [`session_with`](super::session_with) (its [`SessionOutput::open`](super::SessionOutput::open))
/// when the request has a message list and is not repaired (a repair reads the whole
/// history). The settings are the call's: the next calls are expected to give the same rest of
/// the request (instructions, tools, system), as a loop that appends does.
pub struct OpenSession {
    pub(super) config: SessionConfig,
    pub(super) state: SessionState,
    pub(super) fixed_tokens: u64,
    pub(super) validation: OpenValidation,
}

impl std::fmt::Debug for OpenSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSession")
            .field("messages", &self.validation.len())
            .field("fixed_tokens", &self.fixed_tokens)
            .finish_non_exhaustive()
    }
}

impl OpenSession {
    /// Takes in `new`, the messages appended to the history since the last call, reading
    /// them alone: checks the longer request as its provider would, advances the state, and
    /// says whether the request still fits under the trigger.
    ///
    /// # Errors
    ///
    /// `FORMAT_*` for messages that make the request one its provider would refuse (the
    /// session is then as it was).
    pub fn append(&mut self, new: &[Value]) -> Result<Appended, OpsError> {
        let mut validation = self.validation.clone();
        validation.append(new).map_err(FormatError::from)?;
        Ok(
            match push(&self.config, &mut self.state, self.fixed_tokens, new)? {
                Decision::Append { prompt_tokens } => {
                    self.validation = validation;
                    Appended::Send { prompt_tokens }
                }
                // Nothing taken in: the full call reads the whole history from this state.
                Decision::Fire { .. } => Appended::Full,
            },
        )
    }

    /// As [`OpenSession::append`], the messages given as the text of a JSON array.
    ///
    /// # Errors
    ///
    /// `INPUT_ERROR` for a text that is not JSON, `VALIDATION_ERROR` for JSON that is not an
    /// array; as [`OpenSession::append`].
    pub fn append_text(&mut self, text: &str) -> Result<Appended, OpsError> {
        let new: Vec<Value> = crate::error::parse_json("the appended messages", text)?;
        self.append(&new)
    }

    /// The state as `cutctx session` writes it to its file.
    #[must_use]
    pub fn state_json(&self) -> String {
        self.state.to_json()
    }

    /// How many messages the history holds.
    #[must_use]
    pub fn messages(&self) -> usize {
        self.validation.len()
    }
}
