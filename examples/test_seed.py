"""The seed deployment as acceptance gates: what should have been caught before 11 minutes of startup."""

from __future__ import annotations

import pytest
from seed import SEED, SIM, real_rate

from pytest_sglang import PreflightError


def test_300gb_per_rank_is_refused_before_starting(sglang_server_factory):
    """--hicache-size is GB per TP rank: 300 GB x 8 ranks does not fit a 449 GB host."""
    with pytest.raises(PreflightError) as refused:
        sglang_server_factory([*SEED, "--enable-hierarchical-cache", "--hicache-size", "300", *SIM])
    assert "--hicache-size 300 is GB per TP rank: 300 GB x 8 ranks = 2400 GB, but only" in str(refused.value)
    assert "Nothing was started." in str(refused.value)


def test_48gb_launch_starts_through_every_phase(sglang_server):
    phases = [p.name for p in sglang_server.startup.phases]
    for phase in ("loading weights", "allocating KV cache", "capturing CUDA graphs", "allocating host pools",
                  "ready"):
        assert phase in phases
    pools = sglang_server.startup.host_pools
    assert [(p.tokens, p.gb) for p in pools] == [(683_061, 48.0)] * 8  # 48e9 // 70,272 B/token + 1 page


@pytest.mark.sglang_capacity(min_total_tokens=231_120, min_concurrent_requests=50, avg_request_tokens=4000)
def test_kv_capacity():
    """The seed's first fix: 116,171 tokens (about 29 requests of 4,000 tokens) -> 231,120 at 0.93."""


@pytest.mark.sglang_hicache(min_host_gb_per_rank=48, write_policy="write_through")
def test_hierarchical_cache_pools():
    """8 host pools (one per TP rank) of 48 GB each: 384 GB of the host's RAM."""


@pytest.mark.sglang_throughput(min_output_tok_s=real_rate(60), max_error_rate=0, concurrency=32,
                               requests=64, input_len=1024, output_len=128)
def test_throughput():
    """A floor in real tokens/s, converted to the simulator's clock. At 50x compression the simulator
    is CPU-bound, so the floor is set well below its speed model: this proves the server serves."""
