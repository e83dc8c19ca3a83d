"""A loopback model provider for the SDK clients' tests: OpenAI Chat Completions and Responses,
and Anthropic Messages, answered by a scripted model.

:class:`FakeProvider` is an ``http.server.ThreadingHTTPServer`` on ``127.0.0.1`` (a port the
system picks) that records the JSON body of every request it receives and answers each with
what its ``respond`` callable returns for it. The builders below shape those answers from the
providers' documented response objects, so the official SDKs parse them as they would the real
service's:

* :func:`chat_completion`: a ``chat.completion`` object, ``choices[0].message`` with its
  ``tool_calls``, and ``usage``;
* :func:`response`: a ``response`` object whose ``output`` holds ``reasoning`` (with
  ``encrypted_content``), ``function_call`` and ``message`` items, and ``usage``;
* :func:`message`: an Anthropic ``message`` whose ``content`` holds ``thinking`` (with a
  ``signature``), ``text`` and ``tool_use`` blocks, and ``usage``.

The server is bounded: past ``max_requests`` requests it answers 429 without asking the model,
each connection has a timeout, and leaving the ``with`` block shuts it down.

>>> with FakeProvider(lambda path, body: chat_completion(text="Hi")) as server:
...     server.openai_base_url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "FakeProvider",
    "chat_completion",
    "function_call_item",
    "message",
    "message_item",
    "reasoning_item",
    "response",
]

Respond = Callable[[str, dict[str, Any]], dict[str, Any]]

_CREATED = 1_767_225_600  # a fixed time: the answers are the same on every run


class FakeProvider:
    """The loopback server; use it as a context manager.

    Attributes:
        requests: ``(path, body)`` of every request received, in order.
    """

    def __init__(self, respond: Respond, *, max_requests: int = 2000) -> None:
        self.respond = respond
        self.max_requests = max_requests
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 10  # seconds a connection may stay silent
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._send(400, {"error": {"message": "the body is not JSON"}})
                    return
                path = self.path.split("?", 1)[0]
                with provider._lock:
                    over = len(provider.requests) >= provider.max_requests
                    if not over:
                        provider.requests.append((path, body))
                if over:
                    self._send(429, {"error": {"message": "too many requests for the test"}})
                    return
                try:
                    answer = provider.respond(path, body)
                except Exception as error:  # the test reads these; the client sees a 500
                    provider.errors.append(f"{type(error).__name__}: {error}")
                    self._send(500, {"error": {"message": str(error)}})
                    return
                self._send(200, answer)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for ``openai.OpenAI``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic``."""
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        """The bodies received on ``path``, in order."""
        with self._lock:
            return [body for p, body in self.requests if p == path]

    def __enter__(self) -> FakeProvider:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _usage_tokens(body: dict[str, Any]) -> int:
    """A stand-in prompt size for ``usage``: a quarter of the body's characters."""
    return len(json.dumps(body)) // 4


def chat_completion(
    *,
    text: str | None = None,
    tool_calls: tuple[tuple[str, str, dict[str, Any]], ...] = (),
    request: dict[str, Any] | None = None,
    number: int = 0,
) -> dict[str, Any]:
    """A ``chat.completion``: ``text`` and ``tool_calls`` as ``(id, name, arguments)``."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for cid, name, arguments in tool_calls
        ]
    prompt = _usage_tokens(request or {})
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": _CREATED + number,
        "model": (request or {}).get("model", "fake-model"),
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if tool_calls else "stop",
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": 20,
                  "total_tokens": prompt + 20},
    }


def response(
    *,
    output: list[dict[str, Any]],
    request: dict[str, Any] | None = None,
    number: int = 0,
) -> dict[str, Any]:
    """A ``response`` object whose ``output`` items are built with :func:`reasoning_item`,
    :func:`function_call_item` and :func:`message_item`."""
    request = request or {}
    prompt = _usage_tokens(request)
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": _CREATED + number,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "model": request.get("model", "fake-model"),
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": request.get("tools", []),
        "top_p": 1.0,
        "metadata": {},
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": prompt + 20,
        },
    }


def reasoning_item(number: int, encrypted_content: str) -> dict[str, Any]:
    """A Responses ``reasoning`` item with its ``encrypted_content``."""
    return {"type": "reasoning", "id": f"rs_{number}", "summary": [],
            "encrypted_content": encrypted_content}


def function_call_item(number: int, call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A Responses ``function_call`` item."""
    return {"type": "function_call", "id": f"fc_{number}", "call_id": call_id, "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}


def message_item(number: int, text: str) -> dict[str, Any]:
    """A Responses assistant ``message`` item."""
    return {"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def message(
    *,
    content: list[dict[str, Any]],
    request: dict[str, Any] | None = None,
    number: int = 0,
) -> dict[str, Any]:
    """An Anthropic ``message`` with ``content`` blocks (``thinking``, ``text``, ``tool_use``)."""
    request = request or {}
    uses_tool = any(block.get("type") == "tool_use" for block in content)
    return {
        "id": f"msg_{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake-model"),
        "content": content,
        "stop_reason": "tool_use" if uses_tool else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": _usage_tokens(request), "output_tokens": 20,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }
