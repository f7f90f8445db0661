"""/generate (native): batches, ``n``, grammars, logprobs (``return_logprob``), sampling seeds."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from aiohttp import web

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.failures.production import with_template
from pytest_sglang.simulator.front import lora, vocab
from pytest_sglang.simulator.front.openai.features import MAX_N
from pytest_sglang.simulator.front.respond import (
    SAMPLING_TYPES,
    SSE_HEADERS,
    BadRequest,
    InvalidField,
    check_types,
    fault_error,
    field,
    json_response,
    length_error,
    read_json,
    run,
    stops,
)
from pytest_sglang.simulator.images import multimodal
from pytest_sglang.simulator.images import reader as image_input
from pytest_sglang.simulator.images.multimodal import Prepared
from pytest_sglang.simulator.images.reader import ImageRefused
from pytest_sglang.simulator.model import answer, grammar
from pytest_sglang.simulator.model.answer import Ask
from pytest_sglang.simulator.model.grammar import Constraint, ConstraintError
from pytest_sglang.simulator.model.serving import sample_key, sampled, serving
from pytest_sglang.simulator.model.streams import DONE, NativeEmitter, NativeOptions, dumps, native_object
from pytest_sglang.simulator.scheduling.request import Request
from pytest_sglang.simulator.state import State

__all__ = ["generate"]

SAMPLING_KEYS = (
    "max_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "min_new_tokens",
    "ignore_eos",
    "n",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "json_schema",
    "regex",
    "ebnf",
    "structural_tag",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "stream_interval",
    "logit_bias",
    "sampling_seed",
    "custom_params",
    "beam_width",
    "watermark",
    "choice",
)


def _native_error(message: str) -> BadRequest:
    return BadRequest(json_response({"error": {"message": message}}, 400))


def _native_prompts(body: dict[str, Any]) -> tuple[list[list[int]], list[str], bool]:
    """(token ids of every prompt, their texts ("" for ids), whether the request is a batch)."""
    ids = field(body, "input_ids", "list")
    if ids is not None:
        if ids and all(isinstance(one, list) and _all_ints(one) for one in ids):
            return [list(one) for one in ids], [""] * len(ids), True
        if not _all_ints(ids):
            raise InvalidField("input_ids", ids, "list")
        return [list(ids)], [""], False
    text = body.get("text")
    if text is None:
        raise _native_error("Either text, input_ids or input_embeds should be provided.")
    if isinstance(text, list):
        return [tokenizer.encode(str(t)) for t in text], [str(t) for t in text], True
    return [tokenizer.encode(str(text))], [str(text)], False


def _all_ints(values: list[Any]) -> bool:
    return all(isinstance(i, int) and not isinstance(i, bool) for i in values)


def _int_param(sp: dict[str, Any], name: str, low: int) -> int | None:
    """An integer sampling parameter checked like SGLang's SamplingParams.verify()."""
    value = sp.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _native_error(f"{name} must be an integer, got {value!r}.")
    if value < low:
        raise _native_error(f"{name} must be at least {low}, got {value}.")
    return value


def _rids(body: dict[str, Any], n: int) -> list[str]:
    rid = body.get("rid")
    if isinstance(rid, list) and len(rid) == n:
        return [str(r) for r in rid]
    if rid and n == 1:
        return [str(rid)]
    return [uuid.uuid4().hex for _ in range(n)]


def _logprob(body: dict[str, Any]) -> tuple[int, int, bool] | None:
    """``return_logprob``'s (logprob_start_len, top_logprobs_num, return_text_in_logprobs), or None."""
    start, top = field(body, "logprob_start_len", "integer"), field(body, "top_logprobs_num", "integer")
    if not body.get("return_logprob"):
        return None
    return (-1 if start is None else start, top or 0, bool(body.get("return_text_in_logprobs")))


def _native_options(state: State, req: _Native) -> NativeOptions:
    faults = state.cfg.faults
    return NativeOptions(
        logprob=req.logprob, lp_drift=faults.cache_logprob_drift, usage_extra=int(faults.usage_off_by_one)
    )


def _compile_abort(rid: str, prompt_tokens: int, message: str) -> bytes:
    """A streamed grammar compile error: 0.5.23 aborts the request in its first chunk."""
    finish = {"type": "abort", "message": message, "status_code": 400, "err_type": "BadRequestError"}
    meta = {
        "id": rid,
        "finish_reason": finish,
        "prompt_tokens": prompt_tokens,
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "cached_tokens_details": None,
        "dp_rank": None,
        "e2e_latency": 0.0,
    }
    return b"data: " + dumps({"text": "", "output_ids": [], "meta_info": meta}).encode() + b"\n\n" + DONE


@dataclass(frozen=True)
class _Native:
    """A /generate request, read and checked."""

    body: dict[str, Any]
    sp: dict[str, Any]
    prompts: list[list[int]]
    texts: list[str]
    batch: bool
    max_new: int | None
    n: int
    constraint: Constraint | None
    logprob: tuple[int, int, bool] | None

    @property
    def many(self) -> bool:
        """Answered as a list (streamed with ``index``): a batch of prompts or ``n`` > 1."""
        return self.batch or self.n > 1


async def _read(request: web.Request) -> _Native:
    body = await read_json(request)
    try:
        return _check(body)
    except InvalidField as exc:
        raise _native_error(str(exc)) from None


def _check(body: dict[str, Any]) -> _Native:
    prompts, texts, batch = _native_prompts(body)
    sp = field(body, "sampling_params", "object") or {}
    check_types(sp, SAMPLING_TYPES)
    stops(sp.get("stop"))
    _int_param(sp, "stream_interval", 1)
    unknown = [k for k in sp if k not in SAMPLING_KEYS]
    if unknown:
        expected = ", ".join(f"`{k}`" for k in SAMPLING_KEYS)
        raise BadRequest(json_response({"error": f"unknown field `{unknown[0]}`, expected one of {expected}"}, 400))
    max_new, n = _int_param(sp, "max_new_tokens", 0), _int_param(sp, "n", 1) or 1
    if n * len(prompts) > MAX_N:
        raise _native_error(f"n x prompts must be at most {MAX_N} (the simulator's bound on one request), got {n}.")
    try:
        constraint = grammar.from_native(sp)
    except ConstraintError as exc:
        raise _native_error(str(exc)) from None
    return _Native(body, sp, prompts, texts, batch, max_new, n, constraint, _logprob(body))


def _image_sources(body: dict[str, Any], req: _Native) -> list[list[str]]:
    """Each prompt's ``image_data`` (a batch gives one entry per prompt); ValueError: malformed."""
    data = body.get("image_data")
    if data is None:
        return [[] for _ in req.prompts]
    if not req.batch:
        return [image_input.native_image_sources(data)]
    if not isinstance(data, list) or len(data) != len(req.prompts):
        raise ValueError(f"image_data of a batch of {len(req.prompts)} prompts must be a list with one entry "
                         "per prompt")
    return [image_input.native_image_sources(one) for one in data]


async def _with_images(state: State, req: _Native) -> tuple[_Native, list[Prepared | None]]:
    """The prompts with their images' tokens (ImageRefused / ValueError: 0.5.23's refusal).

    A text-only model ignores ``image_data``: 0.5.23 runs no multimodal processor for it.
    """
    processor, faults = state.cfg.vision, state.cfg.faults
    if processor is None or "image_data" not in req.body:
        return req, [None] * len(req.prompts)
    prompts: list[list[int]] = []
    images: list[Prepared | None] = []
    for ids, text, sources in zip(req.prompts, req.texts, _image_sources(req.body, req), strict=True):
        if not sources:
            prompts.append(ids)
            images.append(None)
            continue
        prepared = await multimodal.prepare_async(
            state.media,
            processor,
            text,
            sources,
            prefill_tok_s=state.engine.speed.prefill_tok_s,
            miscount=faults.image_tokens_miscounted,
            ignored=faults.image_ignored,
            slow=faults.vision_slow,
        )
        prompts.append(prepared.ids)
        images.append(prepared)
    return replace(req, prompts=prompts), images


def _requests(
    state: State, req: _Native, base: Ask, opts: NativeOptions, images: list[Prepared | None]
) -> list[dict[str, Any]]:
    """The engine requests: every prompt ``n`` times, each with its answer and sampling key."""
    srv, sp, faults = serving(state), req.sp, state.cfg.faults
    seed, sampling = sp.get("sampling_seed"), sampled(sp.get("temperature"), sp.get("top_k"))
    prompts = [
        (ids, text, seen, k)
        for ids, text, seen in zip(req.prompts, req.texts, images, strict=True)
        for k in range(req.n)
    ]
    out: list[dict[str, Any]] = []
    for rid, (ids, text, seen, k) in zip(_rids(req.body, len(prompts)), prompts, strict=True):
        sees = seen.sees if seen is not None else None
        script = answer.plan(replace(base, prompt=text, sees=sees), srv.parsers, faults)
        key = sample_key(
            sampling,
            seed if isinstance(seed, int) else None,
            deterministic=srv.deterministic,
            draw=state.rng.getrandbits(32),
        )
        out.append(
            dict(
                rid=rid,
                prompt_ids=with_template(ids, faults.production),
                max_new=128 if req.max_new is None else req.max_new,
                ignore_eos=bool(sp.get("ignore_eos", False)),
                stop=stops(sp.get("stop")),
                endpoint="/generate",
                log_metrics=bool(req.body.get("log_metrics", True)),
                script=script.tokens if script else None,
                sample_key=key,
                drift=faults.token_drift,
                record_pieces=opts.logprob is not None,
                routed_dp_rank=_pinned_rank(req.body),
                encoder_s=seen.encoder_s if seen is not None and k == 0 else 0.0,  # encoded once for n samples
            )
        )
    return out


def _pinned_rank(body: dict[str, Any]) -> int | None:
    """0.5.23's ``routed_dp_rank`` (or its deprecated alias ``data_parallel_rank``)."""
    rank = body.get("routed_dp_rank", body.get("data_parallel_rank"))
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


async def _compile_error(request: web.Request, req: _Native, message: str) -> web.StreamResponse:
    if not req.body.get("stream"):
        return json_response({"error": {"message": message}}, 400)
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    await resp.write(_compile_abort(uuid.uuid4().hex, len(req.prompts[0]), message))
    return resp


async def _value_error(request: web.Request, req: _Native, message: str) -> web.StreamResponse:
    """The tokenizer manager's ValueError: a 400, or in a stream one error event and [DONE] (http_server.py)."""
    if not req.body.get("stream"):
        return json_response({"error": {"message": message}}, 400)
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    event = {"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}}
    await resp.write(f"data: {dumps(event)}\n\n".encode() + DONE)
    return resp


async def generate(state: State, request: web.Request) -> web.StreamResponse:
    try:
        req = await _read(request)
    except BadRequest as exc:
        return exc.response
    refused = lora.refusal(state.cfg.args, lora.from_native(req.body))
    if refused is not None:
        return await _value_error(request, req, refused)
    out_of_vocab = vocab.logprob_ids_error(state, req.body)
    if out_of_vocab is not None:
        return await _value_error(request, req, out_of_vocab)
    if "input_ids" in req.body:  # text is tokenized into the vocabulary; ids are taken as sent
        vocab.crash_on_unknown_ids(state, req.prompts)
    try:  # the tokenizer manager's multimodal processor: before the length check, which counts image tokens
        req, images = await _with_images(state, req)
    except ImageRefused as exc:
        if exc.status == 500:  # an exception /generate does not catch: the server's bare 500
            return web.Response(text="Internal Server Error", status=500)
        return await _value_error(request, req, exc.message)
    except ValueError as exc:
        return await _value_error(request, req, str(exc))
    for ids in req.prompts:
        msg = length_error(state, len(ids), req.max_new)
        if msg:
            return json_response({"error": {"message": msg}}, 400)
    fault = fault_error(state)
    if fault is not None:
        return fault
    base = Ask(prompt="")
    if req.constraint is not None:
        try:
            value = grammar.compile_instance(req.constraint, serving(state).grammar_backend)
        except ConstraintError as exc:  # compiled by the scheduler: after a stream has started
            return await _compile_error(request, req, str(exc))
        base = replace(base, constrained=req.constraint.answer(value), schema=req.constraint.schema)
    opts = _native_options(state, req)
    a, metrics = state.cfg.args, state.cfg.args.enable_metrics
    interval = int(req.sp.get("stream_interval") or a.stream_interval)

    def emitter(r: Request, index: int) -> NativeEmitter:
        return NativeEmitter(
            r,
            interval=interval,
            incremental=a.incremental_streaming_output,
            metrics=metrics,
            index=index if req.many else None,
            opts=opts,
        )

    def body(reqs: list[Request]) -> Any:
        objs = [native_object(r, metrics=metrics, opts=opts) for r in reqs]
        return objs if req.many else objs[0]

    kwargs = _requests(state, req, base, opts, images)
    return await run(
        state, request, kwargs, bool(req.body.get("stream")), emitter, body, tail=DONE if req.many else None
    )
