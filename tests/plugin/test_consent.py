"""Consent: against an attached server, flushes and heavy loads need --sglang-allow-disruptive."""

from __future__ import annotations

import pytest

from tests.conftest import SimFactory

ACCEPTANCE_FLUSH = ("--pyargs", "pytest_sglang.acceptance", "-p", "no:cacheprovider", "-rs", "-k", "cache_logprobs")

LOADS = """
import pytest

def test_flushing_load(sglang_load):
    sglang_load(requests=2, input_len=16, output_len=4, flush_cache=True)

@pytest.mark.sglang_throughput(requests=4, concurrency=2, input_len=64, output_len=8)
def test_heavy_marker():
    pass

def test_light_load(sglang_load):
    sglang_load(requests=2, input_len=16, output_len=4)
"""


def test_a_cache_flush_on_an_attached_server_is_skipped_naming_the_option(
        pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    refused = pytester.runpytest_subprocess(*ACCEPTANCE_FLUSH, f"--sglang-url={sim.url}")
    refused.assert_outcomes(skipped=1)
    refused.stdout.fnmatch_lines([f"SKIPPED * not run against the attached server {sim.url}: this check flushes "
                                  "the prefix cache (POST /flush_cache). Fix: give --sglang-allow-disruptive *"])
    refused.stdout.fnmatch_lines(["sglang: sent to the server by this run: * 0 cache flushes"])

    allowed = pytester.runpytest_subprocess(*ACCEPTANCE_FLUSH, f"--sglang-url={sim.url}", "--sglang-allow-disruptive")
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(["sglang: sent to the server by this run: * requests, [1-9]* cache flush*"])


def test_strict_fails_the_check_instead(pytester: pytest.Pytester, sim_factory: SimFactory) -> None:
    sim = sim_factory()
    result = pytester.runpytest_subprocess(*ACCEPTANCE_FLUSH, f"--sglang-url={sim.url}", "--sglang-strict")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*Fix: give --sglang-allow-disruptive*--sglang-strict: a check that cannot run fails*"])


def test_a_launched_server_needs_no_consent(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(*ACCEPTANCE_FLUSH, "--sglang-simulate")
    result.assert_outcomes(passed=1)


def test_flushing_and_heavy_loads_are_refused_and_light_ones_run(pytester: pytest.Pytester,
                                                                  sim_factory: SimFactory) -> None:
    sim = sim_factory()
    pytester.makepyfile(test_loads=LOADS)
    result = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-heavy-load=200", "-rs",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines_random([
        "SKIPPED * this check flushes the prefix cache (LoadSpec flush_cache=True, POST /flush_cache)*",
        "SKIPPED * this check sends 288 tokens of load, more than --sglang-heavy-load 200. Fix: give "
        "--sglang-allow-disruptive*",
    ])
    allowed = pytester.runpytest_subprocess(f"--sglang-url={sim.url}", "--sglang-heavy-load=200",
                                            "--sglang-allow-disruptive", "-p", "no:cacheprovider")
    allowed.assert_outcomes(passed=3)


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_bad_heavy_load_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest(f"--sglang-heavy-load={value}", "--sglang-url=http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--sglang-heavy-load*{value}*"])
