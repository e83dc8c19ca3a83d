"""Helpers of the proxy's SDK tests: running `cutctx serve`, counting with `cutctx estimate`,
recording an SDK's raw HTTP exchanges, and the checks over what the provider received.

* :class:`Serve` starts ``cutctx serve --listen 127.0.0.1:0`` in front of a
  :class:`fake_upstream.FakeUpstream`, reads the port from its first stderr line and keeps the
  rest of stderr (the structured logs) in ``logs``; ``kill()`` is SIGKILL, ``stop()`` SIGTERM.
* :func:`estimate` runs ``cutctx estimate --format F --reserve-output 0`` on a body: its total,
  or an AssertionError when cutctx cannot read the body in its format.
* :class:`Tee` is an ``httpx`` transport that records each exchange's request bytes and the
  response's status, headers and body bytes as they came off the wire.
* :class:`Conversation` holds the properties of one conversation's requests as the provider
  received them: within the window, valid, each extending the one before except at a firing,
  and signed reasoning sent only after the prefix it was produced with.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
LIST = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}
PATH = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
        "anthropic": "/v1/messages"}
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "transfer-encoding", "upgrade", "content-length"}


def cutctx_bin() -> str:
    """The binary under test: $CUTCTX_BIN, else target/release/cutctx of this repository."""
    path = os.environ.get("CUTCTX_BIN") or os.path.join(ROOT, "target", "release", "cutctx")
    return os.path.abspath(path)


class Serve:
    """A running ``cutctx serve`` (see the module's documentation)."""

    def __init__(self, cli: str, fake: Any, args: list[str], *, state: str) -> None:
        self.cli = cli
        self.fake = fake
        self.args = args
        self.state = state
        self.logs: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.start()

    def start(self) -> None:
        """Start (or restart, after ``kill``) the proxy with the same arguments and state."""
        argv = [self.cli, "serve", "--listen", "127.0.0.1:0",
                "--openai-upstream", self.fake.base_url,
                "--anthropic-upstream", self.fake.base_url,
                "--state", self.state, *self.args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        assert self.proc.stderr is not None
        # A proxy that never says it listens is killed, which ends the read below.
        watchdog = threading.Timer(20, self.proc.kill)
        watchdog.start()
        first = self.proc.stderr.readline()
        watchdog.cancel()
        line = first.decode(errors="replace").strip()
        prefix = "cutctx serve: listening on 127.0.0.1:"
        if not line.startswith(prefix):
            rest = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
            self.proc.kill()
            raise AssertionError(f"cutctx serve did not say it listens: {line!r} {rest[-2000:]!r}")
        self.port = int(line[len(prefix):])
        stream = self.proc.stderr
        threading.Thread(target=self._drain, args=(stream,), daemon=True).start()

    def _drain(self, stream: Any) -> None:
        for raw in iter(stream.readline, b""):
            self.logs.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def metrics(self) -> dict[str, float]:
        """``GET /metrics`` summed by metric name (labels added up)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as answer:
            text = answer.read().decode()
        sums: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            name = name_labels.split("{", 1)[0]
            try:
                sums[name] = sums.get(name, 0.0) + float(value)
            except ValueError:
                continue
        return sums

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> int | None:
        """SIGTERM and wait: the exit status (None if it had to be killed)."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None


def estimate(cli: str, body: bytes, fmt: str) -> int:
    """cutctx's count of a provider request (which also validates it in its format)."""
    done = subprocess.run([cli, "estimate", "-", "--format", fmt, "--reserve-output", "0"],
                          input=body, capture_output=True, timeout=60)
    assert done.returncode == 0, (
        f"cutctx estimate --format {fmt} refused a forwarded body: {done.stderr.decode()[-800:]}")
    return int(json.loads(done.stdout)["total"])


class Exchange:
    """One request an SDK sent and what came back, as bytes."""

    def __init__(self, request: Any) -> None:
        self.method = request.method
        self.path = request.url.path
        self.request_headers = dict(request.headers)
        self.request_body = bytes(request.content)  # read by the transport before it is sent
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.body = bytearray()
        self.error: BaseException | None = None


def Tee(lib: Any = httpx) -> Any:  # noqa: N802 (used as a class)
    """An ``httpx`` (or ``httpx2``, which the anthropic SDK uses: ``lib``) transport recording
    every exchange (see :class:`Exchange`) in its ``exchanges``; pass it as
    ``http_client=lib.Client(transport=tee)``."""

    class TeeStream(lib.SyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self.inner = inner
            self.exchange = exchange

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self.inner:
                    self.exchange.body += chunk
                    yield chunk
            except BaseException as error:
                self.exchange.error = error
                raise

        def close(self) -> None:
            self.inner.close()

    class Transport(lib.BaseTransport):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            self.inner = lib.HTTPTransport()
            self.exchanges: list[Exchange] = []

        def handle_request(self, request: Any) -> Any:
            request.read()
            exchange = Exchange(request)
            self.exchanges.append(exchange)
            response = self.inner.handle_request(request)
            exchange.status = response.status_code
            exchange.headers = [(k.decode("latin-1"), v.decode("latin-1"))
                                for k, v in response.headers.raw]
            return lib.Response(status_code=response.status_code, headers=response.headers,
                                stream=TeeStream(response.stream, exchange),
                                extensions=response.extensions)

        def close(self) -> None:
            self.inner.close()

    return Transport()


def end_to_end(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers a proxy must pass on unchanged: all but the hop-by-hop ones."""
    return sorted((k.lower(), v) for k, v in headers if k.lower() not in HOP_BY_HOP)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class Conversation:
    """The checks over one conversation's requests, in the order the provider received them."""

    def __init__(self, cli: str, fmt: str, window: int) -> None:
        self.cli = cli
        self.fmt = fmt
        self.window = window
        self.calls = 0
        self.firings = 0
        self.largest = 0
        self.previous: Mapping[str, Any] | None = None
        self.produced: dict[str, tuple[str, list[str]]] = {}

    def see(self, body: bytes) -> None:
        """Check one forwarded body; say whether it was a firing (it does not extend the last)."""
        self.calls += 1
        total = estimate(self.cli, body, self.fmt)
        self.largest = max(self.largest, total)
        assert total <= self.window, f"call {self.calls}: {total} tokens over the window {self.window}"
        request = json.loads(body)
        items = list(request[LIST[self.fmt]])
        self._pairing(items)
        if self.previous is not None and not self._extends(self.previous, request):
            self.firings += 1
        self._reasoning(request, items)
        self.previous = request

    def answered(self, reasoning: str, request_body: bytes) -> None:
        """The provider, sent ``request_body``, produced the reasoning whose signature or
        encrypted content is ``reasoning``."""
        request = json.loads(request_body)
        items = list(request[LIST[self.fmt]])
        self.produced[reasoning] = (self._context(request), [canonical(i) for i in items])

    def _context(self, request: Mapping[str, Any]) -> str:
        return canonical({k: request.get(k) for k in ("tools", "system", "instructions")})

    def _extends(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
        key = LIST[self.fmt]
        rest = {k: v for k, v in after.items() if k != key}
        was = {k: v for k, v in before.items() if k != key}
        old, new = list(before[key]), list(after[key])
        return canonical(rest) == canonical(was) and len(new) >= len(old) and all(
            canonical(a) == canonical(b) for a, b in zip(old, new))

    def _reasoning(self, request: Mapping[str, Any], items: list[Any]) -> None:
        for index, item in enumerate(items):
            for signed in self._signed(item):
                if signed not in self.produced:
                    continue
                context, prefix = self.produced[signed]
                sent = [canonical(i) for i in items[:index]]
                assert context == self._context(request) and sent == prefix, (
                    f"call {self.calls}: signed reasoning at item {index} sent after another prefix")

    def _signed(self, item: Any) -> list[str]:
        if not isinstance(item, Mapping):
            return []
        if self.fmt == "openai-responses":
            if item.get("type") == "reasoning" and item.get("encrypted_content"):
                return [str(item["encrypted_content"])]
            return []
        content = item.get("content")
        if self.fmt != "anthropic" or not isinstance(content, list):
            return []
        return [str(b.get("signature")) for b in content
                if isinstance(b, Mapping) and b.get("type") == "thinking"]

    def _pairing(self, items: list[Any]) -> None:
        """Every tool result answers an open call; no call is open at the next assistant turn
        nor at the end."""
        open_calls: set[str] = set()
        for index, item in enumerate(items):
            calls, results, assistant = self._calls_and_results(item)
            for call_id in results:
                assert call_id in open_calls, f"call {self.calls}: item {index} answers {call_id!r}, no open call"
                open_calls.discard(call_id)
            if assistant:
                assert not open_calls, f"call {self.calls}: item {index} follows unanswered calls"
            open_calls |= set(calls)
        assert not open_calls, f"call {self.calls}: calls left unanswered {sorted(open_calls)}"

    def _calls_and_results(self, item: Any) -> tuple[list[str], list[str], bool]:
        if not isinstance(item, Mapping):
            return [], [], False
        if self.fmt == "openai-chat":
            if item.get("role") == "assistant":
                return [c["id"] for c in item.get("tool_calls") or []], [], True
            if item.get("role") == "tool":
                return [], [item["tool_call_id"]], False
            return [], [], False
        if self.fmt == "openai-responses":
            kind = item.get("type", "message")
            if kind == "function_call":
                return [item["call_id"]], [], False
            if kind == "function_call_output":
                return [], [item["call_id"]], False
            return [], [], kind == "message" and item.get("role") == "assistant"
        content = item.get("content")
        blocks = content if isinstance(content, list) else []
        calls = [b["id"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
        results = [b["tool_use_id"] for b in blocks
                   if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        return calls, results, item.get("role") == "assistant" and not calls
