"""Gate markers: registered with their signature, validated at collection, measured in setup, judged in call.

A marker's keywords are the keyword-only parameters of its gate's ``run_marker(ctx, *, ...)``
(``gates.registry``), declared there once with their types, defaults and constraints
(``gates.keywords``): the ``--markers`` line is generated from that signature, and at collection every
marker is checked against it (names, types, ranges, SGLang's choices, relations; an unknown
``sglang_*`` marker too), a usage error naming the marker, the keyword, the value and the fix. The
measurement runs in the test's
SETUP (a fixture added to each marked test at collection: a server that cannot start or a load that
cannot run is an ERROR); the thresholds are asserted in the CALL phase after the test body (a FAILURE,
with the message of the matching ``assert_*`` helper). Every outcome and load result is recorded in
``item.user_properties``, which survive xdist and land in JUnit XML.
"""

from __future__ import annotations

import difflib
import inspect
from typing import TYPE_CHECKING

import pytest

from pytest_sglang.errors import SGLangError
from pytest_sglang.gates.registry import DOCS_URL, GATES, GATES_BY_MARKER, GateContext

if TYPE_CHECKING:
    from pytest_sglang.gates.base import GateOutcome
    from pytest_sglang.plugin.results import GateResults
    from pytest_sglang.plugin.settings import Settings
    from pytest_sglang.server.members import Handle
    from pytest_sglang.sglang.args import LaunchArgs

# Registration runs in every pytest run; what measuring and judging need (redaction, the results,
# the load runner, the keyword checks) is imported inside the functions that only gate-marked tests reach.


class GateFailed(AssertionError, pytest.fail.Exception):  # type: ignore[misc,name-defined,unused-ignore]
    """An unmet gate: an ``AssertionError`` (a test FAILURE) carrying the gate's own message.

    It is also pytest's ``Failed`` with ``pytrace=False``, so the report shows the message (the same
    as the matching ``assert_*`` helper) instead of the plugin's hook frames.
    """

    __module__ = "builtins"  # the summary reads "GateFailed: sglang capacity gate failed: ..."

    def __init__(self, message: str) -> None:
        pytest.fail.Exception.__init__(self, message, pytrace=False)


# ---- registration and validation -----------------------------------------------------------------
def register(config: pytest.Config) -> None:
    # The full line imports every gate module (the load generator, httpx): only when it is shown.
    full = bool(config.getoption("markers", False))
    for gate in GATES:
        config.addinivalue_line("markers", gate.doc() if full else gate.brief())
    from pytest_sglang.report import baseline_scope  # light: the gate table and the record helpers

    config.addinivalue_line("markers", f"{baseline_scope.SUMMARY} See {baseline_scope.DOCS_URL}")


def gate_marks(item: pytest.Item) -> list[pytest.Mark]:
    return [m for m in item.iter_markers() if m.name in GATES_BY_MARKER]


def marker_problem(mark: pytest.Mark) -> str | None:
    """Return why ``mark`` is not a valid gate marker (None when it is).

    Unknown ``sglang_*`` names, and keywords checked against the gate's signature (names, types, ranges,
    choices, relations).
    """
    if not mark.name.startswith("sglang_"):
        return None
    gate = GATES_BY_MARKER.get(mark.name)
    if gate is None:
        from pytest_sglang.report import baseline_scope  # the one marker that is not a gate

        if mark.name == baseline_scope.MARKER:
            return baseline_scope.marker_problem(mark.args, mark.kwargs)
        close = difflib.get_close_matches(mark.name, [*GATES_BY_MARKER, baseline_scope.MARKER], n=1)
        hint = f"did you mean @pytest.mark.{close[0]}?" if close else "check the spelling"
        return (f"@pytest.mark.{mark.name} is not a pytest-sglang marker ({hint}); the markers are "
                f"{', '.join([*GATES_BY_MARKER, baseline_scope.MARKER])}")
    # Imported here: the keyword machinery is needed only when a test carries a gate marker.
    from pytest_sglang.gates import keywords

    return keywords.marker_problem(mark.name, gate.load(), mark.args, mark.kwargs)


_PROBLEM_KEY = pytest.StashKey[str]()


def validate_items(items: list[pytest.Item], *, usage_error: bool = True) -> None:
    """Collection-time check of every gate marker (before any server work).

    A bad marker is a usage error. In an xdist worker (``usage_error=False``) a usage error would
    crash the worker, so each such test becomes an ERROR with the same message instead.
    """
    problems: dict[str, str] = {}
    for item in items:
        for mark in item.iter_markers():
            problem = marker_problem(mark)
            if problem is not None:
                problems.setdefault(problem, item.nodeid)
                item.stash[_PROBLEM_KEY] = f"invalid pytest-sglang marker: {problem}\nSee {DOCS_URL}"
        names = getattr(item, "fixturenames", None)
        if names is not None and "_sglang_markers" not in names and (
                gate_marks(item) or _PROBLEM_KEY in item.stash):
            # Only gate-marked tests get the measuring fixture (an autouse one would cost every test).
            names.insert(0, "_sglang_markers")
    _check_launch_needs(items, problems)
    if problems and usage_error:
        lines = [f"{nodeid}: {problem}" for problem, nodeid in problems.items()]
        raise pytest.UsageError("invalid pytest-sglang marker:\n" + "\n".join(lines) + f"\nSee {DOCS_URL}")


def _check_launch_needs(items: list[pytest.Item], problems: dict[str, str]) -> None:
    """When the plugin launches: what each marker needs from the launch (``--enable-metrics``), before any start."""
    from pytest_sglang.plugin.keys import SETTINGS_KEY

    marked = [(item, mark) for item in items for mark in gate_marks(item) if _PROBLEM_KEY not in item.stash
              and GATES_BY_MARKER[mark.name].needs]
    settings = items[0].config.stash.get(SETTINGS_KEY, None) if marked else None
    if settings is None or settings.mode != "launch":
        return
    from pytest_sglang.gates.facts.requirements import active_needs, turn_off, unmet_in_launch

    roles = _launch_roles(settings)
    for item, mark in marked:
        gate = GATES_BY_MARKER[mark.name]
        unmet = unmet_in_launch(active_needs(gate, mark.kwargs), roles)
        for need in dict.fromkeys(u.need for u in unmet):
            where = " and ".join(u.where for u in unmet if u.need == need)
            off = turn_off(gate, need)
            problem = (f"@pytest.mark.{mark.name} needs {need.flag} in {where}: {need.why}. Without it the run "
                       f"would start every server and only then fail. Fix: add {need.flag} to --sglang-launch"
                       + (f" (or {off} in the marker)" if off else ""))
            problems.setdefault(problem, item.nodeid)
            item.stash[_PROBLEM_KEY] = f"invalid pytest-sglang marker: {problem}\nSee {DOCS_URL}"


def _launch_roles(settings: Settings) -> dict[str, LaunchArgs]:
    """Each worker role's launch args as SGLang will read them (the command's own flags included)."""
    from pytest_sglang.server.config import read_launch

    base, command = [*(settings.launch_args or ())], settings.sglang_command or ()
    if settings.sglang_prefill or settings.sglang_decode:
        return {role: read_launch([*base, *(extra or ())], command) for role, extra in
                (("prefill", settings.sglang_prefill_launch), ("decode", settings.sglang_decode_launch))}
    return {"worker" if settings.fleet else "server": read_launch(base, command)}


# ---- measurement (setup) and judgement (call) -----------------------------------------------------
@pytest.fixture
def _sglang_markers(request: pytest.FixtureRequest) -> None:
    """Run the gate markers of this test in its setup phase (an error here is an ERROR).

    Requested by every gate-marked test (added at collection by :func:`validate_items`). Every
    failure here uses ``pytrace=False``, so pytest shows the message, not this fixture's frames.
    """
    problem = request.node.stash.get(_PROBLEM_KEY, None)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    marks = gate_marks(request.node)
    if not marks:
        return
    server = request.getfixturevalue("sglang_server")
    from pytest_sglang import redaction
    from pytest_sglang.gates.base import GateCannotJudge, GateNotApplicable
    from pytest_sglang.plugin.keys import SETTINGS_KEY
    from pytest_sglang.plugin.load_runner import load_runner
    from pytest_sglang.plugin.pool import terminal_write
    from pytest_sglang.plugin.results import record

    settings = request.config.stash.get(SETTINGS_KEY, None)
    if settings is not None:  # an attached server's owner consents to cache flushes and heavy loads
        _require_consent(request, server, marks, settings.sglang_heavy_load)
    runner = load_runner(request, server)
    from pytest_sglang.plugin.profile_failure import SERVER_KEY

    request.node.stash[SERVER_KEY] = server  # --sglang-profile-on-failure profiles it if a gate fails
    ctx = GateContext(server=server, load=runner, factory=request.getfixturevalue("sglang_server_factory"),
                      nodeid=request.node.nodeid, eval_data=settings.sglang_eval_data if settings else None,
                      write=terminal_write(request.config, visible=True),
                      request_timeout_s=settings.sglang_request_timeout if settings else None,
                      load_timeout_s=settings.sglang_load_timeout if settings else None,
                      pd_reference_url=settings.sglang_pd_reference_url if settings else None)
    suggest = settings is not None and settings.sglang_suggest_floors
    for mark in marks:
        unmet = _unmet_on_attached(server, mark)
        if unmet is not None:  # the gate would check nothing, or fail only after its load
            record(request.node, unmet)
            continue
        failure = ""
        runner.gate = mark.name
        try:
            if suggest and mark.name in ("sglang_throughput",):  # measure-only: see plugin/floors.py
                outcome = _measure_only(request, mark, ctx)
            else:
                outcome = GATES_BY_MARKER[mark.name].load()(ctx, **mark.kwargs)
        except GateCannotJudge as exc:
            text = redaction.scrub(f"@pytest.mark.{mark.name} could not judge: {exc}")
            if settings is not None and settings.sglang_strict:
                raise pytest.fail.Exception(  # from None: the message once, not again as the cause
                    f"{text} (--sglang-strict: a check that cannot judge fails)", pytrace=False) from None
            pytest.skip(text)
        except GateNotApplicable as exc:
            pytest.skip(str(exc))
        except SGLangError as exc:
            failure = f"@pytest.mark.{mark.name} could not measure: {type(exc).__name__}: {exc}"
        finally:
            runner.gate = None
        if failure:  # failed outside the except block: the message alone, not "During handling of ..." it again
            pytest.fail(redaction.scrub(failure), pytrace=False)
        if not outcome.checks:  # no green that checked nothing, whatever the gate
            pytest.fail(f"@pytest.mark.{mark.name} checked nothing on this server, so it cannot pass: "
                        f"{redaction.scrub(outcome.message())}", pytrace=False)
        record(request.node, outcome)


def _unmet_on_attached(server: Handle, mark: pytest.Mark) -> GateOutcome | None:
    """An attached server's ``/server_info`` against the marker's needs: a failed outcome, or None when met."""
    if server.mode != "attach":  # a launch was checked at collection, from its args
        return None
    from pytest_sglang.gates.facts.requirements import active_needs, outcome_for, unmet_on_server

    needs = active_needs(GATES_BY_MARKER[mark.name], mark.kwargs)
    unmet = unmet_on_server(needs, server) if needs else []
    return outcome_for(mark.name, unmet, "launch the server with {flag}") if unmet else None


def _measure_only(request: pytest.FixtureRequest, mark: pytest.Mark, ctx: GateContext) -> GateOutcome:
    """Run the marker's load without its floors; the suggestion travels to the controller with the test."""
    import json

    from pytest_sglang.plugin.floors import FLOORS_PROP, measure_only, suggestion
    from pytest_sglang.plugin.keys import SETTINGS_KEY
    from pytest_sglang.plugin.results import results_of

    loads = results_of(request.node).loads
    before = len(loads)
    outcome = GATES_BY_MARKER[mark.name].load()(ctx, **measure_only(mark.kwargs))
    margin = request.config.stash[SETTINGS_KEY].sglang_suggest_floors_margin
    found = suggestion(mark.name, mark.kwargs, loads[before:], margin)
    if found is not None:
        request.node.user_properties.append((FLOORS_PROP, json.dumps(found)))
    return outcome


def _require_consent(request: pytest.FixtureRequest, server: Handle, marks: list[pytest.Mark],
                     heavy_limit: int) -> None:
    from pytest_sglang.plugin import consent

    actions = [a for m in marks for a in consent.disruptions_of_marker(
        m.name, m.kwargs, inspect.signature(GATES_BY_MARKER[m.name].load()), heavy_limit)]
    consent.require(request.config, server, actions)


def assert_gates(item: pytest.Item) -> None:
    """After the test body: fail the test with every unmet gate (and baseline regression)."""
    from pytest_sglang.plugin.results import RESULTS_KEY, record  # lazily: a collection never loads the outcomes

    results = item.stash.get(RESULTS_KEY, None)
    if results is None:
        return
    from pytest_sglang import redaction

    failed = [o for o in results.outcomes if not o.passed]
    cannot: list[str] = []
    for outcome in _baseline_outcomes(item, results):
        recorded = record(item, outcome)  # under --sglang-strict a "cannot judge" is a failed check
        for name in ("verdict", "launches", "launch_note"):  # JUnit properties: the third verdict is visible there too
            if name in outcome.context:
                item.user_properties.append((f"sglang.baseline.{name}", outcome.context[name]))
        if not recorded.passed:
            failed.append(recorded)
        cannot += recorded.unchecked
    if failed:
        from pytest_sglang.plugin.profile_failure import profile_failed

        profile = profile_failed(item, failed)
        messages = [o.message() for o in failed] + ([profile] if profile else [])
        raise GateFailed(redaction.scrub("\n\n".join(messages)))
    if cannot:  # the third verdict: neither a pass that could not have failed nor a red (reports show why)
        pytest.skip(redaction.scrub("baseline: " + "; ".join(cannot) + " (--sglang-strict makes it fail)"))


def _baseline_outcomes(item: pytest.Item, results: GateResults) -> list[GateOutcome]:
    """Regression checks against ``--sglang-baseline`` (the report session's, on every xdist worker too)."""
    from pytest_sglang.plugin.report_session import baseline_outcome
    from pytest_sglang.report.baseline_scope import MARKER, scope_of
    from pytest_sglang.report.records import parse_properties

    # The loads as recorded: each names the gate that ran it (the comparison keeps the measurements).
    loads = parse_properties(item.user_properties).loads
    mark = item.get_closest_marker(MARKER)
    scope = scope_of(mark.kwargs if mark is not None else None)
    outcome = baseline_outcome(item.config, item.nodeid, loads, list(results.outcomes), scope)
    return [] if outcome is None else [outcome]
