"""Kubernetes-style HTTP probes sent while a load runs: what a kubelet would have seen.

A :class:`ProbeSpec` is one probe as a Kubernetes user writes it (``httpGet.path``, ``timeoutSeconds``,
``periodSeconds``, ``failureThreshold``). :class:`Prober` sends it to each target every period from its
own thread, each GET bounded by the timeout, and keeps every outcome (moment, status, latency). A probe
fails as the kubelet counts it: no answer within the timeout, or a status outside 200-399.

0.5.23's ``/health`` runs a one-token generation and answers at the earliest about 1 s after the call
(``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION``, default on): a probe with the default
``timeoutSeconds: 1`` is at the edge on an idle server and fails behind long prefills.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

from pytest_sglang.server.members import Handle

__all__ = ["ProbeResult", "ProbeSpec", "Prober"]

#: Outcomes kept per probe and target (a long load at a 1 s period stays bounded).
MAX_RESULTS = 10_000


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # "readiness" | "liveness"
    path: str
    timeout_s: float
    period_s: float
    failure_threshold: int

    @property
    def window_s(self) -> float:
        """How long a load must last for this probe to be able to fail.

        The first probe goes out as the load starts, before its requests do; ``failureThreshold`` more
        follow ``periodSeconds`` apart, the last one given its ``timeoutSeconds``.
        """
        return self.failure_threshold * self.period_s + self.timeout_s

    def describe(self) -> str:
        return (f"{self.kind} probe GET {self.path} (timeoutSeconds {self.timeout_s:g}, periodSeconds "
                f"{self.period_s:g}, failureThreshold {self.failure_threshold})")


@dataclass(frozen=True)
class ProbeResult:
    at_s: float  # since the prober started
    status: int | None  # None: no answer within the timeout (or no connection)
    latency_s: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 400

    def describe(self) -> str:
        said = str(self.status) if self.status is not None else (self.error or "no answer")
        return f"{self.latency_s:.2f} s ({said})"


@dataclass
class Prober:
    """Probe each ``(name, server)`` with each spec, every period, until :meth:`stop`."""

    targets: list[tuple[str, Handle]]
    specs: list[ProbeSpec]
    results: dict[tuple[str, str], list[ProbeResult]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _t0: float = 0.0

    def start(self) -> Prober:
        self._t0 = time.monotonic()
        for name, server in self.targets:
            for spec in self.specs:
                self.results[(name, spec.kind)] = []
                thread = threading.Thread(target=self._run, args=(name, server, spec), daemon=True,
                                          name=f"probe-{spec.kind}-{name}")
                self._threads.append(thread)
                thread.start()
        return self

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (the clock of every ``ProbeResult.at_s``)."""
        return time.monotonic() - self._t0

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=max((s.timeout_s for s in self.specs), default=0.0) + 5)

    def _run(self, name: str, server: Handle, spec: ProbeSpec) -> None:
        out = self.results[(name, spec.kind)]
        with server.client(timeout=httpx.Timeout(spec.timeout_s)) as client:
            next_at = time.monotonic()
            while not self._stop.is_set():
                out.append(_probe(client, spec.path, time.monotonic() - self._t0))
                del out[:-MAX_RESULTS]
                next_at += spec.period_s
                self._stop.wait(max(0.0, next_at - time.monotonic()))


def _probe(client: httpx.Client, path: str, at_s: float) -> ProbeResult:
    start = time.monotonic()
    try:
        status: int | None = client.get(path).status_code
        error = ""
    except httpx.TimeoutException:
        status, error = None, "timed out"
    except httpx.HTTPError as exc:
        status, error = None, type(exc).__name__
    return ProbeResult(at_s, status, time.monotonic() - start, error)
