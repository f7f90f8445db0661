"""The hicache host-memory preflight refuses with the arithmetic, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.errors import PreflightError
from pytest_sglang.hostmem import GB, HostMemory
from pytest_sglang.server import preflight
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.runner import RunningProcess


class FakeRunner:
    name = "fake"

    def __init__(self, available_gb: float) -> None:
        self.available = int(available_gb * GB)
        self.started = False

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        raise AssertionError("preflight must refuse before starting")

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return HostMemory(self.available, None, "a fake host")


def test_seed_launch_is_refused_with_the_arithmetic() -> None:
    config = LaunchConfig(
        args=("--model-path", "m", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300")
    )
    with pytest.raises(PreflightError) as excinfo:
        preflight.check(config, FakeRunner(418))
    lines = str(excinfo.value).splitlines()
    assert lines[0] == (
        "--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, but only 408 GB are "
        "available (reserve 10 GB)"
    )
    assert lines[1] == (
        "Host memory: 418 GB available per a fake host; 8 rank(s) = tp 8 x pp 1 x dp 1, each pins "
        "its own host pool. Nothing was started."
    )
    assert lines[2] == (
        "Fix: lower --hicache-size to at most 51 (GB per TP rank) in the launch args, lower "
        "--sglang-host-memory-reserve-gb if the reserve is too cautious, or pass "
        "--sglang-no-preflight to launch anyway."
    )


def test_dp_and_pp_ranks_count_and_the_reserve_is_configurable() -> None:
    args = ("--tp-size", "2", "--pp-size", "2", "--dp-size", "2", "--enable-hicache", "--hicache-size", "10")
    with pytest.raises(
        PreflightError, match=r"10 GB x 8 ranks = 80 GB, but only 70 GB are available \(reserve 30"
    ):
        preflight.check(LaunchConfig(args=args, host_memory_reserve_gb=30), FakeRunner(100))
    plan = preflight.check(LaunchConfig(args=args, host_memory_reserve_gb=5), FakeRunner(100))
    assert plan is not None and plan.fits is True


def test_nothing_to_check_without_hicache_or_with_no_preflight() -> None:
    assert preflight.check(LaunchConfig(args=("--model-path", "m")), FakeRunner(1)) is None
    off = LaunchConfig(args=("--enable-hierarchical-cache", "--hicache-size", "300"), preflight=False)
    assert preflight.check(off, FakeRunner(1)) is None


def test_ratio_sizing_cannot_be_checked_and_passes() -> None:
    plan = preflight.check(
        LaunchConfig(args=("--enable-hierarchical-cache", "--hicache-ratio", "2")), FakeRunner(1)
    )
    assert plan is not None and plan.fits is None


def test_host_too_small_for_any_pool_says_so() -> None:
    config = LaunchConfig(args=("--enable-hierarchical-cache", "--hicache-size", "1"))
    with pytest.raises(
        PreflightError, match="Fix: drop --enable-hierarchical-cache or run on a host with more"
    ):
        preflight.check(config, FakeRunner(5))
