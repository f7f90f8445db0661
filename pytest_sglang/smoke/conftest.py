"""Fixtures of the smoke suite, and the baseline it writes for the next run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.acceptance.conftest import sglang_acceptance  # noqa: F401  (the API-shape checks' context)
from pytest_sglang.plugin.report_session import get_session

#: Where the smoke run's JSON report (the next run's ``--sglang-baseline``) goes without --sglang-report.
BASELINE_NAME = "sglang-smoke-baseline.json"


def pytest_configure(config: pytest.Config) -> None:
    """Write this run's JSON report as the baseline for the next one.

    Only when the user chose no report path and compares with no baseline (a baseline they manage is
    not overwritten); the path is in the terminal summary.
    """
    session = get_session(config)
    if session is None or session.settings.sglang_report or session.settings.sglang_baseline:
        return
    session.default_report(str(Path(config.invocation_params.dir) / BASELINE_NAME))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    session = get_session(config)
    if session is None:
        return
    written = [path for kind, path in session.written if kind == "JSON"]
    if written:
        terminalreporter.write_line(f"sglang smoke: next time, compare with this run: "
                                    f"pytest --pyargs pytest_sglang.smoke ... --sglang-baseline {written[0]}")
    elif not session.settings.sglang_report and exitstatus != pytest.ExitCode.OK:
        terminalreporter.write_line(f"sglang smoke: no baseline written ({BASELINE_NAME}): this run did not pass")
