"""Host-memory arithmetic of SGLang's hierarchical cache (reference §11).

Shared by the simulator's own startup check, the plugin's launch preflight and
``python -m pytest_sglang plan``, so all three agree by construction.

Units: ``--hicache-size`` is **decimal GB (10**9 bytes) per rank**; SGLang's reserve is 10 GiB.
Every scheduler process (each TP rank of each PP stage of each DP replica) pins its own host pool.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only for annotations: hostmem stays import-light
    from pytest_sglang.sglang.args import LaunchArgs

GB = 10**9
GiB = 2**30
#: SGLang 0.5.23 ``HICACHE_HOST_MEMORY_RESERVE_BYTES``.
SGLANG_RESERVE_BYTES = 10 * GiB


def ranks_per_node(tp_size: int, pp_size: int, dp_size: int = 1, nnodes: int = 1) -> int:
    """Host pools pinned on one node: every TP rank x PP stage x DP replica allocates its own."""
    return max(1, (tp_size * pp_size * dp_size) // max(1, nnodes))


def sglang_ranks_per_host(tp_size: int, pp_size: int, nnodes: int = 1) -> int:
    """The divisor SGLang 0.5.23 uses for the per-rank budget (dp_size is *not* in it, §11)."""
    return max(1, (tp_size * pp_size) // max(1, nnodes))


def host_pool_tokens(size_bytes: int, bytes_per_token: int, page_size: int = 1) -> int:
    """Tokens of one rank's host pool for an explicit size: floor(bytes/token), whole pages + 1 page."""
    if bytes_per_token <= 0:
        raise ValueError(f"bytes_per_token must be > 0, got {bytes_per_token}")
    page = max(1, page_size)
    tokens = size_bytes // bytes_per_token
    return (tokens // page) * page + page


def ratio_pool_tokens(device_pool_tokens: int, ratio: float, page_size: int = 1) -> int:
    """Tokens of one rank's host pool sized by ``--hicache-ratio`` (plus the padding page)."""
    page = max(1, page_size)
    tokens = int(device_pool_tokens * ratio)
    return (tokens // page) * page + page


def sglang_budget_bytes(available_bytes: int, ranks_per_host: int) -> int:
    """SGLang's per-rank budget: floor((available - 10 GiB) / ranks_per_host)."""
    return (available_bytes - SGLANG_RESERVE_BYTES) // max(1, ranks_per_host)


def sglang_oom_message(requested_bytes: int, budget_bytes: int) -> str:
    """SGLang's own error text when a rank's host pool does not fit its budget."""
    return (
        f"Not enough host memory available. Requesting {requested_bytes / GB:.2f} GB but only have "
        f"{budget_bytes / GB:.2f} GB free. Please reduce the size of the hierarchical cache."
    )


def sglang_allocation_line(tokens: int, size_bytes: int, pool: str = "kv") -> str:
    """SGLang's log line for one rank's host pool."""
    return f"Allocating {pool} hierarchical KV host pool: {tokens} tokens, {size_bytes / GB:.2f} GB host memory."


@dataclass(frozen=True)
class HostMemory:
    """What this host can give: available bytes and where that figure came from."""

    available_bytes: int
    total_bytes: int | None
    source: str  # e.g. "MemAvailable of /proc/meminfo", "cgroup v2 memory.max", "simulated host"


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _meminfo(path: Path = Path("/proc/meminfo")) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _cgroup_headroom(root: Path = Path("/sys/fs/cgroup")) -> tuple[int, str] | None:
    """Bytes left under this process's cgroup limit (v2 memory.max, or v1 limit_in_bytes)."""
    limit = _read_int(root / "memory.max")
    if limit is not None:
        usage = _read_int(root / "memory.current") or 0
        return max(0, limit - usage), "cgroup v2 memory.max"
    limit = _read_int(root / "memory" / "memory.limit_in_bytes")
    # cgroup v1 reports "no limit" as a huge number near 2**63.
    if limit is not None and limit < 2**60:
        usage = _read_int(root / "memory" / "memory.usage_in_bytes") or 0
        return max(0, limit - usage), "cgroup v1 memory.limit_in_bytes"
    return None


def read_host_memory() -> HostMemory:
    """MemAvailable, bounded by any cgroup limit (as SGLang 0.5.23 does, §11)."""
    return read_host_memory_at(Path("/proc/meminfo"), Path("/sys/fs/cgroup"))


def read_host_memory_at(meminfo_path: Path, cgroup_root: Path) -> HostMemory:
    """:func:`read_host_memory` with explicit paths (tests use a fake /proc/meminfo and cgroup dir)."""
    info = _meminfo(meminfo_path)
    available = info.get("MemAvailable")
    total = info.get("MemTotal")
    if available is None:
        page = os.sysconf("SC_PAGE_SIZE")
        available = os.sysconf("SC_AVPHYS_PAGES") * page
        total = os.sysconf("SC_PHYS_PAGES") * page
    source = "MemAvailable of /proc/meminfo"
    cgroup = _cgroup_headroom(cgroup_root)
    if cgroup is not None and cgroup[0] < available:
        available, source = cgroup[0], cgroup[1]
    return HostMemory(available_bytes=available, total_bytes=total, source=source)


@dataclass(frozen=True)
class HicachePlan:
    """The host-memory verdict for one launch (what preflight and ``plan`` print)."""

    enabled: bool
    sizing: str  # "size" (--hicache-size), "ratio" (--hicache-ratio/default ratio), "disabled", "unknown"
    per_rank_bytes: int | None  # None when it cannot be estimated (ratio without a device-pool estimate)
    ranks: int
    tp_size: int
    pp_size: int
    dp_size: int
    available_bytes: int
    reserve_bytes: int
    memory_source: str

    @property
    def total_bytes(self) -> int | None:
        """The host pool bytes of all ranks on this host, or None when unknown."""
        return None if self.per_rank_bytes is None else self.per_rank_bytes * self.ranks

    @property
    def budget_bytes(self) -> int:
        """The host memory the pools may use: available minus the reserve."""
        return self.available_bytes - self.reserve_bytes

    @property
    def fits(self) -> bool | None:
        """True/False, or None when the size is unknown (nothing to check)."""
        if not self.enabled:
            return True
        total = self.total_bytes
        return None if total is None else total <= self.budget_bytes

    def explain(self) -> str:
        """One sentence with the arithmetic, e.g. the seed's refused launch."""
        if self.budget_bytes < 0:
            avail = (f"the reserve ({self.reserve_bytes / GB:.0f} GB) exceeds the {self.available_bytes / GB:.0f} GB "
                     "available, so nothing is left for host pools")
        else:
            avail = f"{self.budget_bytes / GB:.0f} GB are available (reserve {self.reserve_bytes / GB:.0f} GB)"
        if not self.enabled:
            return "hierarchical cache disabled: no host pools"
        if self.per_rank_bytes is None:
            return f"host pool size depends on the device pool (--hicache-ratio); {avail}"
        per = self.per_rank_bytes / GB
        total = (self.total_bytes or 0) / GB
        if self.sizing == "size":
            what, per_s, total_s = f"--hicache-size {per:g} is GB per TP rank", f"{per:g}", f"{total:g}"
        else:
            what, per_s, total_s = f"the ratio-sized host pool is {per:.1f} GB per rank", f"{per:.1f}", f"{total:.1f}"
        rank_word = "rank" if self.ranks == 1 else "ranks"
        verdict = "and" if self.fits else ("but" if self.budget_bytes < 0 else "but only")
        return f"{what}: {per_s} GB x {self.ranks} {rank_word} = {total_s} GB, {verdict} {avail}"


def plan_hicache(
    *,
    enabled: bool,
    hicache_size_gb: int,
    hicache_ratio: float | None,
    tp_size: int,
    pp_size: int,
    dp_size: int,
    nnodes: int,
    host: HostMemory,
    reserve_bytes: int,
    device_pool_bytes_per_rank: int | None = None,
) -> HicachePlan:
    """Size the host pools of one launch and compare them with this host."""
    ranks = ranks_per_node(tp_size, pp_size, dp_size, nnodes)
    per_rank: int | None
    if not enabled:
        sizing, per_rank = "disabled", 0
    elif hicache_size_gb > 0:
        sizing, per_rank = "size", hicache_size_gb * GB
    else:
        ratio = 2.0 if hicache_ratio is None else hicache_ratio
        sizing = "ratio"
        per_rank = None if device_pool_bytes_per_rank is None else int(device_pool_bytes_per_rank * ratio)
    return HicachePlan(
        enabled=enabled, sizing=sizing, per_rank_bytes=per_rank, ranks=ranks, tp_size=tp_size,
        pp_size=pp_size, dp_size=dp_size, available_bytes=host.available_bytes,
        reserve_bytes=reserve_bytes, memory_source=host.source,
    )


def estimate_max_total_num_tokens(
    *, gpu_memory_bytes: int, mem_fraction_static: float, weight_bytes_per_rank: int, kv_bytes_per_token: int,
    other_bytes_per_rank: int = 0,
) -> int:
    """SGLang's KV pool size: (GPU memory x mem_fraction_static - weights - other) / KV bytes per token."""
    rest = int(gpu_memory_bytes * mem_fraction_static) - weight_bytes_per_rank - other_bytes_per_rank
    return max(0, rest // kv_bytes_per_token)


def auto_hicache_ratio(
    *, available_bytes: int, ranks_per_host: int, fraction: float, device_pool_bytes_per_rank: int,
) -> float:
    """Return SGLang 0.5.23's auto-sized ratio (neither --hicache-size nor --hicache-ratio given, §11).

    min(2.0, floor((available - 10 GiB) / ranks_per_host) x fraction x 0.95 / device KV bytes).
    """
    budget = sglang_budget_bytes(available_bytes, ranks_per_host) * fraction
    return max(0.0, min(2.0, budget * 0.95 / max(1, device_pool_bytes_per_rank)))


def plan_for_launch(
    args: LaunchArgs, *, host: HostMemory, reserve_bytes: int, device_pool_bytes_per_rank: int | None = None,
) -> HicachePlan:
    """:func:`plan_hicache` for parsed launch args: the one call shared by the preflight and ``plan``.

    When neither ``--hicache-size`` nor ``--hicache-ratio`` is given, SGLang auto-sizes the ratio to
    the host (so the default never over-commits); that is reproduced when the device pool is known.
    """
    ratio = args.hicache_ratio
    if (args.enable_hierarchical_cache and args.hicache_size <= 0 and ratio is None
            and device_pool_bytes_per_rank is not None):
        ratio = auto_hicache_ratio(
            available_bytes=host.available_bytes,
            ranks_per_host=sglang_ranks_per_host(args.tp_size, args.pp_size, args.nnodes),
            fraction=args.hicache_host_memory_fraction, device_pool_bytes_per_rank=device_pool_bytes_per_rank)
    return plan_hicache(
        enabled=args.enable_hierarchical_cache, hicache_size_gb=args.hicache_size, hicache_ratio=ratio,
        tp_size=args.tp_size, pp_size=args.pp_size, dp_size=args.dp_size, nnodes=args.nnodes, host=host,
        reserve_bytes=reserve_bytes, device_pool_bytes_per_rank=device_pool_bytes_per_rank,
    )
