//! The generator of the lossless tests: provider requests (OpenAI Chat, OpenAI Responses,
//! Anthropic) written as text, never through serde_json, so that they hold what a parse and a
//! rewrite would lose: integers beyond 64 bits and 30 digits long, `1e2`, `1E+2`, `-0`, `0.10`,
//! string escapes (`\u00e9`, `\/`, a surrogate pair), keys out of order, every spacing. Tool
//! calls carry such values in their inputs (Anthropic `tool_use.input`) or arguments strings
//! (OpenAI), top-level fields (`metadata`, `client_metadata`, `tools`, `system`, ...) hold
//! them too, and enough tool results that half the request's tokens force a compaction.
//! Optional "twins" repeat a text message later in the conversation with other bytes and an
//! equal serde_json value (another escape, key order, spacing, or a number beyond `f64`).

use cutctx::formats::Format;
use proptest::prelude::*;

/// What one generated request is made from: the knobs proptest shrinks, and the seed of
/// every leaf.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) format: Format,
    /// Tool-call exchanges before the closing ones.
    pub(crate) exchanges: usize,
    /// How the text is spaced.
    pub(crate) style: Style,
    /// A bare message list rather than a request object (not for the proxy).
    pub(crate) bare: bool,
    /// Text messages repeated later with other bytes and an equal serde_json value.
    pub(crate) twins: bool,
    pub(crate) seed: u64,
}

/// How a request's text is spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// `{"a":1,"b":2}`
    Compact,
    /// `{"a": 1, "b": 2}`
    Spaced,
    /// `{ "a" :1 ,"b" : 2 }`
    Loose,
    /// Indented by two spaces, one member a line.
    Pretty,
}

/// Requests of `format` (any format when `None`): `bare` lists allowed or not, any style or
/// single-line styles only (for a JSONL line), and twins with probability `twins` (0 for
/// none, 1 for always).
pub(crate) fn spec(
    format: Option<Format>,
    bare: bool,
    one_line: bool,
    twins: f64,
) -> impl Strategy<Value = Spec> {
    let formats = match format {
        Some(f) => vec![f],
        None => Format::ALL.to_vec(),
    };
    let styles = if one_line {
        vec![Style::Compact, Style::Spaced, Style::Loose]
    } else {
        vec![Style::Compact, Style::Spaced, Style::Loose, Style::Pretty]
    };
    (
        proptest::sample::select(formats),
        4usize..9,
        proptest::sample::select(styles),
        if bare {
            proptest::bool::weighted(0.25).boxed()
        } else {
            Just(false).boxed()
        },
        proptest::bool::weighted(twins),
        any::<u64>(),
    )
        .prop_map(|(format, exchanges, style, bare, twins, seed)| Spec {
            format,
            exchanges,
            style,
            bare,
            twins,
            seed,
        })
}

/// Number literals a parse and rewrite would change (`1e2` becomes `100.0`, `-0` becomes `0`,
/// a 23-digit integer `1.2345678901234568e22`), and a few plain ones.
pub(crate) const NUMBERS: &[&str] = &[
    "12345678901234567890123",
    "123456789012345678901234567890",
    "1e2",
    "1E+2",
    "-0",
    "0.10",
    "-0.0",
    "1.5e-7",
    "2E-3",
    "18446744073709551616",
    "-9223372036854775809",
    "0.1000000000000000055511151231257827",
    "3.14159265358979323846264338327950",
    "100",
    "7",
];

/// String contents as written (between the quotes): escapes a rewrite would write otherwise.
pub(crate) const STRINGS: &[&str] = &[
    r"caf\u00e9",
    r"\/path\/to\/file",
    r"smile \ud83d\ude00",
    r"tab\tand\nnewline",
    r#"quote \" and backslash \\"#,
    r"\u0041BC",
    "raw é and 日本語",
    r"line\u2028separator",
    r"upper \u00E9 hex",
    r"\b\f\r controls",
    "plain words",
];

/// Object keys, written in whatever order they are drawn.
const KEYS: &[&str] = &[
    "order_id", "price", "zeta", "alpha", "Mid", "_x", "qty", "note", "b", "a", "count",
];

/// A JSON value as written: literals keep their text.
#[derive(Debug, Clone)]
pub(crate) enum J {
    /// A number, `true`, `false`, `null`, or a string with its quotes, as written.
    Lit(String),
    Arr(Vec<J>),
    /// Members in the order written; keys as written between their quotes.
    Obj(Vec<(String, J)>),
}

fn s(raw: &str) -> J {
    J::Lit(format!("\"{raw}\""))
}

fn lit(raw: &str) -> J {
    J::Lit(raw.to_owned())
}

fn obj(members: Vec<(&str, J)>) -> J {
    J::Obj(
        members
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// splitmix64: every leaf of a request from its seed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).expect("below n")
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn shuffle<T>(&mut self, xs: &mut [T]) {
        for i in (1..xs.len()).rev() {
            let j = self.below(i + 1);
            xs.swap(i, j);
        }
    }
}

/// An object of 2 to 5 members in no sorted order, holding numbers, escaped strings, a nested
/// object or an array; a key spelled with an escape now and then.
fn payload(rng: &mut Rng, depth: usize) -> J {
    let mut keys: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
    rng.shuffle(&mut keys);
    let n = 2 + rng.below(4);
    let mut members = Vec::new();
    for key in keys.into_iter().take(n) {
        let key = if rng.chance(8) {
            format!(r"{key}_caf\u00e9")
        } else {
            key
        };
        let value = match rng.below(10) {
            0..=5 => lit(rng.pick(NUMBERS)),
            6 | 7 => s(rng.pick(STRINGS)),
            8 if depth < 2 => payload(rng, depth + 1),
            _ => J::Arr(
                (0..1 + rng.below(3))
                    .map(|_| lit(rng.pick(NUMBERS)))
                    .collect(),
            ),
        };
        members.push((key, value));
    }
    J::Obj(members)
}

/// The issue's own input, first in every request's tool calls now and then.
fn the_issue_input() -> J {
    obj(vec![
        ("order_id", lit("12345678901234567890123")),
        ("price", lit("1e2")),
        ("discount", lit("-0")),
    ])
}

/// Members in a random order.
fn shuffled(mut members: Vec<(&str, J)>, rng: &mut Rng) -> J {
    rng.shuffle(&mut members);
    obj(members)
}

/// A tool result's text: long enough that masking it pays, with escapes.
fn result_text(rng: &mut Rng, i: usize) -> J {
    let n = 6 + rng.below(24);
    let mut text = format!("result {i}: ");
    for line in 0..n {
        text.push_str(&format!(
            "line {line} of the output of step {i}, {} \\u00e9 \\/ value {}\\n",
            rng.pick(&["alpha", "beta", "gamma", "delta"]),
            rng.below(1000)
        ));
    }
    s(&text)
}

/// `raw`'s text as a JSON string literal's contents (the OpenAI arguments string), `/` written
/// `\/` now and then.
fn as_string_contents(raw: &str, slash: bool) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' if slash => out.push_str("\\/"),
            c => out.push(c),
        }
    }
    out
}

/// A text message's twin texts: an equal value written with other bytes.
const TWIN_TEXTS: &[&[&str]] = &[
    &[r"noted caf\u00e9", "noted café", r"noted caf\u00E9"],
    &[r"go on \/ next", "go on / next"],
    &[r"again \u0041", "again A"],
];

/// The number pairs a twin's vendor field can hold: equal as `f64`, not as numbers.
const TWIN_NUMBERS: &[&[&str]] = &[
    &[
        "12345678901234567890123",
        "12345678901234567890124",
        "12345678901234567890122",
    ],
    &["1e2", "100.0", "1E+2"],
];

/// The messages of a twin family: one text, written each time with another variant.
struct Twins {
    texts: &'static [&'static str],
    numbers: Option<&'static [&'static str]>,
    seen: usize,
}

impl Twins {
    fn new(rng: &mut Rng) -> Self {
        Self {
            texts: rng.pick(TWIN_TEXTS),
            numbers: rng.chance(50).then(|| rng.pick(TWIN_NUMBERS)),
            seen: 0,
        }
    }

    /// The next variant: its text and, when the family has one, its vendor number.
    fn next(&mut self) -> (&'static str, Option<&'static str>) {
        let i = self.seen;
        self.seen += 1;
        (
            self.texts[i % self.texts.len()],
            self.numbers.map(|n| n[i % n.len()]),
        )
    }
}

/// One message's members in format `format` for a text message of `role`.
fn text_message(format: Format, role: &str, text: &str, vendor: Option<&str>, rng: &mut Rng) -> J {
    let mut members = match format {
        Format::OpenAiResponses if role == "assistant" => vec![
            ("type", s("message")),
            ("role", s(role)),
            (
                "content",
                J::Arr(vec![shuffled(
                    vec![
                        ("type", s("output_text")),
                        ("text", s(text)),
                        ("annotations", J::Arr(vec![])),
                    ],
                    rng,
                )]),
            ),
        ],
        Format::OpenAiResponses if rng.chance(50) => vec![
            ("type", s("message")),
            ("role", s(role)),
            (
                "content",
                J::Arr(vec![shuffled(
                    vec![("type", s("input_text")), ("text", s(text))],
                    rng,
                )]),
            ),
        ],
        Format::Anthropic if rng.chance(30) => vec![
            ("role", s(role)),
            (
                "content",
                J::Arr(vec![shuffled(
                    vec![("type", s("text")), ("text", s(text))],
                    rng,
                )]),
            ),
        ],
        _ => vec![("role", s(role)), ("content", s(text))],
    };
    if let Some(n) = vendor {
        members.push(("x_meta", obj(vec![("n", lit(n))])));
    }
    shuffled(members, rng)
}

/// A request's text and what it was made of.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) format: Format,
    pub(crate) text: String,
    /// How many messages (items) its list holds.
    pub(crate) messages: usize,
    pub(crate) bare: bool,
}

/// The list key of `format`'s request object.
pub(crate) const fn list_key(format: Format) -> &'static str {
    match format {
        Format::OpenAiResponses => "input",
        Format::OpenAiChat | Format::Anthropic => "messages",
    }
}

/// The request `spec` describes.
pub(crate) fn request(spec: &Spec) -> Request {
    let mut rng = Rng::new(spec.seed);
    let format = spec.format;
    let mut messages = Vec::new();
    let mut twins = Twins::new(&mut rng);
    if format != Format::Anthropic && rng.chance(50) {
        let role = if format == Format::OpenAiChat {
            "system"
        } else {
            "developer"
        };
        messages.push(text_message(
            format,
            role,
            rng_string(&mut rng),
            None,
            &mut rng,
        ));
    }
    messages.push(text_message(
        format,
        "user",
        r"Look up the orders, caf\u00e9 \/ \ud83d\ude00",
        None,
        &mut rng,
    ));
    let issue_at = rng.below(spec.exchanges + 1);
    for i in 0..=spec.exchanges {
        // The last exchange is small, so that the protected recent turns fit half the budget.
        let last = i == spec.exchanges;
        let calls = if last { 1 } else { 1 + rng.below(2) };
        let inputs: Vec<J> = (0..calls)
            .map(|k| {
                if i == issue_at && k == 0 {
                    the_issue_input()
                } else {
                    payload(&mut rng, 0)
                }
            })
            .collect();
        let results: Vec<J> = (0..calls)
            .map(|_| {
                if last {
                    s(r"ok \u00e9")
                } else {
                    result_text(&mut rng, i)
                }
            })
            .collect();
        exchange(
            format,
            &mut rng,
            spec.style,
            i,
            inputs,
            results,
            &mut messages,
        );
        if spec.twins && !last && rng.chance(60) {
            let (text, n) = twins.next();
            messages.push(text_message(format, "assistant", text, n, &mut rng));
            let (text, n) = twins.next();
            messages.push(text_message(format, "user", text, n, &mut rng));
        }
    }
    messages.push(text_message(
        format,
        "assistant",
        r"Done: caf\u00e9 \ud83d\ude00",
        None,
        &mut rng,
    ));
    messages.push(text_message(format, "user", "thanks", None, &mut rng));
    let count = messages.len();
    let list = J::Arr(messages);
    let doc = if spec.bare {
        list
    } else {
        let mut fields = top_fields(format, &mut rng);
        let at = rng.below(fields.len() + 1);
        fields.insert(at, (list_key(format), list));
        obj(fields)
    };
    let mut text = String::new();
    write(&doc, spec.style, 0, &mut text);
    if spec.style == Style::Pretty {
        text.push('\n');
    }
    Request {
        format,
        text,
        messages: count,
        bare: spec.bare,
    }
}

fn rng_string(rng: &mut Rng) -> &'static str {
    rng.pick(STRINGS)
}

/// One exchange: the assistant's calls with `inputs`, then their `results`.
fn exchange(
    format: Format,
    rng: &mut Rng,
    style: Style,
    i: usize,
    inputs: Vec<J>,
    results: Vec<J>,
    messages: &mut Vec<J>,
) {
    let ids: Vec<String> = (0..inputs.len()).map(|k| format!("call_{i}_{k}")).collect();
    // An arguments string holds its object's text as written, in the request's spacing.
    let arguments = |rng: &mut Rng, input: &J| {
        let mut raw = String::new();
        write(
            input,
            if style == Style::Pretty {
                Style::Spaced
            } else {
                style
            },
            0,
            &mut raw,
        );
        s(&as_string_contents(&raw, rng.chance(30)))
    };
    match format {
        Format::Anthropic => {
            let mut blocks = Vec::new();
            if rng.chance(40) {
                blocks.push(shuffled(
                    vec![("type", s("text")), ("text", s(rng_string(rng)))],
                    rng,
                ));
            }
            for (id, input) in ids.iter().zip(inputs) {
                blocks.push(shuffled(
                    vec![
                        ("type", s("tool_use")),
                        ("id", s(&format!("toolu_{id}"))),
                        ("name", s("lookup")),
                        ("input", input),
                    ],
                    rng,
                ));
            }
            messages.push(shuffled(
                vec![("role", s("assistant")), ("content", J::Arr(blocks))],
                rng,
            ));
            let blocks = ids
                .iter()
                .zip(results)
                .map(|(id, r)| {
                    shuffled(
                        vec![
                            ("type", s("tool_result")),
                            ("tool_use_id", s(&format!("toolu_{id}"))),
                            ("content", r),
                        ],
                        rng,
                    )
                })
                .collect();
            messages.push(shuffled(
                vec![("role", s("user")), ("content", J::Arr(blocks))],
                rng,
            ));
        }
        Format::OpenAiChat => {
            let calls = ids
                .iter()
                .zip(&inputs)
                .map(|(id, input)| {
                    let function = shuffled(
                        vec![("name", s("lookup")), ("arguments", arguments(rng, input))],
                        rng,
                    );
                    shuffled(
                        vec![
                            ("id", s(id)),
                            ("type", s("function")),
                            ("function", function),
                        ],
                        rng,
                    )
                })
                .collect();
            let content = if rng.chance(50) {
                lit("null")
            } else {
                s(rng_string(rng))
            };
            let mut members = vec![
                ("role", s("assistant")),
                ("content", content),
                ("tool_calls", J::Arr(calls)),
            ];
            if rng.chance(40) {
                members.push(("x_vendor", payload(rng, 1)));
            }
            messages.push(shuffled(members, rng));
            for (id, r) in ids.iter().zip(results) {
                messages.push(shuffled(
                    vec![("role", s("tool")), ("tool_call_id", s(id)), ("content", r)],
                    rng,
                ));
            }
        }
        Format::OpenAiResponses => {
            for (k, (id, input)) in ids.iter().zip(&inputs).enumerate() {
                let args = arguments(rng, input);
                messages.push(shuffled(
                    vec![
                        ("type", s("function_call")),
                        ("id", s(&format!("fc_{i}_{k}"))),
                        ("call_id", s(id)),
                        ("name", s("lookup")),
                        ("arguments", args),
                        ("status", s("completed")),
                    ],
                    rng,
                ));
            }
            for (id, r) in ids.iter().zip(results) {
                messages.push(shuffled(
                    vec![
                        ("type", s("function_call_output")),
                        ("call_id", s(id)),
                        ("output", r),
                    ],
                    rng,
                ));
            }
        }
    }
}

/// The top-level fields of a request object but its list, in a random order.
fn top_fields(format: Format, rng: &mut Rng) -> Vec<(&'static str, J)> {
    let schema = || {
        obj(vec![
            ("type", s("object")),
            (
                "properties",
                obj(vec![
                    (
                        "order_id",
                        obj(vec![
                            ("type", s("number")),
                            ("maximum", lit("1E+2")),
                            ("minimum", lit("-0")),
                        ]),
                    ),
                    (
                        "price",
                        obj(vec![("type", s("number")), ("multipleOf", lit("0.10"))]),
                    ),
                ]),
            ),
            ("required", J::Arr(vec![s("order_id")])),
        ])
    };
    let mut fields: Vec<(&'static str, J)> = vec![
        ("model", s("model-x")),
        (
            "metadata",
            obj(vec![
                ("user_id", s(r"user \u00e9 \/ 42")),
                ("trace", s(r"\ud83d\ude00")),
            ]),
        ),
        ("client_metadata", payload(rng, 0)),
        (
            "temperature",
            lit(rng.pick(&["0.10", "1E+0", "0.7", "1e-1"])),
        ),
    ];
    match format {
        Format::Anthropic => {
            fields.push(("max_tokens", lit("64")));
            fields.push((
                "system",
                s(r"You look up orders. caf\u00e9 \/ \ud83d\ude00"),
            ));
            fields.push((
                "tools",
                J::Arr(vec![obj(vec![
                    ("name", s("lookup")),
                    ("description", s(r"Look up an order \u00e9")),
                    ("input_schema", schema()),
                ])]),
            ));
        }
        Format::OpenAiChat => {
            fields.push((
                "tools",
                J::Arr(vec![obj(vec![
                    ("type", s("function")),
                    (
                        "function",
                        obj(vec![
                            ("name", s("lookup")),
                            ("description", s(r"Look up an order \u00e9")),
                            ("parameters", schema()),
                        ]),
                    ),
                ])]),
            ));
        }
        Format::OpenAiResponses => {
            fields.push(("instructions", s(r"You look up orders. caf\u00e9 \/")));
            fields.push((
                "tools",
                J::Arr(vec![obj(vec![
                    ("type", s("function")),
                    ("name", s("lookup")),
                    ("description", s(r"Look up an order \u00e9")),
                    ("parameters", schema()),
                    ("strict", lit("false")),
                ])]),
            ));
        }
    }
    rng.shuffle(&mut fields);
    fields
}

/// `j` written in `style` at nesting `depth`.
pub(crate) fn write(j: &J, style: Style, depth: usize, out: &mut String) {
    let (colon, comma, pad) = match style {
        Style::Compact => (":", ",", ""),
        Style::Spaced | Style::Pretty => (": ", ", ", ""),
        Style::Loose => (" :", " ,", " "),
    };
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    match j {
        J::Lit(t) => out.push_str(t),
        J::Arr(_) | J::Obj(_) if is_empty(j) => {
            out.push_str(if matches!(j, J::Arr(_)) { "[]" } else { "{}" });
        }
        J::Arr(items) => {
            out.push('[');
            out.push_str(pad);
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(if style == Style::Pretty { "," } else { comma });
                }
                if style == Style::Pretty {
                    newline(out, depth + 1);
                }
                write(item, style, depth + 1, out);
            }
            if style == Style::Pretty {
                newline(out, depth);
            }
            out.push_str(pad);
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            out.push_str(pad);
            for (n, (k, v)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(if style == Style::Pretty { "," } else { comma });
                }
                if style == Style::Pretty {
                    newline(out, depth + 1);
                }
                out.push('"');
                out.push_str(k);
                out.push('"');
                out.push_str(colon);
                write(v, style, depth + 1, out);
            }
            if style == Style::Pretty {
                newline(out, depth);
            }
            out.push_str(pad);
            out.push('}');
        }
    }
}

fn is_empty(j: &J) -> bool {
    match j {
        J::Arr(items) => items.is_empty(),
        J::Obj(members) => members.is_empty(),
        J::Lit(_) => false,
    }
}
