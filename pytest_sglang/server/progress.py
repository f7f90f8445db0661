"""Live startup progress: a :class:`ProgressSink` protocol and a plain line-per-event renderer.

Real starts take 10-15 minutes; users need to see that something happens (phase, shard %, elapsed,
KV tokens, host pools as announced) and how long it took ("ready in 11m02s"). The plugin wires
:class:`TerminalProgress` to pytest's terminal writer and passes no sink with ``-q``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pytest_sglang.server.phases import StartupReport


class ProgressSink(Protocol):
    def update(self, state: StartupReport) -> None:
        """Called (from a background thread) whenever the startup report changes visibly."""

    def done(self, report: StartupReport) -> None:
        """Called once when the server is ready."""


@runtime_checkable
class NoteSink(Protocol):
    """A sink that also takes free-form lines (docker pull progress, preflight remarks)."""

    def note(self, line: str) -> None: ...


def line_sink(progress: ProgressSink | None) -> Callable[[str], None] | None:
    """The sink's ``note(line)``, if it has one.

    Optional on purpose: :class:`ProgressSink` implementations written before it keep working.
    """
    return progress.note if isinstance(progress, NoteSink) else None


def format_duration(seconds: float) -> str:
    """``42.1s``, ``11m02s``, ``1h02m03s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def describe_state(state: StartupReport, elapsed_s: float) -> str:
    """One status line, e.g. ``[sglang 2m10s] loading weights 50% (15/30 shards)``."""
    parts = [f"[sglang {format_duration(elapsed_s)}] {state.phase}"]
    if state.phase == "loading weights" and state.shard_percent is not None and state.shards is not None:
        parts.append(f"{state.shard_percent}% ({state.shards[0]}/{state.shards[1]} shards)")
    if state.kv_tokens is not None:
        parts.append(f"| KV pool {state.kv_tokens:,} tokens")
    if state.max_total_num_tokens is not None and state.max_total_num_tokens != state.kv_tokens:
        parts.append(f"| max_total_num_tokens={state.max_total_num_tokens:,}")
    if state.host_pools:
        parts.append(f"| host pools {len(state.host_pools)} x {state.host_pools[0].gb:.2f} GB")
    return " ".join(parts)


def describe_ready(report: StartupReport, url: str | None = None) -> str:
    """``SGLang ready in 11m02s at http://...: max_total_num_tokens=...``."""
    took = format_duration(report.ready_s) if report.ready_s is not None else "?"
    text = f"SGLang ready in {took}" + (f" at {url}" if url else "")
    facts = []
    if report.max_total_num_tokens is not None:
        facts.append(f"max_total_num_tokens={report.max_total_num_tokens:,}")
    if report.host_pools:
        facts.append(f"{len(report.host_pools)} host pool(s), {report.host_pool_gb_total():.2f} GB")
    slow = sorted((p for p in report.phases if p.duration_s), key=lambda p: -(p.duration_s or 0))[:3]
    if slow:
        facts.append("slowest: " + ", ".join(f"{p.name} {format_duration(p.duration_s or 0)}" for p in slow))
    return text + (" (" + "; ".join(facts) + ")" if facts else "")


class TerminalProgress:
    """Writes the start-up as it goes: on a terminal one line per visible change, in a log one per phase.

    Without a tty (a CI log) a line per weight shard made 64 lines of one launch. There each phase gets
    at most one line, written once the phase has lasted ``settle_s`` (a phase over in less is in the
    summary's startup line, not worth a log line), plus a heartbeat every ``heartbeat_s`` while it lasts.
    """

    def __init__(self, write: Callable[[str], None], *, heartbeat_s: float = 30.0,
                 url: str | None = None, tty: bool = True, settle_s: float = 1.0) -> None:
        self.write = write
        self.heartbeat_s = heartbeat_s
        self.url = url
        self.tty = tty
        self.settle_s = settle_s
        self._started = time.monotonic()
        self._last_line = ""
        self._last_time = 0.0
        self._pending: str | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def update(self, state: StartupReport) -> None:
        if state.phase == "ready":
            return  # done() says it, with the totals
        now = time.monotonic()
        line = describe_state(state, now - self._started)
        # What makes a line new: on a terminal any visible change, in a log only the phase.
        key = line.split("] ", 1)[-1] if self.tty else state.phase
        with self._lock:
            if key == self._last_line and now - self._last_time < self.heartbeat_s:
                return
            heartbeat = key == self._last_line
            self._last_line, self._last_time = key, now
            if not (self.tty or heartbeat):
                self._defer(line)
                return
            self._pending = None
        self.write(line)

    def _defer(self, line: str) -> None:
        """Write ``line`` if its phase still runs after ``settle_s`` (called with the lock held)."""
        self._pending = line
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.settle_s, self._flush, args=(line,))
        self._timer.daemon = True
        self._timer.start()

    def _flush(self, line: str) -> None:
        with self._lock:
            if self._pending is not line:
                return  # the phase ended (or the server is ready) before it was worth a line
            self._pending = None
        self.write(line)

    def note(self, line: str) -> None:
        """A free-form line (docker pull progress, preflight remarks), stamped like the status lines."""
        self.write(f"[sglang {format_duration(time.monotonic() - self._started)}] {line}")

    def done(self, report: StartupReport) -> None:
        with self._lock:
            self._pending = None
            if self._timer is not None:
                self._timer.cancel()
        self.write(describe_ready(report, self.url))
