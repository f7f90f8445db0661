"""Gate markers: registered with their signature, validated at collection, measured in setup, judged in call.

A marker's keywords are the keyword-only parameters of its gate's ``run_marker(ctx, *, ...)``
(``gates.registry``), so validation binds them to that signature. The measurement runs in the test's
SETUP (a fixture added to each marked test at collection: a server that cannot start or a load that
cannot run is an ERROR); the thresholds are asserted in the CALL phase after the test body (a FAILURE,
with the message of the matching ``assert_*`` helper). Every outcome and load result is recorded in
``item.user_properties``, which survive xdist and land in JUnit XML.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from . import redaction
from .errors import SGLangError
from .gates.base import GateOutcome
from .gates.registry import DOCS_URL, GATES, GATES_BY_MARKER, GateContext

_RESULTS_KEY = pytest.StashKey["GateResults"]()


class GateFailed(AssertionError, pytest.fail.Exception):  # type: ignore[misc,name-defined,unused-ignore]
    """An unmet gate: an ``AssertionError`` (a test FAILURE) carrying the gate's own message.

    It is also pytest's ``Failed`` with ``pytrace=False``, so the report shows the message (the same
    as the matching ``assert_*`` helper) instead of the plugin's hook frames.
    """

    __module__ = "builtins"  # the summary reads "GateFailed: sglang capacity gate failed: ..."

    def __init__(self, message: str) -> None:
        pytest.fail.Exception.__init__(self, message, pytrace=False)


@dataclass
class GateResults:
    """What the ``sglang_gate`` fixture returns: this test's outcomes and load results."""

    outcomes: list[GateOutcome] = field(default_factory=list)
    loads: list[Any] = field(default_factory=list)  # pytest_sglang.loadgen.LoadResult
    item: pytest.Item | None = field(default=None, repr=False, compare=False)

    def record(self, outcome: GateOutcome) -> GateOutcome:
        """Record a gate outcome built in the test body (e.g. an A/B comparison).

        It is stored like a marker's outcome (gate summary table, JSON/JUnit reports) and judged
        the same way: an unmet check fails the test after its body. Returns ``outcome``.
        """
        if not isinstance(outcome, GateOutcome):
            raise TypeError(f"sglang_gate.record(outcome) takes a pytest_sglang.GateOutcome, got "
                            f"{type(outcome).__name__}; build one with GateOutcome(gate, [compare(...)])")
        if self.item is None:
            raise RuntimeError("sglang_gate.record() needs the sglang_gate fixture of a running test")
        record(self.item, outcome)
        return outcome

    def __getitem__(self, gate: str) -> GateOutcome:
        """The outcome of ``gate`` ("throughput" or "sglang_throughput")."""
        name = gate.removeprefix("sglang_")
        for outcome in self.outcomes:
            if outcome.gate == name:
                return outcome
        raise KeyError(f"no {gate!r} outcome in this test; measured: {[o.gate for o in self.outcomes]}")

    @property
    def load(self) -> Any:
        """The last load result (a LoadResult), or None."""
        return self.loads[-1] if self.loads else None


def results_of(item: pytest.Item) -> GateResults:
    results = item.stash.get(_RESULTS_KEY, None)
    if results is None:
        results = item.stash[_RESULTS_KEY] = GateResults(item=item)
    return results


@contextlib.contextmanager
def run_lock(path: str) -> Iterator[None]:
    """The run-wide load lock: load-generating tests never overlap, also across xdist workers."""
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class LoadRunner:
    """``runner(spec=None, *, server=None, **LoadSpec fields) -> LoadResult``, locked and recorded.

    ``records``: keep the per-request records in the stored result (``--sglang-report-requests``
    and ``--sglang-html`` need them; they are large, so only then). ``lock()`` is the run-wide load
    lock, public for gates and tests that drive their own traffic (e.g. the hicache workload).
    """

    def __init__(self, server: Any, lock_path: str, item: pytest.Item, *, records: bool = False) -> None:
        self.server = server
        self.lock_path = lock_path
        self.item = item
        self.records = records

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """Hold the run-wide load lock (no other load of this run, on any xdist worker, overlaps)."""
        return run_lock(self.lock_path)

    def __call__(self, spec: Any = None, *, server: Any = None, **fields: Any) -> Any:
        from .loadgen import LoadSpec, run_load

        if spec is None:
            spec = LoadSpec(**fields)
        elif fields:
            raise TypeError("give either a LoadSpec or LoadSpec fields, not both")
        target = server if server is not None else self.server
        with self.lock():
            result = run_load(target.url, spec, api_key=target.api_key)
        results_of(self.item).loads.append(result)
        payload = redaction.scrub_payload(result.to_dict(records=self.records))
        self.item.user_properties.append(("sglang_load", json.dumps(payload)))
        return result


def load_runner(request: pytest.FixtureRequest, server: Any) -> LoadRunner:
    """The test's :class:`LoadRunner` (marker gates and the ``sglang_load`` fixture record alike)."""
    from .report.session import wants_requests
    from .server_pool import POOL_KEY

    pool = request.config.stash[POOL_KEY]
    return LoadRunner(server, pool.lock_path, request.node, records=wants_requests(pool.settings))


# ---- registration and validation -----------------------------------------------------------------
def register(config: pytest.Config) -> None:
    for gate in GATES:
        config.addinivalue_line("markers", f"{gate.doc} See {DOCS_URL}")


def gate_marks(item: pytest.Item) -> list[pytest.Mark]:
    return [m for m in item.iter_markers() if m.name in GATES_BY_MARKER]


def marker_problem(mark: pytest.Mark) -> str | None:
    """Why ``mark`` does not bind to its gate's signature (None when it does)."""
    params = list(inspect.signature(GATES_BY_MARKER[mark.name].load()).parameters.values())[1:]
    keywords = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    valid = f"valid keywords: {', '.join(keywords)}"
    if mark.args:
        return (f"@pytest.mark.{mark.name} takes keyword arguments only, got positional {mark.args!r}; "
                f"write e.g. @pytest.mark.{mark.name}({keywords[0] if keywords else 'name'}=...); {valid}")
    for key in mark.kwargs:
        if key not in keywords and not accepts_any:
            close = difflib.get_close_matches(key, keywords, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            return f"@pytest.mark.{mark.name} has no keyword {key!r}{hint}; {valid}"
    missing = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
               and p.default is inspect.Parameter.empty and p.name not in mark.kwargs]
    if missing:
        return f"@pytest.mark.{mark.name} needs {', '.join(repr(m) for m in missing)}; {valid}"
    return None


_PROBLEM_KEY = pytest.StashKey[str]()


def validate_items(items: list[pytest.Item], *, usage_error: bool = True) -> None:
    """Collection-time check of every gate marker (before any server work).

    A bad marker is a usage error. In an xdist worker (``usage_error=False``) a usage error would
    crash the worker, so each such test becomes an ERROR with the same message instead.
    """
    problems: dict[str, str] = {}
    for item in items:
        marks = gate_marks(item)
        for mark in marks:
            problem = marker_problem(mark)
            if problem is not None:
                problems.setdefault(problem, item.nodeid)
                item.stash[_PROBLEM_KEY] = f"invalid pytest-sglang marker: {problem}\nSee {DOCS_URL}"
        names = getattr(item, "fixturenames", None)
        if marks and names is not None and "_sglang_markers" not in names:
            # Only gate-marked tests get the measuring fixture (an autouse one would cost every test).
            names.insert(0, "_sglang_markers")
    if problems and usage_error:
        lines = [f"{nodeid}: {problem}" for problem, nodeid in problems.items()]
        raise pytest.UsageError("invalid pytest-sglang marker:\n" + "\n".join(lines) + f"\nSee {DOCS_URL}")


# ---- measurement (setup) and judgement (call) -----------------------------------------------------
@pytest.fixture
def _sglang_markers(request: pytest.FixtureRequest) -> None:
    """Run the gate markers of this test in its setup phase (an error here is an ERROR).

    Requested by every gate-marked test (added at collection by :func:`validate_items`). Every
    failure here uses ``pytrace=False``, so pytest shows the message, not this fixture's frames.
    """
    marks = gate_marks(request.node)
    if not marks:
        return
    problem = request.node.stash.get(_PROBLEM_KEY, None)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    server = request.getfixturevalue("sglang_server")
    runner = load_runner(request, server)
    ctx = GateContext(server=server, load=runner, factory=request.getfixturevalue("sglang_server_factory"),
                      nodeid=request.node.nodeid)
    for mark in marks:
        try:
            outcome = GATES_BY_MARKER[mark.name].load()(ctx, **mark.kwargs)
        except SGLangError as exc:
            text = f"@pytest.mark.{mark.name} could not measure: {type(exc).__name__}: {exc}"
            pytest.fail(redaction.scrub(text), pytrace=False)
        record(request.node, outcome)


def record(item: pytest.Item, outcome: GateOutcome) -> None:
    results_of(item).outcomes.append(outcome)
    item.user_properties.append(("sglang_outcome", json.dumps(redaction.scrub_payload(outcome.to_dict()))))
    for check in outcome.checks:
        measured = check.measured
        item.user_properties.append((f"sglang.{outcome.gate}.{check.metric}",
                                     redaction.scrub(measured) if isinstance(measured, str) else measured))


def assert_gates(item: pytest.Item) -> None:
    """After the test body: fail the test with every unmet gate (and baseline regression)."""
    results = item.stash.get(_RESULTS_KEY, None)
    if results is None:
        return
    failed = [o for o in results.outcomes if not o.passed]
    for outcome in _baseline_outcomes(item, results):
        record(item, outcome)
        if not outcome.passed:
            failed.append(outcome)
    if failed:
        raise GateFailed(redaction.scrub("\n\n".join(o.message() for o in failed)))


def _baseline_outcomes(item: pytest.Item, results: GateResults) -> list[GateOutcome]:
    """Regression checks against ``--sglang-baseline`` (the report package's ``baseline_outcome``)."""
    from .server_pool import POOL_KEY

    pool = item.config.stash.get(POOL_KEY, None)
    check = getattr(getattr(pool, "report_session", None), "baseline_outcome", None)
    if check is None:
        return []
    loads = [redaction.scrub_payload(r.to_dict()) for r in results.loads]
    outcome = check(item.nodeid, loads, list(results.outcomes))
    return [] if outcome is None else [outcome]
