"""The ``golden outputs`` test that ``--sglang-golden PATH`` adds to a run.

One extra item, collected from the recording itself as a ``pytest_collect_file`` hook would collect
a file: ``golden.json::golden outputs``, appended after the run's own tests (so ``-k golden``
selects it). It compares the server under test (the ``sglang_server`` fixture) with the recording,
with the limits ``--sglang-golden-min-match`` and ``--sglang-golden-max-logprob-delta``
(:mod:`pytest_sglang.gates.correctness.golden` judges), and records its outcome like a gate marker's, so the
terminal summary and every report show it. A recording that is missing or malformed is a usage error
at collection, before any server starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.plugin.keys import SETTINGS_KEY

if TYPE_CHECKING:
    from pytest_sglang.plugin.load_runner import LoadRunner
    from pytest_sglang.plugin.results import GateResults
    from pytest_sglang.plugin.settings import Settings
    from pytest_sglang.server.members import Handle

__all__ = ["NAME", "GoldenFile", "GoldenItem", "add_golden_item"]

NAME = "golden outputs"
#: On the item: the recording, or why it could not be read (an xdist worker cannot raise a usage error).
_DOC_KEY = pytest.StashKey["dict[str, Any] | ConfigError"]()
_LIMITS = ("--sglang-golden-min-match", "--sglang-golden-max-logprob-delta")


def golden_outputs(request: pytest.FixtureRequest, sglang_server: Handle, sglang_load: LoadRunner,
                   sglang_gate: GateResults) -> None:
    """The server under test answers like the recording given with --sglang-golden."""
    from pytest_sglang.gates.correctness.golden import DEFAULT_TIMEOUT_S, evaluate_golden

    doc = request.node.stash[_DOC_KEY]
    if isinstance(doc, ConfigError):
        pytest.fail(str(doc), pytrace=False)
    settings = request.config.stash[SETTINGS_KEY]
    # Batch size 1, as when recorded: no other load of the run may share the server's batch meanwhile.
    with sglang_load.lock():
        outcome = evaluate_golden(sglang_server, doc, source=str(settings.sglang_golden),
                                  min_match=settings.sglang_golden_min_match,
                                  max_logprob_delta=settings.sglang_golden_max_logprob_delta,
                                  timeout_s=settings.sglang_request_timeout or DEFAULT_TIMEOUT_S, names=_LIMITS)
    sglang_gate.record(outcome)  # judged after this body, like a gate marker's outcome


class GoldenItem(pytest.Function):
    """The ``golden outputs`` test: a function item, so it gets the plugin's fixtures like any test."""

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # Point at the recording, not at the plugin module that defines the test function.
        return self.path, None, NAME


class GoldenFile(pytest.File):
    """The recording, as the collector of its one test."""

    def collect(self) -> Iterator[GoldenItem]:
        yield GoldenItem.from_parent(self, name=NAME, callobj=golden_outputs)


def _where(settings: Settings) -> str:
    source = settings.describe_source("sglang_golden")
    return "--sglang-golden" if source == "cli" else f"--sglang-golden (from {source})"


def add_golden_item(session: pytest.Session, items: list[pytest.Item], settings: Settings, *,
                    usage_error: bool = True) -> None:
    """Append the ``golden outputs`` item for ``--sglang-golden``; a bad recording is a usage error.

    In an xdist worker (``usage_error=False``) a usage error would crash the worker, so the item
    fails with the same message instead.
    """
    from pytest_sglang.gates.correctness.golden import load_golden

    path = settings.sglang_golden
    assert path is not None
    # Like an ini path: a relative one not found here is looked for under the rootdir.
    if not Path(path).is_absolute() and not Path(path).exists() and (session.config.rootpath / path).exists():
        path = str(session.config.rootpath / path)
    loaded: dict[str, Any] | ConfigError
    try:
        loaded = load_golden(path)
    except ConfigError as exc:
        loaded = ConfigError(_where(settings), path, exc.problem, exc.fix)
        if usage_error:
            raise pytest.UsageError(str(loaded)) from None
    collector = GoldenFile.from_parent(session, path=Path(path).absolute())
    # Collected through the collection hooks, so the terminal counts it and other plugins see it.
    session.ihook.pytest_collectstart(collector=collector)
    report: pytest.CollectReport = session.ihook.pytest_make_collect_report(collector=collector)
    session.ihook.pytest_collectreport(report=report)
    for item in report.result:
        if isinstance(item, GoldenItem):
            item.stash[_DOC_KEY] = loaded
            items.append(item)
