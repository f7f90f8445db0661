"""/generate, /v1/completions and /v1/chat/completions."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from aiohttp import web

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.engine import EmitFn, Request
from pytest_sglang.simulator.sink import Sink
from pytest_sglang.simulator.state import State
from pytest_sglang.simulator.streams import (
    DONE,
    NativeEmitter,
    OpenAIEmitter,
    collect,
    dumps,
    native_object,
    openai_object,
)

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
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}


JSON_HEADERS = {"Content-Type": "application/json"}  # FastAPI's JSONResponse: no charset parameter


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(body).encode(), status=status, headers=JSON_HEADERS)


def error_response(message: str, err_type: str, status: int) -> web.Response:
    """SGLang's ErrorResponse envelope (OpenAI-style), status = code."""
    return json_response(
        {"object": "error", "message": message, "type": err_type, "param": None, "code": status}, status
    )


class BadRequest(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _length_error(state: State, n_in: int, max_new: int | None) -> str | None:
    ctx = state.cfg.context_len
    if n_in >= ctx:
        return f"The input ({n_in} tokens) is longer than the model's context length ({ctx} tokens)."
    if max_new is not None and n_in + max_new > ctx:
        return (
            f"Requested token count exceeds the model's maximum context length of {ctx} tokens. "
            "You requested "
            f"a total of {n_in + max_new} tokens: {n_in} tokens from the input messages and {max_new} tokens "
            "for the completion. Please reduce the number of tokens in the input messages or the completion "
            "to fit within the limit."
        )
    return None


def _fault_error(state: State) -> web.Response | None:
    p = state.cfg.faults.error_rate
    if p > 0 and state.rng.random() < p:
        return error_response(
            f"Internal server error: simulated failure (--sim-fault error-rate:{p:g})",
            "InternalServerError",
            500,
        )
    return None


def _stops(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


async def _run(
    state: State,
    request: web.Request,
    kwargs_list: list[dict[str, Any]],
    stream: bool,
    make_emit: Any,
    body_fn: Any,
    *,
    batch: bool = False,
) -> web.StreamResponse:
    """Schedule one engine request per prompt; a batch answers a JSON list (or one SSE stream)."""
    engine = state.engine
    resp: web.StreamResponse | None = None
    if stream:
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await resp.prepare(request)
    sink = Sink(resp)  # shared by a batch: its chunks interleave in one stream, like SGLang's
    reqs: list[Request] = []
    drop = state.cfg.faults.drop_stream_after
    for i, req_kwargs in enumerate(kwargs_list):
        req = Request(sink=sink, stream=stream, emit=collect, random_seed=state.cfg.random_seed, **req_kwargs)
        emit: EmitFn = make_emit(req, i if batch else None) if stream else collect
        if stream and drop is not None:
            emit = _dropping(emit, drop, request)
        req.emit = emit
        reqs.append(req)
    for req in reqs:
        engine.submit(req)
    try:
        for req in reqs:
            await req.done
    finally:
        for req in reqs:
            if not req.done.done() or req.finish is None:
                engine.abort(req)
    if resp is not None:
        if batch and not sink.closed:
            sink.push(DONE)  # once, after every prompt's last chunk
        await sink.drained()
        if not sink.closed:
            await resp.write_eof()
        return resp
    if batch:
        return json_response([body_fn(req) for req in reqs])
    return json_response(body_fn(reqs[0]))


def _dropping(emit: EmitFn, after: int, request: web.Request) -> EmitFn:
    def wrapped(req: Request, done: bool) -> None:
        emit(req, done)
        if len(req.out_ids) >= after and not done and request.transport is not None:
            req.sink.closed = True
            request.transport.abort()  # the connection dies mid-stream, no terminating chunk

    return wrapped


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(error_response(f"Invalid JSON body: {exc}", "Bad Request", 400)) from None
    if not isinstance(body, dict):
        raise BadRequest(error_response("The request body must be a JSON object", "Bad Request", 400))
    return body


def _native_error(message: str) -> BadRequest:
    return BadRequest(json_response({"error": {"message": message}}, 400))


def _native_prompts(body: dict[str, Any]) -> tuple[list[list[int]], bool]:
    """(token ids of every prompt, whether the request is a batch: ``text`` or ``input_ids`` a list)."""
    if body.get("input_ids") is not None:
        ids = body["input_ids"]
        if ids and isinstance(ids[0], list):
            return [[int(i) for i in one] for one in ids], True
        return [[int(i) for i in ids]], False
    text = body.get("text")
    if text is None:
        raise _native_error("Either text, input_ids or input_embeds should be provided.")
    if isinstance(text, list):
        return [tokenizer.encode(str(t)) for t in text], True
    return [tokenizer.encode(str(text))], False


def _max_new_tokens(sp: dict[str, Any]) -> int | None:
    """``sampling_params.max_new_tokens`` checked like SGLang's SamplingParams.verify()."""
    value = sp.get("max_new_tokens")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _native_error(f"max_new_tokens must be an integer, got {value!r}.")
    if value < 0:
        raise _native_error(f"max_new_tokens must be at least 0, got {value}.")
    return value


def _rids(body: dict[str, Any], n: int) -> list[str]:
    rid = body.get("rid")
    if isinstance(rid, list) and len(rid) == n:
        return [str(r) for r in rid]
    if rid and n == 1:
        return [str(rid)]
    return [uuid.uuid4().hex for _ in range(n)]


async def generate(state: State, request: web.Request) -> web.StreamResponse:
    try:
        body = await _json_body(request)
        prompts, batch = _native_prompts(body)
        sp = body.get("sampling_params") or {}
        unknown = [k for k in sp if k not in SAMPLING_KEYS]
        if unknown:
            expected = ", ".join(f"`{k}`" for k in SAMPLING_KEYS)
            return json_response({"error": f"unknown field `{unknown[0]}`, expected one of {expected}"}, 400)
        requested = _max_new_tokens(sp)
    except BadRequest as exc:
        return exc.response
    max_new = 128 if requested is None else requested
    for ids in prompts:
        msg = _length_error(state, len(ids), requested)
        if msg:
            return json_response({"error": {"message": msg}}, 400)
    fault = _fault_error(state)
    if fault is not None:
        return fault
    a, metrics = state.cfg.args, state.cfg.args.enable_metrics
    kwargs_list = [
        dict(
            rid=rid,
            prompt_ids=ids,
            max_new=max_new,
            ignore_eos=bool(sp.get("ignore_eos", False)),
            stop=_stops(sp.get("stop")),
            endpoint="/generate",
            log_metrics=bool(body.get("log_metrics", True)),
        )
        for rid, ids in zip(_rids(body, len(prompts)), prompts, strict=True)
    ]
    interval = int(sp.get("stream_interval") or a.stream_interval)
    return await _run(
        state,
        request,
        kwargs_list,
        bool(body.get("stream")),
        lambda r, index: NativeEmitter(
            r, interval=interval, incremental=a.incremental_streaming_output, metrics=metrics, index=index
        ),
        lambda r: native_object(r, metrics=metrics),
        batch=batch,
    )


def _openai_prompt(body: dict[str, Any], chat: bool) -> list[int]:
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise BadRequest(
                error_response(
                    "1 validation error for ChatCompletionRequest\nmessages\n  Field required [type=missing]",
                    "Bad Request",
                    400,
                )
            )
        if not messages:
            raise BadRequest(error_response("Messages cannot be empty.", "BadRequestError", 400))
        return tokenizer.encode(tokenizer.render_chat(messages))
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if prompt is None or prompt == "" or prompt == []:
        raise BadRequest(error_response("Prompt cannot be empty", "BadRequestError", 400))
    if isinstance(prompt, list) and all(isinstance(i, int) for i in prompt):
        return list(prompt)
    if not isinstance(prompt, str):
        raise BadRequest(
            error_response("The simulator serves one prompt per request", "BadRequestError", 400)
        )
    return tokenizer.encode(prompt)


async def openai(state: State, request: web.Request, *, chat: bool) -> web.StreamResponse:
    if request.content_type != "application/json":
        return error_response(
            "Unsupported Media Type: Only 'application/json' is allowed", "Bad Request", 400
        )
    try:
        body = await _json_body(request)
        ids = _openai_prompt(body, chat)
    except BadRequest as exc:
        return exc.response
    if chat:
        max_new = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        max_new = body.get("max_tokens", 16)
        if max_new is not None and int(max_new) <= 0:
            return error_response("max_tokens must be positive", "BadRequestError", 400)
    msg = _length_error(state, len(ids), max_new)
    if msg:
        return error_response(msg, "BadRequestError", 400)
    fault = _fault_error(state)
    if fault is not None:
        return fault
    a, model, created = state.cfg.args, str(body.get("model", "default")), int(time.time())
    limit = int(max_new) if max_new is not None else state.cfg.context_len - len(ids)
    opts = body.get("stream_options") or {}
    include_usage = bool(opts.get("include_usage")) or a.stream_response_default_include_usage
    kwargs = dict(
        rid=str(body.get("rid") or uuid.uuid4().hex),
        prompt_ids=ids,
        max_new=limit,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stop=_stops(body.get("stop")),
        endpoint="/v1/chat/completions" if chat else "/v1/completions",
    )
    return await _run(
        state,
        request,
        [kwargs],
        bool(body.get("stream")),
        lambda r, _index: OpenAIEmitter(
            r,
            chat=chat,
            model=model,
            created=created,
            include_usage=include_usage,
            continuous_usage=bool(opts.get("continuous_usage_stats")),
            cache_report=a.enable_cache_report,
            interval=a.stream_interval,
        ),
        lambda r: openai_object(
            r, chat=chat, model=model, created=created, cache_report=a.enable_cache_report
        ),
    )
