"""The planner's arithmetic vs reference §11: decimal GB per rank, tp x pp x dp ranks, reserve, cgroups."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.sglang import hostmem, planner
from pytest_sglang.sglang.args import parse_launch_args
from pytest_sglang.sglang.hostmem import GB, GiB, HostMemory
from pytest_sglang.simulator.launch import plan as sim_plan

SEED_HOST = HostMemory(available_bytes=418 * GB, total_bytes=449 * GB, source="test host")
HICACHE = ["--enable-hierarchical-cache"]


def plan(argv: list[str], host: HostMemory = SEED_HOST, hardware: planner.Hardware | None = None,
         reserve_gb: float = 10) -> planner.Plan:
    return planner.make_plan(parse_launch_args(argv), host=host, hardware=hardware or planner.Hardware(),
                             reserve_bytes=int(reserve_gb * GB))


@pytest.mark.parametrize(("argv", "ranks"), [
    (["--tp-size", "8"], 8),
    (["--tp", "8"], 8),  # argparse abbreviation, as SGLang
    (["--tp-size", "4", "--pp-size", "2"], 8),
    (["--tp-size", "2", "--dp-size", "4"], 8),  # every DP replica pins its own pools
    (["--tp-size", "8", "--nnodes", "2"], 4),
    ([], 1),
])
def test_ranks_per_node_is_tp_x_pp_x_dp_over_nodes(argv: list[str], ranks: int) -> None:
    assert plan([*argv, *HICACHE, "--hicache-size", "1"]).hicache.ranks == ranks


def test_seed_300gb_per_rank_does_not_fit_with_the_issue_arithmetic() -> None:
    p = plan(["--tp-size", "8", *HICACHE, "--hicache-size", "300"])
    assert p.hicache.per_rank_bytes == 300 * 10**9  # decimal GB, not GiB
    assert p.hicache.total_bytes == 2400 * 10**9
    assert p.fits is False
    assert p.hicache.explain() == ("--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, "
                                   "but only 408 GB are available (reserve 10 GB)")


def test_seed_48gb_per_rank_fits() -> None:
    p = plan(["--tp-size", "8", *HICACHE, "--hicache-size", "48"])
    assert (p.fits, p.hicache.total_bytes) == (True, 384 * GB)


def test_budget_boundary_is_exact_in_decimal_gb() -> None:
    argv = ["--tp-size", "8", *HICACHE, "--hicache-size", "48"]
    at_limit = HostMemory(available_bytes=394 * GB, total_bytes=None, source="t")  # 394 - 10 = 8 x 48
    assert plan(argv, at_limit).fits is True
    assert plan(argv, HostMemory(available_bytes=394 * GB - 1, total_bytes=None, source="t")).fits is False


def test_reserve_is_subtracted() -> None:
    argv = ["--tp-size", "8", *HICACHE, "--hicache-size", "48"]
    host = HostMemory(available_bytes=400 * GB, total_bytes=None, source="t")
    assert plan(argv, host, reserve_gb=16).fits is True
    assert plan(argv, host, reserve_gb=16.001).fits is False


def test_sglang_own_check_divides_by_tp_x_pp_only() -> None:
    p = plan(["--tp-size", "4", "--dp-size", "2", *HICACHE, "--hicache-size", "48"])
    assert p.sglang_budget_per_rank == (418 * GB - 10 * GiB) // 4  # dp is not in SGLang's divisor (§11)


def test_largest_fitting_size_respects_both_budgets() -> None:
    p = plan(["--tp-size", "8", *HICACHE, "--hicache-size", "300"])
    # ours: 408 GB / 8 = 51 GB; SGLang's: (418 GB - 10 GiB) / 8 = 50.9 GB -> 50
    assert p.largest_fitting_size_gb == 50


def test_hicache_disabled_always_fits() -> None:
    p = plan(["--tp-size", "8"], HostMemory(available_bytes=0, total_bytes=None, source="t"))
    assert (p.fits, p.hicache.ranks, p.hicache.total_bytes) == (True, 8, 0)


KIMI_LIKE = planner.Hardware(gpu_memory_bytes=96 * GiB, kv_bytes_per_token=70_272,
                             weight_bytes_per_rank=79_630_000_000, source="test hardware")


def test_capacity_estimate_is_gpu_x_fraction_minus_weights_over_kv_bytes() -> None:
    p = plan(["--tp-size", "8", "--mem-fraction-static", "0.93"], hardware=KIMI_LIKE)
    assert p.capacity is not None
    # int(103,079,215,104 x 0.93) = 95,863,670,046; minus 79,630,000,000 = 16,233,670,046; / 70,272
    assert p.capacity.max_total_num_tokens == 231_011
    assert p.capacity.concurrent_requests == 231_011 // 4000


def test_capacity_estimate_respects_max_total_tokens() -> None:
    p = plan(["--mem-fraction-static", "0.93", "--max-total-tokens", "64k"], hardware=KIMI_LIKE)
    assert p.capacity is not None and p.capacity.max_total_num_tokens == 64_000


def test_ratio_sizing_uses_the_estimated_device_pool() -> None:
    p = plan(["--tp-size", "8", "--mem-fraction-static", "0.93", *HICACHE, "--hicache-ratio", "2"],
             hardware=KIMI_LIKE)
    assert p.hicache.per_rank_bytes == 2 * 231_011 * 70_272


def test_ratio_sizing_without_hardware_is_unknown() -> None:
    p = plan(["--tp-size", "8", *HICACHE, "--hicache-ratio", "2"])
    assert p.fits is None
    assert any("UNKNOWN" in line for line in planner.render(p))


def test_auto_sizing_shrinks_the_ratio_to_the_host() -> None:
    p = plan(["--tp-size", "8", "--mem-fraction-static", "0.93", *HICACHE], hardware=KIMI_LIKE,
             host=HostMemory(available_bytes=100 * GB, total_bytes=None, source="t"))
    budget = (100 * GB - 10 * GiB) // 8 * 0.8
    assert p.hicache.per_rank_bytes == int(231_011 * 70_272 * (budget * 0.95 / (231_011 * 70_272)))
    assert p.hicache.per_rank_bytes is not None and p.hicache.per_rank_bytes < 2 * 231_011 * 70_272


def test_not_enough_gpus_does_not_fit() -> None:
    hw = planner.Hardware(gpus=4, source="test")
    p = plan(["--tp-size", "8"], hardware=hw)
    assert p.fits is False
    assert any("needs 8 GPUs per node" in line and "has 4" in line for line in planner.render(p))


def _fake_root(tmp_path: Path, meminfo_kb: int) -> tuple[Path, Path]:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       {meminfo_kb * 2} kB\nMemAvailable:   {meminfo_kb} kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    return meminfo, cgroup


def test_cgroup_v2_limit_bounds_available_memory(tmp_path: Path) -> None:
    meminfo, cgroup = _fake_root(tmp_path, 400 * 10**6)  # 409.6 GB available on the host
    (cgroup / "memory.max").write_text(f"{100 * GB}\n")
    (cgroup / "memory.current").write_text(f"{20 * GB}\n")
    host = hostmem.read_host_memory_at(meminfo, cgroup)
    assert (host.available_bytes, host.source) == (80 * GB, "cgroup v2 memory.max")
    assert plan(["--tp-size", "8", *HICACHE, "--hicache-size", "48"], host).fits is False


def test_cgroup_v2_max_means_no_limit(tmp_path: Path) -> None:
    meminfo, cgroup = _fake_root(tmp_path, 1000)
    (cgroup / "memory.max").write_text("max\n")
    host = hostmem.read_host_memory_at(meminfo, cgroup)
    assert (host.available_bytes, host.source) == (1000 * 1024, "MemAvailable of /proc/meminfo")


def test_cgroup_v1_limit(tmp_path: Path) -> None:
    meminfo, cgroup = _fake_root(tmp_path, 400 * 10**6)
    (cgroup / "memory").mkdir()
    (cgroup / "memory" / "memory.limit_in_bytes").write_text(f"{64 * GB}\n")
    (cgroup / "memory" / "memory.usage_in_bytes").write_text(f"{4 * GB}\n")
    host = hostmem.read_host_memory_at(meminfo, cgroup)
    assert (host.available_bytes, host.source) == (60 * GB, "cgroup v1 memory.limit_in_bytes")


def test_cgroup_v1_unlimited_sentinel_is_ignored(tmp_path: Path) -> None:
    meminfo, cgroup = _fake_root(tmp_path, 1000)
    (cgroup / "memory").mkdir()
    (cgroup / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert hostmem.read_host_memory_at(meminfo, cgroup).source == "MemAvailable of /proc/meminfo"


@pytest.mark.parametrize("argv", [
    ["--tp-size", "8", *HICACHE, "--hicache-size", "300"],
    ["--tp-size", "8", *HICACHE, "--hicache-size", "48"],
    ["--tp-size", "8", *HICACHE, "--hicache-size", "53"],
    ["--tp-size", "8", *HICACHE, "--hicache-size", "54"],
    ["--tp-size", "4", "--dp-size", "2", *HICACHE, "--hicache-size", "53"],
])
def test_planner_agrees_with_the_launch_preflight(argv: list[str]) -> None:
    from pytest_sglang.server import LaunchConfig, preflight
    from pytest_sglang.server.select_runner import get_runner

    launch = [*argv, "--sim-profile", "kimi-k2.5-rtx6000x8"]
    config = LaunchConfig(runner="simulator", args=tuple(launch))
    theirs = preflight.plan_for(config, get_runner(config))
    ours = planner.make_plan(parse_launch_args(launch), host=sim_plan.simulated_host(launch) or SEED_HOST,
                             hardware=sim_plan.hardware_from_profile(launch) or planner.Hardware(),
                             reserve_bytes=int(config.host_memory_reserve_gb * GB)).hicache
    assert (ours.fits, ours.total_bytes, ours.budget_bytes) == (
        theirs.fits, theirs.total_bytes, theirs.budget_bytes)
