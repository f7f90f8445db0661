"""``python -m pytest_sglang load`` with real workloads: trace replay, multi-turn, their options and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.cli.load import main
from tests.conftest import SimFactory

TRACES = Path(__file__).parents[2] / "fixtures" / "traces"
MOONCAKE = f"mooncake:{TRACES / 'mooncake-sample.jsonl'}"
BURSTGPT = f"burstgpt:{TRACES / 'burstgpt-sample.csv'}"


def _usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["--url", "http://127.0.0.1:9", *argv])
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1].removeprefix("python -m pytest_sglang load: ")


@pytest.mark.parametrize(("argv", "message"), [
    (["--dataset", MOONCAKE, "--requests", "4", "--input-len", "8"],
     "error: argument --input-len: not allowed with a mooncake trace, which gives the lengths and the arrival times "
     "(use --trace-time-scale to replay faster or slower)"),
    (["--dataset", BURSTGPT, "--requests", "4", "--request-rate", "2"],
     "error: argument --request-rate: not allowed with a burstgpt trace"),
    (["--dataset", MOONCAKE, "--requests", "4", "--trace-time-scale", "0"],
     "error: argument --trace-time-scale: invalid value: '0' (expected a number > 0)"),
    (["--requests", "4", "--input-len", "8", "--output-len", "4"],
     "error: one of the arguments --concurrency --request-rate is required"),
    (["--requests", "4", "--concurrency", "2", "--input-len", "8", "--output-len", "4", "--trace-time-scale", "2"],
     "error: LoadSpec.trace_time_scale=2.0: applies to a trace replay only, not to dataset random-ids"),
    (["--requests", "4", "--concurrency", "2", "--output-len", "4"],
     "error: the following arguments are required: --input-len"),
    (["--dataset", "multiturn:turns=2", "--requests", "4", "--output-len", "4"],
     "error: LoadSpec.api='native': a multiturn dataset is a conversation through the chat API (as SGLang's "
     "bench_serving multi-turn mode). Fix: use api='chat' (--api chat)"),
    (["--dataset", "multiturn:turn=2", "--api", "chat", "--requests", "4", "--output-len", "4"],
     "error: LoadSpec.dataset='multiturn:turn=2': has no option 'turn' (did you mean 'turns'?)"),
    (["--dataset", "mooncake:/nonexistent/trace.jsonl", "--requests", "4"],
     "error: dataset='mooncake:/nonexistent/trace.jsonl': cannot be read (No such file or directory). Fix: give an "
     "existing mooncake trace file"),
])
def test_workload_usage_errors_name_the_option_and_the_fix(argv: list[str], message: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage(argv, capsys).startswith(message)


def test_a_trace_replay_prints_cache_and_replay_sections(sim_factory: SimFactory, tmp_path: Path) -> None:
    sim = sim_factory("--enable-metrics")
    out = tmp_path / "r.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest_sglang", "load", "--url", sim.url, "--dataset", MOONCAKE,
                          "--requests", "20", "--trace-time-scale", "0.05", "--concurrency", "4", "--json", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "----------------Cache Hit Details-----------------" in lines
    hit = next(line for line in lines if line.startswith("Cache hit rate:"))
    assert float(hit.split()[-1].rstrip("%")) > 20
    assert any(line.startswith("Server cache hit rate (/metrics):") for line in lines)
    assert "-------------------Trace Replay-------------------" in lines
    assert any(line.startswith("Trace rows replayed:") and "20 (mooncake)" in line for line in lines)
    assert any(line.startswith("P99 send timing error (ms):") for line in lines)
    assert any(line.startswith("Sent late by the in-flight cap:") and "(cap 4)" in line for line in lines)
    data = json.loads(out.read_text())
    assert data["workload"]["rows"] == 20 and data["cache_report"]["cache_hit_rate_pct"] > 20
    assert data["spec"]["trace_time_scale"] == 0.05


def test_a_multiturn_run_needs_no_input_len_and_reports_the_cache(sim_factory: SimFactory,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sim = sim_factory("--enable-metrics", "--enable-cache-report")
    code = main(["--url", sim.url, "--dataset", "multiturn:sessions=2,turns=3,first_len=32,turn_len=8", "--api",
                 "chat", "--requests", "6", "--output-len", "6", "--concurrency", "2"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("Successful requests:") and line.split()[-1] == "6" for line in lines)
    hit = next(line for line in lines if line.startswith("Cache hit rate:"))
    assert float(hit.split()[-1].rstrip("%")) > 20
    assert not any("Trace Replay" in line for line in lines)
