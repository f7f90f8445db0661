# Over 300 lines: one failover's engine (load thread, kill, watch, restart) as one plain-Python state.
"""The failover engine (plain Python): load through the gateway, a kill, the gateway watched, a restart.

:class:`FailoverRun` drives one failover of a launched :class:`~pytest_sglang.fleet.SGLangFleet`; the
``sglang_failover`` marker (:mod:`pytest_sglang.gates.fleet.failover`) judges what it measured. Every event
is kept as a wall-clock time and reported in seconds from the start of the timed load
(:meth:`FailoverRun.timeline`), the clock the load generator's records use.

The gateway is polled every :data:`POLL_S` s: ``GET /workers`` (``is_healthy``) and its Prometheus
metrics (``smg_worker_health``, ``smg_worker_cb_state`` and a per-worker request counter:
``smg_worker_requests_total`` on smg 1.x, ``smg_worker_cb_outcomes_total`` on sglang-router 0.3, which
has no per-worker request counter). A source that does not answer is left out of that poll.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang.errors import LoadGenError, ServerUnavailable, SGLangError
from pytest_sglang.gates.base import Check
from pytest_sglang.loadgen import LoadResult, LoadSpec, run_load
from pytest_sglang.sglang import metrics_text as promtext

if TYPE_CHECKING:
    from pytest_sglang.fleet import SGLangFleet

__all__ = ["POLL_S", "RECOVER_WINDOW_S", "TIMELINE", "FailoverRun", "LoadThread", "Snapshot", "snapshot"]

POLL_S = 0.1
#: How long recovery (and, with restart=False, the restore) is awaited without max_recover_s.
RECOVER_WINDOW_S = 120.0
#: The events of a failover, in the order they usually happen.
TIMELINE = ("kill", "first_error", "last_error", "last_routed", "cb_open", "detected", "restart", "restarted",
            "restored", "recovered", "load_end")
_PROBE_TIMEOUT_S = 5.0
#: After the load, a 1-token request this often gives the restarted worker traffic to serve.
PROBE_EVERY_S = 0.5


@dataclass(frozen=True)
class Snapshot:
    """What the gateway says about its workers at one moment (keys: worker URL)."""

    t: float
    healthy: dict[str, bool]
    cb_open: dict[str, bool]
    #: Requests the gateway routed to each worker so far (a counter; empty when it exposes none).
    routed: dict[str, float]


def _by_worker(metrics: dict[str, list[promtext.Sample]], name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for sample in metrics.get(name, []):
        url = sample.labels.get("worker", "").rstrip("/")
        if url:
            out[url] = out.get(url, 0.0) + sample.value
    return out


def snapshot(fleet: SGLangFleet) -> Snapshot:
    """The gateway's view now (a worker is unhealthy when either source says so)."""
    try:
        metrics = fleet.gateway_metrics()
    except (ServerUnavailable, ValueError):
        metrics = {}
    healthy = {u: v == 1 for u, v in _by_worker(metrics, "smg_worker_health").items()}
    with contextlib.suppress(ServerUnavailable):
        for entry in fleet.discover().workers:
            healthy[entry.url] = healthy.get(entry.url, True) and entry.is_healthy
    counter = "smg_worker_requests_total" if "smg_worker_requests_total" in metrics else "smg_worker_cb_outcomes_total"
    cb_open = {u: v == 1 for u, v in _by_worker(metrics, "smg_worker_cb_state").items()}
    return Snapshot(time.time(), healthy, cb_open, _by_worker(metrics, counter))


def never_check(gate: str, event: str, at: float, requests: int) -> Check:
    """The failed check of an event (a kill, a restart) that never came: the load ended before ``at`` of it."""
    return Check(gate, event, f"never: the load ended before {at:g} x {requests} requests finished",
                 "during the load", "==", passed=False, source="load generator",
                 remedy="give the load more requests, or a smaller at=")


class LoadThread(threading.Thread):
    """The load through the gateway; ``reached`` is set once ``at_count`` requests finished, or it ended."""

    def __init__(self, url: str, spec: LoadSpec, api_key: str | None, at_count: int) -> None:
        super().__init__(name="sglang-failover-load", daemon=True)
        self.url, self.spec, self.api_key, self.at_count = url, spec, api_key, at_count
        self.reached = threading.Event()
        self.done = 0
        self.result: LoadResult | None = None
        self.error: BaseException | None = None

    def _progress(self, done: int, total: int) -> None:
        self.done = done
        if done >= self.at_count:
            self.reached.set()

    def run(self) -> None:
        try:
            self.result = run_load(self.url, self.spec, api_key=self.api_key, progress=self._progress)
        except BaseException as exc:  # handed to the gate's thread, which raises it there
            self.error = exc
        finally:
            self.reached.set()

    def finished(self) -> LoadResult:
        """The load's result once the thread ended; its error raised here, or why it did not end in time."""
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise LoadGenError(f"the load through {self.url} did not end within the gate's deadline "
                               f"(load_timeout_s={self.spec.load_timeout():g} s)")
        return self.result


@dataclass
class FailoverRun:
    """One failover of worker ``index``: :meth:`execute`, then :meth:`restore` (always), then read it."""

    fleet: SGLangFleet
    index: int
    signum: int
    spec: LoadSpec
    restart: bool = True
    max_detect_s: float | None = None
    max_recover_s: float | None = None
    api_key: str | None = None
    #: Wall-clock time of each event of :data:`TIMELINE` that happened (and ``load_end_poll``).
    times: dict[str, float] = field(default_factory=dict)
    before: Snapshot | None = None
    #: The first poll after the load ended (before any probe request): the end of the shares.
    after: Snapshot | None = None
    routed_after_kill: float = 0.0
    routed_known: bool = False
    restored: bool = False
    restore_error: str = ""
    result: LoadResult | None = None
    done_at_kill: int = 0
    _load: LoadThread | None = None
    _routed: float | None = None

    @property
    def url(self) -> str:
        """The URL of the worker that is killed."""
        return self.fleet.worker(self.index).url

    def recover_window(self) -> float:
        """Seconds recovery is awaited after the restart.

        Past a tight ``max_recover_s`` too: the figure is then known, and the fleet whole again.
        """
        return max(self.max_recover_s or 0.0, RECOVER_WINDOW_S)

    def execute(self, at: float) -> None:
        """Run the load, kill at ``at`` x requests finished, watch, restart (restart=True).

        The load's own error (e.g. nothing answers at the gateway) is raised once the load ended;
        call :meth:`restore` whatever happens (but a Ctrl-C), so the fleet is whole again.
        """
        at_count = max(1, min(self.spec.requests, round(at * self.spec.requests)))
        self._load = load = LoadThread(self.fleet.gateway.url, self.spec, self.api_key, at_count)
        self.before = snapshot(self.fleet)
        # One deadline for every wait of the gate (a restart has its own start-up deadline on top).
        deadline = (time.monotonic() + self.spec.load_timeout() + (self.max_detect_s or 0.0)
                    + self.recover_window() + 60.0)
        load.start()
        try:
            load.reached.wait(self.spec.load_timeout())
            if load.is_alive() and load.done >= at_count:
                self._kill(load.done)
                self._detect(deadline)
                if self.restart:
                    self._restart(until=min(deadline, time.monotonic() + self.recover_window()), routed=True)
        except Exception:  # the kill or a poll failed: still, no load of this gate may outlive it
            self._drain(deadline)
            raise
        self._drain(deadline)
        self.result = load.finished()

    def _drain(self, deadline: float) -> None:
        """Watch the gateway until the load ended (the load generator has its own deadline too)."""
        assert self._load is not None
        while self._load.is_alive() and time.monotonic() < deadline:
            self._tick()
            self._load.join(POLL_S)
        self._tick()

    def restore(self) -> None:
        """Make the fleet whole: restart the killed worker if nothing did yet, and wait until it is listed."""
        if "kill" not in self.times:
            self.restored = True
        elif "restart" not in self.times:
            self._restart(until=time.monotonic() + RECOVER_WINDOW_S, routed=False)

    # ---- steps --------------------------------------------------------------------------------
    def _kill(self, done: int) -> None:
        self._routed = snapshot(self.fleet).routed.get(self.url)
        self.done_at_kill = done
        self.fleet.kill_worker(self.index, self.signum)
        self.times["kill"] = time.time()

    def _detect(self, deadline: float) -> None:
        """Poll until the gateway marks the worker unhealthy, or the load ended (and max_detect_s passed)."""
        until = self.times["kill"] + (self.max_detect_s or 0.0)
        assert self._load is not None
        while time.monotonic() < deadline and "detected" not in self.times:
            self._tick()
            if not self._load.is_alive() and time.time() >= until:
                return
            time.sleep(POLL_S)

    def _restart(self, *, until: float, routed: bool) -> None:
        self.times["restart"] = time.time()
        try:
            self.fleet.restart_worker(self.index)
        except SGLangError as exc:
            self.restore_error = f"restart_worker({self.index}) failed: {str(exc).splitlines()[0]}"
            return
        self.times["restarted"] = time.time()
        self._await_serving(until, routed=routed)

    def _await_serving(self, until: float, *, routed: bool) -> None:
        """Poll until the gateway lists the worker healthy and, ``routed``, has sent it a request."""
        start: float | None = None
        probes, next_probe = 0, 0.0
        while time.monotonic() < until:
            snap = self._tick()
            count = snap.routed.get(self.url)
            start = count if start is None else start
            if snap.healthy.get(self.url):
                self.restored = True
                self.times.setdefault("restored", snap.t)
                if not routed or count is None or start is None or count > start:
                    if routed:
                        self.times["recovered"] = snap.t
                    return
            if self._load is not None and not self._load.is_alive() and time.monotonic() >= next_probe:
                probes += 1
                self._probe(probes)
                next_probe = time.monotonic() + PROBE_EVERY_S
            time.sleep(POLL_S)
        what = "served no request" if self.restored else "was not listed healthy by the gateway"
        self.restore_error = f"the restarted worker {what} within {time.time() - self.times['restart']:.0f} s"

    def _tick(self) -> Snapshot:
        """Poll the gateway; note the load's end, detection, the breaker and routing to the dead worker."""
        snap = snapshot(self.fleet)
        if self._load is not None and not self._load.is_alive() and self.after is None:
            self.after, self.times["load_end_poll"] = snap, snap.t  # taken before any probe request
        self.routed_known = self.routed_known or self.url in snap.routed
        if "kill" not in self.times or "restart" in self.times:
            return snap
        if snap.healthy.get(self.url) is False:
            self.times.setdefault("detected", snap.t)
        if snap.cb_open.get(self.url):
            self.times.setdefault("cb_open", snap.t)
        count = snap.routed.get(self.url)
        if count is not None and self._routed is not None and count > self._routed:
            self.routed_after_kill += count - self._routed
            self.times["last_routed"] = snap.t
        self._routed = count if count is not None else self._routed
        return snap

    def _probe(self, n: int) -> None:
        """One 1-token request through the gateway (a unique text: cache-aware routing must not pin it)."""
        body = {"text": f"failover probe {n} {uuid.uuid4().hex}", "sampling_params": {"max_new_tokens": 1}}
        with contextlib.suppress(Exception), self.fleet.gateway.client(timeout=_PROBE_TIMEOUT_S) as client:
            client.post("/generate", json=body)

    # ---- figures ------------------------------------------------------------------------------
    def origin(self) -> float:
        """The wall-clock start of the timed load (its records carry it), else the kill's time."""
        records = self.result.records if self.result is not None else []
        if records:
            return records[0].start_time - records[0].start
        return self.times.get("kill", time.time())

    def timeline(self) -> dict[str, float | None]:
        """Each event of :data:`TIMELINE` in seconds from the start of the timed load (None: did not happen)."""
        origin = self.origin()
        out = {k: round(self.times[k] - origin, 3) if k in self.times else None for k in TIMELINE}
        records = self.result.records if self.result is not None else []
        failed = sorted(r.start + r.e2e for r in records if r.error_kind)
        out["first_error"] = round(failed[0], 3) if failed else None
        out["last_error"] = round(failed[-1], 3) if failed else None
        out["load_end"] = round(self.result.duration, 3) if self.result is not None else None
        return out

    def seconds(self, start: str, end: str) -> float | None:
        """Seconds between two events (None when either did not happen)."""
        if start not in self.times or end not in self.times:
            return None
        return round(self.times[end] - self.times[start], 3)

    def routed_during_load(self) -> dict[str, int] | None:
        """Requests the gateway routed to each worker during the load (None: it exposes no counter)."""
        if self.before is None or self.after is None or not self.after.routed:
            return None
        return {u: round(max(0.0, v - self.before.routed.get(u, 0.0))) for u, v in sorted(self.after.routed.items())}

    def shares(self) -> dict[str, float] | None:
        """Each worker's share of the requests the gateway routed during the load (None: not known)."""
        routed = self.routed_during_load()
        total = sum(routed.values()) if routed else 0
        return {u: round(n / total, 4) for u, n in routed.items()} if routed and total else None
