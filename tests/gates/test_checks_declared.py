"""Every gate declares what it checks, in one place (issue 34, item 13).

A gate's ``run_marker`` carries one :class:`~pytest_sglang.gates.keywords.AnyOf` (at least one of these
keywords must check something) or :class:`~pytest_sglang.gates.keywords.Always` (what it checks whatever
its keywords). Keywords that leave an ``AnyOf`` gate nothing to check are refused at collection and in
the ``evaluate_*`` helpers, naming the marker, the keywords given and the fix.
"""

from __future__ import annotations

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates import keywords
from pytest_sglang.gates.keywords import Always, AnyOf
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.gates.registry import GATES, GATES_BY_MARKER, MarkerGate
from pytest_sglang.loadgen import LoadResult, LoadSpec


@pytest.mark.parametrize("gate", GATES, ids=[g.marker for g in GATES])
def test_every_gate_declares_what_it_checks(gate: MarkerGate) -> None:
    fn = gate.load()
    declaration = keywords.declared(fn)
    declared = [r for r in declaration.rules if isinstance(r, (AnyOf, Always))]
    assert len(declared) == 1 and declaration.checks is declared[0], gate
    if isinstance(declared[0], AnyOf):  # the keywords it names are the gate's own
        assert set(declared[0].keywords) <= set(declaration.keywords), declared[0].keywords


def _vacuous(rule: AnyOf) -> dict[str, object]:
    """Every keyword of ``rule`` set so that it checks nothing (booleans False, numbers their vacuous value)."""
    return {name: rule.vacuous.get(name) for name in rule.keywords}


@pytest.mark.parametrize("gate", [g for g in GATES if isinstance(keywords.declared(g.load()).checks, AnyOf)],
                         ids=lambda g: g.marker)
def test_keywords_that_check_nothing_are_refused_naming_the_marker_and_the_fix(gate: MarkerGate) -> None:
    fn = gate.load()
    rule = keywords.declared(fn).checks
    assert isinstance(rule, AnyOf)
    given = _vacuous(rule)
    for name, keyword in keywords.declared(fn).keywords.items():
        if name in given and keyword.default is True:  # a switch that checks: turned off
            given[name] = False
    required = {k.name: _a_value(k.name) for k in keywords.declared(fn).keywords.values() if k.required}
    problem = keywords.marker_problem(gate.marker, fn, (), {**required, **given})
    assert problem is not None and problem.startswith(f"@pytest.mark.{gate.marker}("), problem
    assert "): checks nothing, so it would always pass. Fix: " in problem, problem


def _a_value(name: str) -> object:
    return {"task": "gsm8k", "min_concurrency": 1, "path": "golden.json"}.get(name, 1)


@pytest.mark.parametrize(("marker", "kwargs", "expected"), [
    ("sglang_probes", {"readiness_path": None, "liveness_path": None, "check_dp_ranks": False},
     "@pytest.mark.sglang_probes(readiness_path=None, liveness_path=None, check_dp_ranks=False): checks nothing, so "
     "it would always pass. Fix: give readiness_path='/health' or liveness_path='/health' (a probe to judge), or "
     "leave check_dp_ranks=True on a server with dp_size > 1"),
    ("sglang_throughput", {"max_error_rate": 1.0},
     "@pytest.mark.sglang_throughput(max_error_rate=1.0): checks nothing, so it would always pass. Fix: give at "
     "least one of min_output_tok_s, "),
])
def test_the_gates_that_used_to_run_with_nothing_to_check(marker: str, kwargs: dict[str, object],
                                                          expected: str) -> None:
    problem = keywords.marker_problem(marker, GATES_BY_MARKER[marker].load(), (), kwargs)
    assert problem is not None and problem.startswith(expected), problem


@pytest.mark.parametrize(("marker", "kwargs"), [
    ("sglang_probes", {"readiness_path": None}),  # liveness and the DP-rank check remain
    ("sglang_probes", {"readiness_path": None, "liveness_path": None}),  # the DP-rank check: judged on the server
    ("sglang_throughput", {}),  # failed requests are checked by default
    ("sglang_throughput", {"max_error_rate": 1.0, "min_request_s": 1}),
    ("sglang_golden", {"path": "golden.json", "min_match": 0}),  # the prompts must still be answered
    ("sglang_hicache", {"enabled": False}),  # checks that the cache is off
    ("sglang_fleet", {"consistent": False}),  # the workers' health is always checked
])
def test_keywords_that_still_check_something_are_accepted(marker: str, kwargs: dict[str, object]) -> None:
    assert keywords.marker_problem(marker, GATES_BY_MARKER[marker].load(), (), kwargs) is None


def test_the_helpers_apply_the_same_rule() -> None:
    result = LoadResult(LoadSpec(requests=1), completed=1)
    with pytest.raises(ConfigError, match=r"^evaluate_throughput\(max_error_rate=1.0\): checks nothing"):
        evaluate_throughput(result, max_error_rate=1.0)
    assert evaluate_throughput(result).passed  # no failed request: the default check holds
