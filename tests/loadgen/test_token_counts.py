"""Prompt tokens as the server counted them against those sent (issue 33 item 6), against the simulator.

The simulator's ``template-tokens:N`` fault makes every prompt N tokens longer than sent, as a chat
template applied twice would: the load is flagged and the throughput gate fails; the healthy twin passes.
"""

from __future__ import annotations

from typing import Any

import pytest
from sim_model import MODEL, SHAPE

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.throughput import evaluate_throughput
from pytest_sglang.loadgen import LoadSpec, run_load


def test_healthy_server_counts_exactly_the_ids_sent(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**SHAPE))
    tokens = result.prompt_tokens
    assert tokens["basis"] == "exact" and tokens["requests_compared"] == 16
    assert tokens["sent_prompt_tokens"] == tokens["server_prompt_tokens"] == 16 * 64
    assert tokens["difference"] == 0 and not tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert outcome.passed, outcome.message()
    assert outcome.context["prompt tokens"] == (
        "server counted 1,024 (prompt_tokens), client sent 1,024 (+0, +0.0%; token ids sent)")


@pytest.mark.parametrize("api", ["native", "completions"])
def test_added_template_tokens_are_flagged_and_fail_the_gate(sim_factory: Any, api: str) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "api": api}))
    assert result.completed == 16, result.failure_examples()
    tokens = result.prompt_tokens
    assert tokens["sent_prompt_tokens"] == 16 * 64 and tokens["server_prompt_tokens"] == 16 * 80
    assert tokens["difference_pct"] == 25.0 and tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert not outcome.passed
    check = outcome.failed[0]
    assert check.metric == "prompt tokens (server/sent)" and check.measured == "+25.0%"
    msg = outcome.message()
    assert "1,280 counted, 1,024 sent (token ids sent)" in msg  # the figures and where they came from
    assert "raise prompt_token_tolerance_pct=" in msg  # the fix
    assert "FLAGGED: beyond the 5% tolerance" in msg


def test_a_tolerance_wide_enough_passes_the_same_fault(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "prompt_token_tolerance_pct": 30.0}))
    assert result.prompt_tokens["difference"] == 16 * 16 and not result.prompt_tokens["flagged"]
    assert evaluate_throughput(result).passed


@pytest.mark.parametrize("bad", [-1.0, 1000.5, float("nan"), float("inf"), True, "5"])
def test_bad_tolerance_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(prompt_token_tolerance_pct=bad)
    text = str(info.value)
    assert "prompt_token_tolerance_pct" in text and "from 0 to 1000" in text and "use 5.0" in text
