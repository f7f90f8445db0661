"""A baseline file: read and checked once, and its tests found whatever pytest's rootdir was.

The one place that reads a baseline report and tells which of its tests is which test of this run
(``--sglang-baseline`` and ``python -m pytest_sglang compare`` both go through it).

**Reading.** :func:`load_report` reads a JSON report under the size cap and refuses, before any
test runs, a figure a comparison would read that is not a finite number: Python's ``json`` accepts
``NaN`` and ``Infinity``, and a ``NaN`` baseline once failed a healthy run with ``(required >= nan)``
and "find what shrank it". The error names the test, the load or gate, and the field.

**Matching.** pytest chooses its rootdir before plugin options are parsed, from the path-like
arguments: ``--sglang-baseline ../artifacts/base.json`` moves it to the common parent, and every test
id gains a prefix (``gate/test_gate.py::t`` against ``test_gate.py::t`` in the baseline). So each
test of a report also carries a **key**, :func:`stable_key`: its file's path from the first folder up
that is not a Python package (where Python's default import mode puts the file on ``sys.path``),
then the rest of its id. The key is the same whatever the rootdir or the directory pytest was
started from. :class:`BaselineIndex` finds a test by its id, else by its key, else (a baseline
written before keys, or two files of one name) by the end of its id, and says how it matched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.files import read_capped
from pytest_sglang.loadgen.measure.intervals import FIELDS as SAMPLE_FIELDS

_FIX = "point it to a JSON report written with --sglang-report"


def load_report(path: str | Path, option: str = "--sglang-baseline", *, figures: frozenset[str] = frozenset()
                ) -> dict[str, Any]:
    """Read a JSON report; errors name the option, the path and the fix.

    ``figures``: the field names a comparison reads (:data:`.baseline.KNOWN_METRICS`); each one found
    in a load or a gate's check must be a finite number (or null: not measured).
    """
    if not Path(path).exists():
        raise ConfigError(option, str(path), "file not found", _FIX)
    # Capped: a 2.7 GB "baseline" once ended pytest with MemoryError as an INTERNALERROR.
    raw = read_capped(path, option=option, fix=_FIX, too_large_fix=_FIX)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(option, str(path), f"not a readable JSON report ({exc})", _FIX) from None
    if not isinstance(data, dict) or "tests" not in data or "fingerprint" not in data:
        raise ConfigError(option, str(path), "not a pytest-sglang report (no 'tests'/'fingerprint')", _FIX)
    problem = bad_figure(data, figures)
    if problem is not None:
        raise ConfigError(option, str(path), problem,
                          "record the report again with --sglang-report (pytest-sglang writes no NaN, Infinity "
                          "or text in a figure), or correct that field")
    return data


def bad_figure(report: Mapping[str, Any], figures: frozenset[str]) -> str | None:
    """The first figure of ``report`` that cannot be compared, as ``test 'x', load 1: field ... is nan``."""
    tests = report.get("tests")
    if not isinstance(tests, list):
        return f"'tests' is {_shown(tests)}, not a list of tests"
    for i, test in enumerate(tests):
        if not isinstance(test, Mapping) or not isinstance(test.get("nodeid"), str):
            return f"tests[{i}] is not a test record with a 'nodeid'"
        problem = _bad_in_test(test, figures)
        if problem is not None:
            return f"test {test['nodeid']!r}, {problem}"
    return None


def _bad_in_test(test: Mapping[str, Any], figures: frozenset[str]) -> str | None:
    for n, load in enumerate(_list(test.get("loads")), 1):
        if not isinstance(load, Mapping):
            return f"load {n} is {_shown(load)}, not a load record"
        for name in sorted(figures & load.keys()):
            if not _figure(load[name]):
                return f"load {n}: field {name!r} is {_shown(load[name])}, not a finite number"
        samples = load.get("samples")
        samples = samples if isinstance(samples, Mapping) else {}
        for name in SAMPLE_FIELDS:
            values = samples.get(name, [])
            wrong = [v for v in values if not _finite(v)] if isinstance(values, list) else [values]
            if wrong:
                return f"load {n}: samples[{name!r}] holds {_shown(wrong[0])}, not finite numbers"
    for n, gate in enumerate(_list(test.get("gates")), 1):
        checks = gate.get("checks", []) if isinstance(gate, Mapping) else None
        if not isinstance(checks, list) or not all(isinstance(c, Mapping) for c in checks):
            return f"gate {n} is {_shown(gate)}, not a gate record with a list of checks"
        for check in checks:
            metric = str(check.get("metric", ""))
            if metric.split(" of ", 1)[0] in figures and not _figure(check.get("measured")):
                return (f"{gate.get('gate')} gate: field 'measured' of {metric!r} is {_shown(check.get('measured'))}, "
                        "not a finite number")
    return None


def _figure(value: object) -> bool:
    """A finite number, or None (not measured)."""
    return value is None or _finite(value)


def _finite(value: object) -> bool:
    """A number that is not a bool, NaN or an infinity."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def stable_key(rootdir: Path, nodeid: str) -> str:
    """The id of test ``nodeid`` (relative to ``rootdir``) that does not depend on the rootdir.

    ``gate/test_gate.py::test_x[a]`` -> ``test_gate.py::test_x[a]`` when ``gate`` is not a package;
    a file inside packages keeps them: ``suite/perf/test_x.py::t`` -> ``perf/test_x.py::t`` when
    ``perf`` has an ``__init__.py`` and ``suite`` not. An id that names no file is its own key.
    """
    file_part, sep, rest = nodeid.partition("::")
    path = rootdir / file_part
    if not file_part or not path.is_file():
        return nodeid
    path = path.resolve()
    top = path.parent
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return path.relative_to(top).as_posix() + sep + rest


def same_by_suffix(one: str, other: str) -> bool:
    """Whether two ids name the same test seen from two rootdirs: one's path ends the other's."""
    file_a, _, rest_a = one.partition("::")
    file_b, _, rest_b = other.partition("::")
    if rest_a != rest_b:
        return False
    parts_a, parts_b = file_a.split("/"), file_b.split("/")
    shorter, longer = sorted((parts_a, parts_b), key=len)
    return longer[len(longer) - len(shorter):] == shorter


@dataclass(frozen=True)
class Found:
    """A test of the baseline, and how it was matched to a test of this run."""

    test: Mapping[str, Any]
    #: "id" (the same id), "key" (the same key: pytest's rootdir differed) or "suffix" (the end of the id).
    how: str

    @property
    def nodeid(self) -> str:
        return str(self.test["nodeid"])

    def note(self, path: str) -> str | None:
        """What a reader must know about the match (None: the same id)."""
        if self.how == "key":
            return (f"matched by its key: {path} ran this test as {self.nodeid} (pytest's rootdir differed, "
                    "which the path-like arguments choose)")
        if self.how == "suffix":
            return (f"matched by the end of its id: {path} ran this test as {self.nodeid}; that baseline has no "
                    "test keys (written by an older pytest-sglang): refresh it")
        return None


class BaselineIndex:
    """The tests of a baseline report, found by id, by key, else by the end of the id."""

    def __init__(self, tests: Sequence[Mapping[str, Any]]) -> None:
        self.tests = list(tests)
        self._by_id = {str(t["nodeid"]): t for t in self.tests}
        self._by_key: dict[str, list[Mapping[str, Any]]] = {}
        for test in self.tests:
            if test.get("key"):
                self._by_key.setdefault(str(test["key"]), []).append(test)
        self._keyless = [t for t in self.tests if not t.get("key")]

    def find(self, nodeid: str, key: str | None = None) -> Found | None:
        """The baseline's record of this run's test ``nodeid`` (with its ``key``), or None.

        An ambiguous match (two baseline tests fit equally) is no match: comparing with the wrong
        test would be worse than a visible "not compared".
        """
        if nodeid in self._by_id:
            return Found(self._by_id[nodeid], "id")
        same_key = self._by_key.get(key, []) if key else []
        if len(same_key) == 1:
            return Found(same_key[0], "key")
        by_suffix = [t for t in (same_key or self._keyless) if same_by_suffix(str(t["nodeid"]), nodeid)]
        return Found(by_suffix[0], "suffix" if not same_key else "key") if len(by_suffix) == 1 else None
