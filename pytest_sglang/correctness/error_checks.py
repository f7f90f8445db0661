"""Errors, not hangs: bad requests get a prompt 4xx with SGLang's message, never a 500 or silence.

Facts from SGLang 0.5.23: a prompt at or over the context length raises ``ValueError("The input (N
tokens) is longer than the model's context length (M tokens).")`` in the tokenizer manager, which the
OpenAI and native routes answer with 400. A *plain* unknown ``model`` name is served anyway
(``serving_base._parse_model_parameter`` ignores it), so the check uses the form SGLang does validate:
``<model>:<adapter>`` names a LoRA adapter, and an unknown one is a 400.
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.http import Reply
from pytest_sglang.correctness.prompts import seed_token_ids
from pytest_sglang.correctness.result import CheckReport, Unsupported, excerpt

MISSING_ADAPTER = "pytest-sglang-no-such-adapter"
#: Words past the context length in the chat prompt: a chat template adds tokens, never removes them.
_EXTRA_WORDS = 64


def _expect_4xx(report: CheckReport, what: str, reply: Reply, *, status: int | None = None,
                says: str | None = None) -> None:
    if reply.status is None:
        report.problems.append(f"{what}: {reply.failure} (a hang, not an error answer)")
        return
    wanted = f"HTTP {status}" if status else "a 4xx answer"
    ok = reply.status == status if status else 400 <= reply.status < 500
    if not report.expect(ok, f"{what}: expected {wanted}, got {reply.describe()}"):
        return
    if says is not None:
        report.expect(says in reply.text, f"{what}: the error does not say {says!r}: {excerpt(reply.text, 240)}")
    report.figures[f"{what} s"] = round(reply.elapsed_s, 3)


def check_context_length(ctx: CheckContext) -> CheckReport:
    """A prompt longer than the context length gets a 400 naming the context length, on every route."""
    limit = ctx.features.context_length
    if limit is None:
        raise Unsupported("the server reports no context length (/v1/models max_model_len, server_info context_length)")
    report = CheckReport("prompt longer than the context length")
    seed = seed_token_ids(ctx.client, 1, 32, timeout_s=ctx.settings.request_timeout_s,
                          one_by_one=ctx.features.gateway is not None)[0]
    ids = (seed * (limit // len(seed) + 2))[: limit + 16]
    says = "context length"
    native = {"input_ids": ids, "sampling_params": {"max_new_tokens": 4}}
    _expect_4xx(report, "/generate input_ids", ctx.post("/generate", native), status=400, says=says)
    if ctx.features.gateway is None:
        completions = {"model": ctx.features.model, "prompt": ids, "max_tokens": 4}
        reply = ctx.post(ROUTES["completions"], completions)
        _expect_4xx(report, "/v1/completions token ids", reply, status=400, says=says)
    else:  # the gateway validates an OpenAI prompt as text (token ids are a 400 of its own, not SGLang's)
        report.figures["/v1/completions token ids"] = f"not sent: the gateway ({ctx.features.gateway}) takes text"
    chat = ctx.body("chat", 0, messages=[{"role": "user", "content": "hello " * (limit + _EXTRA_WORDS)}], max_tokens=4)
    _expect_4xx(report, "/v1/chat/completions", ctx.post(ROUTES["chat"], chat), status=400, says=says)
    report.figures["context_length"] = limit
    return report


def check_malformed_json(ctx: CheckContext) -> CheckReport:
    """A body that is not JSON gets a 4xx on every generation route."""
    report = CheckReport("malformed JSON body")
    for path in (ROUTES["chat"], ROUTES["completions"], "/generate"):
        _expect_4xx(report, path, ctx.post(path, b'{"model": "x", "messages": [{'))
    return report


def check_unknown_model(ctx: CheckContext) -> CheckReport:
    """A request for a model the server does not serve (an unknown LoRA adapter) gets a 4xx."""
    report = CheckReport("unknown model adapter")
    model = f"{ctx.features.model}:{MISSING_ADAPTER}"
    for route in ("chat", "completions"):
        _expect_4xx(report, f"{route} model={model!r}", ctx.post(ROUTES[route], ctx.body(route, 0, model=model)))
    return report


def check_negative_max_tokens(ctx: CheckContext) -> CheckReport:
    """``max_tokens=-1`` (``max_new_tokens`` natively) gets a 4xx, not a 500 or a generation."""
    report = CheckReport("negative max_tokens")
    for route in ("chat", "completions"):
        _expect_4xx(report, f"{route} max_tokens=-1", ctx.post(ROUTES[route], ctx.body(route, 0, max_tokens=-1)))
    native: dict[str, Any] = ctx.native(0, max_new_tokens=-1)
    _expect_4xx(report, "/generate max_new_tokens=-1", ctx.post("/generate", native))
    return report
