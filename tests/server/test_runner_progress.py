"""Progress reaches the terminal sink: docker pull lines, the pull phase, preflight remarks."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from simlaunch import FAST, sim_config

import pytest_sglang.server.start as engine
from pytest_sglang.server import LaunchConfig, launch
from pytest_sglang.server.config import DockerOptions
from pytest_sglang.server.docker.runner import DockerRunner, _log
from pytest_sglang.server.phases import StartupReport
from pytest_sglang.server.progress import TerminalProgress
from pytest_sglang.server.runner import RunningProcess, SimulatorRunner
from pytest_sglang.server.select_runner import get_runner


class Recorder(TerminalProgress):
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.phases: list[str] = []
        super().__init__(self.lines.append, heartbeat_s=3600)

    def update(self, state: StartupReport) -> None:
        self.phases.append(state.phase)
        super().update(state)


def test_docker_runner_gets_the_sinks_note_and_pull_lines_reach_log_and_terminal(tmp_path: Path) -> None:
    sink = Recorder()
    runner = get_runner(LaunchConfig(runner="docker", docker=DockerOptions()), sink)
    assert isinstance(runner, DockerRunner) and runner.progress == sink.note
    log = tmp_path / "s.log"
    runner._progress(log)("pulling image img:1 (--sglang-pull missing)")
    assert log.read_text().endswith(": pulling image img:1 (--sglang-pull missing)\n")
    assert sink.lines[-1].endswith("] pulling image img:1 (--sglang-pull missing)")


def test_sinks_without_note_and_no_sink_give_no_callback() -> None:
    class Minimal:
        def update(self, state: StartupReport) -> None: ...
        def done(self, report: StartupReport) -> None: ...

    for sink in (None, Minimal()):
        runner = get_runner(LaunchConfig(runner="docker"), sink)
        assert isinstance(runner, DockerRunner) and runner.progress is None


class PullingRunner(SimulatorRunner):
    """The simulator behind a slow image pull logged the way the docker runner logs it."""

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        _log(log_path, "pulling image img:1 (--sglang-pull missing)")
        time.sleep(0.6)
        _log(log_path, "pulled img:1")
        return super().start(config, port, log_path)


def test_the_pull_phase_is_followed_live_during_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "get_runner", lambda config, progress=None: PullingRunner())
    sink = Recorder()
    server = launch(sim_config(tmp_path), sink)
    try:
        spans = {p.name: p for p in server.startup.phases} if server.startup else {}
        pull = spans["pulling image"]
        assert pull.duration_s is not None and pull.duration_s >= 0.4, pull
        assert sink.phases.index("pulling image") < sink.phases.index("loading weights")
        assert any(line.endswith("] pulling image") for line in sink.lines), sink.lines
    finally:
        server.stop()


def test_an_unchecked_ratio_launch_says_so_on_the_terminal(tmp_path: Path) -> None:
    # The process runner (a stand-in command) cannot know the device pool before the start.
    config = LaunchConfig(runner="process", command=(sys.executable, "-m", "pytest_sglang.simulator"),
                          args=(*FAST, "--enable-hierarchical-cache", "--hicache-ratio", "2"), log_dir=tmp_path,
                          startup_timeout_s=60)
    sink = Recorder()
    server = launch(config, sink)
    server.stop()
    assert any("] preflight: host pools not checked before the start (host pool size depends on the device "
               "pool (--hicache-ratio)" in line for line in sink.lines), sink.lines
