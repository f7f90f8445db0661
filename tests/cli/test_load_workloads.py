"""``python -m pytest_sglang load`` with real workloads: trace replay, multi-turn, their options and output."""

from __future__ import annotations

import json
import os
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
    (["--dataset", "multiturn:turns=2,turns=3", "--api", "chat", "--requests", "4", "--output-len", "4"],
     "error: LoadSpec.dataset='multiturn:turns=2,turns=3': gives option 'turns' twice (turns=2, turns=3). Fix: give "
     "each option once"),
    (["--concurrency", "2", "--input-len", "8", "--output-len", "4"],
     "error: the following arguments are required: --requests"),
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


def _load(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "load", *argv], capture_output=True, text=True,
                          timeout=timeout)


def test_a_trace_replay_needs_no_requests_and_says_how_it_is_paced(sim_factory: SimFactory, tmp_path: Path) -> None:
    sim = sim_factory()
    out = tmp_path / "r.jsonl"
    run = _load("--url", sim.url, "--dataset", MOONCAKE, "--trace-time-scale", "0.05", "--concurrency", "4",
                "--json", str(out))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("Trace rows replayed:") and "40 (mooncake)" in line for line in lines)  # every row
    assert any(line.startswith("Successful requests:") and line.split()[-1] == "40" for line in lines)
    # Not bench_serving's "inf": a replay sends each request at its trace time, scaled.
    assert "Traffic request rate:                    request times from the trace, scaled by 0.05" in lines
    assert "Max request concurrency:                 4 (in-flight cap)" in lines
    assert json.loads(out.read_text())["spec"]["requests"] == 40  # the rows the trace has


def test_a_trace_row_later_than_the_longest_load_is_refused_not_waited_for(sim_factory: SimFactory,
                                                                           tmp_path: Path) -> None:
    sim = sim_factory()
    trace = tmp_path / "far.jsonl"
    # 1e15 ms: 31,688 years after the first row. The deadline used to add that span: the load never ended.
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n'
                     '{"timestamp": 1e15, "input_length": 8, "output_length": 4}\n')
    run = _load("--url", sim.url, "--dataset", f"mooncake:{trace}", timeout=60)
    assert run.returncode == 2, run.stderr
    assert (f"error: dataset='mooncake:{trace}': line 2 would be sent 1,000,000,000,000 s (31,688 years) after the "
            "first request, later than the longest load (604,800 s, 7.0 days). Fix: check the timestamps' unit "
            "(milliseconds in a mooncake trace); replay fewer rows (requests=N) or faster (trace_time_scale < 1)"
            ) in run.stderr
    assert "Traceback" not in run.stderr


def test_a_fifo_given_as_a_trace_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)  # nothing ever writes to it: opening it for reading used to wait forever
    run = _load("--url", "http://127.0.0.1:9", "--dataset", f"burstgpt:{fifo}", "--requests", "4", timeout=60)
    assert run.returncode == 2, run.stderr
    assert (f"error: dataset='burstgpt:{fifo}': is a named pipe (FIFO), not a regular file (a trace is read twice: "
            "checked before anything is sent, then streamed during the replay). Fix: save the trace to a file"
            ) in run.stderr


def test_a_long_trace_check_shows_its_progress(tmp_path: Path) -> None:
    trace = tmp_path / "long.jsonl"
    row = '{"timestamp": %d, "input_length": 8, "output_length": 4}\n'
    trace.write_text("".join(row % i for i in range(70_000)))
    run = _load("--url", "http://127.0.0.1:9", "--dataset", f"mooncake:{trace}", "--trace-time-scale", "0.001")
    lines = run.stderr.splitlines()
    # A log (not a terminal) gets a line at the first update (then every 16th) and one when the check ends.
    assert any(line.startswith(f"checking mooncake:{trace}: 65,536 rows read, ") for line in lines), run.stderr
    assert any(line.startswith(f"checked mooncake:{trace}: 70,000 rows in ") for line in lines), run.stderr


def test_a_fifo_given_as_a_data_set_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "prompts.jsonl"
    os.mkfifo(fifo)
    run = _load("--url", "http://127.0.0.1:9", "--dataset", f"jsonl:{fifo}", "--requests", "4", "--concurrency", "1",
                "--input-len", "8", "--output-len", "4", timeout=60)
    assert run.returncode == 2, run.stderr
    assert (f"error: dataset='{fifo}': is not a regular file (a named pipe, a device or a directory); a load reads "
            "its data set more than once. Fix: save the jsonl data set to a file") in run.stderr
