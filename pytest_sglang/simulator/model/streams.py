"""Response bodies and SSE chunks of /generate, /v1/completions and /v1/chat/completions.

Each ``*Emitter`` is called by the engine once per step for its request (``done`` on the last
token) and pushes bytes to the request's sink. Constant JSON parts are serialised once per request.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pytest_sglang.simulator.model import logprobs
from pytest_sglang.simulator.scheduling import speculative
from pytest_sglang.simulator.scheduling.request import Request

DONE = b"data: [DONE]\n\n"
#: tokenize + hand-off to the scheduler before ``api_server_dispatch_finish_ts`` (0.5.23 on CPU: ~1 ms)
DISPATCH_S = 0.0008
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def dumps(obj: Any) -> str:
    return _dumps(obj)


def _details(req: Request) -> dict[str, int | str] | None:
    # 0.5.23 always sends the key: null when nothing came from the cache; "storage" only with an L3 tier
    if not req.cached:
        return None
    out: dict[str, int | str] = {"device": req.cached_device, "host": req.cached_host}
    if "storage_backend" in req.extra:
        out.update(storage=req.cached_storage, storage_backend=str(req.extra["storage_backend"]))
    return out


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


@dataclass(frozen=True)
class NativeOptions:
    """What a /generate request asked for beyond text, and the faults that change its report."""

    #: ``return_logprob``: (logprob_start_len, top_logprobs_num, return_text_in_logprobs); None: off
    logprob: tuple[int, int, bool] | None = None
    #: --sim-fault cache-logprob-drift: the shift of logprobs served from a cached prefix
    lp_drift: float = 0.0
    #: --sim-fault usage-off-by-one: added to the completion_tokens reported
    usage_extra: int = 0


def logprob_fields(req: Request, opts: NativeOptions) -> dict[str, Any]:
    """The ``meta_info`` logprob fields of ``req`` so far (empty when not requested)."""
    if opts.logprob is None:
        return {}
    start, top, with_text = opts.logprob
    if "kv_received" in req.extra:
        start = -1  # a PD decode worker never ran the prompt: no input logprobs (the gateway adds the prefill's)
    shift = -opts.lp_drift if opts.lp_drift and req.cached else 0.0
    pieces = req.pieces or []
    return logprobs.native_logprobs(
        req.prompt_ids, req.out_ids, pieces, start=start, top=top, with_text=with_text, shift=shift
    )


def native_object(req: Request, *, metrics: bool, opts: NativeOptions = NativeOptions()) -> dict[str, Any]:
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
    meta.update(logprob_fields(req, opts))
    meta.update(
        reasoning_tokens=0,
        completion_tokens=n + opts.usage_extra,
        cached_tokens=req.cached,
        weight_versions=[{"version": "default", "start": 0, "end": n}],
        cached_tokens_details=_details(req),
        dp_rank=None,
        e2e_latency=max(0.0, req.last_perf - req.arrival_perf),
    )
    meta.update(speculative.meta_fields(req, meta["completion_tokens"]))  # --speculative-algorithm only
    if metrics:
        meta.update(
            request_received_ts=req.arrival,
            first_token_latency=req.first_perf - req.arrival_perf,
            api_server_dispatch_finish_ts=req.arrival + DISPATCH_S,
            request_finished_ts=req.arrival + meta["e2e_latency"],
        )
        if n:  # no decode, no throughput (max_new_tokens 0)
            meta["decode_throughput"] = (n - 1) / max(1e-9, req.last_perf - req.first_perf) if n > 1 else 0.0
        meta["response_sent_to_client_ts"] = time.time()
    return {"text": req.text, "output_ids": list(req.out_ids), "meta_info": meta}


class NativeEmitter:
    """Cumulative ``data: {...}`` chunks (or incremental with --incremental-streaming-output).

    ``index`` is the prompt's position in a batch request (``"text": [...]``): 0.5.23 adds it to
    every chunk and sends ``data: [DONE]`` once for the whole batch (the handler does).
    """

    __slots__ = (
        "_ids",
        "_meta",
        "_sent_ids",
        "_sent_text",
        "_tail",
        "incremental",
        "index",
        "interval",
        "metrics",
        "opts",
    )

    def __init__(
        self,
        req: Request,
        *,
        interval: int,
        incremental: bool,
        metrics: bool,
        index: int | None = None,
        opts: NativeOptions = NativeOptions(),
    ) -> None:
        self.interval = max(1, interval)
        self.incremental = incremental
        self.metrics = metrics
        self.index = index
        self.opts = opts
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
            f'{len(req.prompt_ids)},"weight_version":"default","num_retractions":0{stages}'
        )

    def __call__(self, req: Request, done: bool) -> None:
        n = len(req.out_ids)
        if done:
            obj = native_object(req, metrics=self.metrics, opts=self.opts)
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
        details = dumps(_details(req))
        sent = ""
        if not self._meta:
            self._meta = self._meta_head(req)
            if self.metrics:  # 0.5.23 stamps the first chunk only
                sent = f',"response_sent_to_client_ts":{time.time()!r}'
        lp = "," + dumps(logprob_fields(req, self.opts))[1:-1] if self.opts.logprob else ""
        req.sink.push(
            f'data: {{"text":{dumps(text)},"output_ids":[{ids}]{self._meta}{lp},"reasoning_tokens":0,'
            f'"completion_tokens":{n + self.opts.usage_extra},"cached_tokens":'
            f'{req.cached},"cached_tokens_details":{details},"dp_rank":null{sent}{self._tail}'.encode()
        )


def collect(req: Request, done: bool) -> None:
    """Emitter of non-streaming requests: the handler builds the body when ``req.done`` resolves."""
