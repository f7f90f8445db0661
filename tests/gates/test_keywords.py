"""Marker keywords declared once (the gate's signature): validation, messages, --markers text."""

from __future__ import annotations

import fnmatch
import inspect
from typing import Annotated

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates import keywords
from pytest_sglang.gates.base import Check, GateOutcome, compare
from pytest_sglang.gates.keywords import (
    Above,
    AnyOf,
    AtLeast,
    AtMost,
    Fraction,
    KeywordError,
    NotBelow,
    OneOf,
    Requires,
    declared,
    marker_problem,
    signature_text,
)
from pytest_sglang.gates.load.throughput import assert_throughput, evaluate_throughput
from pytest_sglang.gates.registry import GATES
from pytest_sglang.loadgen import LoadResult, LoadSpec


@keywords.rules(
    AnyOf(("floor", "ceiling")),
    Requires("live", needs=("size",), why="what to send", fix="add size=4000"),
    NotBelow("ceiling", "floor"),
)
def _gate(ctx: object, *, floor: Annotated[float | None, AtLeast(0)] = None,
          ceiling: Annotated[float | None, AtLeast(0)] = None,
          size: Annotated[int | None, AtLeast(1), AtMost(100)] = None,
          rate: Annotated[float, Fraction()] = 0.0, mode: Annotated[str, OneOf(("fast", "slow"))] = "fast",
          live: bool = False) -> GateOutcome:
    return GateOutcome("toy")


def problem(**kwargs: object) -> str | None:
    return marker_problem("toy", _gate, (), kwargs)


def test_signature_text_is_the_signature() -> None:
    assert signature_text(_gate) == (
        "(*, floor: float | None = None, ceiling: float | None = None, size: int | None = None, "
        "rate: float = 0.0, mode: str = 'fast', live: bool = False)")
    for gate in GATES:  # every real gate: names and defaults exactly as inspect reads them
        params = [p for p in inspect.signature(gate.load()).parameters.values()
                  if p.kind is inspect.Parameter.KEYWORD_ONLY]
        declaration = declared(gate.load())
        assert list(declaration.keywords) == [p.name for p in params]
        assert [k.default for k in declaration.keywords.values()] == [p.default for p in params]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"floor": True}, "@pytest.mark.toy(floor=True): must be a number >= 0, not a bool. Fix: give floor a number "
                      ">= 0, or leave it out"),
    ({"floor": "5"}, "@pytest.mark.toy(floor='5'): must be a number >= 0, not the string '5'. Fix: *"),
    ({"floor": float("nan")}, "@pytest.mark.toy(floor=nan): must be a number >= 0, not nan. Fix: *"),
    ({"floor": float("-inf")}, "@pytest.mark.toy(floor=-inf): must be a number >= 0, not -inf. Fix: *"),
    ({"floor": -1}, "@pytest.mark.toy(floor=-1): must be a number >= 0. Fix: *"),
    ({"floor": 1, "size": 2.0}, "@pytest.mark.toy(size=2.0): must be a whole number from 1 to 100, not float*"),
    ({"floor": 1, "size": 101}, "@pytest.mark.toy(size=101): must be a whole number from 1 to 100. Fix: *"),
    ({"floor": 1, "rate": "2%"}, "*not the string '2%'. Fix: write rate=0.02"),
    ({"floor": 1, "rate": 3}, "@pytest.mark.toy(rate=3): must be a number from 0 to 1 (a fraction: 0.01 = 1%). "
                              "Fix: write rate=0.03"),
    ({"floor": 1, "mode": "fats"}, "@pytest.mark.toy(mode='fats'): must be one of fast, slow. Fix: write "
                                   "mode='fast' (the closest choice)"),
    ({"floor": 1, "live": 1}, "@pytest.mark.toy(live=1): must be True or False, not int. Fix: *"),
    ({"floor": 1, "mode": None}, "@pytest.mark.toy(mode=None): must be one of fast, slow, not None. Fix: *"),
    ({"floor": 1, "floor2": 3}, "@pytest.mark.toy has no keyword 'floor2' (did you mean 'floor'?); valid *"),
    ({}, "@pytest.mark.toy(): checks nothing, so it would always pass. Fix: give at least one of floor, ceiling"),
    ({"floor": 1, "live": True}, "@pytest.mark.toy(live=True): needs size (what to send). Fix: add size=4000"),
    ({"floor": 5, "ceiling": 4}, "@pytest.mark.toy(ceiling=4, floor=5): ceiling is below floor. Fix: raise "
                                 "ceiling to at least 5"),
    ({"floor": "x" * 200}, "@pytest.mark.toy(floor='xxxxxx*...): must be a number >= 0, not the string *"),
])
def test_bad_keywords_name_marker_keyword_value_and_fix(kwargs: dict[str, object], expected: str) -> None:
    text = problem(**kwargs)
    assert text is not None and fnmatch.fnmatch(text, expected), text
    assert len(text) < 400  # a huge value is shortened, not echoed


@pytest.mark.parametrize("kwargs", [
    {"floor": 0}, {"ceiling": 1e308, "floor": 1}, {"floor": 1, "size": 1, "live": True},
    {"floor": 1, "rate": 1}, {"floor": 1, "rate": 0.0}, {"floor": 1, "mode": "slow"}, {"floor": 1, "size": None},
])
def test_valid_keywords_pass(kwargs: dict[str, object]) -> None:
    assert problem(**kwargs) is None


def test_positional_arguments_are_refused() -> None:
    assert problem() is not None
    text = marker_problem("toy", _gate, (100,), {})
    assert text is not None and text.startswith("@pytest.mark.toy takes keyword arguments only, got positional (100,)")


def test_check_raises_a_keyword_error_that_is_a_config_error() -> None:
    with pytest.raises(KeywordError) as exc:
        keywords.check(_gate, "toy_helper", {"floor": -2})
    assert isinstance(exc.value, ConfigError)
    assert (exc.value.call, exc.value.keywords) == ("toy_helper", ("floor",))
    assert exc.value.problem == "must be a number >= 0"
    assert str(exc.value) == ("toy_helper(floor=-2): must be a number >= 0. Fix: give floor a number >= 0, "
                              "or leave it out")


def test_an_unsupported_annotation_is_a_declaration_error() -> None:
    def gate(ctx: object, *, items: list[float] | None = None) -> GateOutcome:
        return GateOutcome("x")

    with pytest.raises(TypeError, match="marker keyword 'items': declare it as a union of"):
        declared(gate)


def test_a_list_of_whole_numbers_and_a_mapping_of_floors_are_checked_item_by_item() -> None:
    def gate(ctx: object, *, lens: Annotated[list[int] | None, AtLeast(1)] = None,
             floor: Annotated[float | dict[int, float] | None, Above(1)] = None) -> GateOutcome:
        return GateOutcome("x")

    keywords = declared(gate).keywords
    lens, floor = keywords["lens"], keywords["floor"]
    assert lens.problem([1024, 32768]) is None and floor.problem({1024: 2.5, 32768: 1.5}) is None
    assert floor.problem(2.0) is None
    assert lens.problem([0]) == "must be a non-empty list of whole numbers >= 1"
    for bad in ([], [True], [1.5], ["1k"], {1: 2}):
        assert lens.problem(bad) is not None, bad
    for bad in ({}, {1024: 1.0}, {"1k": 2.0}, {True: 2.0}, {1024: float("nan")}, {1024: "2"}, [2.0]):
        assert floor.problem(bad) is not None, bad
    assert floor.requirement == "a number or a non-empty mapping {context tokens: number} > 1"
    assert lens.text() == "lens: list[int] | None = None"


def _result() -> LoadResult:
    return LoadResult(spec=LoadSpec(requests=4, concurrency=2), completed=4, output_throughput=930.2)


def test_assert_throughput_refuses_a_bad_keyword_before_comparing() -> None:
    # Before: max_error_rate="1%" reached the comparison and raised a bare TypeError.
    with pytest.raises(KeywordError, match=r"^evaluate_throughput\(max_error_rate='1%'\): must be a number from "
                                           r"0 to 1 .*Fix: write max_error_rate=0\.01$"):
        assert_throughput(_result(), max_error_rate="1%")
    with pytest.raises(KeywordError, match=r"min_output_tok_s=-1"):
        evaluate_throughput(_result(), min_output_tok_s=-1)


def test_failure_messages_name_the_keyword_as_written() -> None:
    outcome = evaluate_throughput(_result(), min_output_tok_s=5000)
    head, line = outcome.message().splitlines()[:2]
    assert head == "sglang throughput gate failed: min_output_tok_s=5000: measured 930.2 tok/s (output_throughput)"
    assert line.startswith("  min_output_tok_s=5000: output_throughput measured 930.2 tok/s, required >= 5,000 "
                           "tok/s [")


def test_checks_keep_their_keyword_through_the_reports() -> None:
    check = compare("g", "m", 1, ">=", 2, keyword="min_m")
    assert Check.from_dict(check.to_dict()) == check
    old = {k: v for k, v in check.to_dict().items() if k != "keyword"}  # a report written before keywords
    assert Check.from_dict(old).keyword == "" and Check.from_dict(old).describe().startswith("m: measured 1")


