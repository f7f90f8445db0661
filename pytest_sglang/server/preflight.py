"""Refuse a launch whose hierarchical-cache host pools cannot fit this host, before starting anything.

The seed's lesson: ``--hicache-size`` is GB **per TP rank**, so ``--tp 8 --hicache-size 300`` asks
for 2400 GB of pinned host memory. SGLang finds out minutes into the start (after loading weights)
and dies; the preflight says so in a second with the arithmetic (reference §11, ``hostmem``).
"""

from __future__ import annotations

from ..errors import PreflightError
from ..hostmem import GB, HicachePlan, plan_hicache
from ..sglang_args import LaunchArgs, parse_launch_args
from .config import LaunchConfig
from .runner import Runner


def plan_for(config: LaunchConfig, runner: Runner, launch_args: LaunchArgs | None = None) -> HicachePlan:
    """The host-memory plan of this launch against the runner's host (simulated host for the simulator)."""
    args = launch_args if launch_args is not None else parse_launch_args(config.args)
    host = runner.host_memory(config)
    return plan_hicache(
        enabled=args.enable_hierarchical_cache, hicache_size_gb=args.hicache_size,
        hicache_ratio=args.hicache_ratio,
        tp_size=args.tp_size, pp_size=args.pp_size, dp_size=args.dp_size, nnodes=args.nnodes, host=host,
        reserve_bytes=int(config.host_memory_reserve_gb * GB),
    )


def check(config: LaunchConfig, runner: Runner, launch_args: LaunchArgs | None = None) -> HicachePlan | None:
    """Raise :class:`PreflightError` if the host pools do not fit; None when preflight is off."""
    if not config.preflight:
        return None
    args = launch_args if launch_args is not None else parse_launch_args(config.args)
    if not args.enable_hierarchical_cache:
        return None  # no host pools: nothing to check (and no host-memory read needed)
    plan = plan_for(config, runner, args)
    if plan.fits is False:
        raise PreflightError(refusal_message(plan), fix=refusal_fix(plan))
    return plan


def refusal_message(plan: HicachePlan) -> str:
    return (f"{plan.explain()}\n"
            f"Host memory: {plan.available_bytes / GB:.0f} GB available per {plan.memory_source}; "
            f"{plan.ranks} rank(s) = tp {plan.tp_size} x pp {plan.pp_size} x dp {plan.dp_size}, each pins "
            f"its own host pool. Nothing was started.")


def refusal_fix(plan: HicachePlan) -> str:
    most = max(0, int(plan.budget_bytes // GB) // max(1, plan.ranks))
    hint = (f"lower --hicache-size to at most {most} (GB per TP rank) in the launch args" if most > 0
            else "drop --enable-hierarchical-cache or run on a host with more memory")
    return (f"{hint}, lower --sglang-host-memory-reserve-gb if the reserve is too cautious, or pass "
            f"--sglang-no-preflight to launch anyway.")
