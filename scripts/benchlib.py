"""What the benchmark scripts share: running the CLI with its peak memory, against one SHA-256.

`against_sha256` runs a command right after one `openssl dgst -sha256` over the same file, run
after run, so that drift in the machine's speed touches both alike; `openssl` because it uses
the processor's SHA instructions, the floor of reading the file at all.
"""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def built(example, cli=None):
    """Builds the release CLI and the cutctx-ops `example` that writes the benchmark's input;
    returns (the CLI to measure: `cli` when given, an older build to compare, else the one just
    built; the example's binary), found where cargo puts them (CARGO_TARGET_DIR when set, as
    cargo itself reads it)."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "cutctx-cli",
                    "-p", "cutctx-ops", "--bin", "cutctx", "--example", example], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    return cli or os.path.join(target, "release/cutctx"), os.path.join(target, "release/examples", example)


def timed(argv):
    """Runs argv with standard output discarded; returns (seconds, peak RSS in bytes)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} failed with status {code}")
    return elapsed, usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


def against_sha256(argv, path, runs):
    """`runs` timings of argv, each right after one SHA-256 pass over `path` (a file, or a list
    of the files argv reads), after one warm-up run (the page cache, the binary): the ratios of
    the two wall times, argv's peak RSS in bytes, and its wall times."""
    paths = [path] if isinstance(path, str) else list(path)
    ratios, peaks, times = [], [], []
    timed(argv)
    for _ in range(runs):
        sha, _ = timed(["openssl", "dgst", "-sha256", *paths])
        t, rss = timed(argv)
        ratios.append(t / sha)
        peaks.append(rss)
        times.append(t)
    return ratios, peaks, times
