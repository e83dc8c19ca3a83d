//! The Anthropic hand reader: [`Plain`], a message of the common shapes read from its text without
//! building a value; anything else is declined and read as a value.

use super::*;

/// An Anthropic message of the shapes most requests are made of, read from its text without
/// a value: a `role` and string content, or content of `text` blocks, `tool_use` blocks (a
/// string `id` and `name`, any `input`) and `tool_result` blocks (a string `tool_use_id`,
/// string content or `text` blocks, `is_error`). Anything else is declined.
#[derive(Debug)]
pub(crate) struct Plain<'a> {
    pub(super) role: Cow<'a, str>,
    pub(super) content: Content<'a>,
}

/// The content of a [`Plain`] message.
#[derive(Debug)]
pub(super) enum Content<'a> {
    Text(Str<'a>),
    Blocks(Vec<Block<'a>>),
}

impl Content<'_> {
    pub(super) fn blocks(&self) -> &[Block<'_>] {
        match self {
            Content::Text(_) => &[],
            Content::Blocks(blocks) => blocks,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            Content::Text(text) => text.is_empty(),
            Content::Blocks(blocks) => blocks.is_empty(),
        }
    }
}

/// A block of a [`Plain`] message.
#[derive(Debug)]
pub(super) enum Block<'a> {
    Text(Str<'a>),
    ToolUse {
        id: Cow<'a, str>,
        name: Cow<'a, str>,
        input: Input<'a>,
    },
    /// A result: its call's id and the pieces of its content.
    ToolResult {
        id: Cow<'a, str>,
        content: Vec<Str<'a>>,
    },
}

/// A `tool_use` block's `input`, as a turn's text holds it (see [`Text::push_json`]).
#[derive(Debug)]
pub(super) enum Input<'a> {
    /// An object written from the request's text (see [`tool_input::plain_object`]).
    Written(Cow<'a, str>),
    /// Any other value, parsed.
    Value(Value),
}

impl<'a> Input<'a> {
    pub(super) fn read(lex: &mut Lex<'a>) -> Option<Self> {
        let raw = lex.raw()?;
        match tool_input::plain_object(raw) {
            Some(written) => Some(Self::Written(written)),
            None => serde_json::from_str(raw).ok().map(Self::Value),
        }
    }
}

impl<'a> ReadMessage<'a> for Plain<'a> {
    /// One message, from the cursor.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self> {
        let (mut role, mut content) = (None, None);
        lex.object(|lex, key| match key {
            "role" => once(&mut role, lex.string()),
            "content" => once(&mut content, read_content(lex, true)),
            _ => None,
        })?;
        Some(Self {
            role: role?,
            content: content?,
        })
    }
}

/// String content, or an array of blocks (with `tool_use` and `tool_result` blocks when
/// `calls`, else of `text` blocks only).
pub(super) fn read_content<'a>(lex: &mut Lex<'a>, calls: bool) -> Option<Content<'a>> {
    if let Some(text) = lex.text_or_null().flatten() {
        return Some(Content::Text(text.in_field("content")));
    }
    let mut blocks = Vec::new();
    lex.array(|lex| {
        blocks.push(read_block(lex, calls)?);
        Some(())
    })?;
    Some(Content::Blocks(blocks))
}

pub(super) fn read_block<'a>(lex: &mut Lex<'a>, calls: bool) -> Option<Block<'a>> {
    let (mut kind, mut text, mut id, mut name, mut input) = (None, None, None, None, None);
    let (mut use_id, mut content, mut is_error) = (None, None, None);
    lex.object(|lex, key| match key {
        "type" => once(&mut kind, lex.string()),
        "text" => once(&mut text, lex.text()),
        "id" if calls => once(&mut id, lex.string()),
        "name" if calls => once(&mut name, lex.string()),
        "input" if calls => once(&mut input, Input::read(lex)),
        "tool_use_id" if calls => once(&mut use_id, lex.string()),
        "content" if calls => once(&mut content, read_content(lex, false)),
        // Neither the check nor the turn reads whether a result is an error.
        "is_error" if calls => once(&mut is_error, lex.value().filter(Value::is_boolean)),
        _ => None,
    })?;
    match &*kind? {
        "text" if id.is_none() && name.is_none() && input.is_none() => {
            (use_id.is_none() && content.is_none() && is_error.is_none())
                .then_some(Block::Text(text?))
        }
        "tool_use" if text.is_none() && use_id.is_none() && content.is_none() => {
            is_error.is_none().then_some(())?;
            Some(Block::ToolUse {
                id: id?,
                name: name?,
                input: input?,
            })
        }
        "tool_result" if text.is_none() && id.is_none() && name.is_none() && input.is_none() => {
            let content = match content {
                None => Vec::new(),
                Some(Content::Text(text)) => vec![text],
                Some(Content::Blocks(blocks)) => blocks
                    .into_iter()
                    .map(|b| match b {
                        Block::Text(text) => Some(text),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?,
            };
            Some(Block::ToolResult {
                id: use_id?,
                content,
            })
        }
        _ => None,
    }
}
