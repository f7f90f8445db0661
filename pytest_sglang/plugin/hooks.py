"""The pytest plugin (entry point ``sglang``). Thin: hooks only; the engine lives elsewhere.

Fixtures come from :mod:`pytest_sglang.plugin.fixtures`, marker handling from :mod:`pytest_sglang.plugin.markers`,
option resolution from :mod:`pytest_sglang.plugin.settings`. Heavy modules (the server engine, httpx, the
load generator, the report package) are imported inside hooks, so loading the plugin stays cheap.
"""

from __future__ import annotations

import signal
import threading
import types
from collections.abc import Generator
from typing import Any, cast

import pytest

from pytest_sglang import redaction
from pytest_sglang.plugin import markers, settings
from pytest_sglang.plugin.fixtures import (  # noqa: F401  (fixtures are found by name on the plugin module)
    sglang_client,
    sglang_gate,
    sglang_load,
    sglang_server,
    sglang_server_factory,
    sglang_server_info,
)
from pytest_sglang.plugin.markers import _sglang_markers  # noqa: F401  (added to gate-marked tests)
from pytest_sglang.plugin.pool import POOL_KEY, ServerPool, ServerStartFailed

SETTINGS_KEY = pytest.StashKey[settings.Settings]()
_SIGTERM_KEY = pytest.StashKey[Any]()

# Help-text style: lowercase start, no trailing period, say the unit and the default. The same
# text serves the CLI flag and the ini key (one name per setting, STYLE habit 7).


def _ini_type(option: settings.Option) -> Any:
    """The addini type: values may be numbers in ``[tool.pytest]`` TOML, quoted or not."""
    if option.kind == "list":
        return "linelist"
    if option.kind in ("flag", "negatable"):
        return bool | str  # str: let settings name the ini key when the value is not a boolean
    return str | float if option.number else str


def _addini(parser: pytest.Parser, option: settings.Option) -> None:
    try:
        parser.addini(option.name, option.help, type=_ini_type(option), default=None)
    except (AssertionError, TypeError, ValueError):
        # pytest < 9.2 has no union ini types: strings only (numbers must be quoted in TOML).
        kind = "linelist" if option.kind == "list" else "string"
        parser.addini(option.name, option.help, type=cast(Any, kind), default=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang", "SGLang server acceptance gates (pytest-sglang)")
    for option in settings.OPTIONS:
        text = option.help.replace("%", "%%")  # argparse %-formats help strings
        if option.kind == "flag":
            group.addoption(option.cli, action="store_true", default=None, dest=option.name, help=text)
        elif option.kind == "negatable":
            group.addoption(option.cli, action="store_true", default=None, dest=option.name, help=text)
            group.addoption("--no-" + option.cli[2:], action="store_false", dest=option.name,
                            help=f"turn off {option.cli}")
        elif option.kind == "list":
            group.addoption(option.cli, action="append", default=None, dest=option.name,
                            metavar=option.metavar, help=text)
        else:
            group.addoption(option.cli, default=None, dest=option.name, metavar=option.metavar, help=text)
        if not option.cli_only:
            _addini(parser, option)


def resolve_settings(config: pytest.Config) -> settings.Settings:
    """CLI > env > ini > default; a bad value becomes a usage error naming where it came from."""
    cli = {o.name: config.getoption(o.name) for o in settings.OPTIONS}
    ini = {o.name: config.getini(o.name) for o in settings.OPTIONS if not o.cli_only}
    try:
        return settings.resolve(cli, ini)
    except settings.ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _register_secrets(resolved: settings.Settings) -> None:
    redaction.register(resolved.sglang_api_key)
    redaction.register_env(resolved.env_dict)
    redaction.register_launch_args(resolved.launch_args or ())


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists: --sglang-kill and reaping print
def pytest_configure(config: pytest.Config) -> None:
    resolved = resolve_settings(config)
    _register_secrets(resolved)
    config.stash[SETTINGS_KEY] = resolved
    markers.register(config)
    if resolved.sglang_kill:
        _kill_and_exit(config)
    if config.getoption("collectonly"):
        return  # --collect-only starts nothing
    _install_sigterm(config)
    worker_input = getattr(config, "workerinput", None)
    pool = ServerPool(config, resolved, worker_input=worker_input)
    config.stash[POOL_KEY] = pool
    config.pluginmanager.register(pool, "sglang-pool")
    if worker_input is None and resolved.mode == "launch":
        # Leftovers of a SIGKILLed run hold GPU memory the new launch needs. Only then: importing
        # the engine and scanning processes would slow down every other pytest run.
        pool.reap_dead_runs()
    _register_report_session(config, resolved)
    if config.pluginmanager.hasplugin("xdist") and worker_input is None:
        from pytest_sglang.plugin.pool import XdistHooks

        config.pluginmanager.register(XdistHooks(pool), "sglang-xdist")


def _register_report_session(config: pytest.Config, resolved: settings.Settings) -> None:
    try:
        from pytest_sglang.plugin.report_session import ReportSession  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return
    session = ReportSession(config, resolved)
    config.pluginmanager.register(session, "sglang-report")
    config.stash[POOL_KEY].report_session = session


def _kill_and_exit(config: pytest.Config) -> None:
    from pytest_sglang.plugin.header import kill_leftovers_text

    config.get_terminal_writer().line(kill_leftovers_text())
    pytest.exit("pytest-sglang: --sglang-kill finished; no tests were run", returncode=0)


def _install_sigterm(config: pytest.Config) -> None:
    """SIGTERM to pytest behaves like Ctrl-C, so fixtures' finalizers stop the servers."""
    if threading.current_thread() is not threading.main_thread():
        return

    def on_sigterm(signum: int, frame: types.FrameType | None) -> None:
        raise KeyboardInterrupt(f"pytest received signal {signal.Signals(signum).name}")

    config.stash[_SIGTERM_KEY] = (signal.signal(signal.SIGTERM, on_sigterm), on_sigterm)


def pytest_unconfigure(config: pytest.Config) -> None:
    pool = config.stash.get(POOL_KEY, None)
    if pool is not None:
        pool.close()
    installed = config.stash.get(_SIGTERM_KEY, None)
    if installed is None or threading.current_thread() is not threading.main_thread():
        return
    previous, ours = installed
    # Restore only if nobody chained onto ours since (the engine's handler wraps it at launch).
    if signal.getsignal(signal.SIGTERM) is ours:
        signal.signal(signal.SIGTERM, previous)


def pytest_report_header(config: pytest.Config) -> list[str]:
    resolved = config.stash.get(SETTINGS_KEY, None)
    if resolved is None:
        return []
    from pytest_sglang.plugin.header import header_lines

    return header_lines(config, resolved)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markers.validate_items(items, usage_error=not hasattr(config, "workerinput"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    if call.excinfo is not None and isinstance(call.excinfo.value, ServerStartFailed):
        call.excinfo.value.shown = True  # later tests get the one-line reference
        _shorten_summary_line(report)
    return report


def _shorten_summary_line(report: object) -> None:
    """Keep the start-up diagnosis shown once: with CI=true pytest's short summary prints the whole
    crash message (not truncated), which would repeat the diagnosis; keep only its headline there."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and "\n" in message:
        crash.message = message.split("\n", 1)[0]  # type: ignore[union-attr]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    markers.assert_gates(item)
    return result
