"""``pytest --pyargs pytest_sglang.acceptance``: the shipped suite, run as a user runs it."""

from __future__ import annotations

import pytest

from tests.conftest import SimFactory

SUITE = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider", "-rs")
PARSERS = ("--tool-call-parser", "llama3", "--reasoning-parser", "deepseek-r1")
#: Tests in the suite with parsers, metrics and deterministic inference: 54 ids (7 image checks: a VLM only).
ALL_TESTS = 54


def test_the_suite_passes_on_a_fault_free_simulator(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory("--enable-metrics", "--enable-deterministic-inference")
    # test_cache_logprobs flushes the cache: an attached server's owner consents (--sglang-allow-disruptive).
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-v", "--sglang-allow-disruptive")
    result.assert_outcomes(passed=ALL_TESTS - 11, skipped=11)  # tool calls and reasoning: no parsers; images: no VLM
    result.stdout.fnmatch_lines_random([
        "*test_openai_api.py::test_usage[[]chat-stream[]] PASSED*",
        "*test_openai_api.py::test_seed[[]completions[]] PASSED*",
        "*test_errors.py::test_disconnect_frees_slot PASSED*",
        "*test_errors.py::test_unknown_model_4xx PASSED*",
        "*test_consistency.py::test_cache_logprobs PASSED*",
        "*test_structured_output.py::test_structured_output[[]ebnf[]] PASSED*",
        "SKIPPED [[]2[]] *test_tool_calls.py:*: the server has no --tool-call-parser*",
    ])


def test_parser_checks_pass_with_parsers(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory(*PARSERS)
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "tool_calls or reasoning")
    result.assert_outcomes(passed=4)


def test_checks_a_server_cannot_take_are_skipped_with_the_reason(pytester: pytest.Pytester,
                                                                 sim_factory: SimFactory) -> None:
    sim = sim_factory("--grammar-backend", "none")
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k",
                                           "structured or disconnect or seed or tool_calls or reasoning")
    result.assert_outcomes(skipped=11)
    result.stdout.fnmatch_lines_random([
        "SKIPPED [[]2[]] *: the server has no grammar backend (server_info grammar_backend is 'none'), so json_schema*",
        "SKIPPED [[]1[]] *: the server has no grammar backend *, so ebnf output cannot be constrained",
        "SKIPPED [[]1[]] *: /metrics answers 404: the server runs without --enable-metrics",
        "SKIPPED [[]2[]] *: SGLang honours seed only with --enable-deterministic-inference*",
        "SKIPPED [[]2[]] *: the server has no --reasoning-parser*",
    ])


@pytest.mark.parametrize(("fault", "select", "failed", "says"), [
    ("empty-finish-reason", "response_shape", 4, 'finish_reason is ""'),
    ("tool-call-as-text", "tool_calls", 2, "no tool_calls; finish_reason 'stop'"),
    ("cross-talk", "cross_talk", 1, "'s tokens: together"),
    ("usage-off-by-one", "test_usage", 4, "usage.completion_tokens=17 but 16 tokens were returned"),
], ids=["empty-finish-reason", "tool-call-as-text", "cross-talk", "usage-off-by-one"])
def test_a_faulty_server_fails_the_matching_check(pytester: pytest.Pytester, sim_factory: SimFactory, fault: str,
                                                  select: str, failed: int, says: str) -> None:
    sim = sim_factory(*PARSERS, "--sim-fault", fault)
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", select)
    result.assert_outcomes(failed=failed)
    assert says in result.stdout.str()


def test_stop_strings_hold_with_a_reasoning_parser(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    """A stop string in the content ends it there, also when a reasoning parser splits the output."""
    sim = sim_factory(*PARSERS)
    result = pytester.runpytest_subprocess(*SUITE, f"--sglang-url={sim.url}", "-k", "stop_strings")
    result.assert_outcomes(passed=5)  # 4 OpenAI route x mode, 1 native
