"""One request's measurements (:class:`RequestRecord`), kept per request so a gate can explain itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.redaction import clean_text, scrub

#: Error kinds a request can fail with (``LoadResult.errors`` counts them).
ERROR_KINDS = {
    "http": "non-200 HTTP status (kind is http_<status>)",
    "stream_error": "an error object inside a 200 stream",
    "abort": "finish_reason type abort",
    "truncated": "stream cut off: no [DONE] or no finish_reason",
    "no_tokens": "the stream produced no token text",
    "token_count": "a different number of tokens than asked for, with ignore_eos",
    "token_mismatch": "the server's completion_tokens disagrees with the tokens that arrived",
    "protocol": "the stream broke SSE/SGLang rules (data after [DONE], an oversized line, ...)",
    "timeout": "no complete answer within request_timeout_s, or cut off by load_timeout_s",
    "refused": "connection refused: nothing listened at the URL (the server died or restarted)",
    "connection": "could not connect or send the request",
}
#: Longest error text kept per request (server-provided bodies can be anything).
MAX_ERROR_CHARS = 500


@dataclass(slots=True)
class RequestRecord:
    """One request's outcome and timings, in seconds.

    Slots, not a ``__dict__``: a load keeps up to ``max_records`` of these, and the dict was most of
    a record's size (the ``load`` command at 20,000 requests held 1.63x the memory of 200).

    ``start`` is measured from the start of the run on a clock common to all client processes.
    Definitions are SGLang bench_serving's (see :mod:`pytest_sglang.loadgen.measure.stats`).
    """

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
    #: Prompt tokens: the server's count once it reports one, else the client's (``sent_prompt_len``).
    prompt_len: int = 0
    #: Prompt tokens the client meant to send (exact for token ids; see :mod:`.tokencount`).
    sent_prompt_len: int = 0
    #: ``meta_info.prompt_tokens`` / ``usage.prompt_tokens`` as the server reported it; None = not reported.
    server_prompt_len: int | None = None
    expected_output_len: int = 0
    #: Images sent with the prompt (image datasets); 0 for text.
    images: int = 0
    #: The server's own count of the prompt's image tokens (``meta_info.image_tokens``, OpenAI
    #: ``usage.prompt_tokens_details.image_tokens``); None = not reported.
    image_tokens: int | None = None
    chunks: int = 0
    #: The server's request id (``meta_info.id`` / chunk ``id``), to find the request in server logs.
    rid: str | None = None
    #: Prompt tokens the server took from its prefix cache, as it reports them (``meta_info.cached_tokens``;
    #: OpenAI ``usage.prompt_tokens_details.cached_tokens`` with ``--enable-cache-report``); None = not reported.
    cached_tokens: int | None = None
    #: Trace replay: when the trace says to send it (seconds from the start of the run, scaled); the
    #: send's timing error is ``start - scheduled``. None for other loads.
    scheduled: float | None = None
    error: str | None = None
    error_kind: str | None = None
    #: The client went away on purpose mid-answer (``LoadSpec.cancel_rate``): neither a success nor a failure.
    cancelled: bool = False

    @property
    def success(self) -> bool:
        """Whether the request completed without a failure (a cancelled one did not complete)."""
        return self.error_kind is None and not self.cancelled

    def fail(self, kind: str, error: str) -> None:
        """Record the first failure only: later symptoms follow from it.

        The text may come from the server: secrets are masked, escape sequences and control
        characters removed (they would reach the terminal) and the length bounded.
        """
        if self.error_kind is None:
            self.error_kind = kind
            self.error = one_line(error)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """A record read back from :meth:`to_dict` data; unknown keys are ignored."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def one_line(text: str) -> str:
    """``text`` made safe for a one-line message: scrubbed, cleaned, whitespace folded, bounded."""
    flat = " ".join(clean_text(scrub(text)).split())
    return flat if len(flat) <= MAX_ERROR_CHARS else flat[: MAX_ERROR_CHARS - 3] + "..."
