"""A/B in one run: the same prefix-reuse workload with the hierarchical cache off and on."""

from __future__ import annotations

from pytest_sglang.gates.capacity import token_capacity
from pytest_sglang.gates.hicache import host_pools
from pytest_sglang.gates.prefix_reuse import run_prefix_reuse


def test_hicache_off_vs_on(sglang_server, hicache_off_server, record_property):
    info = sglang_server.info()
    device = token_capacity(info).least
    size = {"device_tokens": device, "host_tokens": min(host_pools(sglang_server, info).tokens),
            "max_input": info["max_req_input_len"]}
    without = run_prefix_reuse(hicache_off_server, **size)
    with_cache = run_prefix_reuse(sglang_server, **size)

    record_property("sglang.hicache_ab.workload", with_cache.shape())
    record_property("sglang.hicache_ab.off", without.to_dict())
    record_property("sglang.hicache_ab.on", with_cache.to_dict())
    for name, run in (("off", without), ("on", with_cache)):
        print(f"hicache {name}: second pass {run.second.seconds:.3f} s (first {run.first.seconds:.3f} s), "
              f"host hits {run.second.host_cached_tokens:,} tokens")

    assert without.second.host_cached_tokens == 0
    assert with_cache.second.host_cached_tokens > with_cache.working_set - device
    assert with_cache.second.seconds < without.second.seconds
