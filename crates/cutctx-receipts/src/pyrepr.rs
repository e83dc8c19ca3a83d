//! Python's `repr()` and `str()` of JSON values, for messages that must read as arcaeon's.
//!
//! arcaeon's notes embed Python reprs (`unknown schema 'x'`, `recomputed 3 != claimed 'a'`,
//! `duplicate key 'k'`). Strings follow `str.__repr__`: single quotes unless the text holds a
//! `'` and no `"`; `\\`, `\n`, `\r`, `\t` and the chosen quote escaped; non-printable code
//! points as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
//!
//! Printability follows Python's rule (categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than
//! the space are not printable) through a compact table: every control, format, separator,
//! surrogate and private-use range, the noncharacters, and the unassigned planes. Scattered
//! unassigned code points inside assigned blocks are treated as printable, so a repr of such a
//! character differs from Python's; no digest or verdict depends on it, only message text.

use crate::json::{Text, Value, py_float_repr};

/// Ranges of code points Python does not print, sorted.
const NON_PRINTABLE: &[(u32, u32)] = &[
    (0x0000, 0x001F),
    (0x007F, 0x00A0),
    (0x00AD, 0x00AD),
    (0x0378, 0x0379),
    (0x0380, 0x0383),
    (0x038B, 0x038B),
    (0x038D, 0x038D),
    (0x03A2, 0x03A2),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x1680, 0x1680),
    (0x180E, 0x180E),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x2064),
    (0x2065, 0x2065),
    (0x2066, 0x206F),
    (0x3000, 0x3000),
    (0xD800, 0xF8FF),
    (0xFDD0, 0xFDEF),
    (0xFEFF, 0xFEFF),
    (0xFFF0, 0xFFFB),
    (0xFFFE, 0xFFFF),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE00FF),
    (0xE01F0, 0x10FFFF),
];

fn printable(c: u32) -> bool {
    if c == 0x20 {
        return true;
    }
    // Noncharacters at the end of every plane, and the wholly unassigned planes 4 to 13.
    if c & 0xFFFE == 0xFFFE || (0x40000..=0xDFFFF).contains(&c) {
        return false;
    }
    let i = NON_PRINTABLE.partition_point(|&(_, hi)| hi < c);
    NON_PRINTABLE.get(i).is_none_or(|&(lo, _)| lo > c)
}

/// `repr(s)` for a Python string.
#[must_use]
pub fn repr_text(t: &Text) -> String {
    let has_single = t.as_bytes().contains(&b'\'');
    let has_double = t.as_bytes().contains(&b'"');
    let quote = if has_single && !has_double { '"' } else { '\'' };
    let mut out = String::with_capacity(t.as_bytes().len() + 2);
    out.push(quote);
    for c in t.code_points() {
        match c {
            0x5C => out.push_str("\\\\"),
            0x0A => out.push_str("\\n"),
            0x0D => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            c if c == quote as u32 => {
                out.push('\\');
                out.push(quote);
            }
            c if printable(c) => out.push(char::from_u32(c).unwrap_or('\u{FFFD}')),
            c if c < 0x100 => out.push_str(&format!("\\x{c:02x}")),
            c if c < 0x10000 => out.push_str(&format!("\\u{c:04x}")),
            c => out.push_str(&format!("\\U{c:08x}")),
        }
    }
    out.push(quote);
    out
}

/// `repr(v)` for a value as `json.loads` gives it (`None`, `True`, `[1, 'a']`, `{'k': 1.5}`).
#[must_use]
pub fn repr_value(v: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, v);
    out
}

/// `str(v)`: the text itself for a string, the repr otherwise.
#[must_use]
pub fn str_value(v: &Value) -> String {
    match v {
        Value::Str(t) => t.to_string_lossy(),
        other => repr_value(other),
    }
}

fn write_repr(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Int(i) => out.push_str(i.as_str()),
        Value::Float(f) => out.push_str(&py_float_repr(*f)),
        Value::Str(t) => out.push_str(&repr_text(t)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, item)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&repr_text(k));
                out.push_str(": ");
                write_repr(out, item);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn repr(json: &str) -> String {
        repr_value(&parse(json).expect("parses").value)
    }

    #[test]
    fn reprs_match_python() {
        assert_eq!(repr(r#""x""#), "'x'");
        assert_eq!(repr(r#""it's""#), "\"it's\"");
        assert_eq!(repr(r#""'\"""#), "'\\'\"'");
        assert_eq!(repr(r#""a\n\t\\""#), "'a\\n\\t\\\\'");
        assert_eq!(
            repr(r#""a\u0085\u00a0\u2028\ud800\udbff\udfff\ue000\u00ad""#),
            "'a\\x85\\xa0\\u2028\\ud800\\U0010ffff\\ue000\\xad'"
        );
        assert_eq!(repr(r#""é😀""#), "'é😀'");
        assert_eq!(
            repr(r#"[null,true,false,1,-0.0,1e400,{"k":[1.5]}]"#),
            "[None, True, False, 1, -0.0, inf, {'k': [1.5]}]"
        );
    }
}
