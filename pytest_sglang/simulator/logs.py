"""SGLang-style log lines: ``[YYYY-MM-DD HH:MM:SS TP0] message`` on stderr, access log on stdout."""

from __future__ import annotations

import sys
import time

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


class Logger:
    def __init__(self, level: str = "info") -> None:
        self.level = _LEVELS.get(level.lower(), 20)

    @staticmethod
    def _stamp(prefix: str) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S") + prefix

    def _write(self, stream: object, text: str) -> None:
        stream.write(text)  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]

    def info(self, message: str, rank: str = "") -> None:
        """An INFO line; ``rank`` is the scheduler prefix (``TP0``...), empty for the API process."""
        if self.level <= 20:
            self._write(sys.stderr, f"[{self._stamp(' ' + rank if rank else '')}] {message}\n")

    def warning(self, message: str, rank: str = "") -> None:
        if self.level <= 30:
            self._write(sys.stderr, f"[{self._stamp(' ' + rank if rank else '')}] WARNING: {message}\n")

    def always(self, message: str, rank: str = "") -> None:
        """Errors and tracebacks: printed at every log level."""
        self._write(sys.stderr, f"[{self._stamp(' ' + rank if rank else '')}] {message}\n")

    def raw(self, text: str) -> None:
        self._write(sys.stderr, text)

    def uvicorn(self, message: str) -> None:
        if self.level <= 20:
            self._write(sys.stderr, f"[{self._stamp('')}] INFO:     {message}\n")

    def access(self, peer: str, method: str, path: str, status: int, reason: str) -> None:
        # uvicorn's access log goes to stdout.
        if self.level <= 20:
            self._write(
                sys.stdout,
                f'[{self._stamp("")}] INFO:     {peer} - "{method} {path} HTTP/1.1" {status} {reason}\n',
            )
