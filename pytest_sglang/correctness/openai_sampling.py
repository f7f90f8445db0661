"""OpenAI sampling options: ``n > 1``, ``seed`` reproducibility, ``logprobs`` / ``top_logprobs`` shape."""

from __future__ import annotations

import math
from typing import Any

from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.detokenize import (
    AloneDecodes,
    decode_lost,
    response_token_ids,
    skip_special_tokens,
)
from pytest_sglang.correctness.openai_checks import ask, mode
from pytest_sglang.correctness.payload import as_list
from pytest_sglang.correctness.result import CheckReport, Unsupported, excerpt
from pytest_sglang.correctness.shapes import from_reply

N_CHOICES = 3
TOP_LOGPROBS = 3
#: Slack for a logprob that should be <= 0 or equal to the best alternative (float rounding only).
LOGPROB_EPS = 1e-3


def check_n(ctx: CheckContext, route: str, stream: bool) -> CheckReport:
    """``n=3`` gives three complete choices (indices 0-2), and usage counts all of them."""
    report = CheckReport(f"{route} {mode(stream)} n={N_CHOICES}")
    tokens = ctx.settings.max_tokens
    extra: dict[str, Any] = {"n": N_CHOICES, "temperature": 0.8, "max_tokens": tokens, "ignore_eos": True}
    if stream:  # streamed chat logprobs may miss held-back tokens (see check_usage): usage counts here
        extra["stream_options"] = {"include_usage": True}
    else:
        extra["logprobs"] = True if route == "chat" else 1
    answer = ask(ctx, route, ctx.body(route, 0, **extra), stream=stream)
    report.problems += answer.problems
    indices = sorted(answer.choices)
    report.expect(indices == list(range(N_CHOICES)), f"choice indices {indices}, expected {list(range(N_CHOICES))}")
    for c in answer.choices.values():
        if not stream:
            report.expect(c.tokens == tokens, f"choice {c.index}: {c.tokens} tokens, expected {tokens}")
        report.expect(c.finish_reason == "length", f"choice {c.index}: finish_reason {c.finish_reason!r}")
    got = (answer.usage or {}).get("completion_tokens")
    report.expect(got == N_CHOICES * tokens, f"usage.completion_tokens={got}, expected {N_CHOICES} x {tokens}")
    return report


def check_seed(ctx: CheckContext, route: str) -> CheckReport:
    """The same sampled request with the same ``seed`` gives the same text.

    SGLang 0.5.23 honours ``seed`` (``sampling_seed``) only with ``--enable-deterministic-inference``
    (``sampling_batch_info.py``); without it the check is skipped, not failed.
    """
    if not ctx.features.deterministic:
        raise Unsupported("SGLang honours seed only with --enable-deterministic-inference (not set on this server)")
    report = CheckReport(f"{route} seed reproducibility")
    for i in range(min(ctx.settings.samples, 4)):
        body = ctx.body(route, i, temperature=1.0, top_p=1.0, seed=1234 + i)
        first, second = (ask(ctx, route, body).choice(0).text for _ in range(2))
        report.expect(first == second, f"prompt {i}: seed {1234 + i} gave {excerpt(first)} then {excerpt(second)}")
    return report


def check_logprobs(ctx: CheckContext, route: str, stream: bool) -> CheckReport:
    """One logprob entry per token, each <= 0, with ``top_logprobs`` alternatives led by the greedy pick."""
    report = CheckReport(f"{route} {mode(stream)} logprobs shape")
    extra: dict[str, Any] = ({"logprobs": True, "top_logprobs": TOP_LOGPROBS} if route == "chat"
                             else {"logprobs": TOP_LOGPROBS})
    for i in range(min(ctx.settings.samples, 4)):
        answer = ask(ctx, route, ctx.body(route, i, ignore_eos=True, **extra), stream=stream)
        report.problems += [f"prompt {i}: {p}" for p in answer.problems]
        c = answer.choice(0)
        if not report.expect(c.has_logprobs, f"prompt {i}: logprobs were asked for and none came back"):
            continue
        if stream and route == "chat" and (c.tokens or 0) < ctx.settings.max_tokens:
            # SGLang 0.5.23's chat stream sends a chunk only for a step whose text delta is not empty
            # (serving_chat.py, without a parser): a token with no text of its own loses its entry.
            problem = stream_losses(ctx, ctx.body(route, i, ignore_eos=True, **extra), c.logprobs)
            report.expect(problem is None, f"prompt {i}: {c.tokens} logprob entries for "
                                           f"{ctx.settings.max_tokens} tokens: {problem}")
        else:
            report.expect(c.tokens == ctx.settings.max_tokens,
                          f"prompt {i}: {c.tokens} logprob entries for {ctx.settings.max_tokens} tokens")
        for k, entry in enumerate(c.logprobs):
            problem = _entry_problem(route, entry)
            if problem:
                report.problems.append(f"prompt {i} token {k}: {problem}")
                break  # one per prompt is enough to show the fault
    return report


def stream_losses(ctx: CheckContext, body: dict[str, Any], streamed: list[dict[str, Any]]) -> str | None:
    """Compare a chat stream's logprobs with the same request unstreamed; None when it lost only textless tokens."""
    reply = ctx.post(ROUTES["chat"], {**body, "return_token_ids": True})
    batch = from_reply("chat", reply)
    if not batch.choice(0).has_logprobs:
        return f"the same request unstreamed gave no logprobs to compare with ({reply.describe()[:200]})"
    entries = batch.choice(0).logprobs
    lost, problem = lost_entries(entries, streamed)
    if problem is not None:
        return problem
    skip = skip_special_tokens(body)
    # Only a loss the token strings cannot explain needs the server's word on how the token decodes.
    unexplained = [k for k in lost if not _textless(entries[k].get("token"))]
    ids = response_token_ids(next(iter(as_list(reply.obj().get("choices"))), None))
    alone = decode_lost(ctx, unexplained, ids, skip=skip)
    return textless_drops_only(entries, streamed, alone, skip=skip)


def lost_entries(batch: list[dict[str, Any]], streamed: list[dict[str, Any]]) -> tuple[list[int], str | None]:
    """The indices of ``batch`` entries the stream does not carry (matched in order by token string).

    The problem is set when the stream carries an entry the unstreamed answer does not have.
    """
    lost: list[int] = []
    left = iter(enumerate(streamed))
    current = next(left, None)
    for k, entry in enumerate(batch):
        if current is not None and current[1].get("token") == entry.get("token"):
            current = next(left, None)
        else:
            lost.append(k)
    if current is not None:
        return lost, (f"streamed entry {current[0]} ({excerpt(current[1].get('token'))}) is not in the "
                      "unstreamed answer")
    return lost, None


def textless_drops_only(batch: list[dict[str, Any]], streamed: list[dict[str, Any]],
                        alone: AloneDecodes | None = None, *, skip: bool = True) -> str | None:
    """None when the stream lost only entries of tokens without text; else what differs.

    ``batch`` is the same greedy request unstreamed. A token has no text of its own when the server
    decodes it alone to "" under the request's ``skip_special_tokens`` (``alone``: a special token), or
    when its token string is "" or a partial UTF-8 character (shown as U+FFFD). A loss the server did
    not explain is judged by the token string alone, and the message says so.
    """
    alone = alone or AloneDecodes()
    lost, problem = lost_entries(batch, streamed)
    if problem is not None:
        return problem
    for k in lost:
        token = batch[k].get("token")
        if k in alone.texts:
            if _textless(alone.texts[k]):
                continue
            how = f"the server decodes it alone to {excerpt(alone.texts[k])} with skip_special_tokens={skip}"
        elif _textless(token):
            continue
        else:
            how = f"its token string; the server did not say how it decodes: {alone.unknown or 'not asked'}"
        return (f"the stream lost token {k} ({excerpt(token)}) that has text of its own ({how}; only tokens "
                "without text may go missing: SGLang sends no chunk for an empty text delta)")
    return None


def _textless(token: object) -> bool:
    return isinstance(token, str) and (token == "" or "\ufffd" in token)


def _entry_problem(route: str, entry: dict[str, Any]) -> str | None:
    value = entry.get("logprob")
    if not isinstance(value, (int, float)) or math.isnan(value) or value > LOGPROB_EPS:
        return f"logprob {value!r} is not a number <= 0"
    if not isinstance(entry.get("token"), str):
        return f"token {excerpt(entry.get('token'))} is not a string"
    alternatives = _alternatives(route, entry.get("top_logprobs"))
    if alternatives is None:
        return f"top_logprobs {excerpt(entry.get('top_logprobs'))} has the wrong shape"
    limit = TOP_LOGPROBS if route == "chat" else TOP_LOGPROBS + 1  # legacy completions may add the pick
    if not 1 <= len(alternatives) <= limit or (route == "chat" and len(alternatives) != TOP_LOGPROBS):
        return f"{len(alternatives)} top_logprobs, expected {TOP_LOGPROBS}"
    best = max(alternatives)
    if abs(best - value) > LOGPROB_EPS:
        return f"the greedy token's logprob {value:.4f} is not the best alternative's {best:.4f}"
    return None


def _alternatives(route: str, raw: object) -> list[float] | None:
    if route == "chat":
        if not isinstance(raw, list) or not all(isinstance(a, dict) and isinstance(a.get("token"), str) for a in raw):
            return None
        values = [a.get("logprob") for a in raw]
    else:
        if not isinstance(raw, dict):
            return None
        values = list(raw.values())
    return [float(v) for v in values] if all(isinstance(v, (int, float)) for v in values) else None
