from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["openai-chat", "openai-responses", "anthropic"]
Policy = Literal["drop_oldest", "observation_masking", "summarizing", "default_chain"]
Summarize = Callable[[dict[str, Any]], str]

DEFAULT_PROMPT_ID: str
FORMATS: tuple[str, ...]
POLICIES: tuple[str, ...]

class FormatCompactionError(Exception):
    code: str
    message: str
    details: dict[str, Any]

@dataclass(frozen=True, slots=True)
class CompactedRequest:
    request: Any
    plan: dict[str, Any]
    report: dict[str, Any]

def compact(
    request: Mapping[str, Any] | list[Any],
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> CompactedRequest: ...
def compact_json(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> bytes: ...
def compact_json_with_report(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy = "default_chain",
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
) -> tuple[bytes, bytes]: ...
