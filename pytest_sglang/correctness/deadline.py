"""The acceptance suite's deadlines: one per check, one for the whole suite, and the stall that ends a check.

A server whose stream never ends once made the suite send each check's 8 samples one after another,
each waiting its full request timeout (60 s): about 96 minutes for the stream checks. Now:

* every request's timeout is clipped to the time the check has left (and the suite has left);
* the first request of a check that gets no complete answer in time is a *stall*: the check stops
  there, failing with that finding (the other samples would only wait the same way);
* a check started after the suite's deadline fails at once, saying so (never a silent pass).

:class:`Budget` is shared by the threads of one check (samples sent concurrently), hence the lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

__all__ = ["Budget", "CheckStalled"]


class CheckStalled(Exception):  # a finding that ends the check, not an error of the check itself
    """A request of the check got no complete answer in time, or the check's time ran out."""


@dataclass
class Budget:
    """When the current check (or the suite) must end, and the stall that ended it early, if any."""

    ends_at: float  # time.monotonic()
    what: str  # "the check's deadline (300 s, check_timeout_s)": which limit ``ends_at`` is
    suite_ends_at: float
    suite_what: str
    stalled: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def for_suite(cls, suite_timeout_s: float) -> Budget:
        """The suite's budget, counted from now (the first check's start)."""
        ends = time.monotonic() + suite_timeout_s
        what = f"the suite's deadline ({suite_timeout_s:g} s, suite_timeout_s)"
        return cls(ends, what, ends, what)

    def for_check(self, check_timeout_s: float) -> Budget:
        """A fresh budget for one check: ``check_timeout_s`` from now, never past the suite's deadline."""
        ends = time.monotonic() + check_timeout_s
        if ends >= self.suite_ends_at:
            return Budget(self.suite_ends_at, self.suite_what, self.suite_ends_at, self.suite_what)
        return Budget(ends, f"the check's deadline ({check_timeout_s:g} s, check_timeout_s)", self.suite_ends_at,
                      self.suite_what)

    def timeout(self, request_timeout_s: float) -> float:
        """The timeout for the next request; CheckStalled when the check has stalled or has no time left."""
        with self._lock:
            if self.stalled is not None:
                raise CheckStalled(self.stalled)
        left = self.ends_at - time.monotonic()
        if left <= 0:
            self.stall(f"{self.what} had passed before the check's next request (not sent)")
        return min(request_timeout_s, left)

    def stall(self, finding: str) -> None:
        """Record the first stall of the check and end it (raises CheckStalled)."""
        with self._lock:
            if self.stalled is None:
                self.stalled = finding
            raise CheckStalled(self.stalled)
