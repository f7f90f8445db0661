"""The hicache gate on derived /server_info payloads, with fake metrics and startup-log pools."""

from __future__ import annotations

import copy
import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.gates.facts.hicache import assert_hicache, effective_checks, evaluate_hicache, run_marker
from pytest_sglang.gates.keywords import marker_problem
from pytest_sglang.loadgen.workloads.prefix_reuse import PassResult, ReuseResult, reuse_workload
from pytest_sglang.server.phases import HostPool
from pytest_sglang.sglang.metrics_text import Sample

CAPTURE = Path(__file__).parents[3] / "fixtures" / "captures-0.5.23" / "basic" / "server_info.txt"
SEED_POOL = HostPool("TP0", "kv", 683_061, 48.0)  # 48e9 // 70,272 bytes per token, + 1 page


def seed_info() -> dict[str, Any]:
    """The recorded payload turned into the seed's launch (derived): tp 8, --hicache-size 48."""
    info: dict[str, Any] = json.loads(CAPTURE.read_text().split("\n\n", 1)[1])
    info.update(tp_size=8, enable_hierarchical_cache=True, hicache_size=48, max_total_num_tokens=231_120)
    state = info["internal_states"][0]
    state["memory_usage"].update(token_capacity=231_120, kvcache=15.125)
    return info


@dataclass
class Startup:
    host_pools: list[HostPool] = field(default_factory=list)


@dataclass
class FakeServer:
    payload: dict[str, Any]
    gauges: list[float] | None = None  # None: /metrics is off
    startup: Startup | None = None

    def info(self) -> dict[str, Any]:
        return copy.deepcopy(self.payload)

    def metrics(self) -> dict[str, list[Sample]]:
        if self.gauges is None:
            raise ServerUnavailable("GET /metrics answered 404: metrics are disabled.")
        return {"sglang:hicache_host_total_tokens": [Sample("sglang:hicache_host_total_tokens", {}, v)
                                                     for v in self.gauges]}


def launched(pools: int = 8, **info: Any) -> FakeServer:
    payload = {**seed_info(), **info}
    return FakeServer(payload, startup=Startup([SEED_POOL] * pools))


def test_seed_launch_passes_with_8_pools_of_48_gb() -> None:
    outcome = evaluate_hicache(launched(), min_host_gb_per_rank=48, min_host_tokens=683_061, min_ratio=2.9)
    assert outcome.passed, outcome.message()
    assert outcome.context["host pools"] == "8 x 48 GB = 384.0 GB of host memory"
    pools = next(c for c in outcome.checks if c.metric == "host_pools")
    assert pools.source == "startup log: 8 'Allocating kv hierarchical KV host pool' line(s)"


@pytest.mark.parametrize(("kw", "metric"), [
    ({"min_host_gb_per_rank": 48}, "host_pool_gb_per_rank"),
    ({"min_host_tokens": 683_061}, "host_pool_tokens"),
    ({"min_ratio": 2.955}, "host_device_ratio"),
])
def test_threshold_passes_and_one_unit_above_fails(kw: dict[str, float], metric: str) -> None:
    assert evaluate_hicache(launched(), **kw).passed
    key, value = next(iter(kw.items()))
    above = {key: value + (0.001 if key == "min_ratio" else 1)}
    outcome = evaluate_hicache(launched(), **above)
    head = outcome.message().splitlines()[0]  # names the keyword as written, then the figure and its metric
    assert head.startswith(f"sglang hicache gate failed: {key}={above[key]!r}: measured "), head
    assert head.endswith(f"({metric})")
    assert "Fix: raise --hicache-size (decimal GB per rank) or --hicache-ratio" in outcome.message()
    with pytest.raises(AssertionError, match=f"sglang hicache gate failed: {key}="):
        assert_hicache(launched(), **above)


def test_missing_rank_pool_fails() -> None:
    check = next(c for c in evaluate_hicache(launched(pools=7)).checks if c.metric == "host_pools")
    assert (check.measured, check.required, check.passed) == (7, 8, False)


def test_disabled_cache_fails_with_the_flag_to_add() -> None:
    outcome = evaluate_hicache(FakeServer({**seed_info(), "enable_hierarchical_cache": False}))
    lines = outcome.message().splitlines()
    assert lines[0] == "sglang hicache gate failed: enabled=True: measured False (enable_hierarchical_cache)"
    assert lines[-1] == ("Fix: add --enable-hierarchical-cache (and --hicache-size N, GB per rank) "
                         "to the launch args")


def test_enabled_false_requires_it_off() -> None:
    off = FakeServer({**seed_info(), "enable_hierarchical_cache": False})
    assert evaluate_hicache(off, enabled=False).passed
    assert not evaluate_hicache(launched(), enabled=False).passed


def test_metrics_source_and_derived_gb() -> None:
    outcome = evaluate_hicache(FakeServer(seed_info(), gauges=[683_061.0]), min_host_tokens=683_061,
                               min_host_gb_per_rank=48)
    tokens, gb = outcome.checks[1], outcome.checks[2]
    assert tokens.source == "/metrics sglang:hicache_host_total_tokens" and tokens.passed
    assert gb.source.startswith("/metrics sglang:hicache_host_total_tokens x device KV bytes per token")
    assert gb.measured == pytest.approx(48.0, abs=0.1)


def test_no_source_says_what_to_enable() -> None:
    outcome = evaluate_hicache(FakeServer(seed_info()), min_host_tokens=1)
    check = outcome.checks[-1]
    assert check.measured is None and not check.passed
    assert check.source == ("not available: launch through the plugin (startup-log host pool lines) or add "
                            "--enable-metrics (the sglang:hicache_host_total_tokens gauge)")


def test_configuration_fields() -> None:
    server = launched(hicache_write_policy="write_back")
    outcome = evaluate_hicache(server, write_policy="write_through", io_backend="kernel",
                               mem_layout="page_first")
    assert [c.metric for c in outcome.failed] == ["hicache_write_policy"]
    assert "Fix: launch with --hicache-write-policy write_through" in outcome.message()
    assert evaluate_hicache(launched(), storage_backend="mooncake").failed[0].measured is None


@pytest.mark.parametrize(("kw", "text"), [
    ({"min_host_gb_per_rank": -1}, "evaluate_hicache(min_host_gb_per_rank=-1): must be a number > 0. Fix: "
                                   "give min_host_gb_per_rank a number > 0, or leave it out"),
    ({"write_policy": 3}, "evaluate_hicache(write_policy=3): must be one of write_back, write_through, "
                          "write_through_selective (SGLang 0.5.23's --hicache-write-policy choices), not int"),
    ({"mem_layout": "page-first"}, "evaluate_hicache(mem_layout='page-first'): must be one of layer_first, "
                                   "page_first, *Fix: write mem_layout='page_first' (the closest choice)"),
    ({"storage_backend": "redis"}, "evaluate_hicache(storage_backend='redis'): must be one of file, sim, *"),
    ({"enabled": "yes"}, "evaluate_hicache(enabled='yes'): must be True or False, not the string 'yes'*"),
])
def test_bad_keywords(kw: dict[str, Any], text: str) -> None:
    with pytest.raises(ConfigError) as exc:
        evaluate_hicache(launched(), **kw)
    assert fnmatch.fnmatch(str(exc.value), text + "*"), str(exc.value)


@pytest.mark.parametrize(("kw", "text"), [
    ({"min_gain": 2.0}, "@pytest.mark.sglang_hicache(min_gain=2.0, effective=False): needs effective=True (the "
                        "gain is measured by the effective=True workload). Fix: add effective=True, or drop "
                        "min_gain"),
    ({"effective": True, "enabled": False}, "@pytest.mark.sglang_hicache(effective=True, enabled=False): needs "
                                            "enabled=True (*"),
])
def test_marker_keyword_combinations(kw: dict[str, Any], text: str) -> None:
    problem = marker_problem("sglang_hicache", run_marker, (), kw)  # checked at collection
    assert problem is not None and fnmatch.fnmatch(problem, text), problem


def test_reuse_workload_exceeds_gpu_and_fits_host() -> None:
    prefixes, length = reuse_workload(231_120, 683_061, 231_114)
    assert 231_120 < prefixes * length < 683_061
    with pytest.raises(ValueError, match="is not larger than the GPU pool"):
        reuse_workload(8192, 8192, 8000)


def _reuse(host_hits: int, second_s: float) -> ReuseResult:
    return ReuseResult(6, 2048, 8192, 32_769, PassResult(1.0, 12_300, 0, 0),
                       PassResult(second_s, 12_300, host_hits, host_hits))


def test_effective_checks() -> None:
    ok = effective_checks(_reuse(12_288, 0.4), min_gain=2.0)
    assert [c.passed for c in ok] == [True, True]
    assert ok[1].measured == 2.5
    bad = effective_checks(_reuse(0, 1.0), min_gain=2.0)
    assert [c.passed for c in bad] == [False, False]
    assert bad[0].required == (12_288 - 8192) // 2
    assert "the host tier did not serve the evicted prefixes" in bad[0].remedy


def test_effective_falls_back_to_load_back_metric_without_details() -> None:
    old = ReuseResult(6, 2048, 8192, 32_769, PassResult(1.0, 12_300, 0, 0, False),
                      PassResult(0.5, 12_300, 12_288, 0, False), load_back_tokens=10_000)
    check = effective_checks(old, min_gain=None)[0]
    assert (check.measured, check.passed) == (10_000, True)
    assert check.source.startswith("second pass: growth of sglang:load_back_tokens_total")
