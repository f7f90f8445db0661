"""Inner tests: record gate outcomes and loads the way the plugin does (record_property)."""

from __future__ import annotations

import json
import os

import sample

from pytest_sglang.gates.base import GateOutcome


def _record(record_property, outcome: GateOutcome, loads=()) -> None:  # type: ignore[no-untyped-def]
    record_property("sglang_outcome", json.dumps(outcome.to_dict()))
    for check in outcome.checks:
        record_property(f"sglang.{check.gate}.{check.metric}", check.measured)
    for load in loads:
        record_property("sglang_load", json.dumps(load))


def test_capacity(record_property):  # type: ignore[no-untyped-def]
    outcome = sample.capacity_outcome(tokens=int(os.environ.get("SYNTH_TOKENS", "4096")))
    _record(record_property, outcome)
    outcome.raise_for_failures()


def test_throughput(record_property):  # type: ignore[no-untyped-def]
    tput = float(os.environ.get("SYNTH_TPUT", "1000"))
    outcome = sample.throughput_outcome(tput, 100.0)
    _record(record_property, outcome, [sample.load(8, tput, records=True)])
    outcome.raise_for_failures()


def test_hicache_fails(record_property):  # type: ignore[no-untyped-def]
    outcome = sample.hicache_outcome()
    _record(record_property, outcome)
    outcome.raise_for_failures()
