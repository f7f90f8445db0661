"""Check contexts on simulators (subprocesses started by ``sim_factory``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, fetch_features
from pytest_sglang.server.client import make_client
from pytest_sglang.simulator import Simulator
from tests.conftest import FAST

#: A simulator offering everything the checks use: parsers, metrics, a fixed seed (so two launches
#: answer alike, as two launches of a real model do).
FULL = ("--tool-call-parser", "llama3", "--reasoning-parser", "deepseek-r1", "--enable-metrics",
        "--random-seed", "7")
#: Small and fast: a few requests per check, short outputs, a short wait for a freed slot.
QUICK = AcceptanceSettings(samples=4, max_tokens=8, concurrency=8, disconnect_timeout_s=3.0, request_timeout_s=30.0)

ContextFactory = Callable[..., CheckContext]


@pytest.fixture
def check_context() -> Iterator[ContextFactory]:
    """``check_context(sim, **settings)``: a CheckContext on ``sim`` (clients closed at teardown)."""
    clients = []

    def make(sim: Simulator, **settings: float) -> CheckContext:
        client = make_client(sim.url)
        clients.append(client)
        return CheckContext(client, fetch_features(client), replace(QUICK, **settings))

    yield make
    for client in clients:
        client.close()


@pytest.fixture(scope="module")
def full_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Simulator]:
    """One fault-free simulator with every feature, shared by a module's passing checks."""
    sim = Simulator([*FAST, *FULL], log_path=tmp_path_factory.mktemp("sim") / "full.log")
    sim.start()
    yield sim
    sim.stop()
