"""cutctx.formats.compact_batch and BatchCompactor: each output is the single-request one."""

from __future__ import annotations

import json
import pickle

import pytest

from cutctx.formats import BatchCompactor, compact_batch, compact_batch_with_reports, compact_json


def request(seed: int, rounds: int) -> str:
    messages: list[dict[str, object]] = [{"role": "system", "content": f"Agent {seed}."}]
    for r in range(rounds):
        call = f"call_{seed}_{r}"
        messages += [
            {"role": "user", "content": f"Step {r}."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": "z" * (300 + 50 * seed)},
            {"role": "assistant", "content": f"Done {r}."},
        ]
    return json.dumps({"model": "gpt-4o", "messages": messages})


REQUESTS = [request(i, 1 + i % 5) for i in range(12)]


def test_each_output_is_compact_json_of_its_request_and_failures_are_none() -> None:
    batch = [*REQUESTS[:5], "{not json", *REQUESTS[5:]]
    out = compact_batch(batch, "openai-chat", 400, policy="observation_masking")
    assert len(out) == len(batch)
    assert out[5] is None
    for text, got in zip(batch, out, strict=True):
        if got is None:
            continue
        want = compact_json(text, "openai-chat", 400, policy="observation_masking")
        assert got.encode() + b"\n" == want
    assert any(o != t for o, t in zip(out, batch, strict=True) if o is not None)


def test_bytes_stay_bytes() -> None:
    out = compact_batch([r.encode() for r in REQUESTS[:3]], "openai-chat", 10_000)
    assert out == [r.encode() for r in REQUESTS[:3]]


def test_the_compactor_pickles_and_compacts_a_mapping_of_columns() -> None:
    compactor = pickle.loads(
        pickle.dumps(BatchCompactor("openai-chat", 400, column="text", policy="drop_oldest"))
    )
    got = compactor({"text": REQUESTS, "id": list(range(len(REQUESTS)))})
    assert got["id"] == list(range(len(REQUESTS)))
    assert got["text"] == compact_batch(REQUESTS, "openai-chat", 400, policy="drop_oldest")


def test_pyarrow_and_pandas_columns_come_back_as_such() -> None:
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    want = compact_batch(REQUESTS, "openai-chat", 400, policy="drop_oldest")
    array = compact_batch(pa.array(REQUESTS), "openai-chat", 400, policy="drop_oldest")
    assert array.to_pylist() == want
    series = pd.Series(REQUESTS, index=range(10, 22), name="r")
    out = compact_batch(series, "openai-chat", 400, policy="drop_oldest")
    assert list(out) == want and list(out.index) == list(range(10, 22)) and out.name == "r"
    frames = BatchCompactor("openai-chat", 400, column="r", policy="drop_oldest").map_in_pandas(
        [series.to_frame()]
    )
    assert list(next(iter(frames))["r"]) == want


def test_a_report_column_comes_beside_the_compacted_one_in_every_batch_kind() -> None:
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    compactor = BatchCompactor("openai-chat", 400, column="r", policy="drop_oldest",
                               report_column="report")
    want, reports = compact_batch_with_reports(REQUESTS, "openai-chat", 400, policy="drop_oldest")
    assert all(r is not None for r in reports)
    table = compactor(pa.table({"r": REQUESTS}))
    assert table.column("r").to_pylist() == want
    assert table.column("report").to_pylist() == reports
    frame = compactor(pd.DataFrame({"r": REQUESTS}))
    assert list(frame["r"]) == want and list(frame["report"]) == reports
    assert pickle.loads(pickle.dumps(compactor)) == compactor
