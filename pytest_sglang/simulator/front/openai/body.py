"""Non-streaming OpenAI bodies (``n`` choices) and what every OpenAI response shares.

A finished engine request becomes one choice: its text split by the server's parsers into
``content``, ``reasoning_content`` and ``tool_calls`` (see :mod:`~pytest_sglang.simulator.model.script`), its ``finish_reason``
(``tool_calls`` when a call was parsed and the model stopped), and its logprobs when asked for.
``usage`` counts the prompt once and the completion tokens of every choice, as 0.5.23 does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_sglang.simulator.model import logprobs
from pytest_sglang.simulator.model.script import CONTENT, REASONING, TOOL_ARGS, Script
from pytest_sglang.simulator.scheduling.request import Request

__all__ = ["ChoiceOptions", "Parts", "finish", "openai_object", "parts", "usage"]

Rows = list[tuple[float | None, int, str | None, list[tuple[float, int, str]]]]


@dataclass(frozen=True)
class ChoiceOptions:
    """How one engine request is reported (per choice: each has its own script and call id)."""

    script: Script | None = None
    #: top-k of the requested logprobs (0: only the token's own), None: not requested
    top_logprobs: int | None = None
    #: --sim-fault cache-logprob-drift: the shift of logprobs served from a cached prefix
    lp_drift: float = 0.0
    #: --sim-fault empty-finish-reason
    empty_finish: bool = False
    #: --sim-fault usage-off-by-one: added to the completion tokens reported
    usage_extra: int = 0


def lp_shift(req: Request, opts: ChoiceOptions) -> float:
    return -opts.lp_drift if opts.lp_drift and req.cached else 0.0


def output_rows(req: Request, opts: ChoiceOptions, since: int = 0, until: int | None = None) -> Rows:
    """Logprob rows of output tokens ``since:until`` (the context is the prompt + earlier output)."""
    end = len(req.out_ids) if until is None else until
    ids = req.prompt_ids + req.out_ids[:end]
    texts = (req.pieces or [])[since:end]
    top = opts.top_logprobs or 0
    return logprobs.scored(ids, len(req.prompt_ids) + since, texts, top=top, shift=lp_shift(req, opts))


@dataclass(frozen=True)
class Parts:
    content: str
    reasoning: str | None = None
    tool_calls: list[dict[str, Any]] | None = None


def _complete(req: Request, script: Script) -> bool:
    return len(req.out_ids) >= len(script)


def parts(req: Request, script: Script | None) -> Parts:
    """The choice's text as the server's parsers split it (everything is content when unrouted)."""
    if script is None or not script.routed or req.pieces is None:
        return Parts(req.text)
    content: list[str] = []
    thought: list[str] = []
    budget = len(req.text)  # a matched stop string was cut from req.text: cut it from the channels too
    for k, piece in enumerate(req.pieces):
        piece, budget = piece[:max(0, budget)], budget - len(piece)
        channel = script.channel(k)
        if channel == CONTENT:
            content.append(piece)
        elif channel == REASONING:
            thought.append(piece)
    calls = None
    if script.tool_calls:
        if not _complete(req, script):  # a truncated call does not parse: the text stays content
            return Parts("".join(req.pieces))
        spec = script.tool_calls[0]
        args = "".join(p for k, p in enumerate(req.pieces) if script.channel(k) == TOOL_ARGS)
        calls = [
            {"id": spec.call_id, "index": 0, "type": "function", "function": {"name": spec.name, "arguments": args}}
        ]
    return Parts("".join(content), "".join(thought) or None, calls)


def finish(req: Request, got: Parts, *, empty: bool) -> tuple[str, Any]:
    """(finish_reason, matched_stop) of an OpenAI choice."""
    assert req.finish is not None
    kind = req.finish["type"]
    if empty:
        return "", None
    if kind == "stop" and got.tool_calls:
        return "tool_calls", None
    if kind in ("length", "abort"):
        return kind, None
    return "stop", req.finish.get("matched")


def usage(choices: list[tuple[Request, ChoiceOptions]], *, cache_report: bool) -> dict[str, Any]:
    first = choices[0][0]
    p = len(first.prompt_ids)
    c = sum(len(r.out_ids) + o.usage_extra for r, o in choices)
    thought = sum(min(o.script.reasoning_tokens, len(r.out_ids)) for r, o in choices if o.script)
    return {
        "prompt_tokens": p,
        "total_tokens": p + c,
        "completion_tokens": c,
        "prompt_tokens_details": {"cached_tokens": first.cached} if cache_report else None,
        "reasoning_tokens": thought,
        "completion_tokens_details": {"reasoning_tokens": thought} if thought else None,
    }


def _choice(index: int, req: Request, opts: ChoiceOptions, *, chat: bool) -> dict[str, Any]:
    got = parts(req, opts.script)
    reason, matched = finish(req, got, empty=opts.empty_finish)
    choice: dict[str, Any] = {"index": index}
    if chat:
        message: dict[str, Any] = {"role": "assistant", "content": got.content, "reasoning_content": got.reasoning}
        if got.tool_calls is not None:
            message["tool_calls"] = got.tool_calls
        choice["message"] = message
    else:
        choice["text"] = got.content
    lp = None
    if opts.top_logprobs is not None:
        rows = output_rows(req, opts)
        lp = logprobs.chat_logprobs(rows) if chat else logprobs.completion_logprobs(rows)
    choice.update(logprobs=lp, finish_reason=reason, matched_stop=matched)
    return choice


def openai_object(
    choices: list[tuple[Request, ChoiceOptions]], *, chat: bool, model: str, created: int, cache_report: bool
) -> dict[str, Any]:
    first = choices[0][0]
    n = len(first.out_ids)
    return {
        "id": first.rid,
        "object": "chat.completion" if chat else "text_completion",
        "created": created,
        "model": model,
        "choices": [_choice(i, r, o, chat=chat) for i, (r, o) in enumerate(choices)],
        "usage": usage(choices, cache_report=cache_report),
        "metadata": {"weight_version": "default", "weight_versions": [{"version": "default", "start": 0, "end": n}]},
    }
