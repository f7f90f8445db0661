"""``--sim-fault model-info-after:S``: ``/model_info`` answers 503 for the first S (simulated) seconds of service.

``/health`` is 200 all the while, so a gateway that registers the worker in that window cannot read its
model: sglang PR #37555 saw such workers listed under the model ``unknown``, healthy and without traffic,
for the life of the gateway (about 40 % of a fleet unused, every pod Ready).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable

REGISTRATION_KINDS = ("model-info-after",)


def check_registration_fault(spec: str) -> str:
    """Argparse ``type=``: ``model-info-after:SECONDS`` with SECONDS > 0."""
    kind, _, arg = spec.partition(":")
    try:
        value = float(arg)
    except ValueError:
        value = math.nan
    if kind not in REGISTRATION_KINDS or not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"--sim-fault {spec!r}: model-info-after needs seconds > 0 during which "
                                         "/model_info answers 503, e.g. model-info-after:30")
    return spec


def model_info_after(specs: Iterable[str]) -> float | None:
    """The seconds of ``model-info-after`` among ``specs`` (None: not asked)."""
    for spec in specs:
        kind, _, arg = spec.partition(":")
        if kind in REGISTRATION_KINDS:
            return float(arg)
    return None
