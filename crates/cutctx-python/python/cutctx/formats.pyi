from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["openai-chat", "openai-responses", "anthropic"]
Policy = Literal["drop_oldest", "observation_masking", "summarizing", "default_chain"]
Reasoning = Literal["strip", "keep", "refuse"]
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
    prompt: dict[str, Any] | None = None
    repairs: list[dict[str, Any]] | None = None
    reasoning: dict[str, Any] | None = None

def compact(
    request: Mapping[str, Any] | list[Any],
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
) -> CompactedRequest: ...
def compact_json(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
) -> bytes: ...
def compact_json_with_report(
    data: bytes | str,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: Summarize | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    reasoning: Reasoning = "strip",
) -> tuple[bytes, bytes]: ...
def estimate_json(
    data: bytes | str,
    format: Format,
    *,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
) -> bytes: ...
def estimate(
    request: Mapping[str, Any] | list[Any] | bytes | str,
    format: Format,
    *,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
) -> dict[str, Any]: ...
def compact_batch_with_reports(
    requests: Any,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    jobs: int | None = None,
    reasoning: Reasoning = "strip",
) -> tuple[Any, list[str | None]]: ...
def compact_batch(
    requests: Any,
    format: Format,
    max_tokens: int,
    *,
    protected_recent_turns: int = 4,
    policy: Policy | str | None = None,
    prompt_id: str | None = None,
    estimator: str | None = None,
    reserve_output: int | None = None,
    repair: bool = False,
    jobs: int | None = None,
    reasoning: Reasoning = "strip",
) -> Any: ...
@dataclass(frozen=True, slots=True)
class BatchCompactor:
    format: Format
    max_tokens: int
    column: str = "request"
    protected_recent_turns: int = 4
    policy: Policy | str | None = None
    prompt_id: str | None = None
    estimator: str | None = None
    reserve_output: int | None = None
    repair: bool = False
    report_column: str | None = None
    reasoning: Reasoning = "strip"
    def compact(self, requests: Any) -> Any: ...
    def compact_with_reports(self, requests: Any) -> tuple[Any, list[str | None]]: ...
    def __call__(self, batch: Any) -> Any: ...
    def map_in_pandas(self, frames: Iterable[Any]) -> Iterator[Any]: ...
