"""The simulator's command line: SGLang's launch flags plus ``--sim-*`` flags.

It rejects what SGLang 0.5.23 rejects, the same way (exit 2, argparse's usage and message on
stderr): an unknown flag, a missing ``--model-path``, a malformed or out-of-choices value. A suite
that is green on the simulator must not fail on a real server because of its launch args.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pytest_sglang.sglang.args import LaunchArgs, add_sglang_arguments, namespace_to_launch_args
from pytest_sglang.simulator.config import SimOptions
from pytest_sglang.simulator.failures.faults import PHASES, check_fault
from pytest_sglang.simulator.images.vision import add_vision_argument
from pytest_sglang.simulator.launch.hostalloc import add_host_alloc_argument
from pytest_sglang.simulator.launch.jitter import add_jitter_arguments
from pytest_sglang.simulator.scheduling.profiles import PROFILES


def _vocab_size(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 10_000_000:
        raise argparse.ArgumentTypeError(f"must be a whole number of tokens from 1 to 10,000,000, got {text!r}")
    return int(text)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_sglang.simulator",
        description="SGLang 0.5.23 protocol simulator: takes sglang.launch_server's flags, needs no GPU.",
    )
    # Every 0.5.23 option from SGLang's own table (names, aliases, arity, types, choices).
    add_sglang_arguments(parser)
    sim = parser.add_argument_group("simulator (--sim-*)")
    sim.add_argument(
        "--sim-profile",
        default="tiny",
        choices=sorted(PROFILES),
        help="hardware + model profile (default tiny)",
    )
    sim.add_argument(
        "--sim-gpu-memory-gb",
        type=_positive,
        default=None,
        help="GPU memory per rank in GiB (overrides the profile)",
    )
    sim.add_argument(
        "--sim-host-memory-gb",
        type=_positive,
        default=None,
        help="host RAM in GB (overrides the profile; available = this - the profile's used RAM)",
    )
    sim.add_argument(
        "--sim-time-scale",
        type=_positive,
        default=1.0,
        help="multiply every simulated duration (startup phases, token timing) by this",
    )
    sim.add_argument("--sim-prefill-tok-s", type=_positive, default=None, help="prefill tokens per second")
    sim.add_argument(
        "--sim-decode-step-ms", type=_positive, default=None, help="decode step time at batch size 0 (ms)"
    )
    sim.add_argument(
        "--sim-decode-step-per-req-ms",
        type=float,
        default=None,
        help="extra decode step time per running request (ms)",
    )
    sim.add_argument(
        "--sim-fault",
        action="append",
        default=[],
        type=check_fault,
        metavar="KIND[:ARG]",
        help=f"inject a fault (repeatable); phases: {', '.join(PHASES)}",
    )
    sim.add_argument(
        "--sim-legacy-hicache-check",
        action="store_true",
        default=False,
        help="pre-0.5.23 host-memory check (each rank vs the whole machine): oversize pools OOM",
    )
    sim.add_argument(
        "--sim-trace", default=None, metavar="FILE", help="write per-request ground truth (JSON lines)"
    )
    sim.add_argument(
        "--sim-launch-counter",
        default=None,
        metavar="FILE",
        help="append one line per launch to FILE (lets tests count launches)",
    )
    sim.add_argument(
        "--sim-vocab-size",
        type=_vocab_size,
        default=None,
        metavar="N",
        help="the model's vocabulary size: token_ids_logprob is checked against it, and a prompt id >= N "
             "kills the server as 0.5.23 does (default: 32000, prompt ids not checked)",
    )
    add_host_alloc_argument(sim)
    add_jitter_arguments(sim)
    add_vision_argument(sim)
    return parser


def parse(argv: Sequence[str]) -> tuple[LaunchArgs, SimOptions]:
    """Parse ``argv`` like SGLang 0.5.23 does: exit 2 with argparse's usage and message on bad input."""
    parser = build_parser()
    ns, unknown = parser.parse_known_args(list(argv))
    # SGLang's parse_args checks required arguments before it reports unrecognized ones.
    if ns.model_path is None:
        parser.error("the following arguments are required: --model-path/--model")
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    values = vars(ns)
    sim = SimOptions(
        profile=values["sim_profile"],
        gpu_memory_gb=values["sim_gpu_memory_gb"],
        host_memory_gb=values["sim_host_memory_gb"],
        time_scale=values["sim_time_scale"],
        prefill_tok_s=values["sim_prefill_tok_s"],
        decode_step_ms=values["sim_decode_step_ms"],
        decode_step_per_req_ms=values["sim_decode_step_per_req_ms"],
        faults=tuple(values["sim_fault"]),
        legacy_hicache_check=values["sim_legacy_hicache_check"],
        trace=values["sim_trace"],
        launch_counter=values["sim_launch_counter"],
        host_alloc_scale=values["sim_host_alloc_scale"],
        launch_jitter=values["sim_launch_jitter"],
        launch_seed=values["sim_launch_seed"],
        vocab_size=values["sim_vocab_size"],
        vision=values["sim_vision"],
    )
    return namespace_to_launch_args(ns), sim
