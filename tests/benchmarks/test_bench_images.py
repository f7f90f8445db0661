"""benchmarks/bench_images.py: the verdict reads the median of the rounds' ratios, and bad options are refused.

The measuring (the simulator or a real server, bench_serving in the real-SGLang venv) is the benchmark's
to run; here its judging runs on given figures, and its options are checked before anything starts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_images.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_images", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_slow_round_does_not_make_the_verdict(bench: ModuleType) -> None:
    ours = [{"mean_ttft_ms": t, "request_throughput": 1.0} for t in (100.0, 210.0, 104.0, 98.0, 101.0)]
    theirs = [{"mean_ttft_ms": 100.0, "request_throughput": 1.0, "p99_ttft_ms": 5.0} for _ in ours]
    rounds = [bench.ratios(a, b) for a, b in zip(ours, theirs, strict=True)]
    assert "p99_ttft_ms" not in rounds[0]  # a figure one side lacks is left out, not taken as 0
    median, low, high = bench.summary(rounds)["mean_ttft_ms"]
    assert median == pytest.approx(1.01) and low == pytest.approx(0.98) and high == pytest.approx(2.1)


@pytest.mark.parametrize("option", ["--rounds=0", "--requests=0", "--concurrency=-1"])
def test_a_count_below_one_is_refused_before_anything_runs(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], option: str) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_images.py", option])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    name, value = option.split("=")
    assert f"{name}={value}: give a whole number from 1 up" in capsys.readouterr().err
