"""The server engine: launch or attach, wait for readiness, validate, stop. Usable without pytest::

    from pytest_sglang.server import LaunchConfig, start_server

    config = LaunchConfig(runner="simulator", args=("--sim-profile", "tiny"), startup_timeout_s=60)
    with start_server(config) as server:
        print(server.url, server.info()["max_total_num_tokens"])
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.server import cleanup, preflight
from pytest_sglang.server.config import DockerOptions, LaunchConfig, pick_port
from pytest_sglang.server.handle import SGLangServer
from pytest_sglang.server.phases import LogFollower, StartupReport
from pytest_sglang.server.progress import ProgressSink, line_sink
from pytest_sglang.server.readiness import Target, wait_until_ready
from pytest_sglang.server.runner import ExitStatus, RunningProcess, get_runner
from pytest_sglang.sglang.args import find_flag, parse_launch_args

#: Attach mode waits at most this long for a warming-up server (a refused connection fails in ~1 s).
ATTACH_TIMEOUT_S = 30.0

__all__ = [
    "ATTACH_TIMEOUT_S",
    "DockerOptions",
    "ExitStatus",
    "LaunchConfig",
    "SGLangServer",
    "StartupReport",
    "attach",
    "launch",
    "start_server",
]


def register_secrets(config: LaunchConfig) -> None:
    """Register every secret of ``config`` before anything is started or printed."""
    redaction.register(config.api_key)
    redaction.register_env(config.env_dict)
    redaction.register_launch_args(config.args)


def _log_path(config: LaunchConfig, port: int) -> Path:
    directory = config.log_dir or Path(tempfile.mkdtemp(prefix="pytest-sglang-"))
    path = directory / f"sglang-{port}.log"
    n = 1
    while path.exists():
        n += 1
        path = directory / f"sglang-{port}-{n}.log"
    return path


def launch(config: LaunchConfig, progress: ProgressSink | None = None) -> SGLangServer:
    """Preflight, start and wait for a server; the caller must ``stop()`` it (or use :func:`start_server`)."""
    started = time.monotonic()
    register_secrets(config)
    try:
        launch_args = parse_launch_args(config.args)
    except ConfigError as exc:  # its message quotes the args: mask secrets in them
        shown = " ".join(redaction.scrub_argv(config.args))
        raise ConfigError(exc.source, shown, redaction.scrub(exc.problem), exc.fix) from None
    runner = get_runner(config, progress)
    _say(progress, preflight.unchecked_note(preflight.check(config, runner, launch_args)))
    cleanup.reap_leftovers_once()
    port = pick_port(config)
    log_path = _log_path(config, port)
    # Followed from before the start: the docker runner pulls the image inside start() and logs it.
    follower = LogFollower(log_path, on_update=progress.update if progress else None, started_at=started).start()
    proc: RunningProcess | None = None
    try:
        proc = runner.start(config, port, log_path)
        cleanup.track(proc)
        target = Target(url=proc.url, mode=config.runner, api_key=_api_key(config), validate=config.validate,
                        process=proc, follower=follower)
        result = wait_until_ready(target, config.startup_timeout_s, started=started)
        report = _finish_report(follower)
    except BaseException:
        # Ctrl-C, a timeout, a crash, a schema mismatch: never leave the server running.
        follower.stop()
        if proc is not None:
            _stop_quietly(proc)
        raise
    if progress is not None:
        progress.done(report)
    return SGLangServer(proc.url, config.runner, config=config, launch_args=launch_args, process=proc,
                        startup=report, api_key=_api_key(config), validate=config.validate,
                        info_endpoint=result.info_endpoint, initial_info=result.info)


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


def _api_key(config: LaunchConfig) -> str | None:
    # The server's own --api-key is what clients must send when --sglang-api-key is not given.
    return config.api_key or find_flag(config.args, "--api-key")


def attach(url: str, api_key: str | None = None, validate: str = "strict",
           timeout_s: float = ATTACH_TIMEOUT_S) -> SGLangServer:
    """Check a running server (healthy, valid ``/server_info``) and return its handle; never stops it."""
    redaction.register(api_key)
    target = Target(url=url.rstrip("/"), mode="attach", api_key=api_key, validate=validate)
    result = wait_until_ready(target, min(timeout_s, ATTACH_TIMEOUT_S))
    return SGLangServer(url, "attach", api_key=api_key, validate=validate, info_endpoint=result.info_endpoint,
                        initial_info=result.info)


@contextmanager
def start_server(config: LaunchConfig | None = None, *, url: str | None = None, api_key: str | None = None,
                 progress: ProgressSink | None = None) -> Iterator[SGLangServer]:
    """Attach to ``url`` or launch ``config``; stop a launched server on exit (never an attached one)."""
    if url is not None:
        validate = config.validate if config is not None else "strict"
        timeout = min(config.startup_timeout_s, ATTACH_TIMEOUT_S) if config is not None else ATTACH_TIMEOUT_S
        yield attach(url, api_key or (config.api_key if config else None), validate, timeout)
        return
    if config is None:
        raise TypeError("start_server() needs a LaunchConfig or url=")
    server = launch(config, progress)
    try:
        yield server
    finally:
        server.stop()
