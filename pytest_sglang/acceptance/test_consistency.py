"""Concurrency and the cache must not change answers: cross-talk, batch invariance, cached logprobs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext, concurrency, kl
from pytest_sglang.plugin import consent

if TYPE_CHECKING:
    from pytest_sglang.server.members import Handle


def test_no_cross_talk(sglang_acceptance: CheckContext) -> None:
    """Concurrent greedy requests each return what they return alone."""
    run(concurrency.check_cross_talk, sglang_acceptance)


def test_batch_invariance(sglang_acceptance: CheckContext) -> None:
    """One greedy prompt in batches of 1, 2, 4, ... gives one output (a floor without deterministic mode)."""
    run(concurrency.check_batch_invariance, sglang_acceptance)


def test_cache_logprobs(request: pytest.FixtureRequest, sglang_server: Handle,
                        sglang_acceptance: CheckContext) -> None:
    """Logprobs served from the prefix cache match cold scoring (mean KL estimate <= max_kl)."""
    # Cold scoring needs an empty cache: an attached server's owner must agree to the flush.
    consent.require(request.config, sglang_server, ["flushes the prefix cache (POST /flush_cache)"])
    run(kl.check_cache_logprobs, sglang_acceptance)
