"""The host-memory and KV-capacity plan of one SGLang launch (``python -m pytest_sglang plan``).

The host-pool verdict is :func:`pytest_sglang.sglang.hostmem.plan_for_launch`, the very call the launch
preflight makes, so the planner and the preflight agree by construction. Where the model and GPU are
known (a simulator profile, or ``--kv-bytes-per-token`` with ``--gpu-memory-gb``) the plan also
estimates ``max_total_num_tokens`` and the concurrency it gives, with SGLang's own formulas.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pytest_sglang.sglang import hostmem
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import GB, HicachePlan, HostMemory


@dataclass(frozen=True)
class Hardware:
    """What is known about the GPUs and the model (any field may be unknown)."""

    gpus: int | None = None
    gpu_memory_bytes: int | None = None
    kv_bytes_per_token: int | None = None
    weight_bytes_per_rank: int = 0
    #: The --mem-fraction-static SGLang would pick when none is given (None: not known).
    default_mem_fraction: float | None = None
    context_len: int | None = None
    source: str = ""


@dataclass(frozen=True)
class CapacityEstimate:
    """SGLang's KV pool for one launch: (GPU x fraction - weights) / KV bytes per token."""

    mem_fraction_static: float
    fraction_source: str
    gpu_memory_bytes: int
    weight_bytes_per_rank: int
    kv_bytes_per_token: int
    max_total_num_tokens: int
    avg_request_tokens: int
    source: str

    @property
    def concurrent_requests(self) -> int:
        return self.max_total_num_tokens // max(1, self.avg_request_tokens)

    @property
    def kv_bytes(self) -> int:
        return int(self.gpu_memory_bytes * self.mem_fraction_static) - self.weight_bytes_per_rank


@dataclass(frozen=True)
class Plan:
    """Everything ``plan`` prints, and its verdict."""

    args: LaunchArgs
    hicache: HicachePlan
    host: HostMemory
    hardware: Hardware
    capacity: CapacityEstimate | None

    @property
    def gpus_needed(self) -> int:
        return self.hicache.ranks

    @property
    def gpus_fit(self) -> bool:
        return self.hardware.gpus is None or self.gpus_needed <= self.hardware.gpus

    @property
    def fits(self) -> bool | None:
        """True/False, or None when the host pool size cannot be estimated."""
        if not self.gpus_fit:
            return False
        return self.hicache.fits

    @property
    def sglang_budget_per_rank(self) -> int:
        """SGLang's own per-rank check: (available - 10 GiB) / (tp x pp / nnodes), dp not counted."""
        ranks = hostmem.sglang_ranks_per_host(self.args.tp_size, self.args.pp_size, self.args.nnodes)
        return hostmem.sglang_budget_bytes(self.host.available_bytes, ranks)

    @property
    def largest_fitting_size_gb(self) -> int:
        """The largest --hicache-size (whole GB per rank) that passes both our budget and SGLang's check."""
        ours = self.hicache.budget_bytes // max(1, self.hicache.ranks)
        return max(0, min(ours, self.sglang_budget_per_rank) // GB)


def estimate_capacity(
    args: LaunchArgs, hardware: Hardware, avg_request_tokens: int,
) -> CapacityEstimate | None:
    """The KV pool estimate, or None when GPU memory or KV bytes per token are unknown."""
    if hardware.gpu_memory_bytes is None or hardware.kv_bytes_per_token is None:
        return None
    if args.mem_fraction_static is not None:
        fraction, fraction_source = args.mem_fraction_static, "--mem-fraction-static"
    elif hardware.default_mem_fraction is not None:
        fraction, fraction_source = hardware.default_mem_fraction, f"default of {hardware.source}"
    else:
        fraction, fraction_source = _sglang_default_fraction(hardware.gpu_memory_bytes), (
            "SGLang's default (GPU memory - reserved) / GPU memory, approximate")
    tokens = hostmem.estimate_max_total_num_tokens(
        gpu_memory_bytes=hardware.gpu_memory_bytes, mem_fraction_static=fraction,
        weight_bytes_per_rank=hardware.weight_bytes_per_rank, kv_bytes_per_token=hardware.kv_bytes_per_token)
    if args.max_total_tokens is not None:
        tokens = min(tokens, args.max_total_tokens)
    return CapacityEstimate(
        mem_fraction_static=fraction, fraction_source=fraction_source,
        gpu_memory_bytes=hardware.gpu_memory_bytes, weight_bytes_per_rank=hardware.weight_bytes_per_rank,
        kv_bytes_per_token=hardware.kv_bytes_per_token, max_total_num_tokens=tokens,
        avg_request_tokens=avg_request_tokens, source=hardware.source)


def _sglang_default_fraction(gpu_memory_bytes: int) -> float:
    # memory_hook.py reserves at least 10 GiB on GPUs above 60 GiB; smaller GPUs keep ~10-20 %.
    gib = gpu_memory_bytes / hostmem.GiB
    reserved = max(10.0, gib * 0.1) if gib > 60 else gib * 0.2
    return round((gib - reserved) / gib, 3)


def make_plan(
    args: LaunchArgs, *, host: HostMemory, hardware: Hardware, reserve_bytes: int,
    avg_request_tokens: int = 4000,
) -> Plan:
    capacity = estimate_capacity(args, hardware, avg_request_tokens)
    device_pool = None if capacity is None else capacity.max_total_num_tokens * capacity.kv_bytes_per_token
    hicache = hostmem.plan_for_launch(args, host=host, reserve_bytes=reserve_bytes,
                                      device_pool_bytes_per_rank=device_pool)
    return Plan(args=args, hicache=hicache, host=host, hardware=hardware, capacity=capacity)


def _gb(value: int) -> str:
    return f"{value / GB:,.1f} GB"


def render(plan: Plan) -> list[str]:
    """The lines ``plan`` prints: ranks, pools, memory, reserve, verdict, then the capacity estimate."""
    a, h = plan.args, plan.hicache
    lines = [f"ranks per node:        {h.ranks} (tp {a.tp_size} x pp {a.pp_size} x dp {a.dp_size}"
             f" / nnodes {a.nnodes}), each pins its own host pool"]
    if plan.hardware.gpus is not None:
        lines.append(f"GPUs on this node:     {plan.hardware.gpus} ({plan.hardware.source}); "
                     f"the launch needs {plan.gpus_needed}")
    lines += _pool_lines(plan)
    lines.append(f"host memory available: {_gb(plan.host.available_bytes)} ({plan.host.source})")
    lines.append(f"reserve:               {_gb(h.reserve_bytes)}, leaving {_gb(h.budget_bytes)} "
                 "for host pools")
    lines += _verdict_lines(plan)
    if plan.capacity is not None:
        lines += _capacity_lines(plan.capacity, a)
    return lines


def _pool_lines(plan: Plan) -> list[str]:
    h, a = plan.hicache, plan.args
    if not h.enabled:
        return ["host pool per rank:    none (--enable-hierarchical-cache not given)"]
    if h.per_rank_bytes is None:
        how = "--hicache-ratio x the device pool" if a.hicache_ratio is not None else "auto-sized by SGLang"
        return [f"host pool per rank:    unknown ({how}; give --kv-bytes-per-token and --gpu-memory-gb, "
                "or --hicache-size)"]
    how = (f"--hicache-size {a.hicache_size}, decimal GB per rank" if h.sizing == "size"
           else "--hicache-ratio x the estimated device pool" if a.hicache_ratio is not None
           else "SGLang's auto-sizing of the ratio")
    return [f"host pool per rank:    {_gb(h.per_rank_bytes)} ({how})",
            f"host pools in total:   {_gb(h.total_bytes or 0)} ({h.ranks} rank{'' if h.ranks == 1 else 's'})",
            f"SGLang's own check:    {_gb(h.per_rank_bytes)} requested per rank vs "
            f"{_gb(plan.sglang_budget_per_rank)} per-rank budget ((available - 10 GiB) / "
            f"{hostmem.sglang_ranks_per_host(a.tp_size, a.pp_size, a.nnodes)})"]


def _verdict_lines(plan: Plan) -> list[str]:
    lines = []
    if not plan.gpus_fit:
        lines.append(f"verdict:               DOES NOT FIT: the launch needs {plan.gpus_needed} GPUs per "
                     f"node (tp x pp x dp / nnodes) but this node has {plan.hardware.gpus}")
        lines.append("fix:                   lower --tp-size/--dp-size/--pp-size, or raise --nnodes")
        return lines
    fits = plan.hicache.fits
    if fits is None:
        return [f"verdict:               UNKNOWN: {plan.hicache.explain()}",
                "fix:                   give --kv-bytes-per-token and --gpu-memory-gb, "
                "or plan with --hicache-size"]
    word = "FITS" if fits else "DOES NOT FIT"
    lines.append(f"verdict:               {word}: {plan.hicache.explain()}")
    if not fits:
        lines.append(f"fix:                   --hicache-size {plan.largest_fitting_size_gb} or less "
                     f"(GB per rank), fewer ranks per node, or more host memory")
    return lines


def _capacity_lines(c: CapacityEstimate, a: LaunchArgs) -> list[str]:
    capped = "" if a.max_total_tokens is None else f", capped by --max-total-tokens {a.max_total_tokens:,}"
    return [
        f"KV capacity estimate:  ({_gb(c.gpu_memory_bytes)} GPU x {c.mem_fraction_static:g} "
        f"[{c.fraction_source}] - {_gb(c.weight_bytes_per_rank)} weights per rank) / "
        f"{c.kv_bytes_per_token:,} KV bytes per token",
        f"max_total_num_tokens:  ~{c.max_total_num_tokens:,} per DP rank{capped} ({c.source})",
        f"concurrency:           ~{c.concurrent_requests:,} requests of {c.avg_request_tokens:,} tokens "
        f"at once ({c.max_total_num_tokens:,} // {c.avg_request_tokens:,}); more with --mem-fraction-static, "
        "--max-total-tokens",
    ]


def replace_hardware(hw: Hardware, **changes: object) -> Hardware:
    return dataclasses.replace(hw, **changes)  # type: ignore[arg-type]
