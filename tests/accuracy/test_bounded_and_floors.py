"""Examples never silently fewer than asked, memory flat in the examples, and which bound a floor is judged on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.accuracy import AccuracyResult, Harness, gsm8k, judge
from pytest_sglang.accuracy.arithmetic import Generated, generate
from pytest_sglang.accuracy.verdict import Outcome, Tally
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.correctness.accuracy import evaluate_accuracy, run_marker
from pytest_sglang.gates.keywords import KeywordError, marker_problem


def _gsm8k(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"question": f"q{i}?", "answer": f"#### {i}"}) + "\n" for i in range(n)))
    return path


def test_a_short_data_set_is_refused_with_its_count_and_all_takes_every_row(tmp_path: Path) -> None:
    data = _gsm8k(tmp_path / "test.jsonl", 60)
    # Before: num_examples=200 on this file silently scored 55.
    with pytest.raises(ConfigError) as info:
        gsm8k.task(data, 200, 5)
    assert str(info.value) == (f"num_examples=200: is more than the 55 examples {data} has after 5 few-shot rows. "
                               "Fix: pass num_examples=55 or fewer, num_examples='all' (every example), or a "
                               "larger data set")
    assert len(gsm8k.task(data, "all", 5).examples) == 55
    assert len(gsm8k.task(data, 55, 5).examples) == 55


def test_the_examples_cap_is_the_engines_too() -> None:
    with pytest.raises(ConfigError, match="num_examples=100001: is more than 100,000"):
        Harness(task="arithmetic", num_examples=100_001)
    with pytest.raises(ConfigError, match="num_examples='all': has no meaning for the generated arithmetic task"):
        Harness(task="arithmetic", num_examples="all")


def test_generated_examples_are_the_same_questions_made_on_demand() -> None:
    lazy = Generated(50, 1234)
    assert list(lazy) == generate(50, 1234) and len(lazy) == 50
    assert lazy[7] == generate(50, 1234)[7] and lazy[-1] == generate(50, 1234)[-1]
    assert list(lazy[3:6]) == generate(50, 1234)[3:6]
    with pytest.raises(IndexError):
        lazy[50]


def test_the_tally_keeps_counts_and_a_few_wrong_answers_only() -> None:
    outcomes = [Outcome(i, i % 3 == 0, "1", None if i % 5 == 0 else "2", "x" * 600,
                        "HTTP 500" if i in (40, 7) else None) for i in range(1000)]
    tally = Tally()
    for o in reversed(outcomes):  # done order is not index order
        tally.add(o)
    result = tally.result("arithmetic", {}, 1.0, 0.95)
    assert (result.total, result.correct, result.errors) == (1000, 334, 2)
    assert result.first_error == "HTTP 500" and len(result.wrong) == 5 and len(tally.wrong) == 5
    assert AccuracyResult.from_outcomes("arithmetic", outcomes, {}, 1.0, 0.95).correct == 334


def _result(correct: int, total: int) -> AccuracyResult:
    return AccuracyResult(task="arithmetic", correct=correct, total=total, invalid=0, errors=0, harness={},
                          elapsed_s=1.0, confidence=0.95)


def test_floor_proven_judges_the_lower_bound() -> None:
    result = _result(20, 20)  # 95 % Wilson interval [0.839, 1]
    assert judge(result, 0.9) == []
    assert judge(result, 0.9, floor_proven=True) == [
        "min_score=0.9 is above the interval's lower bound 0.839 (floor_proven): the score 1.000 is not above the "
        "floor beyond sampling error (20/20 correct; more examples narrow the interval)"]
    assert judge(_result(200, 200), 0.9, floor_proven=True) == []


def test_the_floor_check_names_its_bound_and_carries_the_score_and_interval() -> None:
    lenient = evaluate_accuracy(_result(162, 200), min_score=0.74).checks[0]
    assert lenient.metric == "score_upper_bound" and lenient.passed
    assert lenient.detail.startswith("score 0.810 (162/200 correct), 95% Wilson interval [0.750, 0.858]; judged: "
                                     "the interval's upper bound >= min_score")
    assert "[0.750, 0.858] of the score 0.810 (162/200 correct)" in lenient.describe()
    strict = evaluate_accuracy(_result(162, 200), min_score=0.76, floor_proven=True).checks[0]
    assert strict.metric == "score_lower_bound" and not strict.passed and strict.measured == pytest.approx(0.75, 0.01)
    assert "judged: the interval's lower bound >= min_score (floor_proven" in strict.detail
    with pytest.raises(KeywordError, match=r"floor_proven=True\): needs min_score"):
        evaluate_accuracy(_result(1, 2), floor_proven=True, baseline={"harness": {}}, baseline_source="b.json")


def test_the_marker_declares_all_and_floor_proven() -> None:
    base = {"task": "gsm8k", "min_score": 0.5}
    assert marker_problem("sglang_accuracy", run_marker, (), {**base, "num_examples": "all"}) is None
    assert marker_problem("sglang_accuracy", run_marker, (), {**base, "num_examples": "some"}) == (
        "@pytest.mark.sglang_accuracy(num_examples='some'): must be a whole number from 1 to 100,000, or 'all'. "
        "Fix: give num_examples a whole number from 1 to 100,000, or 'all'")
    assert "needs min_score" in str(marker_problem("sglang_accuracy", run_marker, (),
                                                   {"task": "gsm8k", "baseline": "b.json", "floor_proven": True}))
