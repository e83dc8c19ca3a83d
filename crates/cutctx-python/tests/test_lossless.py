"""Lossless compaction through the Python package: what a compaction keeps leaves with the bytes
it came with.

A deterministic seeded generator writes provider requests (OpenAI Chat, OpenAI Responses,
Anthropic) as text, never through ``json.dumps``, holding what a parse and a rewrite would
lose: integers beyond 64 bits and 30 digits long, ``1e2``, ``1E+2``, ``-0``, ``0.10``, string
escapes (``\\u00e9``, ``\\/``, a surrogate pair), keys out of order, every spacing; in tool-call
inputs (Anthropic ``tool_use.input``), arguments strings (OpenAI), message fields and top-level
fields (``metadata``, ``client_metadata``, ``tools``, ...). Each goes through
``cutctx.formats.compact_json``, ``cutctx.formats.compact_batch`` and ``cutctx.Session.prepare``
(JSON text in, JSON bytes out) under about half its tokens, and each output is held to its
input: every top-level field but the message list byte for byte, and every kept message the
bytes of its own input message (masked tool results and a dropped run of the oldest messages
aside), and no number literal the input did not write. The Rust twin of this test, over the
command line, the library, ``cutctx batch``, ``cutctx session`` and the proxy, is
``crates/cutctx-cli/tests/lossless``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from cutctx import Session
from cutctx.formats import (
    Format,
    FormatCompactionError,
    compact_batch,
    compact_json,
    estimate_json,
)

FORMATS: list[Format] = ["openai-chat", "openai-responses", "anthropic"]
CHAIN = '{"name":"chain","policies":[{"name":"observation_masking"},{"name":"drop_oldest"}]}'
MASK_MARK = "masked by cutctx"
LEAD_IN = "[Earlier messages of this conversation were compacted by cutctx.]"

NUMBERS = [
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
]
# String contents as written between the quotes.
STRINGS = [
    r"caf\u00e9",
    r"\/path\/to\/file",
    r"smile \ud83d\ude00",
    r"tab\tand\nnewline",
    r"quote \" and backslash \\",
    r"\u0041BC",
    "raw é and 日本語",
    r"line\u2028separator",
    r"upper \u00E9 hex",
    r"\b\f\r controls",
    "plain words",
]
KEYS = ["order_id", "price", "zeta", "alpha", "Mid", "_x", "qty", "note", "b", "a", "count"]
# A text written with other bytes and an equal value; numbers equal as floats, not as numbers.
TWIN_TEXTS = [
    [r"noted caf\u00e9", "noted café", r"noted caf\u00E9"],
    [r"go on \/ next", "go on / next"],
    [r"again \u0041", "again A"],
]
TWIN_NUMBERS = [
    ["12345678901234567890123", "12345678901234567890124", "12345678901234567890122"],
    ["1e2", "100.0", "1E+2"],
]


# A value as written: ("lit", text) | ("arr", [values]) | ("obj", [(raw key, value)]).
def lit(text: str) -> tuple[str, Any]:
    return ("lit", text)


def s(raw: str) -> tuple[str, Any]:
    return ("lit", f'"{raw}"')


def obj(members: list[tuple[str, Any]]) -> tuple[str, Any]:
    return ("obj", members)


def arr(items: list[Any]) -> tuple[str, Any]:
    return ("arr", items)


def shuffled(rng: random.Random, members: list[tuple[str, Any]]) -> tuple[str, Any]:
    members = list(members)
    rng.shuffle(members)
    return obj(members)


def write(j: tuple[str, Any], style: str, depth: int = 0) -> str:
    kind, v = j
    if kind == "lit":
        return str(v)
    if not v:
        return "[]" if kind == "arr" else "{}"
    colon, comma, pad = {
        "compact": (":", ",", ""),
        "spaced": (": ", ", ", ""),
        "pretty": (": ", ",", ""),
        "loose": (" :", " ,", " "),
    }[style]
    nl = (lambda d: "\n" + "  " * d) if style == "pretty" else (lambda d: "")
    if kind == "arr":
        parts = [nl(depth + 1) + write(x, style, depth + 1) for x in v]
        return "[" + pad + comma.join(parts) + nl(depth) + pad + "]"
    parts = [nl(depth + 1) + f'"{k}"' + colon + write(x, style, depth + 1) for k, x in v]
    return "{" + pad + comma.join(parts) + nl(depth) + pad + "}"


def payload(rng: random.Random, depth: int = 0) -> tuple[str, Any]:
    keys = list(KEYS)
    rng.shuffle(keys)
    members: list[tuple[str, Any]] = []
    for key in keys[: 2 + rng.randrange(4)]:
        if rng.randrange(100) < 8:
            key = key + r"_caf\u00e9"
        roll = rng.randrange(10)
        if roll <= 5:
            value = lit(rng.choice(NUMBERS))
        elif roll <= 7:
            value = s(rng.choice(STRINGS))
        elif roll == 8 and depth < 2:
            value = payload(rng, depth + 1)
        else:
            value = arr([lit(rng.choice(NUMBERS)) for _ in range(1 + rng.randrange(3))])
        members.append((key, value))
    return obj(members)


def string_contents(raw: str, slash: bool) -> str:
    out = raw.replace("\\", "\\\\").replace('"', '\\"')
    return out.replace("/", "\\/") if slash else out


def text_message(
    fmt: str, rng: random.Random, role: str, text: str, vendor: str | None = None
) -> tuple[str, Any]:
    if fmt == "openai-responses" and role == "assistant":
        part = shuffled(
            rng, [("type", s("output_text")), ("text", s(text)), ("annotations", arr([]))]
        )
        members = [("type", s("message")), ("role", s(role)), ("content", arr([part]))]
    elif fmt == "openai-responses" and rng.randrange(2):
        part = shuffled(rng, [("type", s("input_text")), ("text", s(text))])
        members = [("type", s("message")), ("role", s(role)), ("content", arr([part]))]
    elif fmt == "anthropic" and rng.randrange(100) < 30:
        part = shuffled(rng, [("type", s("text")), ("text", s(text))])
        members = [("role", s(role)), ("content", arr([part]))]
    else:
        members = [("role", s(role)), ("content", s(text))]
    if vendor is not None:
        members.append(("x_meta", obj([("n", lit(vendor))])))
    return shuffled(rng, members)


def result_text(rng: random.Random, i: int) -> tuple[str, Any]:
    lines = [f"result {i}: "]
    for line in range(6 + rng.randrange(24)):
        word = rng.choice(["alpha", "beta", "gamma", "delta"])
        lines.append(
            f"line {line} of the output of step {i}, {word} \\u00e9 \\/ value {rng.randrange(1000)}\\n"
        )
    return s("".join(lines))


def exchange(
    fmt: str, rng: random.Random, style: str, i: int, inputs: list[Any], results: list[Any]
) -> list[Any]:
    ids = [f"call_{i}_{k}" for k in range(len(inputs))]
    arg_style = "spaced" if style == "pretty" else style

    def arguments(j: Any) -> Any:
        return s(string_contents(write(j, arg_style), rng.randrange(100) < 30))

    out: list[Any] = []
    if fmt == "anthropic":
        blocks = []
        if rng.randrange(100) < 40:
            blocks.append(shuffled(rng, [("type", s("text")), ("text", s(rng.choice(STRINGS)))]))
        for cid, j in zip(ids, inputs):
            blocks.append(
                shuffled(
                    rng,
                    [
                        ("type", s("tool_use")),
                        ("id", s(f"toolu_{cid}")),
                        ("name", s("lookup")),
                        ("input", j),
                    ],
                )
            )
        out.append(shuffled(rng, [("role", s("assistant")), ("content", arr(blocks))]))
        results_blocks = [
            shuffled(
                rng,
                [("type", s("tool_result")), ("tool_use_id", s(f"toolu_{cid}")), ("content", r)],
            )
            for cid, r in zip(ids, results)
        ]
        out.append(shuffled(rng, [("role", s("user")), ("content", arr(results_blocks))]))
    elif fmt == "openai-chat":
        calls = []
        for cid, j in zip(ids, inputs):
            function = shuffled(rng, [("name", s("lookup")), ("arguments", arguments(j))])
            calls.append(
                shuffled(rng, [("id", s(cid)), ("type", s("function")), ("function", function)])
            )
        content = lit("null") if rng.randrange(2) else s(rng.choice(STRINGS))
        members = [("role", s("assistant")), ("content", content), ("tool_calls", arr(calls))]
        if rng.randrange(100) < 40:
            members.append(("x_vendor", payload(rng, 1)))
        out.append(shuffled(rng, members))
        for cid, r in zip(ids, results):
            out.append(
                shuffled(rng, [("role", s("tool")), ("tool_call_id", s(cid)), ("content", r)])
            )
    else:
        for k, (cid, j) in enumerate(zip(ids, inputs)):
            out.append(
                shuffled(
                    rng,
                    [
                        ("type", s("function_call")),
                        ("id", s(f"fc_{i}_{k}")),
                        ("call_id", s(cid)),
                        ("name", s("lookup")),
                        ("arguments", arguments(j)),
                        ("status", s("completed")),
                    ],
                )
            )
        for cid, r in zip(ids, results):
            out.append(
                shuffled(
                    rng,
                    [("type", s("function_call_output")), ("call_id", s(cid)), ("output", r)],
                )
            )
    return out


def top_fields(fmt: str, rng: random.Random) -> list[tuple[str, Any]]:
    schema = obj(
        [
            ("type", s("object")),
            (
                "properties",
                obj(
                    [
                        (
                            "order_id",
                            obj(
                                [
                                    ("type", s("number")),
                                    ("maximum", lit("1E+2")),
                                    ("minimum", lit("-0")),
                                ]
                            ),
                        ),
                        ("price", obj([("type", s("number")), ("multipleOf", lit("0.10"))])),
                    ]
                ),
            ),
            ("required", arr([s("order_id")])),
        ]
    )
    fields: list[tuple[str, Any]] = [
        ("model", s("model-x")),
        ("metadata", obj([("user_id", s(r"user \u00e9 \/ 42")), ("trace", s(r"\ud83d\ude00"))])),
        ("client_metadata", payload(rng)),
        ("temperature", lit(rng.choice(["0.10", "1E+0", "0.7", "1e-1"]))),
    ]
    description = s(r"Look up an order \u00e9")
    if fmt == "anthropic":
        tool = obj([("name", s("lookup")), ("description", description), ("input_schema", schema)])
        fields += [
            ("max_tokens", lit("64")),
            ("system", s(r"You look up orders. caf\u00e9 \/ \ud83d\ude00")),
            ("tools", arr([tool])),
        ]
    elif fmt == "openai-chat":
        function = obj(
            [("name", s("lookup")), ("description", description), ("parameters", schema)]
        )
        fields.append(("tools", arr([obj([("type", s("function")), ("function", function)])])))
    else:
        tool = obj(
            [
                ("type", s("function")),
                ("name", s("lookup")),
                ("description", description),
                ("parameters", schema),
                ("strict", lit("false")),
            ]
        )
        fields += [("instructions", s(r"You look up orders. caf\u00e9 \/")), ("tools", arr([tool]))]
    rng.shuffle(fields)
    return fields


def list_key(fmt: str) -> str:
    return "input" if fmt == "openai-responses" else "messages"


def request(seed: int, fmt: str, *, twins: bool, bare: bool = False, one_line: bool = False) -> str:
    """The request of ``seed`` in ``fmt``, as text."""
    rng = random.Random(seed)
    style = rng.choice(["compact", "spaced", "loose"] + ([] if one_line else ["pretty"]))
    exchanges = 4 + rng.randrange(5)
    twin_texts = rng.choice(TWIN_TEXTS)
    twin_numbers = rng.choice(TWIN_NUMBERS) if rng.randrange(2) else None
    seen = 0

    def twin() -> tuple[str, str | None]:
        nonlocal seen
        i, seen = seen, seen + 1
        return twin_texts[i % len(twin_texts)], (
            twin_numbers[i % len(twin_numbers)] if twin_numbers else None
        )

    messages: list[Any] = []
    if fmt != "anthropic" and rng.randrange(2):
        role = "system" if fmt == "openai-chat" else "developer"
        messages.append(text_message(fmt, rng, role, rng.choice(STRINGS)))
    messages.append(
        text_message(fmt, rng, "user", r"Look up the orders, caf\u00e9 \/ \ud83d\ude00")
    )
    issue_at = rng.randrange(exchanges + 1)
    for i in range(exchanges + 1):
        last = i == exchanges
        calls = 1 if last else 1 + rng.randrange(2)
        inputs = [
            obj(
                [
                    ("order_id", lit("12345678901234567890123")),
                    ("price", lit("1e2")),
                    ("discount", lit("-0")),
                ]
            )
            if i == issue_at and k == 0
            else payload(rng)
            for k in range(calls)
        ]
        results = [s(r"ok \u00e9") if last else result_text(rng, i) for _ in range(calls)]
        messages += exchange(fmt, rng, style, i, inputs, results)
        if twins and not last and rng.randrange(100) < 60:
            text, n = twin()
            messages.append(text_message(fmt, rng, "assistant", text, n))
            text, n = twin()
            messages.append(text_message(fmt, rng, "user", text, n))
    messages.append(text_message(fmt, rng, "assistant", r"Done: caf\u00e9 \ud83d\ude00"))
    messages.append(text_message(fmt, rng, "user", "thanks"))
    if bare:
        doc = arr(messages)
    else:
        fields = top_fields(fmt, rng)
        fields.insert(rng.randrange(len(fields) + 1), (list_key(fmt), arr(messages)))
        doc = obj(fields)
    return write(doc, style) + ("\n" if style == "pretty" else "")


# The check: a scan of brackets and strings, never a parse that would normalize.


class _Scanner:
    def __init__(self, text: str, at: int = 0) -> None:
        self.t, self.i = text, at
        self.numbers: list[tuple[int, int]] = []

    def ws(self) -> None:
        while self.i < len(self.t) and self.t[self.i] in " \n\r\t":
            self.i += 1

    def string(self) -> tuple[int, int]:
        self.ws()
        start = self.i
        assert self.t[self.i] == '"', f"a string at {self.i}"
        self.i += 1
        while True:
            c = self.t[self.i]
            self.i += 1
            if c == "\\":
                self.i += 1
            elif c == '"':
                return start, self.i

    def value(
        self, members: list[Any] | None = None, items: list[Any] | None = None
    ) -> tuple[int, int]:
        self.ws()
        start, c = self.i, self.t[self.i]
        if c in "{[":
            close = "}" if c == "{" else "]"
            self.i += 1
            self.ws()
            if self.t[self.i] == close:
                self.i += 1
                return start, self.i
            while True:
                if c == "{":
                    key = self.string()
                    self.ws()
                    assert self.t[self.i] == ":"
                    self.i += 1
                    span = self.value()
                    if members is not None:
                        members.append((self.t[key[0] + 1 : key[1] - 1], span))
                else:
                    span = self.value()
                    if items is not None:
                        items.append(span)
                self.ws()
                if self.t[self.i] == ",":
                    self.i += 1
                    continue
                assert self.t[self.i] == close, f"{close} at {self.i}"
                self.i += 1
                return start, self.i
        if c == '"':
            return self.string()
        while self.i < len(self.t) and self.t[self.i] not in ",}] \n\r\t":
            self.i += 1
        if c in "-0123456789":
            self.numbers.append((start, self.i))
        return start, self.i


def scan(text: str, key: str) -> tuple[list[Any] | None, list[tuple[int, int]], list[str]]:
    """The top-level fields (None for a list), the message list's spans, every number literal."""
    sc = _Scanner(text)
    sc.ws()
    fields: list[Any] | None = None
    items: list[tuple[int, int]] = []
    if text[sc.i] == "[":
        sc.value(items=items)
    else:
        fields = []
        sc.value(members=fields)
        for k, span in fields:
            if k == key:
                _Scanner(text, span[0]).value(items=items)
    return fields, items, [text[a:b] for a, b in sc.numbers]


def _is_result(fmt: str, m: Any) -> bool:
    if fmt == "openai-chat":
        return bool(m.get("role") == "tool")
    if fmt == "openai-responses":
        return bool(m.get("type") == "function_call_output")
    content = m.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _ids(v: Any) -> list[str]:
    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, y in x.items():
                if k in ("tool_use_id", "tool_call_id", "call_id", "id") and isinstance(y, str):
                    out.append(y)
                walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(v)
    return sorted(out)


def check(fmt: str, inp: str, out: str) -> tuple[int, int, int]:
    """Holds ``out`` to ``inp``; returns (kept, masked, dropped), or fails naming the bytes."""
    key = list_key(fmt)
    out = out.removesuffix("\n")
    json.loads(out)
    fa, ia, na = scan(inp, key)
    fb, ib, nb = scan(out, key)
    assert (fa is None) == (fb is None), "the output's shape is not the input's"
    if fa is not None and fb is not None:
        got = dict(fb)
        for k, (a, b) in fa:
            if k == key:
                continue
            assert k in got, f"top-level field {k!r} is missing from the output"
            c, d = got[k]
            assert inp[a:b] == out[c:d], (
                f"top-level field {k!r} changed:\n  before: {inp[a:b]}\n  after:  {out[c:d]}"
            )
    ins = [(inp[a:b], json.loads(inp[a:b])) for a, b in ia]
    outs = [(out[a:b], json.loads(out[a:b])) for a, b in ib if LEAD_IN not in out[a:b]]
    n, m = len(ins), len(outs)
    assert m <= n, f"the output has {m} messages, the input {n}"
    # The output is the input with some results masked and some messages dropped (a firing
    # keeps pinned messages, such as the task and the results the latest answers refer to,
    # between dropped runs): a subsequence, each message kept byte for byte or masked in place.
    # The leftmost embedding exists whenever any does.

    def fits(k: int, j: int, exact: bool) -> bool:
        if MASK_MARK in outs[k][0]:
            return _is_result(fmt, ins[j][1]) and _ids(outs[k][1]) == _ids(ins[j][1])
        return outs[k][0] == ins[j][0] if exact else bool(outs[k][1] == ins[j][1])

    def embed(exact: bool) -> list[int] | None:
        at, j = [], 0
        for k in range(m):
            while j < n and not fits(k, j, exact):
                j += 1
            if j == n:
                return None
            at.append(j)
            j += 1
        return at

    if embed(True) is not None:
        written = set(na)
        new = [x for x in nb if x not in written]
        assert not new, f"number literals the input never wrote: {new}"
        masked = sum(MASK_MARK in o[0] for o in outs)
        return m - masked, masked, n - m
    at = embed(False)
    if at is not None:
        raise AssertionError("\n".join(
            f"output message {k} is input message {j} kept, with other bytes:\n"
            f"  before: {ins[j][0]}\n  after:  {outs[k][0]}"
            for k, j in enumerate(at)
            if MASK_MARK not in outs[k][0] and outs[k][0] != ins[j][0]
        ))
    raise AssertionError(
        f"the output's {m} messages are not the input's {n} with some masked and some dropped:\n"
        + "\n".join(f"  output {k}: {o[0][:300]}" for k, o in enumerate(outs))
    )


def _estimate(text: str, fmt: Format) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(estimate_json(text, fmt))
    return result


def _session(text: str, fmt: Format, policy: str) -> Session:
    """A session that fired on ``text``: at about half its tokens, or three quarters when
    masking alone cannot reach half (``COMPACTION_BUDGET_UNSATISFIABLE``)."""
    figures = _estimate(text, fmt)
    room = figures["total"] - figures["reserve"]
    for window in (room // 2, room * 3 // 4):
        session = Session(fmt, window, policy=policy)
        try:
            session.prepare(text)
        except FormatCompactionError as e:
            if e.code != "COMPACTION_BUDGET_UNSATISFIABLE":
                raise
            continue
        return Session(fmt, window, policy=policy)
    raise AssertionError(f"no window fires on {text}")


def _fired(outcome: tuple[int, int, int]) -> bool:
    kept, masked, dropped = outcome
    return kept > 0 and masked + dropped > 0


CASES = [(seed, fmt) for seed in range(8) for fmt in FORMATS]  # 24 per path


@pytest.mark.parametrize(("seed", "fmt"), CASES)
def test_compact_json_keeps_kept_messages_and_fields_byte_for_byte(seed: int, fmt: Format) -> None:
    text = request(seed, fmt, twins=seed % 2 == 0, bare=seed % 4 == 3)
    budget = _estimate(text, fmt)["total"] // 2
    out = compact_json(text, fmt, budget, policy="observation_masking")
    assert _fired(check(fmt, text, out.decode())), text


@pytest.mark.parametrize("fmt", FORMATS)
def test_compact_batch_keeps_kept_messages_and_fields_byte_for_byte(fmt: Format) -> None:
    texts = [request(100 + i, fmt, twins=i % 2 == 0, one_line=True) for i in range(8)]
    budget = min(_estimate(t, fmt)["total"] for t in texts) // 2
    outs = compact_batch(texts, fmt, budget, policy="observation_masking", jobs=2)
    assert len(outs) == len(texts)
    for text, out in zip(texts, outs):
        assert out is not None, text
        line = out.decode() if isinstance(out, bytes) else out
        assert _fired(check(fmt, text, line)), text


@pytest.mark.parametrize(("seed", "fmt"), CASES)
def test_session_firing_keeps_kept_messages_and_fields_byte_for_byte(
    seed: int, fmt: Format
) -> None:
    text = request(200 + seed, fmt, twins=False, bare=seed % 4 == 3)
    session = _session(text, fmt, CHAIN if seed % 2 else "observation_masking")
    out = session.prepare(text)
    assert session.fired, text
    assert _fired(check(fmt, text, out.decode())), text


@pytest.mark.parametrize(("seed", "fmt"), [(seed, fmt) for seed in range(6) for fmt in FORMATS])
def test_session_firing_never_writes_an_equal_older_message_in_place_of_a_kept_one(
    seed: int, fmt: Format
) -> None:
    # Twins: a text message repeated later with other bytes and an equal value (another
    # escape, key order, or an integer equal to it as a float); the firing drops the oldest.
    text = request(300 + seed, fmt, twins=True)
    out = _session(text, fmt, CHAIN).prepare(text)
    check(fmt, text, out.decode())
