"""``--sglang-suggest-floors``: the floors it prints are floors a re-run passes."""

from __future__ import annotations

import json
import re

import pytest

from pytest_sglang.gates.suggest import suggest_floors
from tests.conftest import SimFactory

MARKED = """
import pytest

@pytest.mark.sglang_throughput(min_output_tok_s={tok_s}, min_request_s={req_s},
                               requests=48, concurrency=8, input_len=128, output_len=32)
def test_tp():
    pass
"""


def test_suggested_floors_hold_on_a_rerun(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    # Floors no server meets: measure-only does not judge them.
    pytester.makepyfile(test_tp=MARKED.format(tok_s=10**9, req_s=10**9))
    first = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-suggest-floors",
                                          "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["sglang suggested floors (the worst end of each figure's 95% interval, 50% margin*",
                                "  test_tp.py::test_tp: @pytest.mark.sglang_throughput(min_output_tok_s=*, "
                                "min_request_s=*, ...)",
                                f"sglang suggested floors JSON: {pytester.path / 'sglang-suggested-floors.json'}"])
    saved = json.loads((pytester.path / "sglang-suggested-floors.json").read_text())
    floors = saved["tests"]["test_tp.py::test_tp"]["floors"]
    printed = re.search(r"min_output_tok_s=([\d.e+]+), min_request_s=([\d.e+]+)", first.stdout.str())
    assert printed is not None and float(printed[1]) == floors["min_output_tok_s"]

    pytester.makepyfile(test_tp=MARKED.format(tok_s=floors["min_output_tok_s"], req_s=floors["min_request_s"]))
    second = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-p", "no:cacheprovider")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*throughput output_throughput*ok"])


def test_without_the_option_the_same_floors_fail(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_tp=MARKED.format(tok_s=10**9, req_s=10**9))
    pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "-p", "no:cacheprovider").assert_outcomes(failed=1)


def test_the_rule_takes_the_worst_figure_with_the_margin() -> None:
    assert suggest_floors({"min_output_tok_s": [1000.0, 800.0], "max_ttft_ms_p99": [10.0, 30.0]}, 0.25) == {
        "min_output_tok_s": 600.0, "max_ttft_ms_p99": 37.5}
    assert suggest_floors({"min_request_s": []}) == {}
    with pytest.raises(ValueError, match="margin=1"):
        suggest_floors({"min_request_s": [1.0]}, 1)
    with pytest.raises(ValueError, match="min_ or max_"):
        suggest_floors({"requests": [1.0]})


def test_the_option_reads_env_and_ini(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_SGLANG_SUGGEST_FLOORS", "maybe")
    result = pytester.runpytest("--sglang-url=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*PYTEST_SGLANG_SUGGEST_FLOORS*maybe*"])
