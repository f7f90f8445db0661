"""``@pytest.mark.sglang_accuracy`` end to end: real pytest sessions against simulator subprocesses.

The simulator answers arithmetic right (the ``arithmetic`` task, and a gsm8k file of arithmetic
questions through ``--sglang-eval-data``), and half wrong with ``--sim-fault wrong-answer:0.5``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.accuracy import AccuracyResult
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.correctness.accuracy import evaluate_accuracy
from pytest_sglang.plugin import settings
from tests.conftest import SimFactory

RUN = ("-p", "no:cacheprovider", "-rfE")
GOOD = """
import pytest

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.9, num_examples=100)
def test_arithmetic_floor():
    pass

@pytest.mark.sglang_accuracy(task="gsm8k", min_score=0.9, shots=2, num_examples="all")
def test_gsm8k_from_the_eval_data_option():
    pass

@pytest.mark.sglang_accuracy(task="gsm8k", data="missing.jsonl", min_score=0.5)
def test_data_keyword_wins_over_the_option():
    pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.5, runner="sgl-eval", sgl_eval="no-such-sgl-eval")
def test_sgl_eval_runner_is_passed_through():
    pass
"""
BAD = """
import pytest

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.8)
def test_floor_above_the_interval():
    pass

@pytest.mark.sglang_accuracy(task="arithmetic", baseline="base.json", max_drop=0.05)
def test_drop_from_the_baseline():
    pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.55, num_examples=40)
def test_floor_inside_the_interval_passes():
    pass
"""


@pytest.fixture(autouse=True)
def _clean_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)


def _gsm8k_file(path: Path, n: int = 30) -> Path:
    rows = [{"question": f"What is {a} + {a * 3}?", "answer": f"{a} + {a * 3} = {a * 4}.\n#### {a * 4}"}
            for a in range(2, 2 + n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _properties(junit: Path, name: str) -> list[Any]:
    root = ET.parse(junit).getroot()
    return [p.get("value") for p in root.iter("property") if p.get("name") == name]


def test_a_right_server_passes_with_progress_and_records(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_inner=GOOD)
    data = _gsm8k_file(pytester.path / "gsm8k.jsonl")
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={sim.url}", f"--sglang-eval-data={data}",
                                           "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, errors=2)
    out = result.stdout
    out.fnmatch_lines(["sglang accuracy: 100/100 examples, 1.00 correct so far, * s"])
    out.fnmatch_lines(["sglang accuracy: 28/28 examples, 1.00 correct so far, * s"])  # 30 rows - 2 shots
    # The keyword's file wins over --sglang-eval-data: a setup ERROR naming the file and the option.
    out.fnmatch_lines(["*@pytest.mark.sglang_accuracy could not measure: ConfigError: eval data='missing.jsonl': "
                       "cannot be read *--sglang-eval-data*"])
    out.fnmatch_lines(["*@pytest.mark.sglang_accuracy could not measure: KeywordError: @pytest.mark.sglang_accuracy"
                       "(sgl_eval='no-such-sgl-eval'): is not an executable file. Fix: install it *"])
    out.fnmatch_lines(["*test_inner.py::test_arithmetic_floor*PASSED*",
                       "  accuracy score_upper_bound * 1 * >= 0.9 ok",  # the gates summary, with the score
                       "    95% Wilson interval [[]*] of the score 1.000 (100/100 correct)"])
    bounds = _properties(pytester.path / "junit.xml", "sglang.accuracy.score_upper_bound")
    assert bounds == ["1.0", "1.0"]
    outcomes = [json.loads(v) for v in _properties(pytester.path / "junit.xml", "sglang_outcome")]
    assert [o["gate"] for o in outcomes] == ["accuracy", "accuracy"]
    assert "28/28 correct" in outcomes[1]["context"]["result"]


def test_wrong_answers_fail_with_score_examples_and_interval(pytester: pytest.Pytester, sim_factory: SimFactory,
                                                             tmp_path: Path) -> None:
    good, bad = sim_factory(), sim_factory("--sim-fault", "wrong-answer:0.5")
    base = pytester.path / "base.json"
    done = subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", "--url", good.url, "--task", "arithmetic",
                           "--json", str(base)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pytester.makepyfile(test_inner=BAD)
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={bad.url}")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout
    out.fnmatch_lines([
        "sglang accuracy gate failed: min_score=0.8: measured 0.* (score_upper_bound)",
        "  min_score=0.8: score_upper_bound measured 0.*, required >= 0.8 [[]95% Wilson interval [[]0.*, 0.*[]] of "
        "the score 0.* (*/200 correct)[]]: FAILED",
        "  result: arithmetic: score 0.* (*/200 correct, 0 without an answer, 0 failed requests), 95% Wilson score "
        "interval [[]0.*, 0.*[]]",
        "  harness: *task=arithmetic, template=gsm8k-qa, shots=5, route=completions, max_tokens=512, *",
        "  time: 200 examples in * s",
        "  wrong answers: #*: expected *, extracted '*' from *",
        "  min_score=0.8 is above the interval's upper bound 0.*: the score 0.* is below the floor beyond sampling "
        "error",
        "Fix: read the wrong answers above: *",
    ], consecutive=True)
    out.fnmatch_lines([
        "sglang accuracy gate failed: max_drop=0.05: measured 0.* (score_drop_lower_bound)",
        "  max_drop=0.05: score_drop_lower_bound measured 0.*, required <= 0.05 [[]95% Newcombe interval of the "
        "change -0.*: [[]-0.*, -0.*[]] against base.json (200/200 correct)[]]: FAILED",
    ], consecutive=True)
    out.fnmatch_lines(["*the score dropped by 0.* from the baseline's 1.000 (200/200)*"])


def test_bad_keywords_are_usage_errors_naming_marker_and_keyword(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.sglang_accuracy(task="gsm9k", min_score=0.7)
def test_task(): pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=70)
def test_percent(): pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.7, runner="sgl_eval")
def test_runner(): pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.7, shots=-1, concurrency=0)
def test_shots(): pass

@pytest.mark.sglang_accuracy(task="arithmetic")
def test_nothing_checked(): pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.7, max_drop=0.02)
def test_drop_without_baseline(): pass

@pytest.mark.sglang_accuracy(min_score=0.7)
def test_no_task(): pass

@pytest.mark.sglang_accuracy(task="arithmetic", min_score=0.7, num_example=10)
def test_typo(): pass
""")
    result = pytester.runpytest_subprocess(*RUN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines_random([
        "ERROR: invalid pytest-sglang marker:",
        "test_inner.py::test_task: @pytest.mark.sglang_accuracy(task='gsm9k'): must be one of arithmetic, gsm8k, "
        "mmlu. Fix: write task='gsm8k' (the closest choice)",
        "test_inner.py::test_percent: @pytest.mark.sglang_accuracy(min_score=70): must be a number from 0 to 1 *. "
        "Fix: write min_score=0.7",
        "test_inner.py::test_runner: @pytest.mark.sglang_accuracy(runner='sgl_eval'): must be one of builtin, "
        "sgl-eval. Fix: write runner='sgl-eval' (the closest choice)",
        "test_inner.py::test_shots: @pytest.mark.sglang_accuracy(shots=-1): must be a whole number from 0 to 100. *",
        "test_inner.py::test_nothing_checked: @pytest.mark.sglang_accuracy(): checks nothing, so it would always "
        "pass. Fix: give at least one of min_score, baseline",
        "test_inner.py::test_drop_without_baseline: @pytest.mark.sglang_accuracy(max_drop=0.02): needs baseline *",
        "test_inner.py::test_no_task: @pytest.mark.sglang_accuracy needs 'task'; valid keywords: task, min_score, *",
        "test_inner.py::test_typo: @pytest.mark.sglang_accuracy has no keyword 'num_example' (did you mean "
        "'num_examples'?)*",
    ])


def _result(correct: int, total: int, errors: int = 0) -> AccuracyResult:
    return AccuracyResult(task="arithmetic", correct=correct, total=total, invalid=0, errors=errors,
                          harness={"task": "arithmetic", "shots": 5}, elapsed_s=1.0, confidence=0.95,
                          first_error="HTTP 500: boom" if errors else None)


def test_the_floor_is_judged_on_the_upper_bound() -> None:
    """0.70 on 100 examples has the interval [0.604, 0.781]: a floor of 0.75 is inside it and passes."""
    inside = evaluate_accuracy(_result(70, 100), min_score=0.75)
    assert inside.passed and inside.checks[0].measured == pytest.approx(0.7811, abs=1e-4)
    below = evaluate_accuracy(_result(70, 100), min_score=0.79)
    assert not below.passed
    assert below.message().startswith("sglang accuracy gate failed: min_score=0.79: measured 0.7811")


def test_failed_requests_and_baselines_are_their_own_checks() -> None:
    outcome = evaluate_accuracy(_result(0, 10, errors=10), min_score=0.0)
    assert [(c.metric, c.passed) for c in outcome.checks] == [("answered_requests", False), ("score_upper_bound", True)]
    assert "first: HTTP 500: boom" in outcome.message()
    same = {"harness": {"task": "arithmetic", "shots": 5}, "correct": 70, "total": 100}
    assert evaluate_accuracy(_result(68, 100), baseline=same, max_drop=0.0).passed  # within the noise
    other = {**same, "harness": {"task": "arithmetic", "shots": 2}}
    mismatch = evaluate_accuracy(_result(70, 100), baseline=other)
    assert not mismatch.passed and "another harness (shots: 2 -> 5); compare like with like" in mismatch.message()


def test_the_helper_checks_its_keywords_like_the_marker() -> None:
    with pytest.raises(ConfigError, match=r"evaluate_accuracy\(min_score=1.5\): must be a number from 0 to 1"):
        evaluate_accuracy(_result(1, 1), min_score=1.5)
    with pytest.raises(ConfigError, match="checks nothing"):
        evaluate_accuracy(_result(1, 1))
