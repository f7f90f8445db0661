"""One running SGLang container: logs into the log file, exit watched through the engine, stop+remove.

Two daemon threads per container, both blocked in the engine API rather than polling it: one follows
the container's log stream into the log file (so phases and the log tail work exactly as for a
process), the other sits in ``wait`` and records how the container ended the moment it ends, so a
crash is reported within a second and an engine that disappears is noticed instead of hanging.
"""

from __future__ import annotations

import atexit
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang.server.base import ExitStatus, signal_name
from pytest_sglang.server.docker.engine import base_url, engine_address, unix_socket_down
from pytest_sglang.server.options.docker import format_size

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

_live: dict[str, Container] = {}
_live_lock = threading.Lock()


@dataclass(frozen=True)
class ContainerExit(ExitStatus):
    """How a container ended, as the engine reports it (``code`` is the container's exit code)."""

    kind: str = "exited"  # "exited" | "oom" | "removed" | "engine-gone"
    memory_limit: int | None = None
    detail: str = ""

    def describe(self) -> str:
        if self.kind == "oom":
            limit = format_size(self.memory_limit) if self.memory_limit else "none: the host ran out"
            return (f"killed by the out-of-memory killer (container memory limit {limit}), "
                    f"exit code {self.code}")
        if self.kind == "removed":
            return "the container was removed while the server was in use (docker rm?)"
        if self.kind == "engine-gone":
            return (f"the Docker engine at {engine_address()} stopped answering ({self.detail}); "
                    "the container's state is unknown")
        if self.code is not None and self.code > 128:
            return f"exited with code {self.code} (killed by {signal_name(self.code - 128)})"
        return f"exited with code {self.code}"

    def killed_by(self) -> int | None:
        # docker-init passes a signal death on as exit code 128+N (137: SGLang SIGKILLed its own tree).
        if self.kind == "exited" and self.code is not None and self.code > 128:
            return self.code - 128
        return None

    def fix(self) -> str | None:
        """The remedy for this ending, for the error's ``Fix:`` line (None: the log decides)."""
        if self.kind == "oom":
            return ("Fix: raise --sglang-docker-memory (or leave it unset), or shrink what the server pins "
                    "in host memory (--hicache-size / --hicache-ratio in --sglang-launch)")
        if self.kind == "removed":
            return "Fix: do not remove pytest-sglang's containers while a run uses them"
        if self.kind == "engine-gone":
            return "Fix: check the engine (docker info, journalctl -u docker) and rerun"
        return None


class RunningContainer:
    """The handle the server layer uses: ``url``, ``exit_status()``, ``stop()``, ``describe()``."""

    def __init__(self, client: DockerClient, container: Container, *, url: str, image: str,
                 log_path: Path, memory_limit: int | None, host_network: bool = False) -> None:
        self.client = client
        self.host_network = host_network
        self.container = container
        self.url = url
        self.image = image
        self.log_path = log_path
        self.memory_limit = memory_limit
        self.container_id = str(container.id)
        # No host pid on purpose: the engine owns the process; signalling it would bypass docker.
        self.pid: int | None = None
        self.name = str(container.name)
        self._engine = base_url()
        self._exit: ContainerExit | None = None
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        with _live_lock:
            _live[self.container_id] = container
        self._logs = threading.Thread(target=self._follow_logs, name=f"logs-{self.name}", daemon=True)
        self._watch = threading.Thread(target=self._watch_exit, name=f"wait-{self.name}", daemon=True)
        self._logs.start()
        self._watch.start()

    # -- threads ---------------------------------------------------------------------------------
    def _follow_logs(self) -> None:
        with self.log_path.open("ab") as sink:
            try:
                for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                    sink.write(chunk)
                    sink.flush()
            except Exception:  # the watcher reports why the engine stopped answering
                return

    def _watch_exit(self) -> None:
        try:
            self.container.wait()
        except Exception as exc:  # any transport failure means: ask what happened
            self._exit = self._classify_failure(exc)
            return
        # Let the log follower drain, so the log tail in the error holds the container's last words.
        self._logs.join(timeout=2.0)
        self._exit = self._read_exit()

    def _read_exit(self) -> ContainerExit:
        from docker.errors import NotFound

        try:
            self.container.reload()
        except NotFound:
            return ContainerExit(kind="removed")
        except Exception as exc:  # SDK or transport error: classify, never leave _exit unset
            return self._classify_failure(exc)
        state = self.container.attrs.get("State", {})
        code = state.get("ExitCode")
        if state.get("Status") == "removing":
            return ContainerExit(code=code, kind="removed")
        if state.get("OOMKilled"):
            return ContainerExit(code=code, kind="oom", memory_limit=self.memory_limit)
        return ContainerExit(code=code)

    def _classify_failure(self, exc: BaseException) -> ContainerExit:
        from docker.errors import NotFound

        down = unix_socket_down(self._engine)
        if down is not None:
            return ContainerExit(kind="engine-gone", detail=down)
        try:
            self.client.containers.get(self.container_id)
        except NotFound:
            return ContainerExit(kind="removed")
        except Exception as probe:  # no answer at all: the engine is gone
            return ContainerExit(kind="engine-gone", detail=f"{type(probe).__name__}: {probe}")
        return ContainerExit(kind="engine-gone", detail=f"{type(exc).__name__}: {exc}")

    # -- the handle ------------------------------------------------------------------------------
    def exit_status(self) -> ContainerExit | None:
        """How the container ended, or None while it runs (never blocks, never calls the engine)."""
        return self._exit

    def wait_exit(self, timeout_s: float) -> ContainerExit | None:
        self._watch.join(timeout=timeout_s)
        return self._exit

    def stop(self, grace_s: float = 10.0) -> ExitStatus | None:
        """SIGTERM (through docker-init), SIGKILL after ``grace_s``, then remove. Idempotent."""
        with self._stop_lock:
            if self._stopped.is_set():
                return self._exit
            self._stopped.set()
            engine_gone = self._exit is not None and self._exit.kind == "engine-gone"
            # No SDK call into an engine known to be gone (each would leak a socket, see unix_socket_down).
            if not engine_gone or unix_socket_down(self._engine) is None:
                remove_container(self.container, grace_s=grace_s)
            with _live_lock:
                _live.pop(self.container_id, None)
        self._watch.join(timeout=2.0)
        self._logs.join(timeout=2.0)
        self.client.close()  # also unblocks a follower still reading from a half-dead engine
        return self._exit

    def kill(self, signum: int) -> None:
        """Send ``signum`` to the container's init (docker kill); it is still removed by :meth:`stop`."""
        from docker.errors import APIError

        if self._exit is None:
            try:
                self.container.kill(signal=signum)
            except APIError:
                pass  # it exited meanwhile: the exit watcher reports how

    def listener_root_pid(self) -> int | None:
        """With ``--network host``: the host pid of the container's init, whose tree must hold the port.

        For the identity check only (never signalled). None on a bridge network: there the engine
        publishes the host port itself (docker-proxy or its NAT rule holds it), and none when unknown.
        """
        if not self.host_network:
            return None
        from docker.errors import DockerException  # the SDK is optional: imported where it is used

        try:
            self.container.reload()
            pid = self.container.attrs.get("State", {}).get("Pid")
        except (DockerException, OSError):
            return None
        return pid if isinstance(pid, int) and pid > 0 else None

    def describe(self) -> str:
        status = self._exit
        state = "running" if status is None else status.describe()
        return f"container {self.name} ({self.container_id[:12]}, image {self.image}), {state}"


def remove_container(container: Container, *, grace_s: float) -> None:
    """Stop then force-remove; a container already gone, or an engine gone, is not an error here."""
    from docker.errors import DockerException, NotFound

    try:
        container.stop(timeout=max(0, math.ceil(grace_s)))
    except NotFound:
        return
    except DockerException:
        pass  # still try to remove: force also kills
    except Exception:  # engine unreachable: the next run's leftover sweep removes it
        return
    try:
        container.remove(force=True, v=True)
    except NotFound:
        pass
    except Exception:  # see above
        return


@atexit.register
def _remove_live_containers() -> None:
    """Last resort (e.g. SIGTERM turned into SystemExit past the fixtures): no container outlives pytest."""
    with _live_lock:
        containers = list(_live.values())
        _live.clear()
    for container in containers:
        remove_container(container, grace_s=2.0)
