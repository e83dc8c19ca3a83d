"""The fake provider on its own: the official SDKs, pointed straight at it, parse its answers and
streams in every format, see its faults as the real services' errors, and it records what it
was sent and what it answered."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from fake_upstream import FakeUpstream
from serve import Tee

TOOL_CHAT = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
TOOL_RESPONSES = [{"type": "function", "name": "read_file", "description": "Read a file.",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
TOOL_ANTHROPIC = [{"name": "read_file", "description": "Read a file.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def oa(fake: FakeUpstream, tee: Any = None) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url + "/v1", api_key="sk-fake", max_retries=0,
                         http_client=httpx.Client(transport=tee or httpx.HTTPTransport()))


def an(fake: FakeUpstream, tee: Any = None) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="sk-ant-fake", max_retries=0,
                               http_client=httpx2.Client(transport=tee or httpx2.HTTPTransport()))


def test_chat_whole_and_streamed(fake: FakeUpstream) -> None:
    client = oa(fake)
    answer = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "read it"}], tools=TOOL_CHAT)
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "read_file" and json.loads(call.function.arguments)["line"] == 0
    assert answer.usage.prompt_tokens_details.cached_tokens == 0
    stream = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "read it"}], tools=TOOL_CHAT,
        stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert json.loads(arguments)["line"] == 1
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens > 0
    # The second body repeats the first's start: the prefix cache counts it.
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens > 0
    text = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "[text] say it"}], tools=TOOL_CHAT)
    assert text.choices[0].message.content.startswith("Answer 2")
    assert [r.path for r in fake.records] == ["/v1/chat/completions"] * 3
    first = fake.records[0]
    assert first.key_sha256["authorization"]
    assert all(k.lower() != "authorization" for k, _ in first.headers), "the key was recorded"


def test_responses_whole_and_streamed(fake: FakeUpstream) -> None:
    client = oa(fake)
    answer = client.responses.create(model="gpt-test", input="read it", tools=TOOL_RESPONSES,
                                     include=["reasoning.encrypted_content"])
    kinds = [item.type for item in answer.output]
    assert kinds == ["reasoning", "function_call"] and answer.output[0].encrypted_content
    with client.responses.stream(model="gpt-test", input="[text] say it") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text and final.output_text.startswith("Answer 1")
    events = list(client.responses.create(model="gpt-test", input="go", tools=TOOL_RESPONSES,
                                          stream=True))
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_messages_whole_and_streamed(fake: FakeUpstream) -> None:
    client = an(fake)
    answer = client.messages.create(
        model="claude-test", max_tokens=1024, tools=TOOL_ANTHROPIC,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "read it"}])
    assert [b.type for b in answer.content] == ["thinking", "tool_use"]
    assert answer.content[0].signature and answer.stop_reason == "tool_use"
    assert answer.usage.cache_read_input_tokens == 0
    with client.messages.stream(
            model="claude-test", max_tokens=1024, tools=TOOL_ANTHROPIC,
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "read it"}]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use"]
    assert final.content[0].signature and final.content[1].input["line"] == 1
    assert final.usage.cache_read_input_tokens > 0 and final.usage.output_tokens == 20


def test_faults_reach_the_sdks(fake: FakeUpstream) -> None:
    client = oa(fake)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=messages,
                                       extra_headers={"x-fake-fault": "500"})
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="m", messages=messages,
                                       extra_headers={"x-fake-fault": "429"})
    assert limited.value.response.headers["retry-after"] == "7"
    with pytest.raises(anthropic.RateLimitError):
        an(fake).messages.create(model="c", max_tokens=10,
                                 messages=[{"role": "user", "content": "FAULT=429 now"}])
    with pytest.raises((openai.APIConnectionError, httpx.TransportError)):
        list(client.chat.completions.create(model="m", messages=messages, stream=True,
                                            extra_headers={"x-fake-fault": "reset"}))
    slow = openai.OpenAI(base_url=fake.base_url + "/v1", api_key="k", max_retries=0, timeout=0.5)
    with pytest.raises(openai.APITimeoutError):
        slow.chat.completions.create(model="m", messages=messages,
                                     extra_headers={"x-fake-fault": "slow", "x-fake-delay-ms": "2000"})


def test_records_what_it_sent_and_sees_a_client_leave(fake: FakeUpstream) -> None:
    tee = Tee()
    client = oa(fake, tee)
    list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                        stream=True))
    assert bytes(tee.exchanges[0].body) == bytes(fake.records[0].sent)
    assert tee.exchanges[0].request_body == fake.records[0].body
    body = json.dumps({"model": "m", "stream": True,
                       "messages": [{"role": "user", "content": "FAULT=slow-stream"}]}).encode()
    with socket.create_connection(("127.0.0.1", fake.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        assert b"200" in sock.recv(100)
    record = fake.records[-1]
    for _ in range(100):
        if record.cancelled:
            break
        time.sleep(0.05)
    assert record.cancelled and not record.done
