"""Launch or attach: the engine's entry points (``launch``, ``attach``, ``start_server``).

One deadline per mode: a launch counts ``startup_timeout_s`` from before the runner starts; an
attach waits at most ``min(timeout_s, ATTACH_TIMEOUT_S)``; every probe inside is clipped to the time
left (:mod:`.readiness`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_sglang import defaults, redaction
from pytest_sglang.server import cleanup, identity, preflight
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.config import LaunchConfig, pick_port
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.phases import LogFollower, StartupReport
from pytest_sglang.server.probe import Expected
from pytest_sglang.server.progress import ProgressSink, line_sink
from pytest_sglang.server.readiness import Target, wait_until_ready
from pytest_sglang.server.runner import get_runner
from pytest_sglang.server.url import ServerURL, parse_server_url
from pytest_sglang.sglang.args import LaunchArgs

#: Attach mode waits at most this long for a warming-up server (a refused connection fails in ~1 s).
ATTACH_TIMEOUT_S = 30.0


def register_secrets(config: LaunchConfig) -> None:
    """Register every secret of ``config`` before anything is started or printed."""
    redaction.register(*config.secrets)  # the API key, secret env values, --api-key in any spelling


def _log_path(config: LaunchConfig, port: int) -> Path:
    directory = config.log_dir or Path(tempfile.mkdtemp(prefix="pytest-sglang-"))
    path = directory / f"sglang-{port}.log"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"sglang-{port}-{n}.log"
    return path


def launch(config: LaunchConfig, progress: ProgressSink | None = None, *, port: int | None = None,
           on_start: Callable[[RunningProcess], None] | None = None, preflight_done: bool = False) -> SGLangServer:
    """Preflight, start and wait for a server; the caller must ``stop()`` it (or use :func:`start_server`).

    ``port`` is the port to listen on (a fleet picks its workers' ports; default: the launch's
    ``--port``, else a free one). ``on_start`` is told about the process as soon as it exists (a fleet
    stops every worker when one fails); if it raises, the process is stopped and the error propagates.
    ``preflight_done``: the caller already ran the hicache preflight (a fleet checks all its workers at once).
    """
    started = time.monotonic()
    register_secrets(config)
    launch_args = config.launch_args  # read once, when the config was made (a bad one never gets here)
    runner = get_runner(config, progress)
    if not preflight_done:
        _say(progress, preflight.unchecked_note(preflight.check(config, runner, launch_args)))
    cleanup.reap_leftovers_once()
    if port is None:
        _check_given_port(config, launch_args)
        port = pick_port(config)
    log_path = _log_path(config, port)
    # Followed from before the start: the docker runner pulls the image inside start() and logs it.
    follower = LogFollower(log_path, on_update=progress.update if progress else None, started_at=started).start()
    proc: RunningProcess | None = None
    expected = Expected(port=port, model_path=launch_args.model_path, launched_at=time.time())
    try:
        proc = runner.start(config, port, log_path)
        cleanup.track(proc)
        if on_start is not None:
            on_start(proc)
        target = Target(url=parse_server_url(proc.url, source="server URL"), mode=config.runner,
                        api_key=config.client_api_key, validate=config.validate, process=proc,
                        follower=follower, expected=expected)
        result = wait_until_ready(target, config.startup_timeout_s, started=started)
        report = _finish_report(follower)
    except BaseException:
        # Ctrl-C, a timeout, a crash, a schema mismatch, another server on the port: never leave ours running.
        follower.stop()
        if proc is not None:
            _stop_quietly(proc)
        raise
    if progress is not None:
        progress.done(report)
    return SGLangServer(target.url, config.runner, config=config, launch_args=launch_args, process=proc,
                        startup=report, api_key=config.client_api_key, validate=config.validate,
                        info_endpoint=result.info_endpoint, initial_info=result.info)


def _check_given_port(config: LaunchConfig, launch_args: LaunchArgs) -> None:
    """A ``--port`` given in the launch args must be free before anything starts.

    Not for docker: there the given port is inside the container, published on a host port the
    engine picks (with ``--sglang-docker-network host`` the docker runner checks the host port).
    """
    if launch_args.given("port") and config.runner != "docker":
        identity.check_port_free(launch_args.host, launch_args.port)


def _say(progress: ProgressSink | None, line: str | None) -> None:
    note = line_sink(progress)
    if note is not None and line:
        note(line)


def _finish_report(follower: LogFollower) -> StartupReport:
    report = follower.stop()
    if report.phase != "ready":
        # The ready line may be absent (--log-level warning) or not flushed yet: readiness is the truth.
        follower.mark_ready()
        report = follower.snapshot()
    return report


def _stop_quietly(proc: RunningProcess) -> None:
    try:
        proc.stop()
    finally:
        cleanup.untrack(proc)


def attach(url: str | ServerURL, api_key: str | None = None, validate: str = "strict",
           timeout_s: float = ATTACH_TIMEOUT_S, *, min_workers: int | None = None,
           fleet_direct: str = defaults.DEFAULT_FLEET_DIRECT, detect_gateway: bool = True) -> SGLangServer:
    """Check a running server (healthy, valid ``/server_info``) and return its handle; never stops it.

    ``url`` may be text (parsed here: a bad URL is a ConfigError naming ``--sglang-url``) or a
    :class:`ServerURL`. It waits at most ``min(timeout_s, ATTACH_TIMEOUT_S)`` in all. A gateway (smg,
    sglang-router) is detected by itself: the handle then has its fleet (``min_workers`` healthy workers
    needed, default all; ``fleet_direct`` says how the workers are probed directly).
    """
    address = url if isinstance(url, ServerURL) else parse_server_url(url)
    redaction.register(api_key)
    started, budget = time.monotonic(), min(timeout_s, ATTACH_TIMEOUT_S)  # one deadline for all of it
    if detect_gateway:
        from pytest_sglang.fleet.attach import attach_gateway  # fleet imports this module: no cycle at import

        gateway = attach_gateway(address, api_key=api_key, validate=validate, timeout_s=budget,
                                 min_workers=min_workers, direct=fleet_direct)
        if gateway is not None:
            return gateway
    target = Target(url=address, mode="attach", api_key=api_key, validate=validate)
    result = wait_until_ready(target, budget, started=started)
    return SGLangServer(address, "attach", api_key=api_key, validate=validate, info_endpoint=result.info_endpoint,
                        initial_info=result.info)


@contextmanager
def start_server(config: LaunchConfig | None = None, *, url: str | ServerURL | None = None,
                 api_key: str | None = None, progress: ProgressSink | None = None) -> Iterator[SGLangServer]:
    """Attach to ``url`` or launch ``config``; stop a launched server on exit (never an attached one)."""
    if url is not None:
        validate = config.validate if config is not None else "strict"
        timeout = config.startup_timeout_s if config is not None else ATTACH_TIMEOUT_S
        yield attach(url, api_key or (config.api_key if config else None), validate, timeout)
        return
    if config is None:
        raise TypeError("start_server() needs a LaunchConfig or url=")
    server = launch(config, progress)
    try:
        yield server
    finally:
        server.stop()
