"""The sglang_ab fixture end to end: simulators launched in turn, judged on paired launch differences."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import psutil
import pytest

#: Startup phases at a twentieth of their time; a decode step of 50 ms, so the simulated timing (not the
#: shared CPU) sets the figures of a small load.
A = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 1000"
#: B: every simulated duration 20 % longer (the client's own time does not stretch: throughput about -12 %).
B_SLOWER = A.replace("--sim-time-scale 0.05", "--sim-time-scale 0.06")
JITTER = " --sim-launch-jitter 0.03"


def _counted(args: str, pytester: pytest.Pytester) -> str:
    """``args`` that append a line per launch to launches.txt (the simulator's own counter)."""
    return f"{args} --sim-launch-counter {pytester.path / 'launches.txt'}"


def _launches_left_running(pytester: pytest.Pytester) -> list[psutil.Process]:
    counter = str(pytester.path / "launches.txt")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if counter in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _run(pytester: pytest.Pytester, *flags: str) -> pytest.RunResult:
    pytester.copy_example("test_ab_fixture.py")
    return pytester.runpytest_subprocess("--sglang-simulate", "-s", "-rs", "-p", "no:cacheprovider",
                                         "--junitxml=junit.xml", "--sglang-report=r.json", "--sglang-markdown=r.md",
                                         *flags)


def _ab_outcome(pytester: pytest.Pytester) -> dict[str, Any]:
    root = ET.parse(pytester.path / "junit.xml").getroot()
    found: list[dict[str, Any]] = [json.loads(p.get("value") or "{}") for p in root.iter("property")
                                   if p.get("name") == "sglang_outcome"]
    outcomes = [o for o in found if o.get("gate") == "ab"]
    assert len(outcomes) == 1, found
    return outcomes[0]


@pytest.mark.parametrize("seed", ["1", "2"])
def test_a_a_with_launch_jitter_is_never_red(pytester: pytest.Pytester, seed: str) -> None:
    # A and B the same configuration; each launch draws its own boot speed (seeded from the run's seed).
    result = _run(pytester, f"--sglang-launch={_counted(A + JITTER, pytester)}", "--sglang-ab-launches=3",
                  f"--sglang-ab-seed={seed}")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 1
    result.stdout.fnmatch_lines([f"sglang ab: 3 launches per side, order random (seed {seed}): B is the same "
                                 "configuration as A (an A/A run: it measures the noise)"])
    if outcomes.get("skipped"):  # "cannot judge" says why and what would do: more launches, or larger loads
        result.stdout.fnmatch_lines(["*sglang_ab could not judge: *"])
        out = result.stdout.str()
        assert ("launches per side would (power 0.95, one-sided 1%)" in out
                or "p99_ttft_ms from 16 requests is unreliable: a p99 needs at least 100" in out), out
    outcome = _ab_outcome(pytester)
    judged = {c["metric"] for c in outcome["checks"]}
    unjudged = {line.split(":")[0] for line in outcome.get("unchecked", [])}
    assert judged | unjudged == {"output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms"}
    assert all(c["passed"] for c in outcome["checks"])
    # 6 launches, each stopped before the next started, none left running.
    assert len((pytester.path / "launches.txt").read_text().splitlines()) == 6
    assert not _launches_left_running(pytester)


def test_a_slower_b_is_red_on_the_paired_differences(pytester: pytest.Pytester) -> None:
    result = _run(pytester, f"--sglang-launch={_counted(A, pytester)}",
                  f"--sglang-ab-launch={_counted(B_SLOWER, pytester)}", "--sglang-ab-launches=4",
                  "--sglang-ab-order=alternate")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sglang ab gate failed: *output_throughput*",
                                 "*output_throughput: B vs A +*% regression, interval [[]+*%, +*%] over 4 pairs * "
                                 "beyond the 5% limit and beyond the noise*"])
    result.stdout.fnmatch_lines(["*order: alternate (seed 0): AB BA AB BA*"])
    checks = {c["metric"]: c for c in _ab_outcome(pytester)["checks"]}
    assert not checks["output_throughput"]["passed"] and checks["output_throughput"]["measured"] > 5
    report = json.loads((pytester.path / "r.json").read_text())
    assert "ab" in json.dumps(report) and "output_throughput" in (pytester.path / "r.md").read_text()


def test_bad_ab_keywords_fail_naming_them_and_launch_nothing(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_ab_bad_keywords.py")
    counter = pytester.path / "launches.txt"
    result = pytester.runpytest_subprocess("--sglang-simulate", "-p", "no:cacheprovider",
                                           f"--sglang-launch={A} --sim-launch-counter {counter}")
    result.assert_outcomes(failed=15)
    result.stdout.fnmatch_lines_random([
        "*sglang_ab(launches=...)=1: must be a whole number of launches per side from 2 to 1000*",
        "*sglang_ab(launches=...)='3': must be a whole number*",
        "*sglang_ab(order=...)='shuffled': unknown order. Fix: pass one of random, alternate*",
        "*sglang_ab(seed=...)=-1: must be a whole number >= 0*",
        "*sglang_ab(alpha=...)=0.7: must be a false-alarm rate between 0 and 0.5*",
        "*sglang_ab(power=...)=1.0: must be between 0.5 and 1*",
        "*sglang_ab(timeout_s=...)=0: must be a number of seconds > 0*",
        "*sglang_ab(max_regression=...)='five': cannot read 'five'*",
        "*sglang_ab(max_regression=...)='0%': the limit of output_throughput is 0%*",
        "*sglang_ab(launch_b=...)='--model-path M --tp-szie 2': *--tp-szie -> --tp-size*",
        "*sglang_ab(launch_b=...)=\"--model-path 'M\": cannot be split like a shell command line*",
        "*sglang_ab() has no field 'reqests' (did you mean 'requests'?)*",
        "*sglang_ab(): give either a LoadSpec or LoadSpec fields, not both*",
        "*sglang_ab(max_regression=...)=5: expected a string, got int*",
        "*sglang_ab(launch_b=...)='<int>': expected B's launch args as one string or a list of strings*",
    ])
    assert not counter.exists()  # refused before anything started
    assert "During handling" not in result.stdout.str()  # each message once, not again as the cause's chain


@pytest.mark.parametrize(("flag", "expected"), [
    ("--sglang-ab-launches=1", "*--sglang-ab-launches*must be at least 2 launches per side*"),
    ("--sglang-ab-launches=x", "*--sglang-ab-launches*expected a whole number*"),
    ("--sglang-ab-order=shuffle", "*--sglang-ab-order*must be one of random, alternate*"),
    ("--sglang-ab-seed=-3", "*--sglang-ab-seed*must be a whole number >= 0*"),
    ("--sglang-ab-max-regression=lots", "*--sglang-ab-max-regression*cannot read 'lots'*"),
    ("--sglang-ab-launch=--model-path M --tp-szie 2", "*--sglang-ab-launch*--tp-szie -> --tp-size*"),
    ("--sglang-ab-image= ", "*--sglang-ab-image=' ': is empty*"),
    ("--sglang-ab-python=a\x01b", "*--sglang-ab-python='a\\x01b': contains the control character*"),
    ("--sglang-ab-gateway=--polcy round_robin",
     "*--sglang-ab-gateway=*--polcy is not a known flag, did you mean --policy?*"),
])
def test_bad_ab_options_are_usage_errors(pytester: pytest.Pytester, flag: str, expected: str) -> None:
    pytester.copy_example("test_ab_fixture.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", "-p", "no:cacheprovider", f"--sglang-launch={A}", flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])


def test_ab_needs_a_launch_not_an_attached_server(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_ab_fixture.py")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-url=http://127.0.0.1:9")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sglang_ab='attach': an A/B run launches both configurations itself*"])
    assert "During handling" not in result.stdout.str()  # the message, not again as its chained cause



def test_cannot_judge_fails_under_strict(pytester: pytest.Pytester) -> None:
    # Two launches per side cannot judge a 5 % change of a small load's TTFT (its noise is tens of percent).
    result = _run(pytester, f"--sglang-launch={A}", "--sglang-ab-launches=2", "--sglang-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*sglang_ab could not judge: *cannot judge a 5% change at this noise* "
                                 "(--sglang-strict: a check that cannot judge fails)*"])
