"""Every check passes on a fault-free simulator and fails, saying what it saw, on the matching fault."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_sglang.correctness import (
    CheckContext,
    CheckReport,
    Unsupported,
    concurrency,
    error_checks,
    kl,
    native_checks,
    reasoning,
    slots,
    structured,
    tools,
)
from pytest_sglang.correctness import openai_checks as api
from pytest_sglang.correctness import openai_sampling as sampling
from pytest_sglang.simulator import Simulator
from tests.conftest import SimFactory
from tests.correctness.conftest import FULL, QUICK, ContextFactory

Check = Callable[[CheckContext], CheckReport]

PASSING: dict[str, Check] = {
    "models": api.check_models,
    **{f"shape {r} {s}": (lambda c, r=r, s=s: api.check_shape(c, r, s))
       for r in ("chat", "completions") for s in (False, True)},
    **{f"usage {r} {s}": (lambda c, r=r, s=s: api.check_usage(c, r, s))
       for r in ("chat", "completions") for s in (False, True)},
    **{f"max_tokens {r} {s}": (lambda c, r=r, s=s: api.check_max_tokens(c, r, s))
       for r in ("chat", "completions") for s in (False, True)},
    # chat stop strings: test_chat_stop_strings_with_a_reasoning_parser (the thought needs room)
    "stop completions": lambda c: api.check_stop(c, "completions"),
    "stop completions stream": lambda c: api.check_stop(c, "completions", True),
    "n chat": lambda c: sampling.check_n(c, "chat", False),
    "n completions stream": lambda c: sampling.check_n(c, "completions", True),
    "logprobs chat": lambda c: sampling.check_logprobs(c, "chat", False),
    "logprobs completions stream": lambda c: sampling.check_logprobs(c, "completions", True),
    # with a reasoning parser: markup tokens send no text; their entries come in a chunk of their own
    "logprobs chat stream": lambda c: sampling.check_logprobs(c, "chat", True),
    "native": lambda c: native_checks.check_native(c, False),
    "native stream": lambda c: native_checks.check_native(c, True),
    "native agreement": native_checks.check_native_agrees,
    "native stop": native_checks.check_native_stop,
    "context length": error_checks.check_context_length,
    "malformed json": error_checks.check_malformed_json,
    "negative max_tokens": error_checks.check_negative_max_tokens,
    "disconnect": slots.check_disconnect,
    "cross-talk": concurrency.check_cross_talk,
    "batch invariance": concurrency.check_batch_invariance,
    "cache logprobs": kl.check_cache_logprobs,
    "json_schema": lambda c: structured.check_structured(c, "json_schema"),
    "json_schema stream": lambda c: structured.check_structured(c, "json_schema", True),
    "regex": lambda c: structured.check_structured(c, "regex"),
    "ebnf": lambda c: structured.check_structured(c, "ebnf"),
    "tool calls": lambda c: tools.check_tool_calls(c, False),
    "tool calls stream": lambda c: tools.check_tool_calls(c, True),
    "reasoning": lambda c: reasoning.check_reasoning(c, False),
    "reasoning stream": lambda c: reasoning.check_reasoning(c, True),
}


@pytest.mark.parametrize("name", list(PASSING))
def test_check_passes_on_a_fault_free_simulator(full_sim: Simulator, check_context: ContextFactory,
                                                name: str) -> None:
    report = PASSING[name](check_context(full_sim))
    assert report.ok, report.message()


# (fault, check, text the failure must contain): each --sim-fault is caught by its check.
FAULTS = [
    ("empty-finish-reason", lambda c: api.check_shape(c, "chat", True), 'finish_reason is ""'),
    ("empty-finish-reason", lambda c: api.check_shape(c, "completions", False), 'finish_reason is ""'),
    ("usage-off-by-one", lambda c: api.check_usage(c, "completions", False),
     "usage.completion_tokens=9 but 8 tokens were returned"),
    ("usage-off-by-one", lambda c: api.check_usage(c, "chat", True),
     "usage.completion_tokens=9 but 8 tokens were returned"),
    ("usage-off-by-one", lambda c: native_checks.check_native(c, False),
     "meta_info.completion_tokens=9 but 8 output_ids arrived"),
    ("cross-talk", concurrency.check_cross_talk, "'s tokens: together"),
    ("cache-logprob-drift:0.5", kl.check_cache_logprobs, "between cached and cold logprobs exceeds max_kl 0.02"),
    ("slot-leak", slots.check_disconnect, "after the client went away (the slot is not freed)"),
    ("json-schema-violation", lambda c: structured.check_structured(c, "json_schema"), "violates the schema"),
    ("tool-call-as-text", lambda c: tools.check_tool_calls(c, False), "no tool_calls; finish_reason 'stop'"),
    ("tool-call-as-text", lambda c: tools.check_tool_calls(c, True), "no tool_calls; finish_reason 'stop'"),
    ("reasoning-in-content", lambda c: reasoning.check_reasoning(c, False), "content carries <think>"),
    ("reasoning-in-content", lambda c: reasoning.check_reasoning(c, True), "reasoning_content is empty"),
]


@pytest.mark.parametrize(("fault", "check", "says"), FAULTS,
                         ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(FAULTS)])
def test_check_fails_on_its_fault(sim_factory: SimFactory, check_context: ContextFactory, fault: str,
                                  check: Check, says: str) -> None:
    report = check(check_context(sim_factory(*FULL, "--sim-fault", fault)))
    assert not report.ok
    assert says in report.message()


def test_unsupported_checks_say_why(sim_factory: SimFactory, check_context: ContextFactory) -> None:
    ctx = check_context(sim_factory("--grammar-backend", "none"))
    for check, reason in [(lambda c: tools.check_tool_calls(c, False), "no --tool-call-parser"),
                          (lambda c: reasoning.check_reasoning(c, False), "no --reasoning-parser"),
                          (lambda c: structured.check_structured(c, "regex"), "no grammar backend"),
                          (lambda c: sampling.check_seed(c, "chat"), "--enable-deterministic-inference"),
                          (slots.check_disconnect, "--enable-metrics")]:
        with pytest.raises(Unsupported, match=reason):
            check(ctx)


def test_unknown_adapter_is_refused(full_sim: Simulator, check_context: ContextFactory) -> None:
    report = error_checks.check_unknown_model(check_context(full_sim))
    assert report.ok, report.message()


def test_chat_stop_strings_with_a_reasoning_parser(full_sim: Simulator, check_context: ContextFactory) -> None:
    """SGLang applies a stop string to the whole output: the answer after the reasoning stops at it.

    32 tokens (64 asked): room for the answer after the simulator's scripted thought (~16 tokens).
    """
    report = api.check_stop(check_context(full_sim, max_tokens=32), "chat")
    assert report.ok, report.message()
    assert report.figures["stop strings tried"] == QUICK.samples


def test_seed_is_checked_with_deterministic_inference(sim_factory: SimFactory,
                                                      check_context: ContextFactory) -> None:
    report = sampling.check_seed(check_context(sim_factory("--enable-deterministic-inference")), "completions")
    assert report.ok, report.message()


def test_a_hang_is_reported_as_one(sim_factory: SimFactory, check_context: ContextFactory) -> None:
    """A server that never answers is a finding with the wait it took, not a stuck test."""
    sim = sim_factory("--sim-decode-step-ms", "5000", fast=True)
    report = error_checks.check_negative_max_tokens(check_context(sim, request_timeout_s=1.0))
    assert report.ok  # a 4xx comes at once; only generation is slow
    slow = api.check_shape(check_context(sim, request_timeout_s=1.0), "completions", False)
    assert "no complete answer within 1 s" in slow.message()
