"""ReportSession: the pytest plugin object that turns records into the summary and report files.

The plugin registers one instance in ``pytest_configure`` (``config.pluginmanager.register``) and
calls :meth:`ReportSession.server_started` with the server handle. On the controller (or without
xdist) it collects records from every phase report; on xdist workers it only serves baselines
(:func:`baseline_outcome`), because worker reports reach the controller with their properties.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.plugin.settings import Settings
from pytest_sglang.report import json_report, markdown, terminal
from pytest_sglang.report.baseline import BaselineContext, open_baseline, parse_limits
from pytest_sglang.report.fingerprint import fingerprint
from pytest_sglang.report.identity import ServerIdentity, identify
from pytest_sglang.report.records import START_NODEID, RecordCollector, TestRecord

SESSION_KEY = pytest.StashKey["ReportSession"]()


class ReportSession:
    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.collector = RecordCollector()
        self.identity: ServerIdentity | None = None
        self.notes: list[str] = []
        self.written: list[tuple[str, Path]] = []
        self.report: dict[str, Any] | None = None
        self._started = time.monotonic()
        self._start_record: TestRecord | None = None
        # Parse at the boundary: a bad limit or baseline path is a usage error before any launch.
        self.baseline: BaselineContext | None = None
        try:
            parse_limits(settings.sglang_max_regression)
            if settings.sglang_baseline:
                self.baseline = open_baseline(settings.sglang_baseline, settings.sglang_max_regression,
                                              settings.sglang_baseline_strict)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[SESSION_KEY] = self

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- called by the plugin -------------------------------------------------------------
    def server_started(self, server: Any, runner: str | None = None) -> ServerIdentity:
        """Record the server's identity (``runner`` overrides an xdist worker's "attach" view)."""
        self.identity = identify(server)
        if runner is not None:
            self.identity.runner = runner
        self._start_record = _start_record(self.identity, getattr(server, "config", None))
        return self.identity

    def server_failed(self, error: BaseException) -> None:
        """The server could not start: the start itself is a failed record."""
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        outcome = GateOutcome("startup", [compare("startup", "ready", False, "==", True, source="log",
                                                  detail=first[:300])])
        self._start_record = TestRecord(START_NODEID, outcome="error", message=first[:300], gates=[outcome])

    def baseline_outcome(self, nodeid: str, loads: Sequence[dict[str, Any]],
                         outcomes: Sequence[GateOutcome] = ()) -> GateOutcome | None:
        """The regression (and, strict, fingerprint) outcome for one test, or None."""
        if self.baseline is None:
            return None
        if not self.baseline.measures(loads, outcomes):
            return None
        result = self.baseline.outcome(nodeid, loads, outcomes)
        strict = self.baseline.fingerprint_outcome(nodeid, fingerprint(self.identity))
        if strict is not None and result is not None:
            result.checks[:0] = strict.checks
            result.notes[:0] = strict.notes
            return result
        return strict if strict is not None else result

    # -- pytest hooks ---------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.is_worker:
            self.collector.add_report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            return
        report = self.build(int(exitstatus))
        s = self.settings
        if s.sglang_report:
            self.written.append(("JSON", json_report.write_json(report, s.sglang_report,
                                                                requests=s.sglang_report_requests)))
        md_path, append = s.sglang_markdown, False
        if md_path is None and os.environ.get("GITHUB_STEP_SUMMARY"):
            md_path, append = os.environ["GITHUB_STEP_SUMMARY"], True
        if md_path:
            self.written.append(("Markdown", markdown.write_markdown(report, md_path, append=append)))
        if s.sglang_html:
            from pytest_sglang.report import html

            self.written.append(("HTML", html.write_html(report, s.sglang_html)))

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if self.is_worker:
            return
        report = self.report or self.build(int(exitstatus))
        if not report["records"] and report["server"] is None:
            return
        terminalreporter.write_sep("=", "sglang gates")
        for line in terminal.render(report):
            terminalreporter.write_line(line)
        for kind, path in self.written:
            terminalreporter.write_line(f"sglang {kind} report: {path}")

    # -- building -------------------------------------------------------------------------
    def tests(self) -> list[TestRecord]:
        tests = self.collector.records()
        return ([self._start_record] if self._start_record is not None else []) + tests

    def build(self, exitstatus: int | None = None) -> dict[str, Any]:
        baseline = None
        if self.baseline is not None:
            baseline = {"path": self.baseline.path, "strict": self.baseline.strict,
                        "limits": dict(self.baseline.limits.per_metric),
                        "fingerprint_differences": self.baseline.fingerprint_diff(fingerprint(self.identity))
                        if self.identity is not None else []}
        self.report = json_report.build_report(
            self.tests(), self.identity, duration_s=time.monotonic() - self._started, exitstatus=exitstatus,
            baseline=baseline, notes=self.notes)
        return self.report


def _start_record(identity: ServerIdentity, config: Any) -> TestRecord | None:
    """The server start as a record: ready time against the startup deadline (launch modes only)."""
    timeout = getattr(config, "startup_timeout_s", None)
    # Attached (also an xdist worker's view of the controller's launch): nothing of ours was timed.
    if identity.ready_s is None or not isinstance(timeout, (int, float)):
        return None
    check = compare("startup", "ready_s", round(identity.ready_s, 3), "<=", timeout, unit="s", source="log",
                    detail=f"{len(identity.phases)} phases, see the startup timeline")
    return TestRecord(START_NODEID, gates=[GateOutcome("startup", [check])])


def wants_requests(settings: Settings) -> bool:
    """Whether loads should carry per-request records in ``user_properties`` (JSON with
    --sglang-report-requests, exact latency CDFs in the HTML report)."""
    return bool(settings.sglang_report_requests or settings.sglang_html)


def get_session(config: pytest.Config) -> ReportSession | None:
    return config.stash.get(SESSION_KEY, None)


def baseline_outcome(session: ReportSession | pytest.Config, nodeid: str, loads: Sequence[dict[str, Any]],
                     outcomes: Sequence[GateOutcome] = ()) -> GateOutcome | None:
    """For the plugin's call phase: the baseline outcome of one test (raise its message if failed)."""
    report_session = session if isinstance(session, ReportSession) else get_session(session)
    if report_session is None:
        return None
    return report_session.baseline_outcome(nodeid, loads, outcomes)
