"""How a server is started and stopped: the Runner protocol and the process/simulator runners.

Every child is started in a new session (its own process group) with its output appended to a log
file (never a pipe: a chatty server blocks on a full pipe) and carries two environment markers:
``PYTEST_SGLANG_OWNER=<pytest pid>:<run uuid>`` (which run owns it, for leftover cleanup after a
SIGKILLed pytest) and ``PYTEST_SGLANG_LAUNCH=<uuid>`` (which launch, so ``stop()`` also finds
descendants that re-parented or left the process group, e.g. SGLang's scheduler processes).
The docker runner (``server/docker/runner.py``) implements the same protocol (:mod:`.base`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

import psutil

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.server.base import DEFAULT_GRACE_S, ExitStatus, Runner, RunningProcess, nothing_reserved, signal_name
from pytest_sglang.server.config import LaunchConfig, effective_argv, server_url
from pytest_sglang.sglang import masks
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import HostMemory, read_host_memory
from pytest_sglang.simulator.launch import plan as sim_plan
from pytest_sglang.simulator.scheduling import profiles

# The shared shapes live in .base (no import cycle with the docker runner); named here too.
__all__ = [
    "DEFAULT_GRACE_S", "LAUNCH_ENV", "OWNER_ENV", "RUN_ID", "ExitStatus", "PopenProcess", "ProcessRunner",
    "Runner", "RunningProcess", "SimulatorRunner", "kill_marked", "kill_processes",
    "marked_processes", "signal_name", "spawn",
]

OWNER_ENV = "PYTEST_SGLANG_OWNER"
LAUNCH_ENV = "PYTEST_SGLANG_LAUNCH"
#: One id per Python process that launches servers (a pytest run).
RUN_ID = uuid.uuid4().hex
def owner_marker() -> str:
    return f"{os.getpid()}:{RUN_ID}"


def child_env(config: LaunchConfig, launch_id: str) -> dict[str, str]:
    env = {**os.environ, **config.env_dict}
    env[OWNER_ENV] = owner_marker()
    env[LAUNCH_ENV] = launch_id
    return env


def marked_processes(name: str, value: str | None = None) -> Iterator[tuple[psutil.Process, str]]:
    """Processes whose environment has ``name`` (equal to ``value`` when given), with its value."""
    for proc in psutil.process_iter():
        try:
            found = proc.environ().get(name)
        except (psutil.Error, OSError):
            continue  # gone, a zombie, or not ours to read
        if found is not None and (value is None or found == value):
            yield proc, found


def kill_processes(procs: list[psutil.Process], grace_s: float) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL whatever is left."""
    for proc in procs:
        _quiet(proc.terminate)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        _quiet(proc.kill)
    psutil.wait_procs(alive, timeout=2.0)


def kill_marked(launch_id: str, grace_s: float) -> None:
    """Stop the processes whose environment carries ``launch_id``.

    Descendants that left their group (setsid, daemonised schedulers) still carry the marker.
    """
    leftovers = [proc for proc, _ in marked_processes(LAUNCH_ENV, launch_id)]
    if leftovers:
        kill_processes(leftovers, grace_s)


def spawn(argv: list[str], *, log: IO[bytes], env: dict[str, str], launch_id: str) -> subprocess.Popen[bytes]:
    """``argv`` in its own session, output to ``log``; ``env`` must carry ``launch_id`` under :data:`LAUNCH_ENV`.

    A Ctrl-C that lands while Popen forks loses the only handle of a child that is already running:
    whatever carries the launch's mark is stopped before the interrupt goes on.
    """
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True)
    except BaseException:
        kill_marked(launch_id, DEFAULT_GRACE_S)
        raise


def _quiet(action: Callable[[], object]) -> None:
    try:
        action()
    except (psutil.Error, OSError):
        pass


class PopenProcess:
    """A server started with ``subprocess.Popen`` in its own session."""

    def __init__(self, popen: subprocess.Popen[bytes], url: str, log_path: Path, launch_id: str,
                 argv: list[str]) -> None:
        self.popen = popen
        self.url = url
        self.log_path = log_path
        self.pid: int | None = popen.pid
        self.launch_id = launch_id
        self.argv = argv
        self._stopped = False

    def exit_status(self) -> ExitStatus | None:
        code = self.popen.poll()
        return None if code is None else ExitStatus.from_returncode(code)

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        if not self._stopped:
            self._stopped = True
            self._stop_group(grace_s)
            kill_marked(self.launch_id, min(grace_s, 5.0))
            scrub_log_file(self.log_path)
        return self.exit_status()

    def _stop_group(self, grace_s: float) -> None:
        pgid = self.popen.pid  # start_new_session=True: the child leads its own group
        if self.popen.poll() is None:
            _killpg(pgid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Kill the rest of the group even if the leader exited already (orphaned workers).
        _killpg(pgid, signal.SIGKILL)
        try:
            self.popen.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
            pass

    def describe(self) -> str:
        status = self.exit_status()
        return f"pid {self.pid}, {'running' if status is None else status.describe()}"

    def listener_root_pid(self) -> int | None:
        return self.pid

    def kill(self, signum: int) -> None:
        # The whole group: a real SGLang worker is an HTTP server plus scheduler/detokenizer processes.
        if self.popen.poll() is None:
            _killpg(self.popen.pid, signum)


def scrub_log_file(path: Path) -> bool:
    """Mask registered secrets in a stopped server's log, in place; True if anything was masked.

    SGLang logs ``server_args={... 'api_key': '...'}`` at startup. We cannot filter a log file the
    server writes itself (no pipes), so the file is cleaned once the server is gone.
    """
    if not redaction.known() or not path.exists():
        return False
    tmp = path.with_name(path.name + ".scrub")
    changed = False
    with open(path, encoding="utf-8", errors="replace", newline="") as src, \
            open(tmp, "w", encoding="utf-8", newline="") as dst:
        for line in src:
            clean = redaction.scrub(line)
            changed |= clean != line
            dst.write(clean)
    if changed:
        os.replace(tmp, path)
    else:
        tmp.unlink()
    return changed


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


#: A launch runs in its own process group (``start_new_session``, ``os.killpg``) so that stopping it
#: stops everything SGLang started. Windows has no process groups of that kind.
PROCESS_GROUPS = sys.platform != "win32"


def require_process_groups(runner: str) -> None:
    """Refuse a local launch where its process tree could not be stopped (said at launch, not import)."""
    if not PROCESS_GROUPS:
        raise ConfigError(
            f"LaunchConfig(runner={runner!r})", sys.platform,
            "a local launch needs POSIX process groups (os.setsid/os.killpg) to stop the server and "
            "every process it started, and this platform has none",
            "start the server separately and attach to it (start_server(url=...); in pytest --sglang-url), "
            "or launch it with runner='docker'")


class ProcessRunner:
    """``<python> -m sglang.launch_server ARGS`` (or ``--sglang-command``) as a local process."""

    name = "process"

    def argv(self, config: LaunchConfig, port: int) -> list[str]:
        return effective_argv(config, port)

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        require_process_groups(self.name)
        argv = self.argv(config, port)
        launch_id = uuid.uuid4().hex
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(f"# pytest-sglang {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                      f"{' '.join(masks.scrub_argv(argv))}\n".encode())
            log.flush()
            popen = spawn(argv, log=log, env=child_env(config, launch_id), launch_id=launch_id)
        return PopenProcess(popen, server_url(config, port), log_path, launch_id, argv)

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return read_host_memory()

    def place_together(self, configs: Sequence[LaunchConfig], deadline: float) -> Callable[[], None]:
        """Nothing to reserve: servers start on this machine."""
        return nothing_reserved

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """Bytes of one rank's device KV pool, if known before the start (what --hicache-ratio multiplies).

        Unknown for a real server: it depends on the GPU and the model, measured at startup.
        """
        return None


class SimulatorRunner(ProcessRunner):
    """``<python> -m pytest_sglang.simulator ARGS``: same lifecycle, simulated host for preflight.

    The ``--sim-*`` flags are read by the simulator's own parser (:func:`simulator.launch.plan.simulator_flags`).
    """

    name = "simulator"

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return sim_plan.simulated_host_memory(sim_plan.simulator_flags(config.args, source=_SOURCE))

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """The simulator's device pool, computed as it will at startup (same profile arithmetic)."""
        flags = sim_plan.simulator_flags(config.args, source=_SOURCE)
        profile = profiles.get_profile(flags.profile or "tiny")
        hw = profiles.hardware(profile, flags.gpu_memory_gb, flags.host_memory_gb)
        tokens = profiles.device_pool_tokens(
            profile, gpu_memory_bytes=hw.gpu_memory_bytes,
            mem_fraction_static=args.mem_fraction_static or profile.default_mem_fraction_static,
            tp_size=args.tp_size, pp_size=args.pp_size, max_total_tokens=args.max_total_tokens)
        page = args.page_size or 1
        return profiles.device_pool_bytes_per_rank(profile, tokens // page * page, args.tp_size)


#: Where the simulator's flags come from, in the engine's words.
_SOURCE = "LaunchConfig.args"
