"""The shapes every runner shares: how a server ended, a started server, a runner.

Kept apart from the runners so that the process runner, the docker runner and the docker
container handle all import these, and none of them imports another (no import cycle).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.sglang.args import LaunchArgs
    from pytest_sglang.sglang.hostmem import HostMemory

__all__ = ["DEFAULT_GRACE_S", "ExitStatus", "Runner", "RunningProcess", "signal_name"]

#: Seconds between SIGTERM and SIGKILL when a server is stopped.
DEFAULT_GRACE_S = 10.0
#: POSIX's number, not ``signal.SIGKILL``: that name does not exist on Windows, where this still imports.
_SIGKILL = 9


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal N`` for numbers Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True)
class ExitStatus:
    """How a server process ended: an exit code, or the signal that killed it."""

    code: int | None = None
    signal: int | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        # Popen reports death by signal N as -N.
        return cls(signal=-returncode) if returncode < 0 else cls(code=returncode)

    def describe(self) -> str:
        if self.signal is None:
            return f"exited with code {self.code}"
        name = signal_name(self.signal)
        if self.signal == _SIGKILL:
            return f"killed by {name}: most likely the out-of-memory killer (check `dmesg -T | grep -i oom`)"
        return f"killed by {name}"

    def killed_by(self) -> int | None:
        """The signal that ended the server, if one did (containers override: exit code 128+N)."""
        return self.signal

    def fix(self) -> str | None:
        """A remedy specific to this ending (e.g. a container's OOM kill), or None: the caller decides."""
        return None


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


class Runner(Protocol):
    """Starts servers of one kind (``process``, ``simulator``, ``docker``)."""

    name: str

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        """Start the server of ``config`` listening on ``port``, its output appended to ``log_path``."""

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        """The host memory the server's hicache host pools will draw from (for preflight)."""

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """Bytes of one rank's device KV pool, if known before the start (what --hicache-ratio multiplies)."""
