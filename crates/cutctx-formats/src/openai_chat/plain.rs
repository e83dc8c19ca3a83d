//! The Chat hand reader: [`Plain`], a message of the common shapes read from its text without
//! building a value; anything else is declined and read as a value.

use super::*;

/// A Chat message of the shapes most requests are made of, read from its text without a
/// value: `role`, string or null `content`, `tool_call_id`, `name`, and `tool_calls` of
/// `function` calls whose name and arguments are strings. Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    pub(super) role: Cow<'a, str>,
    /// Absent, null (`Some(None)`) or a string.
    pub(super) content: Option<Option<Str<'a>>>,
    pub(super) tool_call_id: Option<Cow<'a, str>>,
    pub(super) calls: Option<Vec<PlainCall<'a>>>,
}

/// A `function` call of a [`Plain`] message.
#[derive(Debug)]
pub(super) struct PlainCall<'a> {
    pub(super) id: Cow<'a, str>,
    pub(super) name: Cow<'a, str>,
    pub(super) arguments: Cow<'a, str>,
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut role, mut content, mut tool_call_id, mut calls, mut name) =
            (None, None, None, None, None);
        lex.object(|lex, key| match key {
            "role" => once(&mut role, lex.string()),
            "content" => once(
                &mut content,
                lex.text_or_null().map(|t| t.map(|t| t.in_field("content"))),
            ),
            "tool_call_id" => once(&mut tool_call_id, lex.string()),
            // Neither the check nor the turn reads a participant's name.
            "name" => once(&mut name, lex.string()),
            "tool_calls" => once(&mut calls, read_calls(lex)),
            _ => None,
        })?;
        Some(Self {
            role: role?,
            content,
            tool_call_id,
            calls,
        })
    }
}

/// A `tool_calls` array of `function` calls, each with a string `id`, an optional string
/// `type`, and a `function` of a string `name` and string `arguments`.
pub(super) fn read_calls<'a>(lex: &mut Lex<'a>) -> Option<Vec<PlainCall<'a>>> {
    let mut calls = Vec::new();
    lex.array(|lex| {
        let (mut id, mut kind, mut function) = (None, None, None);
        lex.object(|lex, key| match key {
            "id" => once(&mut id, lex.string()),
            "type" => once(&mut kind, lex.string()),
            "function" => {
                let (mut name, mut arguments) = (None, None);
                let read = lex.object(|lex, key| match key {
                    "name" => once(&mut name, lex.string()),
                    "arguments" => once(&mut arguments, lex.string()),
                    _ => None,
                });
                once(&mut function, read.and(name.zip(arguments)))
            }
            _ => None,
        })?;
        let (name, arguments) = function?;
        calls.push(PlainCall {
            id: id?,
            name,
            arguments,
        });
        Some(())
    })?;
    Some(calls)
}
