"""The part that lives on a Ray node: an actor owning one server process, and the leftover sweep.

:class:`NodeProcess` is a plain synchronous actor (``num_cpus=0``: the CPUs and GPUs are held by its
placement-group bundle). Ray runs a sync actor's tasks on the worker's main thread, and the server
is started from there with ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: Linux ties that signal to the
parent *thread*, so the server dies with the actor's main thread, i.e. whenever the actor dies
(``ray.kill``, a crash, or Ray reaping the actors of a driver that was SIGKILLed).

Every server started here carries three markers in its environment (inherited by what it starts):

* ``PYTEST_SGLANG_LAUNCH=<launch id>``: ``stop()`` also finds descendants that left the group;
* ``PYTEST_SGLANG_OWNER=<actor pid>:<run id>``: the local leftover reaper (``server/cleanup.py``)
  judges by that pid, and on this node the actor *is* the server's owner (a driver pid would name
  an unrelated process here);
* ``PYTEST_SGLANG_RAY_OWNER=<job id>:<run id>:<actor pid>:<actor start time>``: for :func:`sweep`.

The sweep rule: a marked process is an orphan when its owning actor process (same node, by
construction) no longer exists, judged by pid *and* start time so a recycled pid does not count as
alive. A live run's actors exist, so its servers are never touched; an actor that is gone cannot
stop its server any more, so nobody else will.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import ray

from pytest_sglang.server.runner import LAUNCH_ENV, OWNER_ENV, PopenProcess, kill_processes, marked_processes
from pytest_sglang.sglang.hostmem import HostMemory, read_host_memory
from pytest_sglang.sglang.masks import scrub_argv
from pytest_sglang.sockets import free_port

__all__ = ["RAY_OWNER_ENV", "NodeInfo", "NodeProcess", "Orphan", "find_orphans", "ray_owner_marker", "sweep"]

RAY_OWNER_ENV = "PYTEST_SGLANG_RAY_OWNER"
#: The most one ``read_log`` call returns (the driver asks again for the rest).
MAX_LOG_CHUNK = 1 << 20
_PR_SET_PDEATHSIG = 1
#: Start times are compared with this slack (psutil derives them from clock ticks since boot).
_START_TIME_SLACK_S = 0.05


def ray_owner_marker(job_id: str, run_id: str, pid: int, start_time: float) -> str:
    """The value of :data:`RAY_OWNER_ENV` for a server owned by process ``pid`` started at ``start_time``."""
    return f"{job_id}:{run_id}:{pid}:{start_time:.3f}"


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent thread exits.

    ``prctl`` is looked up before the fork: after it, the child only makes one libc call.
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _node_ip() -> str:
    # The address Ray registered for this node (what other nodes and the driver reach it at).
    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]  # untyped in Ray 2.60


@dataclass(frozen=True)
class NodeInfo:
    """Where an actor landed: its node and the Python that runs Ray workers there."""

    node_id: str
    address: str
    python: str


class NodeProcess:
    """Owns one server process on the node this actor was scheduled on (see the module docstring)."""

    def __init__(self, run_id: str) -> None:
        """``run_id`` names the driver's run in the markers (the driver's ``runner.RUN_ID``)."""
        self.run_id = run_id
        self.proc: PopenProcess | None = None
        self.log_dir = Path(tempfile.mkdtemp(prefix="pytest-sglang-ray-"))
        self.log_path: Path | None = None
        me = psutil.Process()
        self.owner_marker = ray_owner_marker(
            ray.get_runtime_context().get_job_id(), run_id, me.pid, me.create_time())

    @ray.method
    def node_info(self) -> NodeInfo:
        return NodeInfo(node_id=ray.get_runtime_context().get_node_id(),
                        address=_node_ip(), python=sys.executable)

    @ray.method
    def free_port(self) -> int:
        # Bound on every interface: the server listens on the node's address, not only on loopback.
        return free_port("0.0.0.0")

    @ray.method
    def host_memory(self) -> HostMemory:
        return read_host_memory()

    @ray.method
    def start(self, argv: list[str], env: dict[str, str], log_name: str) -> int:
        """Start ``argv`` with this node's environment plus ``env``; output to a log file here. The pid."""
        if self.proc is not None:
            raise RuntimeError("this actor already started its server")
        launch_id = env[LAUNCH_ENV]
        full = {**os.environ, **env, OWNER_ENV: f"{os.getpid()}:{self.run_id}", RAY_OWNER_ENV: self.owner_marker}
        self.log_path = self.log_dir / Path(log_name).name
        with open(self.log_path, "ab") as log:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=full, start_new_session=True, close_fds=True,
                                     preexec_fn=_die_with_parent(os.getpid()))
        self.proc = PopenProcess(popen, "", self.log_path, launch_id, argv)
        return popen.pid

    @ray.method
    def read_log(self, offset: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` (at most :data:`MAX_LOG_CHUNK`) of the log from ``offset``."""
        if self.log_path is None or not self.log_path.exists():
            return b""
        with open(self.log_path, "rb") as log:
            log.seek(offset)
            return log.read(max(0, min(max_bytes, MAX_LOG_CHUNK)))

    @ray.method
    def poll(self) -> int | None:
        """The return code (``-N``: killed by signal N), or None while it runs."""
        return None if self.proc is None else self.proc.popen.poll()

    @ray.method
    def stop(self, grace_s: float) -> int | None:
        """SIGTERM the group, wait ``grace_s``, SIGKILL; then the marked descendants (PopenProcess.stop)."""
        if self.proc is None:
            return None
        self.proc.stop(grace_s)
        return self.proc.popen.poll()

    @ray.method
    def kill(self, signum: int) -> None:
        if self.proc is not None:
            self.proc.kill(signum)

    @ray.method
    def close(self) -> None:
        """Stop the server if it still runs and delete the node-side log (the driver holds its copy)."""
        if self.proc is not None:
            self.proc.stop(2.0)
        shutil.rmtree(self.log_dir, ignore_errors=True)


@dataclass(frozen=True)
class Orphan:
    """A marked server process whose owning actor is gone."""

    pid: int
    job_id: str
    run_id: str
    owner_pid: int
    cmdline: str

    def describe(self) -> str:
        return (f"pid {self.pid} (left by Ray job {self.job_id}, run {self.run_id[:8]}, actor pid "
                f"{self.owner_pid}): {self.cmdline}")


def _owner_alive(pid: int, start_time: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - start_time) <= _START_TIME_SLACK_S
    except psutil.Error:
        return False


def find_orphans() -> list[tuple[psutil.Process, Orphan]]:
    """The processes on this node whose :data:`RAY_OWNER_ENV` names an actor that no longer exists."""
    found: list[tuple[psutil.Process, Orphan]] = []
    for proc, marker in marked_processes(RAY_OWNER_ENV):
        job_id, run_id, pid, start = [*marker.split(":"), "", "", ""][:4]
        try:
            owner_pid, started = int(pid), float(start)
        except ValueError:
            continue  # not our format: not ours to judge
        if _owner_alive(owner_pid, started):
            continue
        try:
            cmdline = " ".join(scrub_argv(proc.cmdline()))[:200]
        except psutil.Error:
            continue
        found.append((proc, Orphan(pid=proc.pid, job_id=job_id, run_id=run_id, owner_pid=owner_pid,
                                   cmdline=cmdline)))
    return found


def sweep(grace_s: float) -> list[str]:
    """Kill this node's orphans (SIGTERM, then SIGKILL after ``grace_s``); what was stopped, described."""
    orphans = find_orphans()
    kill_processes([proc for proc, _ in orphans], grace_s)
    return [f"stopped {orphan.describe()}" for _, orphan in orphans]


NodeProcessActor = ray.remote(num_cpus=0, max_restarts=0)(NodeProcess)
sweep_task = ray.remote(num_cpus=0, max_retries=0)(sweep)
