"""``--sim-host-alloc-scale F``: really allocate (and touch) F x the hicache host pools.

Real SGLang pins its hierarchical-cache host pools in host memory during startup; on a host (or in a
container) without enough memory the kernel's OOM killer ends the server. The simulator normally
only prints the allocation. With this flag it also allocates ``F x pool bytes x ranks`` of real,
touched memory (48 GB per rank at ``F=0.001`` is 48 MB), so a container memory limit produces a
real OOM kill, reproducibly and cheaply. The memory is held until the process exits.
"""

from __future__ import annotations

import argparse
import mmap
from collections.abc import Callable
from typing import Any, Protocol

_CHUNK = 1 << 20
#: The mappings stay referenced for the life of the process (SGLang's pools live as long as the server).
_held: list[mmap.mmap] = []


def _scale(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"--sim-host-alloc-scale must be >= 0, got {text!r}")
    return value


class _Adds(Protocol):
    """An ArgumentParser or one of its argument groups."""

    def add_argument(self, *names: str, **kwargs: Any) -> Any: ...


def add_host_alloc_argument(parser: _Adds) -> None:
    parser.add_argument(
        "--sim-host-alloc-scale",
        type=_scale,
        default=0.0,
        metavar="F",
        help="really allocate and touch F x the hicache host pool bytes per rank (0 = off; "
        "e.g. 0.001 turns 48 GB per rank into 48 MB), to trigger real OOM kills",
    )


def real_bytes(per_rank_bytes: int, ranks: int, scale: float) -> int:
    return max(0, int(per_rank_bytes * ranks * scale))


def allocate_host_pools(
    per_rank_bytes: int, ranks: int, scale: float, log: Callable[[str], None] | None = None
) -> int:
    """Allocate and touch the scaled pools (page by page, so the kernel really commits them).

    Returns the bytes allocated. Called during the simulator's hicache allocation phase; an OOM
    kill therefore happens in that phase, as with real SGLang.
    """
    total = real_bytes(per_rank_bytes, ranks, scale)
    if total == 0:
        return 0
    if log is not None:
        log(
            f"[sim] allocating {total / 2**20:.1f} MiB of real host memory for the hicache host pools "
            f"({ranks} rank(s) x {per_rank_bytes / 1e9:g} GB x scale {scale:g})"
        )
    pool = mmap.mmap(-1, total)
    filler = b"\x01" * _CHUNK
    for offset in range(0, total, _CHUNK):
        pool.write(filler[: min(_CHUNK, total - offset)])
    _held.append(pool)
    return total


def release_host_pools() -> None:
    """Drop the held pools (tests only; the simulator keeps them until it exits)."""
    while _held:
        _held.pop().close()
