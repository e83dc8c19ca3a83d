"""What `cutctx serve` adds to a model call, beside what LiteLLM's proxy adds, and what it holds
in memory for 10,000 idle sessions.

    python3 scripts/serve-bench.py [--cli target/release/cutctx] [--rounds 3]
                                   [--litellm-venv DIR] [--no-litellm]

One run, one machine, loopback only. The provider is the tests' fake
(crates/cutctx-serve/tests/sdk/fake_upstream.py, in its own process, keeping no records),
answering every OpenAI Chat request at once. Each conversation starts at 200 messages (a
system turn, then user and assistant turns of about 200 characters) and appends an assistant
and a user turn call by call; at 1 and at 64 concurrent conversations the same requests go
straight to the fake, through `cutctx serve` (SQLite state, the shipped window, which the
requests fit: nothing fires, every request is a session step and a byte-for-byte forward) and
through LiteLLM's proxy (`litellm --config`, one model_list entry whose api_base is the fake,
no database, LITELLM_LOCAL_MODEL_COST_MAP=True), each round's modes back to back so that the
machine's drift touches them alike. A request's added latency is its time through a proxy
minus the same request's time straight to the fake in the same round; the table gives the
p50 and p99 of those, and the ratio of cutctx's to LiteLLM's.

Then `cutctx serve` (memory state, then SQLite) is sent 10,000 conversations through
`POST /v1/compact` (each its own `x-cutctx-session`, 10 messages), and its VmRSS read from
/proc/PID/status once they are idle.

LiteLLM 1.110.2 and its proxy's dependencies are installed in a throwaway venv (the proxy
extra's own `litellm-proxy` package is not on the index; its code ships in the litellm wheel)
unless --litellm-venv names one that has them; the proxy refuses to start without a master
key, so it gets a random one, which its requests carry. Nothing here is a test: the figures go in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "crates", "cutctx-serve", "tests", "sdk", "fake_upstream.py")
LITELLM = "litellm==1.110.2"
# litellm[proxy] 1.110.2's requirements as its metadata spells them, but three the index lacks at
# the versions it pins: `litellm-proxy` (the proxy's code ships in the litellm wheel itself),
# and `litellm-proxy-extras` and `litellm-enterprise` (the database migrations and enterprise
# features, which a proxy without a database does not load).
LITELLM_PROXY_DEPS = [
    "gunicorn>=23.0.0,<24.0", "uvicorn>=0.33.0,<1.0", "uvloop>=0.22.1,<1.0",
    "fastapi>=0.136.3,<1.0", "starlette>=1.0.1,<2.0", "backoff>=2.2.1,<3.0",
    "pyyaml>=6.0.3,<7.0", "rq>=2.7.0,<3.0", "orjson>=3.11.6,<4.0", "hiredis>=3.0.0,<4.0",
    "apscheduler>=3.11.2,<4.0", "fastapi-sso>=0.19.0,<1.0", "pyjwt>=2.13.0,<3.0",
    "python-multipart>=0.0.27,<1.0", "cryptography>=49.0.0,<51.0", "pynacl>=1.6.2,<2.0",
    "websockets>=15.0.1,<16.0", "boto3>=1.43.117,<2.0", "azure-identity>=1.25.2,<2.0",
    "azure-storage-blob>=12.28.0,<13.0", "mcp>=2.3.0,<3", "httpx2>=2.10.0,<3",
    "restrictedpython>=8.5,<9.0", "rich>=13.9.4,<14.0", "inquirerpy>=0.3.4,<1.0",
    "tomlkit>=0.13.3,<1.0", "polars>=1.38.1,<2.0", "soundfile>=0.12.1,<1.0",
    "expression>=5.6.0,<6.0", "semver>=3.0.4,<4", "granian>=2.7.4,<3.0",
    "pyroscope-io>=0.8.16,<1.0", "backports-zstd>=1.0.0,<2.0",
]
MODEL = "gpt-4o"


# -- processes ---------------------------------------------------------------------------------

def started(argv, prefix, env=None, timeout=30.0):
    """Start argv; wait for the stderr or stdout line starting `prefix`: (process, port)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line and proc.poll() is not None:
            break
        if line.startswith(prefix):
            port = int(line.strip().rsplit(":", 1)[1])
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, port
    proc.kill()
    sys.exit(f"{argv[0]} did not start")


def stopped(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port():
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            time.sleep(0.5)
    return False


def litellm_venv(path):
    """A venv with LiteLLM's proxy: `path` if given, else a new one under a temporary folder."""
    if path:
        return path, None
    work = tempfile.mkdtemp(prefix="serve-bench-litellm.")
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    done = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", LITELLM,
                           *LITELLM_PROXY_DEPS])
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        return None, None
    return venv, work


def start_litellm(venv, fake_port, work):
    config = os.path.join(work, "litellm.yaml")
    with open(config, "w") as out:
        out.write(f"""model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: http://127.0.0.1:{fake_port}/v1
      api_key: sk-bench
""")
    port = free_port()
    key = "sk-" + os.urandom(32).hex()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
           "DISABLE_SCHEMA_UPDATE": "True", "LITELLM_MASTER_KEY": key}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen([os.path.join(venv, "bin", "litellm"), "--config", config,
                             "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1",
                             "--telemetry", "False"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "litellm.log"), "wb"), env=env, cwd=work)
    if not wait_http(f"http://127.0.0.1:{port}/health/liveliness", 180):
        stopped(proc)
        sys.exit("LiteLLM's proxy did not start; see " + os.path.join(work, "litellm.log"))
    return proc, port, key


# -- the workload ------------------------------------------------------------------------------

def conversation(seed, conv, calls, size=200):
    """The request bodies of one conversation: 200 messages, then two more at every call."""
    messages = [{"role": "system", "content": f"Conversation {seed}-{conv}: answer briefly."}]
    for i in range(1, size):
        role = "user" if i % 2 else "assistant"
        text = f"{role} turn {i} of {seed}-{conv}: " + "the figures of the run were steady. " * 5
        messages.append({"role": role, "content": text[:200]})
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": f"question 0 of {seed}-{conv}"})
    bodies = []
    for call in range(calls):
        bodies.append(json.dumps({"model": MODEL, "messages": messages}).encode())
        messages = messages + [
            {"role": "assistant", "content": f"Answer {call}: the figures were steady."},
            {"role": "user", "content": f"question {call + 1} of {seed}-{conv}"}]
    return bodies


def run(port, workload, key="sk-bench", mode="", path="/v1/chat/completions"):
    """Send each conversation's bodies in order on its own kept-alive connection, all
    conversations at once: the seconds each request took, by (conversation, call)."""
    times = {}
    failures = []

    def one(conv, bodies):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            for call, body in enumerate(bodies):
                start = time.perf_counter()
                conn.request("POST", path, body=body, headers={
                    "content-type": "application/json", "authorization": f"Bearer {key}",
                    "x-api-key": key, "anthropic-version": "2023-06-01"})
                answer = conn.getresponse()
                answer.read()
                elapsed = time.perf_counter() - start
                if answer.status != 200:
                    failures.append(answer.status)
                times[(conv, call)] = elapsed
        except OSError as error:
            failures.append(str(error))
        finally:
            conn.close()

    threads = [threading.Thread(target=one, args=(c, b)) for c, b in enumerate(workload)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        sys.exit(f"{mode} requests failed: {failures[:5]}")
    return times


def percentile(values, q):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# -- memory ------------------------------------------------------------------------------------

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def idle_sessions(cli, fake_port, state, count=10_000, threads=8):
    """Start `cutctx serve` with `state`, open `count` sessions through /v1/compact: its VmRSS
    in KiB before and after."""
    proc, port = started([cli, "serve", "--listen", "127.0.0.1:0",
                          "--openai-upstream", f"http://127.0.0.1:{fake_port}",
                          "--state", state, "--max-sessions", str(count)],
                         "cutctx serve: listening on")
    try:
        time.sleep(0.5)
        before = rss_kib(proc.pid)

        def part(k):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for i in range(k, count, threads):
                messages = [{"role": "system", "content": f"Session {i}."}]
                for j in range(9):
                    role = "user" if j % 2 == 0 else "assistant"
                    messages.append({"role": role, "content": f"turn {j} of session {i}: " + "x" * 120})
                body = json.dumps({"model": MODEL, "messages": messages}).encode()
                conn.request("POST", "/v1/compact", body=body, headers={
                    "content-type": "application/json", "x-cutctx-format": "openai-chat",
                    "x-cutctx-session": f"idle-{i}"})
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"/v1/compact answered {answer.status}")
            conn.close()

        workers = [threading.Thread(target=part, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        time.sleep(2)  # idle
        return before, rss_kib(proc.pid)
    finally:
        stopped(proc)


# -- the run -----------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls-1", type=int, default=60, help="calls per round at 1 conversation")
    parser.add_argument("--calls-64", type=int, default=6, help="calls per conversation per round at 64")
    parser.add_argument("--litellm-venv")
    parser.add_argument("--no-litellm", action="store_true")
    args = parser.parse_args()
    if not os.path.exists(args.cli):
        sys.exit(f"no cutctx binary at {args.cli}: cargo build --release -p cutctx-cli")
    work = tempfile.mkdtemp(prefix="serve-bench.")
    # One build for the whole run, even if target/ is rebuilt meanwhile.
    built_at = datetime.datetime.fromtimestamp(os.path.getmtime(args.cli), datetime.timezone.utc)
    shutil.copy2(args.cli, os.path.join(work, "cutctx"))
    args.cli = os.path.join(work, "cutctx")
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "?"
    procs = []
    venv_work = None
    try:
        fake, fake_port = started([sys.executable, FAKE, "0", "--no-records"], "fake upstream: listening on")
        procs.append(fake)
        cutctx, cutctx_port = started(
            [args.cli, "serve", "--listen", "127.0.0.1:0",
             "--openai-upstream", f"http://127.0.0.1:{fake_port}",
             "--state", f"sqlite:{os.path.join(work, 'bench.db')}"],
            "cutctx serve: listening on")
        procs.append(cutctx)
        cutctx_memory, cutctx_memory_port = started(
            [args.cli, "serve", "--listen", "127.0.0.1:0",
             "--openai-upstream", f"http://127.0.0.1:{fake_port}", "--state", "memory"],
            "cutctx serve: listening on")
        procs.append(cutctx_memory)
        ports = {"direct": fake_port, "cutctx": cutctx_port, "cutctx_memory": cutctx_memory_port}
        keys = {}
        if not args.no_litellm:
            venv, venv_work = litellm_venv(args.litellm_venv)
            if venv is None:
                print("LiteLLM could not be installed: its column is left out")
            else:
                litellm, litellm_port, keys["litellm"] = start_litellm(venv, fake_port,
                                                                       venv_work or work)
                procs.append(litellm)
                ports["litellm"] = litellm_port
        # One warm-up each (connections, LiteLLM's first-call imports).
        for mode, port in ports.items():
            run(port, [conversation("warm", 0, 3)], keys.get(mode, "sk-bench"))

        table = []
        for concurrency, calls in ((1, args.calls_1), (64, args.calls_64)):
            times = {mode: {} for mode in ports}
            for r in range(args.rounds):
                seed = f"c{concurrency}r{r}"
                workload = [conversation(seed, c, calls) for c in range(concurrency)]
                for mode, port in ports.items():
                    for key, t in run(port, workload, keys.get(mode, "sk-bench"), mode).items():
                        times[mode][(r, *key)] = t
            direct = times["direct"]
            row = {"concurrency": concurrency, "requests": len(direct),
                   "direct_p50": percentile(direct.values(), 50),
                   "direct_p99": percentile(direct.values(), 99)}
            for mode in ports:
                if mode == "direct":
                    continue
                added = [times[mode][k] - direct[k] for k in direct]
                row[f"{mode}_p50"] = percentile(times[mode].values(), 50)
                row[f"{mode}_p99"] = percentile(times[mode].values(), 99)
                row[f"{mode}_added_p50"] = percentile(added, 50)
                row[f"{mode}_added_p99"] = percentile(added, 99)
            table.append(row)

        stopped(cutctx)
        stopped(cutctx_memory)
        memory = {"memory": idle_sessions(args.cli, fake_port, "memory"),
                  "sqlite": idle_sessions(args.cli, fake_port, f"sqlite:{os.path.join(work, 'idle.db')}")}
    finally:
        for proc in procs:
            stopped(proc)
        shutil.rmtree(work, ignore_errors=True)
        if venv_work and not args.litellm_venv:
            shutil.rmtree(venv_work, ignore_errors=True)

    ms = lambda s: f"{s * 1000:.2f}"  # noqa: E731
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{' '.join(sys.argv)}; {args.rounds} rounds; the binary built "
          f"{built_at:%H:%M} UTC, HEAD {head}")
    print("| conversations | requests | direct p50 / p99 ms | cutctx (SQLite) added p50 / p99 ms "
          "| cutctx (memory) added p50 / p99 ms | LiteLLM added p50 / p99 ms "
          "| cutctx SQLite / LiteLLM added, p50 / p99 | cutctx memory / LiteLLM |")
    print("|---|---|---|---|---|---|---|---|")
    for row in table:
        lite = (f"{ms(row['litellm_added_p50'])} / {ms(row['litellm_added_p99'])}"
                if "litellm_added_p50" in row else "n/a")
        def ratio(mode):
            if "litellm_added_p50" not in row:
                return "n/a"
            return (f"{row[mode + '_added_p50'] / row['litellm_added_p50']:.3f} / "
                    f"{row[mode + '_added_p99'] / row['litellm_added_p99']:.3f}")
        print(f"| {row['concurrency']} | {row['requests']} | {ms(row['direct_p50'])} / "
              f"{ms(row['direct_p99'])} | {ms(row['cutctx_added_p50'])} / "
              f"{ms(row['cutctx_added_p99'])} | {ms(row['cutctx_memory_added_p50'])} / "
              f"{ms(row['cutctx_memory_added_p99'])} | {lite} | {ratio('cutctx')} | "
              f"{ratio('cutctx_memory')} |")
    print()
    print("| state | VmRSS at start | VmRSS holding 10,000 idle sessions |")
    print("|---|---|---|")
    for state, (before, after) in memory.items():
        print(f"| {state} | {before / 1024:.1f} MiB | {after / 1024:.1f} MiB |")
    print()
    print(json.dumps({"latency": table, "rss_kib": memory}, sort_keys=True))


if __name__ == "__main__":
    main()
