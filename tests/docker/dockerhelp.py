"""Helpers of the docker tier: the local image and the host paths a container needs to run the simulator."""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_sglang.server.config import LaunchConfig
from pytest_sglang.server.docker.spec import LABEL_OWNER_PID, LABEL_RUN, RUN_ID

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("PYTEST_SGLANG_TEST_IMAGE", "pytest-sglang/hostpython:local")
#: Startup phases of the tiny profile at this scale take ~0.2 s: container start dominates.
SIM_ARGS = ("--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.2")

LaunchFactory = Callable[..., LaunchConfig]


def host_volumes() -> tuple[str, ...]:
    """Read-only mounts that let the empty image run this interpreter, venv and source tree."""
    paths = ["/usr", "/etc"]
    paths += [d for d in ("/bin", "/lib", "/lib64") if Path(d).is_dir() and not Path(d).is_symlink()]
    paths += [sys.base_prefix, sys.prefix, str(REPO)]
    unique = list(dict.fromkeys(p for p in paths if not any(p != q and p.startswith(q + "/") for q in paths)))
    return tuple(f"{p}:{p}:ro" for p in unique)


def sim_command() -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest_sglang.simulator")


def sim_pytest_options() -> list[str]:
    """The same launch as plugin options (for pytester runs)."""
    options = ["--sglang-runner", "docker", "--sglang-image", IMAGE, "--sglang-pull", "never",
               "--sglang-gpus", "none", "--sglang-shm-size", "64m",
               "--sglang-command", " ".join(sim_command()), "--sglang-startup-timeout", "60"]
    for volume in host_volumes():
        options += ["--sglang-volume", volume]
    return options


def run_containers(client: Any, *, owner_pid: int | None = None) -> list[Any]:
    label = f"{LABEL_OWNER_PID}={owner_pid}" if owner_pid is not None else f"{LABEL_RUN}={RUN_ID}"
    return list(client.containers.list(all=True, filters={"label": label}))




class EngineProxy:
    """A unix-socket relay to the real engine: closing it is, for the client, the engine going away.

    (Stopping the shared engine itself would disturb every other test using it.)
    """

    def __init__(self, path: Path, upstream: str = "/var/run/docker.sock") -> None:
        self.path = path
        self.upstream = upstream
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(16)
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def docker_host(self) -> str:
        return f"unix://{self.path}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(self.upstream)
            with self._lock:
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """The engine 'goes away': no new connections, every open one is cut."""
        self._server.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
