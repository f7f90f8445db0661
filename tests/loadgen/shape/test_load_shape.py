"""The load-shape keywords are declared once (LoadShape) and every load gate's marker declares them from there."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import ModuleType

import pytest

from pytest_sglang.cli.load import build_parser, shape_flag, spec_from_args
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.gates.fleet import failover, pd
from pytest_sglang.gates.fleet import health as fleet
from pytest_sglang.gates.load import throughput
from pytest_sglang.gates.load.throughput import LOAD_TYPES, load_keywords
from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.shape.load import LOAD_SHAPE, SPEC_FIELDS, LoadShape

GATES = Path(throughput.__file__).parent
#: Each load gate's own defaults for the shape (the marker keywords users rely on: unchanged).
DEFAULTS: dict[ModuleType, dict[str, int | None]] = {
    throughput: {"concurrency": None, "requests": 128, "input_len": 1024, "output_len": 256},
    fleet: {"concurrency": 8, "requests": 64, "input_len": 128, "output_len": 16},
    pd: {"concurrency": 8, "requests": 64, "input_len": 256, "output_len": 16},
    failover: {"concurrency": 16, "requests": 256, "input_len": 256, "output_len": 64},
}


@pytest.mark.parametrize("gate", list(DEFAULTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_load_gate_declares_the_shape_from_one_place(gate: ModuleType) -> None:
    declared = keywords.declared(gate.run_marker)
    shape = [k for k in declared.keywords if k in LOAD_SHAPE]
    assert shape == list(LOAD_SHAPE)  # all of them, in one order
    for name in LOAD_SHAPE:
        want = DEFAULTS[gate].get(name, getattr(LoadShape(), name))
        assert declared.keywords[name].default == want, name
    # Validated as declared: a bad value names the keyword, whichever gate.
    with pytest.raises(keywords.KeywordError, match=r"cancel_rate=1\.5"):
        keywords.check(gate.run_marker, "@pytest.mark.x", {"cancel_rate": 1.5})


def test_no_gate_restates_the_shape_keywords() -> None:
    """The signature lines of the load shape live in LOAD_TYPES only (they were copied into each gate)."""
    restated = {p.name for p in GATES.glob("*.py")
                if re.search(r"^\s+cancel_after_tokens: CancelAfter\b|^\s+max_drain_s: DrainSeconds\b",
                             p.read_text(), re.MULTILINE)}
    assert not restated


def test_shape_names_are_loadspec_fields() -> None:
    assert set(LOAD_TYPES) == set(LOAD_SHAPE)
    spec_fields = {f.name for f in dataclasses.fields(LoadSpec)}
    assert set(SPEC_FIELDS) <= spec_fields
    assert set(LOAD_SHAPE) - set(SPEC_FIELDS) == {"max_drain_s"}  # the gate's drain check, not the load's


def test_shape_spec_is_the_load_it_describes() -> None:
    shape = LoadShape(concurrency=2, requests=8, input_len=16, output_len=8, cancel_rate=0.5, max_drain_s=3.0)
    spec = shape.spec(nodes=1)
    assert (spec.concurrency, spec.requests, spec.input_len, spec.output_len, spec.cancel_rate) == (2, 8, 16, 8, 0.5)
    assert LoadShape().spec().cancel_rate == 0.0  # None (not given) is no storm
    assert shape.storm_wanted() and LoadShape(max_drain_s=1.0).storm_wanted() and not LoadShape().storm_wanted()


def test_gate_receives_one_load_shape() -> None:
    seen: list[tuple[bool, LoadShape]] = []
    outcome = GateOutcome("x")

    @load_keywords(concurrency=4, requests=32)
    def run_marker(ctx: object, *, flag: bool = False, shape: LoadShape) -> GateOutcome:
        seen.append((flag, shape))
        return outcome

    assert run_marker(None, flag=True, input_len=7) is outcome
    assert seen == [(True, LoadShape(concurrency=4, requests=32, input_len=7))]


def test_unknown_default_is_refused() -> None:
    with pytest.raises(TypeError, match="no load-shape keyword"):
        load_keywords(concurency=4)


def test_load_command_takes_every_shape_keyword() -> None:
    """The load command's flags are the load-shape keywords' names (all but the gates' drain check)."""
    usage = build_parser().format_help()
    assert [name for name in SPEC_FIELDS if f"{shape_flag(name)} " not in usage] == []
    args = build_parser().parse_args(["--url", "http://x", "--requests", "8", "--concurrency", "2", "--input-len", "16",
                                      "--output-len", "8", "--cancel-rate", "0.5", "--request-timeout", "9"])
    spec = spec_from_args(args)
    assert (spec.requests, spec.concurrency, spec.input_len, spec.cancel_rate, spec.request_timeout_s) == \
        (8, 2, 16, 0.5, 9.0)
