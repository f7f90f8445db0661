"""``python -m pytest_sglang plan [options] -- <SGLang launch args>``: will this launch fit this host?

Exit status: 0 the launch fits, 1 it does not, 2 bad input (or not enough input to decide: the
message names the flags to add).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence

from pytest_sglang.errors import ConfigError
from pytest_sglang.sglang import hostmem, planner
from pytest_sglang.sglang.args import check_launch_flags, option_strings, parse_launch_args
from pytest_sglang.simulator.launch import plan as sim_plan
from pytest_sglang.simulator.launch.cli import build_parser as simulator_parser

_SIZE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_GB_UNITS = {"GB": 10**9, "GiB": 2**30, "TB": 10**12, "TiB": 2**40, "MB": 10**6, "MiB": 2**20}
_BYTE_UNITS = {"B": 1, "KB": 10**3, "KiB": 2**10, "MB": 10**6, "MiB": 2**20}


def _size(units: dict[str, int], default: str) -> Callable[[str], int]:
    """Argparse ``type=`` for a size with an optional unit (a bare number is in ``default``)."""
    by_lower = {name.lower(): factor for name, factor in units.items()}
    bare = next(iter(units.values()))

    def parse(text: str) -> int:
        m = _SIZE.match(text)
        if not m:
            raise argparse.ArgumentTypeError(f"invalid size {text!r} (examples: 449, 449GB, 418GiB)")
        number, unit = float(m.group(1)), m.group(2)
        if unit and unit.lower() not in by_lower:
            raise argparse.ArgumentTypeError(f"unknown unit {unit!r} in {text!r} (use {', '.join(units)}; "
                                             f"a bare number is {default})")
        if number < 0:
            raise argparse.ArgumentTypeError(f"{text!r} is negative: sizes must be >= 0")
        return int(number * (by_lower[unit.lower()] if unit else bare))

    return parse


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: give a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_sglang plan",
        description="Check the hierarchical cache's host memory (and estimate KV capacity) for SGLang launch "
                    "args, with the same arithmetic as the launch preflight. "
                    "Exit 0 fits, 1 does not, 2 bad input.",
        epilog="example: python -m pytest_sglang plan --host-memory-gb 418 --gpus 8 -- "
               "--tp-size 8 --enable-hierarchical-cache --hicache-size 48")
    gb, nbytes = _size(_GB_UNITS, "decimal GB"), _size(_BYTE_UNITS, "bytes")
    p.add_argument("--host-memory-gb", type=gb, metavar="N",
                   help="available host memory of the target machine (decimal GB; default: this host's "
                        "MemAvailable and cgroup limit, or the simulated host of --sim-profile)")
    p.add_argument("--gpus", type=_count, metavar="N", help="GPUs per node of the target machine")
    p.add_argument("--reserve-gb", type=gb, default=10 * hostmem.GB, metavar="N",
                   help="host memory kept free (decimal GB, default 10, as --sglang-host-memory-reserve-gb)")
    p.add_argument("--kv-bytes-per-token", type=nbytes, metavar="B", help="KV cache bytes per token per rank")
    p.add_argument("--gpu-memory-gb", type=gb, metavar="G", help="memory of one GPU (decimal GB)")
    p.add_argument("--weights-gb-per-rank", type=gb, metavar="W",
                   help="model weights held by one rank (decimal GB; default 0, an upper bound)")
    p.add_argument("--avg-request-tokens", type=_count, default=4000, metavar="T",
                   help="prompt + output tokens of a typical request, for the concurrency estimate "
                        "(default 4000)")
    p.add_argument("launch_args", nargs=argparse.REMAINDER, help="-- then the SGLang launch args")
    return p


def _hardware(ns: argparse.Namespace, argv: Sequence[str]) -> planner.Hardware:
    hw = sim_plan.hardware_from_profile(argv) or planner.Hardware()
    explicit = {"gpus": ns.gpus, "gpu_memory_bytes": ns.gpu_memory_gb,
                "kv_bytes_per_token": ns.kv_bytes_per_token, "weight_bytes_per_rank": ns.weights_gb_per_rank}
    given = {k: v for k, v in explicit.items() if v is not None}
    if not given:
        return hw
    source = "the given flags" if not hw.source else f"{hw.source} with the given flags"
    return planner.replace_hardware(hw, source=source, **given)


def _host(ns: argparse.Namespace, argv: Sequence[str]) -> hostmem.HostMemory:
    if ns.host_memory_gb is not None:
        return hostmem.HostMemory(available_bytes=ns.host_memory_gb, total_bytes=None,
                                  source="--host-memory-gb")
    return sim_plan.simulated_host(argv) or hostmem.read_host_memory()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))  # exits 2 on bad input
    launch = list(ns.launch_args)
    if launch[:1] == ["--"]:
        launch = launch[1:]
    if not launch:
        parser.error("give the SGLang launch args after --, e.g. -- --tp-size 8 --enable-hierarchical-cache "
                     "--hicache-size 48")
    try:
        args = parse_launch_args(launch, source="plan launch args")
        # A typo (--tp-szie) would plan for the default silently: refused, naming the flag meant.
        unknown = check_launch_flags(args, source="plan launch args",
                                     also_known=option_strings(simulator_parser()))
        hardware = _hardware(ns, launch)  # first: it validates --sim-profile
        host = _host(ns, launch)
    except ConfigError as exc:
        parser.error(str(exc))
    plan = planner.make_plan(args, host=host, hardware=hardware, reserve_bytes=ns.reserve_gb,
                             avg_request_tokens=ns.avg_request_tokens)
    for line in unknown:
        print(f"warning: {line}", file=sys.stderr)
    print("pytest-sglang plan for: " + " ".join(args.display()))  # secrets masked as SGLang reads them
    for line in planner.render(plan):
        print("  " + line)
    fits = plan.fits
    return 0 if fits else 1 if fits is False else 2
