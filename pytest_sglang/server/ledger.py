"""A written record of the processes a run started, readable after that run was SIGKILLed.

The owner marker in a child's environment (``PYTEST_SGLANG_OWNER``) is lost when the child writes its
process title over its environment block: smg does (``smg::router``; ``/proc/PID/environ`` then reads
blank), and a gateway left by a SIGKILLed pytest was never found. So each started process is also
written down here, with its start time and its owner's: a pid reused by an unrelated process, or an
owner pid reused by a new pytest, is never taken for ours.

One small JSON file per process under ``<tempdir>/pytest-sglang-<uid>/started/``; a file whose process
or owner is gone is deleted when read.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

_MAX_BYTES = 4096  # one record; anything larger is not ours


@dataclass(frozen=True)
class Entry:
    """A process started by the pytest ``owner_pid`` (each with its start time, seconds since the epoch)."""

    pid: int
    started: float
    owner_pid: int
    owner_started: float
    run_id: str


def directory() -> Path:
    # Per user: another user's records are not ours to read (launches need POSIX process groups anyway).
    return Path(tempfile.gettempdir()) / f"pytest-sglang-{os.getuid()}" / "started"


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _path(pid: int) -> Path:
    return directory() / f"{os.getpid()}-{pid}.json"


def record(pid: int, run_id: str) -> None:
    """Write down that this process started ``pid`` (best effort: cleanup by marker still applies)."""
    started, owner_started = _start_time(pid), _start_time(os.getpid())
    if started is None or owner_started is None:
        return
    entry = Entry(pid=pid, started=started, owner_pid=os.getpid(), owner_started=owner_started, run_id=run_id)
    try:
        directory().mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = _path(pid).with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(entry)))
        tmp.replace(_path(pid))  # never a half-written record
    except OSError:
        return


def forget(pid: int) -> None:
    _path(pid).unlink(missing_ok=True)


def _read(path: Path) -> Entry | None:
    try:
        with path.open("rb") as handle:
            data = json.loads(handle.read(_MAX_BYTES + 1)[:_MAX_BYTES])
        return Entry(pid=int(data["pid"]), started=float(data["started"]), owner_pid=int(data["owner_pid"]),
                     owner_started=float(data["owner_started"]), run_id=str(data["run_id"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _same(pid: int, started: float) -> bool:
    now = _start_time(pid)
    return now is not None and abs(now - started) < 1.0


def running() -> Iterator[Entry]:
    """Recorded processes that still run; records of ended ones (or unreadable ones) are deleted."""
    try:
        paths = sorted(directory().glob("*.json"))
    except OSError:
        return
    for path in paths:
        entry = _read(path)
        if entry is None or not _same(entry.pid, entry.started):
            path.unlink(missing_ok=True)
        else:
            yield entry


def orphans() -> Iterator[Entry]:
    """Recorded processes that still run while their owner is gone."""
    return (entry for entry in running() if not _same(entry.owner_pid, entry.owner_started))
