"""Cancellation storms: which requests' clients go away mid-answer (``LoadSpec.cancel_rate``).

A cancelled request's client closes its connection after ``cancel_after_tokens`` chunks of text, as
AIPerf's ``--request-cancellation-rate`` clients do; SGLang must then abort it and give back its slot
and its KV (0.5.23's tokenizer manager aborts a request whose client disconnected). Such a request is
counted apart (``LoadResult.cancelled``): not an error, and not in any latency or throughput figure.
"""

from __future__ import annotations

import random

#: Mixed into the load's seed so the cancelled requests do not follow the prompts' draw.
_SALT = 0x5C_A4CE1


def cancel_count(requests: int, rate: float) -> int:
    """How many of ``requests`` are cancelled at ``rate``: exactly the share asked for, rounded."""
    return round(requests * rate)


def cancelled_indices(requests: int, rate: float, seed: int) -> frozenset[int]:
    """The request indices whose client goes away: a seeded choice, the same in every client process."""
    if not rate:
        return frozenset()
    return frozenset(random.Random(seed ^ _SALT).sample(range(requests), cancel_count(requests, rate)))
