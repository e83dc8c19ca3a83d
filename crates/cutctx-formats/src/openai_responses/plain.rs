//! The Responses hand reader: [`Plain`], a message of the common shapes read from its text without
//! building a value; anything else is declined and read as a value.

use super::*;

/// A Responses item of the shapes most requests are made of, read from its text without a
/// value: a message (a `role`, and string content or `input_text`/`output_text` parts), a
/// `function_call` (string `call_id`, `name`, `arguments`) or a `function_call_output`
/// (string `call_id`, string output or text parts), each with an optional string `id` and
/// `status`. Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    /// What the item is: `Call` and `Output` of `function_call` only.
    pub(super) shape: Shape,
    pub(super) call_id: Cow<'a, str>,
    /// A message's text pieces, or an output's.
    pub(super) content: Vec<Str<'a>>,
    pub(super) name: Option<Cow<'a, str>>,
    pub(super) arguments: Option<Cow<'a, str>>,
}

/// The kinds of item a [`Plain`] item can be.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shape {
    Message(Kind<'static>),
    Call,
    Output,
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut ty, mut role, mut content, mut output) = (None, None, None, None);
        let (mut call_id, mut name, mut arguments, mut id, mut status) =
            (None, None, None, None, None);
        lex.object(|lex, key| match key {
            "type" => once(&mut ty, lex.string()),
            "role" => once(&mut role, lex.string()),
            "content" => once(&mut content, read_text(lex, "content")),
            "output" => once(&mut output, read_text(lex, "output")),
            "call_id" => once(&mut call_id, lex.string()),
            "name" => once(&mut name, lex.string()),
            "arguments" => once(&mut arguments, lex.string()),
            // Neither the check nor the turn reads an item's id, nor a status that is set.
            "id" => once(&mut id, lex.string()),
            "status" => once(&mut status, lex.string()),
            _ => None,
        })?;
        let shape = match ty.as_deref() {
            None | Some("message") => {
                let kind = match role_of(role?.as_ref()) {
                    Some(Role::User) => Kind::Prompt(Role::User),
                    Some(Role::System) => Kind::Prompt(Role::System),
                    Some(Role::Assistant) => Kind::Answer,
                    Some(Role::Tool) | None => return None,
                };
                let other = call_id.is_some() || name.is_some() || arguments.is_some();
                if other || output.is_some() {
                    return None;
                }
                return Some(Self {
                    shape: Shape::Message(kind),
                    call_id: Cow::Borrowed(""),
                    // A message may have no content (the value's check allows it): no text.
                    content: content.unwrap_or_default(),
                    name: None,
                    arguments: None,
                });
            }
            Some("function_call") if output.is_none() => Shape::Call,
            Some("function_call_output") if name.is_none() && arguments.is_none() => Shape::Output,
            _ => return None,
        };
        if role.is_some() || content.is_some() {
            return None;
        }
        Some(Self {
            shape,
            call_id: call_id?,
            // A call has no output (declined above when it has one): no text of its own.
            content: output.unwrap_or_default(),
            name,
            arguments,
        })
    }
}

impl Plain<'_> {
    /// What the item is, as [`kind`] says of its value.
    pub(super) fn kind(&self) -> Kind<'_> {
        match self.shape {
            Shape::Message(kind) => kind,
            Shape::Call => Kind::Call("function_call", &self.call_id),
            Shape::Output => Kind::Output("function_call", &self.call_id),
        }
    }
}

/// A string, or an array of `input_text`, `output_text` or `text` parts (each with a string
/// `text`, and `annotations`, which no turn reads): the pieces of text it holds.
pub(super) fn read_text<'a>(lex: &mut Lex<'a>, key: &'static str) -> Option<Vec<Str<'a>>> {
    // A string, else (nothing consumed) an array.
    if let Some(text) = lex.text_or_null().flatten() {
        return Some(vec![text.in_field(key)]);
    }
    let mut pieces = Vec::new();
    lex.array(|lex| {
        let (mut ty, mut text, mut annotations) = (None, None, None);
        lex.object(|lex, key| match key {
            "type" => once(&mut ty, lex.string()),
            "text" => once(&mut text, lex.text()),
            "annotations" => once(&mut annotations, lex.value()),
            _ => None,
        })?;
        matches!(ty?.as_ref(), "input_text" | "output_text" | "text").then_some(())?;
        pieces.push(text?);
        Some(())
    })?;
    Some(pieces)
}
