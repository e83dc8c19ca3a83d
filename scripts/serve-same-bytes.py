"""Whether two builds of `cutctx serve` send the provider the same bytes: the same calls made
through each, and the request bodies the provider received compared byte for byte, with what
the clients got back.

    python3 scripts/serve-same-bytes.py OLD_CUTCTX NEW_CUTCTX

The provider is the tests' fake (crates/cutctx-serve/tests/sdk/fake_upstream.py), which records
every request it receives. The calls: every real run beside the project (../shared/realworld:
tau-bench and the long coding runs, OpenAI Chat) sent call by call, as an agent resends its
history, at windows of 30%, 50% and 70% of the whole run (so that the sessions fire), once with a
session name (`x-cutctx-session`) and once found by its history; and every request of the
corpus (crates/cutctx-formats/tests/corpus) in its own format through its own endpoint at a
window of half its size, then again with one message more. Each build gets a fresh fake and a
fresh state in memory; the calls go one at a time in the same order.

Prints the number of calls and of differences; exits 1 on any difference.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import http.client
import importlib.util
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")

def _script(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _script("serve_bench", "serve-bench.py")
estimate = _script("same_bytes", "same-bytes.py").total

ENDPOINT = {"openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses",
            "anthropic": "/v1/messages"}
KEY = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages"}


def calls(cli):
    """(label, window, format, headers, body bytes) of every call, in order."""
    out = []
    for path in sorted(glob.glob(os.path.join(SHARED, "realworld", "*", "*.chat.json"))):
        total = estimate(cli, "openai-chat", path)
        doc = json.load(open(path))
        items = doc["messages"]
        cuts = [i + 1 for i, m in enumerate(items) if m.get("role") == "user"][1:] + [len(items)]
        for pct in (30, 50, 70):
            for named in (True, False):
                name = f"{os.path.basename(path)}-{pct}-{named}"
                headers = {"x-cutctx-session": name} if named else {}
                for k in cuts:
                    body = json.dumps({**doc, "messages": items[:k]}).encode()
                    out.append((name, total * pct // 100, "openai-chat", headers, body))
    for fmt in ENDPOINT:
        for path in sorted(glob.glob(os.path.join(ROOT, "crates", "cutctx-formats", "tests", "corpus", fmt, "*.json"))):
            doc = json.load(open(path))
            if not isinstance(doc, dict) or not isinstance(doc.get(KEY[fmt]), list):
                continue
            total = estimate(cli, fmt, path) or 1000
            name = os.path.basename(path)
            headers = {"x-cutctx-session": name}
            body = json.dumps(doc).encode()
            out.append((name, max(50, total // 2), fmt, headers, body))
            more = {**doc, KEY[fmt]: [*doc[KEY[fmt]], {"role": "user", "content": "and then?"}]}
            out.append((name, max(50, total // 2), fmt, headers, json.dumps(more).encode()))
    return out


def run(cli, work, all_calls):
    """The SHA-256 of what the provider received and what each client got, call by call."""
    fake, fake_port = bench.started([sys.executable, bench.FAKE, "0"], "fake upstream: listening on")
    procs = [fake]
    digests = []
    try:
        # One proxy per window (the window is a start-up setting), started as the calls need it.
        proxies = {}
        for label, window, fmt, headers, body in all_calls:
            if window not in proxies:
                proc, port = bench.started(
                    [cli, "serve", "--listen", "127.0.0.1:0", "--window", str(max(window, 50)),
                     "--openai-upstream", f"http://127.0.0.1:{fake_port}",
                     "--anthropic-upstream", f"http://127.0.0.1:{fake_port}", "--state", "memory"],
                    "cutctx serve: listening on")
                procs.append(proc)
                proxies[window] = port
            conn = http.client.HTTPConnection("127.0.0.1", proxies[window], timeout=60)
            conn.request("POST", ENDPOINT[fmt], body=body, headers={
                "content-type": "application/json", "authorization": "Bearer k", "x-api-key": "k",
                "anthropic-version": "2023-06-01", **headers})
            answer = conn.getresponse()
            got = answer.read()
            conn.close()
            digests.append((label, answer.status, hashlib.sha256(got).hexdigest()))
        conn = http.client.HTTPConnection("127.0.0.1", fake_port, timeout=60)
        conn.request("GET", "/_fake/requests")
        records = json.loads(conn.getresponse().read())
        sent = [(r["path"], hashlib.sha256(base64.b64decode(r["body"])).hexdigest()) for r in records]
        given = {hashlib.sha256(body).hexdigest() for *_, body in all_calls}
        compacted = sum(1 for _, d in sent if d not in given)
        return digests, sent, compacted
    finally:
        for p in procs:
            bench.stopped(p)


def main():
    old, new = sys.argv[1], sys.argv[2]
    bins = tempfile.mkdtemp(prefix="serve-same-bytes.")
    paths = []
    for side, cli in (("old", old), ("new", new)):
        os.makedirs(os.path.join(bins, side))
        shutil.copy2(cli, os.path.join(bins, side, "cutctx"))
        paths.append(os.path.join(bins, side, "cutctx"))
    all_calls = calls(paths[0])
    (a_answers, a_sent, a_compacted), (b_answers, b_sent, _) = (run(p, bins, all_calls) for p in paths)
    shutil.rmtree(bins, ignore_errors=True)
    differ = [a for a, b in zip(a_answers, b_answers) if a != b]
    sent_differ = sum(1 for a, b in zip(a_sent, b_sent) if a != b) + abs(len(a_sent) - len(b_sent))
    print(f"{len(all_calls)} calls ({a_compacted} sent compacted); {len(a_sent)} and {len(b_sent)} upstream bodies; "
          f"{sent_differ} upstream bodies and {len(differ)} answers differ")
    for label, status, _ in differ[:20]:
        print(f"  differs: {label} ({status})")
    sys.exit(1 if differ or sent_differ else 0)


if __name__ == "__main__":
    main()
