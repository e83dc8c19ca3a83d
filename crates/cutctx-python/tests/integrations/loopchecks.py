"""What every adapter's scripted agent loop asserts about the requests its model receives.

A :class:`LoopChecks` sees each request a model is sent, as the provider's JSON (the adapter's
conversion of what the framework hands its model), and holds the properties the adapters
promise:

* it fits: cutctx's own count of the request (``cutctx.formats.estimate``) is at most the
  window;
* it is valid: cutctx reads it in its format (every provider rule cutctx knows), and, checked
  here independently, every tool result answers a call of the assistant turn before it and
  every call is answered before the next assistant turn;
* between firings it is the previous request with messages appended: the same fields, the
  previous list as its prefix;
* signed reasoning is sent only after the prefix it was produced with: a thinking block
  (Anthropic) or reasoning item (Responses) the model produced on a request whose list was
  ``P`` is sent only at position ``len(P)`` after ``P`` itself, with the same tools and system.

>>> checks = LoopChecks("openai-chat", window=100)
>>> checks.see({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}, fired=False)
>>> checks.calls
1
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cutctx.formats import estimate

__all__ = ["LoopChecks"]

_LIST = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}
_CALL_ITEMS = {"function_call", "custom_tool_call", "local_shell_call", "computer_call",
               "mcp_call"}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class LoopChecks:
    """The checks over one conversation's requests, in the order the model receives them."""

    def __init__(self, format: str, window: int, *, reserve_output: int | None = 0) -> None:
        self.format = format
        self.window = window
        self.reserve_output = reserve_output
        self.calls = 0
        self.firings = 0
        self.largest = 0
        self._previous: Mapping[str, Any] | None = None
        self._produced: dict[str, tuple[str, list[str]]] = {}

    def see(self, request: Mapping[str, Any], *, fired: bool) -> None:
        """Check ``request``, the ``fired`` flag saying whether the session compacted it."""
        self.calls += 1
        count = estimate(dict(request), self.format, reserve_output=self.reserve_output)
        total = int(count["total"])
        self.largest = max(self.largest, total)
        assert total <= self.window, f"call {self.calls}: {total} tokens over {self.window}"
        items = list(request[_LIST[self.format]])
        self._pairing(items)
        if fired:
            self.firings += 1
        elif self._previous is not None:
            self._appended(self._previous, request)
        self._reasoning(request, items)
        self._previous = json.loads(json.dumps(request))

    def produced(self, reasoning: str, request: Mapping[str, Any]) -> None:
        """Record that the model, sent ``request``, produced the reasoning whose signature or
        encrypted content is ``reasoning``."""
        items = list(request[_LIST[self.format]])
        self._produced[reasoning] = (self._context(request), [_canonical(i) for i in items])

    def _context(self, request: Mapping[str, Any]) -> str:
        return _canonical({k: request.get(k) for k in ("tools", "system", "instructions")})

    def _appended(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        key = _LIST[self.format]
        rest = {k: v for k, v in after.items() if k != key}
        was = {k: v for k, v in before.items() if k != key}
        assert _canonical(rest) == _canonical(was), f"call {self.calls}: fields changed"
        old, new = list(before[key]), list(after[key])
        assert len(new) >= len(old), f"call {self.calls}: the list shrank without a firing"
        for i, (a, b) in enumerate(zip(old, new)):
            assert _canonical(a) == _canonical(b), f"call {self.calls}: item {i} changed"

    def _reasoning(self, request: Mapping[str, Any], items: list[Any]) -> None:
        for index, item in enumerate(items):
            for signed in self._signed(item):
                if signed not in self._produced:
                    continue  # reasoning the script put in the history itself
                context, prefix = self._produced[signed]
                sent = [_canonical(i) for i in items[:index]]
                assert context == self._context(request) and sent == prefix, (
                    f"call {self.calls}: reasoning at item {index} sent after another prefix"
                )

    def _signed(self, item: Any) -> list[str]:
        if not isinstance(item, Mapping):
            return []
        if self.format == "openai-responses":
            if item.get("type") == "reasoning" and item.get("encrypted_content"):
                return [str(item["encrypted_content"])]
            return []
        content = item.get("content")
        if self.format != "anthropic" or not isinstance(content, list):
            return []
        out = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "thinking":
                out.append(str(block.get("signature")))
            elif isinstance(block, Mapping) and block.get("type") == "redacted_thinking":
                out.append(str(block.get("data")))
        return out

    def _pairing(self, items: list[Any]) -> None:
        """Each result answers a call still open; no call is left open at the next assistant
        turn (the end of the list may hold calls the model is about to answer: none, since
        the model is being sent the request, except in Responses where none may be open)."""
        open_calls: set[str] = set()
        for index, item in enumerate(items):
            calls, results, assistant = self._calls_and_results(item)
            for call_id in results:
                assert call_id in open_calls, (
                    f"call {self.calls}: item {index} answers {call_id!r}, not an open call"
                )
                open_calls.discard(call_id)
            if assistant or calls:
                assert not open_calls or self.format == "openai-responses" and not assistant, (
                    f"call {self.calls}: item {index} follows unanswered calls {sorted(open_calls)}"
                )
            open_calls |= set(calls)
        assert not open_calls, f"call {self.calls}: calls left unanswered {sorted(open_calls)}"

    def _calls_and_results(self, item: Any) -> tuple[list[str], list[str], bool]:
        if not isinstance(item, Mapping):
            return [], [], False
        if self.format == "openai-chat":
            if item.get("role") == "assistant":
                return [c["id"] for c in item.get("tool_calls") or []], [], True
            if item.get("role") == "tool":
                return [], [item["tool_call_id"]], False
            return [], [], False
        if self.format == "openai-responses":
            kind = item.get("type", "message")
            if kind in _CALL_ITEMS:
                return [item["call_id"]], [], False
            if isinstance(kind, str) and kind.endswith("_output"):
                return [], [item["call_id"]], False
            return [], [], kind == "message" and item.get("role") == "assistant"
        content = item.get("content")
        blocks = content if isinstance(content, list) else []
        calls = [b["id"] for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
        results = [b["tool_use_id"] for b in blocks
                   if isinstance(b, Mapping) and b.get("type") == "tool_result"]
        return calls, results, item.get("role") == "assistant"
