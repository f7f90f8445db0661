"""The load-shape keywords, declared once: every load gate's marker, :class:`LoadSpec` and the load CLI share them.

A load gate (``sglang_throughput``, ``sglang_fleet``, ``sglang_pd``, ``sglang_failover``) declares these keywords
by :func:`pytest_sglang.gates.load.throughput.load_keywords` with its own defaults and receives them as one
:class:`LoadShape`; :meth:`LoadShape.spec` is the load they describe. Each name but ``max_drain_s`` (the drain
check after a cancellation storm, judged by the gate) is a :class:`LoadSpec` field of the same meaning, and the
load command's flags are these names (``--request-timeout``/``--load-timeout`` for the two ``*_s``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

from pytest_sglang.loadgen.shape.spec import LoadSpec

__all__ = ["LOAD_SHAPE", "SPEC_FIELDS", "LoadShape"]


@dataclass(frozen=True)
class LoadShape:
    """The load-shape keywords of a load gate, as the marker gave them (None: not given)."""

    #: Maximum requests in flight; None = no cap.
    concurrency: int | None = None
    #: Poisson arrivals per second; None = all at once.
    request_rate: float | None = None
    requests: int = 64
    input_len: int = 1024
    output_len: int = 128
    api: str = "native"
    dataset: str = "random-ids"
    trace_time_scale: float = 1.0
    request_timeout_s: float | None = None
    load_timeout_s: float | None = None
    #: A cancellation storm (LoadSpec.cancel_rate); None = none (the gate judges no drain).
    cancel_rate: float | None = None
    cancel_after_tokens: int | None = None
    #: Seconds the server may take to give back what the cancelled requests held (judged by the gate).
    max_drain_s: float | None = None

    def spec(self, **more: int | float | str | bool | None) -> LoadSpec:
        """The load these keywords describe, validated (``more``: other LoadSpec fields, e.g. ``nodes``)."""
        values: dict[str, object] = {name: getattr(self, name) for name in SPEC_FIELDS}
        values["cancel_rate"] = self.cancel_rate or 0.0
        return _DEFAULT.replace(**cast("dict[str, int | float | str | bool | None]", {**values, **more}))

    def storm_wanted(self) -> bool:
        """Whether the gate judges a cancellation storm's drain (``cancel_rate`` or ``max_drain_s`` given)."""
        return bool(self.cancel_rate) or self.max_drain_s is not None


_DEFAULT = LoadSpec()
#: The load-shape keywords, in the order markers list them.
LOAD_SHAPE: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(LoadShape))
#: Those that are LoadSpec fields (all but the gate's drain check).
SPEC_FIELDS: tuple[str, ...] = tuple(name for name in LOAD_SHAPE if name != "max_drain_s")
