"""SGLang-protocol simulator, launched like ``python -m sglang.launch_server``.

``python -m pytest_sglang.simulator`` behaves like
``python -m sglang.launch_server`` (same flags, log lines, endpoints and payloads) without a GPU.

This module holds only the light :class:`Simulator` launcher; the server itself (aiohttp) is
imported only in the subprocess. Its folders, top to bottom (each imports only those below it; the
import-linter contracts in pyproject.toml hold the order): ``server.py`` (the composition root),
``front/`` (HTTP), ``disagg/`` (prefill-decode), ``launch/`` and ``model/`` (start-up; what the model
writes), ``state.py``, ``config.py``, ``failures/`` and ``images/``, ``scheduling/`` (the engine), and
the leaves ``logs.py`` and ``tokenizer.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

from pytest_sglang.sockets import free_port, listener_pids

__all__ = ["Simulator", "Wait", "free_port"]

Wait = Literal["healthy", "port", "none"]
#: Starts on a fresh free port when the one picked was taken meanwhile by another process.
PORT_ATTEMPTS = 3


class Simulator:
    """Launch the simulator as a real subprocess (stdout+stderr to a log file).

    ``wait``: ``"healthy"`` (until ``GET /health`` is 200), ``"port"`` (until the port accepts
    connections) or ``"none"``. Raises ``RuntimeError`` with the log tail if the process exits or the
    wait exceeds ``timeout_s``.
    """

    def __init__(  # noqa: D107  (the class docstring describes the arguments)
        self,
        args: Sequence[str] = (),
        *,
        wait: Wait = "healthy",
        env: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        log_path: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        api_key: str | None = None,
    ) -> None:
        self.args = list(args)
        self.wait = wait
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.host = host
        self.api_key = api_key
        self.port = free_port(host)
        self.url = f"http://{host}:{self.port}"
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"sglang-sim-{self.port}-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        """The simulator's command line (this interpreter, the module, the flags)."""
        return [
            sys.executable,
            "-m",
            "pytest_sglang.simulator",
            *self.args,
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]

    def start(self) -> Simulator:
        """Start the subprocess (and wait as the constructor's ``wait`` says).

        When another process took the port picked free before the simulator bound it, the simulator
        exits "address already in use": it is started again on another free port (at most
        ``PORT_ATTEMPTS`` times; ``port`` and ``url`` then change).
        """
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                self.argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                if self.wait != "none":
                    self._wait_for(self.wait)
                return self
            except RuntimeError as exc:
                self.stop()
                if attempt == PORT_ATTEMPTS or "address already in use" not in str(exc).lower():
                    raise
                self.port = free_port(self.host)
                self.url = f"http://{self.host}:{self.port}"
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def log_text(self) -> str:
        """Everything the simulator wrote to its log so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _wait_for(self, what: Wait) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                tail = "\n".join(self.log_text().splitlines()[-20:])
                raise RuntimeError(
                    f"simulator exited with code {self.proc.returncode} before {what}; log "
                    f"{self.log_path}:\n{tail}"
                )
            if self._probe(what) and self._listening():
                return
            time.sleep(0.02)
        raise RuntimeError(f"simulator not {what} after {self.timeout_s:.0f}s; log {self.log_path}")

    def _listening(self) -> bool:
        """Whether the socket that answered is ours.

        A port picked free can be taken by another process before the simulator binds it; that one's
        answer must not count (the simulator then exits "address already in use", which the wait reports).
        """
        assert self.proc is not None
        pids = listener_pids(self.port)
        return pids is None or self.proc.pid in pids  # an unreadable table: the answer is all there is

    def _probe(self, what: Wait) -> bool:
        if what == "port":
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return True
            except OSError:
                return False
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=5) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """Stop the process group (SIGTERM, then SIGKILL); return the exit code."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if proc is None else proc.returncode

    def _signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def __enter__(self) -> Simulator:
        """Start the simulator."""
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the simulator."""
        self.stop()
