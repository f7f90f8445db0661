"""SSE stream readers per API, measuring as SGLang bench_serving does (bodies: :mod:`.bodies`).

Pure: a reader is fed ``(timestamp, payload)`` for every ``data:`` line and fills a
:class:`RequestRecord`. ``timestamp`` is seconds on the caller's clock; ``start`` is when the request
was sent. Integrity is judged in :meth:`StreamReader.finish`: besides bench_serving's checks, the
tokens that arrived are counted (``output_ids`` on /generate, ``token_ids`` on /v1/completions when
the server sends them, else text chunks) and must agree with the count the server claims. Every
chunk is untrusted JSON: a shape the reader does not expect fails the request, never the run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.loadgen.prompts.bodies import PATHS, request_body

__all__ = ["PATHS", "NativeReader", "OpenAIReader", "StreamReader", "make_reader", "request_body"]

def _error_text(err: object) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def _obj(value: object) -> dict[str, Any]:
    """A JSON object from an untrusted chunk, or an empty one when the value is anything else."""
    return value if isinstance(value, dict) else {}


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class StreamReader:
    """Measures one streaming response. Subclasses read one API's chunk shape.

    ``stop`` turns true when reading on is pointless or unsafe (data after ``[DONE]``, far more
    tokens than asked for): the client then closes the stream.
    """

    def __init__(self, record: RequestRecord, start: float, ignore_eos: bool) -> None:
        self.record = record
        self.start = start
        self.ignore_eos = ignore_eos
        self.done = False
        self.stop = False
        self.finish_reason: object = None
        self.first: float | None = None
        self.last_token_t = 0.0
        self.last_line_t = start
        self.usage_seen = False
        #: Chunks that carried new text (what arrived, when the API gives no token ids).
        self.text_chunks = 0
        # A server may send at most max_new_tokens; far beyond, its counts are not to be trusted
        # with memory (one ITL entry per token).
        self.limit = 2 * record.expected_output_len + 64

    def feed(self, t: float, payload: bytes) -> None:
        if self.done:
            self.violate(f"data after [DONE]: {payload[:80]!r}")
            return
        self.last_line_t = t
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            data = json.loads(payload)
        except ValueError:
            self.record.fail("stream_error", f"unparsable stream line {payload[:120]!r}")
            return
        self.record.chunks += 1
        if not isinstance(data, dict):
            self.violate(f"a stream chunk is not a JSON object: {payload[:80]!r}")
            return
        if "error" in data:
            self.record.fail("stream_error", _error_text(data["error"]))
            return
        self.on_chunk(t, data)

    def violate(self, what: str) -> None:
        """A protocol violation: fail the request and stop reading."""
        self.record.fail("protocol", what)
        self.stop = True

    def on_chunk(self, t: float, data: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def token_text(self, t: float) -> bool:
        """A chunk with text arrived at ``t``: TTFT on the first; returns False on the first."""
        self.text_chunks += 1
        if self.text_chunks > self.limit:
            self.violate(f"more than {self.limit} chunks with text for max tokens {self.record.expected_output_len}")
        if self.first is None:
            self.first = t
            self.record.ttft = t - self.start
            self.last_token_t = t
            return False
        return True

    def tokens_arrived(self) -> int:
        """Tokens received so far (what a cancelled request counts before it goes away).

        The server's running count where the API sends one (``/generate``'s ``completion_tokens``), else
        the chunks with text (a model whose tokens decode to no text sends few of those).
        """
        return max(self.text_chunks, self.record.output_len)

    def finish(self, end: float | None = None) -> RequestRecord:
        """Close the measurement: e2e, then integrity (first failure wins)."""
        rec = self.record
        rec.e2e = (self.last_line_t if end is None else end) - self.start
        if not self.done:
            rec.fail(
                "truncated",
                f"stream ended without [DONE] after {rec.output_len} tokens ({rec.chunks} chunks)",
            )
        elif self.finish_reason is None:
            rec.fail("truncated", f"stream ended without a finish_reason after {rec.output_len} tokens")
        if self.first is None:
            rec.fail("no_tokens", "the stream produced no token text")
        self.check_count()
        self.check_arrived()
        return rec

    def check_count(self) -> None:
        rec = self.record
        if self.ignore_eos and rec.output_len != rec.expected_output_len:
            rec.fail(
                "token_count",
                f"got {rec.output_len} tokens, asked for {rec.expected_output_len} with ignore_eos",
            )

    def check_arrived(self) -> None:
        """Check text chunks against claimed tokens when the stream carries no token ids.

        A chunk carries at least one new token, so more text chunks than claimed tokens cannot be (fewer
        can: tokens coalesce, partial characters are held back).
        """
        claimed = self.record.output_len
        if self.text_chunks > claimed:
            self.record.fail(
                "token_mismatch",
                f"server claimed {claimed} tokens, {self.text_chunks} chunks with new text arrived",
            )


_TOKENS_KEY = b'"completion_tokens":'
_TEXT_START = b'{"text":"'
_RUNNING = b'"finish_reason":null'
_IDS_KEY = b'"output_ids":['
_DIGITS = re.compile(rb"[0-9]+")


class NativeReader(StreamReader):
    """``/generate``: cumulative text; ITL = chunk gap spread evenly over the new tokens.

    ``output_ids`` must agree with the claimed ``completion_tokens``: in SGLang's default cumulative
    stream the last chunk holds them all, with ``--incremental-streaming-output`` their sum does. The
    first two chunks with new tokens tell the modes apart; a cumulative stream's ids are then counted
    in its last chunk only (counting every chunk would cost a quarter of the client's time).
    """

    last_n = 0
    ids_last = -1
    ids_sum = 0
    #: "cumulative" or "incremental" once told apart, "inconsistent" when neither fits, "" before.
    ids_mode = ""

    def feed(self, t: float, payload: bytes) -> None:
        # Fast path for the bulk of a cumulative stream: a running chunk (finish_reason null) after
        # the first token needs only its token count, and the cumulative text makes every chunk
        # longer, so a full JSON parse per chunk would dominate the client's CPU. Inside JSON strings
        # quotes are escaped, so these unescaped byte patterns can only be keys; anything unexpected
        # (other key order, an error object, the final chunk) takes the full parse.
        if not self.done and self.first is not None and payload.startswith(_TEXT_START) and _RUNNING in payload:
            at = payload.rfind(_TOKENS_KEY)
            digits = _DIGITS.match(payload, at + len(_TOKENS_KEY)) if at > 0 else None
            if digits is not None and payload[at - 1 : at] in (b",", b"{"):
                self.last_line_t = t
                self.record.chunks += 1
                n = int(digits.group())
                if self.ids_mode != "cumulative":
                    self._ids(_count_ids(payload), n)
                self._tokens(t, n, payload[9:10] != b'"')
                return
        super().feed(t, payload)

    def on_chunk(self, t: float, data: dict[str, Any]) -> None:
        meta = _obj(data.get("meta_info"))
        if self.record.rid is None and "id" in meta:
            self.record.rid = str(meta["id"])[:100]
        fr = meta.get("finish_reason")
        if fr is not None:
            self.finish_reason = fr
            if isinstance(fr, dict) and fr.get("type") == "abort":
                self.record.fail("abort", str(fr.get("message") or fr))
        n = _count(meta.get("completion_tokens"))
        prompt_tokens = _count(meta.get("prompt_tokens"))
        if prompt_tokens is not None:
            self.record.prompt_len = self.record.server_prompt_len = prompt_tokens
        cached = _count(meta.get("cached_tokens"))
        if cached is not None:
            self.record.cached_tokens = cached
        image_tokens = _count(meta.get("image_tokens"))
        if image_tokens is not None:
            self.record.image_tokens = image_tokens
        ids = data.get("output_ids")
        if isinstance(ids, list):
            self._ids(len(ids), n)
        self._tokens(t, n, bool(data.get("text")))

    def _ids(self, count: int | None, n: int | None) -> None:
        """Note a chunk's id count (before ``_tokens`` moves ``last_n`` to its token count ``n``)."""
        if count is None:
            return
        self.ids_last = count
        self.ids_sum += count
        if not self.ids_mode and n is not None and 0 < self.last_n < n:
            cumulative, incremental = count == n, count == n - self.last_n
            self.ids_mode = "cumulative" if cumulative else "incremental" if incremental else "inconsistent"

    def _tokens(self, t: float, n: int | None, has_text: bool) -> None:
        if n is not None:
            self.record.output_len = n
        if not has_text:
            return
        count = n if n is not None else self.last_n + 1
        if count > self.limit:
            self.violate(f"server claimed {count} tokens, asked for at most {self.record.expected_output_len}")
            return
        if self.token_text(t):
            new = count - self.last_n
            if new <= 0:  # bench_serving skips chunks without new tokens (and keeps the old time)
                return
            gap = (t - self.last_token_t) / new
            self.record.itl.extend([gap] * new)
            self.last_token_t = t
        self.last_n = count

    def check_arrived(self) -> None:
        if self.ids_last < 0:  # no output_ids at all (not SGLang's /generate): count chunks instead
            super().check_arrived()
            return
        claimed = self.record.output_len
        arrived = self.ids_sum if self.ids_mode == "incremental" else self.ids_last
        agree = {"cumulative": claimed == self.ids_last, "incremental": claimed == self.ids_sum,
                 "": claimed in (self.ids_last, self.ids_sum)}.get(self.ids_mode, False)
        if not agree:
            self.record.fail("token_mismatch", f"server claimed {claimed} tokens, {arrived} arrived (output_ids)")


def _count_ids(payload: bytes) -> int | None:
    """Elements of the chunk's ``output_ids`` array, counted on the bytes (None when absent)."""
    at = payload.find(_IDS_KEY)
    if at < 0:
        return None
    begin = at + len(_IDS_KEY)
    end = payload.find(b"]", begin)
    if end < 0:
        return None
    return 0 if end == begin else payload.count(b",", begin, end) + 1


class OpenAIReader(StreamReader):
    """``/v1/completions`` and ``/v1/chat/completions``: raw gap per content chunk."""

    def __init__(self, record: RequestRecord, start: float, ignore_eos: bool, chat: bool,
                 answer: list[str] | None = None) -> None:
        super().__init__(record, start, ignore_eos)
        self.chat = chat
        #: ``choices[0].token_ids`` summed (completions with ``return_token_ids``), else None.
        self.token_ids: int | None = None
        #: Where the answer's content goes when the caller keeps it (a multi-turn conversation).
        self.answer = answer

    def on_chunk(self, t: float, data: dict[str, Any]) -> None:
        if self.record.rid is None and "id" in data:
            self.record.rid = str(data["id"])[:100]
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage_seen = True
            self.record.output_len = _count(usage.get("completion_tokens")) or 0
            prompt_tokens = _count(usage.get("prompt_tokens"))
            if prompt_tokens is not None:
                self.record.prompt_len = self.record.server_prompt_len = prompt_tokens
            # Only with the server's --enable-cache-report (else prompt_tokens_details is null).
            cached = _count(_obj(usage.get("prompt_tokens_details")).get("cached_tokens"))
            if cached is not None:
                self.record.cached_tokens = cached
            image_tokens = _count(_obj(usage.get("prompt_tokens_details")).get("image_tokens"))
            if image_tokens is not None:
                self.record.image_tokens = image_tokens
        details = _obj(_obj(data.get("sglext")).get("cached_tokens_details"))
        if details:  # per-tier counts, asked for with return_cached_tokens_details (bench_serving sums them)
            self.record.cached_tokens = sum(_count(details.get(k)) or 0 for k in ("device", "host", "storage"))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = _obj(choices[0])
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
            if self.finish_reason == "abort":
                self.record.fail("abort", "finish_reason abort")
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            self.token_ids = (self.token_ids or 0) + len(ids)
        if self.chat:
            delta = _obj(choice.get("delta"))
            content = _str(delta.get("content"))
            if self.answer is not None and content:
                self.answer.append(content)
            text = content + _str(delta.get("reasoning_content"))
        else:
            text = _str(choice.get("text"))
        if text and self.token_text(t):
            self.record.itl.append(t - self.last_token_t)
            self.last_token_t = t

    def tokens_arrived(self) -> int:
        """:meth:`StreamReader.tokens_arrived`, or the ``token_ids`` received (``return_token_ids``) when more."""
        return max(super().tokens_arrived(), self.token_ids or 0)

    def check_count(self) -> None:
        if not self.usage_seen:
            # bench_serving's fallback: the requested length (the count cannot be checked).
            self.record.output_len = self.record.expected_output_len
            return
        super().check_count()

    def check_arrived(self) -> None:
        if not self.usage_seen:
            return
        if self.token_ids is None:
            super().check_arrived()
        elif self.token_ids != self.record.output_len:
            self.record.fail(
                "token_mismatch",
                f"server claimed {self.record.output_len} tokens, {self.token_ids} arrived (token_ids)",
            )


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def make_reader(api: str, record: RequestRecord, start: float, ignore_eos: bool,
                answer: list[str] | None = None) -> StreamReader:
    """The reader of ``api``'s stream; ``answer`` (chat only) receives the answer's content as it arrives."""
    if api == "native":
        return NativeReader(record, start, ignore_eos)
    return OpenAIReader(record, start, ignore_eos, chat=api == "chat", answer=answer)
