"""Shared fixtures of pytest-sglang's own suite: ``sim_factory`` starts simulators as subprocesses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

import pytest

from pytest_sglang.simulator import Simulator, Wait

#: Fast defaults: the tiny profile at 1/20 of its (already short) simulated durations.
FAST = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05")


class SimFactory(Protocol):
    def __call__(
        self, *args: str, wait: Wait = "healthy", env: Mapping[str, str] | None = None, fast: bool = True
    ) -> Simulator: ...


@pytest.fixture
def sim_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimFactory]:
    """Start simulators (``sim_factory("--enable-metrics")``); all are stopped at teardown.

    ``fast=True`` prepends ``--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05``
    (later flags win); with ``fast=False`` pass ``--model-path`` yourself, as SGLang requires it.
    """
    started: list[Simulator] = []
    logs = tmp_path_factory.mktemp("sim-logs")

    def factory(
        *args: str, wait: Wait = "healthy", env: Mapping[str, str] | None = None, fast: bool = True
    ) -> Simulator:
        argv = [*FAST, *args] if fast else list(args)
        sim = Simulator(argv, wait="none", env=env, log_path=logs / f"sim-{len(started)}.log")
        started.append(sim)
        sim.wait = wait
        return sim.start()

    yield factory
    for sim in started:
        sim.stop()
