"""Real workloads in the load markers: a pytest session against the simulator launched by the plugin.

Each workload runs through ``sglang_throughput`` (``dataset=``, ``trace_time_scale=``), its prefix-cache
hit rate and replay timing reach the test body (``sglang_gate.load``), the terminal summary and the JSON
report (validated against ``schemas/report.schema.json``); a typo in a workload is a usage error that
names the keyword, the value and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).parents[3]
TRACES = ROOT / "fixtures" / "traces"
LAUNCH = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --enable-metrics --enable-cache-report"
INNER = f"""
import pytest

MOONCAKE = "mooncake:{TRACES / 'mooncake-sample.jsonl'}"
BURSTGPT = "burstgpt:{TRACES / 'burstgpt-sample.csv'}"


@pytest.mark.sglang_throughput(dataset=MOONCAKE, trace_time_scale=0.05, requests=40, api="chat")
def test_mooncake_replay(sglang_gate):
    load = sglang_gate.load
    assert load.completed == 40
    assert load.cache_report["cache_hit_rate_pct"] > 20
    assert load.workload["rows"] == 40 and load.workload["timing_error_ms"]["max"] >= 0
    assert "prefix cache" in sglang_gate["throughput"].context


@pytest.mark.sglang_throughput(dataset=BURSTGPT, trace_time_scale=0.02, requests=40, concurrency=8)
def test_burstgpt_replay(sglang_gate):
    assert sglang_gate.load.completed == 38 and sglang_gate.load.workload["skipped_rows"] == 2


@pytest.mark.sglang_throughput(dataset="multiturn:sessions=4,turns=3,think_s=0.02,first_len=48,turn_len=8",
                               api="chat", concurrency=4, requests=12, output_len=8)
def test_multiturn_chat(sglang_gate):
    load = sglang_gate.load
    assert load.completed == 12
    assert load.cache_report["cache_hit_rate_pct"] > 20
    assert load.cache_report["server_cache_hit_rate_pct"] > 20
"""


def test_each_workload_runs_and_reports_its_cache_hit_rate(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    report = pytester.path / "report.json"
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE", f"--sglang-report={report}")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "test_inner.py::test_mooncake_replay*PASSED",
        "  throughput error_rate*",
        "    prefix cache: hit *% (cached_tokens * of * prompt tokens);",
        "      server *% (sglang:cached_tokens_total / sglang:prompt_tokens_total);",
        "      sglang:cache_hit_rate mean *%",
        "    replay: 40 mooncake rows x 0.05 time scale over * s; send timing error",
        "      p50/p99/max */*/* ms",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["    replay: 38 burstgpt rows x 0.02 time scale over * s; send timing error"])
    result.stdout.fnmatch_lines(["test_inner.py::test_multiturn_chat*PASSED", "  throughput error_rate*",
                                 "    prefix cache: hit *"], consecutive=True)
    result.stdout.fnmatch_lines(["    multi-turn: 4 sessions x 3 turns, think 0.02 s"])
    data = json.loads(report.read_text())
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    loads = {t["nodeid"].split("::")[-1]: t["loads"][0] for t in data["tests"] if t["loads"]}
    assert loads["test_mooncake_replay"]["cache_report"]["cache_hit_rate_pct"] > 20
    assert loads["test_mooncake_replay"]["workload"]["trace"] == "mooncake"
    assert loads["test_multiturn_chat"]["workload"]["sessions"] == 4


BAD = """
import pytest


@pytest.mark.sglang_throughput(dataset="multiturn:turn=3", api="chat", requests=4)
def test_typo():
    pass


@pytest.mark.sglang_throughput(dataset="multiturn", requests=4)
def test_native_api():
    pass


@pytest.mark.sglang_throughput(dataset="mooncake:/nonexistent.jsonl", requests=4)
def test_missing_trace():
    pass
"""


def test_a_bad_workload_names_the_keyword_and_sends_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=BAD)
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE")
    result.assert_outcomes(errors=3)
    for line in (
        "@pytest.mark.sglang_throughput(dataset='multiturn:turn=3'): has no option 'turn' (did you mean 'turns'?). "
        "Fix: use the options sessions, turns, think_s, system_len, first_len, turn_len, e.g. *",
        "@pytest.mark.sglang_throughput(api='native'): a multiturn dataset is a conversation through the chat API "
        "(as SGLang's bench_serving multi-turn mode). Fix: use api='chat' (--api chat)",
        "@pytest.mark.sglang_throughput(dataset='mooncake:/nonexistent.jsonl'): cannot be read (No such file or "
        "directory). Fix: give an existing mooncake trace file, e.g. mooncake:fixtures/traces/mooncake-sample.jsonl",
    ):
        result.stdout.fnmatch_lines([f"*{line}"])
    assert "sglang: sent to the server by this run" not in result.stdout.str()  # no request was sent


def test_a_time_scale_of_zero_is_a_usage_error_before_the_server_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=f"""
import pytest

@pytest.mark.sglang_throughput(dataset="mooncake:{TRACES / 'mooncake-sample.jsonl'}", trace_time_scale=0)
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-launch=--model-path x", "--sglang-command=/nonexistent/sglang")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["test_inner.py::test_load: @pytest.mark.sglang_throughput(trace_time_scale=0): must "
                                 "be a number > 0. Fix: give trace_time_scale a number > 0"])


def test_a_trace_whose_span_has_no_bound_is_an_error_not_a_hang(pytester: pytest.Pytester) -> None:
    trace = pytester.path / "far.jsonl"
    # The second request 1e15 ms (31,688 years) after the first: the load's deadline used to add that span.
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n'
                     '{"timestamp": 1e15, "input_length": 8, "output_length": 4}\n')
    pytester.makepyfile(test_inner=f"""
import pytest

@pytest.mark.sglang_throughput(dataset="mooncake:{trace}")
def test_load():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", LAUNCH, "-p", "no:cacheprovider",
                                           "-rfE", timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["@pytest.mark.sglang_throughput could not measure: KeywordError: "
                                 "@pytest.mark.sglang_throughput(dataset='mooncake:*): line 2 would be sent "
                                 "1,000,000,000,000 s (31,688 years) after the first request, later than the longest "
                                 "load (604,800 s, 7.0 days). Fix: check the timestamps' unit*"])
    assert "During handling of the above exception" not in result.stdout.str()  # the refusal, once
    assert "sglang: sent to the server by this run" not in result.stdout.str()  # no request was sent
