"""Which marker settings disturb an attached server, and how the run's tally reads."""

from __future__ import annotations

import inspect

import pytest

from pytest_sglang import ledger
from pytest_sglang.defaults import HEAVY_LOAD_TOKENS
from pytest_sglang.gates.registry import GATES_BY_MARKER
from pytest_sglang.plugin.consent import disruptions_of_marker


def _actions(marker: str, **kwargs: object) -> list[str]:
    signature = inspect.signature(GATES_BY_MARKER[marker].load())
    return disruptions_of_marker(marker, kwargs, signature, HEAVY_LOAD_TOKENS)


@pytest.mark.parametrize(("marker", "kwargs", "says"), [
    ("sglang_fleet", {"cache_aware": True}, "flushes every worker's prefix cache"),
    ("sglang_hicache", {"effective": True}, "flushes the prefix cache"),
    ("sglang_pd", {"parity": True, "load": False}, "flushes the prefix cache of every prefill and decode worker"),
    ("sglang_throughput", {"requests": 256, "input_len": 4000, "output_len": 512},
     "sends 1,155,072 tokens of load, more than --sglang-heavy-load 1,000,000"),
    ("sglang_throughput", {"requests": 128, "input_len": 4000, "output_len": 512, "repeats": 3},
     "sends 1,732,608 tokens of load"),
    ("sglang_slo", {"min_concurrency": 1}, "sends 1,280,000 tokens of load"),  # max_requests=2000 x (512 + 128)
    # one load per context length: 64 requests x (32,768 + 128) x 2 lengths
    ("sglang_speculative", {"min_speedup": 1.2, "context_lens": [1024, 32768]}, "sends 4,210,688 tokens of load"),
])
def test_disruptive_settings_are_named(marker: str, kwargs: dict[str, object], says: str) -> None:
    actions = _actions(marker, **kwargs)
    assert len(actions) == 1 and says in actions[0], actions


@pytest.mark.parametrize(("marker", "kwargs"), [
    ("sglang_fleet", {}), ("sglang_hicache", {"min_host_tokens": 1}), ("sglang_pd", {"load": False}),
    ("sglang_throughput", {}), ("sglang_capacity", {"min_total_tokens": 1}), ("sglang_failover", {}),
])
def test_the_defaults_disturb_nothing(marker: str, kwargs: dict[str, object]) -> None:
    assert _actions(marker, **kwargs) == []


def test_the_tally_counts_requests_tokens_and_flushes() -> None:
    ledger.reset()
    assert not ledger.snapshot()
    ledger.note_requests(3)
    ledger.note_requests(10, 1000, 200)
    ledger.note_flush()
    assert ledger.snapshot().describe() == "13 requests (1,000 input + 200 output tokens of load), 1 cache flush"
    ledger.note_flush()
    assert ledger.snapshot().describe().endswith("2 cache flushes")
    ledger.reset()
