"""``--sim-fault KIND[:ARG]``: failure modes a test can ask the simulator to reproduce.

Durations in fault arguments are simulated seconds, multiplied by ``--sim-time-scale`` like
every other simulated duration.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

#: Startup phases in order (names accepted by crash-at / oom-kill-at / hang-at).
PHASES = ("weights", "kv_cache", "cuda_graph", "hicache", "uvicorn", "warmup")
SERVER_INFO_MODES = ("missing-field", "wrong-type", "not-json")
KINDS = (
    "crash-at",
    "oom-kill-at",
    "hang-at",
    "never-healthy",
    "unhealthy-after",
    "server-info",
    "drop-stream-after",
    "error-rate",
    "slow-health",
)


@dataclass(frozen=True)
class Faults:
    crash_at: frozenset[str] = frozenset()
    oom_kill_at: frozenset[str] = frozenset()
    hang_at: frozenset[str] = frozenset()
    never_healthy: bool = False
    unhealthy_after_s: float | None = None
    server_info: str | None = None
    drop_stream_after: int | None = None
    error_rate: float = 0.0
    slow_health_s: float = 0.0
    specs: tuple[str, ...] = field(default=())

    def at(self, phase: str) -> str | None:
        """The startup fault to trigger at ``phase`` (crash-at / oom-kill-at / hang-at) or None."""
        for kind, phases in (
            ("crash-at", self.crash_at),
            ("oom-kill-at", self.oom_kill_at),
            ("hang-at", self.hang_at),
        ):
            if phase in phases:
                return kind
        return None


def _bad(spec: str, why: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"--sim-fault {spec!r}: {why}")


def check_fault(spec: str) -> str:
    """argparse ``type=``: validate one ``KIND[:ARG]`` and return it unchanged."""
    kind, _, arg = spec.partition(":")
    if kind not in KINDS:
        raise _bad(spec, f"unknown fault kind {kind!r}; choose one of {', '.join(KINDS)}")
    if kind in ("crash-at", "oom-kill-at", "hang-at") and arg not in PHASES:
        raise _bad(spec, f"phase {arg!r} is not one of {', '.join(PHASES)} (e.g. {kind}:weights)")
    if kind == "server-info" and arg not in SERVER_INFO_MODES:
        raise _bad(spec, f"mode {arg!r} is not one of {', '.join(SERVER_INFO_MODES)}")
    if kind == "never-healthy" and arg:
        raise _bad(spec, "never-healthy takes no argument")
    if kind in ("unhealthy-after", "slow-health", "drop-stream-after", "error-rate"):
        try:
            value = float(arg)
        except ValueError:
            raise _bad(
                spec, f"{kind} needs a number, e.g. {kind}:{'0.1' if kind == 'error-rate' else '5'}"
            ) from None
        if value < 0 or (kind == "error-rate" and value > 1):
            raise _bad(spec, f"{kind} must be {'between 0 and 1' if kind == 'error-rate' else '>= 0'}")
    return spec


def parse_faults(specs: list[str] | tuple[str, ...]) -> Faults:
    crash: set[str] = set()
    oom: set[str] = set()
    hang: set[str] = set()
    values: dict[str, Any] = {}
    for spec in specs:
        kind, _, arg = check_fault(spec).partition(":")
        if kind == "crash-at":
            crash.add(arg)
        elif kind == "oom-kill-at":
            oom.add(arg)
        elif kind == "hang-at":
            hang.add(arg)
        elif kind == "never-healthy":
            values["never_healthy"] = True
        elif kind == "server-info":
            values["server_info"] = arg
        elif kind == "drop-stream-after":
            values["drop_stream_after"] = int(float(arg))
        elif kind == "unhealthy-after":
            values["unhealthy_after_s"] = float(arg)
        elif kind == "error-rate":
            values["error_rate"] = float(arg)
        else:
            values["slow_health_s"] = float(arg)
    return Faults(
        crash_at=frozenset(crash),
        oom_kill_at=frozenset(oom),
        hang_at=frozenset(hang),
        specs=tuple(specs),
        **values,
    )
