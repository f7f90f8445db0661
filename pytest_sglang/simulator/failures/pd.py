"""The prefill-decode ``--sim-fault`` kinds: what goes wrong between a prefill and a decode worker.

``pd-transfer-failure:RATE``      that share of this worker's KV transfers fails (as
                                  ``SGLANG_TEST_DISAGG_FAILURE_PROB``, also honoured)
``pd-slow-transfer:FACTOR``       transfer time per token x FACTOR (the silent TCP fallback)
``pd-kv-checksum-mismatch[:RATE]`` that share (default all) of the KV a decode worker receives is
                                  corrupted: with ``--disaggregation-enable-kv-checksum`` the request is
                                  aborted ("KV checksum mismatch"); without it the output is silently wrong
``pd-lost-peer``                  the peer is unreachable: a decode worker cannot reach any prefill
                                  bootstrap server; a prefill worker never opens its bootstrap port

Kept apart from :mod:`.faults` (which only routes these kinds here) so the PD model stays in the
``pd*`` modules.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from dataclasses import dataclass

PD_KINDS = ("pd-transfer-failure", "pd-slow-transfer", "pd-kv-checksum-mismatch", "pd-lost-peer")


@dataclass(frozen=True)
class PDFaults:
    transfer_failure: float = 0.0
    slow_transfer: float = 1.0
    checksum_mismatch: float = 0.0
    lost_peer: bool = False


def _bad(spec: str, why: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"--sim-fault {spec!r}: {why}")


def _number(spec: str, kind: str, arg: str, example: str) -> float:
    try:
        value = float(arg)
    except ValueError:
        raise _bad(spec, f"{kind} needs a number, e.g. {kind}:{example}") from None
    if not math.isfinite(value):
        raise _bad(spec, f"{kind} needs a finite number, e.g. {kind}:{example}")
    return value


def check_pd_fault(spec: str) -> str:
    """Argparse ``type=`` for the PD kinds: validate ``KIND[:ARG]`` and return it unchanged."""
    kind, sep, arg = spec.partition(":")
    if kind == "pd-lost-peer":
        if sep:
            raise _bad(spec, "pd-lost-peer takes no argument (e.g. --sim-fault pd-lost-peer)")
    elif kind == "pd-slow-transfer":
        if _number(spec, kind, arg, "10") < 1:
            raise _bad(spec, "pd-slow-transfer must be >= 1 (the factor transfer time is multiplied by)")
    elif kind in ("pd-transfer-failure", "pd-kv-checksum-mismatch"):
        if kind == "pd-kv-checksum-mismatch" and not sep:
            return spec
        value = _number(spec, kind, arg, "0.1")
        if not 0 <= value <= 1:
            raise _bad(spec, f"{kind} must be between 0 and 1")
    else:
        raise _bad(spec, f"unknown PD fault kind {kind!r}; choose one of {', '.join(PD_KINDS)}")
    return spec


def parse_pd_faults(specs: Iterable[str]) -> PDFaults:
    """The PD faults among all ``--sim-fault`` specs (other kinds are ignored)."""
    values = PDFaults()
    for spec in specs:
        kind, sep, arg = spec.partition(":")
        if kind not in PD_KINDS:
            continue
        check_pd_fault(spec)
        if kind == "pd-lost-peer":
            values = PDFaults(values.transfer_failure, values.slow_transfer, values.checksum_mismatch, True)
        elif kind == "pd-slow-transfer":
            values = PDFaults(values.transfer_failure, float(arg), values.checksum_mismatch, values.lost_peer)
        elif kind == "pd-transfer-failure":
            values = PDFaults(float(arg), values.slow_transfer, values.checksum_mismatch, values.lost_peer)
        else:
            rate = float(arg) if sep else 1.0
            values = PDFaults(values.transfer_failure, values.slow_transfer, rate, values.lost_peer)
    return values
