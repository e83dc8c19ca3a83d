//! A hand-written reader of the common message shapes, for the text path: a message is read
//! straight from its bytes into the few fields its check and its turn need, without building
//! a `serde_json::Value` first.
//!
//! It is a shortcut, never a judge. It takes only the shapes it knows in full (each key known,
//! given once, of the expected type; strings whose escapes it decodes exactly) and declines
//! (`None`) everything else, which the caller then reads as a value, the path that stays the
//! source of every error and of every rare shape. The text it reads was already checked to be
//! JSON by the scan of the list, so declining costs only the value parse it saves otherwise.

use std::borrow::Cow;
use std::ops::Range;

/// How deep a value read whole ([`Lex::value`]) may nest.
const SMALL_DEPTH: usize = 16;

/// A message shape the hand-written reader takes: read from a cursor, whole or from where the
/// scan of the list found it.
pub(crate) trait ReadMessage<'a>: Sized {
    /// One message, from the cursor; `None` when it is not of the shape.
    fn read_lex(lex: &mut Lex<'a>) -> Option<Self>;

    /// Reads `text`, one message starting at `base` in the request; `None` when it is not of
    /// the shape. Its turn text is left as written when `defer`.
    fn read(text: &'a str, base: usize, defer: bool) -> Option<Self> {
        let mut lex = Lex::message(text, base, defer);
        let plain = Self::read_lex(&mut lex)?;
        lex.at_end().then_some(plain)
    }

    /// Reads the message starting at `start` in `request`, as [`ReadMessage::read`] reads it,
    /// and where it ends: for the scan of the list, which then need not walk the message
    /// itself.
    fn read_at(request: &'a str, start: usize, defer: bool) -> Option<(Self, usize)> {
        let mut lex = Lex::message(request.get(start..)?, start, defer);
        let plain = Self::read_lex(&mut lex)?;
        Some((plain, start + lex.offset()))
    }
}

/// A cursor over one message's text.
pub(crate) struct Lex<'a> {
    text: &'a str,
    at: usize,
    /// Where `text` starts in the request, for the spans of [`Written`] strings.
    base: usize,
    /// Whether [`Lex::text`] leaves strings as written.
    defer: bool,
}

/// A string a turn's text is made of: decoded, or left as written.
#[derive(Debug)]
pub(crate) enum Str<'a> {
    Decoded(Cow<'a, str>),
    Written(Written<'a>),
}

impl Str<'_> {
    /// The same string, noted as the whole value of the field `key` (see [`Written`]).
    #[must_use]
    pub(crate) fn in_field(self, key: &'static str) -> Self {
        match self {
            Str::Written(w) => Str::Written(Written {
                field: Some(key),
                ..w
            }),
            decoded => decoded,
        }
    }

    /// Whether the decoded string is empty.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Str::Decoded(text) => text.is_empty(),
            Str::Written(w) => w.is_empty(),
        }
    }
}

/// A string as the request writes it, checked to decode but left undecoded: a turn's content,
/// which the text path may never need (see [`crate::ProviderTranscript::from_text_deferred`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written<'a> {
    /// The string between its quotes, as written.
    text: &'a str,
    /// Where `text` starts in the request.
    at: usize,
    /// Code points once decoded.
    chars: usize,
    /// Whether `text` is already the canonical spelling of the decoded string, every escape
    /// the one the canonical writer uses: its digest is then that of its own bytes.
    canonical: bool,
    /// The field whose whole value the string is, when its reader says so (a string inside
    /// an array is not).
    field: Option<&'static str>,
}

impl<'a> Written<'a> {
    /// The decoded string pushed onto `out`.
    pub(crate) fn decode_onto(&self, out: &mut String) -> Option<()> {
        cutctx_json::decode_written(self.text, out)
    }

    /// Whether the decoded string is empty (as the written one is).
    pub(crate) const fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The decoded string's length in code points.
    pub(crate) const fn chars(&self) -> usize {
        self.chars
    }

    /// Where the written string lies in the request, quotes excluded.
    pub(crate) const fn span(&self) -> Range<usize> {
        self.at..self.at + self.text.len()
    }

    /// See [`Written::canonical`](Written).
    pub(crate) const fn is_canonical(&self) -> bool {
        self.canonical
    }

    /// The field whose whole value the string is, if its reader said.
    pub(crate) const fn field(&self) -> Option<&'static str> {
        self.field
    }
}

impl<'a> Lex<'a> {
    pub(crate) const fn new(text: &'a str) -> Self {
        Self {
            text,
            at: 0,
            base: 0,
            defer: false,
        }
    }

    /// A cursor over `text`, a message starting at `base` in the request, whose turn text is
    /// left as written when `defer`.
    pub(crate) const fn message(text: &'a str, base: usize, defer: bool) -> Self {
        Self {
            text,
            at: 0,
            base,
            defer,
        }
    }

    /// A string of a turn's text: left as written when the cursor defers, else decoded.
    pub(crate) fn text(&mut self) -> Option<Str<'a>> {
        if self.defer {
            self.written().map(Str::Written)
        } else {
            self.string().map(Str::Decoded)
        }
    }

    /// [`Lex::text`], or `null` (`Some(None)`).
    pub(crate) fn text_or_null(&mut self) -> Option<Option<Str<'a>>> {
        if self.null() {
            return Some(None);
        }
        self.text().map(Some)
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        self.at = cutctx_json::lex::skip_whitespace(b, self.at);
        b.get(self.at).copied()
    }

    /// Consumes `c`, the next byte that is not whitespace.
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// How far the cursor is into its text.
    pub(crate) const fn offset(&self) -> usize {
        self.at
    }

    /// Whether only whitespace is left.
    pub(crate) fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes `null` when it comes next.
    fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.bytes().get(self.at..self.at + 4) == Some(b"null") {
            self.at += 4;
            return true;
        }
        false
    }

    /// A string, borrowed when it holds no escape, decoded otherwise. `None` for anything
    /// else, and for an escape of a lone surrogate (the value parse says what is wrong).
    pub(crate) fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.at;
        let n = cutctx_json::first_special(b.get(start..)?, true)?;
        if b.get(start + n) == Some(&b'"') {
            self.at = start + n + 1;
            return self.text.get(start..start + n).map(Cow::Borrowed);
        }
        // Room for the whole string at once (its escaped length bounds the decoded one):
        // a tool result grown piece by piece would be moved and copied several times.
        let escaped = cutctx_json::string_end(b, start - 1).map_or(n + 16, |end| end - start);
        let mut out = String::with_capacity(escaped);
        let mut at = start + n;
        out.push_str(self.text.get(start..at)?);
        loop {
            match *b.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(Cow::Owned(out));
                }
                b'\\' => at = cutctx_json::decode_escape(self.bytes(), at + 1, &mut out)?,
                // A raw control byte: not JSON, which the scan did not let through.
                _ => return None,
            }
            let n = cutctx_json::first_special(b.get(at..)?, true)?;
            out.push_str(self.text.get(at..at + n)?);
            at += n;
        }
    }

    /// A string left as written, checked as [`Lex::string`] checks it (declining what it
    /// declines), its code points counted.
    pub(crate) fn written(&mut self) -> Option<Written<'a>> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.at;
        let checked = cutctx_json::check_string(b, start)?;
        let end = checked.end;
        let text = self.text.get(start..end)?;
        self.at = end + 1;
        Some(Written {
            text,
            at: self.base + start,
            // Escapes are ASCII: each stands for one code point.
            chars: text.chars().count() - checked.escape_bytes,
            canonical: checked.canonical,
            field: None,
        })
    }

    /// A key without escapes, and its colon.
    fn key(&mut self) -> Option<&'a str> {
        match self.string()? {
            Cow::Borrowed(k) => {
                self.eat(b':')?;
                Some(k)
            }
            Cow::Owned(_) => None,
        }
    }

    /// An object, each field handed to `field` with its key (which reads the value, or
    /// declines). Keys given twice are for `field` to notice.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.key()?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array, each item read by `item` (which declines).
    pub(crate) fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Where the next value lies, skipped without being checked (the caller parses it, or
    /// knows it to be JSON). Declined when it nests deeper than a message's field ever needs
    /// to, so that no nesting limit comes near.
    fn skip(&mut self) -> Option<Range<usize>> {
        self.peek()?;
        let start = self.at;
        self.at = value_end(self.bytes(), start, SMALL_DEPTH)?;
        Some(start..self.at)
    }

    /// A small value of any type, parsed as the value path parses it: for the few fields read
    /// as JSON values (whether a result is an error, a text's annotations).
    pub(crate) fn value(&mut self) -> Option<serde_json::Value> {
        serde_json::from_str(self.raw()?).ok()
    }

    /// A small value of any type as the request spells it, skipped as [`Lex::value`] skips it
    /// and not checked: the caller checks it.
    pub(crate) fn raw(&mut self) -> Option<&'a str> {
        let span = self.skip()?;
        self.text.get(span)
    }
}

/// Just past the value starting at `start` in `b` (not whitespace), skipped without being
/// checked; `None` when it nests deeper than `max_depth` or is cut short
/// ([`cutctx_json::lex::value_end`]).
pub(crate) fn value_end(b: &[u8], start: usize, max_depth: usize) -> Option<usize> {
    cutctx_json::lex::value_end(b, start, max_depth)
}

/// Where, within `message` (an object's text), the value of its field `key` lies: the last
/// one, as a parsed value keeps the last of repeated keys; `Some(None)` when it has none.
/// `None` (declined) for a key spelled with escapes and anything else unusual.
pub(crate) fn field_span(message: &str, key: &str) -> Option<Option<Range<usize>>> {
    let mut lex = Lex::new(message);
    let mut found = None;
    lex.object(|lex, name| {
        let span = lex.skip()?;
        if name == key {
            found = Some(span);
        }
        Some(())
    })?;
    lex.at_end().then_some(found)
}

/// Where, within `array` (an array's text), its item `j` lies; `None` (declined) when it has
/// no such item or anything is unusual, as [`field_span`] declines.
pub(crate) fn item_span(array: &str, j: usize) -> Option<Range<usize>> {
    let mut lex = Lex::new(array);
    let (mut found, mut k) = (None, 0);
    lex.array(|lex| {
        let span = lex.skip()?;
        if k == j {
            found = Some(span);
        }
        k += 1;
        Some(())
    })?;
    lex.at_end().then_some(found?)
}

/// Sets `slot` to `value`, declining a key given twice (a parsed value keeps the last one,
/// which the value path handles).
pub(crate) fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(text: &str) -> Option<Cow<'_, str>> {
        let mut lex = Lex::new(text);
        let s = lex.string()?;
        lex.at_end().then_some(s)
    }

    #[test]
    fn strings_decode_as_serde_json_decodes_them_or_decline() {
        let cases = [
            r#""plain""#,
            r#""""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u00e9\u0000\u001f\uFFFF""#,
            r#""\ud83d\ude00 and é""#,
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\ud83d\u0041""#,
            r#""\x""#,
            r#""\u12g4""#,
            "\"raw\tcontrol\"",
            r#""unterminated"#,
        ];
        for text in cases {
            let ours = read(text);
            let theirs: Option<String> = serde_json::from_str(text).ok();
            match ours {
                Some(s) => assert_eq!(Some(s.into_owned()), theirs, "{text}"),
                // Declining is always allowed; these four are declined on purpose.
                None => assert!(
                    theirs.is_none()
                        || text.contains("\\ud83d\"")
                        || text.contains("\\ude00\"")
                        || text.contains("\\u0041"),
                    "{text}"
                ),
            }
        }
        assert!(matches!(read(r#""plain""#), Some(Cow::Borrowed("plain"))));
    }

    /// `text` (one string) read as written, and the same read decoded, agree.
    fn written(text: &str) -> Option<Written<'_>> {
        let mut lex = Lex::message(text, 7, true);
        let w = lex.written()?;
        lex.at_end().then_some(())?;
        let decoded = read(text);
        let mut out = String::new();
        assert_eq!(
            w.decode_onto(&mut out),
            decoded.as_ref().map(|_| ()),
            "{text}"
        );
        assert_eq!(Some(out.as_str()), decoded.as_deref(), "{text}");
        let decoded = decoded.expect("read both ways");
        assert_eq!(w.chars(), decoded.chars().count(), "{text}");
        assert_eq!(w.span(), 8..7 + text.len() - 1, "{text}");
        assert_eq!(w.is_empty(), decoded.is_empty(), "{text}");
        // Canonical exactly when the canonical writer spells the decoded string as written.
        let canonical = cutctx_model::canonical::canonical_json_value(&decoded.as_ref().into());
        assert_eq!(w.is_canonical(), canonical == text, "{text}");
        Some(w)
    }

    #[test]
    fn strings_read_as_written_decline_what_decoding_declines() {
        for text in [
            r#""plain""#,
            r#""""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u00e9\u0000\u001f\uFFFF""#,
            r#""\u0001 and \u001f""#,
            r#""\ud83d\ude00 and é""#,
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\x""#,
            "\"raw\tcontrol\"",
            r#""unterminated"#,
        ] {
            let mut lex = Lex::new(text);
            let w = lex.written().filter(|_| lex.at_end());
            assert_eq!(w.is_some(), read(text).is_some(), "{text}");
            if w.is_some() {
                written(text);
            }
        }
        assert!(
            written(r#""a\"b\\c\n\u0001""#)
                .expect("reads")
                .is_canonical()
        );
        assert!(!written(r#""a\/b""#).expect("reads").is_canonical());
        assert!(!written(r#""\u0041""#).expect("reads").is_canonical());
        assert!(!written(r#""\u001F""#).expect("reads").is_canonical());
    }

    #[test]
    fn an_items_span_is_where_the_parser_finds_it() {
        let array = r#" [ {"a": [1, {"b": "]"}]} , "x\"]" ,3,[ ] ] "#;
        let items: Vec<&serde_json::value::RawValue> =
            serde_json::from_str(array).expect("an array");
        for (j, item) in items.iter().enumerate() {
            let span = item_span(array, j).expect("found");
            assert_eq!(&array[span], item.get(), "{j}");
        }
        assert_eq!(item_span(array, items.len()), None);
        assert_eq!(item_span("[1,", 0), None);
        assert_eq!(item_span("{}", 0), None);
    }

    proptest! {
        #[test]
        fn any_string_reads_back_as_written_in_every_spelling(s in any::<String>()) {
            let text = serde_json::to_string(&s).expect("a string");
            prop_assert!(written(&text).is_some());
            let escaped: String = std::iter::once("\"".to_owned())
                .chain(s.encode_utf16().map(|u| format!("\\u{u:04x}")))
                .chain(std::iter::once("\"".to_owned()))
                .collect();
            prop_assert!(written(&escaped).is_some());
            let canonical = cutctx_model::canonical::canonical_json_value(&s.as_str().into());
            prop_assert!(written(&canonical).expect("reads").is_canonical());
        }

        #[test]
        fn any_string_written_by_serde_json_reads_back(s in any::<String>()) {
            let text = serde_json::to_string(&s).expect("a string");
            prop_assert_eq!(read(&text).map(Cow::into_owned), Some(s.clone()));
            // Escaped in full, as `\uXXXX`, it reads back too.
            let escaped: String = std::iter::once("\"".to_owned())
                .chain(s.encode_utf16().map(|u| format!("\\u{u:04x}")))
                .chain(std::iter::once("\"".to_owned()))
                .collect();
            prop_assert_eq!(read(&escaped).map(Cow::into_owned), Some(s));
        }
    }
}
