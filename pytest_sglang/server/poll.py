"""The one readiness loop, for a server and for a gateway: tenacity, ONE deadline, a stop when the process dies.

What differs between the two is the probe (which URL, which checks: ``server/readiness.py`` reads
``/health`` and ``/server_info``, ``fleet/readiness.py`` reads ``/readiness`` and ``/workers``), the pace
and how a failure is explained; the loop, its deadline, the attach grace and the stops are written here once.
A probe raises :class:`~pytest_sglang.server.probe.NotReadyYet` for "not yet" (retried); any other error
ends the wait at once. When the loop stops, tenacity's ``RetryError`` reaches the caller, which turns it
into its explained error (it never reaches the user).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from pytest_sglang.server.probe import NotReadyYet

__all__ = ["ATTACH_GRACE_S", "Trouble", "attach_gave_up", "poll"]

#: Attach mode: how long trouble that rarely fixes itself (refused, closed, a 5xx, a gateway that does not
#: answer) is retried; an attached server is supposed to be up already.
ATTACH_GRACE_S = 1.0

T = TypeVar("T")


class Trouble(Protocol):
    """What the loop reads of its caller's state between probes."""

    #: ``time.monotonic()`` at which the wait ends.
    deadline: float
    #: Since when the answers are wrong in a way that waiting rarely fixes (None: no trouble now).
    trouble_since: float | None
    #: The last answer cannot improve by waiting (attach gives up at once).
    final: bool


class _when(stop_base):
    def __init__(self, done: Callable[[], bool]) -> None:
        self.done = done

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.done()


def attach_gave_up(state: Trouble) -> bool:
    """Attach mode: a final answer, or trouble for :data:`ATTACH_GRACE_S`, ends the wait early."""
    since = state.trouble_since
    return state.final or (since is not None and time.monotonic() - since >= ATTACH_GRACE_S)


def poll(probe: Callable[[], T], state: Trouble, *, exited: Callable[[], bool], attach: bool, wait: wait_base,
         sleep: Callable[[float], None] = time.sleep) -> T:
    """``probe()`` until it returns, the deadline passes, the process exits or (attach) the grace is spent.

    Raises ``tenacity.RetryError`` when the loop stops, and whatever else ``probe`` raises at once.
    """
    stop = _when(lambda: time.monotonic() >= state.deadline) | _when(exited)
    if attach:
        stop = stop | _when(lambda: attach_gave_up(state))
    retrying = Retrying(stop=stop, wait=wait, sleep=sleep, retry=retry_if_exception_type(NotReadyYet),
                        reraise=False)
    return retrying(probe)
