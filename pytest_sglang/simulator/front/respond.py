"""What the generation endpoints share: error envelopes, body reading, and running engine requests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from pytest_sglang.simulator.disagg import node as pd
from pytest_sglang.simulator.model.streams import collect, dumps
from pytest_sglang.simulator.scheduling.request import EmitFn, Request
from pytest_sglang.simulator.scheduling.sink import Sink
from pytest_sglang.simulator.state import State

SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}
JSON_HEADERS = {"Content-Type": "application/json"}  # FastAPI's JSONResponse: no charset parameter


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=dumps(body).encode(), status=status, headers=JSON_HEADERS)


def error_response(message: str, err_type: str, status: int) -> web.Response:
    """SGLang's ErrorResponse envelope (OpenAI-style), status = code."""
    return json_response(
        {"object": "error", "message": message, "type": err_type, "param": None, "code": status}, status
    )


def stream_error(message: str) -> bytes:
    """An error after the stream started: 0.5.23 sends it in-band (json.dumps spacing), then [DONE]."""
    body = {"error": {"object": "error", "message": message, "type": "BAD_REQUEST", "param": None, "code": 400}}
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()


class InvalidField(ValueError):
    """A request field of the wrong type; ``str()`` is pydantic's message as 0.5.23 returns it."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        kind = {"integer": "int_type", "list": "list_type", "object": "dict_type", "boolean": "bool_type",
                "number": "float_type"}.get(expected, "string_type")  # fmt: skip
        super().__init__(
            f"1 validation error:\n  {{'type': '{kind}', 'loc': ('body', {field!r}), "
            f"'msg': 'Input should be a valid {expected}', 'input': {value!r}}}"
        )


_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "list": (list,),
    "object": (dict,),
    "string": (str,),
    "string or object": (str, dict),
}


def field(body: dict[str, Any], name: str, expected: str) -> Any:
    """``body[name]`` (None when absent) if it has the ``expected`` JSON type, else :class:`InvalidField`."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, _TYPES[expected]) and (expected == "boolean" or not isinstance(value, bool)):
        return value
    raise InvalidField(name, value, expected)


#: The OpenAI request fields the simulator reads, with the JSON type 0.5.23's pydantic models require.
OPENAI_TYPES = {
    "temperature": "number",
    "top_p": "number",
    "seed": "integer",
    "response_format": "object",
    "stream_options": "object",
    "chat_template_kwargs": "object",
    "tool_choice": "string or object",
    "regex": "string",
    "ebnf": "string",
    "separate_reasoning": "boolean",
    "ignore_eos": "boolean",
    "stream": "boolean",
}
#: The same for /generate ``sampling_params``.
SAMPLING_TYPES = {
    "temperature": "number",
    "top_p": "number",
    "top_k": "integer",
    "sampling_seed": "integer",
    "regex": "string",
    "ebnf": "string",
    "json_schema": "string or object",
    "ignore_eos": "boolean",
}


def check_types(body: dict[str, Any], types: dict[str, str]) -> None:
    for name, expected in types.items():
        field(body, name, expected)


def stops(value: Any) -> list[str]:
    """``stop``: a string or a list of strings (else :class:`InvalidField`)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InvalidField("stop", value, "string")


class BadRequest(Exception):
    def __init__(self, response: web.Response) -> None:
        self.response = response


def _json_error(exc: json.JSONDecodeError | UnicodeDecodeError, path: str) -> str:
    """FastAPI/pydantic's text for a malformed body, as 0.5.23 returns it (without its file path)."""
    if isinstance(exc, json.JSONDecodeError):
        pos, msg = exc.pos, ("unexpected end of data" if exc.pos >= len(exc.doc) else exc.msg.lower())
    else:
        pos, msg = exc.start, "invalid utf-8"
    err = (
        f"{{'type': 'json_invalid', 'loc': ('body', {pos}), 'msg': 'JSON decode error', 'input': {{}}, "
        f"'ctx': {{'error': {msg!r}}}}}"
    )
    return f"1 validation error:\n  {err}\n\n  POST {path} [{err}]"


async def read_json(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json(loads=json.loads)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(error_response(_json_error(exc, request.path), "Bad Request", 400)) from None
    if not isinstance(body, dict):
        raise BadRequest(error_response("The request body must be a JSON object", "Bad Request", 400))
    return body


def length_error(state: State, n_in: int, max_new: int | None) -> str | None:
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


def fault_error(state: State) -> web.Response | None:
    p = state.cfg.faults.error_rate
    if p > 0 and state.rng.random() < p:
        return error_response(
            f"Internal server error: simulated failure (--sim-fault error-rate:{p:g})",
            "InternalServerError",
            500,
        )
    return None


async def run(
    state: State,
    request: web.Request,
    kwargs_list: list[dict[str, Any]],
    stream: bool,
    make_emit: Callable[[Request, int], EmitFn],
    body_fn: Callable[[list[Request]], Any],
    *,
    tail: bytes | None = None,
) -> web.StreamResponse:
    """Schedule one engine request per entry; answer ``body_fn(reqs)`` or one SSE stream.

    ``tail``: bytes sent once after every request's last chunk (a native batch's ``[DONE]``).
    """
    engine, faults = state.engine, state.cfg.faults
    resp: web.StreamResponse | None = None
    if stream:
        resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
        await resp.prepare(request)
    sink = Sink(resp)  # shared by a batch: its chunks interleave in one stream, like SGLang's
    reqs: list[Request] = []
    drop = faults.drop_stream_after
    for i, req_kwargs in enumerate(kwargs_list):
        req = Request(sink=sink, stream=stream, emit=collect, random_seed=state.cfg.weights_seed, **req_kwargs)
        emit: EmitFn = make_emit(req, i) if stream else collect
        if stream and drop is not None:
            emit = _dropping(emit, drop, request)
        if stream and faults.stall_stream_after is not None:
            emit = _stalling(emit, faults.stall_stream_after)
        req.emit = emit
        req.leak = stream and faults.slot_leak
        req.crosstalk = faults.cross_talk
        reqs.append(req)
    node = pd.node_of(request)  # a prefill/decode worker: bootstrap, or receive the KV, first
    if node is not None and (failure := await node.before(request, reqs)) is not None:
        return await node.fail(request, resp, reqs, failure)
    for req in reqs:
        engine.submit(req)
    try:
        for req in reqs:
            await req.done
    finally:
        for req in reqs:
            if not req.done.done() or req.finish is None:
                engine.abort(req)
    if node is not None and (failure := await node.after(request, reqs)) is not None:
        return await node.fail(request, resp, reqs, failure)  # a prefill worker's KV transfer failed
    if resp is not None and faults.stall_stream_after is not None:
        await _until_disconnected(request)  # the stream never ends: no more chunks, no [DONE]
        return resp
    if resp is not None:
        if tail is not None and not sink.closed:
            sink.push(tail)
        await sink.drained()
        if not sink.closed:
            await resp.write_eof()
        return resp
    return json_response(body_fn(reqs))


def _stalling(emit: EmitFn, after: int) -> EmitFn:
    """Pass the first ``after`` tokens' chunks, then nothing: not the last chunk, not ``[DONE]``."""
    def wrapped(req: Request, done: bool) -> None:
        if not done and len(req.out_ids) <= after:
            emit(req, done)

    return wrapped


async def _until_disconnected(request: web.Request) -> None:
    transport = request.transport
    while transport is not None and not transport.is_closing():
        await asyncio.sleep(0.1)


def _dropping(emit: EmitFn, after: int, request: web.Request) -> EmitFn:
    def wrapped(req: Request, done: bool) -> None:
        emit(req, done)
        if len(req.out_ids) >= after and not done and request.transport is not None:
            req.sink.closed = True
            request.transport.abort()  # the connection dies mid-stream, no terminating chunk

    return wrapped
