"""The interleaved A/B engine with a fake launcher: order, prompts per pair, one launch at a time, the deadline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError, LoadGenError
from pytest_sglang.gates.load import ab
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.server.config import LaunchConfig

SIM = ("--model-path", "sim/tiny-llama", "--sim-launch-jitter", "0.03")


def _side(label: str, *extra: str) -> ab.ABSide:
    return ab.ABSide(label, LaunchConfig(runner="simulator", args=(*SIM, *extra), log_dir=Path("/tmp")))


class _Fake:
    """Launches that record what ran, and loads whose throughput is the side's speed."""

    def __init__(self, speeds: dict[str, float]) -> None:
        self.speeds = speeds
        self.events: list[str] = []
        self.running = 0
        self.seeds: list[int] = []
        self.args: list[tuple[str, ...]] = []

    @contextmanager
    def launched(self, side: ab.ABSide, config: LaunchConfig) -> Iterator[Any]:
        assert self.running == 0, "a launch started before the previous one stopped"
        self.running += 1
        self.args.append(config.args)
        self.events.append(f"start {side.label}")
        try:
            yield side.label
        finally:
            self.running -= 1
            self.events.append(f"stop {side.label}")

    def load(self, handle: Any, spec: LoadSpec) -> LoadResult:
        self.seeds.append(spec.seed)
        return LoadResult(spec=spec, completed=spec.requests, output_throughput=self.speeds[handle],
                          median_ttft_ms=10.0)


def _run(monkeypatch: pytest.MonkeyPatch, fake: _Fake, **kwargs: Any) -> ab.ABRun:
    monkeypatch.setattr(ab, "launched", fake.launched)
    options = {"launches": 3, "order": "random", "seed": 5, "deadline_s": 60.0, **kwargs}
    return ab.run_ab(_side("A"), _side("B"), LoadSpec(requests=4, seed=42), fake.load, **options)


def test_each_pair_runs_both_sides_on_the_same_prompts_one_launch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake({"A": 100.0, "B": 80.0})
    run = _run(monkeypatch, fake)
    assert fake.seeds[0::2] == fake.seeds[1::2] == [42, 43, 44]  # the pair's prompts, other prompts per pair
    assert len(fake.events) == 12 and all(e.startswith("start") for e in fake.events[0::2])
    assert [f.figures["output_throughput"] for f in run.side("B")] == [80.0] * 3
    # Each launch drew its own simulated boot speed from the run's seed: six distinct seeds.
    seeds = [args[args.index("--sim-launch-seed") + 1] for args in fake.args]
    assert len(set(seeds)) == 6
    assert run.orders == ab.pair_orders(3, "random", 5)  # reported as run, reproducible from the seed


def test_the_order_is_seeded_per_pair_or_alternating() -> None:
    assert ab.pair_orders(4, "alternate", 0) == ["AB", "BA", "AB", "BA"]
    drawn = {tuple(ab.pair_orders(8, "random", seed)) for seed in range(20)}
    assert len(drawn) > 1 and ab.pair_orders(8, "random", 3) == ab.pair_orders(8, "random", 3)


def test_a_seed_the_user_gave_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Fake({"A": 100.0, "B": 100.0})
    monkeypatch.setattr(ab, "launched", fake.launched)
    side = _side("A", "--sim-launch-seed", "9")
    ab.run_ab(side, side, LoadSpec(requests=4), fake.load, launches=2, deadline_s=60.0)
    assert all(args.count("--sim-launch-seed") == 1 and args[-1] == "9" for args in fake.args)


def test_a_regression_fails_the_outcome_and_a_a_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    slower = _run(monkeypatch, _Fake({"A": 100.0, "B": 80.0}))
    outcome = ab.outcome_of(slower, ab.judge_run(slower, {"output_throughput": 5.0}))
    assert not outcome.passed and outcome.failed[0].metric == "output_throughput"
    same = _run(monkeypatch, _Fake({"A": 100.0, "B": 100.0}))
    outcome = ab.outcome_of(same, ab.judge_run(same, {"output_throughput": 5.0, "median_ttft_ms": 5.0}))
    assert outcome.passed and not outcome.unchecked and {c.metric for c in outcome.checks} == {
        "output_throughput", "median_ttft_ms"}


def test_the_whole_run_has_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 10))
    monkeypatch.setattr("pytest_sglang.gates.load.ab.time.monotonic", lambda: float(next(clock)))
    fake = _Fake({"A": 100.0, "B": 100.0})
    with pytest.raises(LoadGenError, match="deadline"):
        _run(monkeypatch, fake, deadline_s=35.0)
    assert fake.running == 0 and fake.events[-1].startswith("stop")  # what started was stopped


@pytest.mark.parametrize(("launches", "order", "words"), [
    (1, "random", "launches=1: must be a whole number of launches per side from 2"),
    (True, "random", "launches=True"), (3, "shuffle", "order='shuffle': unknown order"),
])
def test_a_plan_that_cannot_judge_is_refused(launches: object, order: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ab.check_plan(launches, order)
