"""Two servers compared with each other must be comparable: one check, read from both ``/server_info``.

A speedup over a reference server, a parity with a single server, an A/B of two launches: each compares
two servers, and means nothing when the other one serves another model, runs another SGLang, or holds
the weights in another layout or number format (a reference serving another model once gave
"speedup 1.655 x"). :func:`comparable` reads the fields that decide it (:data:`FIELDS`) from both
servers' ``/server_info`` and fails naming every field that differs. What the comparison varies on
purpose (``--speculative-*`` for a speedup, ``--disaggregation-*`` for a parity) is not among them.
A fleet's workers are compared with each other by :mod:`.consistency`, on a superset of these fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang.gates.base import Check, compare

__all__ = ["FIELDS", "MODEL_FIELDS", "comparable", "differences"]

#: What a server's answers depend on: the same SGLang, the same weights, the same number formats.
MODEL_FIELDS = ("version", "model_path", "revision", "dtype", "quantization", "kv_cache_dtype")
#: ... and what its speed depends on too: how the weights are split over the GPUs.
FIELDS = (*MODEL_FIELDS, "tp_size", "pp_size", "dp_size", "ep_size")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def differences(mine: Mapping[str, Any], theirs: Mapping[str, Any],
                fields: Sequence[str] = FIELDS) -> list[tuple[str, str, str]]:
    """``(field, mine, theirs)`` for each field whose ``/server_info`` values differ (absent is null)."""
    pairs = ((f, _text(mine.get(f)), _text(theirs.get(f))) for f in fields)
    return [(f, a, b) for f, a, b in pairs if a != b]


def comparable(gate: str, mine: Mapping[str, Any], theirs: Mapping[str, Any], *, here: str, there: str,
               fields: Sequence[str] = FIELDS, source: str = "", remedy: str = "") -> Check:
    """A check that ``theirs`` (``there``, e.g. "the reference") runs what ``mine`` (``here``) runs.

    ``measured`` is each differing field with both values, or "none"; a failure's remedy names the fields.
    """
    found = differences(mine, theirs, fields)
    shown = "; ".join(f"{f}: {a} on {here}, {b} on {there}" for f, a, b in found) or "none"
    fix = (f"launch {there} with the same SGLang version, model and {', '.join(f for f, _, _ in found)} as {here}"
           + (f"; {remedy}" if remedy else "")) if found else remedy
    where = f"both servers' GET /server_info ({', '.join(fields)})" + (f"; {source}" if source else "")
    return compare(gate, f"fields differing from {there}", shown, "==", "none", source=where, remedy=fix)
