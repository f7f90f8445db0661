"""The "exited before it was ready" error: who exited (pid or container), how, and the specific Fix."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from simlaunch import sim_config

from pytest_sglang.errors import ServerExited
from pytest_sglang.server import launch
from pytest_sglang.server.diagnosis import exited_error, process_identity
from pytest_sglang.server.docker.container import ContainerExit
from pytest_sglang.server.phases import LogFollower
from pytest_sglang.server.probe import Target, WaitState
from pytest_sglang.server.runner import ExitStatus
from pytest_sglang.server.url import parse_server_url

GiB = 1024**3
HOSTMEM_FATAL = ("[2026-01-01 10:00:09 TP0] ValueError: Not enough host memory available. Requesting 300.00 GB "
                 "but only have 2.16 GB free. Please reduce the size of the hierarchical cache.\n")


class FakeContainer:
    """The parts of RunningContainer the diagnosis uses (describe() built the same way)."""

    url = "http://127.0.0.1:4000"
    pid: int | None = None

    def __init__(self, log_path: Path, status: ExitStatus) -> None:
        self.log_path = log_path
        self.status = status

    def exit_status(self) -> ExitStatus | None:
        return self.status

    def stop(self, grace_s: float = 10.0) -> ExitStatus | None:
        return self.status

    def describe(self) -> str:
        return f"container pytest-sglang-ab12 (0123456789ab, image img:1), {self.status.describe()}"


def _error(tmp_path: Path, status: ExitStatus, log: str = "") -> ServerExited:
    log_path = tmp_path / "sglang.log"
    log_path.write_text(log)
    follower = LogFollower(log_path)
    target = Target(url=parse_server_url(FakeContainer.url), mode="docker", process=FakeContainer(log_path, status),
                    follower=follower)
    now = time.monotonic()
    return exited_error(target, WaitState(started=now - 3, deadline=now + 60), follower.stop())


def test_container_headline_names_the_container_not_pid_none(tmp_path: Path) -> None:
    first = str(_error(tmp_path, ContainerExit(code=1))).splitlines()[0]
    assert "pid None" not in first
    assert re.match(r"SGLang server http://127\.0\.0\.1:4000 \(mode=docker, container pytest-sglang-ab12 "
                    r"\(0123456789ab, image img:1\)\) exited before it was ready: exited with code 1, after "
                    r"3\.\ds$", first), first


def test_container_oom_kill_fix_names_the_memory_options(tmp_path: Path) -> None:
    # The fatal line is known too, but the container's limit is what the user set: its fix wins.
    status = ContainerExit(code=137, kind="oom", memory_limit=8 * GiB)
    lines = str(_error(tmp_path, status, HOSTMEM_FATAL)).splitlines()
    assert "killed by the out-of-memory killer (container memory limit 8g), exit code 137" in lines[0]
    assert lines[-1].startswith("Fix: raise --sglang-docker-memory")
    assert "--hicache-size" in lines[-1]


def test_container_code_137_after_a_fatal_line_is_sglang_killing_its_tree(tmp_path: Path) -> None:
    lines = str(_error(tmp_path, ContainerExit(code=137), HOSTMEM_FATAL)).splitlines()
    assert lines[0].split(": ", 1)[1].startswith(
        "killed by SIGKILL (SGLang kills its whole process tree when a child process fails; see below)")
    assert "out-of-memory killer" not in lines[0]
    assert lines[-1] == "Fix: see the explanation of the fatal line above, then read the log."


def test_container_code_137_without_an_explaining_line_points_at_the_oom_killer(tmp_path: Path) -> None:
    lines = str(_error(tmp_path, ContainerExit(code=137))).splitlines()
    assert "exited with code 137 (killed by SIGKILL)" in lines[0]
    assert lines[-1].startswith("Fix: check `dmesg -T | grep -i oom`")


def test_identity_of_an_object_with_another_describe_is_kept_whole(tmp_path: Path) -> None:
    class Odd(FakeContainer):
        def describe(self) -> str:
            return "worker 7"

    assert process_identity(Odd(tmp_path / "x.log", ExitStatus(code=2))) == "worker 7"


def test_simulated_hicache_refusal_is_sigkill_by_sglang_not_the_oom_killer(tmp_path: Path) -> None:
    """Like real 0.5.23: the scheduler's ValueError, then SGLang SIGKILLs its tree (exit -9)."""
    config = sim_config(tmp_path, "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300",
                        preflight=False)
    with pytest.raises(ServerExited) as excinfo:
        launch(config)
    assert excinfo.value.exit_status == ExitStatus(signal=9)  # type: ignore[attr-defined]
    lines = str(excinfo.value).splitlines()
    assert re.match(r"SGLang server \S+ \(mode=simulator, pid \d+\) exited before it was ready: killed by "
                    r"SIGKILL \(SGLang kills its whole process tree when a child process fails; see below\)",
                    lines[0]), lines[0]
    assert "out-of-memory killer" not in lines[0]
    assert lines[2].startswith("Known fatal line: ValueError: Not enough host memory available. "
                               "Requesting 300.00 GB")
    assert lines[-1] == "Fix: see the explanation of the fatal line above, then read the log."


def test_sim_fault_crash_still_exits_with_code_1(tmp_path: Path) -> None:
    with pytest.raises(ServerExited) as excinfo:
        launch(sim_config(tmp_path, "--sim-fault", "crash-at:kv_cache"))
    assert excinfo.value.exit_status == ExitStatus(code=1)  # type: ignore[attr-defined]
    first = str(excinfo.value).splitlines()[0]
    assert re.search(r"\(mode=simulator, pid \d+\) exited before it was ready: exited with code 1, after ",
                     first), first
