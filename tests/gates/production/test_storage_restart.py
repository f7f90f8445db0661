"""``sglang_hicache(restart=True)``: the storage tier is read back after a restart of the same launch.

Real simulator processes with ``--hicache-storage-backend file`` on a directory of the test's own. The healthy
twin passes; ``l3-lost-on-restart`` (sglang#27619: stored, never found after a restart) and ``l3-never-read``
(sglang#26886: written, never read) are caught, each with the counters that tell them apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.facts import hicache
from pytest_sglang.gates.keywords import marker_problem
from pytest_sglang.gates.registry import GateContext
from pytest_sglang.loadgen import run_load
from pytest_sglang.server import LaunchConfig, SGLangServer, launch
from pytest_sglang.server.restart import restart_in_place, restartable
from tests.conftest import SimFactory

BASE = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05", "--enable-metrics",
        "--enable-hierarchical-cache", "--hicache-ratio", "4", "--hicache-storage-backend", "file")


def _args(directory: Path, *extra: str) -> tuple[str, ...]:
    return (*BASE, "--hicache-storage-backend-extra-config", json.dumps({"file_storage_path": str(directory)}), *extra)


@contextmanager
def _server(*args: str) -> Iterator[SGLangServer]:
    with launch(LaunchConfig(runner="simulator", args=args, startup_timeout_s=60)) as server:
        yield server


def Ctx(server: Any) -> GateContext:
    return GateContext(server=server, load=lambda spec: run_load(server.url, spec))


def test_a_tier_that_survives_the_restart_passes(tmp_path: Path) -> None:
    with _server(*_args(tmp_path / "l3")) as server:
        pid = server.process.pid if server.process else None
        outcome = hicache.run_marker(Ctx(server), restart=True, min_storage_share=0.8)
        assert outcome.passed, outcome.message()
        # the same handle drives a new process on the same address, and it serves
        assert server.process is not None and server.process.pid != pid
        assert server.health() == 200
    share = next(c for c in outcome.checks if c.metric == "storage_hit_share")
    assert isinstance(share.measured, float) and share.measured >= 0.8
    assert share.source.startswith("after the restart: sum of meta_info.cached_tokens_details.storage "
                                   "(sglang:prefetched_tokens_total grew by ")
    assert outcome.context["storage restart"].endswith("the in-memory tiers emptied (restarted: the same launch on "
                                                       "the same port), then the same 8 prompts again")
    assert "device 0, host 0, storage " in outcome.context["after the restart"]
    assert "(storage_backend HiCacheFile)" in outcome.context["after the restart"]
    assert outcome.context["storage counters"].startswith("sglang:backuped_tokens_total +")
    assert list((tmp_path / "l3").glob("*.bin")), "the blocks are real files in the given directory"


@pytest.mark.parametrize("fault", ["l3-lost-on-restart", "l3-never-read"])
def test_a_tier_not_read_back_after_the_restart_fails(tmp_path: Path, fault: str) -> None:
    with _server(*_args(tmp_path / "l3", "--sim-fault", fault)) as server:
        outcome = hicache.run_marker(Ctx(server), restart=True)
    assert [c.metric for c in outcome.failed] == ["storage_hit_share"]
    check = outcome.failed[0]
    assert (check.measured, check.required, check.keyword) == (0.0, 0.5, "min_storage_share")
    assert check.source.startswith("after the restart: growth of sglang:prefetched_tokens_total")
    message = outcome.message()
    assert "tokens were backed up and not read back after the restart (sglang#27619, #26886, #33713)" in message
    assert "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR" in message


def test_without_a_storage_backend_the_workload_is_not_run_and_fails(tmp_path: Path) -> None:
    args = tuple(a for a in BASE if a not in ("--hicache-storage-backend", "file"))
    with _server(*args) as server:
        outcome = hicache.run_marker(Ctx(server), restart=True)
    check = outcome.failed[0]
    assert (check.metric, check.measured) == ("storage_hit_share", None)
    assert "hicache_storage_backend is None" in check.source
    assert check.remedy == "add --enable-hierarchical-cache --hicache-storage-backend file to the launch args"


def test_an_attached_server_is_flushed_not_restarted(tmp_path: Path, sim_factory: SimFactory) -> None:
    sim = sim_factory(*_args(tmp_path / "l3"), fast=False)
    attached = SGLangServer(sim.url, "attach")
    assert restartable(attached) == ("the server was attached (--sglang-url): pytest-sglang never restarts a "
                                     "process it did not start")
    with pytest.raises(ConfigError, match="restart="):
        restart_in_place(attached)
    outcome = hicache.run_marker(Ctx(attached), restart=True)
    assert outcome.passed, outcome.message()  # a flush empties GPU and host: the storage tier serves
    assert "attached, so not restarted: POST /flush_cache emptied the GPU and host tiers" in (
        outcome.context["storage restart"])


@pytest.mark.parametrize(("kw", "text"), [
    ({"min_storage_share": 0.5}, "@pytest.mark.sglang_hicache(min_storage_share=0.5, restart=False): needs "
                                 "restart=True (the share is measured by the restart=True workload). Fix: add "
                                 "restart=True, or drop min_storage_share"),
    ({"restart": True, "enabled": False}, "@pytest.mark.sglang_hicache(restart=True, enabled=False): needs "
                                          "enabled=True (*"),
    ({"restart": True, "min_storage_share": 1.5}, "@pytest.mark.sglang_hicache(min_storage_share=1.5): must be "
                                                  "a number from 0 to 1 (a fraction: 0.01 = 1%). Fix: *"),
    ({"restart": True, "min_storage_share": -0.1}, "@pytest.mark.sglang_hicache(min_storage_share=-0.1): must be "
                                                   "a number from 0 to 1 (a fraction: 0.01 = 1%). Fix: *"),
    ({"restart": True, "min_storage_share": "50%"}, "@pytest.mark.sglang_hicache(min_storage_share='50%'): *0.5*"),
    ({"restart": "yes"}, "@pytest.mark.sglang_hicache(restart='yes'): must be True or False*"),
])
def test_bad_keywords(kw: dict[str, Any], text: str) -> None:
    import fnmatch

    problem = marker_problem("sglang_hicache", hicache.run_marker, (), kw)
    assert problem is not None and fnmatch.fnmatch(problem, text), problem
