"""What ``--sglang-baseline`` compares: the loads written to be compared (issue 30, item 4).

Through the real plugin against the simulator launched as a subprocess: a baseline of a throughput test
and a probe test, then a 3x slower candidate (the same figures as test_with_simulator.py: far beyond
the 5% limit, so these runs cannot flake). The probe gate's load serves the probes, not a measurement:
not compared, and a line says so; ``compare="all"`` compares it; the throughput test still is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.report import baseline_scope
from pytest_sglang.report.baseline import BaselineContext, parse_limits

SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 100"
FAST = f"--sglang-launch={SIM}"
CANDIDATE = ("--sglang-launch=--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.15 "
             "--sim-decode-step-ms 100")
INNER = """
import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=4, requests=16, input_len=32, output_len=16)
def test_throughput():
    pass


@pytest.mark.sglang_probes(readiness_timeout_seconds=2, readiness_period_seconds=0.25, liveness_path=None,
                           concurrency=4, requests=16, input_len=32, output_len=16)
{marker}
def test_probes():
    pass
"""


def _run(p: pytest.Pytester, marker: str, *args: str) -> pytest.RunResult:
    p.makepyfile(test_inner=INNER.format(marker=marker))
    return p.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", "-rfE", *args, timeout=240)


def test_a_probe_gates_load_is_not_compared_unless_the_test_opts_in(pytester: pytest.Pytester,
                                                                      tmp_path: Path) -> None:
    base, candidate = tmp_path / "prod.json", tmp_path / "candidate.json"
    _run(pytester, "", FAST, f"--sglang-report={base}").assert_outcomes(passed=2)
    probe_loads = next(t["loads"] for t in json.loads(base.read_text())["tests"] if t["nodeid"].endswith("probes"))
    assert probe_loads and {ld["gate"] for ld in probe_loads} == {"sglang_probes"}

    # Before: the probe test went red on its own load, like the throughput test.
    result = _run(pytester, "", CANDIDATE, f"--sglang-baseline={base}", "--sglang-max-regression=5%",
                  f"--sglang-report={candidate}")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["test_inner.py::test_throughput * FAILED", "*baseline output_throughput * FAILED",
                                 "FAILED test_inner.py::test_throughput - GateFailed: sglang baseline gate fail*"])
    # The line in the terminal summary (wrapped there) and, whole, in the JSON report's baseline notes.
    result.stdout.fnmatch_lines(["test_inner.py::test_probes * PASSED",
                                 "    note: load api=native concurrency=4 requests=16 *",
                                 "      dataset=random-ids not compared: @pytest.mark.sglang_probes ran it for its",
                                 "      own check, not as a performance measurement;",
                                 '      @pytest.mark.sglang_baseline(compare="all") compares it'])
    probes = next(t for t in json.loads(candidate.read_text())["tests"] if t["nodeid"].endswith("probes"))
    notes = [n for g in probes["gates"] if g["gate"] == "baseline" for n in g["notes"]]
    # One line per shape the gate ran (it may size a second load to last its probes' periods).
    assert notes and all(n.startswith("load api=native concurrency=4 requests=") and n.endswith(
        'not compared: @pytest.mark.sglang_probes ran it for its own check, not as a performance measurement; '
        '@pytest.mark.sglang_baseline(compare="all") compares it') for n in notes), notes

    opted_in = _run(pytester, '@pytest.mark.sglang_baseline(compare="all")', CANDIDATE, f"--sglang-baseline={base}",
                    "--sglang-max-regression=5%")
    opted_in.assert_outcomes(failed=2)
    opted_in.stdout.fnmatch_lines(["test_inner.py::test_probes * FAILED", "*baseline output_throughput * FAILED",
                                   "FAILED test_inner.py::test_probes - GateFailed: sglang baseline gate fail*"])
    assert "not compared: @pytest.mark.sglang_probes" not in opted_in.stdout.str()

    opted_out = _run(pytester, "@pytest.mark.sglang_baseline(compare=False)", CANDIDATE, f"--sglang-baseline={base}",
                     "--sglang-max-regression=5%", "-k", "probes")
    opted_out.assert_outcomes(passed=1)
    opted_out.stdout.fnmatch_lines(["test_inner.py::test_probes * PASSED", "    note: not compared with *"])
    assert "@pytest.mark.sglang_baseline(compare=False) on this test" in " ".join(opted_out.stdout.str().split())


@pytest.mark.parametrize(("marker", "says"), [
    ('compare="some"', "(compare='some') is not a choice"),
    ("compare=1", "(compare=1) is not a choice"),
    ("compare=None", "(compare=None) is not a choice"),
    ("False", "takes the keyword compare=, not positional arguments (False,)"),
    ("comapre=False", "has no keyword 'comapre' (its one keyword is compare=)"),
    ("", "without compare= changes nothing"),
])
def test_bad_marker_values_are_usage_errors(pytester: pytest.Pytester, marker: str, says: str) -> None:
    pytester.makepyfile(test_inner=f"import pytest\n\n@pytest.mark.sglang_baseline({marker})\ndef test_x():\n"
                                   "    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-launch=--model-path x",
                                           "--sglang-command=/nonexistent/sglang")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: invalid pytest-sglang marker:",
                                 f"test_inner.py::test_x: @pytest.mark.sglang_baseline*{says}*: write "
                                 '@pytest.mark.sglang_baseline(compare=True), compare="all" or compare=False'])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="import pytest\n\n@pytest.mark.sglang_baseline(compare=False)\ndef test_x():\n"
                                   "    pass\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers").assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.sglang_baseline(compare=True): what --sglang-baseline compares*"])


def _load(gate: str | None, throughput: float) -> dict[str, object]:
    load: dict[str, object] = {"spec": {"concurrency": 4, "requests": 16}, "completed": 16, "failed": 0,
                               "output_throughput": throughput}
    return load if gate is None else {**load, "gate": gate}


@pytest.mark.parametrize(("gate", "compared"), [(None, True), ("sglang_throughput", True), ("sglang_slo", True),
                                                ("sglang_probes", False), ("sglang_soak", False),
                                                ("sglang_failover", False), ("sglang_speculative", False)])
def test_which_gates_loads_are_measurements(gate: str | None, compared: bool) -> None:
    kept, notes = baseline_scope.select([_load(gate, 100.0)], "measurements")
    assert (len(kept), len(notes)) == ((1, 0) if compared else (0, 1))
    assert baseline_scope.select([_load(gate, 100.0)], "all") == ([_load(gate, 100.0)], [])
    assert baseline_scope.select([_load(gate, 100.0)], "none") == ([], [])


def test_a_baseline_written_before_loads_named_their_gate_still_matches_by_shape() -> None:
    # The old baseline's probe load has no "gate": matched by shape, as before, when the test opts in.
    report = {"tests": [{"nodeid": "t::probes", "loads": [_load(None, 100.0)]}]}
    ctx = BaselineContext("prod.json", report, parse_limits("output_throughput:5%"))
    outcome = ctx.outcome("t::probes", [_load("sglang_probes", 10.0)], [], {}, scope="all")
    assert outcome is not None and not outcome.passed
    quiet = ctx.outcome("t::probes", [_load("sglang_probes", 10.0)], [], {})
    assert quiet is not None and quiet.passed and not quiet.checks and len(quiet.notes) == 1


def test_a_test_whose_loads_all_serve_another_gate_is_not_missing_from_the_baseline() -> None:
    # Not compared by default, so not "a test that measured figures the baseline lacks" either.
    ctx = BaselineContext("prod.json", {"tests": [{"nodeid": "t::tp", "loads": [_load(None, 100.0)]}]},
                          parse_limits("5%"))
    loads = [_load("sglang_probes", 10.0)]
    assert not ctx.measures(loads, []) and ctx.measures(loads, [], "all")
    ctx.expect([("t::tp", None), ("t::probes", None)])
    outcome = ctx.outcome("t::probes", loads, [], {})
    assert outcome is not None and outcome.passed and [n.split(" not compared:")[1] for n in outcome.notes] == [
        ' @pytest.mark.sglang_probes ran it for its own check, not as a performance measurement; '
        '@pytest.mark.sglang_baseline(compare="all") compares it']
