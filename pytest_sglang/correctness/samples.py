"""Send a check's independent samples at once (the acceptance suite's checks that judge each answer alone)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["each_sample"]

T = TypeVar("T")


def each_sample(count: int, parallel: int, one: Callable[[int], T]) -> list[T]:
    """``one(i)`` for every sample ``i < count``, up to ``parallel`` at once; the results in sample order.

    For checks whose samples are independent (each judges its own answer): a healthy suite runs in a
    fraction of the time, and a server that stalls costs one request timeout, not ``count`` of them. A
    stall (CheckStalled, :mod:`.deadline`) in any sample ends the check once the samples in flight have
    returned; no new request starts after it (the check's budget refuses it).
    """
    if count <= 1 or parallel <= 1:
        return [one(i) for i in range(count)]
    with ThreadPoolExecutor(max_workers=min(count, parallel), thread_name_prefix="sglang-check") as pool:
        futures = [pool.submit(one, i) for i in range(count)]
        return [f.result() for f in futures]
