"""What a summary costs the call that fires, with `cutctx serve --summarizer auto`: made in the
background from 80% of the trigger (the default), against made at the firing call itself
(`--summary-ahead 1`), which waits for it.

    python3 scripts/serve-summary-bench.py [--cli target/release/cutctx] [--summary-ms 800]
                                           [--conversations 10] [--calls 100]

One run, one machine, loopback only. The provider is a scripted one in this process: an OpenAI
Chat agent call is answered at once; a summarizing call (the request as last sent plus the
summarizing instruction) is answered after --summary-ms, standing for the model writing a
summary. Each conversation is a tool loop of --calls calls (a system turn, a task, then a tool
call and a result of ~540 characters per call) against a window of 3,000 tokens, so that it
fires every ~20 calls; conversations run one after another, so the proxy's log says which call
fired. A call's latency is measured at the client, from sending to the last byte of the answer.
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

    def do_POST(self):  # noqa: N802 (the standard library's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = (body.get("messages") or [{}])[-1]
        if str(last.get("content", "")).startswith(INSTRUCTION_START):
            time.sleep(self.summary_seconds)
            answer = {"choices": [{"index": 0, "message": {"role": "assistant",
                      "content": "## Task and constraints\nRead the files.\n## Next steps\nGo on."}}]}
        else:
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

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


def run(cli: str, upstream: str, ahead: float, conversations: int, calls: int) -> tuple[list, list]:
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
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                started = time.perf_counter()
                conn.request("POST", "/v1/chat/completions", body,
                             {"content-type": "application/json", "authorization": "Bearer sk-bench"})
                response = conn.getresponse()
                response.read()
                latencies.append(time.perf_counter() - started)
                conn.close()
                assert response.status == 200, response.status
            time.sleep(0.05)
    finally:
        time.sleep(0.3)
        proc.terminate()
        proc.wait(10)
        reader.join(5)
    outcomes = [json.loads(l)["outcome"] for l in lines
                if l.startswith("{") and '"event":"response"' in l]
    return latencies, outcomes[: len(latencies)]


def pct(values: list, p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    ap.add_argument("--summary-ms", type=int, default=800)
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    Provider.summary_seconds = args.summary_ms / 1000
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"Measured {datetime.date.today()} ({os.cpu_count()} cores): a summarizing call takes "
          f"{args.summary_ms} ms; {args.conversations} conversations of {args.calls} calls.\n")
    print("| summaries | firing calls | p50 | p99 | other calls p50 | p99 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ahead in (("background, from 80% of the trigger", 0.8), ("at the firing call", 1.0)):
        lat, outcomes = run(args.cli, upstream, ahead, args.conversations, args.calls)
        fired = [t for t, o in zip(lat, outcomes) if o == "fired"]
        other = [t for t, o in zip(lat, outcomes) if o != "fired"]
        if not fired:
            print(f"| {name} | 0 | | | | |")
            continue
        print(f"| {name} | {len(fired)} | {pct(fired, 50):.1f} ms | {pct(fired, 99):.1f} ms | "
              f"{pct(other, 50):.1f} ms | {pct(other, 99):.1f} ms |")
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
