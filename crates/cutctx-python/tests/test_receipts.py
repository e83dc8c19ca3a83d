"""cutctx.receipts against the CLI binary: ledgers written by either verify with the other."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from cutctx import receipts
from cutctx.receipts import ReceiptError

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("CUTCTX_BIN", ROOT / "target" / "release" / "cutctx"))

needs_cli = pytest.mark.skipif(
    not BIN.is_file(), reason=f"the CLI binary is not built ({BIN}): cargo build --release -p cutctx-cli"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, check=False)


def fields(pin: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in pin.split()[2:])


def three_rows(ledger: Path) -> list[dict]:
    rows = [
        receipts.seal(["sys", "q1", "a1", "q2"], ["sys", "q2"], ledger,
                      compactor="py/1", method="trim", dropped=["q1", "a1"]),
        receipts.seal([b"\x00\xffraw", {"turn": 1, "n": [1, 2.5]}], [{"turn": 1, "n": [1, 2.5]}],
                      ledger, compactor="py/1", method="mask"),
        receipts.seal(["é", "ü"], ["é"], ledger, compactor="py/2", method="drop"),
    ]
    return rows


@needs_cli
def test_a_ledger_appended_from_python_verifies_with_the_cli(tmp_path: Path):
    ledger = tmp_path / "receipts.jsonl"
    rows = three_rows(ledger)
    lines = ledger.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == rows
    run = cli("ledger", "verify", str(ledger))
    assert run.returncode == 0, run.stdout + run.stderr
    # The verdict is the CLI's, to the byte.
    assert receipts.verify(ledger).text + "\n" == run.stdout

    # A pin from Python holds for the CLI, and the CLI's pin names the same chain.
    pin = receipts.head(ledger)
    assert fields(pin)["rows"] == "3"
    cli_pin = cli("ledger", "head", str(ledger)).stdout.strip()
    assert fields(cli_pin)["chain"] == fields(pin)["chain"]
    pin_file = tmp_path / "pin.txt"
    pin_file.write_text(pin + "\n")
    assert cli("ledger", "verify", str(ledger), "--pin", str(pin_file)).returncode == 0

    # Content recomputed by the CLI from the items as Python wrote them.
    content = {"1": {"pre": ["sys", "q1", "a1", "q2"], "post": ["sys", "q2"]},
               "3": {"pre": ["é", "ü"], "post": ["é"]}}
    content_file = tmp_path / "content.json"
    content_file.write_text(json.dumps(content), encoding="utf-8")
    assert cli("ledger", "verify", str(ledger), "--content", str(content_file)).returncode == 0
    assert receipts.verify(ledger, content={int(k): v for k, v in content.items()}).ok


@needs_cli
def test_a_ledger_the_cli_wrote_verifies_from_python(tmp_path: Path):
    ledger = tmp_path / "cli.jsonl"
    pre, post = tmp_path / "pre.json", tmp_path / "post.json"
    pre.write_text('["a", "b", {"$b64": "AAE="}]')
    post.write_text('["b"]')
    run = cli("receipt", "seal", "--pre", str(pre), "--post", str(post), "--ledger", str(ledger),
              "--compactor", "cli", "--method", "m")
    assert run.returncode == 0, run.stderr
    row = receipts.seal(["a", "b", b"\x00\x01"], ["b"], ledger, compactor="cli", method="m")
    first = json.loads(ledger.read_text().splitlines()[0])
    # The same items, hashed the same way, whichever side sealed them.
    for key in ("pre", "post", "dropped"):
        if key in first:
            assert first[key] == row[key]
    assert receipts.verify(ledger).ok
    assert cli("ledger", "verify", str(ledger)).returncode == 0


@needs_cli
def test_a_truncated_or_edited_ledger_fails_on_both_sides(tmp_path: Path):
    ledger = tmp_path / "receipts.jsonl"
    three_rows(ledger)
    pin = receipts.head(ledger)
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)

    ledger.write_text("".join(lines[:2]), encoding="utf-8")
    verdict = receipts.verify(ledger, pin=pin)
    assert not verdict.ok
    pin_file = tmp_path / "pin.txt"
    pin_file.write_text(pin + "\n")
    run = cli("ledger", "verify", str(ledger), "--pin", str(pin_file))
    assert run.returncode == 1
    assert verdict.text + "\n" == run.stdout

    ledger.write_text(lines[0] + lines[1].replace('"mask"', '"MASK"') + lines[2], encoding="utf-8")
    assert not receipts.verify(ledger).ok
    assert cli("ledger", "verify", str(ledger)).returncode == 1
    with pytest.raises(ReceiptError) as info:
        receipts.head(ledger)
    assert info.value.code == "LEDGER_UNVERIFIED"


def test_concurrent_appends_keep_the_chain(tmp_path: Path):
    ledger = tmp_path / "receipts.jsonl"

    def work(k: int):
        for i in range(10):
            receipts.seal([f"{k}-{i}", "x"], ["x"], ledger, compactor=f"t{k}", method="m")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ledger.read_text().splitlines()) == 40
    assert receipts.verify(ledger).ok
    assert fields(receipts.head(ledger))["rows"] == "40"


def test_errors_carry_stable_codes(tmp_path: Path):
    ledger = tmp_path / "l.jsonl"
    with pytest.raises(ReceiptError) as info:
        receipts.seal(["a", "b"], ["a"], ledger, compactor="c", method="m", dropped=["a"])
    assert info.value.code == "RECEIPT_CLAIM_MISMATCH"
    assert not ledger.exists(), "nothing is written when the claim disagrees"

    with pytest.raises(ReceiptError) as info:
        receipts.seal([float("nan")], [], ledger, compactor="c", method="m")
    assert info.value.code == "RECEIPT_CONTENT_INVALID"

    with pytest.raises(ReceiptError) as info:
        receipts.verify(tmp_path)
    assert info.value.code == "INPUT_ERROR"
    assert info.value.details["document"] == "the ledger"

    with pytest.raises(ReceiptError) as info:
        receipts.head(tmp_path)
    assert info.value.code == "INPUT_ERROR"

    with pytest.raises(ReceiptError) as info:
        receipts.verify(ledger, pin="not a pin")
    assert info.value.details["document"] == "the pin"

    assert receipts.head(ledger).split()[2] == "chain=genesis"
