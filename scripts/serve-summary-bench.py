"""What a summary costs the call that fires, with `cutctx serve --summarizer auto`: made in the
background from 80% of the trigger (the default), against made at the firing call itself
(`--summary-ahead 1`), which waits for it.

    python3 scripts/serve-summary-bench.py [--cli target/release/cutctx] [--summary-ms 800]
                                           [--turn-ms 300] [--conversations 5] [--calls 100]

One run, one machine, loopback only. The provider is a scripted one in this process: an OpenAI
Chat agent call is answered after --turn-ms, standing for the model's turn; a summarizing call
(the request as last sent plus the summarizing instruction) after --summary-ms, standing for
the model writing a summary. Each conversation is a tool loop of --calls calls (a system turn, a task, then a tool
call and a result of ~540 characters per call) against a window of 3,000 tokens, so that it
fires every ~20 calls; conversations run one after another, so the proxy's log says which call
fired. A call's latency is measured at the client, from sending to the last byte of the answer;
what a firing adds is its latency less that of the calls that did not fire. The proxy's log
says whether each firing swapped a summary in or, none being ready, compacted with the policy.
Nothing here is a test: the figures go in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTRUCTION_START = "Summarize the conversation above"


class Provider(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    summary_seconds = 0.8
    turn_seconds = 0.3

    def do_POST(self):  # noqa: N802 (the standard library's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = (body.get("messages") or [{}])[-1]
        if str(last.get("content", "")).startswith(INSTRUCTION_START):
            time.sleep(self.summary_seconds)
            answer = {"choices": [{"index": 0, "message": {"role": "assistant",
                      "content": "## Task and constraints\nRead the files.\n## Next steps\nGo on."}}]}
        else:
            time.sleep(self.turn_seconds)
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
        data = json.dumps(answer).encode()
        # One write, head and body together: two small writes would wait on the peer's
        # delayed acknowledgement (Nagle), 40 ms a call that is not the proxy's.
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        self.wfile.write(head.encode() + data)

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def history(i: int) -> list:
    h = [{"role": "system", "content": "You are a careful agent."},
         {"role": "user", "content": "read the files"}]
    for k in range(i):
        h.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
        h.append({"role": "tool", "tool_call_id": f"c{k}",
                  "content": f"result {k}: " + "lorem ipsum dolor sit amet " * 20})
    return h


def run(cli: str, upstream: str, ahead: float, conversations: int, calls: int) -> tuple[list, list, list]:
    port = free_port()
    log = open(os.devnull, "w")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [cli, "serve", "--listen", f"127.0.0.1:{port}", "--openai-upstream", upstream,
         "--state", "memory", "--window", "3000", "--summarizer", "auto",
         "--summary-ahead", str(ahead)],
        stdout=log, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    latencies = []
    try:
        for c in range(conversations):
            for i in range(calls):
                body = json.dumps({"model": f"gpt-4o-{c}", "messages": history(i)}).encode()
                started = time.perf_counter()
                status = post(port, body)
                latencies.append(time.perf_counter() - started)
                assert status == 200, status
            time.sleep(0.05)
    finally:
        time.sleep(0.3)
        proc.terminate()
        proc.wait(10)
        reader.join(5)
    events = [json.loads(l) for l in lines if l.startswith("{")]
    outcomes = [e["outcome"] for e in events if e.get("event") == "response"]
    summaries = [e["outcome"] for e in events if e.get("event") == "summary"]
    return latencies, outcomes[: len(latencies)], summaries


def post(port: int, body: bytes) -> int:
    """One call, sent in one write (head and body together), its whole answer read; its
    status."""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/json\r\nauthorization: Bearer sk-bench\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head + body)
        response = http.client.HTTPResponse(s)
        response.begin()
        response.read()
        return response.status


def pct(values: list, p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    ap.add_argument("--summary-ms", type=int, default=800)
    ap.add_argument("--turn-ms", type=int, default=300)
    ap.add_argument("--conversations", type=int, default=5)
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    Provider.summary_seconds = args.summary_ms / 1000
    Provider.turn_seconds = args.turn_ms / 1000
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"Measured {datetime.date.today()} ({os.cpu_count()} cores): a model turn takes "
          f"{args.turn_ms} ms, a summarizing call {args.summary_ms} ms; {args.conversations} "
          f"conversations of {args.calls} calls.\n")
    print("| summaries | firing calls (swapped / fallback) | firing p50 | p99 | other calls p50 | p99 | added by a firing, p50 | p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, ahead in (("background, from 80% of the trigger", 0.8), ("at the firing call", 1.0)):
        lat, outcomes, summaries = run(args.cli, upstream, ahead, args.conversations, args.calls)
        swaps, fallbacks = summaries.count("swapped"), summaries.count("fallback")
        fired = [t for t, o in zip(lat, outcomes) if o == "fired"]
        other = [t for t, o in zip(lat, outcomes) if o != "fired"]
        if not fired:
            print(f"| {name} | 0 | | | | | | |")
            continue
        base = pct(other, 50)
        print(f"| {name} | {len(fired)} ({swaps} / {fallbacks}) | {pct(fired, 50):.1f} ms | {pct(fired, 99):.1f} ms | "
              f"{base:.1f} ms | {pct(other, 99):.1f} ms | {pct(fired, 50) - base:.1f} ms | {pct(fired, 99) - base:.1f} ms |")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
