"""Configure-time checks of the paths a run will write (reports, server logs).

A report is written at the very end of the run: a path that cannot be written would otherwise turn a
green run red with a traceback after every test has passed. Each check tries what the run will do
(create a file in the nearest existing directory), so a read-only mount or missing permission shows
up even where ``os.access`` would say yes (as root). Nothing is created or left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.files import check_creatable, check_writable
from pytest_sglang.plugin.settings import Settings

#: The suggested floors' file when no ``--sglang-report`` names a folder for it.
FLOORS_FILE = "sglang-suggested-floors.json"


def floors_path(settings: Settings, invocation_dir: Path) -> Path:
    """Where ``--sglang-suggest-floors`` writes its JSON: next to the JSON report, else where pytest started."""
    if settings.sglang_report:
        return Path(settings.sglang_report).with_suffix(".floors.json")
    return invocation_dir / FLOORS_FILE


def check_output_paths(settings: Settings, invocation_dir: Path | None = None) -> None:
    """Raise :class:`ConfigError` naming the option, the path and the fix for the first unwritable path.

    ``invocation_dir``: where pytest was started (the suggested floors' default folder); the current one if None.
    """
    files = ((settings.sglang_report, "sglang_report", "the JSON report"),
             (settings.sglang_markdown, "sglang_markdown", "the Markdown summary"),
             (settings.sglang_html, "sglang_html", "the HTML report"))
    for path, name, what in files:
        if path is not None:
            _check_file(path, _where(settings, name), what)
    if settings.sglang_markdown is None and settings.mode is not None and os.environ.get("GITHUB_STEP_SUMMARY"):
        # GitHub's step summary is the Markdown default of runs with a server; say now if it cannot be written.
        _check_file(os.environ["GITHUB_STEP_SUMMARY"], "env GITHUB_STEP_SUMMARY", "the Markdown summary")
    if settings.sglang_log_dir is not None:
        _check_dir(settings.sglang_log_dir, _where(settings, "sglang_log_dir"))
    if settings.sglang_profile_on_failure is not None:
        _check_dir(settings.sglang_profile_on_failure, _where(settings, "sglang_profile_on_failure"),
                   "the profiler traces of failed gates")
    if settings.sglang_suggest_floors:
        _check_floors(floors_path(settings, invocation_dir or Path.cwd()), _where(settings, "sglang_suggest_floors"))


def _where(settings: Settings, name: str) -> str:
    """The option as the user gave it: ``--sglang-report``, ``env PYTEST_SGLANG_REPORT`` or the ini key."""
    source = settings.describe_source(name)
    return {"cli": "--" + name.replace("_", "-"), "ini": f"ini option {name}"}.get(source, source)


def _check_file(text: str, where: str, what: str) -> None:
    check_writable(text, option=where, what=what)


def _check_floors(path: Path, where: str) -> None:
    try:
        check_writable(path, option=where, what="the suggested floors")
    except ConfigError as exc:
        raise ConfigError(where, str(path), f"the suggested floors' file {exc.problem}",
                          "start pytest in a writable directory, or give --sglang-report PATH (the floors go next "
                          "to it, as PATH with the suffix .floors.json)") from None


def _check_dir(text: str, where: str, what: str = "the server logs") -> None:
    path = Path(text)
    fix = f"give {where} a writable directory (or one that can be created) for {what}"
    if path.exists() and not path.is_dir():
        raise ConfigError(where, text, "is a file, not a directory", fix)
    check_creatable(path, option=where, value=text, fix=fix)
