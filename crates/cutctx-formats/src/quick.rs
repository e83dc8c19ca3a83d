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

/// A cursor over one message's text.
pub(crate) struct Lex<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Lex<'a> {
    pub(crate) const fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        let b = self.bytes();
        while matches!(b.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
        b.get(self.at).copied()
    }

    /// Consumes `c`, the next byte that is not whitespace.
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
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
        let escaped = string_end(b, start - 1).map_or(n + 16, |end| end - start);
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

    /// A small value of any type, parsed as the value path parses it: for the few fields a
    /// turn reads as JSON (a tool's input).
    pub(crate) fn value(&mut self) -> Option<serde_json::Value> {
        let span = self.skip()?;
        serde_json::from_str(self.text.get(span)?).ok()
    }

    /// A string or `null` (`Some(None)`).
    pub(crate) fn string_or_null(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }
}

/// Just past the value starting at `start` in `b` (not whitespace), skipped without being
/// checked; `None` when it nests deeper than `max_depth` or is cut short.
pub(crate) fn value_end(b: &[u8], start: usize, max_depth: usize) -> Option<usize> {
    let mut at = start;
    match *b.get(start)? {
        b'"' => string_end(b, at),
        b'[' | b'{' => {
            let mut depth = 0_usize;
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = string_end(b, at)?;
                        continue;
                    }
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > max_depth {
                            return None;
                        }
                    }
                    b']' | b'}' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            while !matches!(
                b.get(at),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                at += 1;
            }
            Some(at)
        }
    }
}

/// Just past the string opening at `at` in `b`, its escapes skipped unchecked.
pub(crate) fn string_end(b: &[u8], mut at: usize) -> Option<usize> {
    at += 1;
    loop {
        at += cutctx_json::first_special(b.get(at..)?, false)?;
        match *b.get(at)? {
            b'\\' => at += 2,
            _ => return Some(at + 1),
        }
    }
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

    proptest! {
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
