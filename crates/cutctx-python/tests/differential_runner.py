"""Runs differential cases through whichever ``cutctx`` this interpreter imports.

Reads ``{"cases": [...]}`` as JSON on standard input and writes ``{"results": [...]}`` as JSON
on standard output, one result per case, in order. A case is
``{"turns", "budget": {"max_tokens", "protected_recent_turns"}, "policy", "summaries"}`` where
``policy`` uses the request document's spelling and ``summaries`` is ``"all"`` (every request
fulfilled with a fixed text) or ``"none"``. A result is ``{"plan", "report", "view"}`` from the
public API's ``to_dict()`` methods, or ``{"error": {"class", "code", "message", "details"}}``.

Only the public API that ``cutctx==0.1.0`` and its Rust-backed port share is used, so the same
script runs under either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REFERENCE = "cutctx==0.1.0"


def reference_python() -> tuple[Path | None, str]:
    """The interpreter of a throwaway venv holding the reference, or ``None`` and why not.

    The venv is cached under the temporary directory, so only the first run pays for it. It
    needs Python 3.12 or later and the package index; ``CUTCTX_REFERENCE_PYTHON`` names an
    interpreter that already has the reference instead.
    """
    given = os.environ.get("CUTCTX_REFERENCE_PYTHON")
    if given:
        return Path(given), ""
    venv = Path(tempfile.gettempdir()) / "cutctx-reference-0.1.0-venv"
    python = venv / "bin" / "python"
    done = venv / ".installed"
    if done.is_file() and python.is_file():
        return python, ""
    base = _python_312()
    if base is None:
        return None, "no Python 3.12 or later found to install the reference into"
    shutil.rmtree(venv, ignore_errors=True)
    steps = [
        [base, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", REFERENCE],
    ]
    for step in steps:
        run = subprocess.run(step, capture_output=True, text=True, check=False, timeout=600)
        if run.returncode != 0:
            tail = (run.stderr or run.stdout).strip().splitlines()[-1:]
            return None, f"cannot install {REFERENCE}: {' '.join(tail)}"
    done.write_text(REFERENCE + "\n")
    return python, ""


def _python_312() -> str | None:
    if sys.version_info >= (3, 12):
        return sys.executable
    for name in ("python3.13", "python3.12"):
        found = shutil.which(name)
        if found:
            return found
    pyenv = Path.home() / ".pyenv" / "versions"
    for v in sorted(pyenv.glob("3.1[2-9]*"), reverse=True):
        if (v / "bin" / "python").is_file():
            return str(v / "bin" / "python")
    return None


def run_under(python: Path | str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs the cases through this script under ``python``; its results, in order."""
    run = subprocess.run(
        [str(python), str(Path(__file__).resolve())],
        input=json.dumps({"cases": cases}),
        capture_output=True,
        text=True,
        check=True,
        timeout=1200,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(run.stdout)["results"]


def build_policy(spec: dict[str, Any]) -> Any:
    import cutctx

    name = spec["name"]
    if name == "drop_oldest":
        return cutctx.DropOldestPolicy()
    if name == "observation_masking":
        return cutctx.ObservationMaskingPolicy(spec.get("keep_recent_results", 2))
    if name == "summarizing":
        return cutctx.SummarizingPolicy(
            spec["prompt_id"],
            target_ratio=spec.get("target_ratio", 0.2),
            min_span_turns=spec.get("min_span_turns", 4),
        )
    if name == "default_chain":
        return cutctx.default_chain(prompt_id=spec["prompt_id"])
    if name == "chain":
        return cutctx.PolicyChain([build_policy(p) for p in spec["policies"]])
    raise ValueError(f"unknown policy {name!r}")


def turn_dict(t: Any) -> dict[str, Any]:
    return {
        "turn_id": t.turn_id,
        "role": str(t.role.value if hasattr(t.role, "value") else t.role),
        "content": t.content,
        "token_estimate": t.token_estimate,
        "tool_call_id": t.tool_call_id,
        "pinned": t.pinned,
        "metadata": dict(t.metadata),
    }


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    import cutctx

    try:
        transcript = cutctx.Transcript(
            tuple(
                cutctx.TranscriptTurn(
                    t["turn_id"],
                    cutctx.Role(t["role"]),
                    t["content"],
                    t["token_estimate"],
                    tool_call_id=t.get("tool_call_id"),
                    pinned=t.get("pinned", False),
                )
                for t in case["turns"]
            )
        )
        budget = cutctx.CompactionBudget(
            case["budget"]["max_tokens"],
            protected_recent_turns=case["budget"]["protected_recent_turns"],
        )
        plan = build_policy(case["policy"]).decide(transcript, budget)
        summaries = {}
        if case["summaries"] == "all":
            summaries = {
                r.group_id: f"summary of {len(r.turn_ids)} turns"
                for r in plan.summarization_requests
            }
        view = cutctx.CompactionExecutor().apply(transcript, plan, summaries)
        return {
            "plan": plan.to_dict(),
            "report": view.report.to_dict(),
            "view": [turn_dict(t) for t in view.transcript.turns],
        }
    except Exception as e:  # noqa: BLE001 - every refusal is part of the comparison
        return {
            "error": {
                "class": type(e).__name__,
                "code": getattr(e, "code", None),
                "message": getattr(e, "message", str(e)),
                "details": getattr(e, "details", None),
            }
        }


def main() -> None:
    cases = json.load(sys.stdin)["cases"]
    results = [run_case(c) for c in cases]
    json.dump({"results": results}, sys.stdout, sort_keys=True, default=repr)


if __name__ == "__main__":
    main()
