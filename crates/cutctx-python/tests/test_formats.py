"""cutctx.formats against the CLI binary: the same bytes out, the same errors.

Every case runs ``target/release/cutctx compact --format F`` (or ``$CUTCTX_BIN``) and
``cutctx.formats`` on the same file and options, and requires identical output, identical
report files, and, on failure, the same code and details.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cutctx import formats
from cutctx.formats import FormatCompactionError, compact, compact_json, compact_json_with_report

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("CUTCTX_BIN", ROOT / "target" / "release" / "cutctx"))
CORPUS = ROOT / "crates" / "cutctx-formats" / "tests" / "corpus"

FILES = [
    *(("openai-chat", p) for p in sorted((CORPUS / "openai-chat").glob("*.json"))),
    *(("openai-responses", p) for p in sorted((CORPUS / "openai-responses").glob("*.json"))),
    *(("anthropic", p) for p in sorted((CORPUS / "anthropic").glob("*.json"))),
    ("openai-chat", ROOT / "examples" / "openai-chat.json"),
    ("openai-responses", ROOT / "examples" / "openai-responses.json"),
    ("anthropic", ROOT / "examples" / "anthropic.json"),
]
BUDGETS = [0, 40, 150, 400, 800, 1_000_000]
POLICIES = ["drop_oldest", "observation_masking", "summarizing", "default_chain"]

needs_cli = pytest.mark.skipif(
    not BIN.is_file(), reason=f"the CLI binary is not built ({BIN}): cargo build --release -p cutctx-cli"
)


def cli(fmt: str, path: Path, budget: int, policy: str, recent: int, *extra: str):
    """(exit status, stdout bytes, parsed error line or None)."""
    run = subprocess.run(
        [str(BIN), "--error-format", "json", "compact", "--format", fmt, "--max-tokens",
         str(budget), "--policy", policy, "--protected-recent", str(recent), *extra, str(path)],
        capture_output=True,
        check=False,
    )
    error = None
    if run.returncode != 0:
        error = json.loads(run.stderr.decode().strip().splitlines()[-1])
    return run.returncode, run.stdout, error


def ours(data: bytes, fmt: str, budget: int, policy: str, recent: int, **kw):
    try:
        return compact_json_with_report(
            data, fmt, budget, policy=policy, protected_recent_turns=recent, **kw
        ), None
    except FormatCompactionError as e:
        return None, e


def test_the_corpus_is_there():
    assert len(FILES) >= 10
    assert all(p.is_file() for _, p in FILES)


@needs_cli
@pytest.mark.parametrize(("fmt", "path"), FILES, ids=lambda v: getattr(v, "name", v))
def test_byte_identical_to_the_cli(fmt: str, path: Path, tmp_path: Path):
    data = path.read_bytes()
    compared = 0
    for budget in BUDGETS:
        for policy in POLICIES:
            for recent in (1, 4):
                status, out, error = cli(fmt, path, budget, policy, recent)
                got, exc = ours(data, fmt, budget, policy, recent)
                case = (fmt, path.name, budget, policy, recent)
                if error is not None:
                    assert exc is not None, case
                    assert (exc.code, exc.details) == (error["code"], error["details"]), case
                    if error["code"] != "COMPACTION_SUMMARY_MISSING":
                        assert exc.message == error["message"], case
                    if error["code"] != "COMPACTION_SUMMARY_MISSING":
                        continue
                    # Fulfil every request, then both must agree on the compacted request and
                    # on the report file.
                    summaries = {
                        r["group_id"]: f"summary of {len(r['turn_ids'])} turns"
                        for r in error["details"]["requests"]
                    }
                    sfile = tmp_path / "summaries.json"
                    sfile.write_text(json.dumps(summaries))
                    rfile = tmp_path / "report.json"
                    status, out, error = cli(
                        fmt, path, budget, policy, recent,
                        "--summaries", str(sfile), "--report", str(rfile),
                    )
                    assert status == 0, (case, error)
                    got, exc = ours(data, fmt, budget, policy, recent, summaries=summaries)
                    assert exc is None, (case, exc)
                    assert got == (out, rfile.read_bytes()), case
                else:
                    assert exc is None, (case, exc)
                    assert got[0] == out, case
                compared += 1
    assert compared > 0


@needs_cli
def test_the_dict_path_equals_the_cli_output_read_back():
    path = ROOT / "examples" / "openai-responses.json"
    request = json.loads(path.read_bytes())
    _, out, error = cli("openai-responses", path, 400, "observation_masking", 2)
    assert error is None
    result = compact(request, "openai-responses", 400, policy="observation_masking",
                     protected_recent_turns=2)
    assert result.request == json.loads(out)
    assert result.report["masked_turn_ids"], "the example must mask something at this budget"
    assert result.plan["policy_name"] == "observation_masking"
    assert request == json.loads(path.read_bytes()), "the input is left as it was"


def test_a_request_that_fits_comes_back_byte_for_byte():
    data = b'{"model": "m",   "messages": [{"role": "user", "content": "Hi"}]}'
    assert compact_json(data, "openai-chat", 1000) == data + b"\n"
    assert compact_json(data.decode(), "openai-chat", 1000) == data + b"\n"


def test_summarize_is_called_once_per_request_with_the_cli_document():
    msgs = []
    for i in range(8):
        msgs += [{"role": "user", "content": f"q{i} " + "z" * 300},
                 {"role": "assistant", "content": f"a{i}"}]
    seen = []

    def summarize(doc):
        seen.append(doc)
        return "folded"

    result = compact(msgs, "openai-chat", 200, policy="summarizing", summarize=summarize)
    assert [d["group_id"] for d in seen] == [
        r["group_id"] for r in result.plan["summarization_requests"]
    ]
    assert set(seen[0]) == {"format", "group_id", "prompt_id", "target_tokens", "turns", "messages"}
    assert seen[0]["format"] == "openai-chat"
    assert seen[0]["prompt_id"] == formats.DEFAULT_PROMPT_ID
    assert result.request[0] == {"role": "assistant", "content": "folded"}


def test_a_failing_summarize_is_a_summarizer_error_with_its_cause():
    msgs = [{"role": "user", "content": "w" * 2000}, {"role": "assistant", "content": "ok"}] * 4

    def boom(doc):
        raise RuntimeError("model down")

    with pytest.raises(FormatCompactionError) as info:
        compact(msgs, "openai-chat", 100, policy="summarizing", protected_recent_turns=1,
                summarize=boom)
    assert info.value.code == "SUMMARIZER_ERROR"
    assert info.value.details["group_id"].startswith("span-")
    assert isinstance(info.value.__cause__, RuntimeError)

    with pytest.raises(FormatCompactionError) as info:
        compact(msgs, "openai-chat", 100, policy="summarizing", protected_recent_turns=1,
                summarize=lambda d: "   ")
    assert info.value.code == "SUMMARIZER_ERROR"


@pytest.mark.parametrize(
    ("call", "code", "detail"),
    [
        (lambda: compact_json(b"\xff", "openai-chat", 1), "INPUT_ERROR", {"offset": 0}),
        (lambda: compact_json(b"[", "openai-chat", 1), "INPUT_ERROR", {"document": "the transcript"}),
        (lambda: compact_json(b"[]", "gemini", 1), "FORMAT_UNSUPPORTED", {"format": "gemini"}),
        (lambda: compact_json(b"[]", "openai-chat", 1), "FORMAT_INVALID_REQUEST", {}),
        (lambda: compact_json(b"[1]", "openai-chat", 1, policy="newest"), None, {}),
        (lambda: compact_json(b'[{"role":"user","content":"x"}]', "openai-chat", 1,
                              policy="lifo"), "VALIDATION_ERROR", {"policy": "lifo"}),
        (lambda: compact({"messages": [{"role": "user", "content": float("nan")}]},
                         "openai-chat", 1), "INPUT_ERROR", {"kind": "ValueError"}),
        (lambda: compact([{"role": "user", "content": "x"}], "openai-chat", -1),
         "VALIDATION_ERROR", {"max_tokens": -1}),
        (lambda: compact([{"role": "user", "content": "x"}], "openai-chat", 5,
                         summaries={"g": "s"}, summarize=lambda d: "s"),
         "USAGE_ERROR", {"option": "summarize"}),
        (lambda: compact([{"role": "user", "content": "x" * 400}] * 3, "openai-chat", 5,
                         protected_recent_turns=3), "COMPACTION_BUDGET_UNSATISFIABLE",
         {"max_tokens": 5}),
    ],
)
def test_errors_carry_the_cli_codes(call, code, detail):
    with pytest.raises(FormatCompactionError) as info:
        call()
    e = info.value
    assert isinstance(e.code, str) and isinstance(e.message, str) and isinstance(e.details, dict)
    if code is not None:
        assert e.code == code, (e.code, e.message)
    for k, v in detail.items():
        assert e.details[k] == v, e.details
