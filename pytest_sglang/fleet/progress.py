"""Start-up display of a fleet: each worker's phase on its own line, or one summary line for many workers."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from pytest_sglang.server.phases import StartupReport
from pytest_sglang.server.progress import describe_ready, describe_state, format_duration

__all__ = ["COMPACT_ABOVE", "FleetProgress", "WorkerProgress"]

#: Above this many workers, one summary line ("workers: 6 loading weights, 2 ready") replaces per-worker lines.
COMPACT_ABOVE = 4


class WorkerProgress:
    """The progress sink of one worker: forwards to the fleet display with the worker's name."""

    def __init__(self, fleet: FleetProgress, index: int, port: int, role: str = "regular") -> None:
        self.fleet = fleet
        self.index = index
        self.port = port
        self.role = role

    @property
    def label(self) -> str:
        """``worker 0 (:31001)``, ``worker 1 (prefill :31002)``; ``worker 0 (on Ray)`` before its node picked a port."""
        role = "" if self.role == "regular" else f"{self.role} "
        return f"worker {self.index} ({role}:{self.port})" if self.port else f"worker {self.index} ({role}on Ray)"

    def update(self, state: StartupReport) -> None:
        self.fleet.worker_update(self, state)

    def note(self, line: str) -> None:
        self.fleet.line(f"{self.label} {line}")

    def done(self, report: StartupReport) -> None:
        self.fleet.worker_done(self, report)


class FleetProgress:
    """Writes the fleet's start-up: per worker when few, a summary when many, then the gateway."""

    def __init__(self, write: Callable[[str], None], workers: int, *, heartbeat_s: float = 30.0,
                 tty: bool = True) -> None:
        self.write = write
        #: Without a tty (a CI log) a worker's line is new only when its phase changes (not per shard).
        self.tty = tty
        self.workers = workers
        self.compact = workers > COMPACT_ABOVE
        self.heartbeat_s = heartbeat_s
        self._started = time.monotonic()
        self._phases: dict[int, str] = {}
        self._last: dict[int, tuple[str, float]] = {}
        self._summary = ""
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # workers report from their own threads: whole lines only

    def for_worker(self, index: int, port: int, role: str = "regular") -> WorkerProgress:
        """The sink worker ``index`` (listening on ``port``) reports to."""
        return WorkerProgress(self, index, port, role)

    def line(self, text: str) -> None:
        """A free-form line, stamped with the fleet's elapsed time."""
        with self._write_lock:
            self.write(f"[sglang {format_duration(time.monotonic() - self._started)}] {text}")

    def worker_update(self, sink: WorkerProgress, state: StartupReport) -> None:
        now = time.monotonic()
        with self._lock:
            self._phases[sink.index] = state.phase
            if self.compact:
                summary = self._summarize()
                if summary == self._summary:
                    return
                self._summary = summary
                text = summary
            else:
                if state.phase == "ready":
                    return
                full = describe_state(state, now - self._started).split("] ", 1)[-1]
                key = full if self.tty else state.phase
                last = self._last.get(sink.index)
                if last is not None and last[0] == key and now - last[1] < self.heartbeat_s:
                    return
                self._last[sink.index] = (key, now)
                text = f"{sink.label} {full}"
        self.line(text)

    def worker_done(self, sink: WorkerProgress, report: StartupReport) -> None:
        with self._lock:
            self._phases[sink.index] = "ready"
            summary = self._summarize() if self.compact else ""
            if self.compact:
                if summary == self._summary:
                    return
                self._summary = summary
        if self.compact:
            self.line(summary)
        else:
            self.line(f"{sink.label} {describe_ready(report)}")

    def _summarize(self) -> str:
        counts = Counter(self._phases.get(i, "starting") for i in range(self.workers))
        return "workers: " + ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items(), key=lambda kv: -kv[1]))
