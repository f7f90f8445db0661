"""/v1/completions and /v1/chat/completions: ``n`` choices, tools, reasoning, grammars, logprobs."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from aiohttp import web

from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.failures.production import with_template
from pytest_sglang.simulator.front import lora, vocab
from pytest_sglang.simulator.front.openai.body import ChoiceOptions, openai_object
from pytest_sglang.simulator.front.openai.features import OpenAIOptions, RequestError, read_options
from pytest_sglang.simulator.front.openai.stream import ChoiceGroup, OpenAIEmitter
from pytest_sglang.simulator.front.respond import (
    SSE_HEADERS,
    BadRequest,
    error_response,
    fault_error,
    length_error,
    read_json,
    run,
    stops,
    stream_error,
)
from pytest_sglang.simulator.images import multimodal
from pytest_sglang.simulator.images import reader as image_input
from pytest_sglang.simulator.images.multimodal import Prepared
from pytest_sglang.simulator.images.reader import ImageRefused
from pytest_sglang.simulator.model import answer, grammar
from pytest_sglang.simulator.model.grammar import ConstraintError
from pytest_sglang.simulator.model.serving import Serving, sample_key, serving
from pytest_sglang.simulator.state import State

__all__ = ["openai"]


def _prompt(body: dict[str, Any], chat: bool) -> tuple[list[int], str]:
    """(token ids, prompt text) of the request."""
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
        text = tokenizer.render_chat(messages)
        return tokenizer.encode(text), text
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if prompt is None or prompt == "" or prompt == []:
        raise BadRequest(error_response("Prompt cannot be empty", "BadRequestError", 400))
    if isinstance(prompt, list) and all(isinstance(i, int) for i in prompt):
        return list(prompt), ""
    if not isinstance(prompt, str):
        raise BadRequest(error_response("The simulator serves one prompt per request", "BadRequestError", 400))
    return tokenizer.encode(prompt), prompt


def _choices(state: State, srv: Serving, opts: OpenAIOptions, value: Any) -> list[ChoiceOptions]:
    """How each choice is written (its own script: its own call ids) and reported."""
    faults = state.cfg.faults
    ask = opts.ask
    if opts.constraint is not None:
        ask = replace(ask, constrained=opts.constraint.answer(value), schema=opts.constraint.schema)
    return [
        ChoiceOptions(
            script=answer.plan(ask, srv.parsers, faults),
            top_logprobs=opts.top_logprobs,
            lp_drift=faults.cache_logprob_drift,
            empty_finish=faults.empty_finish_reason,
            usage_extra=int(faults.usage_off_by_one),
        )
        for _ in range(opts.n)
    ]


async def _in_band(request: web.Request, message: str) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers=SSE_HEADERS)
    await resp.prepare(request)
    await resp.write(stream_error(message))
    return resp


async def _with_images(
    state: State, body: dict[str, Any], ids: list[int]
) -> tuple[list[int], Prepared | None]:
    """The chat's image parts as the served model takes them (BadRequest: 0.5.23's refusal)."""
    messages = body.get("messages")
    try:
        sources = image_input.chat_image_sources(messages if isinstance(messages, list) else [])
    except ValueError as exc:
        raise BadRequest(error_response(str(exc), "Bad Request", 400)) from None
    if not sources:
        return ids, None
    processor = state.cfg.vision
    if processor is None:  # serving_chat.py _validate_media_content (checked against real 0.5.23)
        raise BadRequest(error_response("Model only supports text input; received unsupported content type "
                                        "'image_url'.", "BadRequest", 400))
    faults = state.cfg.faults
    try:
        prepared = await multimodal.prepare_async(
            state.media,
            processor,
            multimodal.render_chat(messages if isinstance(messages, list) else [], processor.placeholder),
            sources,
            prefill_tok_s=state.engine.speed.prefill_tok_s,
            miscount=faults.image_tokens_miscounted,
            ignored=faults.image_ignored,
            slow=faults.vision_slow,
        )
    except ImageRefused as exc:
        if exc.status == 500:  # serving_base's catch-all
            raise BadRequest(error_response(f"Internal server error: {exc.message}", "InternalServerError",
                                            500)) from None
        raise BadRequest(error_response(exc.message, "BadRequestError", exc.status)) from None
    return prepared.ids, prepared


async def openai(state: State, request: web.Request, *, chat: bool) -> web.StreamResponse:
    if request.content_type != "application/json":
        return error_response("Unsupported Media Type: Only 'application/json' is allowed", "Bad Request", 400)
    srv = serving(state)
    try:
        body = await read_json(request)
        ids, text = _prompt(body, chat)
        opts = read_options(body, chat=chat, prompt=text, reasoning_parser=srv.parsers.reasoning)
        ids, images = await _with_images(state, body, ids) if chat else (ids, None)
    except BadRequest as exc:
        return exc.response
    except RequestError as exc:
        return error_response(exc.message, exc.err_type, exc.status)
    if images is not None:
        opts = replace(opts, ask=replace(opts.ask, sees=images.sees))
    # Raised before the first chunk, which 0.5.23 awaits before answering a stream: a 400 in both modes.
    refused = lora.refusal(state.cfg.args, lora.from_model(body.get("model"), state.cfg.served_model_name))
    if refused is not None:
        return error_response(refused, "BadRequestError", 400)
    msg = length_error(state, len(ids), opts.max_new)
    if msg:
        return error_response(msg, "BadRequestError", 400)
    if not chat and isinstance(body.get("prompt"), list):  # token ids, taken as sent (text is tokenized)
        vocab.crash_on_unknown_ids(state, [ids])
    fault = fault_error(state)
    if fault is not None:
        return fault
    stream = bool(body.get("stream"))
    value = None
    if opts.constraint is not None:
        try:
            value = grammar.compile_instance(opts.constraint, srv.grammar_backend)
        except ConstraintError as exc:  # compiled by the scheduler: after a stream has started
            return await _in_band(request, str(exc)) if stream else error_response(str(exc), "BadRequestError", 400)
    encoder_s = images.encoder_s if images is not None else 0.0
    return await _serve(state, request, body, ids, srv, opts, value, chat=chat, stream=stream, encoder_s=encoder_s)


def _engine_requests(
    state: State,
    body: dict[str, Any],
    ids: list[int],
    srv: Serving,
    opts: OpenAIOptions,
    choices: list[ChoiceOptions],
    *,
    chat: bool,
    encoder_s: float = 0.0,
) -> list[dict[str, Any]]:
    """One engine request per choice (each with its own id and sampling key)."""
    limit = opts.max_new if opts.max_new is not None else state.cfg.context_len - len(ids)
    # each token's text is kept only where logprobs or the parsers need it
    record = opts.top_logprobs is not None or any(c.script is not None and c.script.routed for c in choices)
    return [
        dict(
            rid=str(body.get("rid") or uuid.uuid4().hex) if i == 0 else uuid.uuid4().hex,
            prompt_ids=with_template(ids, state.cfg.faults.production),
            max_new=limit,
            ignore_eos=bool(body.get("ignore_eos", False)),
            stop=stops(body.get("stop")),
            endpoint="/v1/chat/completions" if chat else "/v1/completions",
            script=c.script.tokens if c.script is not None else None,
            sample_key=sample_key(
                opts.sampled, opts.seed, deterministic=srv.deterministic, draw=state.rng.getrandbits(32)
            ),
            drift=state.cfg.faults.token_drift,
            record_pieces=record,
            encoder_s=encoder_s if i == 0 else 0.0,  # the images are encoded once for all choices
        )
        for i, c in enumerate(choices)
    ]


async def _serve(
    state: State,
    request: web.Request,
    body: dict[str, Any],
    ids: list[int],
    srv: Serving,
    opts: OpenAIOptions,
    value: Any,
    *,
    chat: bool,
    stream: bool,
    encoder_s: float = 0.0,
) -> web.StreamResponse:
    a, model, created = state.cfg.args, str(body.get("model", "default")), int(time.time())
    choices = _choices(state, srv, opts, value)
    kwargs_list = _engine_requests(state, body, ids, srv, opts, choices, chat=chat, encoder_s=encoder_s)
    group = ChoiceGroup(
        chat=chat,
        model=model,
        created=created,
        include_usage=opts.include_usage or a.stream_response_default_include_usage,
        cache_report=a.enable_cache_report,
        n=opts.n,
    )
    return await run(
        state,
        request,
        kwargs_list,
        stream,
        lambda r, i: OpenAIEmitter(
            r,
            group=group,
            index=i,
            opts=choices[i],
            continuous_usage=opts.continuous_usage,
            cache_report=a.enable_cache_report,
            interval=a.stream_interval,
        ),
        lambda reqs: openai_object(
            list(zip(reqs, choices, strict=True)),
            chat=chat,
            model=model,
            created=created,
            cache_report=a.enable_cache_report,
        ),
    )
