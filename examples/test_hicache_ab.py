"""A/B in one run: the same prefix-reuse workload with the hierarchical cache off and on.

The comparison is recorded as a gate outcome (``sglang_gate.record``): it appears in the gate summary
table and the JSON report like a marker's outcome, and an unmet check fails the test after its body.
"""

from __future__ import annotations

from pytest_sglang import GateOutcome
from pytest_sglang.gates.base import compare
from pytest_sglang.gates.facts.capacity import token_capacity
from pytest_sglang.gates.facts.hicache import host_pools
from pytest_sglang.gates.load.comparable import comparable
from pytest_sglang.loadgen.workloads.prefix_reuse import run_prefix_reuse


def test_hicache_off_vs_on(sglang_server, hicache_off_server, sglang_load, sglang_gate):
    info = sglang_server.info()
    device = token_capacity(info).least
    size = {"device_tokens": device, "host_tokens": min(host_pools(sglang_server, info).tokens),
            "max_input": info["max_req_input_len"]}
    with sglang_load.lock():  # our own traffic: no other load of the run may overlap it
        without = run_prefix_reuse(hicache_off_server, **size)
        with_cache = run_prefix_reuse(sglang_server, **size)
    for name, run in (("off", without), ("on", with_cache)):
        print(f"hicache {name}: second pass {run.second.seconds:.3f} s (first {run.first.seconds:.3f} s), "
              f"host hits {run.second.host_cached_tokens:,} tokens")

    source = "second pass of the same workload, hicache off vs on"
    outcome = sglang_gate.record(GateOutcome("hicache_ab", [
        # The two sides differ in the hierarchical cache only: the same SGLang, model, dtype and layout.
        comparable("hicache_ab", info, hicache_off_server.info(), here="the hicache-on server",
                   there="the hicache-off server"),
        compare("hicache_ab", "off_host_hit_tokens", without.second.host_cached_tokens, "==", 0,
                unit="tokens", source=source, remedy="the A side must run without --enable-hierarchical-cache"),
        # More host hits than the part of the working set that cannot stay on the GPU.
        compare("hicache_ab", "on_host_hit_tokens", with_cache.second.host_cached_tokens, ">=",
                with_cache.working_set - device + 1, unit="tokens", source=source,
                remedy="check the host pool size (--hicache-size / --hicache-ratio)"),
        compare("hicache_ab", "second_pass_speedup", without.second.seconds / with_cache.second.seconds,
                ">=", 1.2, unit="x", source=source, remedy="the host pool did not make the repeat faster"),
    ], context={"workload": with_cache.shape(), "off": without.to_dict(), "on": with_cache.to_dict()}))
    assert sglang_gate["hicache_ab"] is outcome
