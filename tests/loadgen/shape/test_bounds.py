"""A load of any size runs in bounded memory, stops at its deadline and at the first Ctrl-C."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from loadgen.loadgen_fake import FakeServer
from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.shape.spec import MAX_LOAD_S
from pytest_sglang.loadgen.soak.run import SoakSpec

#: Runs a load in a fresh interpreter and prints its figures, including the peak RSS while it ran.
MEMORY_SCRIPT = """
import json, sys, threading, time
import psutil
from pytest_sglang.loadgen import LoadSpec, run_load

url = sys.argv[1]
shape = dict(concurrency=8, input_len=8, output_len=4, warmup=0, sample_server_metrics=False)
run_load(url, LoadSpec(requests=50, **shape))  # imports and first allocations out of the way
me = psutil.Process()
before = me.memory_info().rss
peak = [before]
running = True

def watch():
    while running:
        peak[0] = max(peak[0], me.memory_info().rss)
        time.sleep(0.02)

threading.Thread(target=watch, daemon=True).start()
started = time.monotonic()
result = run_load(url, LoadSpec(requests=10_000_000, load_timeout_s=3.0, max_records=200, **shape))
elapsed = time.monotonic() - started
running = False
print(json.dumps({"elapsed": elapsed, "growth_mb": (peak[0] - before) / 1e6, "completed": result.completed,
                  "not_sent": result.not_sent, "errors": result.errors, "kept": len(result.records),
                  "sample": result.percentile_sample, "note": result.sampling_note()}))
"""

#: Runs an endless load; says "running" once requests complete; exits 130 on KeyboardInterrupt.
#: ``async`` calls run_load from a coroutine under asyncio.run (as an async test would).
INTERRUPT_SCRIPT = """
import asyncio
import sys
from pytest_sglang.loadgen import LoadSpec, run_load

said = []

def progress(done, total):
    if done and not said:
        said.append(True)
        print("running", flush=True)

async def from_async(spec):
    return run_load(sys.argv[1], spec, progress=progress)

if __name__ == "__main__":  # client processes are spawned: they import this file
    mode = sys.argv[2]
    spec = LoadSpec(requests=10_000_000, concurrency=4, processes=2 if mode == "processes" else 1, input_len=8,
                    output_len=64, warmup=0, sample_server_metrics=False)
    try:
        if mode == "async":
            asyncio.run(from_async(spec))
        else:
            run_load(sys.argv[1], spec, progress=progress)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        raise SystemExit(130)
"""


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_ten_million_requests_stay_in_bounded_memory_and_stop_at_the_deadline(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    proc = subprocess.run([sys.executable, str(_script(tmp_path, MEMORY_SCRIPT)), fake_server.url],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # Before: every prompt and task built up front (20.7 GB for 10**9 requests; here minutes and GBs).
    assert out["elapsed"] < 3.0 + 4.0, out
    assert out["growth_mb"] < 60, out  # generous: the kept sample, in-flight requests, allocator slack
    assert out["completed"] > 200 and out["not_sent"] > 9_000_000, out
    assert out["completed"] + sum(out["errors"].values()) + out["not_sent"] == 10_000_000, out
    assert list(out["errors"]) == ["timeout"] and out["errors"]["timeout"] <= 8, out  # those in flight
    assert out["kept"] == out["sample"] == 200, out
    assert out["note"].startswith("latency percentiles (median, p90, p95, p99) from a uniform sample of 200 of ")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a process on Windows")
@pytest.mark.parametrize("mode", ["single", "processes", "async"])
def test_the_first_ctrl_c_stops_the_load_and_everything_it_started(
    fake_server: FakeServer, tmp_path: Path, mode: str
) -> None:
    fake_server.behaviour.step_s = 0.01  # requests stay in flight for ~0.6 s
    script = _script(tmp_path, INTERRUPT_SCRIPT)
    with subprocess.Popen([sys.executable, str(script), fake_server.url, mode],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            # Requests complete within seconds (before the fix, every prompt was built first: minutes).
            ready, _, _ = select.select([proc.stdout], [], [], 30.0)
            assert ready, "no request completed within 30 s"
            first = proc.stdout.readline().strip()
            assert first == "running", proc.stderr.read()
            children = psutil.Process(proc.pid).children(recursive=True)
            assert len(children) >= (2 if mode == "processes" else 0)
            _wait_for(lambda: fake_server.in_flight > 0)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)  # to the parent only: it must stop its children itself
            code = proc.wait(timeout=30)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
        rest, err = proc.stdout.read(), proc.stderr.read()
    assert code == 130, (rest, err)
    assert "interrupted" in rest
    assert elapsed < 5.0, elapsed  # about 1 s on an idle machine; generous for a loaded CI runner
    # The client processes, and multiprocessing's resource tracker (it leaves once the parent is gone).
    _, alive = psutil.wait_procs(children, timeout=3.0)
    assert alive == []
    _wait_for(lambda: fake_server.in_flight == 0)  # the server sees every stream closed


def _wait_for(condition: Callable[[], bool], timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"requests": 10**9, "concurrency": 8}, "LoadSpec.requests=1000000000: is more than the limit of "
         "10,000,000. Fix: give at most 10,000,000 (run for a fixed time with load_timeout_s= instead)"),
        ({"requests": 100_000}, "LoadSpec.requests=100000: would all be sent at once (no concurrency, no "
         "request_rate): at most 65,536. Fix: give concurrency=N (requests in flight) or request_rate=R "
         "(arrivals per second)"),
        ({"input_len": 10**9}, "LoadSpec.input_len=1000000000: is more than the limit of 1,048,576. Fix: give "
         "at most 1,048,576 (prompts are built in memory)"),
        ({"output_len": 2**21}, "LoadSpec.output_len=2097152: is more than the limit of 1,048,576. Fix: give at "
         "most 1,048,576 (each answer's token times are kept in memory)"),
        ({"concurrency": 10**6}, "LoadSpec.concurrency=1000000: is more than the limit of 65,536. Fix: give at "
         "most 65,536 (each request in flight holds a connection)"),
        ({"warmup": 10**6}, "LoadSpec.warmup=1000000: is more than 10,000 warmup requests. Fix: a few warm a "
         "server"),
        ({"max_records": 0}, "LoadSpec.max_records=0: must be a whole number >= 1. Fix: give max_records as a "
         "positive integer"),
        ({"request_rate": float("inf")}, "LoadSpec.request_rate=inf: must be a finite number > 0 requests/s. Fix: "
         "give a positive rate, or None for all requests at once"),
        ({"request_rate": 1e-300, "burstiness": 1e-300}, "LoadSpec.burstiness=1e-300: times request_rate=1e-300 is "
         "0 in floating point. Fix: give a request_rate and burstiness whose product is a normal number, e.g. "
         "burstiness=1.0"),
        ({"load_timeout_s": 1e15}, "LoadSpec.load_timeout_s=1000000000000000.0: is more than the limit of 604,800 s "
         "(a week). Fix: give at most 604,800 s, or None to derive it"),
        ({"request_timeout_s": 1e9}, "LoadSpec.request_timeout_s=1000000000.0: is more than the limit of 604,800 s "
         "(a week). Fix: give at most 604,800 s, or None to derive it"),
    ],
)
def test_absurd_sizes_are_refused_before_anything_is_built(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


@pytest.mark.parametrize("kwargs", [
    {"requests": 1000, "request_rate": 1e-12},  # arrivals over 6e13 years
    {"requests": 10_000_000, "concurrency": 1},  # 10 million requests one at a time, each allowed 60 s or more
    {"requests": 10_000_000, "concurrency": 65_536, "input_len": 1_048_576, "output_len": 1_048_576},
    {"requests": 64, "request_rate": 1e-300},
])
def test_every_derived_deadline_is_bounded(kwargs: dict[str, object]) -> None:
    spec = LoadSpec(**kwargs)  # type: ignore[arg-type]
    assert 0 < spec.request_timeout() <= MAX_LOAD_S and 0 < spec.load_timeout() <= MAX_LOAD_S
    assert spec.load_timeout(span_s=float("inf")) == MAX_LOAD_S


def test_a_soak_longer_than_a_week_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"SoakSpec\(duration_s=...\)=1000000000.0: is more than the limit of "
                                          r"604,800 s \(a week\)"):
        SoakSpec(duration_s=1e9, concurrency=2)


def test_a_refusal_during_the_run_is_the_only_error_shown(tmp_path: Path) -> None:
    data = tmp_path / "huge.jsonl"
    with data.open("wb") as fh:
        fh.truncate(65 * 1024 * 1024)  # sparse: over the 64 MiB cap of a data set read whole, written in no time
    spec = LoadSpec(dataset=f"jsonl:{data}", requests=4, concurrency=1, warmup=0)
    with pytest.raises(ConfigError, match=r"larger than the 64\.0 MiB cap") as info:
        run_load("http://127.0.0.1:9", spec)
    # Raised by the run's coroutine: nothing chained to it ("During handling ... no running event loop").
    assert info.value.__context__ is None and info.value.__cause__ is None
