"""Faults through `cutctx serve`, seen by the official SDKs and curl: the provider's errors pass
through unchanged, the proxy's own (timeout, unreachable, too large, unreadable) come in the
provider's error shape, a reset or a client that leaves mid-stream ends the stream at both
ends, a proxy killed with SIGKILL and restarted on its SQLite state carries its
conversations on with the same compacted prefix, and the provider's usage is counted off
every answer, streamed or not."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import anthropic
import httpx
import httpx2
import openai
import pytest

from agents import Agent, anthropic_client, openai_client
from serve import PATH, Conversation, Tee

HELLO = [{"role": "user", "content": "hello"}]


def chat(proxy, **options):
    return openai_client(proxy.url, Tee(httpx), **options)


def claude(proxy, **options):
    return anthropic_client(proxy.url, Tee(httpx2), **options)


def curl(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["curl", "-sS", "--max-time", "30", *args], input=data,
                          capture_output=True, timeout=60)


def test_upstream_500_and_429_pass_through(fake, serve):
    proxy = serve()
    client = chat(proxy)
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="gpt-4o", messages=HELLO,
                                       extra_headers={"x-fake-fault": "500"})
    assert failed.value.status_code == 500
    assert failed.value.response.content == bytes(fake.records[-1].sent)
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="gpt-4o", messages=HELLO,
                                       extra_headers={"x-fake-fault": "429"})
    assert limited.value.status_code == 429
    assert limited.value.response.headers["retry-after"] == "7"
    with pytest.raises(anthropic.RateLimitError) as limited_claude:
        claude(proxy).messages.create(model="claude-sonnet-4-5", max_tokens=64,
                                      messages=[{"role": "user", "content": "FAULT=429 please"}])
    assert limited_claude.value.response.headers["retry-after"] == "7"
    assert limited_claude.value.body["error"]["type"] == "rate_limit_error"
    with pytest.raises(anthropic.InternalServerError):
        claude(proxy).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=HELLO,
                                      extra_headers={"x-fake-fault": "500"})


def test_reset_mid_stream_reaches_the_sdk(fake, serve):
    """The answer's status was 200 and its first events sent: the SDK sees the stream break,
    never a status of the proxy's making."""
    proxy = serve()
    with pytest.raises((openai.APIError, httpx.TransportError)) as broken:
        list(chat(proxy).chat.completions.create(model="gpt-4o", messages=HELLO, stream=True,
                                                  extra_headers={"x-fake-fault": "reset"}))
    assert not isinstance(broken.value, openai.APIStatusError)
    with pytest.raises((anthropic.APIError, httpx2.TransportError)) as broken_claude:
        with claude(proxy).messages.stream(model="claude-sonnet-4-5", max_tokens=64,
                                           messages=HELLO,
                                           extra_headers={"x-fake-fault": "reset"}) as stream:
            stream.get_final_message()
    assert not isinstance(broken_claude.value, anthropic.APIStatusError)
    with pytest.raises((openai.APIError, httpx.TransportError)) as broken_responses:
        list(chat(proxy).responses.create(model="gpt-5", input="hi", stream=True,
                                          extra_headers={"x-fake-fault": "reset"}))
    assert not isinstance(broken_responses.value, openai.APIStatusError)
    with pytest.raises((openai.APIError, httpx.TransportError)) as cut:
        chat(proxy).chat.completions.create(model="gpt-4o", messages=HELLO,
                                            extra_headers={"x-fake-fault": "reset"})
    assert not isinstance(cut.value, openai.APIStatusError), "a body cut short was answered whole"
    assert [r.fault for r in fake.records] == ["reset"] * 4


def test_slow_upstream_is_a_504_in_the_provider_shape(fake, serve):
    proxy = serve("--upstream-timeout-ms", "500")
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as timed_out:
        chat(proxy).chat.completions.create(model="gpt-4o", messages=HELLO,
                                            extra_headers={"x-fake-fault": "slow",
                                                           "x-fake-delay-ms": "4000"})
    assert time.monotonic() - started < 3.5
    assert timed_out.value.status_code == 504
    error = timed_out.value.response.json()["error"]
    assert error["type"] == "cutctx_upstream_timeout" and "message" in error and error["param"] is None
    with pytest.raises(anthropic.APIStatusError) as timed_out_claude:
        claude(proxy).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=HELLO,
                                      extra_headers={"x-fake-fault": "slow",
                                                     "x-fake-delay-ms": "4000"})
    assert timed_out_claude.value.status_code == 504
    body = timed_out_claude.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "cutctx_upstream_timeout"


def test_a_stalled_stream_is_cut_after_the_timeout(fake, serve):
    proxy = serve("--upstream-timeout-ms", "500")
    started = time.monotonic()
    with pytest.raises((openai.APIError, httpx.TransportError)):
        list(chat(proxy).chat.completions.create(
            model="gpt-4o", messages=HELLO, stream=True,
            extra_headers={"x-fake-fault": "slow-stream", "x-fake-delay-ms": "3000"}))
    assert time.monotonic() - started < 5


def test_client_leaving_mid_stream_cancels_the_upstream(fake, serve):
    proxy = serve()
    client = chat(proxy)
    stream = client.chat.completions.create(
        model="gpt-4o", messages=HELLO, stream=True,
        extra_headers={"x-fake-fault": "slow-stream", "x-fake-delay-ms": "700"})
    first = next(iter(stream))
    assert first.object == "chat.completion.chunk"
    stream.close()
    client.close()
    record = fake.records[-1]
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline and not record.cancelled and not record.done:
        time.sleep(0.05)
    assert record.cancelled and not record.done, "the provider kept streaming to a client that left"


def test_sigkill_and_restart_carries_the_conversation_on(cli, fake, serve):
    proxy = serve("--window", "3000", "--reserve-output", "0")
    agent = Agent("openai-chat", proxy.url, stream=False)
    checks = Conversation(cli, "openai-chat", 3000)
    path = PATH["openai-chat"]
    for _ in range(60):
        agent.step()
        fired = checks.firings
        checks.see(fake.on(path)[-1].body)
        if checks.firings > fired:
            break
    assert checks.firings == 1, "the conversation never fired: nothing to carry across a restart"
    agent.step()  # one call on the compacted prefix, stored before its answer came back
    checks.see(fake.on(path)[-1].body)
    before = json.loads(fake.on(path)[-1].body)
    proxy.kill()
    proxy.start()  # the same --state file, a new port
    agent.connect(proxy.url)
    agent.step()
    after = json.loads(fake.on(path)[-1].body)
    assert checks.firings == 1
    checks.see(fake.on(path)[-1].body)
    assert checks.firings == 1, "after the restart the conversation was sent another prefix"
    assert after["messages"][: len(before["messages"])] == before["messages"]
    assert len(after["messages"]) < len(agent.items), "after the restart the history went uncompacted"


def test_body_over_the_limit_is_413(fake, serve):
    proxy = serve("--max-body", "20000")
    big = [{"role": "user", "content": "x" * 30000}]
    with pytest.raises(openai.APIStatusError) as refused:
        chat(proxy).chat.completions.create(model="gpt-4o", messages=big)
    assert refused.value.status_code == 413
    assert refused.value.response.json()["error"]["type"] == "cutctx_request_too_large"
    with pytest.raises(anthropic.APIStatusError) as refused_claude:
        claude(proxy).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=big)
    assert refused_claude.value.status_code == 413
    body = refused_claude.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "cutctx_request_too_large"
    assert fake.records == [], "a refused body reached the provider"


def test_malformed_body_fails_open_and_closed(fake, serve):
    open_proxy = serve(state="memory")
    done = curl("-i", "-X", "POST", open_proxy.url + "/v1/chat/completions",
                "-H", "content-type: application/json", "--data-binary", "@-", data=b"{not json")
    assert done.returncode == 0, done.stderr
    assert fake.records[-1].body == b"{not json", "a body it cannot read is forwarded unchanged"
    assert done.stdout.split(b"\r\n\r\n", 1)[1] == bytes(fake.records[-1].sent)
    closed = serve("--fail-closed", state="memory")
    count = len(fake.records)
    for path, bad in (
            ("/v1/messages", b"{not json"),
            ("/v1/chat/completions", b"{not json"),
            ("/v1/messages", b'{"model": "c", "max_tokens": 5, "messages": '
                             b'[{"role": "assistant", "content": "first"}]}'),
            ("/v1/chat/completions", b'{"model": "c", "messages": '
                                     b'[{"role": "tool", "tool_call_id": "nope", "content": "r"}]}')):
        status, parsed = post(closed.url + path, bad)
        assert status == 400, f"{path} {bad!r} was answered {status}"
        error = parsed["error"]
        assert error["type"] == "cutctx_unreadable_request"
        if path == "/v1/messages":
            assert parsed["type"] == "error"
        else:
            assert error["param"] is None and "message" in error
    assert len(fake.records) == count, "--fail-closed forwarded an unreadable body"


def post(url: str, body: bytes) -> tuple[int, dict]:
    done = curl("-X", "POST", url, "-H", "content-type: application/json", "-w", "\n%{http_code}",
                "--data-binary", "@-", data=body)
    text, _, status = done.stdout.rpartition(b"\n")
    return int(status), json.loads(text)


def test_fail_closed_refuses_a_request_without_a_message_list(fake, serve):
    closed = serve("--fail-closed", state="memory")
    for path, bad in (("/v1/messages", b'{"model": "c", "max_tokens": 5, "messages": 7}'),
                      ("/v1/chat/completions", b'{"model": "c", "messages": "hi"}'),
                      ("/v1/messages", b'{"model": "c", "max_tokens": 5}')):
        status, parsed = post(closed.url + path, bad)
        assert status == 400, f"{path} {bad!r} was answered {status}"
    assert fake.records == [], "--fail-closed forwarded a request it could not read"


def test_unreachable_upstream_is_502(cli, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there

    class Nowhere:
        base_url = f"http://127.0.0.1:{port}"

    from serve import Serve
    proxy = Serve(cli, Nowhere(), [], state="memory")
    try:
        with pytest.raises(openai.APIStatusError) as failed:
            chat(proxy).chat.completions.create(model="gpt-4o", messages=HELLO)
        assert failed.value.status_code == 502
        assert failed.value.response.json()["error"]["type"] == "cutctx_upstream_unreachable"
    finally:
        assert proxy.stop() == 0


def test_curl_gets_the_providers_bytes_and_the_proxy_its_own_paths(fake, serve):
    proxy = serve(state="memory")
    body = json.dumps({"model": "gpt-4o", "messages": HELLO, "stream": True}).encode()
    done = curl("-N", "-X", "POST", proxy.url + "/v1/chat/completions", "-H",
                "authorization: Bearer sk-curl", "-H", "content-type: application/json",
                "--data-binary", "@-", data=body)
    assert done.returncode == 0, done.stderr
    assert fake.records[-1].body == body, "a fitting request was not forwarded byte for byte"
    assert done.stdout == bytes(fake.records[-1].sent) and done.stdout.endswith(b"data: [DONE]\n\n")
    models = curl(proxy.url + "/v1/models", "-H", "authorization: Bearer sk-curl")
    assert models.stdout == bytes(fake.records[-1].sent) and fake.records[-1].method == "GET"
    assert curl(proxy.url + "/healthz").stdout.strip() == b"ok"
    metrics = curl(proxy.url + "/metrics").stdout.decode()
    assert "cutctx_serve_requests_total" in metrics
    # /v1/compact answers what would be sent, without sending it.
    count = len(fake.records)
    compact = curl("-X", "POST", proxy.url + "/v1/compact", "-H", "x-cutctx-format: openai-chat",
                   "--data-binary", "@-", data=body)
    assert compact.stdout == body and len(fake.records) == count
    # x-cutctx-bypass forwards untouched, even a request over any window.
    bypass = serve("--window", "100", state="memory")
    big = json.dumps({"model": "gpt-4o", "messages": [
        {"role": "user", "content": "y" * 4000}, {"role": "assistant", "content": "z" * 4000},
        {"role": "user", "content": "w" * 4000}]}).encode()
    curl("-X", "POST", bypass.url + "/v1/chat/completions", "-H", "x-cutctx-bypass: 1",
         "--data-binary", "@-", data=big)
    assert fake.records[-1].body == big
    assert not [k for k, _ in fake.records[-1].headers if k.lower().startswith("x-cutctx-")]
    assert bypass.stop() == 0, "SIGTERM is a graceful stop with status 0"


STREAMS = {
    "/v1/chat/completions": {"model": "gpt-4o", "messages": HELLO, "stream": True,
                             "stream_options": {"include_usage": True}},
    "/v1/responses": {"model": "gpt-5", "input": HELLO, "stream": True},
    "/v1/messages": {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": HELLO,
                     "stream": True},
}


def usage_counted(proxy, fake, timeout=3.0):
    """Poll /metrics until the provider's usage it reports matches the fake's: (got, want)."""
    want = (sum(r.usage[1] for r in fake.records if r.usage),
            sum(r.usage[0] - r.usage[1] for r in fake.records if r.usage))
    deadline = time.monotonic() + timeout
    while True:
        metrics = proxy.metrics()
        got = (metrics.get("cutctx_serve_provider_cached_tokens_total", 0),
               metrics.get("cutctx_serve_provider_uncached_tokens_total", 0))
        if got == want or time.monotonic() > deadline:
            return got, want
        time.sleep(0.1)


def test_the_usage_of_streams_read_to_the_end_is_counted(fake, serve):
    proxy = serve(state="memory")
    with httpx.Client() as client:
        for path, body in STREAMS.items():
            for _ in range(2):  # the second is partly cached
                with client.stream("POST", proxy.url + path, json=body) as answer:
                    assert answer.status_code == 200
                    answer.read()
    got, want = usage_counted(proxy, fake)
    assert want[0] > 0 and got == want


def test_the_usage_of_a_stream_left_after_its_last_event_is_counted(fake, serve):
    """The openai SDK closes a stream once it reads `data: [DONE]`, which may be before the
    chunked body's end arrives: the usage chunk came before, and was forwarded."""
    proxy = serve(state="memory")
    with httpx.Client() as client:
        with client.stream("POST", proxy.url + "/v1/chat/completions",
                           json=STREAMS["/v1/chat/completions"],
                           headers={"x-fake-fault": "slow-end", "x-fake-delay-ms": "1000"}) as answer:
            seen = b""
            for chunk in answer.iter_raw():
                seen += chunk
                if seen.endswith(b"data: [DONE]\n\n"):
                    break
            assert b'"usage":{"prompt_tokens"' in seen
    got, want = usage_counted(proxy, fake)
    assert got == want, f"the proxy counted {got} (cached, uncached), the provider reported {want}"
