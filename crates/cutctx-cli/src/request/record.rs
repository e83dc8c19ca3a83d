//! A quick reader of one turn record in its usual form, for the request read in pieces:
//! whatever it does not take for certain it leaves to the strict parse.
//!
//! It reads an object of the seven turn keys (`turn_id`, `role`, `content`, `token_estimate`,
//! `tool_call_id`, `pinned`, `metadata`), each at most once, with JSON whitespace anywhere
//! between tokens. It answers `None` for anything else: another key, a key or role spelled
//! with escapes, a value of another type, a number that is not a plain non-negative integer
//! within `u64`, a control byte or an unknown escape in a string, a lone surrogate. The strict
//! parse of the same text then gives the turn or the error it always gave; whatever this
//! reader does answer is what the strict parse reads (a property the tests hold it to).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use cutctx::Role;

/// One turn record as read. Its ids are left in the caller's id text, so that they can be
/// made into shared strings together, apart from the contents.
#[derive(Debug)]
pub(super) struct Record {
    /// The content, `""` when the key is missing.
    pub(super) content: Arc<str>,
    /// The `turn_id`, in the id text.
    pub(super) id: Range<usize>,
    /// The `tool_call_id`, in the id text, unless missing or `null`.
    pub(super) call: Option<Range<usize>>,
    pub(super) role: Role,
    pub(super) estimate: u64,
    pub(super) pinned: bool,
    pub(super) metadata: BTreeMap<String, String>,
}

/// The seven keys, each a bit of the set of keys seen.
const TURN_ID: u8 = 1;
const ROLE: u8 = 2;
const CONTENT: u8 = 4;
const ESTIMATE: u8 = 8;
const CALL: u8 = 16;
const PINNED: u8 = 32;
const METADATA: u8 = 64;

/// The record `s` holds whole (an object and nothing else), its ids appended to `ids`;
/// `scratch` is room for decoding escapes, reused from record to record. `None` for anything
/// this reader does not take (see the module's header).
pub(super) fn record(s: &str, ids: &mut String, scratch: &mut String) -> Option<Record> {
    let b = s.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut seen = 0_u8;
    let mut rec = Record {
        content: Arc::from(""),
        id: 0..0,
        call: None,
        role: Role::User,
        estimate: 0,
        pinned: false,
        metadata: BTreeMap::new(),
    };
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        let (key, end) = string(s, i, scratch)?;
        let Text::Plain(key) = key else { return None };
        let bit = match &s[key] {
            "turn_id" => TURN_ID,
            "role" => ROLE,
            "content" => CONTENT,
            "token_estimate" => ESTIMATE,
            "tool_call_id" => CALL,
            "pinned" => PINNED,
            "metadata" => METADATA,
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        i = ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        i = match bit {
            TURN_ID => {
                let (id, end) = id_text(s, i, ids, scratch)?;
                rec.id = id;
                end
            }
            CALL if b[i..].starts_with(b"null") => i + 4,
            CALL => {
                let (call, end) = id_text(s, i, ids, scratch)?;
                rec.call = Some(call);
                end
            }
            ROLE => {
                let (role, end) = string(s, i, scratch)?;
                let Text::Plain(role) = role else { return None };
                rec.role = match &s[role] {
                    "system" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    _ => return None,
                };
                end
            }
            CONTENT => {
                let (content, end) = string(s, i, scratch)?;
                rec.content = Arc::from(content.of(s, scratch));
                end
            }
            ESTIMATE => {
                let (estimate, end) = integer(b, i)?;
                rec.estimate = estimate;
                end
            }
            PINNED if b[i..].starts_with(b"true") => {
                rec.pinned = true;
                i + 4
            }
            PINNED if b[i..].starts_with(b"false") => i + 5,
            METADATA => metadata(s, i, &mut rec.metadata, scratch)?,
            _ => return None,
        };
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    let required = TURN_ID | ROLE | ESTIMATE;
    (seen & required == required && ws(b, i + 1) == b.len()).then_some(rec)
}

/// The string at `i` appended to `ids`: where it lies there, and the position after it.
fn id_text(
    s: &str,
    i: usize,
    ids: &mut String,
    scratch: &mut String,
) -> Option<(Range<usize>, usize)> {
    let (text, end) = string(s, i, scratch)?;
    let start = ids.len();
    ids.push_str(text.of(s, scratch));
    Some((start..ids.len(), end))
}

/// The object of strings at `i` read into `map` (empty on entry); the position after it.
/// `None` for a repeated key, which the strict parse refuses.
fn metadata(
    s: &str,
    i: usize,
    map: &mut BTreeMap<String, String>,
    scratch: &mut String,
) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        let (key, end) = string(s, i, scratch)?;
        let key = key.of(s, scratch).to_owned();
        i = ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let (value, end) = string(s, ws(b, i + 1), scratch)?;
        if map.insert(key, value.of(s, scratch).to_owned()).is_some() {
            return None;
        }
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A plain non-negative integer at `i` (`0`, or a digit other than `0` and more digits)
/// within `u64`, not followed by a fraction or exponent; the position after it.
fn integer(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && b[i] == b'0') {
        return None;
    }
    let end = i + digits;
    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let mut n = 0_u64;
    for &c in &b[i..end] {
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some((n, end))
}

/// A string's text: a range of the input when it holds no escape, else decoded in the
/// scratch buffer.
enum Text {
    Plain(Range<usize>),
    Decoded,
}

impl Text {
    fn of<'a>(&self, s: &'a str, scratch: &'a str) -> &'a str {
        match self {
            Self::Plain(range) => &s[range.clone()],
            Self::Decoded => scratch,
        }
    }
}

/// The string whose opening quote is at `i`, and the position after its closing quote.
fn string(s: &str, i: usize, scratch: &mut String) -> Option<(Text, usize)> {
    let b = s.as_bytes();
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let mut j = start + special(&b[start..])?;
    if b[j] == b'"' {
        return Some((Text::Plain(start..j), j + 1));
    }
    scratch.clear();
    let mut run = start;
    loop {
        match b[j] {
            b'"' => {
                scratch.push_str(&s[run..j]);
                return Some((Text::Decoded, j + 1));
            }
            b'\\' => {
                scratch.push_str(&s[run..j]);
                j = escape(b, j + 1, scratch)?;
                run = j;
            }
            // A control byte, which JSON does not allow in a string.
            _ => return None,
        }
        j += special(&b[j..])?;
    }
}

/// The escape after a backslash, its first byte at `i`, decoded onto `out`; the position
/// after it.
fn escape(b: &[u8], i: usize, out: &mut String) -> Option<usize> {
    let c = match *b.get(i)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let high = hex4(b, i + 1)?;
            if (0xDC00..0xE000).contains(&high) {
                return None;
            }
            if (0xD800..0xDC00).contains(&high) {
                if b.get(i + 5..i + 7) != Some(b"\\u") {
                    return None;
                }
                let low = hex4(b, i + 7)?;
                if !(0xDC00..0xE000).contains(&low) {
                    return None;
                }
                out.push(char::from_u32(
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00),
                )?);
                return Some(i + 11);
            }
            out.push(char::from_u32(high)?);
            return Some(i + 5);
        }
        _ => return None,
    };
    out.push(c);
    Some(i + 1)
}

/// The four hex digits at `i`, as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4)?.iter().try_fold(0_u32, |n, &c| {
        let d = char::from(c).to_digit(16)?;
        Some(n * 16 + d)
    })
}

/// The offset of the first `"`, `\` or control byte in `b`, eight bytes at a time: string
/// contents are most of a request's bytes.
fn special(b: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACES: u64 = u64::from_le_bytes([0x20; 8]);
    // The high bit of each byte below `n * ONES`'s bytes (`n` at most 0x80), exact for the
    // lowest such byte: borrows only run upward, so the lowest flag is a true one.
    let below = |x: u64, n: u64| x.wrapping_sub(n) & !x & HIGHS;
    let mut chunks = b.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let found = below(x ^ QUOTES, ONES) | below(x ^ BACKSLASHES, ONES) | below(x, SPACES);
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| offset + p)
}

/// The first position at or after `i` that is not JSON whitespace.
fn ws(b: &[u8], i: usize) -> usize {
    super::scan::ws(b, i)
}
