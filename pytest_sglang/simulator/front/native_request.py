"""What a /generate request says: its prompts, sampling parameters, ``n``, grammar and logprobs, read and checked.

Bad values get 0.5.23's 400 bodies (:func:`native_error`); the route itself is :mod:`.native`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from aiohttp import web

from pytest_sglang.jsontypes import JSONObject
from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.front.openai.features import MAX_N
from pytest_sglang.simulator.front.respond import (
    SAMPLING_TYPES,
    BadRequest,
    InvalidField,
    check_types,
    field,
    json_response,
    read_json,
    stops,
)
from pytest_sglang.simulator.model import grammar
from pytest_sglang.simulator.model.grammar import Constraint, ConstraintError

__all__ = ["SAMPLING_KEYS", "NativeRequest", "check_native", "native_error", "read_native"]

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


def native_error(message: str) -> BadRequest:
    return BadRequest(json_response({"error": {"message": message}}, 400))


def _native_prompts(body: dict[str, Any]) -> tuple[list[list[int]], list[str], bool]:
    """(token ids of every prompt, their texts ("" for ids), whether the request is a batch)."""
    ids = field(body, "input_ids", "list")
    if ids is not None:
        rows = [one for one in ids if _all_ints(one)]
        if ids and len(rows) == len(ids):
            return [list(one) for one in rows], [""] * len(ids), True
        if not _all_ints(ids):
            raise InvalidField("input_ids", ids, "list")
        return [list(ids)], [""], False
    text = body.get("text")
    if text is None:
        raise native_error("Either text, input_ids or input_embeds should be provided.")
    if isinstance(text, list):
        return [tokenizer.encode(str(t)) for t in text], [str(t) for t in text], True
    return [tokenizer.encode(str(text))], [str(text)], False


def _all_ints(values: object) -> TypeGuard[list[int]]:
    return isinstance(values, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in values)


def _int_param(sp: dict[str, Any], name: str, low: int) -> int | None:
    """An integer sampling parameter checked like SGLang's SamplingParams.verify()."""
    value = sp.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise native_error(f"{name} must be an integer, got {value!r}.")
    if value < low:
        raise native_error(f"{name} must be at least {low}, got {value}.")
    return value


def _logprob(body: dict[str, Any]) -> tuple[int, int, bool] | None:
    """``return_logprob``'s (logprob_start_len, top_logprobs_num, return_text_in_logprobs), or None."""
    start, top = field(body, "logprob_start_len", "integer"), field(body, "top_logprobs_num", "integer")
    if not body.get("return_logprob"):
        return None
    return (-1 if start is None else start, top or 0, bool(body.get("return_text_in_logprobs")))


@dataclass(frozen=True)
class NativeRequest:
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


async def read_native(request: web.Request) -> NativeRequest:
    body = await read_json(request)
    try:
        return check_native(body)
    except InvalidField as exc:
        raise native_error(str(exc)) from None


def check_native(body: JSONObject) -> NativeRequest:
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
        raise native_error(f"n x prompts must be at most {MAX_N} (the simulator's bound on one request), got {n}.")
    try:
        constraint = grammar.from_native(sp)
    except ConstraintError as exc:
        raise native_error(str(exc)) from None
    return NativeRequest(body, sp, prompts, texts, batch, max_new, n, constraint, _logprob(body))
