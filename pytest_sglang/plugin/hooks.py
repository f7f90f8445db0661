"""The pytest plugin (entry point ``sglang``). Thin: hooks only; the engine lives elsewhere.

Fixtures come from :mod:`pytest_sglang.plugin.fixtures`, marker handling from :mod:`pytest_sglang.plugin.markers`,
option resolution from :mod:`pytest_sglang.plugin.settings`. pytest imports this module in every run of
every project where the package is installed, so it imports only the option table and the fixture
definitions; the server pool, the report session, the engine and httpx are imported inside the hooks
that need them, and only when a run uses SGLang (``benchmarks/bench_plugin_cost.py`` measures it).
Nothing here or at configure time needs a POSIX-only module: the plugin loads on Windows too.
"""

from __future__ import annotations

import signal
import threading
import types
from collections.abc import Callable, Generator
from typing import Any, Protocol, cast, runtime_checkable

import pytest

from pytest_sglang.plugin import markers, settings
from pytest_sglang.plugin.fixtures import (  # noqa: F401  (fixtures are found by name on the plugin module)
    sglang_ab,
    sglang_client,
    sglang_fleet,
    sglang_gate,
    sglang_load,
    sglang_server,
    sglang_server_factory,
    sglang_server_info,
)
from pytest_sglang.plugin.keys import POOL_KEY, SETTINGS_KEY
from pytest_sglang.plugin.markers import _sglang_markers  # noqa: F401  (added to gate-marked tests)
from pytest_sglang.plugin.xdist import is_worker, worker_input

__all__ = ["SETTINGS_KEY", "resolve_settings"]

#: A signal handler as ``signal.signal`` takes and returns it.
_Handler = Callable[[int, types.FrameType | None], object] | int | signal.Handlers | None
#: (the handler before ours, ours): restored at unconfigure unless someone chained onto ours.
_SIGTERM_KEY = pytest.StashKey[tuple[_Handler, _Handler]]()

# Everything about an option (help with its default, ini type) comes from its row in settings.OPTIONS;
# the same text serves the CLI flag and the ini key (one name per setting, STYLE habit 7).


def _addini(parser: pytest.Parser, option: settings.Option) -> None:
    try:
        parser.addini(option.name, option.help_text, type=option.ini_type, default=None)
    except (AssertionError, TypeError, ValueError):
        # pytest < 9.2 has no union ini types: strings only (numbers must be quoted in TOML).
        parser.addini(option.name, option.help_text, type=cast(Any, option.ini_type_fallback), default=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang", "SGLang server acceptance gates (pytest-sglang)")
    for option in settings.OPTIONS:
        text = option.help_text.replace("%", "%%")  # argparse %-formats help strings
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
    if not (resolved.secrets() or resolved.env_dict or resolved.launch_args):
        return  # nothing to mask: a run that does not use SGLang does not import the scrubber
    from pytest_sglang import redaction

    for secret in resolved.secrets():  # every option row marked secret
        redaction.register(secret)
    redaction.register_env(resolved.env_dict)
    if resolved.launch_args:
        # Reading them builds SGLang's flag reader (~40-100 ms): only runs that launch pay for it, not
        # every pytest run on a machine whose environment holds SGLANG_API_KEY.
        from pytest_sglang.sglang import masks

        # The command's own flags too: SGLang reads a key given only in --sglang-command the same way.
        masks.register_launch_args([*(resolved.sglang_command or ()), *resolved.launch_args])


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists: --sglang-kill and reaping print
def pytest_configure(config: pytest.Config) -> None:
    resolved = resolve_settings(config)
    _register_secrets(resolved)
    config.stash[SETTINGS_KEY] = resolved
    markers.register(config)
    if config.getoption("collectonly"):
        return  # --collect-only starts nothing and writes no report
    handed = worker_input(config)
    if handed is None:  # the controller checks once; a usage error would crash a worker
        _check_paths(config, resolved)
    _install_sigterm(config)
    _register_pool(config, resolved)


def _check_paths(config: pytest.Config, resolved: settings.Settings) -> None:
    from pytest_sglang.plugin.paths import check_output_paths
    from pytest_sglang.plugin.rootdir import check_separate_path_values

    invocation = config.invocation_params
    try:
        check_separate_path_values(invocation.args, invocation.dir, config.rootpath)
        check_output_paths(resolved, invocation.dir)
    except settings.ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _register_pool(config: pytest.Config, resolved: settings.Settings) -> None:
    """The server pool, the report session and (on an xdist controller) the hand-over to workers."""
    from pytest_sglang import ledger
    from pytest_sglang.plugin.pool import ServerPool
    from pytest_sglang.plugin.report_session import ReportSession

    ledger.reset()  # the summary counts what this run sent (an in-process pytester run starts afresh)
    handed = worker_input(config)
    if resolved.sglang_suggest_floors and handed is None:  # workers send their suggestions with the reports
        from pytest_sglang.plugin.floors import FLOORS_KEY, FloorSuggestions
        from pytest_sglang.plugin.paths import floors_path

        suggestions = FloorSuggestions(resolved.sglang_suggest_floors_margin,
                                       floors_path(resolved, config.invocation_params.dir))
        config.stash[FLOORS_KEY] = suggestions
        config.pluginmanager.register(suggestions, "sglang-floors")
    session = ReportSession(config, resolved)  # first: a bad baseline is a usage error before any work
    pool = ServerPool(config, resolved, worker_input=handed)
    pool.report_session = session
    config.stash[POOL_KEY] = pool
    config.pluginmanager.register(pool, "sglang-pool")
    config.pluginmanager.register(session, "sglang-report")
    if handed is None and resolved.mode == "launch":
        # Leftovers of a SIGKILLed run hold GPU memory the new launch needs. Only then: importing
        # the engine and scanning processes would slow down every other pytest run.
        pool.reap_dead_runs()
    if config.pluginmanager.hasplugin("xdist") and handed is None:
        from pytest_sglang.plugin.xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(pool), "sglang-xdist")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--sglang-kill`` stops the leftovers and ends the run here: no session, no tests.

    Ending it from ``pytest_configure`` with ``pytest.exit`` made pytest print ``_pytest.outcomes.Exit``.
    """
    if not resolve_settings(config).sglang_kill:
        return None
    from pytest_sglang.plugin.header import kill_leftovers_text

    print(kill_leftovers_text(), flush=True)
    return int(pytest.ExitCode.OK)


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    resolved = config.stash.get(SETTINGS_KEY, None)
    if resolved is None or is_worker(config):
        return
    if resolved.notes and (config.get_verbosity() < 0 or config.option.no_header):
        for note in resolved.notes:  # the header that says them was not shown (-q, --no-header)
            terminalreporter.write_line(f"sglang: {note}")
    if resolved.mode is None:
        return
    from pytest_sglang.plugin.first_run import next_steps, what_was_done

    done = what_was_done()
    if done is not None:
        terminalreporter.write_line(done)
    if resolved.sglang_suggest_floors:
        _suggested_floors(terminalreporter, config)
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:  # a first run: say what to run next
        for line in next_steps(resolved):
            terminalreporter.write_line(line)


def _suggested_floors(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    from pytest_sglang.plugin.floors import FLOORS_KEY

    suggestions = config.stash.get(FLOORS_KEY, None)
    if suggestions is None:
        return
    for line in suggestions.lines():
        terminalreporter.write_line(line)
    if suggestions.failure is not None:
        terminalreporter.write_line(suggestions.failure, red=True, bold=True)
    elif suggestions.written is not None:
        terminalreporter.write_line(f"sglang suggested floors JSON: {suggestions.written}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    resolved = config.stash.get(SETTINGS_KEY, None)
    if resolved is None:
        return []
    from pytest_sglang.plugin.header import header_lines

    return header_lines(config, resolved)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    resolved = config.stash.get(SETTINGS_KEY, None)
    if resolved is not None and resolved.sglang_golden is not None:  # one more test: golden outputs
        from pytest_sglang.plugin.golden_item import add_golden_item

        add_golden_item(session, items, resolved, usage_error=not is_worker(config))
    markers.validate_items(items, usage_error=not is_worker(config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.user_properties:  # imported only by runs that record something (the scrubber, the outcomes)
        from pytest_sglang.plugin import results

        # One mask for every writer of user_properties (JUnit names included), before any of them reads them.
        report.user_properties = results.mask_properties(report.user_properties)
    if call.excinfo is None or POOL_KEY not in item.config.stash:
        return report  # no pool: no server start can have failed
    from pytest_sglang.plugin.pool import ServerStartFailed

    if isinstance(call.excinfo.value, ServerStartFailed):
        call.excinfo.value.shown = True  # later tests get the one-line reference
        _shorten_summary_line(report)
    return report


class _Crash(Protocol):
    message: str


@runtime_checkable
class _CrashRepr(Protocol):
    """The part of pytest's exception repr the short summary reads (its class is not public API)."""

    reprcrash: _Crash | None


def _shorten_summary_line(report: pytest.TestReport) -> None:
    """Keep the start-up diagnosis shown once.

    With CI=true pytest's short summary prints the whole crash message (not truncated), which would
    repeat the diagnosis; keep only its headline there.
    """
    longrepr = report.longrepr
    if isinstance(longrepr, _CrashRepr) and longrepr.reprcrash is not None:
        longrepr.reprcrash.message = longrepr.reprcrash.message.split("\n", 1)[0]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    markers.assert_gates(item)  # judges only tests that measured or recorded a gate
    return result
