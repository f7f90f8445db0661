"""What a simulator launch will be, read before it starts: its ``--sim-*`` flags, simulated host and GPUs.

The plan CLI and the simulator runner's preflight read a launch's ``--sim-*`` flags with the simulator's
own parser (its abbreviations, types and choices), so a plan and the launch agree by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pytest_sglang.sglang import planner
from pytest_sglang.sglang.args import parse_launch_args, read_flags
from pytest_sglang.sglang.hostmem import HostMemory
from pytest_sglang.simulator.launch.cli import build_parser
from pytest_sglang.simulator.scheduling import profiles


@dataclass(frozen=True)
class SimulatorFlags:
    """The ``--sim-*`` flags a plan needs (None: not given), as the simulator's own parser reads them."""

    profile: str | None = None
    gpu_memory_gb: float | None = None
    host_memory_gb: float | None = None


def simulator_flags(argv: Sequence[str], *, source: str = "plan launch args") -> SimulatorFlags:
    """Read ``--sim-profile``/``--sim-*-memory-gb`` with the simulator's parser.

    Its abbreviations, types and choices apply; a value it would reject is a
    :class:`~pytest_sglang.errors.ConfigError` naming ``source``. Read once per argv (a plan and a
    preflight ask several times).
    """
    return _simulator_flags(tuple(argv), source)


@lru_cache(maxsize=32)
def _simulator_flags(argv: tuple[str, ...], source: str) -> SimulatorFlags:
    given = read_flags(argv, build_parser(), source=source, program="the simulator",
                       fix="use the simulator's flags (python -m pytest_sglang.simulator --help lists them)")
    profile, gpu, host = (given.get(k) for k in ("sim_profile", "sim_gpu_memory_gb", "sim_host_memory_gb"))
    return SimulatorFlags(profile=profile if isinstance(profile, str) else None,
                          gpu_memory_gb=float(gpu) if isinstance(gpu, (int, float)) else None,
                          host_memory_gb=float(host) if isinstance(host, (int, float)) else None)


def simulated_host_memory(flags: SimulatorFlags) -> HostMemory:
    """The host memory the simulator started with ``flags`` reports (its profile's, unless overridden)."""
    profile = profiles.get_profile(flags.profile or "tiny")
    hw = profiles.hardware(profile, flags.gpu_memory_gb, flags.host_memory_gb)
    return HostMemory(available_bytes=hw.host_available_bytes, total_bytes=hw.host_total_bytes,
                      source=f"simulated host of profile {profile.name}")


def profile_name(argv: Sequence[str]) -> str | None:
    """The simulator profile named in launch args (``--sim-profile NAME``), if any."""
    return simulator_flags(argv).profile


def hardware_from_profile(argv: Sequence[str]) -> planner.Hardware | None:
    """GPU and model facts of the simulator profile named by ``--sim-profile`` (None without one).

    Raises :class:`ConfigError` for an unknown profile name.
    """
    flags = simulator_flags(argv)
    if flags.profile is None:
        return None
    profile = profiles.get_profile(flags.profile)  # a known name: the simulator's parser checked it
    hw = profiles.hardware(profile, flags.gpu_memory_gb, None)
    args = parse_launch_args(argv, source="plan launch args")
    return planner.Hardware(
        gpu_memory_bytes=hw.gpu_memory_bytes, kv_bytes_per_token=profile.kv_bytes_per_token(args.tp_size),
        weight_bytes_per_rank=profile.weight_bytes_per_rank(args.tp_size, args.pp_size),
        default_mem_fraction=profile.default_mem_fraction_static, context_len=profile.context_length,
        source=f"simulator profile {profile.name}")


def simulated_host(argv: Sequence[str]) -> HostMemory | None:
    """The simulated host of ``--sim-profile`` (None without one), as the preflight sees it."""
    flags = simulator_flags(argv)
    return None if flags.profile is None else simulated_host_memory(flags)
