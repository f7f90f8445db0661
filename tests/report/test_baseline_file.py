"""A baseline file: figures checked when read, tests matched whatever pytest's rootdir was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sample

from pytest_sglang.__main__ import main as dispatch
from pytest_sglang.errors import ConfigError
from pytest_sglang.report import json_report, text
from pytest_sglang.report.baseline import BaselineContext, load_report, parse_limits
from pytest_sglang.report.baseline_file import BaselineIndex, stable_key


def _layout(root: Path) -> None:
    """``ci/gate/test_gate.py`` (a plain folder) and ``ci/suite/perf/test_x.py`` (``perf`` a package)."""
    (root / "gate").mkdir(parents=True)
    (root / "gate" / "test_gate.py").write_text("def test_t(): pass\n")
    (root / "suite" / "perf").mkdir(parents=True)
    (root / "suite" / "perf" / "__init__.py").write_text("")
    (root / "suite" / "perf" / "test_x.py").write_text("def test_t(): pass\n")


def test_the_key_is_the_same_from_every_rootdir(tmp_path: Path) -> None:
    _layout(tmp_path / "ci")
    ci = tmp_path / "ci"
    seen = {stable_key(ci, "gate/test_gate.py::test_t[a-1]"), stable_key(ci / "gate", "test_gate.py::test_t[a-1]"),
            stable_key(tmp_path, "ci/gate/test_gate.py::test_t[a-1]"),
            stable_key(ci / "suite", "../gate/test_gate.py::test_t[a-1]")}
    assert seen == {"test_gate.py::test_t[a-1]"}
    # A package folder stays in the key: it is part of the module's name.
    assert stable_key(ci, "suite/perf/test_x.py::test_t") == stable_key(ci / "suite", "perf/test_x.py::test_t") \
        == "perf/test_x.py::test_t"
    assert stable_key(ci, "sglang server start") == "sglang server start"


def test_a_test_is_found_by_id_then_key_then_the_end_of_its_id() -> None:
    keyed = BaselineIndex([{"nodeid": "test_gate.py::t", "key": "test_gate.py::t"}])
    found = keyed.find("gate/test_gate.py::t", "test_gate.py::t")
    assert found is not None and found.how == "key" and found.nodeid == "test_gate.py::t"
    assert "pytest's rootdir differed" in str(found.note("base.json"))
    assert keyed.find("gate/test_gate.py::u", "test_gate.py::u") is None
    exact = keyed.find("test_gate.py::t")
    assert exact is not None and exact.how == "id" and exact.note("base.json") is None
    # A baseline written before keys: the end of the id, said so.
    old = BaselineIndex([{"nodeid": "test_gate.py::t"}, {"nodeid": "test_gate.py::t[x]"}])
    found = old.find("ci/gate/test_gate.py::t", "test_gate.py::t")
    assert found is not None and found.how == "suffix" and "refresh it" in str(found.note("base.json"))
    assert old.find("ci/gate/other_gate.py::t") is None
    # Two files of one name (importlib mode): the key is ambiguous, the end of the id decides, or nothing.
    twins = BaselineIndex([{"nodeid": "a/test_x.py::t", "key": "test_x.py::t"},
                           {"nodeid": "b/test_x.py::t", "key": "test_x.py::t"}])
    picked = twins.find("tests/b/test_x.py::t", "test_x.py::t")
    assert picked is not None and picked.nodeid == "b/test_x.py::t"
    assert twins.find("test_x.py::t", "test_x.py::t") is None


def _context(nodeids: list[str], strict: bool = False) -> BaselineContext:
    tests = [{"nodeid": n, "loads": [sample.load(8, 900.0)]} for n in nodeids]
    report = {"fingerprint": {}, "tests": [{"nodeid": "sglang server start", "gates": []}, *tests]}
    return BaselineContext("base.json", report, parse_limits("5%"), strict)


def test_a_run_that_compares_nothing_fails_and_a_new_test_is_a_note() -> None:
    ctx = _context(["test_gate.py::test_a"])
    ctx.expect([("other.py::test_b", "other.py::test_b")])
    outcome = ctx.outcome("other.py::test_b", [sample.load(8, 700.0)], [], {}, key="other.py::test_b")
    assert outcome is not None and not outcome.passed
    assert outcome.failed[0].metric == "test_in_baseline"
    assert ("compared nothing: none of this run's tests is in the baseline base.json (it has 1 test(s) with "
            "figures: test_gate.py::test_a)") in outcome.message()
    summary = ctx.summary({}, [("other.py::test_b", "other.py::test_b")])
    assert summary["compared_nothing"] and summary["not_in_baseline"] == ["other.py::test_b"]
    assert text.baseline_state(dict(summary)).startswith(
        "COMPARED NOTHING: none of the 1 test(s) that measured figures is in the baseline (fails)")
    # One test of the session is in the baseline: a new test is a note, not a failure.
    ctx = _context(["test_gate.py::test_a"])
    ctx.expect([("test_gate.py::test_a", None), ("test_gate.py::test_new", None)])
    outcome = ctx.outcome("test_gate.py::test_new", [sample.load(8, 700.0)], [], {})
    assert outcome is not None and outcome.passed and outcome.notes == [
        "not compared: base.json has no test test_gate.py::test_new (renamed, or new since the baseline)"]
    summary = ctx.summary({}, [("test_gate.py::test_a", None), ("test_gate.py::test_new", None)])
    assert not summary["compared_nothing"] and summary["not_in_baseline"] == ["test_gate.py::test_new"]


def _report_with(tmp_path: Path, change: Any) -> Path:
    tests = sample.tests()
    tests[2].loads = [sample.load(8, 900.0)]
    report = json.loads(json.dumps(json_report.build_report(tests, sample.identity())))
    change(report)
    path = tmp_path / "base.json"
    path.write_text(json.dumps(report))  # Python writes NaN and Infinity unless told not to
    return path


def _set_load(field: str, value: object) -> Any:
    return lambda r: r["tests"][2]["loads"][0].__setitem__(field, value)


def _set_capacity(value: object) -> Any:
    return lambda r: r["tests"][0]["gates"][0]["checks"][0].__setitem__("measured", value)


@pytest.mark.parametrize(("change", "problem"), [
    (_set_load("output_throughput", float("nan")),
     "test 'tests/test_gate.py::test_throughput', load 1: field 'output_throughput' is nan, not a finite number"),
    (_set_load("p99_ttft_ms", float("inf")),
     "test 'tests/test_gate.py::test_throughput', load 1: field 'p99_ttft_ms' is inf, not a finite number"),
    (_set_load("request_throughput", "12.5"),
     "test 'tests/test_gate.py::test_throughput', load 1: field 'request_throughput' is '12.5', not a finite "
     "number"),
    (_set_load("completed", True),
     "test 'tests/test_gate.py::test_throughput', load 1: field 'completed' is True, not a finite number"),
    (_set_load("samples", {"ttft_ms": [50.0, float("-inf")], "e2e_ms": [90.0, 95.0]}),
     "test 'tests/test_gate.py::test_throughput', load 1: samples['ttft_ms'] holds -inf, not finite numbers"),
    (_set_capacity(float("nan")),
     "test 'tests/test_gate.py::test_capacity', capacity gate: field 'measured' of 'max_total_num_tokens' is nan, "
     "not a finite number"),
    (lambda r: r["tests"][0]["gates"].append("capacity"),
     "test 'tests/test_gate.py::test_capacity', gate 2 is 'capacity', not a gate record with a list of checks"),
    (_set_capacity([4096]),
     "test 'tests/test_gate.py::test_capacity', capacity gate: field 'measured' of 'max_total_num_tokens' is "
     "[4096], not a finite number"),
])
def test_a_figure_that_is_not_a_finite_number_is_refused_naming_test_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, problem: str) -> None:
    path = _report_with(tmp_path, change)
    with pytest.raises(ConfigError) as caught:
        load_report(path)
    assert str(caught.value) == (f"--sglang-baseline={str(path)!r}: {problem}. Fix: record the report again with "
                                 "--sglang-report (pytest-sglang writes no NaN, Infinity or text in a figure), or "
                                 "correct that field")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(json_report.build_report(sample.tests(), sample.identity())))
    # The CLI refuses it too (exit 2, bad input), as OLD or as NEW: before, it printed "+nan% REGRESSED".
    assert dispatch(["compare", str(path), str(good)]) == 2
    assert capsys.readouterr().err.startswith(f"error: OLD.json={str(path)!r}: {problem}.")
    assert dispatch(["compare", str(good), str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: NEW.json={str(path)!r}: {problem}.")


def test_a_report_as_written_is_read(tmp_path: Path) -> None:
    path = _report_with(tmp_path, lambda r: None)
    assert load_report(path)["tests"][2]["loads"][0]["output_throughput"] == 900.0


def _written(tmp_path: Path, name: str, tput: float, rename: Any) -> Path:
    tests = sample.tests()
    tests[2].loads = [sample.load(8, tput)]
    for test in tests:
        test.key = test.nodeid.removeprefix("tests/")
        test.nodeid = rename(test.nodeid)
    path = tmp_path / name
    json_report.write_json(json_report.build_report(tests, sample.identity()), path)
    return path


def test_compare_cli_matches_by_key_and_fails_when_it_compares_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _written(tmp_path, "old.json", 900.0, lambda n: n.removeprefix("tests/"))
    slow = _written(tmp_path, "slow.json", 700.0, lambda n: "ci/" + n)  # another rootdir: another prefix
    assert dispatch(["compare", str(old), str(slow), "--max-regression", "output_throughput:5%"]) == 1
    out = capsys.readouterr().out
    assert "matched by its key: OLD.json ran this test as test_gate.py::test_throughput" in out
    assert "output_throughput" in out and "REGRESSED" in out
    other = _written(tmp_path, "other.json", 700.0, lambda n: n.replace("test_gate", "test_other"))
    data = json.loads(other.read_text())
    for test in data["tests"]:
        test["key"] = test["nodeid"]
    other.write_text(json.dumps(data))
    # Before: "nothing to compare" and exit 0, a pass that compared nothing.
    assert dispatch(["compare", str(old), str(other), "--max-regression", "output_throughput:5%"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "COMPARED NOTHING: none of the 2 test(s) of NEW.json with figures is in OLD.json" in out
