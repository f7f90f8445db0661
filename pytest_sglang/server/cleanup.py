"""Leave nothing behind: track live servers, stop them on every exit path, reap leftovers of dead runs.

* Servers started by this process are tracked; ``atexit`` and SIGTERM/SIGHUP handlers stop them
  (Ctrl-C raises KeyboardInterrupt, which unwinds through ``start_server``/fixtures and stops them
  too; the atexit hook is the safety net).
* A pytest killed by SIGKILL cannot clean up. Its servers still carry ``PYTEST_SGLANG_OWNER=<pid>:<run>``
  naming a pid that no longer exists: :func:`find_leftovers` finds them, :func:`kill_leftovers`
  stops them (``--sglang-kill`` and the start of each run). A process that wrote its title over that
  environment (smg) is found by the run's written record (``ledger``). Docker containers are found by label
  (``server/docker/engine.py``); the docker SDK is imported only if it is installed and asked.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from dataclasses import dataclass
from types import FrameType

import psutil

from pytest_sglang import redaction
from pytest_sglang.server import ledger
from pytest_sglang.server.base import DEFAULT_GRACE_S, RunningProcess
from pytest_sglang.server.runner import OWNER_ENV, RUN_ID, PopenProcess, kill_processes, marked_processes
from pytest_sglang.sglang import masks

#: The signals that stop our servers before this process dies (Windows has no SIGHUP).
_STOP_SIGNALS = (signal.SIGTERM,) if sys.platform == "win32" else (signal.SIGTERM, signal.SIGHUP)
_lock = threading.Lock()
_live: list[RunningProcess] = []
_installed = False
_reaped = False
_previous: dict[int, object] = {}


def track(proc: RunningProcess) -> None:
    """Remember ``proc`` so that it is stopped at exit if nobody stopped it."""
    install_handlers()
    with _lock:
        _live.append(proc)
    if (pid := _local_pid(proc)) is not None:
        ledger.record(pid, RUN_ID)


def untrack(proc: RunningProcess) -> None:
    with _lock:
        if proc in _live:
            _live.remove(proc)
    if (pid := _local_pid(proc)) is not None:
        ledger.forget(pid)


def _local_pid(proc: RunningProcess) -> int | None:
    """The pid the ledger records: a local process's (containers are found by label, Ray servers by actor)."""
    return proc.pid if isinstance(proc, PopenProcess) else None


def stop_all(grace_s: float = DEFAULT_GRACE_S) -> None:
    """Stop every tracked server (newest first)."""
    with _lock:
        procs = list(reversed(_live))
        _live.clear()
    for proc in procs:
        try:
            proc.stop(grace_s)
        except Exception:  # keep stopping the others
            pass
        if (pid := _local_pid(proc)) is not None:
            ledger.forget(pid)


def install_handlers() -> None:
    """Register the atexit hook and (main thread only) SIGTERM/SIGHUP handlers, once."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(stop_all, 5.0)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _STOP_SIGNALS:
        current = signal.getsignal(sig)
        # Respect handlers installed by someone else (they decide how to exit); chain to them.
        if current is signal.SIG_IGN:
            continue
        _previous[sig] = current
        signal.signal(sig, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    stop_all(5.0)
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    # Default action: die by the same signal, as if we had not intercepted it.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@dataclass(frozen=True)
class Leftover:
    """A server process whose owning pytest is gone."""

    pid: int
    owner_pid: int
    run_id: str
    cmdline: str

    def describe(self) -> str:
        return f"pid {self.pid} (left by pytest pid {self.owner_pid}, run {self.run_id[:8]}): {self.cmdline}"


def _owner_alive(owner_pid: int) -> bool:
    return owner_pid == os.getpid() or psutil.pid_exists(owner_pid)


def find_leftovers() -> list[Leftover]:
    """Marked processes whose owner pid no longer exists (this run's own servers are never listed)."""
    found: list[Leftover] = []
    for proc, marker in marked_processes(OWNER_ENV):
        owner, _, run_id = marker.partition(":")
        if not owner.isdigit() or _owner_alive(int(owner)):
            continue
        if (cmdline := _cmdline(proc.pid)) is not None:
            found.append(Leftover(pid=proc.pid, owner_pid=int(owner), run_id=run_id, cmdline=cmdline))
    seen = {item.pid for item in found}
    for entry in ledger.orphans():
        if entry.pid not in seen and (cmdline := _cmdline(entry.pid)) is not None:
            found.append(Leftover(pid=entry.pid, owner_pid=entry.owner_pid, run_id=entry.run_id, cmdline=cmdline))
    return found


def _cmdline(pid: int) -> str | None:
    """Its scrubbed command line (its name when the title blanked it), or None once it is gone."""
    try:
        proc = psutil.Process(pid)
        return " ".join(masks.scrub_argv(proc.cmdline())).strip()[:200] or proc.name()
    except psutil.Error:
        return None


def kill_leftovers(grace_s: float = 5.0, *, docker: bool = True) -> list[str]:
    """Stop every leftover server (processes, and containers when the docker runner exists)."""
    leftovers = find_leftovers()
    procs: list[psutil.Process] = []
    for item in leftovers:
        try:
            procs.append(psutil.Process(item.pid))
        except psutil.Error:
            continue
    kill_processes(procs, grace_s)
    stopped = [f"stopped {item.describe()}" for item in leftovers]
    return stopped + (_docker_leftovers() if docker else [])


def _docker_leftovers() -> list[str]:
    # The engine module imports the docker SDK only inside its functions, and finds nothing
    # (no error) when the SDK is not installed or no engine answers.
    from pytest_sglang.server.docker.runner import kill_leftover_containers

    try:
        return kill_leftover_containers()
    except Exception as exc:  # no docker engine must not break process cleanup
        return [f"could not check docker containers: {redaction.scrub(str(exc))}"]


def reap_leftovers_once(*, docker: bool = False) -> list[str]:
    """:func:`kill_leftovers` at most once per process (the start of a run)."""
    global _reaped
    if _reaped:
        return []
    _reaped = True
    return kill_leftovers(docker=docker)
