"""100-call agent loops through `cutctx serve` with the official SDKs, one per format, whole and
streamed, with tool calls (and signed reasoning in Responses and Anthropic): what the provider
receives fits the window, is valid in its format, extends the request before it except at a
firing, never carries signed reasoning after another prefix than the one it was produced
with, and the client reads the provider's bytes exactly."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess

import pytest

from agents import Agent
from serve import PATH, Conversation, end_to_end

WINDOW = 3000
CALLS = 100


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("fmt", ["openai-chat", "openai-responses", "anthropic"])
def test_agent_loop(fmt, stream, cli, fake, serve):
    proxy = serve("--window", str(WINDOW), "--reserve-output", "0")
    # Half the loops name their session, half leave the proxy to find it by the history.
    headers = {"x-test-trace": "loop-7"}
    if stream:
        headers["x-cutctx-session"] = f"loop-{fmt}"
    agent = Agent(fmt, proxy.url, stream=stream, headers=headers)
    checks = Conversation(cli, fmt, WINDOW)
    first_firing = None
    for call in range(1, CALLS + 1):
        agent.step()
        records = fake.on(PATH[fmt])
        assert len(records) == call, f"call {call}: the provider got {len(records)} requests"
        record = records[-1]
        exchange = agent.tee.exchanges[-1]
        firings = checks.firings
        checks.see(record.body)
        if checks.firings > firings and first_firing is None:
            first_firing = call
        if first_firing is None:
            assert record.body == exchange.request_body, f"call {call}: a fitting request was changed"
        # What the client read is what the provider answered, byte for byte.
        assert exchange.status == record.status == 200
        assert bytes(exchange.body) == bytes(record.sent), f"call {call}: the response bytes differ"
        sent_headers = dict(end_to_end(record.response_headers))
        got_headers = dict(end_to_end(exchange.headers))
        for name, value in sent_headers.items():
            assert got_headers.get(name) == value, f"call {call}: response header {name} changed"
        # Request headers: forwarded unchanged, the API key included, x-cutctx-* left out.
        assert record.header("x-test-trace") == "loop-7"
        assert not [k for k, _ in record.headers if k.lower().startswith("x-cutctx-")]
        keys = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in exchange.request_headers.items()
                if k in ("authorization", "x-api-key")}
        assert keys and record.key_sha256 == keys, f"call {call}: the API key was not forwarded as sent"
        for signed in agent.signed:
            checks.answered(signed, record.body)
    assert first_firing is not None, "the conversation never outgrew the window: nothing tested"
    assert 1 <= checks.firings <= CALLS // 4, f"{checks.firings} firings in {CALLS} calls"
    assert checks.largest <= WINDOW
    metrics = proxy.metrics()
    assert metrics.get("cutctx_serve_firings_total") == checks.firings, (
        f"the proxy counts {metrics.get('cutctx_serve_firings_total')} firings, the provider saw "
        f"{checks.firings}")
    assert metrics.get("cutctx_serve_requests_total") == CALLS
    if stream:
        return  # a streamed answer's usage: test_faults.py, the SDK may leave before the end
    # The usage the provider reported, read off every answer.
    usages = [r.usage for r in fake.on(PATH[fmt])]
    assert metrics.get("cutctx_serve_provider_cached_tokens_total") == sum(c for _, c in usages)
    assert metrics.get("cutctx_serve_provider_uncached_tokens_total") == sum(p - c for p, c in usages)


def test_enabled_thinking_in_a_long_tool_loop_keeps_the_compacted_prefix(cli, fake, serve):
    """Anthropic `thinking: enabled`: a tool loop in progress must keep its last assistant
    turn's thinking, so the session cannot fire inside it; what it sends meanwhile is its own
    request (the compacted prefix and the appended turns), never the client's whole history."""
    proxy = serve("--window", str(WINDOW), "--reserve-output", "0")
    agent = Agent("anthropic", proxy.url, stream=False, thinking="enabled")
    checks = Conversation(cli, "anthropic", WINDOW)
    for call in range(1, 61):
        agent.step()
        record = fake.on(PATH["anthropic"])[-1]
        fired = checks.firings
        checks.see(record.body)
        for signed in agent.signed:
            checks.answered(signed, record.body)
        if fired:  # once the history was compacted, it stays compacted
            client = json.loads(agent.tee.exchanges[-1].request_body)["messages"]
            assert len(record.json()["messages"]) < len(client), (
                f"call {call}: the client's whole history was forwarded after a firing")
    assert checks.firings >= 1


def test_enabled_thinking_with_an_early_trigger_stays_in_the_window(cli, fake, serve):
    """The documented remedy for `thinking: enabled`: fire at 60% of the window, so that a firing
    that must wait for the tool loop's answer waits while the request still fits."""
    proxy = serve("--window", str(WINDOW), "--reserve-output", "0", "--trigger", "0.6")
    agent = Agent("anthropic", proxy.url, stream=True, thinking="enabled")
    checks = Conversation(cli, "anthropic", WINDOW)
    for _ in range(CALLS):
        agent.step()
        record = fake.on(PATH["anthropic"])[-1]
        checks.see(record.body)
        for signed in agent.signed:
            checks.answered(signed, record.body)
    assert 1 <= checks.firings <= CALLS // 4
    assert proxy.metrics().get("cutctx_serve_fail_open_total", 0) == 0


def test_interleaved_conversations_find_their_own_sessions(cli, fake, serve):
    """Without x-cutctx-session, each request goes to the session whose history it extends:
    two conversations sharing their first turns, called in turn, each stay prefix-stable."""
    proxy = serve("--window", str(WINDOW), "--reserve-output", "0")
    agents = [Agent("openai-chat", proxy.url, stream=False) for _ in range(2)]
    agents[1].items[1]["content"] = "Task 0: read the other notes."
    checks = [Conversation(cli, "openai-chat", WINDOW) for _ in agents]
    for _ in range(40):
        for agent, check in zip(agents, checks):
            agent.step()
            check.see(fake.on(PATH["openai-chat"])[-1].body)
    assert all(1 <= c.firings <= 10 for c in checks), [c.firings for c in checks]
    assert proxy.metrics().get("cutctx_serve_firings_total") == sum(c.firings for c in checks)


def test_previous_response_id_passes_through_untouched(fake, serve):
    proxy = serve("--window", "100", state="memory")
    agent = Agent("openai-responses", proxy.url, stream=False)
    body = {"model": "gpt-5", "previous_response_id": "resp_00001",
            "input": [{"role": "user", "content": "z" * 2000}]}
    agent.client.responses.create(**body)
    assert fake.records[-1].body == agent.tee.exchanges[-1].request_body


def test_each_firing_leaves_a_receipt_in_the_ledger(cli, fake, serve, tmp_path):
    ledger = tmp_path / "receipts.jsonl"
    proxy = serve("--window", str(WINDOW), "--reserve-output", "0", "--ledger", str(ledger))
    agent = Agent("openai-chat", proxy.url, stream=False)
    checks = Conversation(cli, "openai-chat", WINDOW)
    for _ in range(40):
        agent.step()
        checks.see(fake.on(PATH["openai-chat"])[-1].body)
    assert checks.firings >= 1
    rows = [line for line in ledger.read_text().splitlines() if line.strip()]
    assert len(rows) == checks.firings, f"{len(rows)} receipts for {checks.firings} firings"
    verified = subprocess.run([cli, "ledger", "verify", str(ledger)], capture_output=True,
                              timeout=60)
    assert verified.returncode == 0, verified.stdout.decode()[-500:] + verified.stderr.decode()[-500:]
    proxy.proc.send_signal(signal.SIGINT)
    assert proxy.proc.wait(timeout=10) == 0, "SIGINT is a graceful stop with status 0"
