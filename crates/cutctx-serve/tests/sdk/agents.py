"""Scripted agent loops through the official SDKs, one per provider format, that keep their whole
history and send it at every call, as an agent does; the model (the fake provider) calls a tool
at most calls and the agent answers with the tool's output (about 600 characters).

Anthropic requests think (``thinking`` ``adaptive``, or ``enabled`` with a budget). Every
tenth call the user asks for text instead (``[text]`` in the user's words), and then
gives the next task. :class:`Agent` ``step()`` makes one call and appends what came back; its
``signed`` lists the reasoning the last answer carried (Anthropic thinking signatures,
Responses encrypted reasoning) for the reasoning check.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import httpx2
import openai

from serve import Tee

SYSTEM = "You are a careful assistant. Read the notes with the tool before answering."
TOOL_CHAT = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of notes.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                    "line": {"type": "integer"}}}}}]
TOOL_RESPONSES = [{"type": "function", "name": "read_file", "description": "Read a file of notes.",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                                   "line": {"type": "integer"}}}}]
TOOL_ANTHROPIC = [{"name": "read_file", "description": "Read a file of notes.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"},
                                                                     "line": {"type": "integer"}}}}]


def tool_output(call: int) -> str:
    """What the tool returns at call ``call``: about 600 characters, different every call."""
    line = f"line {call}: the measurement of sample {call * 7 % 101} was {call * 13 % 97}.{call % 10} units; "
    return (line * 8)[:600]


def openai_client(base_url: str, tee: Any, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test-key", max_retries=0,
                         http_client=httpx.Client(transport=tee), **options)


def anthropic_client(base_url: str, tee: Any, **options: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test-key", max_retries=0,
                               http_client=httpx2.Client(transport=tee), **options)


def tee_for(fmt: str) -> Any:
    return Tee(httpx2 if fmt == "anthropic" else httpx)


class Agent:
    """One conversation in format ``fmt`` (openai-chat, openai-responses, anthropic)."""

    def __init__(self, fmt: str, base_url: str, *, stream: bool,
                 headers: dict[str, str] | None = None, thinking: str = "adaptive") -> None:
        self.fmt = fmt
        self.thinking = thinking
        self.stream = stream
        self.headers = headers or {}
        self.tee = tee_for(fmt)
        self.calls = 0
        self.signed: list[str] = []
        self.connect(base_url)
        if fmt == "openai-chat":
            self.items: list[Any] = [{"role": "system", "content": SYSTEM},
                                     {"role": "user", "content": "Task 0: read the notes."}]
        elif fmt == "openai-responses":
            self.items = [{"role": "user", "content": "Task 0: read the notes."}]
        else:
            self.items = [{"role": "user", "content": "Task 0: read the notes."}]

    def connect(self, base_url: str) -> None:
        """Point the agent at ``base_url`` (a proxy restarted on another port)."""
        if self.fmt == "anthropic":
            self.client: Any = anthropic_client(base_url, self.tee)
        else:
            self.client = openai_client(base_url, self.tee)

    def step(self) -> None:
        """One model call, its answer appended, then the tool's output (or the next task)."""
        self.calls += 1
        self.signed = []
        getattr(self, "_" + self.fmt.replace("-", "_"))()

    def _wants_text(self) -> bool:
        return self.calls % 10 == 0

    def _openai_chat(self) -> None:
        args: dict[str, Any] = {"model": "gpt-4o", "messages": self.items, "tools": TOOL_CHAT,
                                "extra_headers": self.headers}
        if self.stream:
            chunks = list(self.client.chat.completions.create(
                **args, stream=True, stream_options={"include_usage": True}))
            content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            calls: dict[int, dict[str, Any]] = {}
            for c in chunks:
                for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
                    call = calls.setdefault(d.index, {"id": "", "type": "function",
                                                      "function": {"name": "", "arguments": ""}})
                    call["id"] += d.id or ""
                    if d.function:
                        call["function"]["name"] += d.function.name or ""
                        call["function"]["arguments"] += d.function.arguments or ""
            tool_calls = [calls[i] for i in sorted(calls)]
        else:
            answer = self.client.chat.completions.create(**args)
            message = answer.choices[0].message
            content = message.content or ""
            tool_calls = [c.model_dump(exclude_none=True) for c in message.tool_calls or []]
        if tool_calls:
            self.items.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
            for call in tool_calls:
                self.items.append({"role": "tool", "tool_call_id": call["id"],
                                   "content": tool_output(self.calls)})
            if self._wants_text():
                self.items.append({"role": "user", "content": "[text] What do the notes say?"})
        else:
            self.items.append({"role": "assistant", "content": content})
            self.items.append({"role": "user", "content": f"Task {self.calls}: read the next notes."})

    def _openai_responses(self) -> None:
        args: dict[str, Any] = {"model": "gpt-5", "input": self.items, "tools": TOOL_RESPONSES,
                                "instructions": SYSTEM, "store": False,
                                "include": ["reasoning.encrypted_content"],
                                "extra_headers": self.headers}
        if self.stream:
            final = None
            for event in self.client.responses.create(**args, stream=True):
                if event.type == "response.completed":
                    final = event.response
            assert final is not None, "the stream ended without response.completed"
        else:
            final = self.client.responses.create(**args)
        calls = []
        for item in final.output:
            data = item.model_dump(exclude_none=True)
            if item.type == "reasoning":
                self.signed.append(item.encrypted_content)
            if item.type == "message":
                data = {"type": "message", "role": "assistant", "id": item.id,
                        "status": "completed",
                        "content": [{"type": "output_text", "text": final.output_text,
                                     "annotations": []}]}
            self.items.append(data)
            if item.type == "function_call":
                calls.append(item.call_id)
        for call_id in calls:
            self.items.append({"type": "function_call_output", "call_id": call_id,
                               "output": tool_output(self.calls)})
        if calls and self._wants_text():
            self.items.append({"role": "user", "content": "[text] What do the notes say?"})
        elif not calls:
            self.items.append({"role": "user", "content": f"Task {self.calls}: read the next notes."})

    def _anthropic(self) -> None:
        args: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 2048,
                                "system": SYSTEM, "messages": self.items, "tools": TOOL_ANTHROPIC,
                                "thinking": {"type": "adaptive"} if self.thinking == "adaptive"
                                else {"type": "enabled", "budget_tokens": 1024},
                                "extra_headers": self.headers}
        if self.stream:
            with self.client.messages.stream(**args) as stream:
                final = stream.get_final_message()
        else:
            final = self.client.messages.create(**args)
        blocks = [b.model_dump(exclude_none=True) for b in final.content]
        self.signed = [b["signature"] for b in blocks if b["type"] == "thinking"]
        self.items.append({"role": "assistant", "content": blocks})
        uses = [b for b in blocks if b["type"] == "tool_use"]
        if uses:
            content: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": b["id"], "content": tool_output(self.calls)}
                for b in uses]
            if self._wants_text():
                content.append({"type": "text", "text": "[text] What do the notes say?"})
            self.items.append({"role": "user", "content": content})
        else:
            self.items.append({"role": "user", "content": f"Task {self.calls}: read the next notes."})
