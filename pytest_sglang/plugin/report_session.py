"""ReportSession: the pytest plugin object that turns records into the summary and report files.

The plugin registers one instance in ``pytest_configure`` (``config.pluginmanager.register``) and
calls :meth:`ReportSession.server_started` with the server handle. On the controller (or without
xdist) it collects records from every phase report; on xdist workers it only serves baselines
(:func:`baseline_outcome`), because worker reports reach the controller with their properties.

The renderers and the baseline are imported when they are used (at the end of the run, or when a
baseline is given), so a run that uses no SGLang server pays only for collecting records.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import GateOutcome, compare
from pytest_sglang.plugin.settings import Settings
from pytest_sglang.plugin.xdist import is_worker
from pytest_sglang.report.records import START_NODEID, RecordCollector, TestRecord

if TYPE_CHECKING:
    from pytest_sglang.report.baseline import BaselineContext
    from pytest_sglang.report.baseline_scope import Scope
    from pytest_sglang.report.identity import ServerIdentity
    from pytest_sglang.server import LaunchConfig
    from pytest_sglang.server.members import Handle

SESSION_KEY = pytest.StashKey["ReportSession"]()


class ReportSession:
    """Collects the gate records of the run; writes the reports and the terminal section at its end."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.collector = RecordCollector()
        self.identity: ServerIdentity | None = None
        #: The fleet behind the gateway (report data), None for a single server.
        self.fleet: dict[str, Any] | None = None
        self._server: Handle | None = None
        self.notes: list[str] = []
        self.written: list[tuple[str, Path]] = []
        self.report: dict[str, Any] | None = None
        self.failed_writes: list[str] = []
        #: Ctrl-C, SIGTERM or a plugin stopped the run: its summary must not say PASSED.
        self.interrupted = False
        self._started = time.monotonic()
        self._start_record: TestRecord | None = None
        #: Where the JSON report goes when --sglang-report is not given (the smoke suite's baseline).
        self._default_report: str | None = None
        # Parse at the boundary: a bad limit or baseline path is a usage error before any launch.
        self.baseline: BaselineContext | None = None
        if settings.sglang_baseline or settings.sglang_max_regression:
            self.baseline = _open_baseline(settings)
        if settings.sglang_max_regression and not settings.sglang_baseline:
            # Not an error (an ini file may set the limit for runs that have a baseline), but never silent.
            self.notes.append(f"--sglang-max-regression {settings.sglang_max_regression} has no baseline: nothing "
                              "was compared (give --sglang-baseline PATH, a JSON report of an earlier run)")
        config.stash[SESSION_KEY] = self

    @property
    def is_worker(self) -> bool:
        return is_worker(self.config)

    # -- called by the plugin -------------------------------------------------------------
    def default_report(self, path: str) -> None:
        """Write the JSON report to ``path`` unless ``--sglang-report`` names another one.

        Only after a run that passed: a failed run must not replace a good baseline.
        """
        self._default_report = path

    def server_started(self, server: Handle, runner: str | None = None) -> ServerIdentity:
        """Record the server's identity (``runner`` overrides an xdist worker's "attach" view)."""
        # From the fleet layer, not the gates: they import the load generator (aiohttp...), ~1 s on a busy
        # machine between the server's first /health 200 and the first test body.
        from pytest_sglang.fleet.handle import fleet_of
        from pytest_sglang.report.identity import identify

        self.identity = identify(server, runner)
        self._start_record = _start_record(self.identity, server.config)
        if fleet_of(server) is not None and not self.is_worker:  # the controller reports; workers only attach
            from pytest_sglang.report.fleet import identify_fleet

            self.fleet, self._server = identify_fleet(server), server
        return self.identity

    def server_failed(self, error: BaseException) -> None:
        """The server could not start: the start itself is a failed record."""
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        # Attached, nothing was started: the record says the server could not be reached or used.
        gate, metric, source = (("attach", "reachable", "probes") if self.settings.mode == "attach"
                                else ("startup", "ready", "log"))
        outcome = GateOutcome(gate, [compare(gate, metric, False, "==", True, source=source, detail=first[:300])])
        self._start_record = TestRecord(START_NODEID, outcome="error", message=first[:300], gates=[outcome])

    def baseline_outcome(self, nodeid: str, loads: Sequence[dict[str, Any]],
                         outcomes: Sequence[GateOutcome] = (), scope: Scope = "measurements") -> GateOutcome | None:
        """The regression outcome for one test (strict: also another setup or workload), or None."""
        if self.baseline is None:
            return None
        from pytest_sglang.report.fingerprint import fingerprint

        return self.baseline.outcome(nodeid, loads, outcomes, fingerprint(self.identity), key=self.key(nodeid),
                                     scope=scope)

    def key(self, nodeid: str) -> str:
        """The test's id whatever pytest's rootdir (a path-like argument moves it): baselines match on it."""
        from pytest_sglang.report.baseline_file import stable_key

        return stable_key(self.config.rootpath, nodeid)

    # -- pytest hooks ---------------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Tell the baseline this session's tests (on every xdist worker too: each collects them all)."""
        if self.baseline is not None:
            self.baseline.expect((item.nodeid, self.key(item.nodeid)) for item in session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.is_worker:
            self.collector.add_report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.is_worker:
            return
        self.interrupted = _interrupted(session, int(exitstatus))
        s = self.settings
        md_path, append = s.sglang_markdown, False
        if md_path is None and os.environ.get("GITHUB_STEP_SUMMARY") and self.has_content():
            # The job's shared step summary gets a section only from runs that measured something.
            md_path, append = os.environ["GITHUB_STEP_SUMMARY"], True
        json_path = s.sglang_report or (self._default_report if exitstatus == pytest.ExitCode.OK else None)
        if not (json_path or md_path or s.sglang_html):
            return  # nothing to write: the renderers are not even imported
        report = self.build(int(exitstatus))
        if json_path:
            from pytest_sglang.report import json_report

            requests = s.sglang_report_requests
            self._write("JSON", json_path, lambda p: json_report.write_json(report, p, requests=requests))
        if md_path:
            from pytest_sglang.report import markdown

            self._write("Markdown", md_path, lambda p: markdown.write_markdown(report, p, append=append))
        if s.sglang_html:
            from pytest_sglang.report import html

            self._write("HTML", s.sglang_html, lambda p: html.write_html(report, p))
        if self.failed_writes and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a green run whose report is missing is not green

    def _write(self, kind: str, target: str, write: Callable[[str], Path]) -> None:
        """Write one report; a failure is a line in the summary (and a failed run), not a traceback.

        The path was checked writable at start; it can still fail since (e.g. a full disk).
        """
        try:
            self.written.append((kind, write(target)))
        except OSError as exc:
            self.failed_writes.append(f"sglang: could not write the {kind} report to {target}: "
                                      f"{exc.strerror or type(exc).__name__}")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, exitstatus: int,
                                config: pytest.Config) -> None:
        if self.is_worker:
            return
        for line in self.failed_writes:
            terminalreporter.write_line(redaction.scrub(line), red=True, bold=True)
        if not self.has_content():
            return  # a run that used no server and measured nothing gets no section
        from pytest_sglang.report import terminal

        report = self.report or self.build(int(exitstatus))
        terminalreporter.write_sep("=", "sglang gates")
        for line in terminal.render(report):
            terminalreporter.write_line(line)
        for kind, path in self.written:
            terminalreporter.write_line(f"sglang {kind} report: {path}")

    # -- building -------------------------------------------------------------------------
    def has_content(self) -> bool:
        """Whether the run started (or failed to start) a server or left any gate check."""
        return (self.identity is not None or self._start_record is not None
                or any(t.rows() or any(g.unchecked for g in t.gates) for t in self.collector.records()))

    def tests(self) -> list[TestRecord]:
        tests = self.collector.records()
        for test in tests:
            test.key = test.key or self.key(test.nodeid)
        return ([self._start_record] if self._start_record is not None else []) + tests

    def build(self, exitstatus: int | None = None) -> dict[str, Any]:
        from pytest_sglang.report import json_report
        from pytest_sglang.report.fingerprint import fingerprint

        candidate = fingerprint(self.identity) if self.identity is not None else None
        baseline = None
        if self.baseline is not None:
            measured = [(t.nodeid, t.key) for t in self.tests() if self.baseline.measures(t.loads, t.gates)]
            baseline = self.baseline.summary(candidate, measured)
        if self.fleet is not None and self._server is not None:
            from pytest_sglang.report.fleet import refresh_health

            refresh_health(self._server, self.fleet)  # did the run leave every worker healthy?
            self._server = None  # once: the terminal summary reuses this report
        self.report = json_report.build_report(
            self.tests(), self.identity, duration_s=time.monotonic() - self._started, exitstatus=exitstatus,
            baseline=baseline, notes=self.notes, interrupted=self.interrupted, fleet=self.fleet,
            run_label=self.settings.sglang_run_label)
        return self.report


def _open_baseline(settings: Settings) -> BaselineContext | None:
    """Parse at the boundary: a bad limit or baseline file is a usage error before any launch."""
    from pytest_sglang.report.baseline import open_baseline, parse_limits

    try:
        parse_limits(settings.sglang_max_regression)
        if not settings.sglang_baseline:
            return None
        return open_baseline(settings.sglang_baseline, settings.sglang_max_regression,
                             settings.sglang_baseline_strict)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _interrupted(session: pytest.Session, exitstatus: int) -> bool:
    """Tell whether the run ended with tests unrun.

    Ctrl-C and SIGTERM (the plugin turns it into KeyboardInterrupt) end with INTERRUPTED; a stop
    requested without a failure (``session.shouldstop`` with a green exit status) also left tests unrun.
    """
    return exitstatus == pytest.ExitCode.INTERRUPTED or (bool(session.shouldstop) and exitstatus == 0)


def _start_record(identity: ServerIdentity, config: LaunchConfig | None) -> TestRecord | None:
    """The server start as a record: ready time against the startup deadline (launch modes only)."""
    # Attached (also an xdist worker's view of the controller's launch): nothing of ours was timed.
    if identity.ready_s is None or config is None:
        return None
    timeout = config.startup_timeout_s
    check = compare("startup", "ready_s", round(identity.ready_s, 3), "<=", timeout, unit="s", source="log",
                    detail=f"{len(identity.phases)} phases, see the startup timeline")
    return TestRecord(START_NODEID, gates=[GateOutcome("startup", [check])])


def wants_requests(settings: Settings) -> bool:
    """Tell whether loads should carry per-request records in ``user_properties``.

    They are needed for JSON with --sglang-report-requests and exact latency CDFs in the HTML report.
    """
    return bool(settings.sglang_report_requests or settings.sglang_html)


def get_session(config: pytest.Config) -> ReportSession | None:
    return config.stash.get(SESSION_KEY, None)


def baseline_outcome(session: ReportSession | pytest.Config, nodeid: str, loads: Sequence[dict[str, Any]],
                     outcomes: Sequence[GateOutcome] = (), scope: Scope = "measurements") -> GateOutcome | None:
    """For the plugin's call phase: the baseline outcome of one test (raise its message if failed)."""
    report_session = session if isinstance(session, ReportSession) else get_session(session)
    if report_session is None:
        return None
    return report_session.baseline_outcome(nodeid, loads, outcomes, scope)
