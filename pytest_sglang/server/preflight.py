"""Refuse a launch whose hierarchical-cache host pools cannot fit this host, before starting anything.

The seed's lesson: ``--hicache-size`` is GB **per TP rank**, so ``--tp 8 --hicache-size 300`` asks
for 2400 GB of pinned host memory. SGLang finds out minutes into the start (after loading weights)
and dies; the preflight says so in a second with the arithmetic (reference §11, ``hostmem``).

Ratio-sized pools (``--hicache-ratio``) are a multiple of the device KV pool, which only the
simulator runner knows before the start (from its profile); for a real server the verdict is
"cannot tell" and the launch goes ahead (:func:`unchecked_note` says so).
"""

from __future__ import annotations

import dataclasses

from pytest_sglang.errors import PreflightError
from pytest_sglang.server.base import Runner
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import GB, HicachePlan, plan_for_launch

_CONTAINER_LIMIT = "container memory limit"


def plan_for(config: LaunchConfig, runner: Runner, launch_args: LaunchArgs | None = None) -> HicachePlan:
    """The host-memory plan of this launch against the runner's host (simulated host for the simulator)."""
    args = launch_args if launch_args is not None else config.launch_args
    return plan_for_launch(
        args, host=runner.host_memory(config), reserve_bytes=int(config.host_memory_reserve_gb * GB),
        device_pool_bytes_per_rank=device_pool_estimate(config, runner, args),
    )


def device_pool_estimate(config: LaunchConfig, runner: Runner, args: LaunchArgs) -> int | None:
    """The runner's device-pool estimate per rank; None for runners that cannot know it before the start."""
    return runner.device_pool_bytes_per_rank(config, args)


def check(config: LaunchConfig, runner: Runner, launch_args: LaunchArgs | None = None, *,
          workers: int = 1) -> HicachePlan | None:
    """Raise :class:`PreflightError` if the host pools do not fit; None when preflight is off.

    ``workers``: identical servers launched on this host (a fleet); every one pins its own pools.
    """
    if not config.preflight:
        return None
    args = launch_args if launch_args is not None else config.launch_args
    if not args.enable_hierarchical_cache:
        return None  # no host pools: nothing to check (and no host-memory read needed)
    plan = plan_for(config, runner, args)
    if workers > 1:  # the ranks of every worker on this host draw on the same host memory
        plan = dataclasses.replace(plan, ranks=plan.ranks * workers)
    if plan.fits is False:
        message = refusal_message(plan)
        if workers > 1:
            message += f" The {plan.ranks} ranks are {workers} fleet workers x {plan.ranks // workers} each."
        raise PreflightError(message, fix=refusal_fix(plan, args.hicache_ratio))
    return plan


def unchecked_note(plan: HicachePlan | None) -> str | None:
    """What to tell the user when the preflight could not decide (ratio-sized pools of a real server)."""
    if plan is None or plan.fits is not None:
        return None
    return (f"preflight: host pools not checked before the start ({plan.explain()}); "
            f"the server checks them itself after loading weights")


def refusal_message(plan: HicachePlan) -> str:
    return (f"{plan.explain()}\n"
            f"Host memory: {plan.available_bytes / GB:.0f} GB available per {plan.memory_source}; "
            f"{plan.ranks} rank(s) = tp {plan.tp_size} x pp {plan.pp_size} x dp {plan.dp_size}, each pins "
            f"its own host pool. Nothing was started.")


def refusal_fix(plan: HicachePlan, ratio: float | None = None) -> str:
    """The Fix line; ``ratio`` is the ``--hicache-ratio`` of a ratio-sized plan (to say how far to lower it)."""
    most = max(0, int(plan.budget_bytes // GB) // max(1, plan.ranks))
    if most <= 0:
        hint = "drop --enable-hierarchical-cache or run on a host with more memory"
    elif plan.sizing == "ratio" and ratio is not None and plan.per_rank_bytes:
        fitting = ratio * (plan.budget_bytes / plan.ranks) / plan.per_rank_bytes
        hint = (f"lower --hicache-ratio {ratio:g} to at most {int(fitting * 100) / 100:g} or set "
                f"--hicache-size to at most {most} (GB per TP rank) in the launch args")
    else:
        hint = f"lower --hicache-size to at most {most} (GB per TP rank) in the launch args"
    if plan.memory_source.startswith(_CONTAINER_LIMIT):
        hint += ", raise --sglang-docker-memory (or leave it unset)"
    return (f"{hint}, lower --sglang-host-memory-reserve-gb if the reserve is too cautious, or pass "
            f"--sglang-no-preflight to launch anyway.")
