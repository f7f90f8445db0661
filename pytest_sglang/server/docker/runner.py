"""The docker runner: SGLang (or any ``--sglang-command``) in a container on a Docker engine.

Inside the container the command is ``python3 -m sglang.launch_server <launch args> --host 0.0.0.0
--port <container port>``; the port is published on 127.0.0.1 with an ephemeral host port, which the
handle's URL uses. The container's logs go to the same log file as a process's output, its exit is
watched through the engine, and it is stopped and removed on every path. Leftovers of a pytest that
died are found by their labels (see :mod:`.engine`).

Package layout: :mod:`.options` (option syntax), :mod:`.spec` (the container as data),
:mod:`.engine` (client, image, leftovers), :mod:`.container` (the running handle).
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang import redaction
from pytest_sglang.errors import DockerError
from pytest_sglang.server.base import nothing_reserved
from pytest_sglang.server.config import DockerOptions, LaunchConfig, given_port
from pytest_sglang.server.docker.container import RunningContainer, remove_container
from pytest_sglang.server.docker.engine import connect, ensure_image, find_docker_leftovers, kill_docker_leftovers
from pytest_sglang.server.docker.spec import OWNED_FIELDS, ContainerSpec, build_spec, create_kwargs
from pytest_sglang.server.options.docker import DEFAULT_IMAGE, format_size, parse_size, user_hf_cache
from pytest_sglang.sglang import masks
from pytest_sglang.sglang.args import LaunchArgs
from pytest_sglang.sglang.hostmem import HostMemory, read_host_memory

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

__all__ = ["DEFAULT_IMAGE", "DockerRunner", "find_docker_leftovers", "kill_docker_leftovers",
           "kill_leftover_containers"]

_PORT_TAKEN = ("port is already allocated", "address already in use")


def _log(log_path: Path, line: str) -> None:
    with log_path.open("a", encoding="utf-8") as sink:
        sink.write(f"# pytest-sglang {time.strftime('%Y-%m-%d %H:%M:%S')}: {redaction.scrub(line)}\n")


class DockerRunner:
    """Starts SGLang containers. ``progress`` receives image-pull lines (default: the log file only)."""

    name = "docker"

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.progress = progress

    def spec(self, config: LaunchConfig, port: int) -> ContainerSpec:
        """The container this launch asks for (the options were checked when DockerOptions was made)."""
        options = config.docker or DockerOptions()
        env = config.env_dict
        container_port = given_port(config.launch_args) or port
        return build_spec(
            image=options.image or DEFAULT_IMAGE, args=config.args_without(*OWNED_FIELDS), command=config.command,
            container_port=container_port, env=env, volumes=options.volumes, hf_cache=_hf_cache(),
            gpus=options.gpus, shm_size=options.shm_size, ipc_host=options.ipc_host, memory=options.memory,
            network=options.network,
        )

    def start(self, config: LaunchConfig, port: int, log_path: Path) -> RunningContainer:
        spec = self.spec(config, port)
        if spec.host_network:
            _check_host_port(spec.container_port)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        client = connect()
        try:
            pull = (config.docker or DockerOptions()).pull
            ensure_image(client, spec.image, pull, self._progress(log_path))
            _log(log_path, f"docker run {spec.image} {' '.join(masks.scrub_argv(spec.command))}")
            container = _create_and_start(client, spec)
            url = _url(container, spec)
        except BaseException:
            client.close()
            raise
        return RunningContainer(client, container, url=url, image=spec.image, log_path=log_path,
                                memory_limit=spec.memory_bytes, host_network=spec.host_network)

    def _progress(self, log_path: Path) -> Callable[[str], None]:
        def say(line: str) -> None:
            _log(log_path, line)
            if self.progress is not None:
                self.progress(line)

        return say

    def host_memory(self, config: LaunchConfig) -> HostMemory:
        """The container memory limit when given (the pools must fit in it), else this host."""
        memory = (config.docker or DockerOptions()).memory
        if memory is None:
            return read_host_memory()
        limit = parse_size(memory)
        return HostMemory(available_bytes=limit, total_bytes=limit,
                          source=f"container memory limit --sglang-docker-memory {format_size(limit)}")

    def place_together(self, configs: Sequence[LaunchConfig], deadline: float) -> Callable[[], None]:
        """Nothing to reserve: servers start on this machine."""
        return nothing_reserved

    def device_pool_bytes_per_rank(self, config: LaunchConfig, args: LaunchArgs) -> int | None:
        """Unknown before the start: it depends on the GPU and the model, measured by SGLang itself."""
        return None


def kill_leftover_containers() -> list[str]:
    """For ``--sglang-kill`` and the start of a run: remove containers whose owner is gone."""
    return [f"removed {left.describe()}" for left in kill_docker_leftovers()]


def _hf_cache() -> Path:
    # Created up front: a missing bind source would be created by the engine, owned by root.
    cache = user_hf_cache()
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def _check_host_port(port: int) -> None:
    """With ``--sglang-docker-network host`` the server binds the host's port itself: check it first."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise DockerError(_port_conflict(port, "host network")) from None


def _port_conflict(port: int, where: str) -> str:
    return (f"port conflict: port {port} ({where}) is already in use on this host.\n"
            "Fix: stop what listens there (ss -ltnp | grep :" + str(port) + "), or drop --port from "
            "--sglang-launch so pytest-sglang picks a free port")


def _create_and_start(client: DockerClient, spec: ContainerSpec) -> Container:
    """Create + start; on any failure or Ctrl-C in between, the half-made container is removed."""
    from docker.errors import DockerException

    kwargs = create_kwargs(spec)
    try:
        container = client.containers.create(**kwargs)
        container.start()
        container.reload()
        return container
    except BaseException as exc:
        _remove_by_name(client, str(kwargs["name"]))
        if isinstance(exc, DockerException):
            raise _start_refused(exc, spec) from None
        raise


def _start_refused(exc: Exception, spec: ContainerSpec) -> DockerError:
    """The engine's refusal, translated for the causes users meet (GPU runtime, ports)."""
    from docker.errors import APIError

    text = str(exc.explanation if isinstance(exc, APIError) and exc.explanation else exc)
    if any(t in text.lower() for t in _PORT_TAKEN):
        return DockerError(_port_conflict(spec.container_port, "published on 127.0.0.1"))
    if "could not select device driver" in text:
        return DockerError(
            f"--sglang-gpus={spec.gpus!r}: the Docker engine cannot give GPUs to containers ({text}).\n"
            "Fix: install the NVIDIA Container Toolkit and configure the engine's runtime "
            "(nvidia-ctk runtime configure --runtime=docker), or run with --sglang-gpus none")
    return DockerError(f"the Docker engine refused to run image {spec.image}: {text}.\n"
                       "Fix: check the --sglang-* docker options (image, volumes, network, memory) and "
                       "`docker info`")


def _remove_by_name(client: DockerClient, name: str) -> None:
    from docker.errors import DockerException

    try:
        remove_container(client.containers.get(name), grace_s=0)
    except (DockerException, OSError):
        pass  # never created, or the engine is gone: the leftover sweep of the next run covers it


def _url(container: Container, spec: ContainerSpec) -> str:
    if spec.host_network:
        return f"http://127.0.0.1:{spec.container_port}"
    ports = container.attrs.get("NetworkSettings", {}).get("Ports") or {}
    bindings = ports.get(f"{spec.container_port}/tcp") or []
    host_port = next((b.get("HostPort") for b in bindings if b.get("HostIp") in ("127.0.0.1", "")), None)
    if not host_port:
        remove_container(container, grace_s=0)
        raise DockerError(f"the engine did not publish container port {spec.container_port} on 127.0.0.1 "
                          f"(network {spec.network or 'bridge'}).\nFix: use a bridge network "
                          "(drop --sglang-docker-network) or --sglang-docker-network host")
    return f"http://127.0.0.1:{host_port}"
