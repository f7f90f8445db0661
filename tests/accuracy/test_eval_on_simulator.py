"""Accuracy runs against the simulator: a right server passes, ``wrong-answer`` fails with the interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.accuracy import EvalRunError, Harness, evaluate, judge
from pytest_sglang.errors import ServerUnavailable
from tests.conftest import SimFactory


@pytest.mark.parametrize("route", ["completions", "chat", "generate"])
def test_a_right_server_scores_full_marks_on_every_route(sim_factory: SimFactory, route: str) -> None:
    result = evaluate(sim_factory().url, Harness(task="arithmetic", num_examples=40, route=route))
    assert (result.correct, result.total, result.errors) == (40, 40, 0)
    assert judge(result, min_score=0.9) == []
    assert result.harness["route"] == route


def test_wrong_answers_fail_the_floor_with_score_examples_and_interval(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-fault", "wrong-answer:0.5")
    result = evaluate(sim.url, Harness(task="arithmetic"))
    low, high = result.interval
    assert 0.35 < result.score < 0.65 and low < result.score < high
    problems = judge(result, min_score=0.8)
    assert problems == [f"min_score=0.8 is above the interval's upper bound {high:.3f}: the score "
                        f"{result.score:.3f} is below the floor beyond sampling error"]
    summary = result.summary()
    assert f"({result.correct}/200 correct" in summary and "95% Wilson score interval [" in summary
    assert result.wrong and result.wrong[0]["target"] != result.wrong[0]["extracted"]


def test_a_floor_inside_the_interval_passes(sim_factory: SimFactory) -> None:
    """Sampling noise is not a failure: a floor above the score but inside its interval passes."""
    result = evaluate(sim_factory("--sim-fault", "wrong-answer:0.2").url, Harness(task="arithmetic"))
    high = result.interval[1]
    assert judge(result, min_score=(result.score + high) / 2) == []


def test_an_unreachable_server_is_an_error_not_a_score() -> None:
    with pytest.raises(ServerUnavailable, match="GET /v1/models failed"):
        evaluate("http://127.0.0.1:9", Harness(task="arithmetic", num_examples=2))


def test_failed_requests_are_counted_apart(sim_factory: SimFactory) -> None:
    result = evaluate(sim_factory("--sim-fault", "error-rate:1").url, Harness(task="arithmetic", num_examples=5))
    assert result.errors == 5 and "HTTP 500" in (result.first_error or "")
    assert judge(result, min_score=0.0)[0].startswith("every request failed (HTTP 500")


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    # Offline, so gsm8k/mmlu without --data fail the same way whatever this machine can reach.
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                       "HF_HUB_CACHE": "/nonexistent/pytest-sglang-hub-cache"})


def test_eval_command_verdicts_json_and_baseline(sim_factory: SimFactory, tmp_path: Path) -> None:
    good, bad = sim_factory(), sim_factory("--sim-fault", "wrong-answer:0.5")
    base = tmp_path / "base.json"
    run = _eval("--url", good.url, "--task", "arithmetic", "--num-examples", "100", "--min-score", "0.9",
                "--json", str(base))
    assert run.returncode == 0, run.stderr
    assert "arithmetic: score 1.000 (100/100 correct" in run.stdout and "passed (min_score 0.9)" in run.stdout
    doc = json.loads(base.read_text())
    assert doc["verdict"] == {"min_score": 0.9, "floor_proven": False, "judged": "score_upper_bound", "passed": True,
                              "problems": []}
    assert doc["interval"]["method"] == "Wilson score" and doc["harness"]["route"] == "completions"
    worse = _eval("--url", bad.url, "--task", "arithmetic", "--num-examples", "100", "--baseline", str(base))
    assert worse.returncode == 1
    assert "FAILED (baseline " in worse.stdout and "the score dropped by" in worse.stdout
    assert "from the baseline's 1.000 (100/100)" in worse.stdout
    other = _eval("--url", good.url, "--task", "arithmetic", "--num-examples", "100", "--shots", "2",
                  "--baseline", str(base))
    assert other.returncode == 1 and "another harness (shots: 5 -> 2)" in other.stdout


def test_eval_command_usage_errors_name_the_flag(tmp_path: Path) -> None:
    missing = _eval("--url", "http://127.0.0.1:9", "--task", "gsm8k", "--hub-timeout", "5")
    assert missing.returncode == 3 and "--task='gsm8k': has no local data file and the Hugging Face hub is " \
        "unreachable: HF_HUB_OFFLINE is set" in missing.stderr
    zero = _eval("--url", "http://127.0.0.1:9", "--task", "arithmetic", "--num-examples", "0")
    assert zero.returncode == 2 and ("argument --num-examples: invalid value '0': must be a whole number from 1 to "
                                     "100,000, or 'all'") in zero.stderr
    down = _eval("--url", "http://127.0.0.1:9", "--task", "arithmetic")
    assert down.returncode == 3 and "GET /v1/models failed" in down.stderr and "Traceback" not in down.stderr


def test_one_deadline_for_the_whole_builtin_run(sim_factory: SimFactory) -> None:
    slow = sim_factory("--sim-time-scale", "1", "--sim-decode-step-ms", "300")
    with pytest.raises(EvalRunError, match=r"the run did not finish within timeout_s=1: \d+/40 examples answered"
                                           r" \(\d+ correct\)\nFix: raise timeout_s") as info:
        evaluate(slow.url, Harness(task="arithmetic", num_examples=40, concurrency=2), timeout_s=1)
    assert info.value.partial is not None and info.value.partial.total < 40
