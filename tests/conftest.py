"""Shared fixtures of pytest-sglang's own suite: ``sim_factory`` starts simulators as subprocesses."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Protocol

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import Producer

from pytest_sglang.simulator import Simulator, Wait

#: Tiers whose tests share one machine-wide resource (real SGLang processes counted by start time, a
#: fixed-port raw server, the Docker engine): under xdist (``-n``, as scripts/test.sh runs) each tier runs
#: on one worker, in collection order, while the other workers share every other test.
SERIAL_TIERS = ("real", "docker")
#: The Ray tests (tests/server/ray/, test_ray*.py anywhere): one scope, so one worker runs them in turn and
#: at most one test Ray cluster (~600 MiB of daemons) exists at a time, and their process counts hold.
RAY_TESTS = re.compile(r"(^|/)(ray/|test_ray[^/]*\.py$)")


class _TierScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with a serial tier as one scope and every other test a scope of its own.

    Not ``--dist loadgroup``: xdist 3.8 marks its groups on ``item._nodeid``, which pytest 9.2 no longer
    reads, so the groups are silently lost. The scopes (largest first) are plain node ids.
    """

    def _split_scope(self, nodeid: str) -> str:
        parts = nodeid.split("/", 2)
        if len(parts) == 3 and parts[0] == "tests" and parts[1] in SERIAL_TIERS:
            return f"tests/{parts[1]}"
        if RAY_TESTS.search(nodeid.split("::", 1)[0]):
            return "ray"
        return nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling | None:
    return _TierScheduling(config, log) if config.getvalue("dist") == "load" else None


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
