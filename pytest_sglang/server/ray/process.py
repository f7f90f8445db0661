"""The driver's handle of a server on a Ray node: :class:`RayProcess`, a ``RunningProcess``.

It owns a :class:`~.seat.Seat` (the reserved bundle and its node actor). The server's log lives on
its node; a daemon thread copies it, in bounded chunks, into the local ``log_path``, so the log
follower, the crash diagnosis and the log tail read a local file exactly as for a local process.
Every Ray call is bounded: :meth:`RayProcess.exit_status` waits at most :data:`EXIT_POLL_S` and
reports "still running" when the actor is merely slow. An actor that died means the node or the
actor was lost: the server died with it (``PR_SET_PDEATHSIG``), and the exit status
(:class:`NodeLost`) says which.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import ray
from ray import ObjectRef
from ray.exceptions import ActorUnavailableError, GetTimeoutError, RayActorError, RayError

from pytest_sglang.server.base import DEFAULT_GRACE_S, ExitStatus
from pytest_sglang.server.ray.cluster import ray_nodes
from pytest_sglang.server.ray.node_process import MAX_LOG_CHUNK
from pytest_sglang.server.ray.seat import CALL_TIMEOUT_S, Seat, actor_death_cause
from pytest_sglang.server.runner import scrub_log_file

__all__ = ["NodeLost", "RayProcess"]

#: The longest ``exit_status()`` waits for the actor's answer (then: "still running").
EXIT_POLL_S = 0.5
#: How often the log copier asks for new output when there was none.
FOLLOW_INTERVAL_S = 0.2
#: At most this long is spent copying the last output once the server has ended.
DRAIN_S = 5.0
#: ``stop`` waits the grace period plus this for the actor (it also SIGKILLs and sweeps descendants).
STOP_SLACK_S = 15.0


@dataclass(frozen=True)
class NodeLost(ExitStatus):
    """The server's node or its owning actor is gone, so is the server (``kind`` says which)."""

    kind: str = "actor-gone"  # "actor-gone" | "node-gone" | "disconnected"
    node: str = ""  # "10.0.0.3 (node abcd1234)"
    detail: str = ""

    def describe(self) -> str:
        if self.kind == "node-gone":
            return f"node {self.node} left the Ray cluster, and the server on it with it ({self.detail})"
        if self.kind == "disconnected":
            return (f"this run is no longer connected to Ray: the server on node {self.node} was stopped with "
                    "its actor")
        return (f"the Ray actor that owned the server on node {self.node} died ({self.detail}); the server was "
                "killed with it")

    def killed_by(self) -> int | None:
        return None  # not a signal the server chose or got alone: the OOM hint of a SIGKILL would mislead

    def fix(self) -> str | None:
        """Where to look: the cluster, not the server's log."""
        return (f"Fix: check the Ray cluster (`ray status`, `ray list actors`, and the raylet logs of node "
                f"{self.node}); do not ray.kill or stop pytest-sglang's actors while a run uses them")


class RayProcess:
    """A server on a Ray node, as the engine sees a process (see the module docstring)."""

    def __init__(self, seat: Seat, *, url: str, log_path: Path, pid: int, launch_id: str, argv: list[str]) -> None:
        """Start copying the node's log into ``log_path``."""
        self.seat = seat
        self.url = url
        self.log_path = log_path
        self.pid: int | None = pid
        self.launch_id = launch_id
        self.argv = argv
        self.node_id = seat.info.node_id
        self.node_address = seat.info.address
        self._offset = 0
        self._read: ObjectRef[bytes] | None = None  # a read still in flight (reused, never re-sent)
        self._poll: ObjectRef[int | None] | None = None
        self._exit: ExitStatus | None = None
        self._io = threading.Lock()
        self._state = threading.Lock()
        self._done = threading.Event()
        self._stopped = False
        self._copier = threading.Thread(target=self._follow, name=f"ray-log-{pid}", daemon=True)
        self._copier.start()

    # -- the log copy ----------------------------------------------------------------------------
    def _follow(self) -> None:
        while not self._done.is_set():
            got = self._pull(CALL_TIMEOUT_S)
            if got is None or (got == 0 and self._exit is not None):
                return
            if got == 0:
                self._done.wait(FOLLOW_INTERVAL_S)

    def _pull(self, timeout_s: float) -> int | None:
        """Copy one chunk; its size (0: nothing new or not yet answered), None once the actor is gone."""
        with self._io:
            if not ray.is_initialized():
                return None
            ref: ObjectRef[bytes] = self._read or self.seat.actor.read_log.remote(self._offset, MAX_LOG_CHUNK)
            try:
                data = ray.get(ref, timeout=timeout_s)
            except GetTimeoutError:
                self._read = ref
                return 0
            except ActorUnavailableError:  # transient (network, restarting): ask again later
                self._read = None
                return 0
            except RayActorError:
                self._read = None
                return None
            self._read = None
            if data:
                with self.log_path.open("ab") as sink:
                    sink.write(data)
                self._offset += len(data)
            return len(data)

    def _drain(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = self._pull(max(0.1, deadline - time.monotonic()))
            if not got:
                return

    # -- RunningProcess --------------------------------------------------------------------------
    def exit_status(self) -> ExitStatus | None:
        """None while the server runs (or the actor is slow to say); how it ended otherwise."""
        with self._state:
            if self._exit is not None:
                return self._exit
            if not ray.is_initialized():
                self._exit = NodeLost(kind="disconnected", node=self.seat.node)
                return self._exit
            ref: ObjectRef[int | None] = self._poll or self.seat.actor.poll.remote()
            try:
                code = ray.get(ref, timeout=EXIT_POLL_S)
            except GetTimeoutError:
                self._poll = ref
                return None
            except ActorUnavailableError:
                self._poll = None
                return None
            except RayActorError as exc:
                self._poll = None
                self._exit = self._lost(exc)
                return self._exit
            self._poll = None
            if code is None:
                return None
            self._drain(DRAIN_S)  # before saying it ended: the diagnosis reads the log's last lines
            self._exit = ExitStatus.from_returncode(code)
            return self._exit

    def _lost(self, exc: RayActorError) -> NodeLost:
        try:
            alive = any(entry.get("NodeID") == self.node_id and entry.get("Alive") for entry in ray_nodes())
        except RayError:
            alive = False
        return NodeLost(kind="actor-gone" if alive else "node-gone", node=self.seat.node,
                        detail=actor_death_cause(exc))

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop the server (SIGTERM, SIGKILL after ``grace_s``); idempotent.

        Then copy its last output, kill the actor and remove its placement group.
        """
        with self._state:
            if self._stopped:
                return self._exit
            self._stopped = True
        try:
            if not isinstance(self._exit, NodeLost) and ray.is_initialized():
                self._stop_remote(grace_s)
        finally:
            self._done.set()
            self._copier.join(timeout=2.0)
            self.seat.release()
            scrub_log_file(self.log_path)
        return self._exit

    def _stop_remote(self, grace_s: float) -> None:
        try:
            ref: ObjectRef[int | None] = self.seat.actor.stop.remote(grace_s)
            code = ray.get(ref, timeout=grace_s + STOP_SLACK_S)
            self._drain(DRAIN_S)
            if self._exit is None and code is not None:
                self._exit = ExitStatus.from_returncode(code)
            ray.get(self.seat.actor.close.remote(), timeout=CALL_TIMEOUT_S)
        except GetTimeoutError:
            pass  # killing the actor (release) kills the server with it
        except RayActorError as exc:
            if self._exit is None:
                self._exit = self._lost(exc)

    def kill(self, signum: int) -> None:
        """Send ``signum`` to the server's process group on its node (failover drills); no cleanup."""
        if self._exit is not None or not ray.is_initialized():
            return
        try:
            ray.get(self.seat.actor.kill.remote(signum), timeout=CALL_TIMEOUT_S)
        except (RayActorError, GetTimeoutError):
            pass  # gone already, or stuck: exit_status() says which

    def describe(self) -> str:
        status = self.exit_status()
        return f"node {self.seat.node}, pid {self.pid}, {'running' if status is None else status.describe()}"

    def listener_root_pid(self) -> int | None:
        """The pid whose tree holds the listening socket, when the node is this host (else None: not ours to see)."""
        if self.pid is None or not _is_local_address(self.node_address):
            return None
        return self.pid


def _is_local_address(address: str) -> bool:
    try:
        wanted = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            try:
                if ipaddress.ip_address(entry.address.split("%")[0]) == wanted:
                    return True
            except ValueError:
                continue
    return False
