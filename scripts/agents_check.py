#!/usr/bin/env python3
"""agents_check.py: the real coding agents, Claude Code and Codex CLI, through `cutctx serve`.

Run by scripts/agents-check.sh, which installs the two clients from npm into a throwaway folder:

    python3 scripts/agents_check.py --cutctx target/release/cutctx --bin NPM/node_modules/.bin \
        --work SCRATCH

What it does, all on 127.0.0.1 (standard library only):

1. starts a scripted provider (:class:`Provider`) speaking Anthropic Messages and OpenAI
   Responses, streamed; it answers each request that offers a shell tool with one call of that
   tool (``cat`` of a ~12 KB notes file) until it has served ``--calls`` of them to that client,
   then with a final text; a client's own summarization turn gets a short summary; everything
   else (probes, counts, models) a small 200/404 JSON. Every request is recorded per client.
   Usage counts a quarter of the body's bytes. Once, for Codex, an answer also reports
   ``THOUGHT`` reasoning tokens (a model that thought long), right after the proxy has cut
   Codex's history twice: Codex counts the last answer's tokens in its context, so it then
   compacts by itself at a point that does not hang on where the proxy's cuts fell (the proxy
   keeps every forwarded request under its window, so without it Codex's own limit would be
   reached only on a knife's edge);
2. starts ``cutctx serve`` in front of it (in-memory store, small windows from a ``--config``
   file: one per client's model, each small enough that the proxy fires at least twice in the
   task; the untouchable part, system and tools and the 4 most recent turns, must fit in it),
   keeping its JSON log lines;
3. runs Claude Code (``claude -p``) and Codex (``codex exec``) headless against the proxy, with
   HOME, CODEX_HOME and the working folders in the scratch folder, telemetry and update checks
   off, and HTTPS_PROXY pointed at the provider so that any call for another host lands on
   loopback (recorded as ``CONNECT``, refused) instead of leaving the machine;
4. checks what the provider received and what the proxy logged and counted in /metrics, per
   client (see :func:`check_client`), and a Responses ``compaction_trigger`` round trip in a
   named session through a proxy of its own (:func:`trigger_test`); with ``--summarizer auto``
   the proxy also makes its own summaries (Anthropic on-demand compaction, Responses
   ``compaction_trigger``, not streamed), which the provider answers with one compaction
   block or item, and :func:`check_summaries` holds them to the client's credential, an answer
   each, at least one swapped in and none failed;
5. prints a summary per client (requests, tool calls served, firings, unreadable, opaque items,
   sessions and restarts, largest request vs window, valid requests, prefix breaks by cause,
   Codex's own compaction), the round trip, one ``FAIL: ...`` line per failed check, and its
   wall time; exits 1 if any failed. The logs folder keeps the proxy's log lines, /metrics,
   every request the provider received (``provider-NAME.jsonl``) and how each model call's
   request differs from the one before it (``provider-NAME.diff``).
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization"}
SHELL_TOOLS = {"claude": ("Bash",), "codex": ("exec_command", "shell", "shell_command")}
SUMMARY_TEXT = ("Where the task stands: notes.txt was read with the shell tool several times; "
                "each read printed the same file; nothing else was changed.")
# What a client's own summarization turn asks its model (the last user message's text): Claude
# Code's compaction prompt, and Codex's (Codex also says so in x-codex-turn-metadata).
SUMMARY_ASKS = ("create a detailed summary", "context checkpoint compaction", "handoff summary")
FINAL_TEXT = "Done: notes.txt was read as many times as asked."
THOUGHT = 12_000  # reasoning tokens of Codex's one long-thinking answer (module documentation)
VERSIONS: dict[str, str] = {}  # each client's own --version, as it printed it


# ---------------------------------------------------------------------------------------------
# The notes file the tool calls read.

def notes_text(size: int = 12_000) -> str:
    """About ``size`` bytes of varied text (seeded, so every run reads the same file)."""
    rng = random.Random(2026)
    words = ("ledger", "kernel", "socket", "buffer", "quorum", "replica", "cursor", "lattice",
             "vector", "shard", "beacon", "harbor", "meadow", "copper", "falcon", "glacier",
             "orchid", "pepper", "quartz", "saddle", "timber", "violet", "walnut", "zephyr")
    lines, total, n = [], 0, 0
    while total < size:
        n += 1
        body = " ".join(rng.choice(words) for _ in range(rng.randint(8, 16)))
        line = f"{n:04d} id={rng.randrange(16**8):08x} v={rng.randint(0, 99999)} {body}."
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# The scripted provider.

@dataclass
class Record:
    """One request the provider received, and what kind of answer it got."""

    client: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    answer: str = ""  # tool | final | summary | compaction | proxy_summary | text | other
    thought: int = 0  # reasoning tokens reported with the answer
    credential: tuple[str, ...] = ()  # the names of the secret headers it carried (never values)


@dataclass
class ClientState:
    """What the provider has served one client."""

    records: list[Record] = field(default_factory=list)
    tool_calls: int = 0
    last_body: bytes = b""
    last_turn: Any = None  # the last agent-loop request, to see where its history was cut
    cuts: int = 0  # agent-loop requests that did not extend the one before
    thought: bool = False  # the one long-reasoning answer was given


class Provider(ThreadingHTTPServer):
    """The scripted loopback provider (module documentation, step 1)."""

    daemon_threads = True

    def __init__(self, notes_path: str, calls: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.notes_path = notes_path
        with open(notes_path, encoding="utf-8") as f:
            self.notes_first_line = f.readline().strip()
        self.calls = calls
        self.lock = threading.Lock()
        self.clients: dict[str, ClientState] = {}
        self.serial = 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def state(self, client: str) -> ClientState:
        return self.clients.setdefault(client, ClientState())

    def next_id(self) -> int:
        with self.lock:
            self.serial += 1
            return self.serial

    def take_tool_call(self, client: str) -> bool:
        """Count one tool call for ``client`` if it has fewer than ``calls``."""
        with self.lock:
            state = self.state(client)
            if state.tool_calls >= self.calls:
                return False
            state.tool_calls += 1
            return True

    def usage_of(self, client: str, body: bytes, keep: bool = True) -> tuple[int, int]:
        """(prompt tokens, cached tokens): a quarter of the body's bytes, and of the bytes it
        shares from the start with this client's previous body (a prefix cache, roughly). A
        body not ``keep``\ed (the proxy's own summarizing call) leaves the previous one in place."""
        with self.lock:
            state = self.state(client)
            shared = len(os.path.commonprefix([state.last_body, body]))
            if keep:
                state.last_body = body
        return max(1, len(body) // 4), shared // 4

    def record(self, rec: Record) -> None:
        with self.lock:
            self.state(rec.client).records.append(rec)

    def thought_for(self, client: str, request: dict[str, Any], fmt: str) -> int:
        """The reasoning tokens to report with this agent-loop answer: ``THOUGHT`` once, for
        Codex, on the first answer after two requests that did not extend the one before (the
        proxy's cuts), or at the third-last tool call at the latest; else 0."""
        with self.lock:
            state = self.state(client)
            if state.last_turn is not None and not extends(state.last_turn, request, fmt):
                state.cuts += 1
            state.last_turn = request
            if client != "codex" or state.thought:
                return 0
            if state.cuts >= 2 or state.tool_calls >= self.calls - 2:
                state.thought = True
                return THOUGHT
            return 0


def client_of(path: str, headers: dict[str, str]) -> str:
    """Which client a request is from: by its path (each client speaks one API)."""
    if headers.get("x-agents-check") == "trigger":
        return "trigger"
    if path.startswith("/v1/messages"):
        return "claude"
    if path.startswith("/v1/responses"):
        return "codex"
    return "other"


class Handler(BaseHTTPRequestHandler):
    """Reads a request, records it, and answers it as :mod:`answers` of the provider say."""

    protocol_version = "HTTP/1.1"
    server: Provider

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass

    def do_CONNECT(self) -> None:  # noqa: N802
        # A client trying to reach another host through HTTPS_PROXY: recorded and refused.
        self.server.record(Record("connect", "CONNECT", self.path, {}, b"", answer="refused"))
        self.send_json(403, {"error": "no network from this test"}, close=True)

    def do_GET(self) -> None:  # noqa: N802
        self.handle_any()

    def do_HEAD(self) -> None:  # noqa: N802
        self.handle_any()

    def do_POST(self) -> None:  # noqa: N802
        self.handle_any()

    def do_PUT(self) -> None:  # noqa: N802
        self.handle_any()

    def do_DELETE(self) -> None:  # noqa: N802
        self.handle_any()

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def handle_any(self) -> None:
        raw = self.read_body()
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
        body = gzip.decompress(raw) if headers.get("content-encoding") == "gzip" else raw
        path, _, _query = self.path.partition("?")
        rec = Record(client_of(path, headers), self.command, self.path, headers, body)
        rec.credential = tuple(sorted(k.lower() for k in self.headers if k.lower() in SECRET_HEADERS))
        try:
            rec.json = json.loads(body) if body else None
        except ValueError:
            rec.json = None
        self.server.record(rec)
        if self.command == "POST" and path == "/v1/messages" and isinstance(rec.json, dict):
            self.answer_messages(rec)
        elif self.command == "POST" and path == "/v1/responses" and isinstance(rec.json, dict):
            self.answer_responses(rec)
        else:
            self.answer_other(rec, path)

    # -- small answers ----------------------------------------------------------------------

    def send_bytes(self, status: int, ctype: str, data: bytes, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        if close:
            self.send_header("connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, status: int, value: Any, close: bool = False) -> None:
        self.send_bytes(status, "application/json", json.dumps(value).encode(), close)

    def send_sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        text = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
        self.send_bytes(200, "text/event-stream", text.encode())

    def answer_other(self, rec: Record, path: str) -> None:
        rec.answer = "other"
        if path.endswith("/count_tokens"):
            self.send_json(200, {"input_tokens": max(1, len(rec.body) // 4)})
        elif path.rstrip("/") in ("", "/v1") or self.command == "HEAD":
            self.send_json(200, {"ok": True})
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                             "message": f"no {path} here"}})

    # -- Anthropic Messages -----------------------------------------------------------------

    def answer_messages(self, rec: Record) -> None:
        request = rec.json
        tool = offered_tool(rec.client, tool_names(request))
        if isinstance(request.get("compaction"), dict):
            # The proxy's own summary (--summarizer): Anthropic's on-demand compaction, one
            # signed compaction block, not streamed.
            rec.answer = "proxy_summary"
            prompt, cached = self.server.usage_of(rec.client, rec.body, keep=False)
            self.send_json(200, {"id": f"msg_{self.server.next_id():06d}", "type": "message",
                                 "role": "assistant", "model": request.get("model"),
                                 "stop_reason": "compaction", "content": [
                                     {"type": "compaction", "content": SUMMARY_TEXT,
                                      "signature": f"cmp-{self.server.next_id():06d}"}],
                                 "usage": {"input_tokens": prompt - cached,
                                           "cache_read_input_tokens": cached, "output_tokens": 60}})
            return
        if is_anthropic_summary(request):
            rec.answer, blocks = "summary", [text_block(SUMMARY_TEXT)]
        elif tool and self.server.take_tool_call(rec.client):
            rec.answer = "tool"
            blocks = [{"type": "tool_use", "id": f"toolu_{self.server.next_id():06d}", "name": tool,
                       "input": {"command": f"cat {self.server.notes_path}",
                                 "description": "Print the notes file"}}]
        else:
            rec.answer = "final" if tool else "text"
            blocks = [text_block(FINAL_TEXT if tool else "OK.")]
        prompt, cached = self.server.usage_of(rec.client, rec.body)
        message = anthropic_message(request, blocks, f"msg_{self.server.next_id():06d}",
                                    prompt - cached, cached)
        if request.get("stream"):
            self.send_sse(anthropic_events(message))
        else:
            self.send_json(200, message)

    # -- OpenAI Responses -------------------------------------------------------------------

    def answer_responses(self, rec: Record) -> None:
        request = rec.json
        items = request.get("input") if isinstance(request.get("input"), list) else []
        tool = offered_tool(rec.client, tool_names(request))
        trigger = bool(items) and isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger"
        if trigger and request.get("stream") is False:
            # The proxy's own summary (--summarizer), never streamed: one compaction item.
            rec.answer = "proxy_summary"
            output = [{"type": "compaction", "id": f"cmp_{self.server.next_id():06d}",
                       "encrypted_content": "opaque-proxy"}]
        elif trigger:
            rec.answer = "compaction"
            output = [{"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}]
        elif is_responses_summary(rec.headers, items):
            rec.answer, output = "summary", [responses_message(SUMMARY_TEXT, self.server.next_id())]
        elif tool and self.server.take_tool_call(rec.client):
            rec.answer = "tool"
            rec.thought = self.server.thought_for(rec.client, request, "openai-responses")
            output = [responses_call(request, tool, self.server.notes_path, self.server.next_id())]
        else:
            rec.answer = "final" if tool else "text"
            output = [responses_message(FINAL_TEXT if tool else "OK.", self.server.next_id())]
        prompt, cached = self.server.usage_of(rec.client, rec.body,
                                              keep=rec.answer != "proxy_summary")
        response = responses_object(request, output, f"resp_{self.server.next_id():06d}",
                                    prompt, cached, rec.thought)
        if request.get("stream"):
            self.send_sse(responses_events(response))
        else:
            self.send_json(200, response)


def offered_tool(client: str, names: list[str]) -> str | None:
    """The shell tool this request offers, if any."""
    for name in SHELL_TOOLS.get(client, ()):
        if name in names:
            return name
    return None


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t.get("name", "") for t in request.get("tools") or [] if isinstance(t, dict)]


def last_user_text(content: Any) -> str:
    """The text of a message's content (string or text blocks; tool results left out)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(b.get("text", "") for b in content
                     if isinstance(b, dict) and b.get("type") in ("text", "input_text"))


def is_anthropic_summary(request: dict[str, Any]) -> bool:
    """Claude Code's compaction: its last user message asks the model for a summary."""
    users = [m for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    return bool(users) and asks_summary(users[-1].get("content"))


def asks_summary(content: Any) -> bool:
    text = last_user_text(content).lower()
    return any(phrase in text for phrase in SUMMARY_ASKS)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_message(request: dict[str, Any], blocks: list[dict[str, Any]], mid: str,
                      uncached: int, cached: int) -> dict[str, Any]:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {"id": mid, "type": "message", "role": "assistant", "model": request.get("model", "x"),
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": uncached, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": cached, "output_tokens": 24}}


def anthropic_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Messages stream of a finished ``message``."""
    start = dict(message, content=[], stop_reason=None,
                 usage=dict(message["usage"], output_tokens=1))
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        opened: dict[str, Any]
        delta: dict[str, Any]
        if block["type"] == "tool_use":
            opened = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            opened = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [("content_block_start", {"type": "content_block_start", "index": index,
                                            "content_block": opened}),
                   ("content_block_delta", {"type": "content_block_delta", "index": index,
                                            "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": index})]
    events += [("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                  "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def is_responses_summary(headers: dict[str, str], items: list[Any]) -> bool:
    """Codex's own compaction turn: ``x-codex-turn-metadata`` says ``request_kind:
    compaction``, or the last user input asks for a summary."""
    try:
        meta = json.loads(headers.get("x-codex-turn-metadata") or "{}")
    except ValueError:
        meta = {}
    if isinstance(meta, dict) and meta.get("request_kind") == "compaction":
        return True
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    return bool(users) and asks_summary(users[-1].get("content"))


def shell_arguments(request: dict[str, Any], tool: str, notes: str) -> dict[str, Any]:
    """Arguments for a call of ``tool`` running ``cat notes``, shaped by the tool's schema."""
    schema: dict[str, Any] = {}
    for t in request.get("tools") or []:
        if isinstance(t, dict) and t.get("name") == tool:
            schema = (t.get("parameters") or {}).get("properties") or {}
    if "cmd" in schema:
        return {"cmd": f"cat {notes}"}
    if (schema.get("command") or {}).get("type") == "array":
        return {"command": ["bash", "-lc", f"cat {notes}"]}
    return {"command": f"cat {notes}"}


def responses_call(request: dict[str, Any], tool: str, notes: str, n: int) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{n:06d}", "call_id": f"call_{n:06d}",
            "name": tool, "arguments": json.dumps(shell_arguments(request, tool, notes)),
            "status": "completed"}


def responses_message(text: str, n: int) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{n:06d}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def responses_object(request: dict[str, Any], output: list[dict[str, Any]], rid: str,
                     prompt: int, cached: int, thought: int = 0) -> dict[str, Any]:
    out = 24 + thought
    return {"id": rid, "object": "response", "created_at": 1_767_225_600, "status": "completed",
            "model": request.get("model", "x"), "output": output,
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": out, "output_tokens_details": {"reasoning_tokens": thought},
                      "total_tokens": prompt + out}}


def responses_events(response: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Responses stream of a finished ``response``, each event with its sequence_number."""
    pending = dict(response, status="in_progress", output=[], usage=None)
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": pending}),
        ("response.in_progress", {"type": "response.in_progress", "response": pending})]
    for index, item in enumerate(response["output"]):
        events += item_events(index, item)
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return [(name, dict(data, sequence_number=n)) for n, (name, data) in enumerate(events)]


def item_events(index: int, item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """output_item.added, the item's deltas, output_item.done."""
    if item["type"] == "message":
        opened = dict(item, status="in_progress", content=[])
    elif item["type"] == "function_call":
        opened = dict(item, status="in_progress", arguments="")
    else:
        opened = item
    events = [("response.output_item.added", {"type": "response.output_item.added",
                                              "output_index": index, "item": opened})]
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        base = {"item_id": item["id"], "output_index": index, "content_index": 0}
        events += [("response.content_part.added", dict(base, type="response.content_part.added", part=part)),
                   ("response.output_text.delta", dict(base, type="response.output_text.delta", delta=text)),
                   ("response.output_text.done", dict(base, type="response.output_text.done", text=text)),
                   ("response.content_part.done", dict(base, type="response.content_part.done",
                                                       part=item["content"][0]))]
    elif item["type"] == "function_call":
        base = {"item_id": item["id"], "output_index": index}
        events += [("response.function_call_arguments.delta",
                    dict(base, type="response.function_call_arguments.delta", delta=item["arguments"])),
                   ("response.function_call_arguments.done",
                    dict(base, type="response.function_call_arguments.done", arguments=item["arguments"]))]
    events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                 "output_index": index, "item": item}))
    return events


# ---------------------------------------------------------------------------------------------
# cutctx serve.

class Proxy:
    """A running ``cutctx serve`` in front of the provider, as scripts/serve-check.sh's tests
    run it: the port read from its first stderr line, the rest kept as log lines."""

    def __init__(self, cli: str, upstream: str, windows: dict[str, int], work: str,
                 name: str, summarizer: str = "none") -> None:
        config = os.path.join(work, f"{name}.json")
        with open(config, "w", encoding="utf-8") as f:
            json.dump({"windows": windows}, f)
        argv = [cli, "serve", "--listen", "127.0.0.1:0", "--openai-upstream", upstream,
                "--anthropic-upstream", upstream, "--state", "memory", "--config", config,
                "--summarizer", summarizer]
        log_path = os.path.join(work, "logs", f"{name}.log")
        self.lines: list[str] = []
        self.log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr
        watchdog = threading.Timer(20, self.proc.kill)
        watchdog.start()
        first = self.stderr.readline().decode(errors="replace").strip()
        watchdog.cancel()
        prefix = "cutctx serve: listening on 127.0.0.1:"
        if not first.startswith(prefix):
            self.proc.kill()
            raise SystemExit(f"FAIL: cutctx serve did not say it listens: {first!r}")
        self.port = int(first[len(prefix):])
        self.drain = threading.Thread(target=self._drain, daemon=True)
        self.drain.start()

    def _drain(self) -> None:
        for raw in iter(self.stderr.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            self.log.write(line + "\n")
            self.log.flush()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as answer:
            return str(answer.read().decode())

    def stop(self) -> int | None:
        """SIGTERM and wait (SIGKILL after 15 s): the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.drain.join(timeout=5)
        self.log.close()
        return self.proc.returncode


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of a Prometheus metric's samples whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric != name or not all(f'{k}="{v}"' in rest for k, v in labels.items()):
            continue
        total += float(value)
    return total


# ---------------------------------------------------------------------------------------------
# The clients.

TASK = ("Use your shell tool to run `cat {notes}` and read its output. Keep running that same "
        "command each time you are asked, then reply with one short sentence.")

QUIET_ENV = {
    "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1", "NO_COLOR": "1", "CI": "true",
}


def base_env(home: str, provider_url: str) -> dict[str, str]:
    """A minimal environment: scratch HOME, and every proxied call for another host sent to the
    loopback provider (which refuses it), so nothing leaves the machine."""
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL")}
    env.update(QUIET_ENV)
    env.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
               XDG_CACHE_HOME=os.path.join(home, ".cache"))
    for key in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        env[key] = provider_url
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


@dataclass
class Run:
    """One client's run."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    exit: int | None = None
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""


def run_client(run: Run, timeout: int, logs: str) -> Run:
    version = subprocess.run([run.argv[0], "--version"], env=run.env, cwd=run.cwd,
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    VERSIONS[run.name] = version.stdout.decode(errors="replace").strip()
    started = time.monotonic()
    try:
        done = subprocess.run(run.argv, env=run.env, cwd=run.cwd, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
        run.exit, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        run.exit, out, err = None, expired.stdout or b"", expired.stderr or b""
    run.seconds = time.monotonic() - started
    run.stdout, run.stderr = out.decode(errors="replace"), err.decode(errors="replace")
    for suffix, text in (("stdout", run.stdout), ("stderr", run.stderr)):
        with open(os.path.join(logs, f"{run.name}.{suffix}"), "w", encoding="utf-8") as f:
            f.write(text)
    return run


def claude_run(bin_dir: str, work: str, proxy_url: str, provider_url: str, notes: str) -> Run:
    home = os.path.join(work, "home-claude")
    cwd = os.path.join(work, "task-claude")
    os.makedirs(home, exist_ok=True)
    os.makedirs(cwd, exist_ok=True)
    env = base_env(home, provider_url)
    env.update(ANTHROPIC_BASE_URL=proxy_url, ANTHROPIC_API_KEY="sk-test-not-a-key")
    argv = [os.path.join(bin_dir, "claude"), "-p", TASK.format(notes=notes),
            "--allowedTools", "Bash", "--output-format", "json", "--no-session-persistence",
            "--strict-mcp-config"]
    return Run("claude", argv, env, cwd)


CLAUDE_MODEL = "claude"  # a prefix of every Claude model name: the proxy's window key
CODEX_MODEL = "gpt-5.1-codex"

CODEX_CONFIG = """\
model = "gpt-5.1-codex"
model_provider = "loop"
model_auto_compact_token_limit = {compact}
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
apps = false
plugins = false
remote_plugin = false

[model_providers.loop]
name = "loopback"
base_url = "{url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"""


def codex_run(bin_dir: str, work: str, proxy_url: str, provider_url: str, notes: str,
              compact: int) -> Run:
    home = os.path.join(work, "home-codex")
    codex_home = os.path.join(home, "codex")
    cwd = os.path.join(work, "task-codex")
    for folder in (codex_home, cwd):
        os.makedirs(folder, exist_ok=True)
    with open(os.path.join(codex_home, "config.toml"), "w", encoding="utf-8") as f:
        f.write(CODEX_CONFIG.format(compact=compact, url=proxy_url))
    env = base_env(home, provider_url)
    env.update(CODEX_HOME=codex_home, OPENAI_API_KEY="sk-test-not-a-key")
    argv = [os.path.join(bin_dir, "codex"), "exec", "--strict-config", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", "--ephemeral", "--color", "never",
            TASK.format(notes=notes)]
    return Run("codex", argv, env, cwd)


# ---------------------------------------------------------------------------------------------
# Checks over what the provider received.

def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def content_blocks(content: Any) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def anthropic_problems(request: dict[str, Any]) -> list[str]:
    """Anthropic's rules on ``messages``: a system message never first nor between a tool_use
    and its tool_result; every tool_use answered in the next user message, every tool_result
    answering the assistant message before it (consecutive same-role messages merge)."""
    problems: list[str] = []
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]
    if messages and messages[0].get("role") == "system":
        problems.append("a system message is first")
    open_calls: set[Any] = set()
    for index, message in enumerate(messages):
        role, blocks = message.get("role"), content_blocks(message.get("content"))
        if role == "system":
            if open_calls:
                problems.append(f"message {index}: a system message between tool_use and tool_result")
            continue
        if role == "assistant":
            if open_calls:
                problems.append(f"message {index}: tool_use {sorted(open_calls)} not answered")
            open_calls = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            continue
        for rid in (b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"):
            if rid not in open_calls:
                problems.append(f"message {index}: tool_result {rid} answers no tool_use before it")
            open_calls.discard(rid)
        if open_calls:
            problems.append(f"message {index}: tool_use {sorted(open_calls)} not answered")
            open_calls = set()
    if open_calls:
        problems.append(f"tool_use {sorted(open_calls)} left unanswered at the end")
    return problems


CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def responses_problems(request: dict[str, Any]) -> list[str]:
    """Every function_call has a function_call_output with its call_id after it, and every
    output has its call before it."""
    problems: list[str] = []
    calls: set[Any] = set()
    answered: set[Any] = set()
    items = request.get("input")
    for index, item in enumerate(i for i in items or [] if isinstance(i, dict)):
        if item.get("type") in CALLS:
            calls.add(item.get("call_id"))
        elif item.get("type") in OUTPUTS:
            if item.get("call_id") not in calls:
                problems.append(f"item {index}: output of {item.get('call_id')} with no call before it")
            answered.add(item.get("call_id"))
    problems += [f"call {c} has no output after it" for c in sorted(calls - answered, key=str)]
    return problems


def extends(before: dict[str, Any], after: dict[str, Any], fmt: str, loose: bool = False) -> bool:
    """``after``'s history (messages or input) starts with ``before``'s, item for item, equal
    as JSON values; ``loose`` (Anthropic) also takes a string content as its one text block
    and leaves ``cache_control`` marks out, the two things Claude Code re-renders."""
    key = "messages" if fmt == "anthropic" else "input"
    old, new = before.get(key) or [], after.get(key) or []
    if not isinstance(old, list) or not isinstance(new, list) or len(new) < len(old):
        return False
    if loose:
        old, new = [relaxed(m) for m in old], [relaxed(m) for m in new[:len(old)]]
    return all(canonical(a) == canonical(b) for a, b in zip(old, new, strict=False))


def relaxed(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: relaxed(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(out.get("content"), str) and "role" in out:
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list):
        return [relaxed(v) for v in value]
    return value


def without_marks(value: Any) -> Any:
    """``value`` with every ``cache_control`` key left out (nothing else changed)."""
    if isinstance(value, dict):
        return {k: without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_marks(v) for v in value]
    return value


def differences(a: Any, b: Any, path: str = "", limit: int = 6) -> list[str]:
    """Where two JSON values differ, as ``path: what`` lines (at most ``limit``)."""
    out: list[str] = []

    def walk(x: Any, y: Any, where: str) -> None:
        if len(out) >= limit:
            return
        if type(x) is not type(y):
            out.append(f"{where}: {type(x).__name__} {short(x)} -> {type(y).__name__} {short(y)}")
        elif isinstance(x, dict):
            for key in sorted(set(x) | set(y)):
                if key not in x:
                    out.append(f"{where}.{key}: added {short(y[key])}")
                elif key not in y:
                    out.append(f"{where}.{key}: removed {short(x[key])}")
                else:
                    walk(x[key], y[key], f"{where}.{key}")
        elif isinstance(x, list):
            for index, (p, q) in enumerate(zip(x, y, strict=False)):
                walk(p, q, f"{where}[{index}]")
            if len(x) != len(y):
                out.append(f"{where}: {len(x)} items -> {len(y)}")
        elif x != y:
            out.append(f"{where}: {short(x)} -> {short(y)}")

    walk(a, b, path)
    return out[:limit]


def short(value: Any, n: int = 70) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= n else text[:n] + "..."


def history_key(fmt: str) -> str:
    return "messages" if fmt == "anthropic" else "input"


def history_changes(before: dict[str, Any], after: dict[str, Any], fmt: str) -> list[str]:
    """How ``after`` changed the messages ``before`` had (structurally, cache marks and the
    string-or-one-text-block form set aside), and any other top-level field that changed."""
    key = history_key(fmt)
    old, new = before.get(key) or [], after.get(key) or []
    out = [f"{key}[{i}]{line}" for i, (a, b) in enumerate(zip(old, new, strict=False))
           if relaxed(a) != relaxed(b) for line in differences(relaxed(a), relaxed(b), limit=2)]
    if len(new) < len(old):
        out.append(f"{key}: {len(old)} items -> {len(new)}")
    rest = [k for k in sorted(set(before) | set(after)) if k != key and before.get(k) != after.get(k)]
    out += [line for k in rest for line in differences(before.get(k), after.get(k), f".{k}", 2)]
    return out


def strict_changes(before: dict[str, Any], after: dict[str, Any], fmt: str, limit: int = 12) -> list[str]:
    """How ``after`` differs from ``before``, every byte-level difference counted: in the
    messages ``before`` had, and in the other top-level fields."""
    key = history_key(fmt)
    old, new = before.get(key) or [], after.get(key) or []
    out = [line for i, (x, y) in enumerate(zip(old, new, strict=False))
           for line in differences(x, y, f"{key}[{i}]", 3)]
    out += differences({k: v for k, v in before.items() if k != key},
                       {k: v for k, v in after.items() if k != key}, "", 4)
    return out[:limit]


def rerender_kind(before: dict[str, Any], after: dict[str, Any], fmt: str) -> str:
    """What the client re-rendered in messages ``before`` already had, when the two are equal
    once the client's re-rendering is set aside: a moved ``cache_control`` mark, a string
    content for its one text block (or the other way), or both."""
    key = history_key(fmt)
    kinds = set()
    for a, b in zip(before.get(key) or [], after.get(key) or [], strict=False):
        if canonical(a) == canonical(b):
            continue
        kinds.add("cache_control mark moved" if canonical(without_marks(a)) == canonical(without_marks(b))
                  else "one text block <-> string")
    return " + ".join(sorted(kinds)) or "?"


@dataclass
class Report:
    """One client's records, the proxy's log lines for its format, its figures and failures."""

    name: str
    fmt: str
    records: list[Record]
    events: list[dict[str, Any]]
    figures: dict[str, str] = field(default_factory=dict)  # the summary's rows, in order
    notes: list[str] = field(default_factory=list)  # details printed under the rows
    failures: list[str] = field(default_factory=list)

    def figure(self, label: str, text: str) -> None:
        self.figures[label] = text

    def note(self, text: str) -> None:
        self.notes.append(text)

    def check(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(f"{self.name}: {what}")
        return ok

    @property
    def model_calls(self) -> list[Record]:
        return [r for r in self.records if r.answer in ("tool", "final", "summary", "text")]

    @property
    def responses(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == "response"]

    def pairs(self) -> list[tuple[Record, dict[str, Any] | None]]:
        """Each model call with the proxy's log line for it: the client sends one call at a
        time, so the n-th line of its format is the n-th call (None if the counts differ,
        which :func:`check_client` fails)."""
        calls, lines = self.model_calls, self.responses
        if len(calls) != len(lines):
            return [(r, None) for r in calls]
        return list(zip(calls, lines, strict=True))


def check_client(report: Report, provider: Provider, metrics: str, window: int, run: Run) -> None:
    """Every check of one client; the figures go to ``report.figures``."""
    state = provider.state(report.name)
    ended = "did not finish in time" if run.exit is None else f"exited {run.exit}"
    report.figure("client", f"{ended} after {run.seconds:.0f} s")
    report.check(run.exit == 0, f"the client {ended} (its output is in the logs)")
    others = len(report.records) - len(report.model_calls)
    report.figure("requests", f"{len(report.records)} received by the provider "
                              f"({len(report.model_calls)} model calls, {others} other); "
                              f"{len(report.responses)} response lines in the proxy's log")
    report.check(len(report.model_calls) == len(report.responses),
                 f"{len(report.model_calls)} model calls reached the provider but the proxy logged "
                 f"{len(report.responses)} responses of its format")
    ran = executed(report.records, provider.notes_first_line)
    report.figure("tool calls served", f"{state.tool_calls} of {provider.calls} "
                                       f"({len(ran)} run by the client: their results hold the file)")
    report.check(state.tool_calls == provider.calls,
                 f"the provider served {state.tool_calls} tool calls, not {provider.calls}")
    report.check(len(ran) == state.tool_calls, f"only {len(ran)} tool calls were run by the client")
    report.check(any(r.answer == "final" for r in report.records), "it never asked for the final answer")
    report.check(FINAL_TEXT in run.stdout, "the final answer is not in the client's output")
    check_firings(report, metrics)
    check_unreadable(report, metrics)
    check_opaque(report, metrics)
    check_sessions(report, metrics)
    check_window(report, window)
    check_validity(report)
    check_prefixes(report)


def executed(records: list[Record], mark: str) -> set[str]:
    """The ids of the tool calls whose result, in some later request, holds ``mark`` (the
    notes' first line): the calls the client really ran."""
    ids: set[str] = set()
    for rec in records:
        request = rec.json if isinstance(rec.json, dict) else {}
        for item in (request.get("messages") or request.get("input") or []):
            if not isinstance(item, dict):
                continue
            if item.get("type") in OUTPUTS and mark in json.dumps(item.get("output"), ensure_ascii=False):
                ids.add(str(item.get("call_id")))
            for block in content_blocks(item.get("content")):
                text = json.dumps(block.get("content"), ensure_ascii=False)
                if block.get("type") == "tool_result" and mark in text:
                    ids.add(str(block.get("tool_use_id")))
    return ids


def by_label(metrics: str, name: str, label: str, **labels: str) -> dict[str, int]:
    """A labelled metric's samples (those with ``labels``), by the value of ``label``."""
    out: dict[str, int] = {}
    for line in metrics.splitlines():
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric != name or not all(f'{k}="{v}"' in rest for k, v in labels.items()):
            continue
        found = [p.split("=", 1)[1].strip('"') for p in rest.rstrip("}").split(",")
                 if p.startswith(f"{label}=")]
        if found:
            out[found[0]] = out.get(found[0], 0) + int(float(value))
    return out


def check_summaries(report: Report, events: list[dict[str, Any]], summarizer: str) -> None:
    """With ``--summarizer``: the proxy's own summarizing calls reached the provider with the
    client's credential, each answered; at least one firing swapped its summary in; none
    failed. The summary lines are this client's by their session ids."""
    made = [r for r in report.records if r.answer == "proxy_summary"]
    if summarizer == "none":
        report.check(not made, f"{len(made)} summarizing calls with no --summarizer")
        return
    ids = {e.get("session_id") for e in report.responses}
    lines = [e for e in events if e.get("event") == "summary" and e.get("session_id") in ids]
    outcomes: dict[str, int] = {}
    for e in lines:
        outcomes[str(e.get("outcome"))] = outcomes.get(str(e.get("outcome")), 0) + 1
    kinds = sorted({str(e.get("kind")) for e in lines})
    own = {r.credential for r in report.model_calls}
    credentialed = [r for r in made if r.credential and r.credential in own]
    report.figure("proxy summaries", f"{len(made)} summarizing calls ({', '.join(kinds) or '-'}), "
                                     f"{len(credentialed)} with the client's credential "
                                     f"({', '.join(sorted({h for c in own for h in c})) or 'none'}); "
                                     f"outcomes {outcomes or '{}'}")
    report.check(bool(made), "the proxy never summarized")
    report.check(len(credentialed) == len(made), "a summarizing call went without the client's credential")
    report.check(outcomes.get("answered", 0) == len(made),
                 f"{len(made)} summarizing calls but {outcomes.get('answered', 0)} answered in the log")
    report.check(outcomes.get("swapped", 0) >= 1, "no firing swapped a summary in")
    report.check(outcomes.get("failed", 0) == 0, f"{outcomes.get('failed', 0)} summaries failed")


def check_firings(report: Report, metrics: str) -> None:
    fired = [e for e in report.responses if e.get("outcome") == "fired"]
    counted = int(metric_sum(metrics, "cutctx_serve_requests_total", format=report.fmt, outcome="fired"))
    outcomes: dict[str, int] = {}
    for e in report.responses:
        outcomes[str(e.get("outcome"))] = outcomes.get(str(e.get("outcome")), 0) + 1
    at = [i + 1 for i, e in enumerate(report.responses) if e.get("outcome") == "fired"]
    report.figure("firings", f"{len(fired)} (at model calls {at}; /metrics {counted}; "
                             f"outcomes {outcomes})")
    report.check(len(fired) >= 2, f"the proxy fired {len(fired)} times, fewer than 2")
    report.check(counted == len(fired), f"the proxy logged {len(fired)} firings but /metrics "
                                        f"counts {counted}")


def check_unreadable(report: Report, metrics: str) -> None:
    logged = [e for e in report.events if e.get("event") == "unreadable"]
    fail_open = int(metric_sum(metrics, "cutctx_serve_requests_total", format=report.fmt, outcome="fail_open"))
    unread = int(metric_sum(metrics, "cutctx_serve_requests_total", format=report.fmt, outcome="unreadable"))
    reasons = by_label(metrics, "cutctx_serve_unreadable_total", "reason", format=report.fmt)
    count = max(len(logged), fail_open, unread, sum(reasons.values()))
    report.figure("unreadable", f"{count} (must be 0: {len(logged)} logged, /metrics "
                                f"outcome=fail_open {fail_open}, outcome=unreadable {unread}, "
                                f"by reason {reasons or '{}'})")
    why = {json.dumps({k: v for k, v in e.items() if k not in ("event", "format")}) for e in logged}
    for line in sorted(why)[:4]:
        report.note(f"unreadable: {line}")
    report.check(count == 0, f"{count} requests the proxy could not read (forwarded unchanged, "
                             f"never compacted)")


def check_opaque(report: Report, metrics: str) -> None:
    """Items carried untouched (unknown roles, blocks, item types; provider compaction): the
    proxy's log and /metrics agree, by reason. Not a failure in itself."""
    logged: dict[str, int] = {}
    for e in report.events:
        if e.get("event") == "opaque":
            for reason, n in (e.get("items") or {}).items():
                logged[reason] = logged.get(reason, 0) + int(n)
    counted = by_label(metrics, "cutctx_serve_opaque_items_total", "reason", format=report.fmt)
    text = ", ".join(f"{k} {v}" for k, v in sorted(counted.items())) or "none"
    report.figure("opaque items", f"{text} (item-requests, by reason, /metrics)")
    report.check(logged == counted, f"opaque items logged {logged} but /metrics counts {counted}")


# The session names each client gives (cutctx-serve names.rs): Claude Code's session id in
# metadata.user_id; Codex's session_id header or, after it, its prompt_cache_key.
OWN_NAMES = {"claude": ("metadata.user_id",), "codex": ("session_id", "prompt_cache_key")}


def unmarked(value: Any) -> Any:
    """``value`` without its ``cache_control`` fields, at any depth."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def untouchable(record: Record) -> str:
    """A model call's untouchable part, which scopes its session as the proxy does: its model,
    system prompt or instructions, and tools, their cache marks aside."""
    body = record.json if isinstance(record.json, dict) else {}
    return json.dumps([unmarked(body.get(k)) for k in ("model", "system", "instructions", "tools")],
                      sort_keys=True)


def check_sessions(report: Report, metrics: str) -> None:
    """The proxy kept one session for the conversation's calls of each untouchable part (a
    client's own compaction call, with no tools, is a side call with a session of its own),
    named by the client's own session id: no call restarted one (its log's ``restarted``: the
    history did not extend the one recorded), but the first call after the client's own
    compaction, whose history is a new one. A restarted session starts from the whole history
    again, so past the window it fires at every call and the cache never hits. On a restart,
    how the history changed."""
    pairs = report.pairs()
    lines = [e for _, e in pairs if e is not None]
    if not report.check(bool(lines) and all("restarted" in e and "session" in e for e in lines),
                        "the proxy's response lines do not say which session and whether it "
                        "restarted (or do not pair with the model calls)"):
        report.figure("session restarts", "unknown (not in the proxy's log)")
        return
    sources = sorted({str(e.get("session") or "none") for e in lines})
    started = sum(1 for e in lines if e.get("new_session"))
    named = by_label(metrics, "cutctx_serve_sessions_total", "source")
    report.figure("sessions", f"{started} started, named by {', '.join(sources)} "
                              f"(/metrics, both clients: {named})")
    report.check(all(s in OWN_NAMES[report.name] for s in sources),
                 f"its session was named by {sources}, not the client's own id "
                 f"({' or '.join(OWN_NAMES[report.name])})")
    scopes = len({untouchable(r) for r, _ in pairs})
    report.check(started == scopes, f"{started} sessions started for one conversation whose "
                                    f"calls have {scopes} untouchable part(s)")
    restarts = [i for i, (_, e) in enumerate(pairs) if e and e.get("restarted")]
    after_own = [i for i in restarts if i > 0 and pairs[i - 1][0].answer == "summary"]
    report.figure("session restarts", f"{len(restarts)} of {len(pairs)} calls "
                                      f"({len(after_own)} right after the client's own compaction)")
    for notice in [e.get("notice") for e in report.events if e.get("event") == "session"][:3]:
        report.note(f"session notice: {notice}")
    for i in [i for i in restarts if i not in after_own and i > 0][:3]:
        before, after = pairs[i - 1][0].json, pairs[i][0].json
        report.note(f"restart at model call {i + 1}; how its history differs from call {i} as "
                    f"the provider got them (marks and string/block forms set aside):")
        changes = history_changes(before, after, report.fmt)[:6] or [
            "none once marks and forms are set aside; as sent they differ in:",
            *strict_changes(before, after, report.fmt, 6)]
        for line in changes:
            report.note(f"  {line}")
    wrong = len(restarts) - len(after_own)
    report.check(wrong == 0, f"the proxy restarted its session at {wrong} calls: the client's "
                 f"history did not extend the one it recorded (so it fired anew at each call)")


def check_window(report: Report, window: int) -> None:
    """From the first firing on, no forwarded request over the window: the proxy's estimate
    (its log's tokens_out) where it has one, else a quarter of the body's bytes."""
    sizes = [(e["tokens_out"], False) if e and e.get("tokens_out") is not None
             else (len(r.body) // 4, True) for r, e in report.pairs()]
    received = [t for t in (e.get("tokens_in") for e in report.responses) if isinstance(t, int)]
    fired = [i for i, e in enumerate(report.responses) if e.get("outcome") == "fired"]
    tail = sizes[fired[0]:] if fired and len(sizes) == len(report.responses) else sizes
    if not tail:
        report.check(False, "no model call to measure")
        return
    largest, approx = max(tail)
    how = "a quarter of its bytes: no estimate in the proxy's log" if approx else "proxy's estimate"
    where = "after the first firing" if fired else "(never fired)"
    sent = f"; largest as the client sent it {max(received)}" if received else ""
    report.figure("largest request", f"{largest} tokens forwarded {where} vs window {window} "
                                     f"({how}{sent})")
    report.check(bool(fired) and largest <= window,
                 f"a request of {largest} tokens was forwarded over the window {window}"
                 if fired else "no firing, so nothing was kept under the window")


def check_validity(report: Report) -> None:
    rule = anthropic_problems if report.fmt == "anthropic" else responses_problems
    bad = 0
    for number, rec in enumerate(report.model_calls, 1):
        problems = rule(rec.json)
        if problems:
            bad += 1
            report.note(f"request {number} invalid: {'; '.join(problems[:3])}")
    last = report.model_calls[-1].json.get("messages") if report.model_calls else []
    systems = sum(1 for m in last or [] if isinstance(m, dict) and m.get("role") == "system")
    extra = (f"; the last holds {systems} mid-conversation system messages"
             if report.fmt == "anthropic" else "")
    report.figure("valid requests", f"{len(report.model_calls) - bad} of {len(report.model_calls)} "
                                    f"by the provider's rules{extra}")
    report.check(bad == 0, f"{bad} requests invalid by the provider's rules")


def check_prefixes(report: Report) -> None:
    """Each agent-loop request extends the one before it, except at a firing of the proxy, the
    turn after the client's own compaction, or where the client re-rendered an earlier
    message itself (Anthropic: a string for a text block, moved cache_control marks)."""
    loop = [(i, r, e) for i, (r, e) in enumerate(report.pairs()) if r.answer in ("tool", "final")]
    kinds: dict[str, int] = {}
    rerendered: dict[str, int] = {}
    for (_, before, _), (i, after, line) in itertools.pairwise(loop):
        kind = break_kind(report, before, after, line)
        if not kind:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "re-rendered by the client":
            how = rerender_kind(before.json, after.json, report.fmt)
            rerendered[how] = rerendered.get(how, 0) + 1
        if kind in ("unexplained", "cut, proxy line unknown"):
            report.note(f"prefix break at model call {i + 1} ({kind}):")
            for text in history_changes(before.json, after.json, report.fmt)[:6]:
                report.note(f"  {text}")
    fired = sum(1 for e in report.responses if e.get("outcome") == "fired")
    text = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
    if rerendered:
        text += " (re-rendered: " + ", ".join(f"{k} {v}" for k, v in sorted(rerendered.items())) + ")"
    report.figure("prefix breaks", f"{sum(kinds.values())} of {max(0, len(loop) - 1)}: {text}")
    unexplained = kinds.get("unexplained", 0)
    unpaired = kinds.get("cut, proxy line unknown", 0)
    report.check(unexplained == 0, f"{unexplained} requests broke the prefix with no firing")
    report.check(unpaired <= fired, f"{unpaired} prefix breaks but only {fired} firings")


def break_kind(report: Report, before: Record, after: Record, line: dict[str, Any] | None) -> str:
    if extends(before.json, after.json, report.fmt):
        return ""
    between = report.records[report.records.index(before):report.records.index(after)]
    if any(r.answer == "summary" for r in between):
        return "the client's own compaction"
    if line is not None and line.get("outcome") == "fired":
        return "a firing"
    if report.fmt == "anthropic" and extends(before.json, after.json, report.fmt, loose=True):
        return "re-rendered by the client"
    return "cut, proxy line unknown" if line is None else "unexplained"


def check_codex_compaction(report: Report) -> None:
    """Codex's own compaction reached the provider, and the request after it (whose history
    carries the summary it got) was forwarded, read (not fail-open), and answered."""
    pairs = report.pairs()
    thought = [i for i, (r, _) in enumerate(pairs) if r.thought]
    if thought:
        report.note(f"long-thinking answer ({THOUGHT} reasoning tokens) at model call {thought[0] + 1}")
    summaries = [i for i, (r, _) in enumerate(pairs) if r.answer == "summary"]
    outcomes = [(pairs[i][1] or {}).get("outcome", "?") for i in summaries]
    after: list[str] = []  # the request after each: "call N outcome status, summary or not"
    unread, bare = 0, 0
    for i in summaries:
        later = [(j, r, e or {}) for j, (r, e) in enumerate(pairs) if j > i and r.answer in ("tool", "final")]
        if not later:
            after.append("none")
            continue
        j, rec, line = later[0]
        carries = SUMMARY_TEXT in json.dumps(rec.json.get("input"), ensure_ascii=False)
        read = line.get("outcome") in ("fits", "fired") and line.get("status") == 200
        unread += not read
        bare += not carries
        after.append(f"call {j + 1} {line.get('outcome', '?')} {line.get('status', '?')}"
                     f"{', carries the summary' if carries else ' WITHOUT the summary'}")
    at = [i + 1 for i in summaries]
    report.figure("Codex's own compaction",
                  f"{len(summaries)} seen (model calls {at}, proxy outcomes {outcomes}); the "
                  f"request after it forwarded: {', '.join(after) or '-'}")
    report.check(bool(summaries), "Codex's own compaction request never reached the provider")
    report.check("none" not in after, "no request after Codex's own compaction reached the provider")
    report.check(unread == 0, f"{unread} requests after Codex's own compaction were not read and "
                              f"answered (fail-open or an error)")
    report.check(bare == 0, f"{bare} requests after Codex's own compaction do not carry its summary")


# ---------------------------------------------------------------------------------------------
# The compaction_trigger round trip, through a proxy of its own.

def post(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return bytes(answer.read())


TRIGGER_HISTORY = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]},
]
TRIGGER_KEY = "agents-check-trigger-conversation"  # a prompt_cache_key, as Codex names its own


def trigger_test(proxy: Proxy, provider: Provider) -> tuple[list[str], str]:
    """One named conversation (a ``prompt_cache_key``, as Codex sends): a first turn, then a
    request ending in ``compaction_trigger``, which must reach the provider byte for byte and
    leave the session fresh; the one compaction item it gets back then travels, byte-exact, in
    the next request, which must not restart the session (a session still holding the
    history before the trigger would find that history rewound). The figures, and failures."""
    failures: list[str] = []
    headers = {"x-agents-check": "trigger", "authorization": "Bearer sk-test-not-a-key"}
    got = provider.state("trigger").records

    def request(items: str) -> bytes:
        return ('{"model":"gpt-5.1-codex","store":false,"prompt_cache_key":"' + TRIGGER_KEY +
                '","input":[' + items + "]}").encode()

    history = [json.dumps(i, separators=(",", ":")) for i in TRIGGER_HISTORY]
    post(proxy.url + "/v1/responses", request(history[0]), headers)
    first = request(",".join(history) + ',{"type":"compaction_trigger"}')
    answer = json.loads(post(proxy.url + "/v1/responses", first, headers))
    if len(got) != 2 or got[1].body != first:
        failures.append("trigger: the compaction_trigger request did not reach the provider byte for byte")
    items = answer.get("output") or []
    if items != [{"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}]:
        failures.append(f"trigger: the answer's output was {items!r}, not the one compaction item")
    compaction = json.dumps(items[0] if items else {}, separators=(",", ":"))
    post(proxy.url + "/v1/responses",
         request(compaction + ',{"type":"message","role":"user","content":'
                 '[{"type":"input_text","text":"go on"}]}'), headers)
    if len(got) != 3:
        failures.append("trigger: the request carrying the compaction item was not forwarded")
    elif compaction.encode() not in got[2].body:
        failures.append("trigger: the compaction item was not forwarded byte-exact")
    metrics = proxy.metrics()
    time.sleep(0.2)  # the last response line is written once its body has been streamed
    lines = [e for e in proxy.events() if e.get("event") == "response"]
    unread = sum(by_label(metrics, "cutctx_serve_unreadable_total", "reason").values())
    opaque = by_label(metrics, "cutctx_serve_opaque_items_total", "reason")
    fresh = len(lines) == 3 and [e.get("restarted") for e in lines] == [False, False, False]
    if len(lines) != 3:
        failures.append(f"trigger: the proxy logged {len(lines)} responses, not 3")
    elif any(e.get("restarted") is None for e in lines):
        failures.append("trigger: the proxy's log does not say whether the session restarted")
    elif not fresh:
        failures.append("trigger: the session restarted ("
                        f"restarted {[e.get('restarted') for e in lines]}): the compaction_trigger "
                        "request did not leave it fresh")
    if len(lines) == 3 and {e.get("session") for e in lines} != {"prompt_cache_key"}:
        failures.append(f"trigger: the session was named by {[e.get('session') for e in lines]}, "
                        "not the prompt_cache_key")
    if unread:
        failures.append(f"trigger: {unread} requests unreadable")
    outcomes = [e.get("outcome") for e in lines]
    text = (f"{len(got)} requests reached the provider (outcomes {outcomes}); trigger "
            f"{'byte-exact' if len(got) > 1 and got[1].body == first else 'CHANGED'}; compaction "
            f"item {'byte-exact' if len(got) == 3 and compaction.encode() in got[2].body else 'LOST'}"
            f" in the next request; session {'left fresh (no restart)' if fresh else 'NOT fresh'}; "
            f"opaque items {opaque or 'none'}; unreadable {unread}")
    return failures, text


# ---------------------------------------------------------------------------------------------
# Main.

def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cutctx", required=True, help="the cutctx binary")
    parser.add_argument("--bin", required=True, help="node_modules/.bin holding claude and codex")
    parser.add_argument("--work", required=True, help="a scratch folder")
    parser.add_argument("--calls", type=int, default=12, help="tool calls served per client")
    parser.add_argument("--claude-window", type=int, default=28_000,
                        help="the proxy's window for Claude Code's model")
    parser.add_argument("--codex-window", type=int, default=20_000,
                        help="the proxy's window for Codex's model")
    parser.add_argument("--codex-compact", type=int,
                        help="Codex's model_auto_compact_token_limit (default its window + 5000)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per client")
    parser.add_argument("--only", choices=("claude", "codex"), help="run one client only")
    parser.add_argument("--summarizer", default="none", choices=("none", "auto", "native", "cached"),
                        help="cutctx serve's --summarizer (default none)")
    return parser.parse_args()


def save_records(provider: Provider, logs: str) -> None:
    """Every request the provider received, per client, as JSON lines (no key headers), and
    how each model call's request differs from the one before it (``provider-NAME.diff``)."""
    for name, state in list(provider.clients.items()):
        with open(os.path.join(logs, f"provider-{name}.jsonl"), "w", encoding="utf-8") as f:
            for r in state.records:
                f.write(json.dumps({"method": r.method, "path": r.path, "headers": r.headers,
                                    "answer": r.answer, "thought": r.thought,
                                    "body": r.body.decode(errors="replace")}) + "\n")
        calls = [r for r in state.records if isinstance(r.json, dict) and r.answer != "other"]
        fmt = "anthropic" if any("messages" in r.json for r in calls) else "openai-responses"
        with open(os.path.join(logs, f"provider-{name}.diff"), "w", encoding="utf-8") as f:
            for n, (a, b) in enumerate(itertools.pairwise(calls), 2):
                key = history_key(fmt)
                f.write(f"model call {n - 1} -> {n} ({b.answer}): {len(a.json.get(key) or [])} -> "
                        f"{len(b.json.get(key) or [])} items\n")
                f.writelines(f"  {line}\n" for line in strict_changes(a.json, b.json, fmt))


def run_clients(args: argparse.Namespace, proxy: Proxy, provider: Provider, notes: str,
                logs: str) -> list[Run]:
    runs = []
    if args.only in (None, "claude"):
        run = claude_run(args.bin, args.work, proxy.url, provider.url, notes)
        print(f"== running Claude Code through the proxy: claude -p TASK {' '.join(run.argv[3:])}",
              flush=True)
        runs.append(run_client(run, args.timeout, logs))
    if args.only in (None, "codex"):
        compact = args.codex_compact or args.codex_window + 5000
        run = codex_run(args.bin, args.work, proxy.url, provider.url, notes, compact)
        print(f"== running Codex through the proxy: codex {' '.join(run.argv[1:-1])} TASK "
              f"(model_auto_compact_token_limit {compact})", flush=True)
        runs.append(run_client(run, args.timeout, logs))
    return runs


def main() -> int:
    started = time.monotonic()
    args = arguments()
    logs = os.path.join(args.work, "logs")
    os.makedirs(logs, exist_ok=True)
    notes = os.path.join(args.work, "notes.txt")
    with open(notes, "w", encoding="utf-8") as f:
        f.write(notes_text())
    provider = Provider(notes, args.calls)
    windows = {CLAUDE_MODEL: args.claude_window, CODEX_MODEL: args.codex_window}
    proxy = Proxy(args.cutctx, provider.url, windows, args.work, "serve", args.summarizer)
    print(f"== provider on {provider.url}, cutctx serve on {proxy.url} (windows {windows}, "
          f"--summarizer {args.summarizer})")
    metrics, failures, runs = "", [], []
    try:
        runs = run_clients(args, proxy, provider, notes, logs)
        metrics = proxy.metrics()
    except OSError as error:
        failures.append(f"cutctx serve's /metrics could not be read: {error}")
    finally:
        status = proxy.stop()
    with open(os.path.join(logs, "metrics.txt"), "w", encoding="utf-8") as f:
        f.write(metrics)
    reports = [report_of(run, provider, proxy.events(), metrics, windows, args.summarizer)
               for run in runs]
    failures += [f for report in reports for f in report.failures]
    restarts = sum(1 for r in reports for e in r.responses if e.get("restarted"))
    counted = int(metric_sum(metrics, "cutctx_serve_session_restarts_total"))
    if metrics and counted != restarts:
        failures.append(f"the proxy logged {restarts} session restarts but /metrics counts {counted}")
    if status != 0:
        failures.append(f"cutctx serve exited {status} on SIGTERM")
    trigger_failures, trigger = trigger_round_trip(args, provider)
    failures += trigger_failures
    save_records(provider, logs)
    return summary(reports, trigger, failures, provider, time.monotonic() - started)


def trigger_round_trip(args: argparse.Namespace, provider: Provider) -> tuple[list[str], str]:
    proxy = Proxy(args.cutctx, provider.url, {}, args.work, "serve-trigger")
    try:
        return trigger_test(proxy, provider)
    except (OSError, ValueError) as error:
        return [f"trigger: {error}"], f"FAILED: {error}"
    finally:
        proxy.stop()


def report_of(run: Run, provider: Provider, events: list[dict[str, Any]], metrics: str,
              windows: dict[str, int], summarizer: str = "none") -> Report:
    fmt = "anthropic" if run.name == "claude" else "openai-responses"
    mine = [e for e in events if e.get("format") == fmt]
    report = Report(run.name, fmt, provider.state(run.name).records, mine)
    window = windows[CLAUDE_MODEL if run.name == "claude" else CODEX_MODEL]
    check_client(report, provider, metrics, window, run)
    check_summaries(report, events, summarizer)
    if run.name == "codex":
        check_codex_compaction(report)
    if run.exit != 0:
        report.note(f"its last stderr: {run.stderr.strip()[-600:]!r}")
    return report


def summary(reports: list[Report], trigger: str, failures: list[str], provider: Provider,
            seconds: float) -> int:
    refused = provider.state("connect").records
    if refused:
        hosts = sorted({r.path for r in refused})
        print(f"== calls for other hosts, refused on loopback: {len(refused)} ({', '.join(hosts[:8])})")
    others = provider.state("other").records
    if others:
        paths = sorted({f"{r.method} {r.path.partition('?')[0]}" for r in others})
        print(f"== other requests answered: {len(others)} ({', '.join(paths[:8])})")
    print("== summary")
    width = max((len(k) for r in reports for k in r.figures), default=0)
    for report in reports:
        verdict = "ok" if not report.failures else f"{len(report.failures)} checks failed"
        print(f"{report.name} ({VERSIONS.get(report.name, '?')}): {verdict}")
        for label, text in report.figures.items():
            print(f"  {label:<{width}}  {text}")
        for note in report.notes:
            print(f"    {note}")
    print(f"compaction_trigger round trip: {trigger}")
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"agents check: {'ok' if not failures else f'{len(failures)} checks failed'} "
          f"in {seconds:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
