"""Fuzz: marker keywords with generated bad values are refused with a message naming the marker and
the keyword, never a traceback; whatever passes the check is valid for the gate's declaration."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.facts.capacity import evaluate_capacity
from pytest_sglang.gates.keywords import IntList, Keyword, declared, marker_problem
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.gates.registry import GATES
from pytest_sglang.loadgen import LoadResult, LoadSpec

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GATE_FNS = [(g.marker, g.load()) for g in GATES]
#: The least each gate needs to be valid, so that one bad keyword is the only problem.
BASE: dict[str, dict[str, object]] = {
    "sglang_capacity": {"min_total_tokens": 1}, "sglang_hicache": {}, "sglang_throughput": {},
    "sglang_slo": {"min_concurrency": 1, "max_ttft_ms_p99": 100.0},
    "sglang_accuracy": {"task": "arithmetic", "min_score": 0.5}, "sglang_golden": {"path": "golden.json"},
    "sglang_fleet": {}, "sglang_pd": {}, "sglang_failover": {},
    "sglang_speculative": {"min_accept_length": 2.0}, "sglang_probes": {}, "sglang_soak": {"max_stall_s": 10},
}

class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


values = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["1%", "5 %", "nan", "inf", "-1", "1e999", "write_thru", "native ", "", "\x00", "0x10"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.dictionaries(st.integers(), st.floats(), max_size=2),
    st.binary(max_size=4), st.just(object()), st.just(_BadRepr()), st.text(min_size=200, max_size=300),
)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=16)


def _valid(keyword: Keyword, value: object) -> bool:
    """An independent reading of the declaration: the type, finiteness, then each constraint."""
    if value is None:
        return keyword.optional
    if isinstance(value, (list, tuple)):
        strings = list in keyword.types and all(isinstance(v, str) for v in value)
        whole = IntList in keyword.types and bool(value) and all(type(v) is int for v in value)
        # Constraints judge each number of a list of whole numbers, a list of strings as a whole.
        items = list(value) if whole else [value]
        return (strings or whole) and all(c.ok(v) for c in keyword.constraints for v in items)
    if isinstance(value, dict):  # {whole number >= 1: finite number}, each number constrained
        return (dict in keyword.types and bool(value)
                and all(type(k) is int and k >= 1 and type(v) in (int, float) and math.isfinite(v)
                        for k, v in value.items())
                and all(c.ok(v) for c in keyword.constraints for v in value.values()))
    if isinstance(value, bool):
        return bool in keyword.types
    if isinstance(value, int):
        kind_ok = int in keyword.types or float in keyword.types
    elif isinstance(value, float):
        kind_ok = float in keyword.types and math.isfinite(value)
    else:
        kind_ok = isinstance(value, str) and str in keyword.types
    return kind_ok and all(c.ok(value) for c in keyword.constraints)


@FUZZ
@given(data=st.data())
def test_one_generated_value_per_keyword(data: st.DataObject) -> None:
    marker, fn = data.draw(st.sampled_from(GATE_FNS))
    keyword = data.draw(st.sampled_from(list(declared(fn).keywords.values())))
    value = data.draw(values)
    problem = marker_problem(marker, fn, (), {**BASE[marker], keyword.name: value})  # never raises
    if not _valid(keyword, value):
        assert problem is not None, (marker, keyword.name, value)
        assert problem.startswith(f"@pytest.mark.{marker}(") and f"{keyword.name}=" in problem
        assert ". Fix: " in problem and len(problem) < 600
    elif problem is not None:  # a valid value may still break a relation between keywords
        assert problem.startswith(f"@pytest.mark.{marker}("), problem
        assert any(text in problem for text in (": needs ", " is below ", " is not below ", "checks nothing",
                                                "context length")), problem


@FUZZ
@given(data=st.data())
def test_generated_marker_calls(data: st.DataObject) -> None:
    marker, fn = data.draw(st.sampled_from(GATE_FNS))
    declaration = declared(fn)
    keys = data.draw(st.lists(st.one_of(st.sampled_from(list(declaration.keywords)), names), max_size=4,
                              unique=True))
    kwargs = {k: data.draw(values) for k in keys}
    args = tuple(data.draw(st.lists(values, max_size=1)))
    problem = marker_problem(marker, fn, args, kwargs)  # never raises, whatever it is given
    if problem is None:
        assert not args and all(_valid(declaration.keywords[k], v) for k, v in kwargs.items())
    else:
        assert problem.startswith(f"@pytest.mark.{marker}")
        unknown = [k for k in kwargs if k not in declaration.keywords]
        if unknown and not args:
            assert f"has no keyword {unknown[0]!r}" in problem


def _result() -> LoadResult:
    return LoadResult(spec=LoadSpec(requests=4, concurrency=2), completed=4, output_throughput=100.0)


@FUZZ
@given(data=st.data())
def test_assert_helpers_refuse_bad_keywords_with_a_config_error(data: st.DataObject) -> None:
    """The ``evaluate_*``/``assert_*`` helpers check the same declaration: a ConfigError or a verdict."""
    helper = data.draw(st.sampled_from(["capacity", "throughput"]))
    if helper == "capacity":
        name = data.draw(st.sampled_from(["min_total_tokens", "min_running_requests", "min_context_length"]))
        call: Any = lambda **kw: evaluate_capacity({"max_total_num_tokens": 10}, **kw)  # noqa: E731
    else:
        name = data.draw(st.sampled_from(["min_output_tok_s", "max_ttft_ms_p99", "max_error_rate"]))
        call = lambda **kw: evaluate_throughput(_result(), **kw)  # noqa: E731
    value = data.draw(values)
    try:
        outcome = call(**{name: value})
    except ConfigError as exc:
        assert f"({name}=" in str(exc) or "checks nothing" in str(exc)
    else:
        assert outcome.checks  # a verdict was reached: the value was valid
