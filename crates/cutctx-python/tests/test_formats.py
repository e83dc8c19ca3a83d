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
    """(request and report, None) or (None, the error); `compact_json`, which makes no report,
    must give the same request or the same error."""
    try:
        alone = compact_json(data, fmt, budget, policy=policy, protected_recent_turns=recent, **kw)
    except FormatCompactionError as e:
        alone = e
    try:
        both = compact_json_with_report(
            data, fmt, budget, policy=policy, protected_recent_turns=recent, **kw
        )
    except FormatCompactionError as e:
        assert isinstance(alone, FormatCompactionError), (alone, e)
        assert (alone.code, alone.message, alone.details) == (e.code, e.message, e.details)
        return None, e
    assert alone == both[0]
    return both, None


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


def test_a_missing_summary_names_the_python_options_not_the_flags():
    data = (ROOT / "examples" / "openai-chat.json").read_bytes()
    with pytest.raises(FormatCompactionError) as caught:
        compact_json(data, "openai-chat", 400, policy="summarizing", protected_recent_turns=1)
    e = caught.value
    assert e.code == "COMPACTION_SUMMARY_MISSING"
    assert "summarize=" in e.message and "summaries=" in e.message, e.message
    assert "--summar" not in e.message, e.message
    # With no policy and no summarizer the same call never needs a summary.
    assert compact_json(data, "openai-chat", 400, protected_recent_turns=1)


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


# The whole prompt and repair: the same bytes as the CLI's --reserve-output and --repair.

UNANSWERED = json.dumps({"model": "gpt-4o", "max_tokens": 30, "messages": [
    {"role": "user", "content": "Go."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "user", "content": "Still there? " * 40},
    {"role": "assistant", "content": "Yes."},
    {"role": "tool", "tool_call_id": "c9", "content": "late"},
    {"role": "user", "content": "Good."},
]}).encode()
WITH_TOOLS = json.dumps({"model": "claude", "max_tokens": 64, "system": "Be brief.",
    "tools": [{"name": "lookup", "description": "d" * 2_000, "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "first question " * 60},
        {"role": "assistant", "content": "first answer " * 60},
        {"role": "user", "content": "second question"},
    ]}).encode()
EXTRA_CASES = [("openai-chat", "unanswered.json", UNANSWERED), ("anthropic", "tools.json", WITH_TOOLS)]


def _cli_files(tmp_path: Path) -> list[tuple[str, Path]]:
    files = list(FILES)
    for fmt, name, data in EXTRA_CASES:
        path = tmp_path / name
        path.write_bytes(data)
        files.append((fmt, path))
    return files


@needs_cli
@pytest.mark.parametrize("reserve", [None, 0, 50])
@pytest.mark.parametrize("repair", [False, True])
def test_reserve_output_and_repair_give_the_cli_bytes_and_report(
    reserve: int | None, repair: bool, tmp_path: Path
):
    flags = [*([] if reserve is None else ["--reserve-output", str(reserve)]),
             *(["--repair"] if repair else [])]
    compared = 0
    for fmt, path in _cli_files(tmp_path):
        data = path.read_bytes()
        for budget in (150, 700, 1_000_000):
            rfile = tmp_path / "report.json"
            rfile.unlink(missing_ok=True)
            status, out, error = cli(fmt, path, budget, "drop_oldest", 1,
                                     "--report", str(rfile), *flags)
            got, exc = ours(data, fmt, budget, "drop_oldest", 1, reserve_output=reserve,
                            repair=repair)
            case = (fmt, path.name, budget, reserve, repair)
            if error is not None:
                assert exc is not None, case
                assert (exc.code, exc.message, exc.details) == (
                    error["code"], error["message"], error["details"]), case
                continue
            assert exc is None, (case, exc)
            assert got == (out, rfile.read_bytes()), case
            compared += 1
            if path.name == "unanswered.json" and repair:
                # The dict path shows the same repairs and whole-prompt figures.
                result = compact(json.loads(data), fmt, budget, policy="drop_oldest",
                                 protected_recent_turns=1, reserve_output=reserve, repair=True)
                report = json.loads(rfile.read_bytes())
                assert result.repairs == report["repairs"] and len(result.repairs) == 3
                assert result.prompt == report.get("prompt")
    assert compared > 10


@needs_cli
def test_without_repair_an_invalid_history_names_the_flag_as_the_cli_does(tmp_path: Path):
    path = tmp_path / "unanswered.json"
    path.write_bytes(UNANSWERED)
    _, _, error = cli("openai-chat", path, 1_000, "drop_oldest", 1)
    _, exc = ours(UNANSWERED, "openai-chat", 1_000, "drop_oldest", 1)
    assert error is not None and exc is not None
    assert (exc.code, exc.message, exc.details) == (
        error["code"], error["message"], error["details"])
    assert exc.details["hint"] == "--repair"


@needs_cli
@pytest.mark.parametrize("options", [[], ["--reserve-output", "7"], ["--repair"],
                                     ["--estimator", "chars:3"]])
def test_estimate_is_the_cli_estimate(options: list[str], tmp_path: Path):
    kw: dict[str, object] = {}
    if "--reserve-output" in options:
        kw["reserve_output"] = 7
    if "--repair" in options:
        kw["repair"] = True
    if "--estimator" in options:
        kw["estimator"] = "chars:3"
    for fmt, path in _cli_files(tmp_path):
        run = subprocess.run(
            [str(BIN), "--error-format", "json", "estimate", "--format", fmt, *options, str(path)],
            capture_output=True, check=False,
        )
        data = path.read_bytes()
        if run.returncode != 0:
            error = json.loads(run.stderr.decode().strip().splitlines()[-1])
            with pytest.raises(FormatCompactionError) as info:
                formats.estimate_json(data, fmt, **kw)  # type: ignore[arg-type]
            assert (info.value.code, info.value.details) == (error["code"], error["details"])
            continue
        assert formats.estimate_json(data, fmt, **kw) == run.stdout, (fmt, path.name)  # type: ignore[arg-type]
        # A dict holds Python's values, not the file's spellings (`1e2` is `100.0` once loaded),
        # so it is held to the estimate of the text Python writes for it.
        value = json.loads(data)
        assert formats.estimate(value, fmt, **kw) == json.loads(  # type: ignore[arg-type]
            formats.estimate_json(json.dumps(value).encode(), fmt, **kw)  # type: ignore[arg-type]
        ), (fmt, path.name)


@needs_cli
def test_batch_reports_and_repairs_are_the_cli_report_files(tmp_path: Path):
    files = _cli_files(tmp_path)
    chat = [p.read_bytes() for f, p in files if f == "openai-chat"]
    outs, reports = formats.compact_batch_with_reports(
        chat, "openai-chat", 700, policy="drop_oldest", protected_recent_turns=1, repair=True,
        reserve_output=20,
    )
    assert len(outs) == len(reports) == len(chat)
    for data, out, report in zip(chat, outs, reports, strict=True):
        path = tmp_path / "one.json"
        path.write_bytes(data)
        rfile = tmp_path / "r.json"
        rfile.unlink(missing_ok=True)
        _, stdout, error = cli("openai-chat", path, 700, "drop_oldest", 1, "--repair",
                               "--reserve-output", "20", "--report", str(rfile))
        if error is not None:
            assert out is None and report is None
            continue
        assert out is not None and report is not None
        assert out + b"\n" == stdout
        assert report.encode() + b"\n" == rfile.read_bytes()
    assert any(r is not None and json.loads(r)["repairs"] for r in reports)
    # The compactor's report column holds the same texts.
    got = formats.BatchCompactor("openai-chat", 700, column="r", policy="drop_oldest",
                                 protected_recent_turns=1, repair=True, reserve_output=20,
                                 report_column="why")({"r": chat})
    assert got["r"] == outs and got["why"] == reports


def test_the_names_and_defaults_are_the_cores_own():
    """The typed names are the core's lists, and the policies' defaults its constants."""
    import inspect
    import typing

    from cutctx import _core
    from cutctx.policies import ObservationMaskingPolicy, SummarizingPolicy

    assert typing.get_args(formats.Format) == formats.FORMATS
    assert typing.get_args(formats.Policy) == formats.POLICIES
    assert formats.FORMATS == ("openai-chat", "openai-responses", "anthropic")
    masking = inspect.signature(ObservationMaskingPolicy).parameters
    assert masking["keep_recent_results"].default == _core.DEFAULT_KEEP_RECENT_RESULTS == 2
    summarizing = inspect.signature(SummarizingPolicy).parameters
    assert summarizing["target_ratio"].default == _core.DEFAULT_TARGET_RATIO == 0.2
    assert summarizing["min_span_turns"].default == _core.DEFAULT_MIN_SPAN_TURNS == 4


@pytest.mark.parametrize("call", ["compact_json", "compact_batch"])
def test_an_unknown_format_is_format_unsupported_in_every_function(call):
    """One bad format name fails the same way whether one request or a batch is compacted."""
    request = '[{"role": "user", "content": "Hi"}]'
    with pytest.raises(FormatCompactionError) as e:
        if call == "compact_json":
            compact_json(request, "openai-chat-v2", 100)
        else:
            formats.compact_batch([request], "openai-chat-v2", 100)
    assert e.value.code == "FORMAT_UNSUPPORTED"


def test_a_batch_on_several_workers_equals_one_request_at_a_time():
    """The batch runs on `cutctx batch`'s workers: the order and bytes are those of one at a time."""
    def turns(i):
        history = [{"role": "user", "content": f"Question {j}: " + "x" * (j % 7) * 40}
                   for j in range(i % 5 + 1)]
        return json.dumps(history)

    requests = [turns(i) for i in range(100)] + ["{"]

    def alone(request):
        try:
            out = compact_json(request, "openai-chat", 60, protected_recent_turns=1,
                               policy="drop_oldest").decode()
            # The command's line ends with a newline; a batch's items do not.
            return out.removesuffix("\n")
        except FormatCompactionError:
            return None

    expected = [alone(r) for r in requests]
    assert expected[-1] is None and any(e is not None for e in expected)
    assert any(e is not None and e != r for e, r in zip(expected, requests))
    for jobs in (1, 2, 3):
        out = formats.compact_batch(requests, "openai-chat", 60, protected_recent_turns=1,
                                    policy="drop_oldest", jobs=jobs)
        assert out == expected, jobs
    with pytest.raises(FormatCompactionError) as e:
        formats.compact_batch(requests, "openai-chat", 60, jobs=0)
    assert e.value.code == "VALIDATION_ERROR"


# Signed reasoning after the first changed message: strip (the default), keep or refuse.


def _thinking_request(open_loop: bool = False) -> dict:
    """An Anthropic tool loop with extended thinking: six signed thinking blocks, each before a
    call whose result is large enough for observation masking to mask the oldest ones; then the
    model's answer and a new question, unless ``open_loop`` (the request then ends with the
    last result: a tool loop in progress)."""
    messages: list[dict] = [{"role": "user", "content": "Read the files one by one."}]
    for i in range(6):
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"I should look at file {i}. " * 10,
             "signature": f"sig{i}=="},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "read", "input": {"path": f"f{i}.rs"}},
        ]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "x" * 4000},
        ]})
    if not open_loop:
        messages.append({"role": "assistant", "content": "All six read."})
        messages.append({"role": "user", "content": "Now list the problems."})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": messages}


def _responses_request() -> dict:
    """A Responses tool loop: an encrypted reasoning item before each call."""
    items: list[dict] = [{"role": "user", "content": "Read the files one by one."}]
    for i in range(6):
        items.append({"type": "reasoning", "id": f"rs_{i}",
                      "summary": [{"type": "summary_text", "text": f"Reading file {i} next."}],
                      "encrypted_content": f"gAAAAB{i}" * 40})
        items.append({"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}",
                      "name": "read", "arguments": json.dumps({"path": f"f{i}.rs"})})
        items.append({"type": "function_call_output", "call_id": f"call_{i}",
                      "output": "x" * 4000})
    return {"model": "o3", "input": items}


def _thinking_blocks(message: dict) -> list[dict]:
    content = message["content"]
    if not isinstance(content, list):
        return []
    return [b for b in content if b.get("type") in ("thinking", "redacted_thinking")]


MASKING = {"policy": "observation_masking"}


def test_strip_removes_the_thinking_after_the_first_masked_message_and_reports_it():
    request = _thinking_request()
    data = json.dumps(request)
    out, report_text = compact_json_with_report(data, "anthropic", 5000, **MASKING)
    assert compact_json(data, "anthropic", 5000, **MASKING) == out
    assert compact_json(data, "anthropic", 5000, reasoning="strip", **MASKING) == out
    compacted = json.loads(out)["messages"]
    report = json.loads(report_text)
    assert report["report"]["masked_turn_ids"], "the budget must mask something"
    # The first message whose content differs from the input's: the first masked result.
    first = next(i for i, (a, b) in enumerate(zip(request["messages"], compacted, strict=True))
                 if a != b)
    assert compacted[first]["content"][0]["type"] == "tool_result"
    reasoning = report["reasoning"]
    assert reasoning["mode"] == "strip" and reasoning["removed"] is True
    assert reasoning["first_changed"] == first
    # No thinking block after it; every one before it kept, its bytes as they came in.
    assert all(not _thinking_blocks(m) for m in compacted[first + 1:])
    kept = [(i, b) for i, m in enumerate(compacted[:first]) for b in _thinking_blocks(m)]
    assert kept
    for i, block in kept:
        assert block == request["messages"][i]["content"][0]
        assert json.dumps(block).encode() in out, "a kept block's bytes are not edited"
    # Every removed one is listed, by input position, and counted.
    removed = [i for i, m in enumerate(request["messages"]) if i > first and _thinking_blocks(m)]
    assert [(e["message"], e["block"], e["kind"]) for e in reasoning["invalidated"]] == [
        (i, 0, "thinking") for i in removed]
    assert reasoning["tokens"] == sum(e["tokens"] for e in reasoning["invalidated"]) > 0
    # The calls stay, each with its result.
    uses = [b["id"] for m in compacted if isinstance(m["content"], list)
            for b in m["content"] if b["type"] == "tool_use"]
    assert uses == [f"toolu_{i}" for i in range(6)]
    # The dict path reads the same section.
    result = compact(request, "anthropic", 5000, **MASKING)
    assert result.reasoning == reasoning
    assert result.request == json.loads(out)


def test_keep_leaves_every_thinking_block_and_still_reports_them():
    request = _thinking_request()
    data = json.dumps(request)
    out, report_text = compact_json_with_report(data, "anthropic", 5000, reasoning="keep",
                                                **MASKING)
    compacted = json.loads(out)["messages"]
    blocks = [b for m in compacted for b in _thinking_blocks(m)]
    assert blocks == [b for m in request["messages"] for b in _thinking_blocks(m)]
    assert len(blocks) == 6
    reasoning = json.loads(report_text)["reasoning"]
    assert reasoning["mode"] == "keep" and reasoning["removed"] is False
    assert reasoning["invalidated"]
    assert {e["kind"] for e in reasoning["invalidated"]} == {"thinking"}
    # Only the reasoning differs from the default: the same turns are masked.
    strip = json.loads(compact_json_with_report(data, "anthropic", 5000, **MASKING)[1])
    assert json.loads(report_text)["report"] == strip["report"]
    assert reasoning["invalidated"] == strip["reasoning"]["invalidated"]
    assert compact(request, "anthropic", 5000, reasoning="keep", **MASKING).reasoning == reasoning


def test_refuse_fails_with_format_reasoning_invalidated():
    data = json.dumps(_thinking_request())
    for call in (compact_json, compact_json_with_report):
        with pytest.raises(FormatCompactionError) as e:
            call(data, "anthropic", 5000, reasoning="refuse", **MASKING)
        assert e.value.code == "FORMAT_REASONING_INVALIDATED"
        assert e.value.details["format"] == "anthropic"
    with pytest.raises(FormatCompactionError) as e:
        compact(_thinking_request(), "anthropic", 5000, reasoning="refuse", **MASKING)
    assert e.value.code == "FORMAT_REASONING_INVALIDATED"


def test_an_open_tool_loop_under_manual_thinking_is_refused_and_under_adaptive_stripped():
    # Manual thinking: the loop's last assistant message must start with its thinking, which
    # the masks before it invalidate. No valid request exists, so none is sent.
    request = _thinking_request(open_loop=True)
    with pytest.raises(FormatCompactionError) as e:
        compact(request, "anthropic", 5000, **MASKING)
    assert e.value.code == "FORMAT_REASONING_OPEN_TOOL_LOOP"
    assert e.value.details["message"] == len(request["messages"]) - 2
    assert "xxxx" not in e.value.message
    # keep is the caller's way out (with drop_block on the request).
    kept = compact(request, "anthropic", 5000, reasoning="keep", **MASKING)
    assert _thinking_blocks(kept.request["messages"][-2])
    # Adaptive thinking lets the turn go without it.
    request["thinking"] = {"type": "adaptive"}
    result = compact(request, "anthropic", 5000, **MASKING)
    assert not _thinking_blocks(result.request["messages"][-2])
    assert result.request["messages"][-2]["content"][0]["type"] == "tool_use"


def test_responses_calls_after_a_removed_reasoning_item_lose_the_id_that_names_it():
    request = _responses_request()
    result = compact(request, "openai-responses", 5000, **MASKING)
    first = result.reasoning["first_changed"]
    calls = [(i, item) for i, item in enumerate(result.request["input"])
             if item.get("type") == "function_call"]
    for i, call in calls:
        # Before the change a call keeps its id; after it, its reasoning is gone and so is the id.
        assert ("id" in call) == (i < first), (i, call)
    assert result.reasoning["unlinked"] == [
        i for i, item in enumerate(request["input"])
        if i > first and item.get("type") == "function_call"]


@pytest.mark.parametrize("mode", ["strip", "keep", "refuse"])
def test_a_request_that_fits_keeps_its_reasoning_byte_for_byte(mode: str):
    data = json.dumps(_thinking_request()).encode()
    out, report_text = compact_json_with_report(data, "anthropic", 1_000_000, reasoning=mode,
                                                **MASKING)
    assert out == data + b"\n"
    assert "reasoning" not in json.loads(report_text)
    assert compact(json.loads(data), "anthropic", 1_000_000, reasoning=mode).reasoning is None


def test_strip_removes_the_responses_reasoning_items_after_the_first_changed_item():
    request = _responses_request()
    data = json.dumps(request)
    out, report_text = compact_json_with_report(data, "openai-responses", 5000, **MASKING)
    compacted = json.loads(out)["input"]
    reasoning = json.loads(report_text)["reasoning"]
    assert reasoning["mode"] == "strip" and reasoning["removed"] is True
    first = reasoning["first_changed"]
    # The items before the first changed one come back as they were, reasoning included.
    assert compacted[:first] == request["input"][:first]
    assert request["input"][first] != compacted[first]
    assert any(item.get("type") == "reasoning" for item in compacted[:first])
    assert all(item.get("type") != "reasoning" for item in compacted[first:])
    assert [(e["message"], e["block"], e["kind"]) for e in reasoning["invalidated"]] == [
        (i, None, "reasoning") for i, item in enumerate(request["input"])
        if i > first and item.get("type") == "reasoning"]
    # Every call is still there with its output.
    calls = [item["call_id"] for item in compacted if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in compacted if item.get("type") == "function_call_output"]
    assert calls == outputs == [f"call_{i}" for i in range(6)]
    # keep leaves all six.
    kept = json.loads(compact_json(data, "openai-responses", 5000, reasoning="keep", **MASKING))
    assert [i["id"] for i in kept["input"] if i.get("type") == "reasoning"] == [
        f"rs_{i}" for i in range(6)]


@pytest.mark.parametrize("call", ["compact_json", "compact_json_with_report", "compact",
                                  "compact_batch", "compact_batch_with_reports"])
def test_an_unknown_reasoning_mode_is_format_unsupported(call: str):
    request = _thinking_request()
    with pytest.raises(FormatCompactionError) as e:
        if call == "compact":
            compact(request, "anthropic", 5000, reasoning="bogus")  # type: ignore[arg-type]
        elif call.startswith("compact_batch"):
            getattr(formats, call)([json.dumps(request)], "anthropic", 5000, reasoning="bogus")
        else:
            getattr(formats, call)(json.dumps(request), "anthropic", 5000, reasoning="bogus")
    assert e.value.code == "FORMAT_UNSUPPORTED"
    assert e.value.details == {"option": "reasoning"}


def test_a_batch_honours_reasoning_as_one_request_does():
    data = json.dumps(_thinking_request())
    requests = [data, data.encode()]
    for mode in ("strip", "keep"):
        alone, alone_report = compact_json_with_report(data, "anthropic", 5000, reasoning=mode,
                                                       **MASKING)
        out = formats.compact_batch(requests, "anthropic", 5000, reasoning=mode, **MASKING)
        assert out == [alone.decode().removesuffix("\n"), alone.removesuffix(b"\n")]
        outs, reports = formats.compact_batch_with_reports(
            requests, "anthropic", 5000, reasoning=mode, **MASKING)
        assert outs == out
        assert [r.encode() + b"\n" for r in reports if r is not None] == [alone_report] * 2
        compactor = formats.BatchCompactor("anthropic", 5000, column="t", reasoning=mode,
                                           report_column="r", **MASKING)
        got = compactor({"t": requests})
        assert got["t"] == out and got["r"] == reports
    stripped = json.loads(formats.compact_batch([data], "anthropic", 5000, **MASKING)[0])
    kept = json.loads(formats.compact_batch([data], "anthropic", 5000, reasoning="keep",
                                            **MASKING)[0])
    assert sum(len(_thinking_blocks(m)) for m in stripped["messages"]) < 6
    assert sum(len(_thinking_blocks(m)) for m in kept["messages"]) == 6
    # A request refused fails alone: it becomes None, as a batch's failures do.
    outs, reports = formats.compact_batch_with_reports(
        [data, '[{"role": "user", "content": "Hi"}]'], "anthropic", 5000, reasoning="refuse",
        **MASKING)
    assert outs[0] is None and reports[0] is None
    assert outs[1] == '[{"role": "user", "content": "Hi"}]' and reports[1] is not None


def test_the_reasoning_modes_are_the_typed_names():
    import inspect
    import typing

    assert typing.get_args(formats.Reasoning) == ("strip", "keep", "refuse")
    for name in ("compact", "compact_json", "compact_json_with_report", "compact_batch",
                 "compact_batch_with_reports"):
        parameter = inspect.signature(getattr(formats, name)).parameters["reasoning"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default == "strip", name
    assert formats.BatchCompactor("anthropic", 10).reasoning == "strip"


@needs_cli
@pytest.mark.parametrize("mode", ["strip", "keep", "refuse"])
def test_reasoning_gives_the_cli_bytes_report_and_error(mode: str, tmp_path: Path):
    for fmt, request in (("anthropic", _thinking_request()),
                         ("openai-responses", _responses_request())):
        path = tmp_path / "request.json"
        data = json.dumps(request).encode()
        path.write_bytes(data)
        for budget in (5000, 1_000_000):
            rfile = tmp_path / "report.json"
            rfile.unlink(missing_ok=True)
            _, out, error = cli(fmt, path, budget, "observation_masking", 4,
                                "--reasoning", mode, "--report", str(rfile))
            got, exc = ours(data, fmt, budget, "observation_masking", 4, reasoning=mode)
            case = (fmt, budget, mode)
            if error is not None:
                assert exc is not None, case
                assert (exc.code, exc.message, exc.details) == (
                    error["code"], error["message"], error["details"]), case
                continue
            assert exc is None, (case, exc)
            assert got == (out, rfile.read_bytes()), case
