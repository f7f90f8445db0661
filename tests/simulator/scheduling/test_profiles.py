"""Capacity and hicache arithmetic of both profiles (no subprocess)."""

from __future__ import annotations

import pytest

from pytest_sglang.sglang import hostmem
from pytest_sglang.sglang.hostmem import GB
from pytest_sglang.simulator.config import resolve
from pytest_sglang.simulator.failures.faults import parse_faults
from pytest_sglang.simulator.launch import plan as sim_plan
from pytest_sglang.simulator.launch.cli import parse
from pytest_sglang.simulator.scheduling import profiles


def _cfg(*argv: str):  # type: ignore[no-untyped-def]
    args, sim = parse(["--model-path", "sim/model", *argv])
    return resolve(args, sim, profiles.get_profile(sim.profile), parse_faults(sim.faults))


def test_kimi_mla_kv_bytes_are_replicated_per_rank() -> None:
    kimi = profiles.get_profile("kimi-k2.5-rtx6000x8")
    assert kimi.kv_bytes_per_token(8) == kimi.kv_bytes_per_token(1) == (512 + 64) * 61 * 2 == 70_272


@pytest.mark.parametrize(
    ("extra", "low", "high"), [((), 115_000, 117_500), (("--mem-fraction-static", "0.93"), 230_000, 232_500)]
)
def test_kimi_capacity(extra: tuple[str, ...], low: int, high: int) -> None:
    cfg = _cfg("--sim-profile", "kimi-k2.5-rtx6000x8", "--tp", "8", *extra)
    assert low <= cfg.max_total_num_tokens <= high
    # SGLang's arithmetic, recomputed from the profile's documented figures.
    expect = (int(96 * 2**30 * cfg.mem_fraction_static) - 79_622_000_000) // 70_272
    assert cfg.max_total_num_tokens == expect


def test_tiny_capacity_splits_kv_heads_over_tp() -> None:
    one, two = _cfg(), _cfg("--tp-size", "2")
    assert one.kv_bytes_per_token == 2 * two.kv_bytes_per_token
    assert one.max_total_num_tokens == (int(2**30 * 0.719) - 2**28) // 8192
    assert _cfg("--max-total-tokens", "4k").max_total_num_tokens == 4000


def test_max_running_and_input_len_follow_sglang() -> None:
    cfg = _cfg("--max-total-tokens", "4096", "--context-length", "2048")
    assert cfg.max_running_requests == 2048  # as recorded from real 0.5.23 with these limits
    assert cfg.max_req_input_len == 2042


def test_kimi_hicache_pools_against_the_host_budget() -> None:
    ok = _cfg(
        "--sim-profile",
        "kimi-k2.5-rtx6000x8",
        "--tp",
        "8",
        "--enable-hierarchical-cache",
        "--hicache-size",
        "48",
    )
    assert ok.host_pool is not None
    assert ok.host_pool.tokens == hostmem.host_pool_tokens(48 * GB, 70_272)
    host = sim_plan.simulated_host_memory(sim_plan.simulator_flags(["--sim-profile", "kimi-k2.5-rtx6000x8"]))
    budget = hostmem.sglang_budget_bytes(host.available_bytes, 8)
    assert ok.host_pool.bytes <= budget < 300 * GB
    assert host.available_bytes == 418 * GB


def test_hicache_ratio_pool_is_sized_from_the_device_pool() -> None:
    cfg = _cfg("--enable-hierarchical-cache", "--hicache-ratio", "1.5")
    assert cfg.host_pool is not None
    assert cfg.host_pool.tokens == hostmem.ratio_pool_tokens(cfg.max_total_num_tokens, 1.5)
    tiny = profiles.get_profile("tiny")
    assert profiles.device_pool_bytes_per_rank(tiny, 1000, 1) == 1000 * 8192


def test_host_memory_override() -> None:
    flags = sim_plan.simulator_flags(["--sim-profile", "tiny", "--sim-host-memory-gb", "64"])
    host = sim_plan.simulated_host_memory(flags)
    assert host.total_bytes == 64 * GB and host.available_bytes == 60 * GB


def test_unknown_profile_message() -> None:
    with pytest.raises(
        ValueError, match="--sim-profile 'nope' is not a simulator profile; choose one of tiny"
    ):
        profiles.get_profile("nope")
