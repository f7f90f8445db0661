"""Response bodies and SSE chunks of /generate, /v1/completions and /v1/chat/completions.

Each ``*Emitter`` is called by the engine once per step for its request (``done`` on the last
token) and pushes bytes to the request's sink. Constant JSON parts are serialised once per request.
"""

from __future__ import annotations

import json
import time
from typing import Any

from pytest_sglang.simulator.engine import Request

DONE = b"data: [DONE]\n\n"
#: tokenize + hand-off to the scheduler before ``api_server_dispatch_finish_ts`` (0.5.23 on CPU: ~1 ms)
DISPATCH_S = 0.0008
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(obj: Any) -> str:
    return _dumps(obj)


def _details(req: Request) -> dict[str, int] | None:
    # 0.5.23 always sends the key: null when nothing came from the cache
    return {"device": req.cached_device, "host": req.cached_host} if req.cached else None


def _wall(req: Request, perf: float) -> float:
    """A perf_counter() instant of this request as a time.time() timestamp."""
    return req.arrival + (perf - req.arrival_perf)


def stage_times(req: Request) -> dict[str, float]:
    """The per-stage fields 0.5.23 puts in every chunk's meta_info with --enable-metrics."""
    return {
        "storage_prefetch_wait": 0.0,
        "storage_staging_wait": 0.0,
        "forward_entry_time": _wall(req, req.admitted_perf),
        "prefill_finished_time": _wall(req, req.first_perf),
        "queue_time": max(0.0, req.admitted_perf - req.arrival_perf),
    }


def native_object(req: Request, *, metrics: bool) -> dict[str, Any]:
    """The non-streaming /generate object (also the last streamed chunk)."""
    n = len(req.out_ids)
    meta: dict[str, Any] = {
        "id": req.rid,
        "finish_reason": req.finish,
        "prompt_tokens": len(req.prompt_ids),
        "weight_version": "default",
        "num_retractions": 0,
    }
    if metrics:
        meta.update(stage_times(req))
    meta.update(
        reasoning_tokens=0,
        completion_tokens=n,
        cached_tokens=req.cached,
        weight_versions=[{"version": "default", "start": 0, "end": n}],
        cached_tokens_details=_details(req),
        dp_rank=None,
        e2e_latency=max(0.0, req.last_perf - req.arrival_perf),
    )
    if metrics:
        meta.update(
            request_received_ts=req.arrival,
            first_token_latency=req.first_perf - req.arrival_perf,
            api_server_dispatch_finish_ts=req.arrival + DISPATCH_S,
            request_finished_ts=req.arrival + meta["e2e_latency"],
        )
        if n:  # no decode, no throughput (max_new_tokens 0)
            meta["decode_throughput"] = (
                (n - 1) / max(1e-9, req.last_perf - req.first_perf) if n > 1 else 0.0
            )
        meta["response_sent_to_client_ts"] = time.time()
    return {"text": req.text, "output_ids": list(req.out_ids), "meta_info": meta}


class NativeEmitter:
    """Cumulative ``data: {...}`` chunks (or incremental with --incremental-streaming-output).

    ``index`` is the prompt's position in a batch request (``"text": [...]``): 0.5.23 adds it to
    every chunk and sends ``data: [DONE]`` once for the whole batch (the handler does)."""

    __slots__ = (
        "interval",
        "incremental",
        "metrics",
        "index",
        "_meta",
        "_tail",
        "_ids",
        "_sent_text",
        "_sent_ids",
    )

    def __init__(
        self, req: Request, *, interval: int, incremental: bool, metrics: bool, index: int | None = None
    ) -> None:
        self.interval = max(1, interval)
        self.incremental = incremental
        self.metrics = metrics
        self.index = index
        self._meta = ""  # built at the first chunk: the stage times are known only after prefill
        self._tail = "}}\n\n" if index is None else f'}},"index":{index}}}\n\n'
        self._ids = ""
        self._sent_text = 0
        self._sent_ids = 0

    def _meta_head(self, req: Request) -> str:
        stages = ""
        if self.metrics:
            stages = "," + dumps(stage_times(req))[1:-1]
        return (
            f',"meta_info":{{"id":"{req.rid}","finish_reason":null,"prompt_tokens":'
            f'{len(req.prompt_ids)},"weight_version":"default","num_retractions":0{stages},'
            f'"reasoning_tokens":0,"completion_tokens":'
        )

    def __call__(self, req: Request, done: bool) -> None:
        n = len(req.out_ids)
        if done:
            obj = native_object(req, metrics=self.metrics)
            if self.incremental:
                obj["text"], obj["output_ids"] = req.text[self._sent_text :], req.out_ids[self._sent_ids :]
            if self.index is None:
                req.sink.push(b"data: " + dumps(obj).encode() + b"\n\n" + DONE)
            else:
                obj["index"] = self.index
                req.sink.push(b"data: " + dumps(obj).encode() + b"\n\n")
            return
        if n % self.interval:
            return
        if self.incremental:
            text, ids = req.text[self._sent_text :], ",".join(map(str, req.out_ids[self._sent_ids :]))
            self._sent_text, self._sent_ids = len(req.text), n
        else:
            self._ids = f"{self._ids},{req.out_ids[-1]}" if self._ids else str(req.out_ids[-1])
            text, ids = req.text, self._ids
        details = (
            f'{{"device":{req.cached_device},"host":{req.cached_host}}}' if req.cached else "null"
        )
        sent = ""
        if not self._meta:
            self._meta = self._meta_head(req)
            if self.metrics:  # 0.5.23 stamps the first chunk only
                sent = f',"response_sent_to_client_ts":{time.time()!r}'
        req.sink.push(
            f'data: {{"text":{dumps(text)},"output_ids":[{ids}]{self._meta}{n},"cached_tokens":'
            f'{req.cached},"cached_tokens_details":{details},"dp_rank":null{sent}{self._tail}'.encode()
        )


def openai_finish(req: Request) -> tuple[str, Any]:
    assert req.finish is not None
    if req.finish["type"] == "length":
        return "length", None
    if req.finish["type"] == "abort":
        return "abort", None
    return "stop", req.finish.get("matched")


def usage(req: Request, *, cache_report: bool) -> dict[str, Any]:
    p, c = len(req.prompt_ids), len(req.out_ids)
    return {
        "prompt_tokens": p,
        "total_tokens": p + c,
        "completion_tokens": c,
        "prompt_tokens_details": {"cached_tokens": req.cached} if cache_report else None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


class OpenAIEmitter:
    """Incremental OpenAI chunks; ``chat`` adds the role chunk and a separate finish chunk."""

    __slots__ = (
        "chat",
        "include_usage",
        "continuous",
        "cache_report",
        "interval",
        "_head",
        "_sent",
        "_role_sent",
    )

    def __init__(
        self,
        req: Request,
        *,
        chat: bool,
        model: str,
        created: int,
        include_usage: bool,
        continuous_usage: bool,
        cache_report: bool,
        interval: int,
    ) -> None:
        self.chat = chat
        self.include_usage = include_usage
        self.continuous = continuous_usage
        self.cache_report = cache_report
        self.interval = max(1, interval)
        obj = "chat.completion.chunk" if chat else "text_completion"
        self._head = (
            f'data: {{"id":"{req.rid}","object":"{obj}","created":{created},'
            f'"model":{dumps(model)},"choices":[{{"index":0,'
        )
        self._sent = 0
        self._role_sent = False

    def _usage_suffix(self, req: Request) -> str:
        if self.continuous:
            return f',"usage":{dumps(usage(req, cache_report=self.cache_report))}'
        return ',"usage":null' if not self.chat else ""

    def __call__(self, req: Request, done: bool) -> None:
        if not done and len(req.out_ids) % self.interval:
            return
        delta, self._sent = req.text[self._sent :], len(req.text)
        parts: list[str] = []
        if self.chat and not self._role_sent:
            self._role_sent = True
            parts.append(
                self._head + '"delta":{"reasoning_content":null,"role":"assistant","content":""},'
                '"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'
            )
        finish, matched = openai_finish(req) if done else (None, None)
        if self.chat:
            if delta:
                parts.append(
                    f'{self._head}"delta":{{"reasoning_content":null,"content":{dumps(delta)}}},'
                    f'"logprobs":null,"finish_reason":null,"matched_stop":null}}]'
                    f"{self._usage_suffix(req)}}}\n\n"
                )
            if done:
                parts.append(
                    f'{self._head}"delta":{{"reasoning_content":null}},"logprobs":null,'
                    f'"finish_reason":{dumps(finish)},"matched_stop":{dumps(matched)}}}]}}\n\n'
                )
        else:
            parts.append(
                f'{self._head}"text":{dumps(delta)},"logprobs":null,"finish_reason":{dumps(finish)},'
                f'"matched_stop":{dumps(matched)}}}]{self._usage_suffix(req)}}}\n\n'
            )
        if done:
            if self.include_usage:
                u = usage(req, cache_report=self.cache_report)
                if not self.chat:  # completions serialise the usage chunk with exclude_none
                    u = {k: v for k, v in u.items() if v is not None}
                parts.append(self._head.split(',"choices"')[0] + f',"choices":[],"usage":{dumps(u)}}}\n\n')
            parts.append(DONE.decode())
        req.sink.push("".join(parts).encode())


def openai_object(
    req: Request, *, chat: bool, model: str, created: int, cache_report: bool
) -> dict[str, Any]:
    finish, matched = openai_finish(req)
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": req.text, "reasoning_content": None},
        }
    else:
        choice = {"index": 0, "text": req.text}
    choice.update(logprobs=None, finish_reason=finish, matched_stop=matched)
    n = len(req.out_ids)
    return {
        "id": req.rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage(req, cache_report=cache_report),
        "metadata": {
            "weight_version": "default",
            "weight_versions": [{"version": "default", "start": 0, "end": n}],
        },
    }


def collect(req: Request, done: bool) -> None:
    """Emitter of non-streaming requests: the handler builds the body when ``req.done`` resolves."""
