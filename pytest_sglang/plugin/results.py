"""What a gate-marked test measured: :class:`GateResults` (the ``sglang_gate`` fixture) and recording.

Every outcome and load result is recorded in ``item.user_properties``, which survive xdist and land
in JUnit XML; the report session reads them back on the controller.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin.consent import STRICT
from pytest_sglang.plugin.keys import SETTINGS_KEY

if TYPE_CHECKING:
    # The hooks import this module for RESULTS_KEY when the plugin loads: the gates load only when one records.
    from pytest_sglang.gates.base import GateOutcome
    from pytest_sglang.loadgen import LoadResult

__all__ = ["RESULTS_KEY", "GateResults", "record", "results_of"]


@dataclass
class GateResults:
    """What the ``sglang_gate`` fixture returns: this test's outcomes and load results.

    ``outcomes`` holds what the gate markers measured in the test's setup (and what
    :meth:`record` added); ``loads`` every load run by the markers or ``sglang_load``.
    ``sglang_gate["throughput"]`` is one gate's outcome.
    """

    outcomes: list[GateOutcome] = field(default_factory=list)
    loads: list[LoadResult] = field(default_factory=list)
    item: pytest.Item | None = field(default=None, repr=False, compare=False)

    def record(self, outcome: GateOutcome) -> GateOutcome:
        """Record a gate outcome built in the test body (e.g. an A/B comparison).

        It is stored like a marker's outcome (gate summary table, JSON/JUnit reports) and judged
        the same way: an unmet check fails the test after its body. Returns ``outcome``.
        """
        from pytest_sglang.gates.base import GateOutcome

        if not isinstance(outcome, GateOutcome):
            raise TypeError(f"sglang_gate.record(outcome) takes a pytest_sglang.GateOutcome, got "
                            f"{type(outcome).__name__}; build one with GateOutcome(gate, [compare(...)])")
        if self.item is None:
            raise RuntimeError("sglang_gate.record() needs the sglang_gate fixture of a running test")
        record(self.item, outcome)
        return outcome

    def __repr__(self) -> str:
        """One line per test: its outcomes (verdicts only) and its loads (key figures)."""
        outcomes = ", ".join(f"{o.gate} {'ok' if o.passed else 'FAILED'}" for o in self.outcomes) or "none"
        loads = "; ".join(f"{r.completed} ok at {r.output_throughput:,.1f} tok/s" for r in self.loads[-3:])
        more = f" (last 3 of {len(self.loads)})" if len(self.loads) > 3 else ""
        return f"<GateResults outcomes: {outcomes}; loads: {loads or 'none'}{more}>"

    def __getitem__(self, gate: str) -> GateOutcome:
        """The outcome of ``gate`` ("throughput" or "sglang_throughput")."""
        name = gate.removeprefix("sglang_")
        for outcome in self.outcomes:
            if outcome.gate == name:
                return outcome
        raise KeyError(f"no {gate!r} outcome in this test; measured: {[o.gate for o in self.outcomes]}")

    @property
    def load(self) -> LoadResult | None:
        """The last load result (a LoadResult), or None."""
        return self.loads[-1] if self.loads else None


#: On an item: what its gate markers measured and ``sglang_gate.record()`` added.
RESULTS_KEY: pytest.StashKey[GateResults] = pytest.StashKey()


def results_of(item: pytest.Item) -> GateResults:
    """The :class:`GateResults` of ``item``, created on first use."""
    results = item.stash.get(RESULTS_KEY, None)
    if results is None:
        results = item.stash[RESULTS_KEY] = GateResults(item=item)
    return results


def mask_properties(properties: Sequence[tuple[str, object]]) -> list[tuple[str, object]]:
    """``user_properties`` with names and text values through :func:`redaction.mask`.

    The JUnit writer, xdist and the JSON/HTML reports all read them; a worker URL's password once
    reached JUnit property names.
    """
    return [(redaction.mask(str(name)), redaction.mask(value) if isinstance(value, str) else value)
            for name, value in properties]


def _strict(item: pytest.Item) -> bool:
    settings = item.config.stash.get(SETTINGS_KEY, None)
    return settings is not None and settings.sglang_strict


def record(item: pytest.Item, outcome: GateOutcome) -> GateOutcome:
    """Keep ``outcome`` for the judgement after the body and in ``user_properties`` for the reports.

    Returns the outcome kept: under ``--sglang-strict`` its ``unchecked`` lines are failed checks too.
    """
    from pytest_sglang.sglang import masks  # the flag tables load only when a gate records (plugin load stays cheap)

    if outcome.unchecked and _strict(item):  # what could not be checked fails, as consent does (plugin/consent.py)
        outcome = outcome.strict(f"make it checkable (the line says why), or drop {STRICT} to only report it")
    results_of(item).outcomes.append(outcome)
    item.user_properties.append(("sglang_outcome", json.dumps(masks.scrub_payload(outcome.to_dict()))))
    for check in outcome.checks:
        measured = check.measured
        item.user_properties.append((f"sglang.{outcome.gate}.{check.metric}",
                                     redaction.scrub(measured) if isinstance(measured, str) else measured))
    return outcome
