"""examples/ray_compact.py on a local Ray cluster over the 200 tau-bench runs: every output
line byte for byte what ``cutctx batch`` writes for the same input.

Needs ``ray`` (scripts/ray-check.sh installs it in a throwaway venv), the binary named by
``CUTCTX_BIN`` and ``../shared``; skips with a message when one is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RUNS = ROOT.parent / "shared" / "realworld" / "tau-bench"


def test_the_ray_example_writes_what_cutctx_batch_writes(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray", reason="ray is not installed (scripts/ray-check.sh)")
    binary = os.environ.get("CUTCTX_BIN")
    if not binary:
        pytest.skip("CUTCTX_BIN does not name a cutctx binary")
    if not (RUNS / "gpt-4o-airline.json").exists():
        pytest.skip("../shared/realworld is absent")
    runs = json.loads((RUNS / "gpt-4o-airline.json").read_text(encoding="utf-8"))
    tools = json.loads((RUNS / "airline_tools.json").read_text(encoding="utf-8"))
    source = tmp_path / "tau.jsonl"
    with source.open("w", encoding="utf-8") as f:
        for run in runs:
            f.write(json.dumps({"model": "gpt-4o", "messages": run["traj"], "tools": tools}) + "\n")
    options = ["--format", "openai-chat", "--max-tokens", "3000", "--policy", "observation_masking"]
    want = subprocess.run(
        [binary, "batch", *options, str(source)], capture_output=True, check=False
    )
    assert want.returncode in (0, 1), want.stderr
    assert want.stdout.count(b"\n") == len(runs)

    spec = importlib.util.spec_from_file_location("ray_compact", ROOT / "examples/ray_compact.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["ray_compact"] = example
    spec.loader.exec_module(example)
    from cutctx.formats import BatchCompactor

    target = tmp_path / "out.jsonl"
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        compactor = BatchCompactor(
            "openai-chat", 3000, column="text", policy="observation_masking"
        )
        example.compact_file(str(source), str(target), compactor, batch_size=16)
    finally:
        ray.shutdown()
    got = target.read_bytes()
    assert got.count(b"\n") == len(runs)
    for n, (a, b) in enumerate(zip(got.splitlines(), want.stdout.splitlines()), start=1):
        assert a == b, f"line {n} differs"
    assert got == want.stdout
    # The budget compacts most runs: the comparison is not of unchanged lines only.
    lines = source.read_bytes().splitlines()
    assert sum(a != b for a, b in zip(got.splitlines(), lines)) > 100
