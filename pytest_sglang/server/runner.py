"""How a server is started and stopped: the Runner protocol and the process/simulator runners.

Every child is started in a new session (its own process group) with its output appended to a log
file (never a pipe: a chatty server blocks on a full pipe) and carries two environment markers:
``PYTEST_SGLANG_OWNER=<pytest pid>:<run uuid>`` (which run owns it, for leftover cleanup after a
SIGKILLed pytest) and ``PYTEST_SGLANG_LAUNCH=<uuid>`` (which launch, so ``stop()`` also finds
descendants that re-parented or left the process group, e.g. SGLang's scheduler processes).
The docker runner (``server/docker.py``) implements the same protocol.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from pytest_sglang import redaction
from pytest_sglang.errors import ConfigError
from pytest_sglang.server.config import LaunchConfig, effective_argv, server_url
from pytest_sglang.server.progress import ProgressSink, line_sink
from pytest_sglang.sglang.args import LaunchArgs, find_flag
from pytest_sglang.sglang.hostmem import HostMemory, read_host_memory

if TYPE_CHECKING:
    from pytest_sglang.simulator.profiles import Profile

OWNER_ENV = "PYTEST_SGLANG_OWNER"
LAUNCH_ENV = "PYTEST_SGLANG_LAUNCH"
#: One id per Python process that launches servers (a pytest run).
RUN_ID = uuid.uuid4().hex
DEFAULT_GRACE_S = 10.0


def owner_marker() -> str:
    return f"{os.getpid()}:{RUN_ID}"


@dataclass(frozen=True)
class ExitStatus:
    """How a server process ended: an exit code, or the signal that killed it."""

    code: int | None = None
    signal: int | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        # Popen reports death by signal N as -N.
        return cls(signal=-returncode) if returncode < 0 else cls(code=returncode)

    def describe(self) -> str:
        if self.signal is None:
            return f"exited with code {self.code}"
        name = signal_name(self.signal)
        if self.signal == signal.SIGKILL:
            return f"killed by {name}: most likely the out-of-memory killer (check `dmesg -T | grep -i oom`)"
        return f"killed by {name}"

    def killed_by(self) -> int | None:
        """The signal that ended the server, if one did (containers override: exit code 128+N)."""
        return self.signal

    def fix(self) -> str | None:
        """A remedy specific to this ending (e.g. a container's OOM kill), or None: the caller decides."""
        return None


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9; ``signal N`` for numbers Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class RunningProcess(Protocol):
    """A started server (process or container) as the engine sees it."""

    url: str
    log_path: Path
    pid: int | None

    def exit_status(self) -> ExitStatus | None:
        """None while running; how it ended otherwise (never blocks)."""

    def stop(self, grace_s: float = DEFAULT_GRACE_S) -> ExitStatus | None:
        """Stop it and everything it started; idempotent."""

    def describe(self) -> str:
        """``pid 4242, running`` style text for messages."""


class Runner(Protocol):
    """Starts servers of one kind (``process``, ``simulator``, ``docker``)."""

    name: str

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess: ...

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        """The host memory the server's hicache host pools will draw from (for preflight)."""


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


def _quiet(action: object) -> None:
    try:
        action()  # type: ignore[operator]
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
            # Descendants that left the group (setsid, daemonised schedulers) still carry our marker.
            leftovers = [p for p, _ in marked_processes(LAUNCH_ENV, self.launch_id)]
            if leftovers:
                kill_processes(leftovers, min(grace_s, 5.0))
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


class ProcessRunner:
    """``<python> -m sglang.launch_server ARGS`` (or ``--sglang-command``) as a local process."""

    name = "process"

    def argv(self, config: LaunchConfig, port: int) -> list[str]:
        return effective_argv(config, port)

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningProcess:
        argv = self.argv(config, port)
        launch_id = uuid.uuid4().hex
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(f"# pytest-sglang {time.strftime('%Y-%m-%d %H:%M:%S')}: "
                      f"{' '.join(redaction.scrub_argv(argv))}\n".encode())
            log.flush()
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=child_env(config, launch_id), start_new_session=True, close_fds=True)
        return PopenProcess(popen, server_url(config, port), log_path, launch_id, argv)

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        return read_host_memory()

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """Bytes of one rank's device KV pool, if known before the start (what --hicache-ratio multiplies).

        Unknown for a real server: it depends on the GPU and the model, measured at startup.
        """
        return None


class SimulatorRunner(ProcessRunner):
    """``<python> -m pytest_sglang.simulator ARGS``: same lifecycle, simulated host for preflight."""

    name = "simulator"

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        from pytest_sglang.simulator.profiles import simulated_host_memory  # lazy: the simulator is optional here

        _profile(config)  # an unknown --sim-profile is a ConfigError, not a ValueError traceback
        return simulated_host_memory(list(config.args))

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """The simulator's device pool, computed as it will at startup (same profile arithmetic)."""
        from pytest_sglang.simulator import profiles

        profile = _profile(config)
        hw = profiles.hardware(profile, _gb_flag(config, "--sim-gpu-memory-gb"),
                               _gb_flag(config, "--sim-host-memory-gb"))
        tokens = profiles.device_pool_tokens(
            profile, gpu_memory_bytes=hw.gpu_memory_bytes,
            mem_fraction_static=args.mem_fraction_static or profile.default_mem_fraction_static,
            tp_size=args.tp_size, pp_size=args.pp_size, max_total_tokens=args.max_total_tokens)
        page = args.page_size or 1
        return profiles.device_pool_bytes_per_rank(profile, tokens // page * page, args.tp_size)


def _profile(config: LaunchConfig) -> Profile:
    from pytest_sglang.simulator import profiles

    name = find_flag(config.args, "--sim-profile") or "tiny"
    try:
        return profiles.get_profile(name)
    except ValueError:
        raise ConfigError("--sim-profile", name, "not a simulator profile",
                          f"use one of {', '.join(profiles.PROFILES)} in the launch args") from None


def _gb_flag(config: LaunchConfig, flag: str) -> float | None:
    value = find_flag(config.args, flag)
    try:
        return None if value is None else float(value)
    except ValueError:
        raise ConfigError(flag, value, "not a number", f"give {flag} in GB, e.g. {flag} 96") from None


def get_runner(config: LaunchConfig, progress: ProgressSink | None = None) -> Runner:
    """The runner named by ``config.runner``; ``progress`` also receives docker's image-pull lines."""
    if config.runner == "docker":
        from pytest_sglang.server.docker.runner import DockerRunner  # lazy: the docker SDK is imported only when used

        say: Callable[[str], None] | None = line_sink(progress)
        runner: Runner = DockerRunner(progress=say)
        return runner
    return SimulatorRunner() if config.runner == "simulator" else ProcessRunner()
