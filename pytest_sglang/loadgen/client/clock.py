"""Receive timestamps taken when the event loop learns that data arrived.

The time is read then, not when a stream's coroutine gets round to it.

At 64 concurrent streams the server emits a burst of 64 chunks per decode step. One event loop
handles them one after another, so a ``perf_counter()`` read in stream k's coroutine is late by the
processing of the k-1 streams before it (about 2 ms per burst here): a lag of the measuring
client, not of the server, that would inflate TTFT and blur ITL.

:class:`WakeSelector` notes the time every ``select()`` returns (the loop waking with ready
sockets). A stream that had to wait for data resumes one loop iteration after the iteration whose
read callback delivered it (aiohttp's ``StreamReader`` wakes the waiting task with
``Future.set_result``, which schedules it for the next iteration), so the data's arrival is the
wake time of the *previous* iteration. A stream that did not suspend since its last chunk is
reading bytes of that same network read.

The stamp is the moment the loop saw the socket ready; the socket is read later in that same
iteration, and bytes that arrived in between are read too, so a stamp can be early by at most the
length of that iteration (~0.1-2 ms at 64 streams). When that iteration ran longer than
:data:`LONG_ITERATION_S` (the process was descheduled, or a huge burst), its end is used instead: the
bytes were read by then, so the stamp is never early by more than that, only late.
``benchmarks/bench_loadgen.py`` measures the error against the server's send times.
:func:`run` runs a coroutine on such a loop; elsewhere
(another loop, e.g. an async test's) :func:`stream_clock` falls back to ``perf_counter()``.
"""

from __future__ import annotations

import asyncio
import selectors
import sys
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_perf = time.perf_counter
#: A delivering iteration longer than this (a stall, or a burst far above 64 streams) makes its
#: wake time too early a bound: its end is used instead (measured best in bench_loadgen.py).
LONG_ITERATION_S = 0.003


class WakeSelector(selectors.DefaultSelector):
    """The platform's default selector, noting when each ``select()`` returned (perf_counter)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.wake = _perf()
        self.prev = self.wake
        self.entered = self.wake

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        entered = _perf()
        events: list[tuple[selectors.SelectorKey, int]] = super().select(timeout)
        self.prev, self.wake = self.wake, _perf()
        self.entered = entered
        self.count += 1
        return events

    def stamp(self, mark: int, last: float) -> float:
        """Arrival time of data read now; ``mark`` is :attr:`count` after the previous read."""
        if self.count == mark:
            return last
        # ``entered``: when the delivering iteration ended (this iteration's select began).
        return self.entered if self.entered - self.prev > LONG_ITERATION_S else self.prev


class PerfClock:
    """Fallback on a loop we did not create: the time the coroutine reads the data."""

    count = 0

    def stamp(self, mark: int, last: float) -> float:
        return _perf()


class WakeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.wake_selector = WakeSelector()
        super().__init__(self.wake_selector)


def stream_clock() -> WakeSelector | PerfClock:
    """The receive clock of the running loop."""
    loop = asyncio.get_running_loop()
    clock: WakeSelector | None = getattr(loop, "wake_selector", None)
    return clock if clock is not None else PerfClock()


def loop_running() -> bool:
    """Whether this thread runs an event loop (then :func:`run` would refuse: use another thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True  # asked apart from running: an error of the run must not chain "no running event loop"


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a :class:`WakeLoop` (plain ``asyncio.run`` before Python 3.11)."""
    if sys.version_info < (3, 11):
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=WakeLoop) as runner:
        return runner.run(coro)
