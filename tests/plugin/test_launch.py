"""Launch mode end to end: the simulator runner, live progress, markers, the load fixture, the factory."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from plugin_helpers import SIM_LAUNCH


def test_launch_with_simulator_runner_shows_progress(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess("--sglang-runner=simulator", f"--sglang-launch={SIM_LAUNCH}", "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "sglang: mode=launch runner=simulator url=(free port picked at start)",
        "*SGLang ready in *s*",
        "sglang: serving at http://127.0.0.1:*, log */sglang-logs/sglang-*.log",
        "*SGLANG_URL=http://127.0.0.1:* MODE=simulator*",
    ])
    # The phases, read from the server's log: every one in the summary's startup line (live lines only
    # for a phase that lasted 1 s or more when the output is not a terminal).
    result.stdout.fnmatch_lines(["startup *ready in *loading weights *"])


def test_quiet_run_shows_no_progress(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}", "-q")
    result.assert_outcomes(passed=2)
    assert "SGLang ready in" not in result.stdout.str()
    assert "[sglang " not in result.stdout.str()


def test_simulate_default_launch_works(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_server_basic.py")
    result = pytester.runpytest_subprocess("--sglang-simulate")
    result.assert_outcomes(passed=2)


def test_capacity_marker_pass_fail_and_records(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_capacity_marker.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                           "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_capacity_unmet _*",
        "sglang capacity gate failed: min_total_tokens=1000000000000: measured 61,472 tokens "
        "(max_total_num_tokens)",
        "  min_total_tokens=1000000000000: max_total_num_tokens measured 61,472 tokens, required >= "
        "1,000,000,000,000 tokens *: FAILED",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["Fix: raise --mem-fraction-static*",
                                 "FAILED test_capacity_marker.py::test_capacity_unmet - GateFailed: sglang*"])
    root = ET.parse(pytester.path / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert "sglang_outcome" in props and json.loads(props["sglang_outcome"])["gate"] == "capacity"
    assert float(props["sglang.capacity.max_total_num_tokens"]) > 0


def test_load_fixture_records_its_result(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_load_fixture.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                           "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    loads = [json.loads(p.get("value") or "{}") for p in root.iter("property")
             if p.get("name") == "sglang_load"]
    assert len(loads) == 1 and loads[0]["completed"] == 4


def test_factory_reuses_identical_configs_and_stops_all(pytester: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.copy_example("test_factory_reuse.py")
    counter = pytester.path / "launches.txt"
    monkeypatch.setenv("LAUNCH_COUNTER", str(counter))
    result = pytester.runpytest_subprocess("--sglang-simulate")
    result.assert_outcomes(passed=1)
    assert len(counter.read_text().splitlines()) == 2  # three requests, two distinct configs


def test_throughput_marker_and_measurement_error(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_throughput_marker.py")
    result = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                           "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_cannot_measure*",
        "@pytest.mark.sglang_capacity could not measure: ConfigError: LoadSpec.concurrency=100000: is more "
        "than the limit of 65,536*",
    ])
    # The refusal alone: no chained tracebacks ("During handling ...", "no running event loop") around it.
    assert "During handling of the above exception" not in result.stdout.str()
    assert "no running event loop" not in result.stdout.str()
    root = ET.parse(pytester.path / "junit.xml").getroot()
    names = [p.get("name") for p in root.iter("property")]
    assert "sglang_load" in names and "sglang.throughput.output_throughput" in names


def test_baseline_regression_fails_the_measuring_test(pytester: pytest.Pytester) -> None:
    pytester.copy_example("test_load_fixture.py")
    fast = pytester.runpytest_subprocess("--sglang-simulate", f"--sglang-launch={SIM_LAUNCH}",
                                         "--sglang-report=base.json")
    fast.assert_outcomes(passed=1)
    # Ten times slower decoding: output throughput falls far beyond the 5% allowed.
    slow = pytester.runpytest_subprocess(
        "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} --sim-decode-step-ms 200",
        "--sglang-baseline=base.json", "--sglang-max-regression=output_throughput:5%")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(["sglang baseline gate failed: output_throughput * tok/s (required >= *)"])
