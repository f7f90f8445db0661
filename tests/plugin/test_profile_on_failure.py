"""``--sglang-profile-on-failure DIR``: a failed throughput gate leaves SGLang's profiler trace, linked in every
report (issue 33 item 5); off by default; a server without the route, or an attached one without consent, gets
a line saying so; bad values are usage errors before any server starts."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from plugin_helpers import SIM_LAUNCH

from tests.conftest import SimFactory

FAILING = """
import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=10_000_000, requests=4, concurrency=2, input_len=16, output_len=8)
def test_too_slow():
    pass


@pytest.mark.sglang_throughput(min_output_tok_s=1, requests=4, concurrency=2, input_len=16, output_len=8)
def test_fast_enough():
    pass
"""


def _run(pytester: pytest.Pytester, *args: str, launch: str = SIM_LAUNCH) -> pytest.RunResult:
    pytester.makepyfile(test_inner=FAILING)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", f"--sglang-launch={launch}",
                                         "-rf", *args)


def test_a_failed_throughput_gate_is_profiled_and_the_trace_is_linked_in_every_report(
        pytester: pytest.Pytester) -> None:
    traces = pytester.path / "traces"
    out = pytester.path / "out"
    result = _run(pytester, f"--sglang-profile-on-failure={traces}", f"--sglang-report={out}.json",
                  f"--sglang-markdown={out}.md", f"--sglang-html={out}.html", f"--junitxml={out}.xml")
    result.assert_outcomes(passed=1, failed=1)
    folders = sorted(p.name for p in traces.iterdir())
    assert folders == ["test_inner.py_test_too_slow-1"], folders  # the passing test is not profiled
    files = list((traces / folders[0]).glob("*.trace.json.gz"))
    assert len(files) == 1, files
    events = json.loads(gzip.decompress(files[0].read_bytes()))["traceEvents"]
    assert events[0]["args"]["requests"] >= 4  # the window's own requests ran under the profiler
    line = (f"profile after the failed throughput gate: trace in {traces / folders[0]} (1 file, * KB, * s window)")
    result.stdout.fnmatch_lines([line])  # the failure message (terminal)
    report = json.loads(Path(f"{out}.json").read_text())
    props = {t["nodeid"]: t["properties"].get("sglang.profile") for t in report["tests"]}
    assert props["test_inner.py::test_too_slow"].startswith(f"profile after the failed throughput gate: trace in "
                                                            f"{traces / folders[0]} (1 file, "), props
    assert props["test_inner.py::test_fast_enough"] is None
    junit = ET.parse(f"{out}.xml").getroot()
    values = [p.get("value") for p in junit.iter("property") if p.get("name") == "sglang.profile"]
    assert len(values) == 1 and str(traces / folders[0]) in str(values[0]), values
    assert str(traces / folders[0]) in Path(f"{out}.md").read_text()
    assert str(traces / folders[0]) in Path(f"{out}.html").read_text()


def test_without_the_option_nothing_is_profiled(pytester: pytest.Pytester) -> None:
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    assert "profile after" not in result.stdout.str()


def test_a_server_without_the_route_gets_a_line_saying_so(pytester: pytest.Pytester) -> None:
    traces = pytester.path / "traces"
    result = _run(pytester, f"--sglang-profile-on-failure={traces}",
                  launch=SIM_LAUNCH + " --sim-fault no-profile-route")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["profile after the failed throughput gate: NOT TAKEN: the server has no "
                                 "/start_profile route (404): SGLang 0.5.23 serves it; an older or another server "
                                 "does not"])


def test_an_attached_server_is_profiled_only_with_consent(pytester: pytest.Pytester,
                                                          sim_factory: SimFactory) -> None:
    sim = sim_factory()
    traces = pytester.path / "traces"
    pytester.makepyfile(test_inner=FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--sglang-url={sim.url}",
                                           f"--sglang-profile-on-failure={traces}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"profile after the failed throughput gate: NOT TAKEN: {sim.url}* was attached, "
                                 "and profiling slows a server while it runs. Fix: give --sglang-allow-disruptive "
                                 "if the server's owner agrees"])
    assert not traces.exists() or not any(traces.iterdir())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--sglang-url={sim.url}",
                                           f"--sglang-profile-on-failure={traces}", "--sglang-allow-disruptive")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"profile after the failed throughput gate: trace in {traces}* (1 file, *"])


def test_a_profile_dir_that_is_a_file_or_unwritable_is_a_usage_error(pytester: pytest.Pytester) -> None:
    blocker = pytester.path / "traces"
    blocker.write_text("")
    for target, problem in ((blocker, "is a file, not a directory"),
                            (blocker / "sub", f"cannot be created: {blocker} is a file, not a directory"),
                            (Path("/proc/pytest-sglang-traces"), "cannot be written: directory /proc is not "
                                                                 "writable (*)")):
        result = _run(pytester, f"--sglang-profile-on-failure={target}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
        result.stderr.fnmatch_lines([f"ERROR: --sglang-profile-on-failure='{target}': {problem}. Fix: give "
                                     "--sglang-profile-on-failure a writable directory (or one that can be created) "
                                     "for the profiler traces of failed gates"])
        assert "SGLang ready" not in result.stdout.str()


SLO = """
import pytest


@pytest.mark.sglang_slo(max_e2e_ms_p99=0.001, min_concurrency=1, max_concurrency=2, input_len=16, output_len=4)
def test_slo():
    pass
"""


def test_a_failed_slo_gate_is_profiled_too(pytester: pytest.Pytester) -> None:
    traces = pytester.path / "traces"
    pytester.makepyfile(test_inner=SLO)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH}", f"--sglang-profile-on-failure={traces}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["profile after the failed slo gate: trace in *test_slo-1 (1 file, *"])


def test_a_baseline_regression_is_profiled(pytester: pytest.Pytester) -> None:
    """The second run is compared with a baseline whose throughput is ten times its own: a regression."""
    passing = FAILING.split("@pytest.mark", 2)
    pytester.makepyfile(test_inner="import pytest\n\n\n@pytest.mark" + passing[2])
    base = pytester.path / "base.json"
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                          f"--sglang-launch={SIM_LAUNCH}", f"--sglang-report={base}")
    first.assert_outcomes(passed=1)
    report = json.loads(base.read_text())
    for test in report["tests"]:
        for load in test["loads"]:
            load["output_throughput"] *= 10
    base.write_text(json.dumps(report))
    traces = pytester.path / "traces"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH}", f"--sglang-baseline={base}",
                                           f"--sglang-profile-on-failure={traces}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["profile after the failed baseline gate: trace in *test_fast_enough-1 (1 file, *"])
