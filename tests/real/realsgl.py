"""Helpers of the real-SGLang tier: locate the setup, launch a raw server, find leftover processes.

The raw launcher here deliberately does not use pytest_sglang.server: the attach tests need a real
server that the plugin did not start, and the health tests need to watch every probe of a start.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pytest-sglang" / "real-sglang"
SETUP_HINT = "run `bash scripts/real-sglang/setup.sh` (or set REAL_SGLANG_PYTHON and REAL_SGLANG_MODEL)"

#: The launch that works on a CPU-only machine (see docs/real-sglang.md for why each flag is there).
#: --sleep-on-idle: an idle scheduler otherwise spins one core at 100%, and CI has two.
CPU_ARGS = (
    "--load-format", "dummy", "--device", "cpu", "--attention-backend", "torch_native",
    "--disable-cuda-graph", "--max-total-tokens", "4096", "--enable-metrics", "--sleep-on-idle",
)
CPU_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}
#: HiCache cannot run on CPU (host pools are pinned through CUDA): the scheduler dies ~25 s in.
CRASH_ARGS = ("--enable-hierarchical-cache", "--hicache-size", "1")
CREATE_TIME_SLACK_S = 1.5


@dataclass(frozen=True)
class RealSetup:
    """Where scripts/real-sglang/setup.sh put the SGLang venv and the tiny model."""

    python: Path
    model: Path

    @classmethod
    def locate(cls) -> RealSetup:
        home = Path(os.environ.get("REAL_SGLANG_HOME", CACHE))
        python = Path(os.environ.get("REAL_SGLANG_PYTHON", home / "venv" / "bin" / "python"))
        model = Path(os.environ.get("REAL_SGLANG_MODEL", home / "tiny-llama"))
        missing = [str(p) for p in (python, model / "config.json") if not p.exists()]
        if missing:
            found = ", ".join(missing)
            raise FileNotFoundError(f"real SGLang setup not found: {found} missing; {SETUP_HINT}")
        return cls(python=python, model=model)

    def args(self, *extra: str) -> list[str]:
        """SGLang launch args (no host/port) for the tiny model on CPU."""
        return ["--model-path", str(self.model), *CPU_ARGS, *extra]


#: Restarts on a new port when another process took the picked one before SGLang bound it.
PORT_RETRIES = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Probe:
    """One observation of an endpoint during a start: status None = connection refused."""

    t: float
    path: str
    status: int | None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawServer:
    """``python -m sglang.launch_server`` in its own session, output to a log file, probes recorded."""

    setup: RealSetup
    log_path: Path
    extra_args: Sequence[str] = ()
    api_key: str | None = None
    port: int = field(default_factory=free_port)
    timeline: list[Probe] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        key = ["--api-key", self.api_key] if self.api_key else []
        return [str(self.setup.python), "-m", "sglang.launch_server", *self.setup.args(*self.extra_args),
                *key, "--host", "127.0.0.1", "--port", str(self.port)]

    def start(self) -> None:
        env = {**os.environ, **CPU_ENV}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.started_at = time.monotonic()

    def wait_healthy(self, timeout_s: float = 240.0) -> float:
        """Poll /health every 0.1 s until 200, recording each probe; also /server_info at the first 503.

        The port is picked free, then bound by SGLang ~20 s later on a busy machine: another process
        can take it in between (uvicorn: ``address already in use``, and SGLang kills itself two minutes
        later when its warmup cannot reach itself). Then the server starts again on a new port, within
        the same deadline, at most :data:`PORT_RETRIES` times.
        """
        assert self.proc is not None
        deadline = self.started_at + timeout_s
        retries = 0
        with httpx.Client(base_url=self.url, timeout=30.0, headers=self.auth()) as client:
            while time.monotonic() < deadline:
                if self._port_taken() and retries < PORT_RETRIES:
                    retries += 1
                    self.stop(grace_s=5.0)
                    self.port, self.timeline = free_port(), []
                    self.start()
                    client.base_url = httpx.URL(self.url)
                    continue
                if self.proc.poll() is not None:
                    raise RuntimeError(f"real SGLang exited rc={self.proc.returncode}; log {self.log_path}")
                probe = self._probe(client, "/health")
                if probe.status == 503 and not any(p.path == "/server_info" for p in self.timeline):
                    self._probe(client, "/server_info")
                if probe.status == 200:
                    return probe.t
                time.sleep(0.1)
        raise TimeoutError(f"real SGLang not healthy after {timeout_s}s; log {self.log_path}")

    def _port_taken(self) -> bool:
        """uvicorn could not bind this server's port (the end of the log, read bounded)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, self.log_path.stat().st_size - 65536))
                tail = log.read()
        except OSError:
            return False
        return f"('127.0.0.1', {self.port}): address already in use".encode() in tail

    def _probe(self, client: httpx.Client, path: str) -> Probe:
        t = round(time.monotonic() - self.started_at, 2)
        try:
            r = client.get(path)
        except httpx.TransportError:
            probe = Probe(t, path, None)
        else:
            probe = Probe(t, path, r.status_code, r.content, dict(r.headers))
        self.timeline.append(probe)
        return probe

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the whole session (launcher + scheduler + detokenizer), SIGKILL after the grace."""
        if self.proc is None or self.proc.poll() is not None:
            return
        _signal_group(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _is_sglang(proc: psutil.Process, venv: str) -> bool:
    try:
        cmdline = " ".join(proc.cmdline())
        return proc.name().startswith("sglang::") or "sglang.launch_server" in cmdline or (
            cmdline.startswith(venv) and "multiprocessing" in cmdline
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def sglang_processes(setup: RealSetup, since: float = 0.0) -> list[str]:
    """Live real-SGLang processes (launcher, sglang::* children, their resource tracker) created after
    ``since`` (epoch seconds), so other people's servers on a shared machine are not counted."""
    venv = str(setup.python.parent.parent)
    # psutil derives create_time from the boot time, which /proc gives in whole seconds: allow slack
    since -= CREATE_TIME_SLACK_S
    return describe_live((p for p in _iter_processes() if p.info["create_time"] >= since and _is_sglang(p, venv)),
                         cmdline=True)


def describe_live(procs: Iterable[psutil.Process], *, cmdline: bool = False) -> list[str]:
    """``pid N name`` (``: command line`` with ``cmdline``) of each of ``procs`` still running."""
    found = []
    for proc in procs:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                line = f": {' '.join(proc.cmdline())[:160]}" if cmdline else ""
                found.append(f"pid {proc.pid} {proc.name()}{line}")
        except psutil.NoSuchProcess:
            continue
    return found


def _iter_processes() -> Iterator[psutil.Process]:
    yield from psutil.process_iter(["create_time"])


def wait_no_sglang(setup: RealSetup, since: float, timeout_s: float = 15.0) -> list[str]:
    """Leftovers still alive after ``timeout_s`` (the last children may take a moment to exit)."""
    deadline = time.monotonic() + timeout_s
    while (left := sglang_processes(setup, since)) and time.monotonic() < deadline:
        time.sleep(0.25)
    return left


def launch_options(setup: RealSetup, log_dir: Path, *extra_args: str) -> list[str]:
    """The options a user passes to run their suite against a CPU SGLang launched by the plugin.

    ``--opt=value`` form on purpose: pytest picks its rootdir and ini file before entry-point plugins
    add their options, so a separate path value (``--sglang-python /venv/bin/python``) is taken for a
    test path and moves the rootdir (docs/real-sglang.md).
    """
    env = [f"--sglang-env={key}={value}" for key, value in CPU_ENV.items()]
    return ["--sglang-runner=process", f"--sglang-python={setup.python}",
            f"--sglang-launch={shlex.join(setup.args(*extra_args))}", *env,
            f"--sglang-log-dir={log_dir}", "--sglang-startup-timeout=240"]


def junit_outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """``file::test[id]`` -> (outcome, message) from a junit XML report of an inner pytest run."""
    found: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.py::{case.get('name')}"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome, message = tag, f"{node.get('message', '')} {node.text or ''}".strip()
                break
        found[name] = (outcome, message)
    return found
