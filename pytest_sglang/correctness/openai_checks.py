"""OpenAI API shape: /v1/models, chat and completions, batch and stream (SGLang 0.5.23 ``protocol.py``)."""

from __future__ import annotations

from typing import Any

from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.payload import as_list
from pytest_sglang.correctness.result import CheckReport, Unsupported, excerpt
from pytest_sglang.correctness.samples import each_sample
from pytest_sglang.correctness.shapes import Answer, from_reply, from_stream


def ask(ctx: CheckContext, route: str, body: dict[str, Any], *, stream: bool = False) -> Answer:
    """Send ``body`` to ``route`` (batch or stream) and assemble the answer."""
    if not stream:
        return from_reply(route, ctx.post(ROUTES[route], body))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    reply = ctx.stream(ROUTES[route], body)
    return from_stream(route, reply, include_usage=include_usage)


def mode(stream: bool) -> str:
    return "stream" if stream else "batch"


def check_models(ctx: CheckContext) -> CheckReport:
    """``GET /v1/models`` lists the served model with the fields OpenAI clients read."""
    report = CheckReport("GET /v1/models")
    reply = ctx.get("/v1/models")
    body = reply.obj()
    if not report.expect(reply.status == 200 and bool(body), f"expected HTTP 200 with JSON, got {reply.describe()}"):
        return report
    report.expect(body.get("object") == "list", f"object is {body.get('object')!r}, expected 'list'")
    data = as_list(body.get("data"))
    if not report.expect(bool(data), f"data is {excerpt(body.get('data'))}, expected a non-empty list"):
        return report
    ids = [m.get("id") for m in data if isinstance(m, dict)]
    for m in data:
        ok = isinstance(m, dict) and isinstance(m.get("id"), str) and m.get("object") == "model"
        report.expect(ok, f"entry {excerpt(m)} lacks id (string) or object 'model'")
    report.expect(ctx.features.model in ids, f"the served model {ctx.features.model!r} is not listed ({ids})")
    report.figures["models"] = len(data)
    return report


def check_shape(ctx: CheckContext, route: str, stream: bool) -> CheckReport:
    """Required fields, ``finish_reason`` never empty and in {stop, length, tool_calls}, ``[DONE]``."""
    report = CheckReport(f"{route} {mode(stream)} response shape")
    answers = each_sample(ctx.settings.samples, ctx.concurrency(),
                          lambda i: ask(ctx, route, ctx.body(route, i), stream=stream))
    for i, answer in enumerate(answers):
        report.problems += [f"prompt {i}: {p}" for p in answer.problems]
        report.expect(list(answer.choices) == [0], f"prompt {i}: choices {sorted(answer.choices)}, expected [0]")
        if route == "chat" and answer.choices:
            c = answer.choice(0)
            report.expect(not c.content_null or bool(c.tool_calls),
                          f"prompt {i}: message.content is null without tool calls")
    report.figures["requests"] = ctx.settings.samples
    return report


def _token_counts(ctx: CheckContext) -> list[int]:
    """The max_tokens values the exactness checks use: 1, the setting, and values between."""
    top = ctx.settings.max_tokens
    values = [1, top, *(1 + (7 * i) % top for i in range(1, ctx.settings.samples))]
    return list(dict.fromkeys(values))[: max(2, ctx.settings.samples)]


def _counted(ctx: CheckContext, route: str, i: int, n: int) -> tuple[Answer, int | None]:
    """A batch answer with logprobs for prompt ``i`` and ``max_tokens=n`` (``ignore_eos``): its token count.

    Streams are judged against this count, not their own logprobs: SGLang 0.5.23's chat stream drops
    the logprob entries of tokens whose text the detokenizer holds back (an incomplete UTF-8
    character, a skipped special token), which the logprobs check reports on its own.
    """
    body = ctx.body(route, i, max_tokens=n, ignore_eos=True, logprobs=True if route == "chat" else 1)
    answer = ask(ctx, route, body)
    return answer, answer.choice(0).tokens


def _usage_of(ctx: CheckContext, route: str, i: int, n: int, stream: bool) -> tuple[Answer, int | None]:
    """The answer whose usage is judged, and the tokens that arrived (batch: counted from its logprobs)."""
    batch, tokens = _counted(ctx, route, i, n)
    if not stream:
        return batch, tokens
    body = ctx.body(route, i, max_tokens=n, ignore_eos=True, stream_options={"include_usage": True})
    return ask(ctx, route, body, stream=True), tokens


def check_usage(ctx: CheckContext, route: str, stream: bool) -> CheckReport:
    """``usage`` equals the tokens returned (``stream_options.include_usage`` in streams)."""
    report = CheckReport(f"{route} {mode(stream)} usage")
    counts = _token_counts(ctx)
    answers = each_sample(len(counts), ctx.concurrency(), lambda i: _usage_of(ctx, route, i, counts[i], stream))
    for (i, n), (answer, tokens) in zip(enumerate(counts), answers, strict=True):
        report.problems += [f"prompt {i}: {p}" for p in answer.problems]
        usage = answer.usage or {}
        got, prompt, total = (usage.get(k) for k in ("completion_tokens", "prompt_tokens", "total_tokens"))
        if tokens is None:
            report.problems.append(f"prompt {i}: no logprobs came back, so the tokens cannot be counted")
            continue
        report.expect(got == tokens, f"prompt {i} (max_tokens={n}): usage.completion_tokens={got} but {tokens} tokens "
                                     f"were returned")
        ok = isinstance(prompt, int) and isinstance(got, int) and prompt > 0 and total == prompt + got
        report.expect(ok, f"prompt {i}: usage prompt_tokens={prompt} + completion_tokens={got} != total_tokens={total}")
    return report


def check_max_tokens(ctx: CheckContext, route: str, stream: bool) -> CheckReport:
    """With ``ignore_eos``, exactly ``max_tokens`` tokens come back and ``finish_reason`` is ``length``.

    A batch answer is counted from its logprobs; a stream by its ``include_usage`` usage.
    """
    report = CheckReport(f"{route} {mode(stream)} max_tokens with ignore_eos")
    counts = _token_counts(ctx)

    def one(i: int) -> tuple[Answer, object]:
        if not stream:
            return _counted(ctx, route, i, counts[i])
        answer = ask(ctx, route, ctx.body(route, i, max_tokens=counts[i], ignore_eos=True,
                                          stream_options={"include_usage": True}), stream=True)
        return answer, (answer.usage or {}).get("completion_tokens")

    answers = each_sample(len(counts), ctx.concurrency(), one)
    for (i, n), (answer, tokens) in zip(enumerate(counts), answers, strict=True):
        report.problems += [f"prompt {i}: {p}" for p in answer.problems]
        c = answer.choice(0)
        report.expect(tokens == n, f"prompt {i}: max_tokens={n} with ignore_eos returned {tokens} tokens")
        report.expect(c.finish_reason == "length", f"prompt {i}: finish_reason {c.finish_reason!r}, expected 'length'")
    report.figures["max_tokens tried"] = ",".join(map(str, counts))
    return report


def pick_stop(text: str, avoid: str = "") -> str | None:
    """A word of ``text`` that first occurs as late as possible (but not at the start).

    ``avoid``: text the model writes before ``text`` (its reasoning): a stop string applies to the
    whole output, so a word found there would stop the reasoning, not the answer.
    """
    best: tuple[int, str] | None = None
    for word in dict.fromkeys(text.split()):
        at = text.find(word)
        if at > 0 and word not in avoid and (best is None or at > best[0]):
            best = (at, word)
    return best[1] if best else None


def check_stop(ctx: CheckContext, route: str, stream: bool = False) -> CheckReport:
    """A stop string ends the output before it: ``finish_reason`` stop, the string not returned."""
    report = CheckReport(f"{route} {mode(stream)} stop strings")
    tried = 0
    for i in range(ctx.settings.samples):
        long = ctx.settings.max_tokens * 2
        free = ask(ctx, route, ctx.body(route, i, max_tokens=long, ignore_eos=True))
        text = free.choice(0).text
        stop = pick_stop(text, avoid=free.choice(0).reasoning)
        if free.problems or stop is None:
            continue  # no usable word: the next prompt gives one
        tried += 1
        expected = text[: text.find(stop)]
        got = ask(ctx, route, ctx.body(route, i, max_tokens=long, ignore_eos=True, stop=[stop]), stream=stream)
        c = got.choice(0)
        report.problems += [f"prompt {i}: {p}" for p in got.problems]
        report.expect(stop not in c.text, f"prompt {i}: stop {stop!r} was returned in {excerpt(c.text)}")
        report.expect(c.finish_reason == "stop", f"prompt {i}: finish_reason {c.finish_reason!r} with stop {stop!r}")
        report.expect(c.text == expected, f"prompt {i}: with stop {stop!r} expected {excerpt(expected)} "
                                          f"(the greedy text up to it), got {excerpt(c.text)}")
        if c.matched_stop is not None:  # SGLang's extension field
            report.expect(c.matched_stop == stop, f"prompt {i}: matched_stop {c.matched_stop!r}, expected {stop!r}")
    if not tried:
        raise Unsupported("no greedy output of the model has a word to stop at (each was empty or one run of "
                          "characters), so stop strings cannot be checked with it")
    report.figures["stop strings tried"] = tried
    return report
