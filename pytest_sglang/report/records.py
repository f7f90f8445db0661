"""Measurement records: what the plugin leaves in ``user_properties``, read back on the controller.

The plugin stores, per test, ``("sglang_outcome", json)`` (a :class:`GateOutcome`), readable
``("sglang.<gate>.<metric>", value)`` figures and ``("sglang_load", json)`` load results (SGLang
bench_serving key names). ``user_properties`` travel from xdist workers to the controller with
each phase report, so everything here is rebuilt from plain data and never from the item.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_sglang.gates.base import Check, GateOutcome
from pytest_sglang.redaction import clean_text, scrub

OUTCOME_PROP = "sglang_outcome"
LOAD_PROP = "sglang_load"
SERVER_PROP = "sglang_server"
READABLE_PREFIX = "sglang."
#: The pseudo-test that holds the server-start record: a row of the table, never a counted test.
START_NODEID = "sglang server start"

#: Keys of a LoadSpec that describe a load's shape (what was asked), as opposed to what was measured.
SPEC_KEYS = ("api", "concurrency", "request_rate", "requests", "input_len", "output_len", "dataset")
#: The same, in SGLang bench_serving's result names (its top-level ``concurrency`` is a measurement).
BENCH_KEYS = ("backend", "max_concurrency", "request_rate", "num_prompts", "random_input_len",
              "random_output_len", "dataset_name")


@dataclass(frozen=True)
class Row:
    """One measurement record: a check of one test, flattened for tables."""

    nodeid: str
    check: Check
    #: The load shape where one ran (e.g. "concurrency=8 requests=64 in/out=128/32"), else "".
    load_shape: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"nodeid": self.nodeid, **self.check.to_dict(), "load_shape": self.load_shape}


@dataclass
class TestRecord:
    """Everything one test left for the reports (merged over its setup/call/teardown reports)."""

    nodeid: str
    outcome: str = "passed"  # passed | failed | error | skipped
    duration_s: float = 0.0
    message: str = ""
    worker: str | None = None
    gates: list[GateOutcome] = field(default_factory=list)
    loads: list[dict[str, Any]] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] | None = None
    #: False while only its setup has reported: a run interrupted there never ran the test body.
    ran: bool = True
    #: The id whatever pytest's rootdir (:func:`.baseline_file.stable_key`); "" when not known.
    key: str = ""
    _seen: set[tuple[str, str]] = field(default_factory=set, repr=False)

    def rows(self) -> list[Row]:
        shape = load_shape(self.loads[0]) if len(self.loads) == 1 else (
            f"{len(self.loads)} load runs" if self.loads else "")
        return [Row(self.nodeid, c, _check_shape(g, shape)) for g in self.gates for c in g.checks]

    def add_properties(self, props: Iterable[tuple[str, object]]) -> None:
        """Merge one phase's ``user_properties`` (later phases repeat earlier ones: keep each once)."""
        for name, value in props:
            key = (name, value if isinstance(value, str) else repr(value))
            if key in self._seen:
                continue
            self._seen.add(key)
            self._add_property(name, value)

    def _add_property(self, name: str, value: object) -> None:
        if name == OUTCOME_PROP:
            self.gates.append(GateOutcome.from_dict(_json(value, name)))
        elif name == LOAD_PROP:
            self.loads.append(_json(value, name))
        elif name == SERVER_PROP:
            self.server = _json(value, name)
        elif name.startswith(READABLE_PREFIX):
            self.properties[name] = value

    def to_dict(self, *, requests: bool = False) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid, **({"key": self.key} if self.key else {}), "outcome": self.outcome,
            "duration_s": round(self.duration_s, 4),
            "message": self.message, "worker": self.worker,
            "gates": [g.to_dict() for g in self.gates],
            "loads": [strip_requests(ld) if not requests else ld for ld in self.loads],
            "properties": {k: _plain(v) for k, v in self.properties.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TestRecord:
        return cls(nodeid=data["nodeid"], key=data.get("key", ""), outcome=data.get("outcome", "passed"),
                   duration_s=float(data.get("duration_s", 0.0)), message=data.get("message", ""),
                   worker=data.get("worker"), gates=[GateOutcome.from_dict(g) for g in data.get("gates", [])],
                   loads=[dict(ld) for ld in data.get("loads", [])],
                   properties=dict(data.get("properties", {})))


class PhaseReport(Protocol):
    """What is read of a pytest ``TestReport`` (this package does not import pytest)."""

    @property
    def nodeid(self) -> str: ...
    @property
    def when(self) -> str | None: ...
    @property
    def failed(self) -> bool: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def duration(self) -> float: ...
    @property
    def user_properties(self) -> Sequence[tuple[str, object]]: ...
    @property
    def longreprtext(self) -> str: ...
    @property
    def longrepr(self) -> object: ...


class RecordCollector:
    """Collects :class:`TestRecord` objects from pytest phase reports (also those of xdist workers)."""

    def __init__(self) -> None:
        self.tests: dict[str, TestRecord] = {}

    def add_report(self, report: PhaseReport) -> TestRecord:
        record = self.tests.setdefault(report.nodeid, TestRecord(report.nodeid, ran=False))
        record.ran = record.ran or report.when != "setup"
        record.add_properties(report.user_properties)
        record.duration_s += report.duration
        # xdist sets ``node`` on the reports a worker sends: its gateway names the worker.
        gateway = getattr(getattr(report, "node", None), "gateway", None)
        if gateway is not None:
            record.worker = str(gateway.id)
        record.outcome = _merge_outcome(record.outcome, report)
        if report.failed and not record.message:
            record.message = _short_message(report)
        return record

    def records(self) -> list[TestRecord]:
        return list(self.tests.values())

    def gate_tests(self) -> list[TestRecord]:
        """Tests that left gate outcomes or loads (the rows of the summary)."""
        return [t for t in self.tests.values() if t.gates or t.loads]


def _merge_outcome(current: str, report: PhaseReport) -> str:
    if report.failed:
        return "failed" if report.when == "call" else "error"
    if report.skipped and current == "passed":
        return "skipped"
    return current


def _short_message(report: PhaseReport) -> str:
    """Return the first line of the failure, scrubbed and without control characters.

    Enough to tell a threshold miss from a crash.
    """
    text = report.longreprtext or ""
    # pytest's ExceptionRepr carries the crash line (``reprcrash``); other longreprs are plain text.
    crash = getattr(report.longrepr, "reprcrash", None)
    crash_message = str(getattr(crash, "message", "") or "")
    if crash_message:
        text = crash_message
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return clean_text(scrub(first[:300]))


def load_shape(load: Mapping[str, Any]) -> str:
    """A short description of what a load asked for (from its spec, or bench_serving's names)."""
    spec = load.get("spec")
    source, keys = (spec, SPEC_KEYS) if isinstance(spec, Mapping) else (load, BENCH_KEYS)
    parts = [f"{k}={source[k]}" for k in keys if source.get(k) is not None]
    return " ".join(parts)


def shape_key(load: Mapping[str, Any]) -> str:
    """What identifies "the same load" in another run (used to match baselines)."""
    return load_shape(load) or "default"


def strip_requests(load: Mapping[str, Any]) -> dict[str, Any]:
    """A load without its per-request records (what the JSON report keeps by default)."""
    return {k: v for k, v in load.items() if k != "records"}


def parse_properties(props: Sequence[tuple[str, object]]) -> TestRecord:
    """Read one test's ``user_properties`` (a convenience for the baseline hook and tests)."""
    record = TestRecord("")
    record.add_properties(props)
    return record


def _check_shape(gate: GateOutcome, default: str) -> str:
    shape = gate.context.get("load")
    if isinstance(shape, Mapping):
        return load_shape(shape)
    return str(shape) if shape else default


def _json(value: object, name: str) -> Any:
    if isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise ValueError(f"user property {name!r} is not JSON ({exc}): {str(value)[:80]!r}") from None


def _plain(value: object) -> Any:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
