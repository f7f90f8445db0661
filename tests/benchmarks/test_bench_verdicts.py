"""benchmarks/bench_verdicts.py: its options refuse bad values, and it judges saved interleaved launches.

The measuring (simulators, smg) is the benchmark's to run; here the judging runs on generated saved
launches (``--judge-only``), so the rates it prints are checked without launching anything.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_sglang.loadgen.measure.record import RequestRecord

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_verdicts.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verdicts", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["bench_verdicts.py", *args])
    try:
        return int(bench.main())
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2


def save(path: Path, cycles: int, noise: float, seed: int = 3, requests: int = 256) -> None:
    """Interleaved launches as the benchmark saves them: healthy, -10 % throughput, healthy, +20 % TTFT."""
    rng = random.Random(seed)
    lines = []
    for cycle in range(cycles):
        for slot, (role, slower) in enumerate((("healthy", 1.0), ("tput", 1 / 0.9), ("healthy", 1.0),
                                                ("ttft", 1.2))):
            speed = slower * (1 + rng.gauss(0, noise))
            loads = [{"output_throughput": 300.0 / speed, "p99_ttft_ms": 250.0 * speed, "median_ttft_ms": 90 * speed,
                      "duration": 6.0 * speed, "records": [], "completed": requests}]
            lines.append(json.dumps({"cycle": cycle, "slot": slot, "role": role, "slower": slower, "ready_s": 4.0,
                                     "launch_s": 10.0, "loads": loads}))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("args", "named"), [
    (("--per-side", "1"), "--per-side [1]: a paired verdict needs at least 2 launches per side"),
    (("--per-side", "three"), "--per-side 'three': give whole numbers >= 2"),
    (("--cycles", "1"), "--cycles >= 2"),
    (("--comparisons", "0"), "--comparisons >= 1"),
    (("--repeats", "0"), "--repeats >= 1"),
    (("--setups", "single,nope"), "--setups single,nope: unknown nope"),
    (("--range-ratio", "0"), "--range-ratio 0.0: give a ratio in (0, 1]"),
    (("--range-ratio", "1.5"), "--range-ratio 1.5: give a ratio in (0, 1]"),
    (("--request-rate", "-1"), "--request-rate -1.0: give requests per second > 0"),
    (("--request-rate", "nan"), "--request-rate nan: give requests per second > 0"),
    (("--max-regression", "five"), "--max-regression five: cannot read 'five'"),
    (("--max-regression", "0%"), "--max-regression 0%: the limit of output_throughput is 0%"),
    (("--max-regression", "output_throughput:5%"), "no limit for p99_ttft_ms"),
    (("--max-regression", "tput:5%,p99_ttft_ms:10%"), "--max-regression tput:5%,p99_ttft_ms:10%"),
])
def test_bad_values_are_usage_errors_naming_the_option(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      args: tuple[str, ...], named: str) -> None:
    assert run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", *args) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_judge_only_without_saved_launches_says_what_to_do(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", "--setups", "single")
    out = capsys.readouterr()
    assert code != 0
    assert "single.jsonl" in out.out + out.err and "--judge-only" in out.out + out.err


def test_quiet_launches_meet_every_goal_with_few_launches(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save(tmp_path / "single.jsonl", cycles=8, noise=0.005)
    code = run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", "--setups", "single")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "A/A false alarms 0/" in out
    needed = int(out.split("launches per side needed: ")[1].split(";")[0])
    assert needed <= 3, out
    assert "statistical minimum for the noise measured: 2 to see the injected changes" in out
    assert "for every goal: needed" in out
    assert "x one load run" in out
    assert "fewer than --comparisons 100: 28 distinct draws of 8 cycles" in out  # N=2: C(8, 2) = 28


def test_noisy_launches_are_counted_as_cannot_judge_apart(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save(tmp_path / "single.jsonl", cycles=6, noise=0.06)
    code = run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", "--setups", "single",
               "--per-side", "3")
    out = capsys.readouterr().out
    assert code == 1, out
    line = next(x for x in out.splitlines() if "N=3 per side" in x)
    cannot = int(line.split("cannot judge ")[1].split("/")[0])
    assert cannot > 0, line
    assert "GOAL MISSED" in out


def test_a_p99_of_small_loads_is_cannot_judge_not_a_rate(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The same quiet launches, but each load completed 64 requests: their p99 is about their maximum, so
    # every p99 verdict is "cannot judge" (counted apart), never an A/A alarm nor a detection.
    save(tmp_path / "single.jsonl", cycles=6, noise=0.005, requests=64)
    code = run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", "--setups", "single",
               "--per-side", "3")
    out = capsys.readouterr().out
    assert code == 1, out
    line = next(x for x in out.splitlines() if "N=3 per side" in x)
    assert "A/A false alarms 0/20" in line and "cannot judge 20/20" in line, line
    assert "p99 TTFT +20% 0/20 = 0.0% (cannot judge 20)" in line, line
    assert "throughput -10% 20/20" in line, line


def test_steady_window_leaves_out_ramp_up_and_drain(bench: ModuleType) -> None:
    # Two waves of 2 requests at concurrency 2, then a third: the window runs from the first completion
    # (1.0 s) to the last send (2.0 s); the first wave was sent before it.
    recs = [RequestRecord(index=i, start=s, ttft=0.2, itl=[0.2] * 3, e2e=0.8 + 0.2 * (i % 2), output_len=4)
            for i, s in enumerate((0.0, 0.0, 1.0, 1.0, 2.0))]
    win, figures = bench.steady_metrics(recs, 3.0)
    assert (win.start, win.end) == (pytest.approx(0.8), 2.0)
    assert win.kept_requests == 3 and win.requests == 5
    assert "left out" in win.text() and "2 of 5 requests" in win.text()
    assert figures["completed"] == 3


def test_steady_window_of_a_single_burst_is_stated_empty(bench: ModuleType) -> None:
    recs = [RequestRecord(index=i, start=0.0, ttft=0.2, itl=[0.1], e2e=0.3, output_len=2) for i in range(4)]
    win, figures = bench.steady_metrics(recs, 0.3)
    assert win.empty and figures == {}
    assert "no steady state" in win.text()


def test_a_limit_per_figure_judges_each_at_its_own(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # +20 % p99 TTFT under a 25 % limit is within it: never detected, and the line names both limits.
    save(tmp_path / "single.jsonl", cycles=6, noise=0.005)
    code = run(bench, monkeypatch, "--runs-dir", str(tmp_path), "--judge-only", "--setups", "single",
               "--per-side", "3", "--max-regression", "output_throughput:5%,p99_ttft_ms:25%")
    out = capsys.readouterr().out
    assert code == 1, out
    assert "limits output_throughput 5%, p99_ttft_ms 25%" in out
    line = next(x for x in out.splitlines() if "N=3 per side" in x)
    assert "p99 TTFT +20% 0/20" in line and "throughput -10% 20/20" in line, line
