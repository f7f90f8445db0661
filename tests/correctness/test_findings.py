"""A failed check states each finding once, with a count and where it was seen (not 8 identical lines)."""

from __future__ import annotations

from pytest_sglang.correctness.result import MAX_SHOWN, CheckReport
from pytest_sglang.gates.correctness.acceptance import acceptance_outcome

EMPTY = 'choice 0: finish_reason is "" (an empty string breaks OpenAI clients)'


def test_the_same_finding_on_every_prompt_is_one_line() -> None:
    report = CheckReport("chat batch response shape", [f"prompt {i}: {EMPTY}" for i in range(8)], {"requests": 8})
    lines = report.message().splitlines()
    assert lines[0] == "chat batch response shape: 8 problems (1 distinct finding)"
    assert lines[1] == f"  - {EMPTY} (x8: prompts 0-7)"
    assert sum(EMPTY in line for line in lines) == 1


def test_distinct_findings_keep_their_place_and_order() -> None:
    problems = ["prompt 3: ids differ", "request 1: timed out", "prompt 5: ids differ", "no [DONE]"]
    lines = CheckReport("x", problems).message().splitlines()
    assert lines[1:] == ["  - ids differ (x2: prompts 3, 5)", "  - request 1: timed out", "  - no [DONE]"]


def test_more_findings_than_shown_are_counted() -> None:
    report = CheckReport("x", [f"finding {i}" for i in range(MAX_SHOWN + 3)])
    assert report.message().splitlines()[-1] == "  ... and 3 more"


def test_a_check_is_an_acceptance_record() -> None:
    failed = acceptance_outcome(CheckReport("chat batch response shape", [f"prompt {i}: {EMPTY}" for i in range(8)],
                                            {"requests": 8}))
    (check,) = failed.checks
    assert (failed.gate, check.metric, check.measured, check.op, check.required, check.passed) == (
        "acceptance", "chat batch response shape", 8, "==", 0, False)
    assert check.detail == f"{EMPTY} (x8: prompts 0-7)" and failed.context == {"requests": 8}
    assert acceptance_outcome(CheckReport("ok check")).passed
