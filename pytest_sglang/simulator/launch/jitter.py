"""``--sim-launch-jitter CV``: each launch of the simulator runs at its own speed, as real GPUs do.

Two boots of one real SGLang configuration on one machine differ by about 2.8 % (CV of throughput
across boots; 0.2 % within a boot): clocks, memory placement and kernel autotuning land differently
each time. A simulator launch normally has no such variation, so a detector tuned on it would be
tuned on a quieter world than production. With a CV, each launch draws one speed factor (every
simulated prefill and decode time is multiplied by it) from a log-normal distribution with mean 1
and that coefficient of variation: log-normal, because a speed is positive and multiplicative.
``--sim-launch-seed N`` makes the draw reproducible (same seed, same factor); without a seed each
launch draws a fresh one.
"""

from __future__ import annotations

import argparse
import math
import random
from dataclasses import replace
from typing import Any, Protocol

from pytest_sglang.simulator.scheduling.profiles import Speed

#: Beyond this the "speed factor" is no longer a small boot-to-boot variation (a CV of 1 is 100 %).
MAX_CV = 0.5


class _Adds(Protocol):
    """An ArgumentParser or one of its argument groups."""

    def add_argument(self, *names: str, **kwargs: Any) -> Any: ...


def _cv(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}; give a coefficient of variation such as "
                                         "0.03 (3 %)") from None
    if not 0 <= value <= MAX_CV:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is outside 0 to {MAX_CV:g}; give a coefficient of variation "
                                         "such as 0.03 (3 %, what real GPUs show across boots), or 0 for off")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}; give a seed such as 7") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give a seed >= 0, such as 7")
    return value


def add_jitter_arguments(parser: _Adds) -> None:
    parser.add_argument("--sim-launch-jitter", type=_cv, default=0.0, metavar="CV",
                        help="each launch draws one speed factor with this coefficient of variation "
                        "(0.03: real GPUs across boots; 0 = off)")
    parser.add_argument("--sim-launch-seed", type=_seed, default=None, metavar="N",
                        help="seed of the launch's speed draw (same seed, same factor; default a fresh draw)")


def launch_factor(cv: float, seed: int | None) -> float:
    """The launch's duration factor: 1.0 when ``cv`` is 0, else a log-normal draw with mean 1 and CV ``cv``."""
    if cv == 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return random.Random(seed).lognormvariate(-sigma * sigma / 2, sigma)


def jittered(speed: Speed, factor: float) -> Speed:
    """``speed`` with every duration multiplied by ``factor`` (and the prefill rate divided by it)."""
    return replace(speed, prefill_tok_s=speed.prefill_tok_s / factor, prefill_base_s=speed.prefill_base_s * factor,
                   decode_base_s=speed.decode_base_s * factor, decode_per_req_s=speed.decode_per_req_s * factor)
