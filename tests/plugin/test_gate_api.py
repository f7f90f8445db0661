"""The test-body API: factory errors, per-request records, recorded outcomes, the load lock, reaping."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from filelock import FileLock, Timeout
from plugin_helpers import SIM_LAUNCH

from pytest_sglang.gates.registry import GateContext
from pytest_sglang.plugin import settings as settings_mod
from pytest_sglang.plugin.load_runner import LoadRunner
from pytest_sglang.plugin.pool import ServerPool

KEY = "sk-factory-secret-93ad1f"


def _properties(junit: Path, name: str) -> list[dict[str, Any]]:
    root = ET.parse(junit).getroot()
    return [json.loads(p.get("value") or "{}") for p in root.iter("property") if p.get("name") == name]


def test_factory_raises_the_engine_error_into_the_test(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.copy_example("test_factory_errors.py")
    counter = pytester.path / "launches.txt"
    monkeypatch.setenv("LAUNCH_COUNTER", str(counter))
    monkeypatch.setenv("SECRET_KEY", KEY)
    result = pytester.runpytest_subprocess("--sglang-simulate", "-s")
    result.assert_outcomes(passed=2, failed=3)
    assert not counter.exists()  # the preflight refusal started nothing, twice
    out = result.stdout.str()
    # A bad keyword or value: its message once, not again as the chained cause ("During handling of ...").
    assert ("sglang_server_factory() has no keyword 'startup_timout_s' (did you mean 'startup_timeout_s'?); "
            "LaunchConfig fields: runner, command,") in out
    assert "LaunchConfig.runner='k8s': unknown runner" in out
    assert "During handling" not in out  # each message, not again as its chained cause
    result.stdout.fnmatch_lines(["*CAUGHT: SGLang server http://127.0.0.1:* exited before it was ready: *",
                                 "*RuntimeError: simulated crash during startup phase 'weights'*"])
    # Uncaught: a FAILURE showing the engine's message from the test's own line, not the engine's frames.
    result.stdout.fnmatch_lines(["*_ test_crash_uncaught_is_a_failure _*", "", "sglang_server_factory = *", "",
                                 "    def test_crash_uncaught_is_a_failure(sglang_server_factory):",
                                 ">       sglang_server_factory(CRASH)",
                                 "E       pytest_sglang.errors.ServerExited: SGLang server * exited before *"],
                                consecutive=True)
    result.stdout.fnmatch_lines(["*--api-key *** --sim-fault crash-at:weights*"])  # the log tail, scrubbed
    assert KEY not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("flags", "expect_records"), [
    ((), False), (("--sglang-report-requests", "--sglang-report=r.json"), True), (("--sglang-html=r.html",), True),
])
def test_per_request_records_follow_the_report_options(pytester: pytest.Pytester, flags: tuple[str, ...],
                                                       expect_records: bool) -> None:
    pytester.copy_example("test_load_fixture.py")
    pytester.copy_example("test_throughput_marker.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                           "--junitxml=junit.xml", "-k", "not cannot_measure", *flags)
    result.assert_outcomes(passed=2)
    loads = _properties(pytester.path / "junit.xml", "sglang_load")
    assert len(loads) == 2  # one from the sglang_load fixture, one from the throughput marker
    for load in loads:
        assert ("records" in load) is expect_records
        if expect_records:
            assert len(load["records"]) == 4
    if "--sglang-report=r.json" in flags:
        report = json.loads((pytester.path / "r.json").read_text())
        assert "records" in json.dumps(report)


def test_recorded_outcome_is_reported_and_judged(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_record_outcome.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                           "--junitxml=junit.xml", "--sglang-report=r.json")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines([
        "sglang custom_ab gate failed: speedup 0.9 x (required >= 1.2)",
        "*speedup: measured 0.9 x, required >= 1.2 x: FAILED",
        "Fix: enable the cache on side B",
    ])
    result.stdout.fnmatch_lines(["*TypeError: sglang_gate.record(outcome) takes a pytest_sglang.GateOutcome, "
                                 "got dict; build one with GateOutcome(gate, [[]compare(...)])"])
    gates = [o["gate"] for o in _properties(pytester.path / "junit.xml", "sglang_outcome")]
    assert gates == ["custom_ab", "custom_ab"]
    report = json.loads((pytester.path / "r.json").read_text())
    recorded = {t["nodeid"]: [g["gate"] for g in t.get("gates", [])] for t in report["tests"]}
    assert recorded["test_record_outcome.py::test_record_met"] == ["custom_ab"]
    assert recorded["test_record_outcome.py::test_record_unmet"] == ["custom_ab"]


def _held_elsewhere(path: str) -> bool:
    """Whether another holder has the lock file (a second lock object opens its own handle)."""
    try:
        with FileLock(path, timeout=0):
            return False
    except Timeout:
        return True


def test_load_lock_is_public_and_used_by_the_hicache_workload(tmp_path: Path) -> None:
    lock_path = str(tmp_path / "load.lock")
    runner = LoadRunner(server=None, lock_path=lock_path, item=None)  # type: ignore[arg-type]
    with runner.lock():
        assert _held_elsewhere(lock_path)
    assert not _held_elsewhere(lock_path)
    with GateContext(server=None, load=runner).load_lock():
        assert _held_elsewhere(lock_path)
    with GateContext(server=None, load=lambda spec: None).load_lock():  # no plugin: no lock
        assert not _held_elsewhere(lock_path)


@pytest.mark.parametrize(("runner", "docker"), [("docker", True), ("simulator", False), ("process", False)])
def test_reaping_covers_containers_only_with_the_docker_runner(monkeypatch: pytest.MonkeyPatch,
                                                               runner: str, docker: bool) -> None:
    from pytest_sglang.server import cleanup

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(cleanup, "reap_leftovers_once", lambda **kw: calls.append(kw) or [])
    resolved = settings_mod.resolve({"sglang_launch": "--model-path m", "sglang_runner": runner}, {})
    pool = ServerPool(SimpleNamespace(), resolved, worker_input=None)  # type: ignore[arg-type]
    pool.reap_dead_runs()
    assert calls == [{"docker": docker}]


def test_load_fields_are_checked_by_name_before_any_load(tmp_path: Path) -> None:
    runner = LoadRunner(server=None, lock_path=str(tmp_path / "load.lock"), item=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^sglang_load\(\) has no field 'concurency' \(did you mean "
                                        r"'concurrency'\?\); LoadSpec fields: requests, concurrency, "):
        runner(concurency=2)
    from pytest_sglang.loadgen import LoadSpec

    with pytest.raises(TypeError, match=r"give either a LoadSpec or LoadSpec fields, not both"):
        runner(LoadSpec(), requests=2)
