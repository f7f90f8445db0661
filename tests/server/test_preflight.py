"""The hicache host-memory preflight refuses with the arithmetic, before anything starts."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_sglang.errors import PreflightError
from pytest_sglang.server import preflight
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.runner import RunningProcess
from pytest_sglang.sglang.hostmem import GB, HostMemory


class FakeRunner:
    name = "fake"

    def __init__(self, available_gb: float) -> None:
        self.available = int(available_gb * GB)
        self.started = False

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        raise AssertionError("preflight must refuse before starting")

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return HostMemory(self.available, None, "a fake host")

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: object) -> int | None:
        return None  # like a real server: unknown before the start


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


SIM = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05")


def test_ratio_sized_pools_of_the_simulator_are_checked_against_its_device_pool() -> None:
    from pytest_sglang.server.select_runner import get_runner

    config = LaunchConfig(runner="simulator", args=(*SIM, "--enable-hierarchical-cache", "--hicache-ratio", "100"))
    with pytest.raises(PreflightError) as excinfo:
        preflight.check(config, get_runner(config))
    lines = str(excinfo.value).splitlines()
    assert re.match(r"the ratio-sized host pool is [\d.]+ GB per rank: .* but only 18 GB are available "
                    r"\(reserve 10 GB\)$", lines[0]), lines[0]
    assert "per simulated host of profile tiny" in lines[1]
    assert re.match(r"Fix: lower --hicache-ratio 100 to at most \d+\.\d+ or set --hicache-size to at most 18 "
                    r"\(GB per TP rank\) in the launch args, ", lines[2]), lines[2]


def test_the_ratio_the_fix_suggests_does_fit_and_the_refused_one_really_fails(tmp_path: Path) -> None:
    """The preflight's verdict matches what the simulator does when launched anyway."""
    from pytest_sglang.errors import ServerExited
    from pytest_sglang.server import launch
    from pytest_sglang.server.select_runner import get_runner

    refused = LaunchConfig(runner="simulator", args=(*SIM, "--enable-hierarchical-cache", "--hicache-ratio",
                                                      "100"), log_dir=tmp_path, startup_timeout_s=60)
    with pytest.raises(PreflightError) as excinfo:
        preflight.check(refused, get_runner(refused))
    m = re.search(r"at most (\d+\.\d+) or", str(excinfo.value))
    assert m is not None
    fitting = LaunchConfig(runner="simulator", args=(*SIM, "--enable-hierarchical-cache", "--hicache-ratio",
                                                      m[1]))
    plan = preflight.check(fitting, get_runner(fitting))
    assert plan is not None and plan.fits is True
    with pytest.raises(ServerExited, match="Not enough host memory available"):
        launch(dataclasses.replace(refused, preflight=False))


def test_ratio_of_a_real_server_cannot_be_decided_and_says_so() -> None:
    config = LaunchConfig(args=("--enable-hierarchical-cache", "--hicache-ratio", "100"))
    plan = preflight.check(config, FakeRunner(100))
    assert plan is not None and plan.fits is None
    assert preflight.unchecked_note(plan) == (
        "preflight: host pools not checked before the start (host pool size depends on the device pool "
        "(--hicache-ratio); 90 GB are available (reserve 10 GB)); the server checks them itself after "
        "loading weights")
    assert preflight.unchecked_note(None) is None


def test_container_memory_limit_refusal_suggests_raising_it() -> None:
    from pytest_sglang.server.config import DockerOptions
    from pytest_sglang.server.docker.runner import DockerRunner

    config = LaunchConfig(runner="docker", args=("--enable-hierarchical-cache", "--hicache-size", "40"),
                          docker=DockerOptions(memory="32g"))
    with pytest.raises(PreflightError) as excinfo:
        preflight.check(config, DockerRunner())
    text = str(excinfo.value)
    assert "available per container memory limit --sglang-docker-memory 32g" in text
    assert text.splitlines()[-1].startswith(
        "Fix: lower --hicache-size to at most 24 (GB per TP rank) in the launch args, raise "
        "--sglang-docker-memory (or leave it unset), lower --sglang-host-memory-reserve-gb")


def test_unknown_simulator_profile_is_a_config_error() -> None:
    from pytest_sglang.errors import ConfigError
    from pytest_sglang.server.select_runner import get_runner

    config = LaunchConfig(runner="simulator", args=("--sim-profile", "huge", "--enable-hicache"))
    # Read by the simulator's own parser, as the launch would be: its choices, its message.
    with pytest.raises(ConfigError, match=r"^LaunchConfig\.args='--sim-profile huge --enable-hicache': the "
                                          r"simulator would reject these launch args \(argument --sim-profile: "
                                          r"invalid choice: 'huge' \(choose from "):
        preflight.check(config, get_runner(config))
