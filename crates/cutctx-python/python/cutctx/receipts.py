"""Compaction receipts and their ledger: seal, verify, pin.

A compaction destroys context; a receipt attests to what went in (``pre``), what came out
(``post``) and what was dropped, and is chained into an append-only JSONL ledger in arcaeon
0.10.0's format. These are the CLI's ``receipt seal``, ``ledger verify`` and ``ledger head``:
a ledger appended here verifies with ``cutctx ledger verify``, and the other way round.

An item is hashed by what it is: a ``str`` as its UTF-8, ``bytes`` as themselves, anything
else JSON-able as its canonical JSON (json-c14n).

>>> import pathlib, tempfile
>>> from cutctx import receipts
>>> ledger = pathlib.Path(tempfile.mkdtemp()) / "receipts.jsonl"
>>> row = receipts.seal(["a", "b", b"\\x00"], ["b"], ledger, compactor="me/1", method="trim")
>>> row["compactor"], len(ledger.read_text().splitlines())
('me/1', 1)
>>> receipts.verify(ledger).ok
True
>>> receipts.head(ledger).startswith("arcaeon-ledger head chain=")
True

Failures raise :class:`ReceiptError` with the CLI's stable code (``RECEIPT_*`` for a document
that cannot be receipted or a claim that disagrees, ``LEDGER_*`` for the file, ``INPUT_ERROR``
for a ledger that cannot be read) and ``details`` naming ids and figures.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cutctx._core import receipts as _core

__all__ = ["ReceiptError", "Verdict", "head", "seal", "verify"]

ReceiptError = _core.ReceiptError
"""A receipt that cannot be sealed, or a ledger that cannot be read or pinned."""

StrPath = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of :func:`verify`.

    Attributes:
        ok: Whether everything that was checked holds (the CLI's exit status 0).
        report: The CLI's JSON verdict: what was checked, and every failure with its line and
            code.
        text: The same verdict as the CLI prints it: canonical JSON, without the newline.
    """

    ok: bool
    report: dict[str, Any]
    text: str


def seal(
    pre: Iterable[Any],
    post: Iterable[Any],
    ledger: StrPath,
    *,
    compactor: str,
    method: str,
    dropped: Iterable[Any] | None = None,
) -> dict[str, Any]:
    """Receipt ``pre`` → ``post`` and append the receipt to ``ledger``.

    Args:
        pre: The items before compaction.
        post: The items after it.
        ledger: The JSONL ledger, created when missing; appended under its lock.
        compactor: Who compacted (for example ``"my-agent/2.1"``).
        method: How (for example ``"cutctx:default_chain@1"``).
        dropped: The caller's claim of what was dropped, checked against ``pre`` and ``post``
            before anything is written (``RECEIPT_CLAIM_MISMATCH`` when it disagrees).

    Returns:
        The row as written to the ledger.

    Raises:
        ReceiptError: Nothing was written.

    >>> import pathlib, tempfile
    >>> ledger = pathlib.Path(tempfile.mkdtemp()) / "l.jsonl"
    >>> try:
    ...     seal(["a", "b"], ["a"], ledger, compactor="me", method="m", dropped=["a"])
    ... except ReceiptError as e:
    ...     (e.code, ledger.exists())
    ('RECEIPT_CLAIM_MISMATCH', False)
    """
    line = _core.seal(
        _items(pre),
        _items(post),
        os.fspath(ledger),
        compactor,
        method,
        None if dropped is None else _items(dropped),
    )
    return json.loads(line)


def verify(
    ledger: StrPath,
    *,
    pin: str | None = None,
    content: Mapping[int, Mapping[str, Iterable[Any]]] | None = None,
    strict: bool = False,
) -> Verdict:
    """Verify a ledger's chain and receipts, as ``cutctx ledger verify`` does.

    Args:
        ledger: The JSONL ledger.
        pin: A pin line from :func:`head` (or the CLI's ``ledger head``): a ledger cut short
            after the pin was taken fails against it.
        content: Maps a row's line number to ``{"pre": [...], "post": [...]}``, so that every
            digest of that receipt is recomputed.
        strict: The CLI's ``--strict``.

    Returns:
        A :class:`Verdict`; a ledger that does not verify is a verdict, not an exception.

    Raises:
        ReceiptError: ``INPUT_ERROR`` when the ledger cannot be read; the pin's or the content
            map's own code when one is malformed.

    >>> import pathlib, tempfile
    >>> ledger = pathlib.Path(tempfile.mkdtemp()) / "l.jsonl"
    >>> _ = seal(["a", "b"], ["b"], ledger, compactor="me", method="m")
    >>> verify(ledger, content={1: {"pre": ["a", "b"], "post": ["b"]}}).ok
    True
    >>> verify(ledger, content={1: {"pre": ["a", "c"], "post": ["b"]}}).ok
    False
    """
    content_text = None
    if content is not None:
        content_text = json.dumps(
            {
                str(line): {side: _plain(list(items)) for side, items in sides.items()}
                for line, sides in content.items()
            },
            ensure_ascii=False,
            allow_nan=False,
        )
    status, text = _core.verify(os.fspath(ledger), pin, content_text, strict)
    return Verdict(ok=status == 0, report=json.loads(text), text=text)


def head(ledger: StrPath) -> str:
    """The ledger's pin: ``arcaeon-ledger head chain=… rows=… as_of=…`` (no newline).

    A missing or empty ledger pins as ``genesis`` at 0 rows.

    Raises:
        ReceiptError: ``LEDGER_UNVERIFIED`` when the ledger does not verify (a pin over a
            broken chain would be a false claim); ``INPUT_ERROR`` when it cannot be read.

    >>> import pathlib, tempfile
    >>> head(pathlib.Path(tempfile.mkdtemp()) / "none.jsonl").split()[2]
    'chain=genesis'
    """
    return _core.head(os.fspath(ledger))


def _plain(items: list[Any]) -> list[Any]:
    """Items as the CLI's documents spell them: bytes become ``{"$b64": ...}``."""
    return [
        {"$b64": base64.b64encode(bytes(i)).decode("ascii")}
        if isinstance(i, bytes | bytearray | memoryview)
        else i
        for i in items
    ]


def _items(items: Iterable[Any]) -> str:
    try:
        return json.dumps(_plain(list(items)), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        err = ReceiptError(f"an item cannot be written as JSON ({type(e).__name__}).")
        err.code = "RECEIPT_CONTENT_INVALID"
        err.message = str(err)
        err.details = {"kind": type(e).__name__}
        raise err from e
