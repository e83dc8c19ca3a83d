//! Python's `repr()` and `str()` of JSON values, for messages that must read as arcaeon's.
//!
//! arcaeon's notes embed Python reprs (`unknown schema 'x'`, `recomputed 3 != claimed 'a'`,
//! `duplicate key 'k'`). Strings follow `str.__repr__`: single quotes unless the text holds a
//! `'` and no `"`; `\\`, `\n`, `\r`, `\t` and the chosen quote escaped; non-printable code
//! points as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
//!
//! The text itself is `cutctx_json::py_repr`, shared with cutctx's own messages: printability
//! follows CPython's table up to the unassigned code points scattered inside assigned blocks,
//! which print raw; no digest or verdict depends on it, only message text.

use crate::json::{Text, Value, py_float_repr};

/// `repr(s)` for a Python string.
#[must_use]
pub fn repr_text(t: &Text) -> String {
    cutctx_json::py_repr(t.code_points())
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
