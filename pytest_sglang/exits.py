"""How a server ended: its exit status, and the fatal line of its log that explains it.

Plain data at the bottom of the layers: the errors carry them, the runners and the diagnosis make them.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

__all__ = ["ExitStatus", "FatalLine", "signal_name"]

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


@dataclass(frozen=True)
class FatalLine:
    line: str
    explanation: str
    priority: int

    def message(self) -> str:
        return f"Known fatal line: {self.line}\n  {self.explanation}"
