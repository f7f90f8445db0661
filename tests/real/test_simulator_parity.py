"""The simulator against real SGLang 0.5.23 with the same launch args: real is the referee.

Critical differences (status codes, media types, empty bodies, SSE framing, value types, key
/server_info values) fail the test; fidelity gaps (keys or metric families one side lacks) are
listed in the captured output (``-rA``) and in ``parity.txt`` for the simulator's owner.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from realsgl import RawServer, RealSetup

pytestmark = pytest.mark.real_sglang
COMPARE = Path(__file__).resolve().parents[2] / "scripts" / "real-sglang" / "compare_simulator.py"
#: The tiny profile at a short time scale; every SGLang flag is the real launch's.
SIM_FLAGS = ("--sim-profile", "tiny", "--sim-time-scale", "0.05")


def _compare_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare_simulator", COMPARE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("compare_simulator", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def simulator(raw_server: RawServer, real_setup: RealSetup, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from pytest_sglang.simulator import Simulator

    assert raw_server.api_key is not None
    log = tmp_path_factory.mktemp("parity") / "simulator.log"
    sim = Simulator([*real_setup.args(), "--api-key", raw_server.api_key, *SIM_FLAGS], log_path=log)
    sim.start()
    yield sim
    sim.stop()


def test_simulator_http_agrees_with_real(raw_server: RawServer, simulator, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert raw_server.api_key is not None
    diffs = _compare_module().compare(raw_server.url, simulator.url, raw_server.api_key)
    listing = "\n".join(str(d) for d in diffs).replace(raw_server.api_key, "***")
    (tmp_path / "parity.txt").write_text(listing + "\n")
    print(listing)
    critical = [str(d) for d in diffs if d.critical]
    assert not critical, "simulator disagrees with real SGLang 0.5.23 (the referee):\n" + "\n".join(critical)


def test_simulator_startup_log_reads_like_real(raw_server: RawServer, simulator) -> None:  # type: ignore[no-untyped-def]
    from pytest_sglang.server.phases import LogFollower

    real = LogFollower(raw_server.log_path).stop()
    sim = LogFollower(simulator.log_path).stop()
    real_phases, sim_phases = [p.name for p in real.phases], [p.name for p in sim.phases]
    print(f"phases real {real_phases}\nphases sim  {sim_phases}")
    print(f"scheduler line real {sorted(real.scheduler_info)}\nscheduler line sim  {sorted(sim.scheduler_info)}")
    assert (real.kv_tokens, real.max_total_num_tokens) == (4096, 4096)
    assert (sim.kv_tokens, sim.max_total_num_tokens) == (4096, 4096)
    assert real.fatal == sim.fatal == []
    # every phase real SGLang goes through appears in the simulator's log, in the same order
    remaining = iter(sim_phases)
    assert all(name in remaining for name in real_phases), (real_phases, sim_phases)
