//! The lossless check: a compacted request against the request it came from, both as text.
//!
//! A scan of brackets and strings (never a parse that would normalize) finds each top-level
//! field's value and each message of the list where they are written. Every top-level field
//! other than the list must come back with the bytes it came with. The output's messages are
//! explained as a compaction explains them: the input's first `L` messages, then a run of its
//! last ones (what dropping the oldest leaves; with nothing dropped, all of them), each either
//! kept or a masked tool result (holding the stub, for the same call ids). A kept message must
//! be the bytes of the very input message at its place: not an equal value written anew, and
//! not the bytes of an equal message elsewhere in the history. Every number literal of the
//! output must also be one of the input's, as written.

use std::ops::Range;

use cutctx::formats::Format;
use serde_json::Value;

/// What masking leaves in a tool result: the stub the masking policies write.
pub(crate) const MASK_MARK: &str = "masked by cutctx";

/// The message a format puts first when the compaction dropped the one that must open the
/// list (`cutctx_formats`' lead-in): made, not kept.
pub(crate) const LEAD_IN: &str =
    "[Earlier messages of this conversation were compacted by cutctx.]";

/// Where a JSON text's parts lie.
#[derive(Debug)]
pub(crate) struct Scan {
    /// The top-level object's members, as (key as written, value's span); `None` for a list.
    pub(crate) fields: Option<Vec<(String, Range<usize>)>>,
    /// The message list's elements.
    pub(crate) items: Vec<Range<usize>>,
    /// Every number literal.
    pub(crate) numbers: Vec<Range<usize>>,
}

struct Scanner<'t> {
    b: &'t [u8],
    i: usize,
    numbers: Vec<Range<usize>>,
}

impl Scanner<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\n' | b'\r' | b'\t') {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }

    fn string(&mut self) -> Result<Range<usize>, String> {
        self.ws();
        let start = self.i;
        self.expect(b'"')?;
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'\\' => self.i += 1,
                b'"' => return Ok(start..self.i),
                _ => {}
            }
        }
        Err("an unterminated string".to_owned())
    }

    /// One value; its span, and with `members`/`elements` its parts.
    fn value(
        &mut self,
        mut members: Option<&mut Vec<(Range<usize>, Range<usize>)>>,
        mut elements: Option<&mut Vec<Range<usize>>>,
    ) -> Result<Range<usize>, String> {
        self.ws();
        let start = self.i;
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(start..self.i);
                }
                loop {
                    let key = self.string()?;
                    self.expect(b':')?;
                    let value = self.value(None, None)?;
                    if let Some(m) = members.as_deref_mut() {
                        m.push((key, value));
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(start..self.i);
                        }
                        _ => return Err(format!("a bad object at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(start..self.i);
                }
                loop {
                    let item = self.value(None, None)?;
                    if let Some(e) = elements.as_deref_mut() {
                        e.push(item);
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(start..self.i);
                        }
                        _ => return Err(format!("a bad array at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => self.string(),
            Some(_) => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'
                    )
                {
                    self.i += 1;
                }
                if matches!(self.b[start], b'-' | b'0'..=b'9') {
                    self.numbers.push(start..self.i);
                }
                Ok(start..self.i)
            }
            None => Err("unexpected end".to_owned()),
        }
    }
}

/// Scans `text`, a request of list key `list_key` or a bare list.
pub(crate) fn scan(text: &str, list_key: &str) -> Result<Scan, String> {
    let mut s = Scanner {
        b: text.as_bytes(),
        i: 0,
        numbers: Vec::new(),
    };
    s.ws();
    let mut members = Vec::new();
    let mut items = Vec::new();
    let fields = if s.b.get(s.i) == Some(&b'[') {
        s.value(None, Some(&mut items))?;
        None
    } else {
        s.value(Some(&mut members), None)?;
        let fields: Vec<(String, Range<usize>)> = members
            .into_iter()
            .map(|(k, v)| (text[k.start + 1..k.end - 1].to_owned(), v))
            .collect();
        if let Some((_, span)) = fields.iter().find(|(k, _)| k == list_key) {
            let mut sub = Scanner {
                b: text.as_bytes(),
                i: span.start,
                numbers: Vec::new(),
            };
            sub.value(None, Some(&mut items))?;
        }
        Some(fields)
    };
    s.ws();
    if s.i != text.len() {
        return Err(format!("text after the value at byte {}", s.i));
    }
    Ok(Scan {
        fields,
        items,
        numbers: s.numbers,
    })
}

/// What a compaction did, as the check explained it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Outcome {
    pub(crate) kept: usize,
    pub(crate) masked: usize,
    pub(crate) dropped: usize,
}

impl Outcome {
    /// Whether the compaction changed anything.
    pub(crate) const fn fired(self) -> bool {
        self.masked + self.dropped > 0
    }
}

/// Whether `m` is a tool result message of `format` (what masking may change).
fn is_result(format: Format, m: &Value) -> bool {
    match format {
        Format::OpenAiChat => m["role"] == "tool",
        Format::OpenAiResponses => m["type"] == "function_call_output",
        Format::Anthropic => m["content"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result")),
    }
}

/// The call ids `m` names, sorted.
fn ids(m: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    if let ("tool_use_id" | "tool_call_id" | "call_id" | "id", Some(s)) =
                        (k.as_str(), v.as_str())
                    {
                        out.push(s.to_owned());
                    }
                    walk(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(m, &mut out);
    out.sort();
    out
}

/// Up to 400 characters of `t`, for a message.
fn clip(t: &str) -> String {
    if t.chars().count() <= 400 {
        t.to_owned()
    } else {
        format!("{}…", t.chars().take(400).collect::<String>())
    }
}

/// Checks `output` (one compacted request, a trailing newline allowed) against `input` (the
/// request it came from) in `format`: valid JSON, every top-level field but the list with the
/// bytes it came with, every kept message the bytes of its own input message, every number
/// literal one the input wrote. The error says which part, with its bytes before and after.
pub(crate) fn check(format: Format, input: &str, output: &str) -> Result<Outcome, String> {
    let key = crate::requests::list_key(format);
    let output = output.strip_suffix('\n').unwrap_or(output);
    serde_json::from_str::<Value>(output).map_err(|e| format!("the output is not JSON: {e}"))?;
    let a = scan(input, key).map_err(|e| format!("the input does not scan: {e}"))?;
    let b = scan(output, key).map_err(|e| format!("the output does not scan: {e}"))?;

    // Top-level fields.
    match (&a.fields, &b.fields) {
        (None, None) => {}
        (Some(fa), Some(fb)) => {
            for (k, span) in fa.iter().filter(|(k, _)| k != key) {
                let Some((_, out)) = fb.iter().find(|(kb, _)| kb == k) else {
                    return Err(format!("top-level field {k:?} is missing from the output"));
                };
                if input[span.clone()] != output[out.clone()] {
                    return Err(format!(
                        "top-level field {k:?} changed:\n  before: {}\n  after:  {}",
                        clip(&input[span.clone()]),
                        clip(&output[out.clone()])
                    ));
                }
            }
        }
        _ => return Err("the output's shape (a list or an object) is not the input's".to_owned()),
    }

    // Messages.
    let parse = |t: &str| serde_json::from_str::<Value>(t).map_err(|e| e.to_string());
    let ins: Vec<(&str, Value)> = a
        .items
        .iter()
        .map(|r| parse(&input[r.clone()]).map(|v| (&input[r.clone()], v)))
        .collect::<Result<_, _>>()?;
    // A lead-in message is made by the compaction; the rest are explained below.
    let outs: Vec<(&str, Value)> = b
        .items
        .iter()
        .filter(|r| !output[(*r).clone()].contains(LEAD_IN))
        .map(|r| parse(&output[r.clone()]).map(|v| (&output[r.clone()], v)))
        .collect::<Result<_, _>>()?;
    let (n, m) = (ins.len(), outs.len());
    if m > n {
        return Err(format!("the output has {m} messages, the input {n}"));
    }
    let masked = |o: &(&str, Value)| o.0.contains(MASK_MARK);
    // The output is the input with some results masked and some messages dropped (a firing
    // keeps pinned messages, such as the task and the results the latest answers refer to,
    // between dropped runs): a subsequence, each message kept byte for byte or masked in
    // place. The leftmost embedding exists whenever any does.
    let fits = |k: usize, j: usize, bytes: bool| {
        if masked(&outs[k]) {
            is_result(format, &ins[j].1) && ids(&outs[k].1) == ids(&ins[j].1)
        } else if bytes {
            outs[k].0 == ins[j].0
        } else {
            outs[k].1 == ins[j].1
        }
    };
    let embed = |bytes: bool| -> Option<Vec<usize>> {
        let mut at = Vec::with_capacity(m);
        let mut j = 0;
        for k in 0..m {
            while j < n && !fits(k, j, bytes) {
                j += 1;
            }
            if j == n {
                return None;
            }
            at.push(j);
            j += 1;
        }
        Some(at)
    };
    if embed(true).is_some() {
        let masked_count = outs.iter().filter(|o| masked(o)).count();
        check_numbers(input, output, &a, &b)?;
        return Ok(Outcome {
            kept: m - masked_count,
            masked: masked_count,
            dropped: n - m,
        });
    }
    match embed(false) {
        Some(at) => Err(at
            .iter()
            .enumerate()
            .filter(|&(k, &j)| !masked(&outs[k]) && outs[k].0 != ins[j].0)
            .map(|(k, &j)| {
                let elsewhere = ins
                    .iter()
                    .position(|(t, _)| *t == outs[k].0)
                    .map_or_else(String::new, |i| format!(" (the bytes of input message {i})"));
                format!(
                    "output message {k} is input message {j} kept, with other bytes{elsewhere}:\n  before: {}\n  after:  {}",
                    clip(ins[j].0),
                    clip(outs[k].0)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")),
        None => Err(format!(
            "the output's {m} messages are not the input's {n} with some masked and some dropped:\n{}",
            outs.iter()
                .enumerate()
                .map(|(k, o)| format!("  output {k}: {}", clip(o.0)))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    }
}

/// Every number literal of the output is one the input wrote.
fn check_numbers(input: &str, output: &str, a: &Scan, b: &Scan) -> Result<(), String> {
    let written: std::collections::BTreeSet<&str> =
        a.numbers.iter().map(|r| &input[r.clone()]).collect();
    let new: Vec<&str> = b
        .numbers
        .iter()
        .map(|r| &output[r.clone()])
        .filter(|t| !written.contains(t))
        .collect();
    if new.is_empty() {
        Ok(())
    } else {
        Err(format!("number literals the input never wrote: {new:?}"))
    }
}
