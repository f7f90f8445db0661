"""Request bodies and SSE stream readers per API, measuring as SGLang bench_serving does.

Pure: a reader is fed ``(timestamp, payload)`` for every ``data:`` line and fills a
:class:`RequestRecord`. ``timestamp`` is seconds on the caller's clock; ``start`` is when the request
was sent. Integrity is judged in :meth:`StreamReader.finish`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_sglang.loadgen.datasets import Prompt
from pytest_sglang.loadgen.record import RequestRecord
from pytest_sglang.loadgen.spec import LoadSpec

PATHS = {"native": "/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}


def request_body(spec: LoadSpec, prompt: Prompt, output_len: int | None = None) -> dict[str, Any]:
    """The streaming request for ``spec.api`` (bench_serving's bodies, plus usage for OpenAI APIs)."""
    out = prompt.output_len if output_len is None else output_len
    p = prompt.prompt
    if spec.api == "native":
        key = "input_ids" if isinstance(p, list) and p and isinstance(p[0], int) else "text"
        return {
            key: p if key == "input_ids" else _as_text(p),
            "stream": True,
            "sampling_params": {
                "max_new_tokens": out,
                "temperature": spec.temperature,
                "ignore_eos": spec.ignore_eos,
            },
        }
    # include_usage makes the server report the true token count (bench_serving falls back to
    # the requested length, which would hide a short answer).
    common = {
        "model": spec.model,
        "temperature": spec.temperature,
        "ignore_eos": spec.ignore_eos,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if spec.api == "completions":
        prompt_value = p if isinstance(p, list) and p and isinstance(p[0], int) else _as_text(p)
        return {"prompt": prompt_value, "max_tokens": out, **common}
    messages = (
        p
        if isinstance(p, list) and p and isinstance(p[0], dict)
        else [{"role": "user", "content": _as_text(p)}]
    )
    return {"messages": messages, "max_completion_tokens": out, **common}


def _as_text(p: Any) -> str:
    if isinstance(p, str):
        return p
    if p and isinstance(p[0], dict):
        return "\n".join(str(m.get("content", "")) for m in p)
    return " ".join(str(i) for i in p)


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


class StreamReader:
    """Measures one streaming response. Subclasses read one API's chunk shape."""

    def __init__(self, record: RequestRecord, start: float, ignore_eos: bool) -> None:
        self.record = record
        self.start = start
        self.ignore_eos = ignore_eos
        self.done = False
        self.finish_reason: Any = None
        self.first: float | None = None
        self.last_token_t = 0.0
        self.last_line_t = start
        self.usage_seen = False

    def feed(self, t: float, payload: bytes) -> None:
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
        if isinstance(data, dict) and "error" in data:
            self.record.fail("stream_error", _error_text(data["error"]))
            return
        self.on_chunk(t, data)

    def on_chunk(self, t: float, data: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def token_text(self, t: float) -> bool:
        """A chunk with text arrived at ``t``: TTFT on the first; returns False on the first."""
        if self.first is None:
            self.first = t
            self.record.ttft = t - self.start
            self.last_token_t = t
            return False
        return True

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
        return rec

    def check_count(self) -> None:
        rec = self.record
        if self.ignore_eos and rec.output_len != rec.expected_output_len:
            rec.fail(
                "token_count",
                f"got {rec.output_len} tokens, asked for {rec.expected_output_len} with ignore_eos",
            )


_TOKENS_KEY = b'"completion_tokens":'
_TEXT_START = b'{"text":"'
_RUNNING = b'"finish_reason":null'
_DIGITS = re.compile(rb"[0-9]+")


class NativeReader(StreamReader):
    """``/generate``: cumulative text; ITL = chunk gap spread evenly over the new tokens."""

    last_n = 0

    def feed(self, t: float, payload: bytes) -> None:
        # Fast path for the bulk of a cumulative stream: a running chunk (finish_reason null) after
        # the first token needs only its token count, and the cumulative text makes every chunk
        # longer, so a full JSON parse per chunk would dominate the client's CPU. Inside JSON strings
        # quotes are escaped, so these unescaped byte patterns can only be keys; anything unexpected
        # (other key order, an error object, the final chunk) takes the full parse.
        if self.first is not None and payload.startswith(_TEXT_START) and _RUNNING in payload:
            at = payload.rfind(_TOKENS_KEY)
            digits = _DIGITS.match(payload, at + len(_TOKENS_KEY)) if at > 0 else None
            if digits is not None and payload[at - 1 : at] in (b",", b"{"):
                self.last_line_t = t
                self.record.chunks += 1
                self._tokens(t, int(digits.group()), payload[9:10] != b'"')
                return
        super().feed(t, payload)

    def on_chunk(self, t: float, data: Any) -> None:
        meta = data.get("meta_info") or {}
        if self.record.rid is None and "id" in meta:
            self.record.rid = str(meta["id"])
        fr = meta.get("finish_reason")
        if fr is not None:
            self.finish_reason = fr
            if isinstance(fr, dict) and fr.get("type") == "abort":
                self.record.fail("abort", str(fr.get("message") or fr))
        n = meta.get("completion_tokens")
        if isinstance(n, int):
            self.record.output_len = n
        if isinstance(meta.get("prompt_tokens"), int):
            self.record.prompt_len = meta["prompt_tokens"]
        self._tokens(t, n if isinstance(n, int) else None, bool(data.get("text")))

    def _tokens(self, t: float, n: int | None, has_text: bool) -> None:
        if n is not None:
            self.record.output_len = n
        if not has_text:
            return
        count = n if n is not None else self.last_n + 1
        if self.token_text(t):
            new = count - self.last_n
            if new <= 0:  # bench_serving skips chunks without new tokens (and keeps the old time)
                return
            gap = (t - self.last_token_t) / new
            self.record.itl.extend([gap] * new)
            self.last_token_t = t
        self.last_n = count


class OpenAIReader(StreamReader):
    """``/v1/completions`` and ``/v1/chat/completions``: raw gap per content chunk."""

    def __init__(self, record: RequestRecord, start: float, ignore_eos: bool, chat: bool) -> None:
        super().__init__(record, start, ignore_eos)
        self.chat = chat

    def on_chunk(self, t: float, data: Any) -> None:
        if self.record.rid is None and "id" in data:
            self.record.rid = str(data["id"])
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage_seen = True
            self.record.output_len = int(usage.get("completion_tokens") or 0)
            if isinstance(usage.get("prompt_tokens"), int):
                self.record.prompt_len = usage["prompt_tokens"]
        choices = data.get("choices") or []
        if not choices:
            return
        choice = choices[0]
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
            if self.finish_reason == "abort":
                self.record.fail("abort", "finish_reason abort")
        if self.chat:
            delta = choice.get("delta") or {}
            text = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        else:
            text = choice.get("text") or ""
        if text and self.token_text(t):
            self.record.itl.append(t - self.last_token_t)
            self.last_token_t = t

    def check_count(self) -> None:
        if not self.usage_seen:
            # bench_serving's fallback: the requested length (the count cannot be checked).
            self.record.output_len = self.record.expected_output_len
            return
        super().check_count()


def make_reader(api: str, record: RequestRecord, start: float, ignore_eos: bool) -> StreamReader:
    if api == "native":
        return NativeReader(record, start, ignore_eos)
    return OpenAIReader(record, start, ignore_eos, chat=api == "chat")
