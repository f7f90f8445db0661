"""Concurrency and the cache must not change answers: cross-talk, batch invariance, cached logprobs."""

from __future__ import annotations

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, concurrency, kl


def test_no_cross_talk(sglang_acceptance: CheckContext) -> None:
    """Concurrent greedy requests each return what they return alone."""
    run(concurrency.check_cross_talk, sglang_acceptance)


def test_batch_invariance(sglang_acceptance: CheckContext) -> None:
    """One greedy prompt in batches of 1, 2, 4, ... gives one output (a floor without deterministic mode)."""
    run(concurrency.check_batch_invariance, sglang_acceptance)


def test_cache_logprobs(sglang_acceptance: CheckContext) -> None:
    """Logprobs served from the prefix cache match cold scoring (mean KL estimate <= max_kl)."""
    run(kl.check_cache_logprobs, sglang_acceptance)
