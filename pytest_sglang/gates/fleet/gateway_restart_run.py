"""A gateway restart under load (``sglang_failover(target="gateway")``): the engine, in plain Python.

The load runs through the gateway; once ``at`` x ``requests`` finished, the launched gateway gets the signal
and the same command is started again on the same ports (:meth:`SGLangFleet.restart_gateway`), as a
container restart does. The gateway is then polled every :data:`~.failover_run.POLL_S` s (``GET /workers`` and
its metrics, :func:`~.failover_run.snapshot`) until it lists every worker it listed before healthy and has
routed each of them a request: smg#752 and smg#1419 saw gateways come back empty after a restart. Each
worker's share of the requests routed after the restart comes from the new process's per-worker counter.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang.gates.fleet.failover_run import (
    POLL_S,
    PROBE_EVERY_S,
    RECOVER_WINDOW_S,
    LoadThread,
    Snapshot,
    snapshot,
)
from pytest_sglang.loadgen import LoadResult, LoadSpec

if TYPE_CHECKING:
    from pytest_sglang.fleet import SGLangFleet

_PROBE_TIMEOUT_S = 5.0


@dataclass
class GatewayRestartRun:
    """One restart of the fleet's gateway under load: :meth:`execute`, then read the figures."""

    fleet: SGLangFleet
    signum: int
    spec: LoadSpec
    max_recover_s: float | None = None
    api_key: str | None = None
    times: dict[str, float] = field(default_factory=dict)
    #: The workers the gateway listed healthy before the restart (URLs).
    before: tuple[str, ...] = ()
    #: The workers it listed (healthy or not) and listed healthy at the end of the watch.
    listed_after: tuple[str, ...] = ()
    healthy_after: tuple[str, ...] = ()
    #: Requests the new gateway process routed to each worker (its counters start at 0).
    routed_after: dict[str, float] = field(default_factory=dict)
    routed_known: bool = False
    result: LoadResult | None = None
    done_at_restart: int = 0

    def window(self) -> float:
        """Seconds the recovery is watched after the restart: ``max_recover_s``, else :data:`RECOVER_WINDOW_S`."""
        return self.max_recover_s if self.max_recover_s is not None else RECOVER_WINDOW_S

    def execute(self, at: float) -> None:
        """Run the load, restart the gateway at ``at`` x requests finished, watch until every worker is routed."""
        at_count = max(1, min(self.spec.requests, round(at * self.spec.requests)))
        load = LoadThread(self.fleet.gateway.url, self.spec, self.api_key, at_count)
        first = snapshot(self.fleet)
        self.before = tuple(sorted(u for u, ok in first.healthy.items() if ok))
        deadline = time.monotonic() + self.spec.load_timeout() + self.window() + 60.0
        load.start()
        try:
            load.reached.wait(self.spec.load_timeout())
            if load.is_alive() and load.done >= at_count:
                self.done_at_restart = load.done
                self.times["restart"] = time.time()
                self.fleet.restart_gateway(self.signum)
                self.times["restarted"] = time.time()
                self._watch(load, until=min(deadline, time.monotonic() + self.window()))
        finally:
            while load.is_alive() and time.monotonic() < deadline:
                load.join(POLL_S)
        self.result = load.finished()
        if "restart" in self.times:
            self._note(snapshot(self.fleet))

    def _note(self, snap: Snapshot) -> None:
        self.listed_after = tuple(sorted(snap.healthy))
        self.healthy_after = tuple(sorted(u for u, ok in snap.healthy.items() if ok))
        self.routed_known = self.routed_known or bool(snap.routed)
        self.routed_after = dict(snap.routed)

    def _watch(self, load: LoadThread, *, until: float) -> None:
        """Poll until every worker listed before is listed healthy again and routed a request, or ``until``."""
        probes, next_probe = 0, 0.0
        while time.monotonic() < until:
            snap = snapshot(self.fleet)
            self._note(snap)
            if snap.healthy and "answered" not in self.times:
                self.times["answered"] = snap.t
            if set(self.before) <= set(self.healthy_after):
                self.times.setdefault("listed", snap.t)
                if all(snap.routed.get(u, 0.0) > 0 for u in self.before) or not snap.routed:
                    self.times["recovered"] = snap.t
                    return
            if not load.is_alive() and time.monotonic() >= next_probe:  # the load is over: traffic to route
                probes += 1
                self._probe(probes)
                next_probe = time.monotonic() + PROBE_EVERY_S
            time.sleep(POLL_S)

    def _probe(self, n: int) -> None:
        body = {"text": f"gateway restart probe {n} {uuid.uuid4().hex}", "sampling_params": {"max_new_tokens": 1}}
        with contextlib.suppress(Exception), self.fleet.gateway.client(timeout=_PROBE_TIMEOUT_S) as client:
            client.post("/generate", json=body)

    def seconds(self, start: str, end: str) -> float | None:
        if start not in self.times or end not in self.times:
            return None
        return round(self.times[end] - self.times[start], 3)

    def shares(self) -> dict[str, float] | None:
        """Each worker's share of the requests the new gateway routed (None: no per-worker counter)."""
        total = sum(self.routed_after.values())
        if not self.routed_after or not total:
            return None
        return {u: round(self.routed_after.get(u, 0.0) / total, 4) for u in sorted({*self.before, *self.routed_after})}
