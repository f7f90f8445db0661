"""OpenAI API shape: what OpenAI clients rely on, on chat and completions, batch and stream."""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext
from pytest_sglang.correctness import openai_checks as api
from pytest_sglang.correctness import openai_sampling as sampling

ROUTE_MODES = [pytest.param(r, s, id=f"{r}-{'stream' if s else 'batch'}")
               for r in ("chat", "completions") for s in (False, True)]


def test_models(sglang_acceptance: CheckContext) -> None:
    """``/v1/models`` lists the served model."""
    run(api.check_models, sglang_acceptance)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_response_shape(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """Required fields; finish_reason never empty and in {stop, length, tool_calls}; [DONE] ends a stream."""
    run(api.check_shape, sglang_acceptance, route, stream)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_usage(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """``usage`` equals the tokens that arrived (``stream_options.include_usage`` in streams)."""
    run(api.check_usage, sglang_acceptance, route, stream)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_max_tokens_exact(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """``max_tokens`` is honoured exactly with ``ignore_eos``."""
    run(api.check_max_tokens, sglang_acceptance, route, stream)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_stop_strings(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """A stop string ends the output and is not returned."""
    run(api.check_stop, sglang_acceptance, route, stream)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_n_choices(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """``n > 1`` gives that many complete choices, all counted in usage."""
    run(sampling.check_n, sglang_acceptance, route, stream)


@pytest.mark.parametrize("route", ["chat", "completions"])
def test_seed(sglang_acceptance: CheckContext, route: str) -> None:
    """The same ``seed`` reproduces a sampled answer (needs --enable-deterministic-inference)."""
    run(sampling.check_seed, sglang_acceptance, route)


@pytest.mark.parametrize(("route", "stream"), ROUTE_MODES)
def test_logprobs(sglang_acceptance: CheckContext, route: str, stream: bool) -> None:
    """One logprob entry per token, ``top_logprobs`` of the asked size led by the greedy pick."""
    run(sampling.check_logprobs, sglang_acceptance, route, stream)
