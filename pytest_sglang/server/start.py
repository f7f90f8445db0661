"""Launch or attach one server: the engine's entry points (``launch``, ``attach``).

A URL may also be a gateway: :func:`pytest_sglang.fleet.connect.start_server` detects one above both.

One deadline per mode: a launch counts ``startup_timeout_s`` from before the runner starts; an
attach waits at most ``min(timeout_s, ATTACH_TIMEOUT_S)``; every probe inside is clipped to the time
left (:mod:`.readiness`).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_sglang import redaction
from pytest_sglang.server import cleanup, identity, preflight, ranks
from pytest_sglang.server.base import RunningProcess
from pytest_sglang.server.config import LaunchConfig, given_port, pick_port
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.phases import LogFollower, StartupReport
from pytest_sglang.server.probe import Expected
from pytest_sglang.server.progress import ProgressSink, line_sink
from pytest_sglang.server.readiness import Target, wait_until_ready
from pytest_sglang.server.select_runner import get_runner
from pytest_sglang.server.url import ServerURL, parse_server_url
from pytest_sglang.sglang.args import LaunchArgs

#: Attach mode waits at most this long for a warming-up server (a refused connection fails in ~1 s).
ATTACH_TIMEOUT_S = 30.0


def register_secrets(config: LaunchConfig) -> None:
    """Register every secret of ``config`` before anything is started or printed."""
    redaction.register(*config.secrets)  # the API key, secret env values, --api-key in any spelling


def _log_path(config: LaunchConfig, port: int) -> Path:
    directory = config.log_dir or Path(tempfile.mkdtemp(prefix="pytest-sglang-"))
    stem = f"sglang-{port}" if port else "sglang-ray"  # port 0: chosen later, on a Ray node
    path = directory / f"{stem}.log"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"{stem}-{n}.log"
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
    if ranks.needs_ranks(config) and config.ray is None:  # on Ray, RayRunner.plan refuses --nnodes itself
        runner = ranks.RankedRunner(runner)
    if not preflight_done:
        _say(progress, preflight.unchecked_note(preflight.check(config, runner, launch_args)))
    cleanup.reap_leftovers_once()
    if port is None and config.ray is not None:
        port = given_port(launch_args) or 0  # 0: the Ray runner picks a port free on the node it chose
    elif port is None:
        _check_given_port(config, launch_args)
        port = pick_port(config)
    log_path = _log_path(config, port)
    # Followed from before the start: the docker runner pulls the image inside start() and logs it.
    follower = LogFollower(log_path, on_update=progress.update if progress else None, started_at=started).start()
    proc: RunningProcess | None = None
    launched_at = time.time()
    try:
        proc = runner.start(config, port, log_path)
        cleanup.track(proc)
        if on_start is not None:
            on_start(proc)
        url = parse_server_url(proc.url, source="server URL")
        # The port the server was told: ``port`` (inside the container for docker, whose URL has the
        # published host port), or the Ray node's own pick, in the URL, when ``port`` was 0.
        expected = Expected(port=port or url.port or 0, model_path=launch_args.model_path, launched_at=launched_at)
        target = Target(url=url, mode=config.runner,
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
           timeout_s: float = ATTACH_TIMEOUT_S, *, started: float | None = None) -> SGLangServer:
    """Check a running server (healthy, valid ``/server_info``) and return its handle; never stops it.

    ``url`` may be text (parsed here: a bad URL is a ConfigError naming the field ``url``) or a
    :class:`ServerURL`. It waits at most ``min(timeout_s, ATTACH_TIMEOUT_S)`` from ``started`` (a
    ``time.monotonic()`` value; default: now), so a caller that spent part of the deadline passes it on.
    """
    address = url if isinstance(url, ServerURL) else parse_server_url(url)
    redaction.register(api_key)
    began = time.monotonic() if started is None else started
    target = Target(url=address, mode="attach", api_key=api_key, validate=validate)
    result = wait_until_ready(target, min(timeout_s, ATTACH_TIMEOUT_S), started=began)
    return SGLangServer(address, "attach", api_key=api_key, validate=validate, info_endpoint=result.info_endpoint,
                        initial_info=result.info)
