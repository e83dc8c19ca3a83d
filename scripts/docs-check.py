#!/usr/bin/env python3
"""Runs the shell blocks of the documentation as written, so that a documented command that
stops working fails CI.

    python3 scripts/docs-check.py --bin target/release README.md

Every ```sh block of each file is run with bash (`set -euo pipefail`) in a fresh temporary
folder holding a copy of the repository's `examples/`, with `--bin` first on PATH (where the
`cutctx` binary is). A block is left out only by a marker on the line just before it that says
why:

    <!-- docs-check: skip: CI runs the test suite as its own step -->

Prints one line per block (run, or skipped and why) and a summary; exits 1 if any block
failed. Standard library only.
"""

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*docs-check:\s*skip:\s*(.+?)\s*-->")


def blocks(text):
    """Yields (line number, skip reason or None, code) for each ```sh block of `text`."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i + 1
            marker = SKIP.search(lines[i - 1]) if i > 0 else None
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            yield start, marker.group(1) if marker else None, "\n".join(lines[start:j])
            i = j
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding the cutctx binary")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    binary = pathlib.Path(args.bin).resolve()
    env = dict(os.environ, PATH=f"{binary}{os.pathsep}{os.environ.get('PATH', '')}")
    ran = skipped = failed = 0
    for name in args.files:
        path = pathlib.Path(name)
        for line, reason, code in blocks(path.read_text()):
            where = f"{path}:{line}"
            if reason:
                skipped += 1
                print(f"skipped {where}: {reason}")
                continue
            with tempfile.TemporaryDirectory() as work:
                shutil.copytree(ROOT / "examples", pathlib.Path(work) / "examples")
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=300)
            ran += 1
            if done.returncode == 0:
                print(f"ok      {where}")
            else:
                failed += 1
                print(f"FAILED  {where} (exit {done.returncode})")
                print("  " + "\n  ".join((done.stderr or done.stdout).strip().splitlines()[-10:]))
    print(f"docs-check: {ran} blocks run, {failed} failed, {skipped} skipped (each with its reason)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
