//! [`OpenValidation`]: a request's validation kept open at the end of its list, so that the
//! same request with messages appended is checked by reading the new messages alone.
//!
//! It is [`validate`](crate::validate) read in two sittings, not a second copy of any rule: the
//! format's one `Check` is fed the list's messages in order, and a copy of it is finished at
//! each sitting. The only rule that reads the list's length (an Anthropic list may end in an
//! empty assistant message, a prefill) is why the state is kept one message short: that last
//! message is fed again, told the longer length, when messages are appended after it.

use serde_json::Value;

use crate::provider_format::ProviderFormat;
use crate::validate::Violation;
use crate::{Format, list_key};

/// The validation of a request that [`validate`](crate::validate) accepted, open at the end
/// of its message list: [`OpenValidation::append`] checks the request with more messages
/// appended by reading those messages alone, and says what `validate` would say of the whole.
///
/// It holds the rules' state over the list (a few ids of the tool loop in progress) and a
/// copy of the list's last message, never the list.
///
/// ```
/// use cutctx_formats::{Format, OpenValidation, validate};
/// use serde_json::json;
///
/// let request = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
/// let mut open = OpenValidation::over(Format::OpenAiChat, &request).unwrap().unwrap();
/// let call = json!({"role": "assistant", "content": null,
///     "tool_calls": [{"id": "c1", "type": "function",
///                     "function": {"name": "ls", "arguments": "{}"}}]});
/// // The call is not answered yet: validate would refuse the longer request, and so does this.
/// assert!(open.append(std::slice::from_ref(&call)).is_err());
/// let result = json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"});
/// open.append(&[call, result]).unwrap();
/// assert_eq!(open.len(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct OpenValidation {
    state: Open,
}

/// The rules' state of each format.
#[derive(Debug, Clone)]
enum Open {
    Chat(Sitting<crate::openai_chat::Chat>),
    Responses(Sitting<crate::openai_responses::Responses>),
    Anthropic(Sitting<crate::anthropic::Anthropic>),
}

/// One format's state: the rules fed every message but the last, and the last.
struct Sitting<F: ProviderFormat> {
    before_last: F::Check,
    last: Value,
    len: usize,
}

impl<F: ProviderFormat> Clone for Sitting<F> {
    fn clone(&self) -> Self {
        Self {
            before_last: self.before_last.clone(),
            last: self.last.clone(),
            len: self.len,
        }
    }
}

impl<F: ProviderFormat> std::fmt::Debug for Sitting<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sitting")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<F: ProviderFormat> Sitting<F> {
    /// Validates `document`, whose list is `list` (not empty), keeping the state open.
    fn over(document: &Value, list: &[Value]) -> Result<Self, Violation> {
        let Some((first, last)) = list.first().zip(list.last()) else {
            debug_assert!(
                false,
                "a validation is kept open only over a list that holds messages"
            );
            return Err(no_list());
        };
        // A state before the first message, whose "last message" is that first one: finishing
        // it over the whole list reads every message once.
        let mut sitting = Self {
            before_last: F::check_start(document, list.len())?,
            last: first.clone(),
            len: 1,
        };
        sitting.before_last = sitting.finished(list)?;
        sitting.last = last.clone();
        sitting.len = list.len();
        Ok(sitting)
    }

    /// The rules over the list with `new` after its messages but the last (`new` starting
    /// with that last message), finished: the state before `new`'s last message, or the
    /// first violation.
    fn finished(&self, new: &[Value]) -> Result<F::Check, Violation> {
        let mut check = self.before_last.clone();
        let start = self.len - 1;
        F::check_len(&mut check, start + new.len());
        let Some((last, before)) = new.split_last() else {
            debug_assert!(false, "a sitting is always fed its own last message");
            return Err(no_list());
        };
        for (k, message) in before.iter().enumerate() {
            F::check_value(&mut check, start + k, message)?;
        }
        let open = check.clone();
        F::check_value(&mut check, start + before.len(), last)?;
        F::check_finish(check)?;
        Ok(open)
    }

    fn append(&mut self, new: &[Value]) -> Result<(), Violation> {
        let Some(newest) = new.last() else {
            return Ok(());
        };
        let mut fed = Vec::with_capacity(new.len() + 1);
        fed.push(self.last.clone());
        fed.extend_from_slice(new);
        self.before_last = self.finished(&fed)?;
        self.last = newest.clone();
        self.len += new.len();
        Ok(())
    }
}

/// The violation of a list that cannot be kept open because it is empty: never reached, as
/// every format refuses an empty list before this is asked.
fn no_list() -> Violation {
    Violation::new(
        Format::OpenAiChat,
        crate::Rule::NoMessages,
        None,
        "messages".to_owned(),
    )
}

impl OpenValidation {
    /// Validates `document` as [`validate`](crate::validate) does and keeps the validation
    /// open at the end of its message list: `Ok(None)` when the document is valid but has no
    /// list to append to (a Responses request whose `input` is one string).
    ///
    /// # Errors
    ///
    /// The first [`Violation`], the one `validate` returns.
    pub fn over(format: Format, document: &Value) -> Result<Option<Self>, Violation> {
        let list = match document {
            Value::Array(list) => Some(list),
            doc => doc.get(list_key(format)).and_then(Value::as_array),
        };
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            crate::validate(format, document)?;
            return Ok(None);
        };
        let state = match format {
            Format::OpenAiChat => Open::Chat(Sitting::over(document, list)?),
            Format::OpenAiResponses => Open::Responses(Sitting::over(document, list)?),
            Format::Anthropic => Open::Anthropic(Sitting::over(document, list)?),
        };
        Ok(Some(Self { state }))
    }

    /// Checks the request with `new` appended to its list, reading `new` alone: `Ok` when
    /// [`validate`](crate::validate) accepts the longer request, and the validation is then
    /// of it; else the violation `validate` returns, and the validation is as it was.
    ///
    /// # Errors
    ///
    /// The first [`Violation`] of the longer request.
    pub fn append(&mut self, new: &[Value]) -> Result<(), Violation> {
        match &mut self.state {
            Open::Chat(s) => s.append(new),
            Open::Responses(s) => s.append(new),
            Open::Anthropic(s) => s.append(new),
        }
    }

    /// The format of the request.
    #[must_use]
    pub const fn format(&self) -> Format {
        match self.state {
            Open::Chat(_) => Format::OpenAiChat,
            Open::Responses(_) => Format::OpenAiResponses,
            Open::Anthropic(_) => Format::Anthropic,
        }
    }

    /// How many messages the validated list holds.
    #[must_use]
    pub const fn len(&self) -> usize {
        match &self.state {
            Open::Chat(s) => s.len,
            Open::Responses(s) => s.len,
            Open::Anthropic(s) => s.len,
        }
    }

    /// Never: a validation is kept open only over a list that holds messages.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_final_assistant_message_is_accepted_only_while_it_is_last() {
        let doc = json!({"messages": [{"role": "user", "content": "Hi"},
                                      {"role": "assistant", "content": ""}]});
        let mut open = OpenValidation::over(Format::Anthropic, &doc)
            .expect("the history is valid")
            .expect("the history has a list");
        let more = [json!({"role": "user", "content": "And?"})];
        let whole = json!({"messages": [{"role": "user", "content": "Hi"},
                                        {"role": "assistant", "content": ""},
                                        {"role": "user", "content": "And?"}]});
        assert_eq!(
            open.append(&more)
                .expect_err("the empty assistant is no longer last"),
            crate::validate(Format::Anthropic, &whole).expect_err("the whole history is refused")
        );
        assert_eq!(
            open.len(),
            2,
            "a refused append leaves the validation as it was"
        );
    }

    #[test]
    fn a_string_input_has_no_list_to_keep_open() {
        let doc = json!({"model": "m", "input": "Hi"});
        assert!(
            OpenValidation::over(Format::OpenAiResponses, &doc)
                .expect("a string input is valid")
                .is_none()
        );
    }
}
