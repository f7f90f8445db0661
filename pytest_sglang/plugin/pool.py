# Near 440 lines: ServerPool is one lifecycle (resolve, launch or attach, reuse, stop on every exit path).
"""The run-wide pool of servers behind the fixtures (one per pytest process).

:class:`ServerPool` (registered as a plugin, kept in ``config.stash[keys.POOL_KEY]``) owns every server of
the run: the primary one behind ``sglang_server`` and the extra launches of ``sglang_server_factory``
(an identical :class:`~pytest_sglang.server.LaunchConfig` reuses its server). It stops them all at the
end of the run, on every path (normal end, failures, Ctrl-C, SIGTERM).

Under pytest-xdist the controller resolves the primary server once (launch or attach) in
``pytest_sessionstart``, before xdist starts the workers, and hands its URL to them through
``workerinput`` (:mod:`pytest_sglang.plugin.xdist`); workers attach and never launch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Protocol

import pytest

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError, LaunchConfigError, ServerStartError, SGLangError
from pytest_sglang.plugin.launch_config import for_option, launch_config, ray_options
from pytest_sglang.plugin.settings import Settings
from pytest_sglang.plugin.xdist import WorkerInput

if TYPE_CHECKING:
    from pytest_sglang.fleet.handle import Handle, SGLangFleet
    from pytest_sglang.plugin.report_session import ReportSession
    from pytest_sglang.server import LaunchConfig
    from pytest_sglang.server.handle import SGLangServer
    from pytest_sglang.server.progress import TerminalProgress
    from pytest_sglang.server.url import ServerURL

__all__ = ["ServerPool", "ServerStartFailed"]

NO_SERVER_MESSAGE = (
    "no SGLang server configured: give --sglang-url URL to attach to a running server "
    "(e.g. --sglang-url http://127.0.0.1:30000) or --sglang-launch ARGS to launch one "
    "(e.g. --sglang-launch \"--model-path meta-llama/Llama-3.1-8B-Instruct --tp 8\"); "
    "--sglang-simulate launches the built-in simulator. "
    "Also settable as ini sglang_url / sglang_launch or env PYTEST_SGLANG_URL / PYTEST_SGLANG_LAUNCH."
)


class ServerStartFailed(pytest.fail.Exception):  # type: ignore[misc,name-defined,unused-ignore]
    """A start that failed: an ERROR of every test needing it, with the full diagnosis shown once.

    pytest caches a session fixture's exception and raises the same object for every later test, so
    the message shortens itself once it has been reported (``pytest_runtest_makereport`` flips it).
    """

    # As pytest does for its outcome exceptions: the short summary reads "ServerStartFailed: ...".
    __module__ = "builtins"

    def __init__(self, text: str) -> None:
        super().__init__(text, pytrace=False)
        self.text = text
        self.shown = False

    def __str__(self) -> str:
        if not self.shown:
            return self.text
        head = self.text.splitlines()[0] if self.text else "unknown error"
        return f"SGLang server unavailable (full diagnosis in the first error of this run): {head}"

    __repr__ = __str__


class StartFailure:
    """Remembers a failed start so that it is not retried for every test."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.error = ServerStartFailed(text)

    def fail(self) -> NoReturn:
        # No __tracebackhide__ on this path: pytrace=False already shows only the message, and
        # hiding every frame makes pytest add an "all traceback entries are hidden" line.
        raise self.error


def _command_error(exc: OSError) -> ServerStartError:
    return ServerStartError(
        f"could not run the server command: {exc}\nFix: check --sglang-command and --sglang-python "
        "(ini sglang_command / sglang_python), or install SGLang in that interpreter.")


def _describe(exc: BaseException) -> str:
    return redaction.scrub(f"{type(exc).__name__}: {exc}")


class ServerPool:
    """Every server of one pytest process; also a plugin (xdist controller start)."""

    def __init__(self, config: pytest.Config, settings: Settings,
                 worker_input: WorkerInput | None) -> None:
        self.config = config
        self.settings = settings
        self.worker_input = worker_input
        #: Told about the primary server's start (identity, or the failure); None until registered.
        self.report_session: ReportSession | None = None
        self._servers: dict[LaunchConfig, SGLangServer] = {}
        self._fleets: list[SGLangFleet] = []  # launched fleets (each stops its gateway, then its workers)
        self._failures: dict[object, StartFailure] = {}
        self._factory_errors: dict[LaunchConfig, SGLangError] = {}
        self._primary: Handle | None = None
        self._tmp_factory: pytest.TempPathFactory | None = None
        self._lock_path: str | None = None

    # ---- locations -------------------------------------------------------------------------------
    @property
    def lock_path(self) -> str:
        """The run-wide load lock file (the controller's, under xdist); created on first use."""
        if self._lock_path is None:
            if self.worker_input is not None and self.worker_input.get("sglang_lock_path"):
                self._lock_path = str(self.worker_input["sglang_lock_path"])
            else:
                fd, self._lock_path = tempfile.mkstemp(prefix="pytest-sglang-load-", suffix=".lock")
                os.close(fd)
        return self._lock_path

    def log_dir(self) -> Path:
        if self.settings.sglang_log_dir is not None:
            return Path(self.settings.sglang_log_dir)
        if self._tmp_factory is not None:
            return self._tmp_factory.getbasetemp() / "sglang-logs"
        basetemp = self.config.getoption("basetemp", None)
        if basetemp:  # the xdist controller starts before any fixture exists
            return Path(basetemp) / "sglang-logs"
        return Path(tempfile.mkdtemp(prefix="pytest-sglang-logs-"))

    def use_tmp_factory(self, factory: pytest.TempPathFactory) -> None:
        self._tmp_factory = factory

    # ---- the primary server ----------------------------------------------------------------------
    @property
    def distributed(self) -> bool:
        return self.worker_input is None and self.config.getoption("dist", "no") != "no" and bool(
            self.config.getoption("numprocesses", 0))

    def primary(self) -> Handle:
        """The server behind ``sglang_server``; raises :class:`ServerStartFailed` with the diagnosis."""
        if self._primary is not None:
            return self._primary
        failure = self._failures.get("primary")
        if failure is None and self.worker_input is not None and self.worker_input.get("sglang_start_error"):
            failure = self._failures["primary"] = StartFailure(str(self.worker_input["sglang_start_error"]))
        if failure is not None:
            failure.fail()
        if not self._resolve_primary():
            self._failures["primary"].fail()
        assert self._primary is not None
        return self._primary

    def _resolve_primary(self) -> bool:
        """Start or attach the primary server; on failure remember the diagnosis (False)."""
        try:
            self._primary = self._start_primary()
        except (SGLangError, OSError) as exc:
            if isinstance(exc, OSError):  # the command itself could not be executed
                exc = _command_error(exc)
            elif isinstance(exc, LaunchConfigError):  # an engine field set by an option (ray_address: --sglang-ray)
                exc = for_option(exc)
            self._failures["primary"] = StartFailure(_describe(exc))
            if self.report_session is not None:
                self.report_session.server_failed(exc)
            return False
        self._announce(self._primary)
        return True

    def _start_primary(self) -> Handle:
        handed = self.worker_input or {}
        if handed.get("sglang_url"):
            key = handed.get("sglang_api_key")
            return self._attach(str(handed["sglang_url"]), str(key) if key else None)
        if self.settings.mode == "attach":
            assert self.settings.sglang_url is not None
            return self._attach(self.settings.sglang_url, self.settings.sglang_api_key)
        if self.settings.mode is None:
            raise NoServerConfigured(NO_SERVER_MESSAGE)
        if self.worker_input is not None:
            raise NoServerConfigured("xdist worker got no server URL from the controller (it never launches)")
        config = launch_config(self.settings, self.log_dir())
        if self.settings.fleet:
            return self.launch_fleet(config)
        return self.launch(config)

    def _attach(self, url: str | ServerURL, api_key: str | None) -> Handle:
        from pytest_sglang.fleet import SGLangFleet
        from pytest_sglang.fleet.connect import connect

        # One deadline: --sglang-startup-timeout bounds the attach too (at most ATTACH_TIMEOUT_S).
        server = connect(url, api_key=api_key, validate=self.settings.sglang_validate,
                         timeout_s=self.settings.sglang_startup_timeout, min_workers=self.settings.sglang_min_workers,
                         fleet_direct=self.settings.sglang_fleet_direct)
        if isinstance(server, SGLangFleet) and self.worker_input is None:
            self._say(f"sglang: mode=attach {server.summary()} url={server.server_url}")
        return server

    def _say(self, line: str) -> None:
        write = terminal_write(self.config, visible=True)  # also from inside a fixture (output captured)
        if write is not None:
            write(line)

    def _announce(self, server: Handle) -> None:
        if self.report_session is None:
            return
        # A worker attaches to the controller's launch: report the controller's runner, not "attach".
        runner = self.worker_input.get("sglang_runner") if self.worker_input is not None else None
        self.report_session.server_started(server, runner=str(runner) if runner else None)

    # ---- launches (primary and factory) ----------------------------------------------------------
    def launch(self, config: LaunchConfig) -> SGLangServer:
        """Launch ``config`` (or reuse the running server with the identical config)."""
        if config in self._servers:
            return self._servers[config]
        from pytest_sglang.server import launch

        # No registration here: LaunchConfig registered its secrets when it was built.
        sink = _progress_sink(self.config)
        with _terminal_visible(self.config):
            server = launch(config, progress=sink)
            if sink is not None:
                sink.write(f"sglang: serving at {server.url}, log {server.log_path}")
        self._servers[config] = server
        return server

    def launch_fleet(self, config: LaunchConfig) -> SGLangFleet:
        """Launch ``config`` as a fleet: workers (or prefill and decode workers) behind SGLang's gateway."""
        from pytest_sglang.fleet import FleetProgress, launch_fleet
        from pytest_sglang.plugin.fleet_spec import fleet_spec

        try:
            spec = fleet_spec(self.settings)
        except LaunchConfigError as exc:
            raise for_option(exc) from None
        write = terminal_write(self.config)
        with _terminal_visible(self.config):
            progress = FleetProgress(write, spec.total, tty=writes_to_tty(self.config)) if write is not None else None
            fleet = launch_fleet(config, spec, progress)
            self._say(f"sglang: fleet serving at {fleet.url}: {fleet.summary()}, gateway log {fleet.log_path}")
        # Not under its launch config: sglang_server_factory(<the same args>) is a single server, not the fleet.
        self._fleets.append(fleet)
        return fleet

    def factory_launch(self, args: tuple[str, ...], overrides: Mapping[str, object]) -> SGLangServer:
        __tracebackhide__ = True
        if self.worker_input is not None:
            pytest.fail("sglang_server_factory cannot launch in an xdist worker (workers never launch): "
                        "run the tests that use it without -n, e.g. -p no:xdist", pytrace=False)
        base = launch_config(self.settings, self.log_dir())
        names = [f.name for f in dataclasses.fields(base) if f.init and f.name != "args"]
        for name in overrides:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                pytest.fail(f"sglang_server_factory() has no keyword {name!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else "")
                            + f"; LaunchConfig fields: {', '.join(names)}", pytrace=False)
        try:
            # The values, checked by LaunchConfig itself (__post_init__).
            config = dataclasses.replace(base, args=tuple(args), **overrides)  # type: ignore[arg-type]
        except SGLangError as exc:  # e.g. ConfigError for runner="k8s"
            raise pytest.fail.Exception(f"sglang_server_factory: {_describe(exc)}", pytrace=False) from None
        if config in self._factory_errors:
            raise self._factory_errors[config].with_traceback(None)  # the same failure: not retried
        try:
            return self.launch(config)
        except OSError as exc:
            error: SGLangError = _command_error(exc)
            error.__cause__ = exc
        except SGLangError as exc:
            error = exc
        # The engine's own error reaches the test body (pytest.raises(PreflightError) works);
        # scrubbed in place because pytest prints it with the traceback.
        error.args = tuple(redaction.scrub(a) if isinstance(a, str) else a for a in error.args)
        self._factory_errors[config] = error
        # Drop the engine's frames: the message is the diagnosis, the test's own line is the context.
        raise error.with_traceback(None)

    # ---- Ray (--sglang-ray) -----------------------------------------------------------------------
    @property
    def ray_address(self) -> str | None:
        """The run's Ray cluster: an xdist worker's is the controller's (its GCS address), else --sglang-ray."""
        handed = self.worker_input.get("sglang_ray_address") if self.worker_input is not None else None
        return str(handed) if handed else self.settings.sglang_ray

    def join_ray(self, nodes: int) -> None:
        """Connect this process to the run's Ray cluster (once) before a load over ``nodes`` nodes."""
        options = ray_options(self.settings, self.ray_address)
        if options is None:
            raise ConfigError("LoadSpec.nodes", nodes, "spreads the load over Ray nodes, and this run has no Ray "
                              "cluster", "add --sglang-ray auto (or --sglang-ray HOST:PORT), or use nodes=1")
        from pytest_sglang.server.ray import shared  # lazy: ray is an optional extra, imported only when used

        try:
            shared.cluster(options, self.log_dir())
        except LaunchConfigError as exc:
            raise for_option(exc) from None

    def _ray_gcs_address(self) -> str | None:
        """The cluster the controller joined (a local Ray it started has no other name), for its workers."""
        if self.settings.sglang_ray is None:
            return None
        from pytest_sglang.server.ray import shared

        return shared.gcs_address()

    # ---- hooks -------------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Runs before xdist's DSession starts the workers, so their workerinput can carry the URL.
        if self.distributed and self.settings.mode is not None:
            self._resolve_primary()
        if self.distributed and self.settings.sglang_ray is not None:
            self.join_ray(self.settings.sglang_load_nodes)  # one cluster for the run: workers join it by address

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Attach once the tests are known and before the first progress line: the gateway-detection line
        # then comes after "collected N items", not inside "test_x.py ..." (the first test's setup).
        if (self.settings.mode == "attach" and self.worker_input is None and not self.distributed
                and self._primary is None and "primary" not in self._failures
                and any(_uses_primary(item) for item in session.items)):
            self._resolve_primary()

    def worker_input_for_nodes(self) -> dict[str, str | None]:
        failure = self._failures.get("primary")
        return {
            # With the URL's credentials (workers authenticate as the controller does); never shown.
            "sglang_url": self._primary.server_url.unmasked() if self._primary is not None else None,
            "sglang_api_key": self._primary.api_key if self._primary is not None else None,
            "sglang_start_error": failure.text if failure is not None else None,
            "sglang_runner": self._primary.mode if self._primary is not None else None,
            "sglang_lock_path": self.lock_path,
            "sglang_ray_address": self._ray_gcs_address(),
        }

    def close(self) -> None:
        """Stop every launched server (attached ones are never stopped or signalled)."""
        servers: list[Handle] = [*self._fleets, *self._servers.values()]
        self._servers = {}
        self._fleets = []
        self._primary = None
        for server in servers:
            try:
                server.stop()
            except Exception as exc:  # keep stopping the others; say what happened
                _write_line(self.config, f"sglang: stopping {server.url} failed: {_describe(exc)}")
        if self.worker_input is None and self._lock_path is not None:
            Path(self._lock_path).unlink(missing_ok=True)
        if self.settings.sglang_ray is not None or self.ray_address is not None:
            from pytest_sglang.server.ray import shared

            shared.close()  # after the servers: releases their placement groups, stops a local Ray we started

    def reap_dead_runs(self) -> None:
        """Stop servers left behind by earlier pytest runs that died (e.g. SIGKILLed)."""
        from pytest_sglang.server.cleanup import reap_leftovers_once

        for line in reap_leftovers_once(docker=self.settings.runner == "docker"):
            _write_line(self.config, f"sglang: earlier run left a server behind: {line}")


def _uses_primary(item: pytest.Item) -> bool:
    """Whether ``item`` needs the primary server (its fixtures, or a gate marker's measuring fixture)."""
    names = getattr(item, "fixturenames", ())  # a non-Python item (a doctest file...) has no fixtures
    return "sglang_server" in names or "_sglang_markers" in names


def _write_line(config: pytest.Config, line: str) -> None:
    """A line of its own even in the middle of pytest's progress dots (the reporter ends that line first)."""
    reporter: pytest.TerminalReporter | None = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(redaction.scrub(line))
    else:
        config.get_terminal_writer().line(redaction.scrub(line))


def terminal_write(config: pytest.Config, *, visible: bool = False) -> Callable[[str], None] | None:
    """A scrubbing line writer to the terminal; none with -q (or without a terminal reporter).

    ``visible``: each line gets through pytest's output capture (for lines written inside a fixture or test).
    """
    reporter: pytest.TerminalReporter | None = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.get_verbosity() < 0:
        return None

    def write(line: str) -> None:
        if visible:
            with _terminal_visible(config):
                reporter.write_line(redaction.scrub(line))
        else:
            reporter.write_line(redaction.scrub(line))

    return write


def _progress_sink(config: pytest.Config) -> TerminalProgress | None:
    """Live start-up progress on the terminal; none with -q (or without a terminal reporter)."""
    write = terminal_write(config)
    if write is None:
        return None
    from pytest_sglang.server.progress import TerminalProgress

    return TerminalProgress(write, tty=writes_to_tty(config))


def writes_to_tty(config: pytest.Config) -> bool:
    """Whether pytest's output is a terminal; a CI log (file or pipe) gets one start-up line per phase."""
    with _terminal_visible(config):  # captured, sys.stdout is pytest's capture file, never a tty
        return sys.stdout.isatty()


@contextlib.contextmanager
def _terminal_visible(config: pytest.Config) -> Iterator[None]:
    """Let start-up lines reach the terminal while a fixture waits (output is captured there)."""
    capman: _CaptureManager | None = config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        yield


class _CaptureManager(Protocol):
    """The part of pytest's capture plugin we use (it has no public type; absent with ``-p no:capture``)."""

    def global_and_fixture_disabled(self) -> contextlib.AbstractContextManager[None]: ...


class NoServerConfigured(SGLangError):
    """Neither --sglang-url nor --sglang-launch (nor --sglang-simulate) is configured."""
