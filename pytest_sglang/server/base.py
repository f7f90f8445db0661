"""The shapes every runner shares: a started server, a runner (and how a server ended, from :mod:`pytest_sglang.exits`).

Kept apart from the runners so that the process runner, the docker runner and the docker
container handle all import these, and none of them imports another (no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_sglang.exits import ExitStatus, signal_name

if TYPE_CHECKING:
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.sglang.args import LaunchArgs
    from pytest_sglang.sglang.hostmem import HostMemory

__all__ = ["DEFAULT_GRACE_S", "ExitStatus", "Runner", "RunningProcess", "nothing_reserved", "signal_name"]

#: Seconds between SIGTERM and SIGKILL when a server is stopped.
DEFAULT_GRACE_S = 10.0


class RunningProcess(Protocol):
    """A started server (process or container) as the engine sees it."""

    url: str
    log_path: Path
    pid: int | None

    def exit_status(self) -> ExitStatus | None:
        """None while running; how it ended otherwise (never blocks)."""

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop it and everything it started; idempotent."""

    def describe(self) -> str:
        """``pid 4242, running`` style text for messages."""

    def kill(self, signum: int) -> None:
        """Send ``signum`` to the server and every process it started (failover drills); no cleanup."""

    def listener_root_pid(self) -> int | None:
        """The pid on this host whose process tree must hold the listening socket, or None.

        None when no process here can (a remote Ray node, a container on a bridge network): the
        identity proof then reads ``/server_info`` instead.
        """


class Runner(Protocol):
    """Starts servers of one kind (``process``, ``simulator``, ``docker``)."""

    name: str

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        """Start the server of ``config`` listening on ``port``, its output appended to ``log_path``."""

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        """The host memory the server's hicache host pools will draw from (for preflight)."""

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """Bytes of one rank's device KV pool, if known before the start (what --hicache-ratio multiplies)."""

    def place_together(self, configs: Sequence[LaunchConfig], deadline: float) -> Callable[[], None]:
        """Reserve room for these servers (a fleet) as one placement before any of them starts.

        Returns what gives back the room none of them used. A runner that starts on this machine
        has nothing to reserve: it returns :func:`nothing_reserved`.
        """


def nothing_reserved() -> None:
    """What :meth:`Runner.place_together` returns when nothing was reserved."""
