"""Nothing is left behind: process groups, re-parented descendants, leftovers of a SIGKILLed owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

from pytest_sglang.server import cleanup, ledger
from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.runner import LAUNCH_ENV, OWNER_ENV, ExitStatus, ProcessRunner, marked_processes

# A "server" that starts a grandchild in its own session (escaping the process group) and a
# normal child, then sleeps; it ignores SIGTERM, like a server stuck in shutdown.
SPAWNER = textwrap.dedent("""
    import signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    subprocess.Popen(sleeper, start_new_session=True)
    subprocess.Popen(sleeper)
    print("spawned", flush=True)
    time.sleep(120)
""")


def _wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _launch_ids(launch_id: str) -> list[int]:
    return [p.pid for p, _ in marked_processes(LAUNCH_ENV, launch_id) if p.status() != psutil.STATUS_ZOMBIE]


def test_stop_kills_group_and_escaped_descendants(tmp_path: Path) -> None:
    config = LaunchConfig(command=(sys.executable, "-c", SPAWNER))
    proc = ProcessRunner().start(config, 1, tmp_path / "s.log")
    launch_id = proc.launch_id  # type: ignore[attr-defined]
    assert _wait_for(lambda: len(_launch_ids(launch_id)) == 3), _launch_ids(launch_id)
    t0 = time.monotonic()
    status = proc.stop(grace_s=0.5)
    assert status == ExitStatus(signal=signal.SIGKILL)  # it ignored SIGTERM
    assert time.monotonic() - t0 < 10
    assert _launch_ids(launch_id) == []
    assert proc.stop() == status  # idempotent
    log = (tmp_path / "s.log").read_text()
    assert log.startswith("# pytest-sglang ") and "spawned" in log


def test_child_env_carries_owner_marker(tmp_path: Path) -> None:
    code = f"import os; print(os.environ['{OWNER_ENV}'], os.environ['X'])"
    proc = ProcessRunner().start(
        LaunchConfig(command=(sys.executable, "-c", code), env=(("X", "y"),)), 1, tmp_path / "m.log"
    )
    assert _wait_for(lambda: proc.exit_status() is not None)
    assert f"{os.getpid()}:" in (tmp_path / "m.log").read_text() and " y" in (tmp_path / "m.log").read_text()
    assert proc.exit_status() == ExitStatus(code=0)


OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.runner import ProcessRunner
    cfg = LaunchConfig(command=(sys.executable, "-c", sys.argv[1]))
    p = ProcessRunner().start(cfg, 1, Path(sys.argv[2]))
    print(p.pid, flush=True)
    time.sleep(120)
""")


def test_leftovers_of_a_sigkilled_owner_are_found_and_reaped(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, SPAWNER, str(tmp_path / "o.log")], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    server_pid = int(owner.stdout.readline())
    assert _wait_for(lambda: (tmp_path / "o.log").exists() and "spawned" in (tmp_path / "o.log").read_text())
    # While the owner lives its servers are not leftovers.
    assert [x for x in cleanup.find_leftovers() if x.owner_pid == owner.pid] == []
    owner.kill()  # SIGKILL: the owner cannot clean up
    owner.wait()
    owner.stdout.close()
    assert _wait_for(lambda: len([x for x in cleanup.find_leftovers() if x.owner_pid == owner.pid]) == 3)
    mine = [x for x in cleanup.find_leftovers() if x.owner_pid == owner.pid]
    assert server_pid in {x.pid for x in mine}
    stopped = cleanup.kill_leftovers(grace_s=0.5, docker=False)
    assert any(f"stopped pid {server_pid} (left by pytest pid {owner.pid}" in s for s in stopped)
    assert [x for x in cleanup.find_leftovers() if x.owner_pid == owner.pid] == []


# A tracked server that then blanks its environment, as smg does when it sets its title ``smg::router``:
# the same pid, no owner marker left to read.
BLANKING_OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_sglang.server import cleanup
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.runner import ProcessRunner
    blank = "import os, sys; os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)'], {})"
    p = ProcessRunner().start(LaunchConfig(command=(sys.executable, "-c", blank)), 1, Path(sys.argv[1]))
    cleanup.track(p)
    print(p.pid, flush=True)
    time.sleep(120)
""")


def test_a_leftover_that_blanked_its_environment_is_found_by_the_ledger(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", BLANKING_OWNER, str(tmp_path / "o.log")],
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    server_pid = int(owner.stdout.readline())
    server = psutil.Process(server_pid)
    assert _wait_for(lambda: OWNER_ENV not in server.environ())  # the marker is gone, the pid is the same
    assert [x for x in cleanup.find_leftovers() if x.pid == server_pid] == []  # its owner lives
    owner.kill()
    owner.wait()
    owner.stdout.close()
    try:
        [leftover] = [x for x in cleanup.find_leftovers() if x.pid == server_pid]
        assert leftover.owner_pid == owner.pid and "time.sleep(120)" in leftover.cmdline
        stopped = cleanup.kill_leftovers(grace_s=0.5, docker=False)
        assert any(f"stopped pid {server_pid} (left by pytest pid {owner.pid}" in s for s in stopped)
        assert not server.is_running()
        assert [x for x in cleanup.find_leftovers() if x.pid == server_pid] == []
    finally:
        if server.is_running():
            server.kill()


def test_the_ledger_ignores_a_reused_pid_and_drops_stale_records(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ledger.record(sleeper.pid, "run")
        path = ledger.directory() / f"{os.getpid()}-{sleeper.pid}.json"
        assert path.exists() and [e.pid for e in ledger.running() if e.pid == sleeper.pid] == [sleeper.pid]
        assert [e for e in ledger.orphans() if e.pid == sleeper.pid] == []  # we, its owner, live
        # the same pid with another start time is another process: never ours, and its record goes
        path.write_text(path.read_text().replace('"started": ', '"started": 1'))
        assert [e for e in ledger.running() if e.pid == sleeper.pid] == [] and not path.exists()
        path.write_text("{not json")
        assert [e for e in ledger.running() if e.pid == sleeper.pid] == [] and not path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
        ledger.forget(sleeper.pid)


SIGTERMED = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_sglang.server import cleanup
    from pytest_sglang.server.config import LaunchConfig
    from pytest_sglang.server.runner import ProcessRunner
    cfg = LaunchConfig(command=(sys.executable, "-c", "import time; time.sleep(120)"))
    p = ProcessRunner().start(cfg, 1, Path(sys.argv[1]))
    cleanup.track(p)
    print(p.pid, flush=True)
    time.sleep(120)
""")


def test_sigterm_to_the_owner_stops_tracked_servers(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", SIGTERMED, str(tmp_path / "t.log")], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    server_pid = int(owner.stdout.readline())
    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=20) == -signal.SIGTERM  # it still dies by SIGTERM, after cleaning up
    owner.stdout.close()
    assert _wait_for(
        lambda: (
            not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE
        )
    )


def test_exit_status_descriptions() -> None:
    assert (
        ExitStatus.from_returncode(-9)
        .describe()
        .startswith("killed by SIGKILL: most likely the out-of-memory killer")
    )
    assert ExitStatus.from_returncode(-15).describe() == "killed by SIGTERM"
    assert ExitStatus.from_returncode(3).describe() == "exited with code 3"
