"""Talking to the Docker engine: connect (with hints), make sure the image is there, find leftovers.

The docker SDK is imported only inside these functions: the plugin must load, and every other runner
must work, on machines where the ``docker`` package is absent.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from pytest_sglang.errors import DockerError
from pytest_sglang.server.docker.spec import (
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_PLUGIN,
    LABEL_RUN,
)

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

#: Device requests (GPUs) need Docker API 1.40 (Engine 19.03).
MIN_API_VERSION = (1, 40)
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
_START_HINT = ("start the engine (sudo systemctl start docker, or: sudo dockerd >/tmp/dockerd.log 2>&1 &), "
               "or point DOCKER_HOST at a running engine, e.g. DOCKER_HOST=unix:///run/user/1000/docker.sock")

Progress = Callable[[str], None]


def engine_address(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    host = env.get("DOCKER_HOST")
    return f"DOCKER_HOST={host}" if host else f"{DEFAULT_SOCKET} (DOCKER_HOST is not set)"


def _require_sdk() -> None:
    """A DockerError saying how to install the SDK, instead of an ImportError deep in a launch."""
    try:
        import docker  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "docker":  # a broken dependency of the SDK: show it, not "not installed"
            raise
        raise DockerError("the docker runner needs the Docker SDK for Python, which is not installed.\n"
                          "Fix: pip install 'docker>=7.0' (or pip install pytest-sglang, which depends on it)"
                          ) from None


def _api_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def connect(timeout_s: float = 30.0) -> DockerClient:
    """A client with a negotiated API version, or a DockerError that says how to get an engine.

    Negotiated by hand rather than with ``version="auto"``: when no engine answers, the SDK's own
    negotiation raises from inside the client's constructor and leaks its socket.
    """
    _require_sdk()
    import docker
    from docker import constants
    from docker.utils import kwargs_from_env

    settings = kwargs_from_env()
    _check_unix_socket(str(settings.get("base_url") or DEFAULT_SOCKET))
    probe = docker.DockerClient(version=constants.MINIMUM_DOCKER_API_VERSION,
                                timeout=int(timeout_s), **settings)
    try:
        server_api = str(probe.version(api_version=False)["ApiVersion"])
    except Exception as exc:  # requests' and the SDK's errors alike mean "no engine"
        raise DockerError(f"the Docker engine at {engine_address()} is unreachable: {exc}.\n"
                          f"Fix: {_START_HINT}") from None
    finally:
        probe.close()
    if _api_tuple(server_api) < MIN_API_VERSION:
        raise DockerError(f"the Docker engine at {engine_address()} speaks API {server_api}, older than 1.40 "
                          "(Docker Engine 19.03), which GPU device requests need.\n"
                          "Fix: upgrade Docker Engine to 19.03 or newer "
                          "(Debian/Ubuntu: apt-get install docker.io)")
    newest = str(constants.DEFAULT_DOCKER_API_VERSION)
    version = min(server_api, newest, key=_api_tuple)
    client: DockerClient = docker.DockerClient(version=version, timeout=int(timeout_s), **settings)
    return client


def base_url() -> str:
    """The engine address the SDK will use (DOCKER_HOST or the default socket)."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def unix_socket_down(url: str) -> str | None:
    """Why a unix-socket engine cannot be reached, or None (also None for tcp/ssh engines).

    Checked with our own socket before SDK calls that may fail: the SDK leaks the socket of a failed
    connect, which is a ResourceWarning (an error under ``filterwarnings = error``).
    """
    if not url.startswith(("unix://", "http+unix://")):
        return None
    path = url.split("://", 1)[1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5.0)
        try:
            sock.connect(path)
        except OSError as exc:
            return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


def _check_unix_socket(url: str) -> None:
    reason = unix_socket_down(url)
    if reason is not None:
        raise DockerError(f"the Docker engine at {engine_address()} is unreachable: {reason}.\n"
                          f"Fix: {_START_HINT}")


def ensure_image(client: DockerClient, image: str, policy: str, progress: Progress | None = None) -> None:
    """Apply ``--sglang-pull always|missing|never`` before the container is created."""
    _require_sdk()
    import docker
    if policy != "always":
        try:
            client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            if policy == "never":
                raise DockerError(f"image {image} is not on the Docker engine ({engine_address()}) and "
                                  "--sglang-pull is never.\nFix: docker pull " + image + ", build or load it "
                                  "locally, or run with --sglang-pull missing") from None
    pull_image(client, image, progress, policy=policy)


def _split_image(image: str) -> tuple[str, str | None]:
    name, _, digest = image.partition("@")
    if digest:
        return name, f"@{digest}"
    repo, sep, tag = name.rpartition(":")
    # A ':' before the last '/' is a registry port, not a tag (localhost:5000/sglang).
    return (repo, tag) if sep and "/" not in tag else (name, None)


def pull_image(client: DockerClient, image: str, progress: Progress | None = None, *,
               policy: str = "always") -> None:
    """Pull with one progress line per layer status change; any failure is a DockerError."""
    _require_sdk()
    import docker
    repo, tag = _split_image(image)
    say = progress or (lambda _line: None)
    say(f"pulling image {image} (--sglang-pull {policy})")
    last: dict[str, str] = {}
    try:
        for event in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise DockerError(_pull_failed(image, str(event["error"])))
            status, layer = str(event.get("status", "")), str(event.get("id", ""))
            if last.get(layer) != status:
                last[layer] = status
                say(f"pull {image}: {layer + ': ' if layer else ''}{status}")
    except docker.errors.DockerException as exc:
        raise DockerError(_pull_failed(image, str(exc))) from None
    say(f"pulled {image}")


def _pull_failed(image: str, reason: str) -> str:
    return (f"pulling image {image} failed: {reason}.\n"
            "Fix: check the image name and tag (--sglang-image), log in for a private registry "
            "(docker login), check network access to the registry, or load the image locally and "
            "run with --sglang-pull never")


@dataclass(frozen=True)
class DockerLeftover:
    """A container started by this plugin whose owning pytest process is gone."""

    container_id: str
    name: str
    run: str
    owner_pid: int
    status: str

    def describe(self) -> str:
        return (f"container {self.name} ({self.container_id[:12]}, {self.status}) of run {self.run}, "
                f"owner pid {self.owner_pid} gone")


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(LABEL_OWNER_HOST) not in (None, "", socket.gethostname()):
        return True  # another host's process: we cannot tell, so never touch it
    try:
        proc = psutil.Process(int(labels.get(LABEL_OWNER_PID, "0")))
    except (psutil.Error, ValueError):
        return False
    started = labels.get(LABEL_OWNER_START, "")
    # The pid may have been reused by an unrelated process: compare the owner's start time.
    return not started or abs(proc.create_time() - float(started)) < 1.0


@contextmanager
def _optional_client() -> Iterator[DockerClient | None]:
    """A client if an engine answers; None when there is no SDK or no engine (then nothing is left over)."""
    try:
        client = connect(timeout_s=10.0)
    except DockerError:
        yield None
        return
    try:
        yield client
    finally:
        client.close()


def _leftovers(client: DockerClient) -> list[tuple[Container, DockerLeftover]]:
    found = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_PLUGIN}"}):
        labels = dict(container.labels)
        if _owner_alive(labels):
            continue
        found.append((container, DockerLeftover(
            container_id=str(container.id), name=str(container.name), run=labels.get(LABEL_RUN, "?"),
            owner_pid=int(labels.get(LABEL_OWNER_PID, "0") or 0), status=str(container.status))))
    return found


def find_docker_leftovers() -> list[DockerLeftover]:
    """Containers of this plugin whose owner is gone ([] when no engine is reachable)."""
    with _optional_client() as client:
        return [] if client is None else [left for _, left in _leftovers(client)]


def kill_docker_leftovers() -> list[DockerLeftover]:
    """Remove (force) every leftover container; returns what was removed."""
    removed: list[DockerLeftover] = []
    with _optional_client() as client:
        if client is None:
            return removed
        from docker.errors import NotFound  # a client exists: the SDK is installed

        for container, left in _leftovers(client):
            try:
                container.remove(force=True, v=True)
            except NotFound:
                pass  # removed meanwhile (e.g. by a parallel --sglang-kill): the goal is reached
            removed.append(left)
    return removed
