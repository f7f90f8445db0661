"""One request's measurements (:class:`RequestRecord`), kept per request so a gate can explain itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: Error kinds a request can fail with (``LoadResult.errors`` counts them).
ERROR_KINDS = {
    "http": "non-200 HTTP status (kind is http_<status>)",
    "stream_error": "an error object inside a 200 stream",
    "abort": "finish_reason type abort",
    "truncated": "stream cut off: no [DONE] or no finish_reason",
    "no_tokens": "the stream produced no token text",
    "token_count": "a different number of tokens than asked for, with ignore_eos",
    "timeout": "no complete answer within the per-request timeout",
    "connection": "could not connect or send the request",
}


@dataclass
class RequestRecord:
    """Times are seconds; ``start`` is measured from the start of the run on a clock common to all
    client processes. Definitions are SGLang bench_serving's (see :mod:`pytest_sglang.loadgen.stats`)."""

    index: int
    start: float = 0.0
    #: The same moment as ``start`` on the wall clock (``time.time()`` seconds since the epoch), so
    #: a record can be matched with server-side timestamps (``--sim-trace``, server logs). The
    #: receive time of the first token is ``start_time + ttft``; of later tokens, add ``itl``.
    start_time: float = 0.0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    #: End-to-end latency: time of the last line received, including ``[DONE]``.
    e2e: float = 0.0
    #: Output tokens as counted by the server (meta_info.completion_tokens / usage.completion_tokens).
    output_len: int = 0
    prompt_len: int = 0
    expected_output_len: int = 0
    chunks: int = 0
    #: The server's request id (``meta_info.id`` / chunk ``id``), to find the request in server logs.
    rid: str | None = None
    error: str | None = None
    error_kind: str | None = None

    @property
    def success(self) -> bool:
        return self.error_kind is None

    def fail(self, kind: str, error: str) -> None:
        """Record the first failure only: later symptoms follow from it."""
        if self.error_kind is None:
            self.error_kind = kind
            self.error = error

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def describe_exc(exc: BaseException) -> str:
    """The root cause of a transport error in a few words.

    httpx_aiohttp maps aiohttp errors onto httpx types loosely (a refused connection surfaces as
    ``httpx.ConnectTimeout``), so the message is built from the innermost cause instead.
    """
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    os_error = getattr(root, "os_error", None)
    if isinstance(root, ConnectionRefusedError) or isinstance(os_error, ConnectionRefusedError):
        return f"connection refused ({root})"
    text = str(root)
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def is_timeout(exc: BaseException) -> bool:
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return isinstance(root, TimeoutError) or type(root).__name__ in (
        "ServerTimeoutError",
        "SocketTimeoutError",
    )
