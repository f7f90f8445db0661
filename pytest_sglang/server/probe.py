"""What readiness probes and what it learned: the types shared by ``readiness`` and ``diagnosis``.

Kept apart so that the waiter (readiness) and the explainer (diagnosis) both import it and not
each other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.phases import LogFollower
from pytest_sglang.server.url import ServerURL

HEALTH_PROBE_TIMEOUT_S = 30.0

#: How a probe ended: an HTTP status, or the transport failure seen instead of one.
PROBE_KINDS = ("none", "status", "refused", "timeout", "tls", "closed", "dns", "transport")


@dataclass(frozen=True)
class Expected:
    """What the launched server must show to prove it is ours (see ``identity``)."""

    port: int  # the port it was told to listen on (inside the container for docker)
    model_path: str | None
    launched_at: float  # wall clock (time.time()) just before the start


@dataclass
class Target:
    """What is being waited for."""

    url: ServerURL
    mode: str
    api_key: str | None = None
    validate: str = "strict"
    process: RunningProcess | None = None
    follower: LogFollower | None = None
    health_timeout_s: float = HEALTH_PROBE_TIMEOUT_S
    expected: Expected | None = None

    def exited(self) -> bool:
        return self.process is not None and self.process.exit_status() is not None


@dataclass(frozen=True)
class Probe:
    """One request's outcome, in the words of the messages (``GET /health -> 503``)."""

    path: str = "/health"
    kind: str = "none"
    status: int | None = None
    detail: str = ""  # cleaned exception text or body excerpt
    location: str | None = None  # a redirect's target (masked)
    timeout_s: float | None = None

    def describe(self) -> str:
        where = f"GET {self.path} -> "
        if self.kind == "none":
            return "none yet"
        if self.kind == "status":
            text = f"{where}{self.status}"
            if self.location:
                return f"{text} (redirect to {self.location})"
            return f"{text}: {self.detail}" if self.detail else text
        if self.kind == "timeout":
            return f"{where}no answer within {_seconds(self.timeout_s)}"
        labels = {"refused": "connection refused", "tls": "TLS handshake failed", "closed":
                  "connection closed without an answer", "dns": "host not found"}
        label = labels.get(self.kind)
        if label is None:
            return f"{where}{self.detail}"
        return f"{where}{label} ({self.detail})" if self.detail else f"{where}{label}"


def _seconds(timeout_s: float | None) -> str:
    if timeout_s is None:
        return "the probe timeout"
    # Near the deadline the probe timeout is clipped to what is left: say so instead of "within 0s".
    return f"{timeout_s:.0f}s" if timeout_s >= 1 else f"{timeout_s:.2f}s (the rest of the startup deadline)"


@dataclass
class WaitState:
    """What the loop learned so far (also the evidence of the error messages)."""

    started: float
    deadline: float
    probes: int = 0
    last: Probe = field(default_factory=Probe)
    answered: bool = False  # the server answered HTTP at least once
    #: Since when the answers are wrong in a way that waiting rarely fixes (attach gives up after a grace).
    trouble_since: float | None = None
    final: bool = False  # the last answer cannot improve by waiting (attach gives up at once)
    health_ok: bool = False  # /health answered 200 at least once

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def last_probe(self) -> str:
        return self.last.describe()


class NotReadyYet(Exception):
    """One probe said "not yet" (retried until the deadline, or until attach gives up)."""
