"""How `cutctx serve` holds up under many tenants and hostile or careless clients, as ratios
and counts from one run on one machine, loopback only.

    python3 scripts/serve-tenants-load.py [--cli target/release/cutctx] [--json PATH]
        [--only stuck,idle,ulimit,body,kill]

The provider is the tests' fake (crates/cutctx-serve/tests/sdk/fake_upstream.py), run in a
child process of this script on 127.0.0.1, keeping no records; this script adds one behaviour
to it: a request carrying `x-test-stuck: 1` is answered with a 64 MiB event stream in 1 MiB
chunks. Every proxy is a fresh `cutctx serve --listen 127.0.0.1:0` with its SQLite state in a
temporary folder and its log in a file there. The parts:

* `stuck` (a client that never reads): 256 OpenAI Chat conversations from 16 credentials over
  8 shared openings (conversation i uses credential i % 16 and opening i % 8), 6 calls each,
  the history growing by a tool call and its result at each call, 32 at a time. Run A is that
  workload alone; run B the same while one more client (credential 0, opening 0) sends
  `x-test-stuck: 1` and never reads its answer. `--rounds` pairs of runs (alternating which
  goes first, a fresh proxy each), pooled: p50 / p99 of the calls' latency, and B's p99 over
  A's (target: at most 1.5), with each round's ratio beside it.
* `idle` (10,000 idle connections): `--max-connections 12000 --idle-timeout-ms 3000`, this
  script's descriptor limit raised to its hard limit (the proxy inherits it); 10,000
  connections that send nothing, opened without blocking, each batch once the listener's
  accept queue (read through netlink sock_diag) has room for it, while /healthz is polled
  every 100 ms on a fresh connection. How many the proxy closed within the idle timeout plus
  5 s, the polls' failures, p99 and max latency, the proxy's peak (VmHWM) and later VmRSS.
* `ulimit` (`ulimit -n 256`, so the default --max-connections derives 112): 300 idle
  connections at once, more than the proxy takes plus its accept queue; the proxy's CPU share
  over 3 s (target: far under 5% of a core), whether /healthz answers while they are open
  (10 s timeout), and how soon it answers once the idle timeout has closed them.
* `body` (a body just under --max-body): about 29 MiB of Chat tool-call pairs (results of
  2-4 KB), of 1 KB messages, and of 2-character messages (a pathological shape, reported as
  such), each to a fresh proxy at gpt-4o's shipped window, so that it fires. The proxy's VmHWM
  before and after, over the body's size, and its VmRSS 2 s later.
* `kill` (SIGKILL under load): 32 conversations (4 credentials, an opening each) of 10 calls,
  all at once, at `--window 3000`, which they outgrow from their 5th call; the proxy is
  SIGKILLed once about half the calls are answered, restarted on the same state file, and
  every conversation goes on from its first unanswered call (the one the kill cut, sent
  again). Those first calls go one at a time, so that each log line is its conversation's:
  each must find its session ("new_session": false, "restarted": false, a session id the
  first proxy logged), so that nothing answered before the kill is lost.
* `store` (store work per call): `POST /v1/compact` steps and commits a session without a
  provider. A proxy is filled with 100, then (a fresh one) with 10,000 sessions from 20
  credentials; on each, 300 calls that extend stored sessions are timed: p50 and p99, and the
  10,000's over the 100's (target: about 1, no scan). Then, on the full proxy, a request of
  200,000 short messages is sent while those calls go on: its own time, and the other calls'
  p99 during it over their p99 before it (before this store, one lookup per message stalled
  unrelated calls up to 716 ms).

The machine's other load moves the absolute figures; the ratios and counts are what to read.
The whole run takes a few minutes; every wait has a timeout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import http.client
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "crates", "cutctx-serve", "tests", "sdk", "fake_upstream.py")
PARTS = ("stuck", "idle", "ulimit", "body", "kill", "store")
MODEL = "gpt-4o"
LISTENING = "cutctx serve: listening on "
MIB = 1 << 20
STUCK_CHUNKS = 64  # the stuck answer: this many 1 MiB chunks

_procs: list[subprocess.Popen] = []


# -- the fake provider, in a child process ------------------------------------------------------

def fake_main() -> None:
    """Serve the tests' fake provider on 127.0.0.1, with `x-test-stuck: 1` answered by a
    64 MiB event stream; print its port, then progress lines of the stuck answers."""
    spec = importlib.util.spec_from_file_location("fake_upstream", FAKE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fake_upstream"] = module
    spec.loader.exec_module(module)
    fake = module.FakeUpstream(0, keep=False)
    base = fake._server.RequestHandlerClass
    block = stuck_block()

    class Handler(base):
        timeout = 300  # a stuck stream may wait this long on a write

        def _handle(self) -> None:
            if self.headers.get("x-test-stuck") != "1":
                super()._handle()
                return
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.close_connection = True
            sent = 0
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for _ in range(STUCK_CHUNKS):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))
                    self.wfile.flush()
                    sent += 1
                    print(f"stuck {sent}", flush=True)
                done = b"data: [DONE]\n\n"
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
                self.wfile.flush()
                print("stuck end complete", flush=True)
            except OSError as error:
                print(f"stuck end {type(error).__name__}", flush=True)

    fake._server.RequestHandlerClass = Handler
    print(f"fake upstream: listening on 127.0.0.1:{fake.port}", flush=True)
    try:
        fake._server.serve_forever(poll_interval=0.05)
    finally:
        fake._server.server_close()


def stuck_block() -> bytes:
    """1 MiB of Chat completion chunks, each a content delta."""
    text = "the stuck answer goes on. " * 40
    event = ("data: " + json.dumps({
        "id": "chatcmpl-stuck", "object": "chat.completion.chunk", "created": 1767225600,
        "model": MODEL, "choices": [{"index": 0, "delta": {"content": text},
                                     "logprobs": None, "finish_reason": None}]},
        separators=(",", ":")) + "\n\n").encode()
    block = event * (MIB // len(event))
    return block + b":" + b" " * (MIB - len(block) - 3) + b"\n\n"


class Fake:
    """The fake provider's process: its port, and how many stuck chunks it has written."""

    def __init__(self) -> None:
        self.proc = spawn([sys.executable, os.path.abspath(__file__), "--fake-upstream"],
                          stdout=subprocess.PIPE)
        self.stuck_chunks = 0
        self.stuck_end: str | None = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            if line.startswith("fake upstream: listening on"):
                self.port = int(line.strip().rsplit(":", 1)[1])
                threading.Thread(target=self._follow, daemon=True).start()
                return
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("the fake provider did not start")

    def _follow(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            if line.startswith("stuck end"):
                self.stuck_end = line.split(" ", 2)[2]
            elif line.startswith("stuck "):
                self.stuck_chunks = int(line.split()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# -- processes -------------------------------------------------------------------------------

def spawn(argv: list[str], **kwargs) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kwargs)
    _procs.append(proc)
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def stop_all() -> None:
    for proc in _procs:
        stop(proc, signal.SIGKILL)


class Proxy:
    """One `cutctx serve` on 127.0.0.1, its log (standard error) in a file."""

    def __init__(self, cli: str, work: str, name: str, upstream: str, *flags: str,
                 state: str | None = None, shell: str | None = None) -> None:
        self.log = os.path.join(work, f"{name}.log")
        self.state = state or os.path.join(work, f"{name}.db")
        argv = [cli, "serve", "--listen", "127.0.0.1:0", "--openai-upstream", upstream,
                "--anthropic-upstream", upstream, "--state", f"sqlite:{self.state}", *flags]
        if shell:  # e.g. "ulimit -n 256": run in bash, which then execs the proxy (same pid)
            argv = ["bash", "-c", f'{shell}; exec "$0" "$@"', *argv]
        with open(self.log, "wb") as out:
            self.proc = spawn(argv, stdout=subprocess.DEVNULL, stderr=out)
        self.pid = self.proc.pid
        self.port = self._port()
        self._offset = 0

    def _port(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log, "rb") as f:
                first = f.readline().decode(errors="replace")
            if first.startswith(LISTENING) and first.endswith("\n"):
                return int(first.strip().rsplit(":", 1)[1])
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"cutctx serve did not start; see {self.log}")

    def events(self) -> list[dict]:
        """Every JSON log line so far."""
        out = []
        with open(self.log, "rb") as f:
            for line in f:
                if line.startswith(b"{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        out.append({"event": "unparsed", "line": line.decode(errors="replace")})
        return out

    def new_events(self) -> list[dict]:
        """The JSON log lines since the last call (whole lines only)."""
        with open(self.log, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.startswith(b"{")]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        stop(self.proc, sig)


def status_kib(pid: int, field: str) -> int:
    """A field of /proc/PID/status, in KiB (VmRSS, VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def cpu_seconds(pid: int) -> float:
    """The process's user plus system CPU time so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def count_events(events: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in events:
        counts[e.get("event", "?")] = counts.get(e.get("event", "?"), 0) + 1
    return counts


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def listen_queue(port: int) -> tuple[int, int] | None:
    """The 127.0.0.1:`port` listener's accept queue: (connections waiting, its limit, the
    backlog), from the kernel's socket diagnostics (netlink sock_diag), or None."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4)  # NETLINK_SOCK_DIAG
    try:
        # inet_diag_req_v2: TCP over IPv4, listening sockets only (1 << TCP_LISTEN).
        req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 1 << 10) + bytes(48)
        # nlmsghdr: SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP.
        sock.sendto(struct.pack("=IHHII", 16 + len(req), 20, 0x301, 1, 0) + req, (0, 0))
        sock.settimeout(2)
        while True:
            data, offset = sock.recv(65536), 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind != 20 or length < 16:  # NLMSG_DONE, an error
                    return None
                # inet_diag_msg: 4 bytes, the socket id (source port first), expires, queues.
                if struct.unpack_from("!H", data, offset + 20)[0] == port:
                    return struct.unpack_from("=II", data, offset + 16 + 56)
                offset += (length + 3) & ~3
    except OSError:
        return None
    finally:
        sock.close()


# -- HTTP ------------------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def healthz(port: int, timeout: float) -> tuple[bool, float, str]:
    """GET /healthz on a fresh connection: (answered ok, seconds, error or "")."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        answer = conn.getresponse()
        body = answer.read()
        ok = answer.status == 200 and body.strip() == b"ok"
        return ok, time.perf_counter() - start, "" if ok else f"status {answer.status}"
    except (OSError, http.client.HTTPException) as error:
        return False, time.perf_counter() - start, type(error).__name__
    finally:
        conn.close()


def headers(credential: str) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": f"Bearer {credential}"}


def post(conn: http.client.HTTPConnection, body: bytes, credential: str) -> tuple[int, bytes, float]:
    """One Chat call on a kept-alive connection: (status, answer, seconds)."""
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=body, headers=headers(credential))
    answer = conn.getresponse()
    data = answer.read()
    return answer.status, data, time.perf_counter() - start


# -- conversations ---------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file of the repository and return its lines.",
    "parameters": {"type": "object", "properties": {
        "path": {"type": "string", "description": "the file's path from the repository root"},
        "start": {"type": "integer"}, "end": {"type": "integer"}},
        "required": ["path"]}}}]


def file_view(seed: str, size: int) -> str:
    """A tool result: numbered lines of code, `size` characters."""
    lines, total, k = [], 0, 0
    while total < size:
        line = f"{k:5d}  def step_{seed}_{k}(value): return value * {k} + len('{seed}')"
        lines.append(line)
        total += len(line) + 1
        k += 1
    return "\n".join(lines)[:size]


def opening(j: int, system_chars: int = 1500) -> list[dict]:
    """An opening: a system prompt and a first user message."""
    system = f"You are coding agent {j}. " + "Read before you edit; keep changes small. " * (
        system_chars // 42)
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Opening {j}: find why the test of module {j} fails."}]


def tool_pair(conv: str, k: int, size: int) -> list[dict]:
    """An assistant tool call and its result."""
    call = f"call_{conv}_{k}"
    return [{"role": "assistant", "content": None, "tool_calls": [{
                "id": call, "type": "function", "function": {
                    "name": "read_file", "arguments": json.dumps({"path": f"src/{conv}/m{k}.py"})}}]},
            {"role": "tool", "tool_call_id": call, "content": file_view(f"{conv}_{k}", size)}]


def chat_body(messages: list[dict], stream: bool = False) -> bytes:
    body = {"model": MODEL, "messages": messages, "tools": TOOLS}
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


def conversation_bodies(conv: str, start: list[dict], calls: int, size: int) -> list[bytes]:
    """The bodies of a conversation: `start`, then a tool call and its result more each call."""
    messages, bodies = list(start), []
    for k in range(calls):
        bodies.append(chat_body(messages))
        messages = messages + tool_pair(conv, k, size + 997 * (k % 3))
    return bodies


# -- part 1: a client that never reads ------------------------------------------------------------

def tenants_workload(calls: int) -> list[tuple[str, list[bytes]]]:
    out = []
    for i in range(256):
        bodies = conversation_bodies(f"t{i}", opening(i % 8), calls, 2000)
        out.append((f"sk-tenant-{i % 16:02d}", bodies))
    return out


def run_workload(port: int, workload: list[tuple[str, list[bytes]]],
                 workers: int) -> tuple[list[float], list[str]]:
    """Each conversation's calls in order on its own connection, `workers` at a time: the
    calls' seconds, and the failures."""
    def one(item):
        credential, bodies = item
        times, failures = [], []
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for body in bodies:
                status, data, elapsed = post(conn, body, credential)
                times.append(elapsed)
                if status != 200 or b'"choices"' not in data:
                    failures.append(f"status {status}")
        except (OSError, http.client.HTTPException) as error:
            failures.append(type(error).__name__)
        finally:
            conn.close()
        return times, failures

    times, failures = [], []
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for t, f in pool.map(one, workload, timeout=180):
            times += t
            failures += f
    return times, failures


def latency(times: list[float], failures: list[str]) -> dict:
    return {"calls": len(times), "failures": len(failures), "failure_kinds": sorted(set(failures)),
            "p50_ms": 1000 * percentile(times, 50), "p99_ms": 1000 * percentile(times, 99),
            "max_ms": 1000 * max(times, default=float("nan"))}


def stuck_client(port: int) -> socket.socket:
    """Credential 0, opening 0, `x-test-stuck: 1`: sent, and its answer never read."""
    body = chat_body(opening(0), stream=True)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "content-type: application/json\r\nauthorization: Bearer sk-tenant-00\r\n"
            f"x-test-stuck: 1\r\ncontent-length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body)
    return sock


def stuck_run(cli: str, work: str, fake: Fake, name: str, workload, workers: int) -> dict:
    """One run on a fresh proxy; with a stuck client beside it when `name` starts with B."""
    proxy = Proxy(cli, work, f"stuck-{name}", fake.url)
    sock = None
    try:
        extra = {}
        if name.startswith("B"):
            fake.stuck_chunks, fake.stuck_end = 0, None
            sock = stuck_client(proxy.port)
            deadline = time.monotonic() + 10
            while fake.stuck_chunks == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # until the provider's writes block
            extra["stuck_chunks_before_run"] = fake.stuck_chunks
        times, failures = run_workload(proxy.port, workload, workers)
        extra["proxy_hwm_mib"] = status_kib(proxy.pid, "VmHWM") / 1024
        if sock is not None:
            extra["stuck_chunks_after_run"] = fake.stuck_chunks
            extra["stuck_stream_still_open"] = fake.stuck_end is None
    finally:
        if sock is not None:
            sock.close()
        proxy.stop()
    return {"times": times, "failures": failures, **extra,
            "log_events": count_events(proxy.events())}


def part_stuck(cli: str, work: str, fake: Fake, args) -> dict:
    workload = tenants_workload(args.calls)
    pooled: dict[str, dict] = {"A": {"times": [], "failures": []}, "B": {"times": [], "failures": []}}
    rounds = []
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")  # the machine's drift on both alike
        this = {}
        for mode in order:
            run = stuck_run(cli, work, fake, f"{mode}{r}", workload, args.workers)
            run["p99_ms"] = 1000 * percentile(run["times"], 99)
            pooled[mode]["times"] += run.pop("times")
            pooled[mode]["failures"] += run.pop("failures")
            this[mode] = run
        rounds.append(this)
    out = {mode: latency(x["times"], x["failures"]) for mode, x in pooled.items()}
    out["rounds"] = args.rounds
    out["per_round"] = rounds
    out["per_round_p99_ratio"] = [this["B"]["p99_ms"] / this["A"]["p99_ms"] for this in rounds]
    out["p99_ratio_B_over_A"] = out["B"]["p99_ms"] / out["A"]["p99_ms"]
    out["p50_ratio_B_over_A"] = out["B"]["p50_ms"] / out["A"]["p50_ms"]
    b_runs = [this["B"] for this in rounds]
    out["B"]["stuck_chunks_before_run"] = [x["stuck_chunks_before_run"] for x in b_runs]
    out["B"]["stuck_chunks_after_run"] = [x["stuck_chunks_after_run"] for x in b_runs]
    out["B"]["stuck_stream_still_open"] = all(x["stuck_stream_still_open"] for x in b_runs)
    for mode in ("A", "B"):
        out[mode]["proxy_hwm_mib"] = max(this[mode]["proxy_hwm_mib"] for this in rounds)
    return out


# -- idle connections ------------------------------------------------------------------------

class Idle:
    """Connections that send nothing, watched for the proxy closing them. They are opened
    without blocking: a SYN the proxy's full listen backlog drops delays that connection (the
    kernel sends it again after 1 s, then 3 s), not the others."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.poll = select.epoll()
        self.socks: dict[int, socket.socket] = {}
        self.started: dict[int, float] = {}  # fd -> when its connect began
        self.opened: dict[int, float] = {}  # fd -> when it was established
        self.closed: dict[int, float] = {}  # fd -> seconds from established to closed
        self.open_failures: list[str] = []
        self.held_max = 0

    def open(self, count: int, batch: int, pause: float, paced: bool = False) -> None:
        """Begin `count` connects, `batch` at a time with `pause` seconds between batches;
        `paced`: each batch only once the listener's accept queue has room for it (a connect
        over a full queue waits for SYN retransmits, or is established on the client's side
        only, the server's ACK dropped, and reaches the proxy much later)."""
        room = listen_queue(self.port) if paced else None
        for first in range(0, count, batch):
            deadline = time.monotonic() + 2
            while room is not None and time.monotonic() < deadline:
                queue = listen_queue(self.port)
                if queue is None or queue[0] + batch <= queue[1]:
                    break
                self.watch(0.001)
            for _ in range(min(batch, count - first)):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                code = sock.connect_ex(("127.0.0.1", self.port))
                if code not in (0, errno.EINPROGRESS):
                    self.open_failures.append(errno.errorcode.get(code, str(code)))
                    sock.close()
                    continue
                fd = sock.fileno()
                self.socks[fd] = sock
                self.started[fd] = time.monotonic()
                self.poll.register(fd, select.EPOLLOUT | select.EPOLLIN | select.EPOLLRDHUP)
            self.watch(0)
            time.sleep(pause)

    def connected(self, until: float) -> None:
        """Wait until every connect has ended (established or failed), or `until`."""
        while len(self.opened) < len(self.socks) and time.monotonic() < until:
            self.watch(0.05)

    def watch(self, timeout: float) -> None:
        now = time.monotonic()
        for fd, mask in self.poll.poll(timeout):
            sock = self.socks[fd]
            if fd not in self.opened:
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    self.open_failures.append(errno.errorcode.get(code, str(code)))
                    self.poll.unregister(fd)
                    del self.socks[fd]
                    sock.close()
                    continue
                self.opened[fd] = now
                self.poll.modify(fd, select.EPOLLIN | select.EPOLLRDHUP)
                if not mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP):
                    continue
            try:
                data = sock.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data == b"":
                self.closed[fd] = now - self.opened[fd]
                self.poll.unregister(fd)
        self.held_max = max(self.held_max, len(self.opened) - len(self.closed))

    def wait(self, until: float) -> None:
        while len(self.closed) < len(self.socks) and time.monotonic() < until:
            self.watch(0.1)

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.poll.close()

    def connect_times(self) -> list[float]:
        return [self.opened[fd] - self.started[fd] for fd in self.opened]

    def summary(self, timeout_s: float) -> dict:
        ages = list(self.closed.values())
        connects = self.connect_times()
        return {"opened": len(self.opened), "open_failures": len(self.open_failures),
                "open_failure_kinds": sorted(set(self.open_failures)),
                "held_open_at_once": self.held_max,
                "connects_over_0.5s": sum(t > 0.5 for t in connects),
                "connect_max_s": max(connects, default=float("nan")),
                "closed_by_proxy": len(ages),
                "closed_within_idle_plus_5s": sum(a <= timeout_s + 5 for a in ages),
                "close_age_min_s": min(ages, default=float("nan")),
                "close_age_p50_s": percentile(ages, 50),
                "close_age_max_s": max(ages, default=float("nan"))}


class Poller(threading.Thread):
    """GET /healthz every `every` seconds on a fresh connection, until stopped."""

    def __init__(self, port: int, every: float = 0.1, timeout: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.port, self.every, self.timeout = port, every, timeout
        self.results: list[tuple[float, bool, float, str]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            start = time.monotonic()
            ok, seconds, error = healthz(self.port, self.timeout)
            self.results.append((start, ok, seconds, error))
            self.halt.wait(max(0.0, self.every - (time.monotonic() - start)))

    def summary(self) -> dict:
        times = [r[2] for r in self.results]
        failures = [r for r in self.results if not r[1]]
        return {"healthz_polls": len(self.results), "healthz_failures": len(failures),
                "healthz_failure_kinds": sorted({r[3] for r in failures}),
                "healthz_p50_ms": 1000 * percentile(times, 50),
                "healthz_p99_ms": 1000 * percentile(times, 99),
                "healthz_max_ms": 1000 * max(times, default=float("nan"))}


def part_idle(cli: str, work: str, fake: Fake, args) -> dict:
    limit = raise_nofile()
    idle_ms = 3000
    proxy = Proxy(cli, work, "idle", fake.url, "--max-connections", "12000",
                  "--idle-timeout-ms", str(idle_ms))
    idle = Idle(proxy.port)
    poller = Poller(proxy.port)
    try:
        rss_start = status_kib(proxy.pid, "VmRSS")
        cpu_start = cpu_seconds(proxy.pid)
        poller.start()
        began = time.monotonic()
        backlog = listen_queue(proxy.port)
        idle.open(args.idle_connections, 64, 0, paced=True)
        idle.connected(time.monotonic() + 10)
        opened_in = time.monotonic() - began
        fds_open = open_files(proxy.pid)
        idle.wait(max(idle.opened.values(), default=began) + idle_ms / 1000 + 5)
        time.sleep(0.5)
        poller.halt.set()
        poller.join(timeout=10)
        cpu = cpu_seconds(proxy.pid) - cpu_start
        elapsed = time.monotonic() - began
        time.sleep(1)
        out = {"fd_limit": limit, "listen_backlog": backlog[1] if backlog else None,
               "opened_in_s": opened_in, **idle.summary(idle_ms / 1000),
               **poller.summary(), "proxy_fds_after_open": fds_open,
               "proxy_rss_start_mib": rss_start / 1024,
               "proxy_hwm_mib": status_kib(proxy.pid, "VmHWM") / 1024,
               "proxy_rss_after_mib": status_kib(proxy.pid, "VmRSS") / 1024,
               "proxy_fds_after": open_files(proxy.pid),
               "proxy_cpu_share": cpu / elapsed}
        time.sleep(4)
        out["proxy_rss_5s_after_mib"] = status_kib(proxy.pid, "VmRSS") / 1024
    finally:
        poller.halt.set()
        idle.close()
        proxy.stop()
    out["log_events"] = count_events(proxy.events())
    return out


# -- a low descriptor limit ------------------------------------------------------------------

def part_ulimit(cli: str, work: str, fake: Fake, args) -> dict:
    idle_ms = 3000
    proxy = Proxy(cli, work, "ulimit", fake.url, "--idle-timeout-ms", str(idle_ms),
                  shell="ulimit -n 256")
    idle = Idle(proxy.port)
    during: dict = {}

    def probe():
        ok, seconds, error = healthz(proxy.port, 10.0)
        during.update(ok=ok, seconds=seconds, error=error)

    try:
        with open(f"/proc/{proxy.pid}/limits") as limits:
            nofile = next(l.split()[3] for l in limits if l.startswith("Max open files"))
        began = time.monotonic()
        idle.open(300, 100, 0.002)
        idle.connected(time.monotonic() + 0.5)
        opened_at = time.monotonic()
        fds_open = open_files(proxy.pid)
        queue = listen_queue(proxy.port)
        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        cpu0 = cpu_seconds(proxy.pid)
        t0 = time.monotonic()
        idle.wait(t0 + 3)
        while time.monotonic() < t0 + 3:
            time.sleep(0.05)
        share_3s = (cpu_seconds(proxy.pid) - cpu0) / (time.monotonic() - t0)
        idle.wait(opened_at + 25)
        all_closed_at = time.monotonic()
        share_all = (cpu_seconds(proxy.pid) - cpu0) / (all_closed_at - t0)
        prober.join(timeout=15)
        first_ok = None
        attempts = 0
        while time.monotonic() < all_closed_at + 15:
            attempts += 1
            ok, seconds, _ = healthz(proxy.port, 5.0)
            if ok:
                first_ok = (time.monotonic() - all_closed_at, seconds)
                break
            time.sleep(0.1)
        summary = idle.summary(idle_ms / 1000)
        out = {"proxy_nofile_soft": int(nofile), **summary,
               "established_within_0.5s": sum(t <= 0.5 for t in idle.connect_times()),
               "proxy_fds_after_open": fds_open,
               "listen_queue_after_open": queue[0] if queue else None,
               "listen_backlog": queue[1] if queue else None,
               "cpu_share_3s": share_3s, "cpu_share_until_all_closed": share_all,
               "healthz_while_open_ok": during.get("ok"),
               "healthz_while_open_s": during.get("seconds"),
               "healthz_while_open_error": during.get("error"),
               "all_closed_after_s": (all_closed_at - opened_at
                                      if len(idle.closed) == len(idle.socks) else None),
               "healthz_after_close_first_ok_s": first_ok[0] if first_ok else None,
               "healthz_after_close_latency_ms": 1000 * first_ok[1] if first_ok else None,
               "healthz_after_close_attempts": attempts}
    finally:
        idle.close()
        proxy.stop()
    events = proxy.events()
    out["log_events"] = count_events(events)
    out["accept_failed_lines"] = [e for e in events if e.get("event") == "accept_failed"][:3]
    return out


# -- a body just under --max-body --------------------------------------------------------------

def big_body(shape: str, target: int) -> tuple[bytes, int]:
    """A Chat body of about `target` bytes in `shape`: (body, messages)."""
    messages = opening(0)
    size = len(chat_body(messages))
    k = 0
    while size < target:
        if shape == "tool-pairs":
            more = tool_pair("big", k, 2048 + (k * 709) % 2048)
        elif shape == "1kb-messages":
            more = [{"role": "assistant", "content": f"note {k}: " + file_view(f"a{k}", 1000)},
                    {"role": "user", "content": f"reply {k}: " + file_view(f"u{k}", 1000)}]
        else:
            more = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
        messages += more
        size += len(json.dumps(more)) - 1  # in the list: a comma for the brackets
        k += 1
    messages.append({"role": "user", "content": "Go on from here."})
    return chat_body(messages), len(messages)


def part_body(cli: str, work: str, fake: Fake, args) -> dict:
    out = {}
    for shape in ("tool-pairs", "1kb-messages", "2char-messages"):
        body, count = big_body(shape, args.body_mib * MIB)
        proxy = Proxy(cli, work, f"body-{shape}", fake.url)
        try:
            time.sleep(0.3)
            rss0 = status_kib(proxy.pid, "VmRSS")
            hwm0 = status_kib(proxy.pid, "VmHWM")
            conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=args.body_timeout)
            try:
                status, data, seconds = post(conn, body, "sk-body")
                error = ""
            except (OSError, http.client.HTTPException) as e:
                status, seconds, error = 0, float("nan"), type(e).__name__
            finally:
                conn.close()
            hwm1 = status_kib(proxy.pid, "VmHWM")
            time.sleep(2)
            rss2 = status_kib(proxy.pid, "VmRSS")
        finally:
            proxy.stop()
        responses = [e for e in proxy.events() if e.get("event") == "response"]
        line = responses[-1] if responses else {}
        out[shape] = {
            "pathological": shape == "2char-messages", "body_mib": len(body) / MIB,
            "messages": count, "status": status, "error": error, "seconds": seconds,
            "outcome": line.get("outcome"), "tokens_in": line.get("tokens_in"),
            "tokens_out": line.get("tokens_out"), "rss_before_mib": rss0 / 1024,
            "hwm_before_mib": hwm0 / 1024, "hwm_after_mib": hwm1 / 1024,
            "peak_over_body": (hwm1 - rss0) * 1024 / len(body),
            "rss_2s_after_mib": rss2 / 1024, "rss_retained_mib": (rss2 - rss0) / 1024}
    return out


# -- SIGKILL under load ----------------------------------------------------------------------

def part_kill(cli: str, work: str, fake: Fake, args) -> dict:
    convs, calls, window = 32, 10, str(args.kill_window)
    bodies = [conversation_bodies(f"k{c}", opening(100 + c, 1000), calls, 2000)
              for c in range(convs)]
    creds = [f"sk-kill-{c % 4}" for c in range(convs)]
    answered = [0] * convs  # calls answered 200, in order, before the kill
    cut: list[str] = []
    state = os.path.join(work, "kill.db")
    lock = threading.Lock()
    first = Proxy(cli, work, "kill-1", fake.url, "--window", window, state=state)

    def before(c):
        conn = http.client.HTTPConnection("127.0.0.1", first.port, timeout=30)
        try:
            for k in range(calls):
                status, _, _ = post(conn, bodies[c][k], creds[c])
                if status != 200:
                    with lock:
                        cut.append(f"status {status}")
                    return
                with lock:
                    answered[c] += 1
        except (OSError, http.client.HTTPException) as error:
            with lock:
                cut.append(type(error).__name__)
        finally:
            conn.close()

    threads = [threading.Thread(target=before, args=(c,), daemon=True) for c in range(convs)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        while sum(answered) < convs * calls // 2 and time.monotonic() < deadline:
            time.sleep(0.002)
        at_kill = sum(answered)
        first.stop(signal.SIGKILL)
        for t in threads:
            t.join(timeout=40)
    finally:
        first.stop(signal.SIGKILL)
    pre = [e for e in first.events() if e.get("event") == "response"]
    pre_ids = {e["session_id"] for e in pre if e.get("session_id")}
    second = Proxy(cli, work, "kill-2", fake.url, "--window", window, state=state)
    firsts, later_failures, later_answered = [], [], 0
    try:
        second.new_events()
        for c in range(convs):
            if answered[c] >= calls:
                continue
            conn = http.client.HTTPConnection("127.0.0.1", second.port, timeout=30)
            try:
                status, _, _ = post(conn, bodies[c][answered[c]], creds[c])
            finally:
                conn.close()
            line = None
            deadline = time.monotonic() + 5
            while line is None and time.monotonic() < deadline:
                got = [e for e in second.new_events() if e.get("event") == "response"]
                line = got[-1] if got else None
                if line is None:
                    time.sleep(0.01)
            firsts.append({"conversation": c, "call": answered[c], "status": status,
                           "new_session": (line or {}).get("new_session"),
                           "restarted": (line or {}).get("restarted"),
                           "outcome": (line or {}).get("outcome"),
                           "known_session": (line or {}).get("session_id") in pre_ids})

        def after(c):
            conn = http.client.HTTPConnection("127.0.0.1", second.port, timeout=30)
            done, failures = 0, []
            try:
                for k in range(answered[c] + 1, calls):
                    status, _, _ = post(conn, bodies[c][k], creds[c])
                    done += status == 200
                    if status != 200:
                        failures.append(f"status {status}")
            except (OSError, http.client.HTTPException) as error:
                failures.append(type(error).__name__)
            finally:
                conn.close()
            return done, failures

        with concurrent.futures.ThreadPoolExecutor(convs) as pool:
            for done, failures in pool.map(after, range(convs), timeout=120):
                later_answered += done
                later_failures += failures
    finally:
        second.stop()
    post_lines = [e for e in second.events() if e.get("event") == "response"]
    return {
        "conversations": convs, "calls_each": calls, "window": int(window),
        "answered_before_kill": sum(answered), "answered_when_kill_sent": at_kill,
        "calls_cut_by_kill": len(cut), "cut_kinds": sorted(set(cut)),
        "firings_before_kill": sum(e.get("outcome") == "fired" for e in pre),
        "restarted_before_kill": sum(e.get("restarted") is True for e in pre),
        "sessions_before_kill": len(pre_ids),
        "conversations_continued": len(firsts),
        "first_after_restart_200": sum(f["status"] == 200 for f in firsts),
        "first_after_restart_found": sum(f["new_session"] is False for f in firsts),
        "first_after_restart_new_session": sum(f["new_session"] is True for f in firsts),
        "first_after_restart_restarted": sum(f["restarted"] is True for f in firsts),
        "first_after_restart_known_session_id": sum(f["known_session"] for f in firsts),
        "first_after_restart_no_log_line": sum(f["new_session"] is None for f in firsts),
        "lost": [f for f in firsts if f["new_session"] is not False or f["restarted"] is not False],
        "answered_after_restart": later_answered + sum(f["status"] == 200 for f in firsts),
        "failures_after_restart": len(later_failures),
        "firings_after_restart": sum(e.get("outcome") == "fired" for e in post_lines),
        "restarted_after_restart": sum(e.get("restarted") is True for e in post_lines),
        "unparsed_log_lines_before": [e["line"] for e in first.events()
                                      if e.get("event") == "unparsed"][:3],
        "log_events_before": count_events(first.events()),
        "log_events_after": count_events(second.events()),
    }


# -- the table -------------------------------------------------------------------------------

def compact(conn: http.client.HTTPConnection, body: bytes, credential: str) -> float:
    """One /v1/compact call on a kept-alive connection: its seconds (200 or it raises)."""
    start = time.perf_counter()
    conn.request("POST", "/v1/compact", body=body, headers=headers(credential))
    answer = conn.getresponse()
    answer.read()
    if answer.status != 200:
        raise RuntimeError(f"/v1/compact answered {answer.status}")
    return time.perf_counter() - start


def store_history(j: int, calls: int) -> list[dict]:
    """Conversation `j`'s history after `calls` tool calls (small, so that no call fires)."""
    h = [{"role": "system", "content": "You are the scaffold's agent."},
         {"role": "user", "content": f"task {j}: read the files"}]
    for k in range(calls):
        call_id = f"c{j}x{k}"
        h.append({"role": "assistant", "content": None, "tool_calls": [{"id": call_id,
                  "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]})
        h.append({"role": "tool", "tool_call_id": call_id, "content": f"line {k} of file {j}"})
    return h


def store_fill(port: int, sessions: int) -> None:
    """`sessions` conversations of 2 calls each, from 20 credentials."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for j in range(sessions):
        compact(conn, chat_body(store_history(j, 2)), f"tenant-{j % 20}")
    conn.close()


def store_probe(port: int, sessions: int, calls: int, seconds: list[float],
                stop_at: threading.Event | None = None) -> None:
    """Extends stored conversations (spread over all of them), timing each call."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(calls):
        if stop_at is not None and stop_at.is_set():
            break
        j = (i * 7919) % sessions
        seconds.append(compact(conn, chat_body(store_history(j, 3 + i // sessions)),
                               f"tenant-{j % 20}"))
    conn.close()


def part_store(cli: str, work: str, fake: Fake, args) -> dict:
    out: dict = {}
    for sessions in (100, 10_000):
        proxy = Proxy(cli, work, f"store-{sessions}", fake.url)
        try:
            start = time.monotonic()
            store_fill(proxy.port, sessions)
            out[f"fill_{sessions}_seconds"] = time.monotonic() - start
            seconds: list[float] = []
            store_probe(proxy.port, sessions, 300, seconds)
            out[f"p50_ms_{sessions}"] = percentile(seconds, 50) * 1e3
            out[f"p99_ms_{sessions}"] = percentile(seconds, 99) * 1e3
            if sessions == 10_000:
                out.update(store_long_history(proxy.port, sessions))
        finally:
            proxy.stop()
    out["p50_ratio"] = out["p50_ms_10000"] / out["p50_ms_100"]
    return out


def store_long_history(port: int, sessions: int) -> dict:
    """A request of 200,000 short messages, sent while other calls are timed."""
    messages = [{"role": "system", "content": "You are the scaffold's agent."}]
    for k in range(200_000 - 1):
        messages.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"m{k}"})
    body = chat_body(messages)
    before: list[float] = []
    store_probe(port, sessions, 200, before)
    during: list[float] = []
    stop_at = threading.Event()
    prober = threading.Thread(target=store_probe, args=(port, sessions, 100_000, during, stop_at))
    prober.start()
    time.sleep(0.2)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    big = compact(conn, body, "tenant-long")
    conn.close()
    stop_at.set()
    prober.join(timeout=60)
    return {"long_messages": len(messages), "long_body_mib": len(body) / 2**20,
            "long_seconds": big, "others_p99_ms_before": percentile(before, 99) * 1e3,
            "others_p99_ms_during": percentile(during, 99) * 1e3,
            "others_max_ms_during": max(during) * 1e3 if during else None,
            "others_calls_during": len(during)}


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def rows(results: dict) -> list[tuple[str, str, str]]:
    out = []
    if "stuck" in results:
        r = results["stuck"]
        if "error" in r:
            out.append(("stuck", "error", r["error"]))
        else:
            for n in ("A", "B"):
                x = r[n]
                out.append(("stuck", f"run {n} calls / failures ({r['rounds']} rounds pooled)",
                            f"{x['calls']} / {x['failures']}"))
                out.append(("stuck", f"run {n} p50 / p99 / max ms",
                            f"{fmt(x['p50_ms'])} / {fmt(x['p99_ms'])} / {fmt(x['max_ms'])}"))
                out.append(("stuck", f"run {n} proxy VmHWM MiB (largest)", fmt(x["proxy_hwm_mib"], 1)))
            b = r["B"]
            out.append(("stuck", "B: MiB the provider had written, before / after each run",
                        ", ".join(f"{x} / {y}" for x, y in zip(b["stuck_chunks_before_run"],
                                                               b["stuck_chunks_after_run"]))
                        + f"; stream still open: {fmt(b['stuck_stream_still_open'])}"))
            out.append(("stuck", "p50 ratio B/A", fmt(r["p50_ratio_B_over_A"], 3)))
            out.append(("stuck", "p99 ratio B/A per round",
                        ", ".join(fmt(x, 3) for x in r["per_round_p99_ratio"])))
            out.append(("stuck", "p99 ratio B/A, pooled (target <= 1.5)",
                        fmt(r["p99_ratio_B_over_A"], 3)))
    if "idle" in results:
        r = results["idle"]
        if "error" in r:
            out.append(("idle", "error", r["error"]))
        else:
            out += [("idle", "opened / open failures (in s)",
                     f"{r['opened']} / {r['open_failures']} ({fmt(r['opened_in_s'], 1)})"),
                    ("idle", "listener backlog (kernel accept queue limit)", str(r["listen_backlog"])),
                    ("idle", "held open at once (proxy fds then)",
                     f"{r['held_open_at_once']} ({r['proxy_fds_after_open']})"),
                    ("idle", "connects delayed > 0.5 s (SYN retransmits) / slowest s",
                     f"{r['connects_over_0.5s']} / {fmt(r['connect_max_s'])}"),
                    ("idle", "closed by proxy / within idle+5 s",
                     f"{r['closed_by_proxy']} / {r['closed_within_idle_plus_5s']}"),
                    ("idle", "close age min / p50 / max s",
                     f"{fmt(r['close_age_min_s'])} / {fmt(r['close_age_p50_s'])} / "
                     f"{fmt(r['close_age_max_s'])}"),
                    ("idle", "healthz polls / failures",
                     f"{r['healthz_polls']} / {r['healthz_failures']}"),
                    ("idle", "healthz p50 / p99 / max ms",
                     f"{fmt(r['healthz_p50_ms'])} / {fmt(r['healthz_p99_ms'])} / "
                     f"{fmt(r['healthz_max_ms'])}"),
                    ("idle", "proxy RSS start / peak (VmHWM) / 1 s after / 5 s after MiB",
                     f"{fmt(r['proxy_rss_start_mib'], 1)} / {fmt(r['proxy_hwm_mib'], 1)} / "
                     f"{fmt(r['proxy_rss_after_mib'], 1)} / {fmt(r['proxy_rss_5s_after_mib'], 1)}"),
                    ("idle", "proxy fds after", str(r["proxy_fds_after"])),
                    ("idle", "proxy CPU share over the run", fmt(r["proxy_cpu_share"], 3))]
    if "ulimit" in results:
        r = results["ulimit"]
        if "error" in r:
            out.append(("ulimit", "error", r["error"]))
        else:
            during = (f"ok in {fmt(r['healthz_while_open_s'])} s" if r["healthz_while_open_ok"]
                      else f"no ({r['healthz_while_open_error']} after "
                           f"{fmt(r['healthz_while_open_s'])} s)")
            out += [("ulimit", "proxy nofile / fds with 300 open",
                     f"{r['proxy_nofile_soft']} / {r['proxy_fds_after_open']}"),
                    ("ulimit", "listener accept queue then / its limit",
                     f"{r['listen_queue_after_open']} / {r['listen_backlog']}"),
                    ("ulimit", "established / within 0.5 s / failed / most at once",
                     f"{r['opened']} / {r['established_within_0.5s']} / {r['open_failures']} / "
                     f"{r['held_open_at_once']}"),
                    ("ulimit", "connects delayed > 0.5 s (SYN retransmits) / slowest s",
                     f"{r['connects_over_0.5s']} / {fmt(r['connect_max_s'])}"),
                    ("ulimit", "proxy CPU share over 3 s (target << 0.05)", fmt(r["cpu_share_3s"], 4)),
                    ("ulimit", "proxy CPU share until all closed", fmt(r["cpu_share_until_all_closed"], 4)),
                    ("ulimit", "healthz while the 300 are open (10 s timeout)", during),
                    ("ulimit", "closed by proxy / all closed after s / close age max s",
                     f"{r['closed_by_proxy']} / {fmt(r['all_closed_after_s'], 1)} / "
                     f"{fmt(r['close_age_max_s'])}"),
                    ("ulimit", "healthz after: first ok s after all closed (latency ms)",
                     f"{fmt(r['healthz_after_close_first_ok_s'], 3)} "
                     f"({fmt(r['healthz_after_close_latency_ms'])})")]
    if "body" in results:
        r = results["body"]
        if "error" in r:
            out.append(("body", "error", r["error"]))
        else:
            for shape, x in r.items():
                if not isinstance(x, dict):
                    continue
                tag = shape + (" (pathological)" if x["pathological"] else "")
                out += [(f"body {tag}", "MiB / messages / status / s / outcome",
                         f"{fmt(x['body_mib'], 1)} / {x['messages']} / {x['status'] or x['error']} / "
                         f"{fmt(x['seconds'])} / {x['outcome']}"),
                        (f"body {tag}", "VmRSS before / VmHWM after / VmRSS 2 s after MiB",
                         f"{fmt(x['rss_before_mib'], 1)} / {fmt(x['hwm_after_mib'], 1)} / "
                         f"{fmt(x['rss_2s_after_mib'], 1)}"),
                        (f"body {tag}", "(peak - start) / body; RSS retained MiB",
                         f"{fmt(x['peak_over_body'])}; {fmt(x['rss_retained_mib'], 1)}")]
    if "kill" in results:
        r = results["kill"]
        if "error" in r:
            out.append(("kill", "error", r["error"]))
        else:
            out += [("kill", "answered before kill / cut by kill",
                     f"{r['answered_before_kill']} / {r['calls_cut_by_kill']}"),
                    ("kill", "firings before kill / sessions", f"{r['firings_before_kill']} / "
                     f"{r['sessions_before_kill']}"),
                    ("kill", "conversations continued after restart", str(r["conversations_continued"])),
                    ("kill", "first call after restart: 200 / found / new / restarted",
                     f"{r['first_after_restart_200']} / {r['first_after_restart_found']} / "
                     f"{r['first_after_restart_new_session']} / {r['first_after_restart_restarted']}"),
                    ("kill", "first call after restart: session id seen before the kill",
                     str(r["first_after_restart_known_session_id"])),
                    ("kill", "answered after restart / failures / firings",
                     f"{r['answered_after_restart']} / {r['failures_after_restart']} / "
                     f"{r['firings_after_restart']}"),
                    ("kill", "restarted:true lines before / after", f"{r['restarted_before_kill']} / "
                     f"{r['restarted_after_restart']}"),
                    ("kill", "answered sessions lost", str(len(r["lost"])))]
    if "store" in results:
        r = results["store"]
        if "error" in r:
            out.append(("store", "error", r["error"]))
        else:
            out += [("store", "fill 100 / 10,000 sessions, s",
                     f"{fmt(r['fill_100_seconds'])} / {fmt(r['fill_10000_seconds'])}"),
                    ("store", "a call at 100 sessions: p50 / p99 ms",
                     f"{fmt(r['p50_ms_100'])} / {fmt(r['p99_ms_100'])}"),
                    ("store", "a call at 10,000 sessions: p50 / p99 ms",
                     f"{fmt(r['p50_ms_10000'])} / {fmt(r['p99_ms_10000'])}"),
                    ("store", "p50 ratio 10,000 / 100 (target about 1)", fmt(r["p50_ratio"])),
                    ("store", "200,000 messages: MiB / s", f"{fmt(r['long_body_mib'])} / "
                     f"{fmt(r['long_seconds'])}"),
                    ("store", "other calls' p99 before / during it, ms (max during)",
                     f"{fmt(r['others_p99_ms_before'])} / {fmt(r['others_p99_ms_during'])} "
                     f"({fmt(r['others_max_ms_during'])}; {r['others_calls_during']} calls)")]
    return out


def print_table(results: dict) -> None:
    print("| part | measure | value |")
    print("|---|---|---|")
    for part, measure, value in rows(results):
        print(f"| {part} | {measure} | {value} |")


# -- the run ---------------------------------------------------------------------------------

def main() -> None:
    if sys.argv[1:] == ["--fake-upstream"]:
        fake_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=os.path.join(ROOT, "target", "release", "cutctx"))
    parser.add_argument("--json", help="write the results as JSON to this file")
    parser.add_argument("--only", default=",".join(PARTS), help="a comma-separated subset of "
                        + ", ".join(PARTS))
    parser.add_argument("--calls", type=int, default=6, help="calls per conversation (stuck)")
    parser.add_argument("--workers", type=int, default=32, help="conversations at once (stuck)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="A and B runs of the stuck part, alternating, pooled")
    parser.add_argument("--idle-connections", type=int, default=10_000)
    parser.add_argument("--body-mib", type=float, default=29.0)
    parser.add_argument("--body-timeout", type=float, default=90.0)
    parser.add_argument("--kill-window", type=int, default=3000,
                        help="the window of the kill part, in tokens: its calls fire from the 5th")
    parser.add_argument("--keep", action="store_true", help="keep the proxies' logs and state")
    args = parser.parse_args()
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in only if p not in PARTS]
    if unknown:
        sys.exit(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    if not os.path.exists(args.cli):
        sys.exit(f"no cutctx binary at {args.cli}: cargo build --release -p cutctx-cli")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="serve-tenants-load.")
    cli = os.path.join(work, "cutctx")
    shutil.copy2(args.cli, cli)  # one build for the whole run
    results: dict = {"cli": args.cli, "cpus": os.cpu_count()}
    parts = {"stuck": part_stuck, "idle": part_idle, "ulimit": part_ulimit,
             "body": part_body, "kill": part_kill, "store": part_store}
    try:
        fake = Fake()
        for name in only:
            start = time.monotonic()
            print(f"# {name} ...", file=sys.stderr, flush=True)
            try:
                results[name] = parts[name](cli, work, fake, args)
            except Exception as error:  # noqa: BLE001 (a part that fails is reported, the rest run)
                results[name] = {"error": f"{type(error).__name__}: {error}"}
            results[name]["part_seconds"] = time.monotonic() - start
            print(f"# {name} done in {results[name]['part_seconds']:.1f} s", file=sys.stderr,
                  flush=True)
    finally:
        stop_all()
        if args.keep:
            print(f"# logs kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1, sort_keys=True, default=str)
    print_table(results)


if __name__ == "__main__":
    main()
