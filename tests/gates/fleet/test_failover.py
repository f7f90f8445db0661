"""``@pytest.mark.sglang_failover``: a worker killed under load behind the real gateway, in real pytest sessions.

Simulator workers (``--sglang-simulate --sglang-workers 2``) behind smg 1.13 and sglang-router 0.3.2, in
the two shapes SGLang's gateway shows: fast health checks under ``round_robin`` (the dead worker is marked
unhealthy at once; only the streams in flight on it fail) and the default 60 s checks under
``cache_aware`` (not marked within the run; its circuit breaker stops routing to it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from gates.fleetkit import ROUTER, ROUTER_PYTHON, SIM_LAUNCH, own_fleet
from pytest_sglang.gates.fleet import failover
from pytest_sglang.gates.keywords import marker_problem
from pytest_sglang.report.json_report import validation_errors

FAST_CHECKS = "--health-check-interval-secs 1 --health-failure-threshold 1 --cb-timeout-duration-secs 5"
LOAD = "requests=200, concurrency=8, input_len=32, output_len=32"

ROUND_ROBIN = f"""
import pytest


@pytest.mark.sglang_failover({LOAD}, max_error_rate=0.5, max_detect_s=30, max_recover_s=60)
def test_generous(sglang_gate):
    record = sglang_gate["failover"].context["failover"]
    t = record["timeline_s"]
    assert record["signal"] == "SIGKILL" and record["killed_after"] >= 60  # at=0.3 of 200 requests
    assert t["kill"] < t["detected"] <= t["restart"] < t["restarted"] < t["recovered"]
    assert 0 < record["detect_s"] < 30 and 0 < record["recover_s"] < 60 and record["restored"]
    assert set(record["shares"]) == set(sglang_gate["failover"].context["worker_shares"])


@pytest.mark.sglang_failover({LOAD}, max_error_rate=0.5, max_detect_s=0.001, max_recover_s=0.001)
def test_tight():
    pass


@pytest.mark.sglang_failover({LOAD}, kill="SIGTERM", worker=1, restart=False, max_error_rate=1)
def test_no_restart_still_restores(sglang_gate):
    record = sglang_gate["failover"].context["failover"]
    assert record["worker"] == 1 and record["recover_s"] is None and record["restored"]
    assert record["timeline_s"]["restart"] > record["timeline_s"]["load_end"]  # restored after the load


@pytest.mark.sglang_failover(worker=5)
def test_no_such_worker():
    pass


def test_the_fleet_is_whole_again(sglang_fleet):
    assert all(w.is_healthy for w in sglang_fleet.discover().workers)
    assert all(w.health() == 200 for w in sglang_fleet.workers)
    assert sglang_fleet.exit_statuses() == {{0: None, 1: None}}
"""


def test_round_robin_passes_generous_limits_fails_tight_ones_and_restores(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=ROUND_ROBIN)
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", f"{FAST_CHECKS} --policy round_robin", "--sglang-report", "report.json",
        "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines([
        "sglang failover gate failed: max_detect_s=0.001: measured * s (detect_s); max_recover_s=0.001: measured "
        "* s (recover_s)",
        "  max_error_rate=0.5: error_rate measured *, required <= 0.5 [[]load generator *[]]: ok",
        "  max_detect_s=0.001: detect_s measured * s, required <= 0.001 s [[]gateway GET /workers and smg_* "
        "metrics, polled every 0.1 s[]]: FAILED",
        "  max_recover_s=0.001: recover_s measured * s, required <= 0.001 s [[]*[]]: FAILED",
        "  worker_restored: measured True, required == True [[]*[]]: ok",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "  killed: worker 0 (http://127.0.0.1:*, regular) with SIGKILL after * of 200 requests finished",
        "  gateway: smg 1.13.0: marked it unhealthy * s after the kill*; serving again * s after the restart",
        "  timeline (s from the load start): kill *, detected *, restart *, restarted *, restored *, recovered *, "
        "load end *",
    ])
    result.stdout.fnmatch_lines(["Fix: fast gateway health checks: *; the gateway re-admits a worker after *"])
    result.stdout.fnmatch_lines(["@pytest.mark.sglang_failover could not measure: KeywordError: "
                                 "@pytest.mark.sglang_failover(worker=5): is not a worker of this fleet of 2. "
                                 "Fix: give worker=0 to worker=1"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert validation_errors(report) == []
    failovers = report["fleet"]["failovers"]
    assert [(f["nodeid"].rsplit("::")[-1], f["worker"], f["signal"]) for f in failovers] == [
        ("test_generous", 0, "SIGKILL"), ("test_tight", 0, "SIGKILL"), ("test_no_restart_still_restores", 1, "SIGTERM")]
    assert [w["healthy_at_end"] for w in report["fleet"]["workers"]] == [True, True]


PREFIXES = """
import json
import pytest


def pytest_configure(config):
    # Eight groups of prompts sharing long prefixes, in turn: cache-aware routing pins each to a worker.
    # Eight, not two: two new prefixes can both land on one worker, and the killed one then sees nothing.
    with open("prefixes.jsonl", "w") as out:
        for i in range(400):
            group = "ABCDEFGH"[i % 8]
            prefix = f"You are agent {group}. " + f"the shared system prompt of group {group} " * 30
            out.write(json.dumps({"prompt": f"{prefix} question {i}", "output_len": 16}) + "\\n")
"""

CACHE_AWARE = """
import pytest


@pytest.mark.sglang_failover(requests=300, concurrency=8, dataset="jsonl:prefixes.jsonl", max_error_rate=0.5,
                             restart=False)
def test_cache_aware_default_health_checks(sglang_gate):
    record = sglang_gate["failover"].context["failover"]
    assert record["detect_s"] is None and record["timeline_s"]["cb_open"] is not None
    assert record["restored"]
"""


def test_cache_aware_with_default_health_checks_is_not_detected_but_its_breaker_opens(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PREFIXES)
    pytester.makepyfile(test_inner=CACHE_AWARE)
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", "--policy cache_aware", "-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    # "not detected within the run" may wrap when the error kinds are many.
    result.stdout.fnmatch_lines(["failover test_inner.py::test_cache_aware_default_health_checks *PASSED",
                                 "  worker 0 SIGKILL: * errors*, not detected*"], consecutive=True)


def test_sglang_router_detects_and_recovers(pytester: pytest.Pytester) -> None:
    if not os.access(ROUTER_PYTHON, os.X_OK):
        pytest.skip(f"needs sglang-router 0.3.2: set SGLANG_ROUTER_PYTHON (now {ROUTER_PYTHON}) to its Python")
    pytester.makepyfile(test_inner=f"""
import pytest

@pytest.mark.sglang_failover({LOAD}, max_error_rate=0.5, max_detect_s=30, max_recover_s=60)
def test_router(sglang_gate):
    record = sglang_gate["failover"].context["failover"]
    assert record["gateway"].startswith("sglang-router") and record["recover_s"] > 0
    assert record["routed_after_kill"] is not None  # its circuit breaker's per-worker outcomes count
""")
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", f"{FAST_CHECKS} --policy round_robin",
        "--sglang-gateway-command", " ".join(ROUTER), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


ANY = """
import pytest

@pytest.mark.sglang_failover(requests=20, concurrency=2, input_len=16, output_len=4)
def test_failover():
    pass
"""


def test_an_attached_fleet_is_skipped_saying_why(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_inner=ANY)
    with own_fleet([["--model-path", "sim/tiny-llama"]] * 2, tmp_path) as fleet:
        result = pytester.runpytest_subprocess("--sglang-url", fleet.url, "-p", "no:cacheprovider", "-rs")
        assert [httpx.get(f"{w.url}/health").status_code for w in fleet.workers] == [200, 200]  # none killed
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *: sglang_failover: the fleet behind http://127.0.0.1:* was "
                                 "attached, not launched, and pytest-sglang never kills workers it did not start*"])


def test_a_single_server_fails_needing_a_fleet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=ANY)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", SIM_LAUNCH, "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang failover gate failed: fleet a single SGLang server (sglang_failover needs a fleet) (required == "
        "SGLang's gateway in front of workers)",
        "  fleet: measured a single SGLang server (sglang_failover needs a fleet), required == SGLang's gateway in "
        "front of workers [[]SGLangServer http://127.0.0.1:* mode=simulator*[]]: FAILED",
        "Fix: launch a fleet, e.g. --sglang-workers 2: the gate kills one of its workers",
    ], consecutive=True)


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"kill": "SIGKIL"}, "@pytest.mark.sglang_failover(kill='SIGKIL'): must be one of SIGKILL, SIGTERM, SIGINT, "
                         "SIGQUIT, SIGSTOP (signals a worker can be sent). Fix: write kill='SIGKILL' (the closest "
                         "choice)"),
    ({"kill": 9}, "@pytest.mark.sglang_failover(kill=9): must be one of SIGKILL, *, not int. Fix: *"),
    ({"at": 1.0}, "@pytest.mark.sglang_failover(at=1.0): must be a number from 0.01 to 0.99. Fix: give at a "
                  "number from 0.01 to 0.99"),
    ({"at": 0}, "@pytest.mark.sglang_failover(at=0): must be a number from 0.01 to 0.99. Fix: *"),
    ({"worker": -1}, "@pytest.mark.sglang_failover(worker=-1): must be a whole number >= 0. Fix: *"),
    ({"worker": 1.0}, "@pytest.mark.sglang_failover(worker=1.0): must be a whole number >= 0, not float. Fix: *"),
    ({"restart": "yes"}, "@pytest.mark.sglang_failover(restart='yes'): must be True or False, not the string "
                         "'yes'. Fix: *"),
    ({"max_error_rate": 5}, "@pytest.mark.sglang_failover(max_error_rate=5): must be a number from 0 to 1 (a "
                            "fraction: 0.01 = 1%). Fix: write max_error_rate=0.05"),
    ({"max_detect_s": 0}, "@pytest.mark.sglang_failover(max_detect_s=0): must be a number > 0. Fix: *"),
    ({"max_recover_s": 10, "restart": False}, "@pytest.mark.sglang_failover(max_recover_s=10, restart=False): "
                                              "needs restart=True (recovery is measured on the restarted worker). "
                                              "Fix: drop max_recover_s, or leave restart at True"),
    ({"requests": 0}, "@pytest.mark.sglang_failover(requests=0): must be a whole number from 1 to 10,000,000. *"),
    ({"api": "grpc"}, "@pytest.mark.sglang_failover(api='grpc'): must be one of native, chat, completions. *"),
    ({"max_detect": 5}, "@pytest.mark.sglang_failover has no keyword 'max_detect' (did you mean 'max_detect_s'?)*"),
])
def test_bad_keywords_name_the_keyword_and_the_fix(kwargs: dict[str, object], expected: str) -> None:
    from fnmatch import fnmatchcase

    problem = marker_problem("sglang_failover", failover.run_marker, (), kwargs)
    assert problem is not None and fnmatchcase(problem, expected), problem


def test_a_bad_keyword_is_a_usage_error_before_anything_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.sglang_failover(kill="KILL", at=0.3)
def test_failover():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-workers", "2", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*@pytest.mark.sglang_failover(kill='KILL'): must be one of SIGKILL, *. Fix: "
                                 "write kill='SIGKILL' (the closest choice)*"])
    assert "fleet serving" not in result.stdout.str() + result.stderr.str()  # nothing was launched


def test_a_bad_dataset_names_the_marker_keyword() -> None:
    from types import SimpleNamespace

    from pytest_sglang.gates.keywords import KeywordError
    from pytest_sglang.gates.registry import GateContext

    # The keywords are judged before the server: a typo is named even where the gate would not apply.
    ctx = GateContext(server=SimpleNamespace(), load=lambda spec: None)  # type: ignore[arg-type]
    with pytest.raises(KeywordError, match=r"^@pytest\.mark\.sglang_failover\(dataset='bogus'\): unknown dataset\. "
                                           r"Fix: use random-ids, sharegpt:PATH, jsonl:PATH, mooncake:PATH, "
                                           r"burstgpt:PATH, multiturn\[:KEY=VALUE,\.\.\.\], "
                                           r"image\[:KEY=VALUE,\.\.\.\] or mmmu:PATH$"):
        failover.run_marker(ctx, dataset="bogus")
