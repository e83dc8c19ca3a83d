import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

StrPath = str | os.PathLike[str]

class ReceiptError(Exception):
    code: str
    message: str
    details: dict[str, Any]

@dataclass(frozen=True, slots=True)
class Verdict:
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
) -> dict[str, Any]: ...
def verify(
    ledger: StrPath,
    *,
    pin: str | None = None,
    content: Mapping[int, Mapping[str, Iterable[Any]]] | None = None,
    strict: bool = False,
) -> Verdict: ...
def head(ledger: StrPath) -> str: ...
