"""Follow an SGLang server log and turn it into a :class:`StartupReport` (phases, capacity, fatal lines).

Regexes are those of reference Appendix B (0.5.23 and older variants), matched anywhere in a line so
that log prefixes (``[2026-12-02 13:55:52 TP0]``), colour codes and tqdm carriage returns do not
matter. Phases only move forward: with TP>1 every rank prints its own lines, and a slow rank's
"Load weight begin" must not send the display back.
"""

from __future__ import annotations

import copy
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang import redaction
from pytest_sglang.exits import FatalLine
from pytest_sglang.server.fatal import match_fatal, shorten

#: Startup phases in order (the label is what users see).
PHASES = (
    "launching",
    "pulling image",  # docker runner only: our own log line before the container exists
    "loading weights",
    "allocating KV cache",
    "capturing CUDA graphs",
    "allocating host pools",
    "starting HTTP server",
    "warming up",
    "ready",
)

_RANK = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: (?P<rank>(?:[A-Z]{2}\d+ ?)+))?\]")
_PHASE_STARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^# pytest-sglang .*: pulling image "), "pulling image"),
    (re.compile(r"Load weight begin|Init torch distributed begin"), "loading weights"),
    (re.compile(r"Loading safetensors checkpoint shards:"), "loading weights"),
    (re.compile(r"KV Cache is allocated\.|Memory pool end\."), "allocating KV cache"),
    (re.compile(r"Capture .*?[Gg]raph begin"), "capturing CUDA graphs"),
    (re.compile(r"Allocating (?:\w+ hierarchical KV host pool|[\d.]+ GB host memory for hierarchical)"),
     "allocating host pools"),
    # Not max_total_num_tokens=: TP0 prints it before the host pools are allocated (reference §9).
    (re.compile(r"Engine startup timings|Started server process"), "starting HTTP server"),
    (re.compile(r"Uvicorn running on|Starting embedded Granian"), "warming up"),
    (re.compile(r"The server is fired up and ready to roll!"), "ready"),
)
_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_KV_TOKENS = re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)")
_MAX_TOKENS = re.compile(r"max_total_num_tokens=(\d+)(?P<rest>.*)$")
_KEY_VALUE = re.compile(r"(\w+)=([^,\s]+(?: GB)?)")
_HOST_POOL = re.compile(r"Allocating (?:(\w+) hierarchical KV host pool: (\d+) tokens, "
                        r"([\d.]+) GB host memory|([\d.]+) GB host memory for hierarchical KV cache)")
_UVICORN = re.compile(r"Uvicorn running on (\S+)")
#: The last line of a Python traceback (``ValueError: ...``): the cause behind a generic failure line.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt): \S")


@dataclass(frozen=True)
class PhaseSpan:
    name: str
    start_s: float
    end_s: float | None = None

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass(frozen=True)
class HostPool:
    """One ``Allocating ... host pool`` line: rank prefix (e.g. ``TP3``), pool kind, tokens, GB."""

    rank: str | None
    pool: str
    tokens: int | None
    gb: float


@dataclass
class StartupReport:
    """What the log said about the start: phases with times (seconds since launch) and capacity."""

    phases: list[PhaseSpan] = field(default_factory=lambda: [PhaseSpan("launching", 0.0)])
    shard_percent: int | None = None
    shards: tuple[int, int] | None = None
    kv_tokens: int | None = None
    max_total_num_tokens: int | None = None
    scheduler_line: str | None = None  # the rest of the max_total_num_tokens=... line
    scheduler_info: dict[str, str] = field(default_factory=dict)
    host_pools: list[HostPool] = field(default_factory=list)
    uvicorn_url: str | None = None
    ready_s: float | None = None
    fatal: list[FatalLine] = field(default_factory=list)
    last_exception: str | None = None  # e.g. "RuntimeError: ..." (the end of the last traceback)
    lines: int = 0

    @property
    def phase(self) -> str:
        return self.phases[-1].name

    @property
    def phase_since_s(self) -> float:
        return self.phases[-1].start_s

    @property
    def primary_fatal(self) -> FatalLine | None:
        return min(self.fatal, key=lambda f: f.priority) if self.fatal else None

    def host_pool_gb_total(self) -> float:
        return sum(p.gb for p in self.host_pools)


class PhaseTracker:
    """Feeds log lines into a :class:`StartupReport` (pure: no I/O, times given by the caller)."""

    def __init__(self) -> None:
        self.report = StartupReport()

    def feed(self, raw: str, t: float) -> bool:
        """Parse one line seen at ``t`` seconds since launch; True if the report changed visibly."""
        line = redaction.clean_text(raw.rstrip("\r\n").split("\r")[-1])
        self.report.lines += 1
        changed = self._phase(line, t)
        changed |= self._facts(line)
        self._fatal(line)
        if _EXCEPTION.match(line.strip()):
            self.report.last_exception = shorten(redaction.scrub(line.strip()))
        if self.report.phase == "ready" and self.report.ready_s is None:
            self.report.ready_s = t
        return changed

    def _phase(self, line: str, t: float) -> bool:
        for pattern, name in _PHASE_STARTS:
            if pattern.search(line):
                return self.advance(name, t)
        return False

    def advance(self, name: str, t: float) -> bool:
        """Move to phase ``name`` if it is later than the current one."""
        current = self.report.phases[-1]
        if PHASES.index(name) <= PHASES.index(current.name):
            return False
        self.report.phases[-1] = PhaseSpan(current.name, current.start_s, t)
        self.report.phases.append(PhaseSpan(name, t, t if name == "ready" else None))
        return True

    def _facts(self, line: str) -> bool:
        report = self.report
        if (m := _SHARDS.search(line)) is not None:
            changed = report.shard_percent != int(m[1])
            report.shard_percent, report.shards = int(m[1]), (int(m[2]), int(m[3]))
            return changed
        if (m := _KV_TOKENS.search(line)) is not None and report.kv_tokens is None:
            report.kv_tokens = int(m[1])
            return True
        if (m := _MAX_TOKENS.search(line)) is not None and report.max_total_num_tokens is None:
            report.max_total_num_tokens = int(m[1])
            report.scheduler_line = m["rest"].lstrip(", ")
            report.scheduler_info = dict(_KEY_VALUE.findall(m["rest"]))
            return True
        if (m := _HOST_POOL.search(line)) is not None:
            rank_match = _RANK.match(line)
            rank = (rank_match["rank"] or "").strip() or None if rank_match else None
            if m[1] is not None:
                report.host_pools.append(HostPool(rank, m[1], int(m[2]), float(m[3])))
            else:
                report.host_pools.append(HostPool(rank, "kv", None, float(m[4])))
            return True
        if (m := _UVICORN.search(line)) is not None:
            report.uvicorn_url = m[1]
            return True
        return False

    def _fatal(self, line: str) -> None:
        found = match_fatal(line)
        if found is not None:
            self.report.fatal.append(found)


class LogFollower:
    """Reads a growing log file incrementally (on demand or from a daemon thread)."""

    def __init__(self, path: Path, *, on_update: Callable[[StartupReport], None] | None = None,
                 started_at: float | None = None, interval_s: float = 0.1, heartbeat_s: float = 30.0) -> None:
        self.path = path
        self.tracker = PhaseTracker()
        self.on_update = on_update
        self.started_at = time.monotonic() if started_at is None else started_at
        self.interval_s = interval_s
        self.heartbeat_s = heartbeat_s
        self._last_update = time.monotonic()
        self._offset = 0
        self._partial = b""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def report(self) -> StartupReport:
        return self.tracker.report

    def mark_ready(self) -> None:
        """Readiness was proven by probes: close the open phase even if the log never said so."""
        with self._lock:
            report = self.tracker.report
            if report.phase != "ready":
                t = time.monotonic() - self.started_at
                self.tracker.advance("ready", t)
                report.ready_s = t

    def snapshot(self) -> StartupReport:
        with self._lock:
            return copy.deepcopy(self.tracker.report)

    def poll(self) -> bool:
        """Read what was appended since the last call; True if the report changed visibly."""
        changes: list[StartupReport] = []
        with self._lock:
            chunk = self._read()
            if not chunk:
                return False
            data = self._partial + chunk
            *complete, self._partial = data.split(b"\n")
            t = time.monotonic() - self.started_at
            changed = False
            for raw in complete:
                if self.tracker.feed(raw.decode("utf-8", "replace"), t):
                    changed = True
                    # One update per visible change, so a burst of lines still shows every phase.
                    if self.on_update is not None:
                        changes.append(copy.deepcopy(self.tracker.report))
        for state in changes:
            self._notify(state)
        return changed

    def _notify(self, state: StartupReport | None = None) -> None:
        self._last_update = time.monotonic()
        if self.on_update is None:
            return
        try:
            self.on_update(state if state is not None else self.snapshot())
        except Exception:  # a broken progress display must never fail the start
            self.on_update = None

    def _read(self) -> bytes:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return b""
        self._offset += len(chunk)
        return chunk

    def start(self) -> LogFollower:
        self._thread = threading.Thread(target=self._run, name="pytest-sglang-log", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                # A phase can last minutes without a line (weights of a 400 GB model): keep showing life.
                if not self.poll() and time.monotonic() - self._last_update >= self.heartbeat_s:
                    self._notify()
            except Exception:  # never kill the follower (the waiter polls too)
                continue

    def stop(self) -> StartupReport:
        """Stop the thread, read what is left (e.g. the fatal line of a crash) and return the report."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.poll()
        return self.snapshot()


def log_tail(path: Path | None, n: int = 30, *, max_line: int = 300) -> list[str]:
    """The last ``n`` lines of ``path``, scrubbed of secrets and shortened (``server_args=`` is ~20 kB)."""
    if path is None or n <= 0:
        return []
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()[-n:]
    # Server text: colours, cursor moves and control characters must not reach the terminal.
    return [shorten(redaction.scrub(redaction.clean_text(line.split("\r")[-1])), max_line) for line in lines]
