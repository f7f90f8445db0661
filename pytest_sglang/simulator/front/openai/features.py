"""The options of an OpenAI request, read and checked the way SGLang 0.5.23 does.

Messages and error types are 0.5.23's (recorded from the real server): a negative chat
``max_tokens`` is ``max_new_tokens must be at least 0, got -1.`` (``BadRequestError``); a completion
``max_tokens`` of 0 or less fails pydantic validation (``Bad Request``); ``n: 0`` fails with Python's
``range() arg 3 must not be zero`` (``BadRequest``). ``model`` is not checked (0.5.23 echoes any name).
How ``temperature`` and ``seed`` act: :mod:`~pytest_sglang.simulator.model.serving`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_sglang.simulator.front.respond import OPENAI_TYPES, InvalidField, check_types, field, stops
from pytest_sglang.simulator.model import grammar, reasoning, toolcalls
from pytest_sglang.simulator.model.answer import Ask
from pytest_sglang.simulator.model.grammar import Constraint, ConstraintError
from pytest_sglang.simulator.model.serving import sampled

__all__ = ["OpenAIOptions", "RequestError", "read_options"]


#: The most choices one request may ask for: 0.5.23 sets no bound, the simulator must not run out of memory.
MAX_N = 1024


class RequestError(Exception):
    """A request 0.5.23 refuses with an ErrorResponse: its message, ``type`` and status."""

    def __init__(self, message: str, err_type: str = "BadRequestError", status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.err_type = err_type
        self.status = status


@dataclass(frozen=True)
class OpenAIOptions:
    n: int
    #: the max tokens asked for (None: chat without a limit)
    max_new: int | None
    #: top-k of requested logprobs (None: not requested)
    top_logprobs: int | None
    sampled: bool
    seed: int | None
    include_usage: bool
    continuous_usage: bool
    constraint: Constraint | None
    ask: Ask


def _pydantic(path: str, field: str, value: Any, message: str) -> RequestError:
    return RequestError(
        f"1 validation error:\n  {{'type': 'value_error', 'loc': ('body', {field!r}), 'msg': 'Value error, "
        f"{message}', 'input': {value!r}, 'ctx': {{'error': ValueError({message!r})}}}}\n\n  POST {path}",
        "Bad Request",
    )


def _max_new(body: dict[str, Any], chat: bool) -> int | None:
    if chat:
        value = body.get("max_completion_tokens") or body.get("max_tokens")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise RequestError(f"max_new_tokens must be an integer, got {value!r}.")
        if value is not None and value < 0:
            raise RequestError(f"max_new_tokens must be at least 0, got {value}.")
        return value
    value = body.get("max_tokens", 16)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _pydantic("/v1/completions", "max_tokens", value, "max_tokens must be positive")
    return int(value)


def _n(body: dict[str, Any]) -> int:
    n = body.get("n", 1)
    if n is None:
        return 1
    if isinstance(n, bool) or not isinstance(n, int):
        raise RequestError(f"n must be an integer, got {n!r}.", "Bad Request")
    if n == 0:
        raise RequestError("range() arg 3 must not be zero", "BadRequest")
    if n < 0:
        raise RequestError(f"n must be at least 1, got {n}.", "BadRequest")
    if n > MAX_N:
        raise RequestError(f"n must be at most {MAX_N} (the simulator's bound on one request), got {n}.")
    return n


def _top_logprobs(body: dict[str, Any], chat: bool) -> int | None:
    if chat:
        top = field(body, "top_logprobs", "integer")
        if not body.get("logprobs"):
            return None  # top_logprobs alone returns no logprobs in 0.5.23
        return int(top or 0)
    value = field(body, "logprobs", "integer")
    return None if value is None else int(value)


def read_options(body: dict[str, Any], *, chat: bool, prompt: str, reasoning_parser: str | None) -> OpenAIOptions:
    """The request's options; raises :class:`RequestError` with 0.5.23's message and type."""
    try:
        return _read(body, chat=chat, prompt=prompt, reasoning_parser=reasoning_parser)
    except InvalidField as exc:
        raise RequestError(
            f"{exc}\n\n  POST /v1/{'chat/completions' if chat else 'completions'}", "Bad Request"
        ) from None


def _read(body: dict[str, Any], *, chat: bool, prompt: str, reasoning_parser: str | None) -> OpenAIOptions:
    check_types(body, OPENAI_TYPES)
    if chat:
        field(body, "logprobs", "boolean")
    max_new, n = _max_new(body, chat), _n(body)
    stops(body.get("stop"))
    bad_format = grammar.check_response_format(body)
    if bad_format:
        raise RequestError(f"{bad_format}\n\n  POST /v1/{'chat/completions' if chat else 'completions'}", "Bad Request")
    try:
        constraint = grammar.from_openai(body)
    except ConstraintError as exc:
        raise RequestError(str(exc)) from None
    if chat and constraint is not None and body.get("tools") and toolcalls.forced(body.get("tool_choice")):
        raise RequestError(
            "tool_choice 'required' or a named tool cannot be combined with response_format, regex, or ebnf: "
            "the tool-call constraint and the output constraint cannot both be honored."
        )
    stream_options = body.get("stream_options")
    opts: dict[str, Any] = stream_options if isinstance(stream_options, dict) else {}
    ask = Ask(
        prompt=prompt,
        chat=chat,
        tools=field(body, "tools", "list") if chat else None,
        tool_choice=body.get("tool_choice", "auto"),
        thinking=chat and reasoning.thinks(body, reasoning_parser),
        separate_reasoning=bool(body.get("separate_reasoning", True)),
    )
    seed = body.get("seed")
    return OpenAIOptions(
        n=n,
        max_new=max_new,
        top_logprobs=_top_logprobs(body, chat),
        sampled=sampled(body.get("temperature"), body.get("top_k")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        include_usage=bool(opts.get("include_usage")),
        continuous_usage=bool(opts.get("continuous_usage_stats")),
        constraint=constraint,
        ask=ask,
    )
