"""Which of a test's loads ``--sglang-baseline`` compares: the ones written to be compared.

A load a gate runs for its own check (the short load of ``sglang_probes``, a soak's hold, a failover's
kill, a speculative reference) is not a performance measurement: compared, its noise turned an unchanged
fleet red 2 times in 3. By default the comparison keeps the loads of the gates that measure
(:attr:`.MarkerGate.measures`: ``sglang_throughput``, ``sglang_slo``) and the test's own ``sglang_load``
calls, and every load it leaves out is a visible note saying why and how to opt in.
``@pytest.mark.sglang_baseline(compare=...)`` changes that per test: ``"all"`` compares every load,
``False`` compares nothing of the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pytest_sglang.gates.registry import GATES_BY_MARKER

MARKER = "sglang_baseline"
DOCS_URL = "https://github.com/pytest-sglang/pytest-sglang/blob/main/docs/reports.md#what-is-compared"
#: What each ``compare=`` value means (the marker's line in ``pytest --markers``).
SUMMARY = ("sglang_baseline(compare=True): what --sglang-baseline compares of this test: True (default) its "
           "measurement loads (sglang_throughput, sglang_slo, its own sglang_load calls) and gate figures, \"all\" "
           "also the loads other gates run for their own check (sglang_probes, sglang_soak, ...), False nothing.")
Scope = Literal["measurements", "all", "none"]
_SCOPES: dict[object, Scope] = {True: "measurements", "all": "all", False: "none"}
_FIX = 'write @pytest.mark.sglang_baseline(compare=True), compare="all" or compare=False'


def marker_problem(args: Sequence[object], kwargs: Mapping[str, object]) -> str | None:
    """Why ``@pytest.mark.sglang_baseline(*args, **kwargs)`` is not valid (None when it is)."""
    if args:
        return f"@pytest.mark.{MARKER} takes the keyword compare=, not positional arguments {tuple(args)!r}: {_FIX}"
    unknown = [k for k in kwargs if k != "compare"]
    if unknown:
        return f"@pytest.mark.{MARKER} has no keyword {unknown[0]!r} (its one keyword is compare=): {_FIX}"
    if "compare" not in kwargs:
        return f"@pytest.mark.{MARKER} without compare= changes nothing: {_FIX}"
    value = kwargs["compare"]
    # bool, not int: 1 and 0 are not True and False here.
    if not (isinstance(value, bool) or value == "all"):
        return f"@pytest.mark.{MARKER}(compare={value!r}) is not a choice: {_FIX}"
    return None


def scope_of(kwargs: Mapping[str, object] | None) -> Scope:
    """The scope a (valid) marker's keywords ask for; no marker: the measurements."""
    return "measurements" if kwargs is None else _SCOPES[kwargs["compare"]]


def measurement(load: Mapping[str, Any]) -> bool:
    """Whether a load is a performance measurement: the test's own, or run by a gate that measures."""
    gate = load.get("gate")
    known = GATES_BY_MARKER.get(str(gate)) if gate is not None else None
    return gate is None or known is None or known.measures


def select(loads: Sequence[Mapping[str, Any]], scope: Scope) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The loads to compare and one note per left-out load shape (why, and how to opt in)."""
    # Here, not at the top: the plugin reads this module's marker line in every pytest run, and the
    # records module brings the outcomes and the scrubber with it.
    from pytest_sglang.report.records import shape_key

    if scope == "all":
        return list(loads), []
    if scope == "none":
        return [], []
    kept = [ld for ld in loads if measurement(ld)]
    left: dict[tuple[str, str], None] = dict.fromkeys(
        (str(ld["gate"]), shape_key(ld)) for ld in loads if not measurement(ld))
    notes = [f"load {shape} not compared: @pytest.mark.{gate} ran it for its own check, not as a performance "
             f"measurement; @pytest.mark.{MARKER}(compare=\"all\") compares it" for gate, shape in left]
    return kept, notes


def opted_out(path: str) -> str:
    """The line of a test whose marker says ``compare=False``."""
    return (f"not compared with {path}: @pytest.mark.{MARKER}(compare=False) on this test; remove it to "
            "compare the test's loads and gate figures")
