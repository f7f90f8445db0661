"""What this process sent to SGLang servers: requests, tokens and cache flushes (for the run's summary).

Counted where the client sends them (the load generator, the acceptance checks' HTTP helper, each
``/flush_cache`` a gate or check posts), so the summary can say what a run did to an attached server.
Process-wide: under xdist each worker counts its own.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

__all__ = ["Tally", "note_flush", "note_requests", "reset", "snapshot"]


@dataclass(frozen=True)
class Tally:
    """Requests sent (load requests with their tokens, and single requests of checks), flushes posted."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    flushes: int = 0

    def __bool__(self) -> bool:
        return bool(self.requests or self.flushes)

    def describe(self) -> str:
        """``1,024 requests (131,072 input + 16,384 output tokens of load), 2 cache flushes``."""
        tokens = (f" ({self.input_tokens:,} input + {self.output_tokens:,} output tokens of load)"
                  if self.input_tokens or self.output_tokens else "")
        return f"{self.requests:,} requests{tokens}, {self.flushes:,} cache flush{'es' if self.flushes != 1 else ''}"


_lock = threading.Lock()
_tally = Tally()


def note_requests(count: int, input_tokens: int = 0, output_tokens: int = 0) -> None:
    """Count ``count`` requests sent (and, for loads, the tokens the server reported for them)."""
    global _tally
    with _lock:
        _tally = replace(_tally, requests=_tally.requests + count, input_tokens=_tally.input_tokens + input_tokens,
                         output_tokens=_tally.output_tokens + output_tokens)


def note_flush(count: int = 1) -> None:
    """Count ``POST /flush_cache`` requests sent."""
    global _tally
    with _lock:
        _tally = replace(_tally, flushes=_tally.flushes + count)


def snapshot() -> Tally:
    return _tally


def reset() -> None:
    global _tally
    with _lock:
        _tally = Tally()
