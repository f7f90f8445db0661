"""Each worker's share of the requests sent through a fleet's gateway, read from the workers' own ``/metrics``.

The gateway does not say where it sent each request, so every worker's ``sglang:num_requests_total`` is
read just before and just after a load; the growth is the requests that worker served. Those counters
count every request the worker finished in that window (the load's warmup too, and any other traffic
sent to it meanwhile), and need the workers launched with ``--enable-metrics``. The shares are recorded
in the gate's outcome as ``context["worker_shares"]`` (``{worker URL: fraction}``, summing to 1) and
``context["worker_requests"]`` (``{worker URL: requests}``); :func:`worker_shares` reads them back typed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pytest_sglang.fleet.handle import fleet_of
from pytest_sglang.formatting import fmt
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.loadgen.client.servermetrics import REQUESTS_TOTAL
from pytest_sglang.sglang import metrics_text

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import SGLangFleet, WorkerHandle

__all__ = ["Counters", "WorkerShares", "measure", "read_counters", "run_loads", "worker_shares"]

T = TypeVar("T")
#: The outcome context keys (the reports read them).
SHARES_KEY = "worker_shares"
REQUESTS_KEY = "worker_requests"
_METRICS_FIX = "launch the workers with --enable-metrics (their /metrics counts the requests each one served)"


@dataclass(frozen=True)
class Counters:
    """One counter of every worker at one instant: its value, or why it could not be read."""

    values: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def _read(worker: WorkerHandle, name: str) -> float | str:
    """The counter's value, or why it is not known (text)."""
    samples = worker.metrics_or_why()
    if isinstance(samples, str):
        return samples
    value = metrics_text.value(samples, name)
    return value if value is not None else f"its /metrics has no {name}"


def read_counters(workers: list[WorkerHandle], name: str = REQUESTS_TOTAL) -> Counters:
    """Counter ``name`` (summed over its label sets) of each worker, by URL."""
    out = Counters()
    for worker in workers:
        value = _read(worker, name)
        if isinstance(value, str):
            out.missing[worker.url] = value
        else:
            out.values[worker.url] = value
    return out


@dataclass(frozen=True)
class WorkerShares:
    """Requests each worker served during a window (by URL), and the workers whose count is unknown."""

    names: dict[str, str]
    requests: dict[str, int]
    missing: dict[str, str] = field(default_factory=dict)

    @classmethod
    def between(cls, workers: list[WorkerHandle], before: Counters, after: Counters) -> WorkerShares:
        """The growth of each worker's counter from ``before`` to ``after``."""
        names = {w.url: w.name() for w in workers}
        requests: dict[str, int] = {}
        missing = {**before.missing, **after.missing}
        for url in names:
            if url in missing:
                continue
            grown = after.values[url] - before.values[url]
            if grown < 0:  # a counter never goes down unless the worker restarted
                missing[url] = "its request counter went down during the load (the worker restarted)"
            else:
                requests[url] = round(grown)
        return cls(names, requests, missing)

    @property
    def complete(self) -> bool:
        """True when every worker's count is known and the workers served something."""
        return not self.missing and self.total > 0

    @property
    def total(self) -> int:
        """Requests the workers served together."""
        return sum(self.requests.values())

    def shares(self) -> dict[str, float]:
        """Each worker's fraction of the requests (empty unless :attr:`complete`)."""
        if not self.complete:
            return {}
        return {url: n / self.total for url, n in self.requests.items()}

    def why_unknown(self) -> str:
        """Why the shares are not known, with the fix (empty when they are)."""
        if self.missing:
            return "; ".join(f"{self.names.get(u, u)}: {why}" for u, why in self.missing.items()) + \
                f". Fix: {_METRICS_FIX}"
        if self.total == 0:
            return (f"no worker's {REQUESTS_TOTAL} grew during the load (the requests did not reach the "
                    "listed workers)")
        return ""

    def describe(self) -> str:
        """``worker 0 (URL) 50.0% (32 requests), ...``: for messages."""
        shares = self.shares()
        if not shares:
            return f"unknown: {self.why_unknown()}"
        return ", ".join(f"{self.names[u]} {shares[u]:.1%} ({fmt(n)} requests)" for u, n in self.requests.items())

    def record(self, outcome: GateOutcome) -> None:
        """Put the shares into ``outcome.context`` (``worker_shares``, ``worker_requests``) or say why not."""
        shares = self.shares()
        if shares:
            outcome.context[SHARES_KEY] = {u: round(s, 4) for u, s in shares.items()}
            outcome.context[REQUESTS_KEY] = dict(self.requests)
        else:
            outcome.context["worker shares"] = f"unknown: {self.why_unknown()}"


def measure(fleet: SGLangFleet, run: Callable[[], T]) -> tuple[T, WorkerShares]:
    """Run ``run()`` (a load through the gateway) and the requests each worker served meanwhile."""
    workers = list(fleet.workers)
    before = read_counters(workers)
    result = run()
    return result, WorkerShares.between(workers, before, read_counters(workers))


def run_loads(server: object, run: Callable[[], T]) -> tuple[T, WorkerShares | None]:
    """``run()`` (loads through ``server``); when it is a gateway, also each worker's share of the requests.

    Shares exist only on a fleet, so this is one of the few places that asks for one (fleet.handle.fleet_of).
    """
    fleet = fleet_of(server)
    return (run(), None) if fleet is None else measure(fleet, run)


def worker_shares(outcome: GateOutcome | Mapping[str, object]) -> dict[str, float] | None:
    """The ``{worker URL: fraction}`` a gate recorded (an outcome or its ``to_dict()``), or None."""
    context = outcome.context if isinstance(outcome, GateOutcome) else outcome.get("context")
    raw = context.get(SHARES_KEY) if isinstance(context, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
