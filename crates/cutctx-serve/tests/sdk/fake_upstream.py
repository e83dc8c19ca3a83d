"""A loopback model provider for the proxy's tests and benchmark: OpenAI Chat Completions, OpenAI
Responses and Anthropic Messages, with their server-sent event streams, and faults on request.

:class:`FakeUpstream` is an ``http.server.ThreadingHTTPServer`` on ``127.0.0.1`` (a port the
system picks). It records every request it receives (method, path, headers without the API
key, body bytes; the key headers' SHA-256 only) and every byte of body it answers with, so that a test
can compare what the proxy forwarded with what its client sent, and what the client read with
what the provider answered. The answers are shaped from the providers' documented objects:

* OpenAI Chat: a ``chat.completion`` (``choices[0].message`` with ``tool_calls``, ``usage`` with
  ``prompt_tokens_details.cached_tokens``), or with ``stream`` a ``chat.completion.chunk``
  stream ending ``data: [DONE]``, whose last chunk before it holds ``usage`` and no choices
  when ``stream_options.include_usage`` is set (every other chunk then has ``usage: null``);
* OpenAI Responses: a ``response`` (``reasoning`` with ``encrypted_content`` when the request
  ``include``s it, ``function_call`` and ``message`` items, ``usage`` with
  ``input_tokens_details.cached_tokens``), or the event stream ``response.created``,
  ``response.in_progress``, ``response.output_item.added`` / ``.done``,
  ``response.content_part.added`` / ``.done``, ``response.output_text.delta`` / ``.done``,
  ``response.function_call_arguments.delta`` / ``.done``, ``response.completed``, each with
  its ``sequence_number``;
* Anthropic: a ``message`` (``thinking`` with a ``signature`` when the request enables
  ``thinking``, ``text``, ``tool_use``; ``usage`` with ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens``), or the events ``message_start``, ``ping``,
  ``content_block_start`` / ``_delta`` (``thinking_delta``, ``signature_delta``,
  ``text_delta``, ``input_json_delta``) / ``_stop``, ``message_delta``, ``message_stop``.

The model answers with a call of the request's first tool while the request has tools and its
last user text does not hold ``[text]``; otherwise with text. Usage counts a quarter of the
body's bytes as prompt tokens (more than cutctx's estimate, which counts content only), and as
cached a quarter of the bytes it shares from the start with the previous body on the same path
(a provider's prefix cache, roughly).

Faults, chosen per request by the header ``x-fake-fault`` or by ``FAULT=NAME`` in the last user
text: ``500`` and ``429`` (with ``retry-after: 7``) in the provider's error shape; ``reset``
(a stream, or a body, cut by a TCP reset after its first part); ``slow`` (no answer for
``x-fake-delay-ms``, default 3000); ``slow-stream`` (the stream's events ``x-fake-delay-ms``
apart, default 200); ``slow-end`` (every event at once, then the end of the body that long
after). A request whose client goes away before its answer is complete is
recorded as ``cancelled``.

``GET /_fake/requests`` answers the records as JSON (bodies in base64), ``POST /_fake/reset``
forgets them. Run as a script (``python fake_upstream.py [PORT] [--no-records]``) it serves
until interrupted and prints ``fake upstream: listening on 127.0.0.1:PORT``.

>>> with FakeUpstream() as fake:
...     fake.base_url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeUpstream", "Record", "user_text"]

_CREATED = 1_767_225_600  # a fixed time: the answers do not depend on the clock
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key"}
_MAX_DELAY_MS = 20_000  # no fault keeps a thread longer than this


@dataclass
class Record:
    """One request the fake received, and what it answered."""

    number: int
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    key_sha256: dict[str, str]  # the API key headers' values' SHA-256, by lowercase name
    fault: str | None = None
    status: int = 0
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    sent: bytearray = field(default_factory=bytearray)
    done: bool = False
    cancelled: bool = False
    usage: tuple[int, int] | None = None  # (prompt tokens, of which cached) the answer reports

    def header(self, name: str) -> str | None:
        """The value of the request header ``name`` (case-insensitive), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def json(self) -> Any:
        """The body parsed."""
        return json.loads(self.body)

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON can hold it (bodies in base64)."""
        return {
            "number": self.number, "method": self.method, "path": self.path,
            "headers": self.headers, "body": base64.b64encode(self.body).decode(),
            "key_sha256": self.key_sha256, "fault": self.fault, "status": self.status,
            "response_headers": self.response_headers,
            "sent": base64.b64encode(bytes(self.sent)).decode(),
            "done": self.done, "cancelled": self.cancelled, "usage": self.usage,
        }


def user_text(body: Any) -> str:
    """The text of the last user message (or item) of a provider request, or ""."""
    if not isinstance(body, dict):
        return ""
    items = body.get("messages")
    if items is None:
        items = body.get("input")
    if isinstance(items, str):
        return items
    if not isinstance(items, list):
        return ""
    for item in reversed(items):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [b.get("text", "") for b in content
                     if isinstance(b, dict) and isinstance(b.get("text"), str)]
            if texts:
                return " ".join(texts)
            continue  # a user turn of tool results only: look further back
    return ""


def _kind(path: str) -> str | None:
    if path == "/v1/chat/completions":
        return "chat"
    if path == "/v1/responses":
        return "responses"
    if path == "/v1/messages":
        return "messages"
    return None


def _tool_name(kind: str, body: dict[str, Any]) -> str | None:
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools or not isinstance(tools[0], dict):
        return None
    first = tools[0]
    if kind == "chat":
        function = first.get("function")
        return function.get("name") if isinstance(function, dict) else None
    name = first.get("name")
    return name if isinstance(name, str) else None


def _error_body(kind: str | None, status: int, message: str) -> bytes:
    if kind == "messages":
        types = {429: "rate_limit_error", 500: "api_error", 400: "invalid_request_error"}
        payload: Any = {"type": "error",
                        "error": {"type": types.get(status, "api_error"), "message": message}}
    else:
        types = {429: "rate_limit_exceeded", 500: "server_error", 400: "invalid_request_error"}
        payload = {"error": {"message": message, "type": types.get(status, "server_error"),
                             "param": None, "code": None}}
    return json.dumps(payload).encode()


def _sse(event: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


class _Answer:
    """What the model answers one request with: a call of the first tool, or text."""

    def __init__(self, kind: str, body: dict[str, Any], size: int, number: int,
                 cached: int) -> None:
        self.kind = kind
        self.body = body
        self.number = number
        self.model = str(body.get("model", "fake-model"))
        self.prompt = size // 4
        self.cached = min(cached, self.prompt)
        tool = _tool_name(kind, body)
        self.tool = tool if tool and "[text]" not in user_text(body) else None
        self.arguments = json.dumps({"path": f"notes/{number}.txt", "line": number})
        self.text = f"Answer {number}: the notes say what the tool returned."
        self.reasoning = False
        if kind == "messages":
            thinking = body.get("thinking")
            self.reasoning = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        elif kind == "responses":
            include = body.get("include")
            self.reasoning = isinstance(include, list) and "reasoning.encrypted_content" in include
        self.thought = f"Call {number}: the user wants the notes read first."
        self.signature = base64.b64encode(
            hashlib.sha256(f"signature {number} {self.thought}".encode()).digest() * 3).decode()
        self.call_id = {"chat": f"call_{number:05d}", "responses": f"call_{number:05d}",
                        "messages": f"toolu_{number:05d}"}[kind]

    # -- whole answers ---------------------------------------------------------------

    def whole(self) -> dict[str, Any]:
        return {"chat": self._chat, "responses": self._response,
                "messages": self._message}[self.kind]()

    def _chat_usage(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt, "completion_tokens": 20,
                "total_tokens": self.prompt + 20,
                "prompt_tokens_details": {"cached_tokens": self.cached, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0,
                                              "rejected_prediction_tokens": 0}}

    def _chat(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None if self.tool else self.text,
                                   "refusal": None, "annotations": []}
        if self.tool:
            message["tool_calls"] = [{"id": self.call_id, "type": "function",
                                      "function": {"name": self.tool,
                                                   "arguments": self.arguments}}]
        return {"id": f"chatcmpl-{self.number}", "object": "chat.completion",
                "created": _CREATED + self.number, "model": self.model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if self.tool else "stop"}],
                "usage": self._chat_usage(), "service_tier": "default",
                "system_fingerprint": None}

    def _output_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.reasoning:
            items.append({"type": "reasoning", "id": f"rs_{self.number:05d}", "summary": [],
                          "encrypted_content": self.signature})
        if self.tool:
            items.append({"type": "function_call", "id": f"fc_{self.number:05d}",
                          "call_id": self.call_id, "name": self.tool,
                          "arguments": self.arguments, "status": "completed"})
        else:
            items.append({"type": "message", "id": f"msg_{self.number:05d}",
                          "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": self.text,
                                       "annotations": [], "logprobs": []}]})
        return items

    def _response(self, status: str = "completed", output: list[Any] | None = None) -> dict[str, Any]:
        done = status == "completed"
        return {
            "id": f"resp_{self.number:05d}", "object": "response",
            "created_at": _CREATED + self.number, "status": status, "error": None,
            "incomplete_details": None, "instructions": self.body.get("instructions"),
            "max_output_tokens": self.body.get("max_output_tokens"), "model": self.model,
            "output": self._output_items() if output is None else output,
            "parallel_tool_calls": True, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False,
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
            "tools": self.body.get("tools", []), "top_p": 1.0, "truncation": "disabled",
            "metadata": {},
            "usage": {"input_tokens": self.prompt,
                      "input_tokens_details": {"cached_tokens": self.cached},
                      "output_tokens": 20,
                      "output_tokens_details": {"reasoning_tokens": 10 if self.reasoning else 0},
                      "total_tokens": self.prompt + 20} if done else None,
        }

    def _content(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.reasoning:
            blocks.append({"type": "thinking", "thinking": self.thought,
                           "signature": self.signature})
        if self.tool:
            blocks.append({"type": "tool_use", "id": self.call_id, "name": self.tool,
                           "input": json.loads(self.arguments)})
        else:
            blocks.append({"type": "text", "text": self.text, "citations": None})
        return blocks

    def _anthropic_usage(self, output_tokens: int) -> dict[str, Any]:
        return {"input_tokens": self.prompt - self.cached, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": self.cached, "output_tokens": output_tokens,
                "service_tier": "standard"}

    def _message(self, content: list[Any] | None = None, stop: str | None = "") -> dict[str, Any]:
        reason = ("tool_use" if self.tool else "end_turn") if stop == "" else stop
        return {"id": f"msg_{self.number:05d}", "type": "message", "role": "assistant",
                "model": self.model, "content": self._content() if content is None else content,
                "stop_reason": reason, "stop_sequence": None,
                "usage": self._anthropic_usage(20 if content is None else 1)}

    # -- streams -----------------------------------------------------------------------

    def events(self) -> list[bytes]:
        return {"chat": self._chat_events, "responses": self._response_events,
                "messages": self._message_events}[self.kind]()

    def _chat_events(self) -> list[bytes]:
        options = self.body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        head = {"id": f"chatcmpl-{self.number}", "object": "chat.completion.chunk",
                "created": _CREATED + self.number, "model": self.model,
                "service_tier": "default", "system_fingerprint": None}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data: dict[str, Any] = {**head, "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            if usage:
                data["usage"] = None
            return _sse(None, data)

        out = []
        if self.tool:
            out.append(chunk({"role": "assistant", "content": None, "refusal": None,
                              "tool_calls": [{"index": 0, "id": self.call_id, "type": "function",
                                              "function": {"name": self.tool, "arguments": ""}}]}))
            for piece in _pieces(self.arguments):
                out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
            out.append(chunk({}, "tool_calls"))
        else:
            out.append(chunk({"role": "assistant", "content": "", "refusal": None}))
            for piece in _pieces(self.text):
                out.append(chunk({"content": piece}))
            out.append(chunk({}, "stop"))
        if usage:
            out.append(_sse(None, {**head, "choices": [], "usage": self._chat_usage()}))
        out.append(_sse(None, "[DONE]"))
        return out

    def _response_events(self) -> list[bytes]:
        out: list[bytes] = []

        def event(kind: str, **data: Any) -> None:
            out.append(_sse(kind, {"type": kind, "sequence_number": len(out), **data}))

        event("response.created", response=self._response("in_progress", []))
        event("response.in_progress", response=self._response("in_progress", []))
        for index, item in enumerate(self._output_items()):
            if item["type"] == "reasoning":
                event("response.output_item.added", output_index=index,
                      item={**item, "encrypted_content": None})
                event("response.output_item.done", output_index=index, item=item)
            elif item["type"] == "function_call":
                event("response.output_item.added", output_index=index,
                      item={**item, "arguments": "", "status": "in_progress"})
                for piece in _pieces(item["arguments"]):
                    event("response.function_call_arguments.delta", item_id=item["id"],
                          output_index=index, delta=piece)
                event("response.function_call_arguments.done", item_id=item["id"],
                      output_index=index, arguments=item["arguments"])
                event("response.output_item.done", output_index=index, item=item)
            else:
                event("response.output_item.added", output_index=index,
                      item={**item, "status": "in_progress", "content": []})
                empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                event("response.content_part.added", item_id=item["id"], output_index=index,
                      content_index=0, part=empty)
                for piece in _pieces(self.text):
                    event("response.output_text.delta", item_id=item["id"], output_index=index,
                          content_index=0, delta=piece, logprobs=[])
                event("response.output_text.done", item_id=item["id"], output_index=index,
                      content_index=0, text=self.text, logprobs=[])
                event("response.content_part.done", item_id=item["id"], output_index=index,
                      content_index=0, part=item["content"][0])
                event("response.output_item.done", output_index=index, item=item)
        event("response.completed", response=self._response())
        return out

    def _message_events(self) -> list[bytes]:
        out = [_sse("message_start", {"type": "message_start",
                                      "message": self._message([], None)}),
               _sse("ping", {"type": "ping"})]
        for index, block in enumerate(self._content()):
            kind = block["type"]
            if kind == "thinking":
                start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "tool_use":
                start = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": p}
                          for p in _pieces(self.arguments)]
            else:
                start = {"type": "text", "text": "", "citations": None}
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
            out.append(_sse("content_block_start", {"type": "content_block_start",
                                                    "index": index, "content_block": start}))
            for delta in deltas:
                out.append(_sse("content_block_delta", {"type": "content_block_delta",
                                                        "index": index, "delta": delta}))
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(_sse("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use" if self.tool else "end_turn",
                      "stop_sequence": None},
            "usage": {"output_tokens": 20}}))
        out.append(_sse("message_stop", {"type": "message_stop"}))
        return out


def _pieces(text: str, size: int = 16) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _fault_of(headers: Any, body: Any) -> str | None:
    fault = headers.get("x-fake-fault")
    if fault:
        return str(fault)
    text = user_text(body)
    marker = text.find("FAULT=")
    if marker >= 0:
        return text[marker + len("FAULT="):].split()[0]
    return None


class _Cancelled(Exception):
    """The client went away while the answer was being written."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the listen backlog: 64 clients may connect at once


class FakeUpstream:
    """The loopback provider; use it as a context manager (or call ``start`` and ``stop``).

    Attributes:
        records: every request received, in order.
    """

    def __init__(self, port: int = 0, *, keep: bool = True) -> None:
        self.records: list[Record] = []
        self.keep = keep  # False: count requests, keep no record (a long benchmark)
        self.count = 0
        self._lock = threading.Lock()
        self._last_body: dict[str, bytes] = {}
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30  # seconds an idle connection is kept

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in separate writes: without this, Nagle's algorithm
                # holds the body until the client's delayed ACK, some 40 ms later.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:  # noqa: N802 (the http.server spelling)
                self._handle()

            def do_POST(self) -> None:  # noqa: N802
                self._handle()

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                if path.startswith("/_fake/"):
                    self._control(path)
                    return
                keys = {k.lower(): hashlib.sha256(v.encode()).hexdigest()
                        for k, v in self.headers.items() if k.lower() in _SECRET_HEADERS}
                record = Record(
                    number=0, method=self.command, path=self.path,
                    headers=[(k, v) for k, v in self.headers.items()
                             if k.lower() not in _SECRET_HEADERS],
                    body=raw,
                    key_sha256=keys)
                with upstream._lock:
                    record.number = upstream.count
                    upstream.count += 1
                    previous = b""
                    if upstream.keep:
                        upstream.records.append(record)
                        previous = upstream._last_body.get(path, b"")
                        upstream._last_body[path] = raw
                try:
                    self._answer(record, path, raw, previous)
                    record.done = True
                except _Cancelled:
                    record.cancelled = True
                    self.close_connection = True

            def _answer(self, record: Record, path: str, raw: bytes, previous: bytes) -> None:
                kind = _kind(path)
                if kind is None:
                    if path == "/v1/models":
                        payload = {"object": "list", "data": [
                            {"id": "fake-model", "object": "model", "created": _CREATED,
                             "owned_by": "fake"}]}
                        self._whole(record, 200, json.dumps(payload).encode())
                    else:
                        self._whole(record, 404, _error_body(None, 404, "no such path"))
                    return
                try:
                    body = json.loads(raw)
                    if not isinstance(body, dict):
                        raise ValueError("not an object")
                except ValueError:
                    self._whole(record, 400, _error_body(kind, 400, "the body is not a JSON object"))
                    return
                fault = _fault_of(self.headers, body)
                record.fault = fault
                delay = min(int(self.headers.get("x-fake-delay-ms") or 0) or
                            (3000 if fault == "slow" else 200), _MAX_DELAY_MS) / 1000
                if fault in ("500", "429"):
                    status = int(fault)
                    extra = [("retry-after", "7")] if status == 429 else []
                    self._whole(record, status, _error_body(kind, status, f"fault {fault}"), extra)
                    return
                if fault == "slow":
                    time.sleep(delay)
                cached = len(os.path.commonprefix([raw, previous])) // 4
                answer = _Answer(kind, body, len(raw), record.number, cached)
                record.usage = (answer.prompt, answer.cached)
                extra = [("x-request-id", f"req_{record.number:05d}")]
                if kind == "messages":
                    extra.append(("request-id", f"req_{record.number:05d}"))
                if body.get("stream") is True:
                    self._stream(record, answer.events(), extra, fault, delay)
                else:
                    data = json.dumps(answer.whole()).encode()
                    if fault == "reset":
                        self._head(record, 200, "application/json", extra, len(data))
                        self._write(record, data[: len(data) // 2])
                        self._reset()
                        return
                    self._whole(record, 200, data, extra)

            def _control(self, path: str) -> None:
                if path == "/_fake/requests":
                    with upstream._lock:
                        data = json.dumps([r.as_dict() for r in upstream.records]).encode()
                elif path == "/_fake/reset" and self.command == "POST":
                    upstream.reset()
                    data = b"{}"
                else:
                    data = b'{"error": "no such control"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _head(self, record: Record, status: int, content_type: str,
                      extra: list[tuple[str, str]], length: int | None) -> None:
                headers = [("Content-Type", content_type), *extra]
                headers.append(("Content-Length", str(length)) if length is not None
                               else ("Transfer-Encoding", "chunked"))
                record.status = status
                record.response_headers = headers
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()

            def _whole(self, record: Record, status: int, data: bytes,
                       extra: list[tuple[str, str]] | None = None) -> None:
                self._head(record, status, "application/json", extra or [], len(data))
                self._write(record, data)

            def _stream(self, record: Record, events: list[bytes], extra: list[tuple[str, str]],
                        fault: str | None, delay: float) -> None:
                self._head(record, 200, "text/event-stream; charset=utf-8",
                           [("Cache-Control", "no-cache"), *extra], None)
                for index, event in enumerate(events):
                    if fault == "reset" and index == 2:
                        self._reset()
                        return
                    if fault == "slow-stream" and index > 0:
                        time.sleep(delay)
                    self._chunk(record, event)
                if fault == "slow-end":
                    time.sleep(delay)
                self._chunk(record, b"")

            # Each part is recorded before it is written: the client may have read it (and
            # the test compared it) before this thread runs again.
            def _write(self, record: Record, data: bytes) -> None:
                record.sent += data
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError as error:
                    raise _Cancelled from error

            def _chunk(self, record: Record, data: bytes) -> None:
                record.sent += data
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                except OSError as error:
                    raise _Cancelled from error

            def _reset(self) -> None:
                # SO_LINGER 0 then close: the kernel sends RST instead of FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                os.close(self.connection.detach())
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

            def handle_one_request(self) -> None:
                try:
                    super().handle_one_request()
                except OSError:
                    self.close_connection = True  # a socket reset here, or by a fault

        self._server = _Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on."""
        port: int = self._server.server_address[1]
        return port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: the upstream URL the proxy takes."""
        return f"http://127.0.0.1:{self.port}"

    def on(self, path: str) -> list[Record]:
        """The records of requests to ``path`` (query excluded), in order."""
        with self._lock:
            return [r for r in self.records if r.path.split("?", 1)[0] == path]

    def reset(self) -> None:
        """Forget every record."""
        with self._lock:
            self.records.clear()
            self._last_body.clear()

    def start(self) -> FakeUpstream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    args = sys.argv[1:]
    keep = "--no-records" not in args
    args = [a for a in args if a != "--no-records"]
    fake = FakeUpstream(int(args[0]) if args else 0, keep=keep)
    print(f"fake upstream: listening on 127.0.0.1:{fake.port}", flush=True)
    try:
        fake._server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()


if __name__ == "__main__":
    main()
