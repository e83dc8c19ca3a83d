#!/usr/bin/env python3
"""Hold a ledger written by cutctx to arcaeon's own verifier (arcaeon 0.10.0, from PyPI).

Run inside a virtual environment where `arcaeon==0.10.0` is installed (see
arcaeon-check.sh). Subcommands:

  verify LEDGER CONTENT [PIN]
      arcaeon's `verify_file` must say ok=True with scope "full"; `verify_receipt` with both
      sides of the content must say ok, content "match", scope "full" and no notes on EVERY
      receipt row (a receipt row without content fails); with PIN (a line as `cutctx ledger
      head` prints it), `chain_at(LEDGER, rows)` must equal its chain and the ledger must hold
      at least its rows. Prints a JSON report; exits 1 on any failure.

  compaction-content CONTENT LINE REQUEST OUTPUT
      Adds to the content map CONTENT (created if missing) the content behind a
      `cutctx compact --ledger` receipt on LINE: the request's turns with their defaults
      filled in (pre) and the output's transcript (post).

  items-content CONTENT LINE PRE POST
      Adds PRE and POST (JSON arrays of items, as `cutctx receipt seal` reads them) under LINE.

  append LEDGER CONTENT N
      Appends N rows with arcaeon's own writer: receipts sealed by `CompactionReceipt` over
      mixed content (recorded in CONTENT under their lines) alternating with plain rows.

  flood LEDGER N
      Appends N plain rows with arcaeon's `Ledger.append` (for the concurrent-writer check).

Content maps follow the conformance sample's convention: a bytes item is {"$b64": ...}.
"""
from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from arcaeon.prove.compact import CompactionReceipt, verify_receipt
from arcaeon.record.ledger import Ledger, chain_at, verify_file

TURN_DEFAULTS = {"content": "", "tool_call_id": None, "pinned": False, "metadata": {}}


def decode_item(item):
    if isinstance(item, dict) and len(item) == 1 and isinstance(item.get("$b64"), str):
        return base64.b64decode(item["$b64"], validate=True)
    return item


def encode_item(item):
    if isinstance(item, (bytes, bytearray)):
        return {"$b64": base64.b64encode(bytes(item)).decode("ascii")}
    return item


def load_json(path: str):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def load_content(path: str) -> dict:
    p = Path(path)
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def save_content(path: str, content: dict) -> None:
    Path(path).write_text(json.dumps(content, ensure_ascii=False, indent=1), encoding="utf-8")


def rows_with_lines(ledger: str):
    lines = Path(ledger).read_text(encoding="utf-8", errors="replace").split("\n")
    for i, raw in enumerate(lines, 1):
        raw = raw.strip()
        if raw:
            yield i, json.loads(raw)


def is_receipt(row) -> bool:
    return isinstance(row, dict) and (
        row.get("kind") == "compaction_receipt"
        or str(row.get("schema", "")).startswith("arcaeon-compact:receipt:"))


def cmd_verify(ledger: str, content_path: str, pin_path: str | None = None) -> int:
    failures: list[str] = []
    v = verify_file(ledger, strict=True)
    report = {"verify_file": dict(v.__dict__), "receipts": [], "pin": None}
    if v.ok is not True or v.verified_scope != "full":
        failures.append(f"verify_file: ok={v.ok} scope={v.verified_scope} "
                        f"first_break={v.first_break}")
    content = load_content(content_path)
    receipts = 0
    for line, row in rows_with_lines(ledger):
        if not is_receipt(row):
            continue
        receipts += 1
        side = content.get(str(line))
        if side is None:
            failures.append(f"line {line}: receipt row without content; cannot verify in full")
            continue
        pre = [decode_item(x) for x in side["pre"]]
        post = [decode_item(x) for x in side["post"]]
        out = verify_receipt(row, pre, post)
        report["receipts"].append({"line": line, **out})
        if not (out["ok"] and out["content"] == "match" and out["verified_scope"] == "full"
                and out["notes"] == []):
            failures.append(f"line {line}: verify_receipt {out}")
        bare = verify_receipt(row)
        if not bare["ok"]:
            failures.append(f"line {line}: verify_receipt without content {bare}")
    if receipts == 0:
        failures.append("no receipt rows in the ledger")
    if pin_path:
        fields = dict(part.split("=", 1) for part in
                      Path(pin_path).read_text(encoding="utf-8").split()[2:])
        rows, chain = int(fields["rows"]), fields["chain"]
        at = chain_at(ledger, rows)
        head = Ledger(ledger).head()
        report["pin"] = {"rows": rows, "chain": chain, "chain_at": at, "head_rows": head.rows}
        if at != chain or head.rows < rows:
            failures.append(f"pin: chain_at({rows}) = {at!r}, pinned {chain!r}; "
                            f"head rows {head.rows}")
    report["failures"] = failures
    report["receipt_rows"] = receipts
    print(json.dumps(report, ensure_ascii=False, indent=1, default=str))
    if failures:
        print(f"arcaeon check FAILED: {len(failures)} problem(s)", file=sys.stderr)
        for f in failures:
            print(f"  - {f}", file=sys.stderr)
        return 1
    print(f"arcaeon check passed: {v.rows} rows, {receipts} receipts verified in full",
          file=sys.stderr)
    return 0


def cmd_compaction_content(content_path: str, line: str, request: str, output: str) -> int:
    req = load_json(request)
    out = load_json(output)
    pre = []
    for turn in req["transcript"]:
        full = dict(TURN_DEFAULTS)
        full.update(turn)
        pre.append(full)
    content = load_content(content_path)
    content[str(int(line))] = {"pre": pre, "post": out["transcript"]}
    save_content(content_path, content)
    return 0


def cmd_items_content(content_path: str, line: str, pre: str, post: str) -> int:
    content = load_content(content_path)
    content[str(int(line))] = {"pre": load_json(pre), "post": load_json(post)}
    save_content(content_path, content)
    return 0


def count_lines(ledger: str) -> int:
    return len(Path(ledger).read_text(encoding="utf-8").split("\n")) - 1


def cmd_append(ledger: str, content_path: str, n: str) -> int:
    content = load_content(content_path)
    led = Ledger(ledger)
    for i in range(int(n)):
        if i % 2 == 0:
            pre = [f"arcaeon turn {i}", b"\x00\xffraw", {"k": [1.5, -0.0, 2 ** 70], "s": "é😀"},
                   f"arcaeon turn {i}", 7]
            post = [f"arcaeon turn {i}", f"summary {i} ✓"]
            r = CompactionReceipt.open(pre)
            r.record_kept(post)
            r.seal(ledger, compactor="arcaeon-writer", method="llm-summary")
            content[str(count_lines(ledger))] = {
                "pre": [encode_item(x) for x in pre], "post": [encode_item(x) for x in post]}
        else:
            led.append({"tool": "arcaeon", "i": i, "note": "plain row"})
    save_content(content_path, content)
    return 0


def cmd_flood(ledger: str, n: str) -> int:
    led = Ledger(ledger)
    for i in range(int(n)):
        led.append({"writer": "arcaeon", "i": i, "pad": "q" * (i * 97 % 5000)})
    return 0


def main(argv: list[str]) -> int:
    commands = {
        "verify": (cmd_verify, (2, 3)),
        "compaction-content": (cmd_compaction_content, (4, 4)),
        "items-content": (cmd_items_content, (4, 4)),
        "append": (cmd_append, (3, 3)),
        "flood": (cmd_flood, (2, 2)),
    }
    if not argv or argv[0] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    fn, (lo, hi) = commands[argv[0]]
    args = argv[1:]
    if not lo <= len(args) <= hi:
        print(f"{argv[0]}: expected {lo}..{hi} arguments", file=sys.stderr)
        return 2
    return fn(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
