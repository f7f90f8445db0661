"""What one SGLang container is made of: command, labels and the ``containers.create`` keywords.

Pure data (no docker SDK), so the exact container a launch asks for is unit-tested everywhere,
including the GPU device requests that cannot be exercised on a machine without GPUs.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pytest_sglang.server.options.docker import gpu_device_requests, parse_size, volume_bindings

LABEL_PREFIX = "io.pytest-sglang."
LABEL_PLUGIN = LABEL_PREFIX + "plugin"
LABEL_RUN = LABEL_PREFIX + "run"
LABEL_OWNER_PID = LABEL_PREFIX + "owner-pid"
LABEL_OWNER_START = LABEL_PREFIX + "owner-start"
LABEL_OWNER_HOST = LABEL_PREFIX + "owner-host"
PLUGIN_NAME = "pytest-sglang"

#: One id per pytest process: every container it starts carries it (and names start with it).
RUN_ID = f"{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:8]}"

_DEFAULT_COMMAND = ("python3", "-m", "sglang.launch_server")
#: ServerArgs fields the runner owns inside the container: the server must listen on all interfaces
#: of the container network, at the port that is published (:meth:`LaunchConfig.args_without`).
OWNED_FIELDS = ("host", "port")


def owner_labels(pid: int | None = None) -> dict[str, str]:
    """Labels naming the plugin, the run and the owning pytest process (pid + start time vs pid reuse)."""
    pid = os.getpid() if pid is None else pid
    try:
        started = f"{psutil.Process(pid).create_time():.2f}"
    except psutil.Error:
        started = ""
    return {LABEL_PLUGIN: PLUGIN_NAME, LABEL_RUN: RUN_ID, LABEL_OWNER_PID: str(pid),
            LABEL_OWNER_START: started, LABEL_OWNER_HOST: socket.gethostname()}


def container_command(args: Sequence[str], command: Sequence[str] | None, container_port: int) -> list[str]:
    """``python3 -m sglang.launch_server <args> --host 0.0.0.0 --port <container port>``.

    ``args`` come without their own host and port (:data:`OWNED_FIELDS`); should the command prefix
    carry them, the ones appended here win (SGLang's parser keeps the last value).
    """
    prefix = list(command) if command else list(_DEFAULT_COMMAND)
    return [*prefix, *args, "--host", "0.0.0.0", "--port", str(container_port)]


@dataclass(frozen=True)
class ContainerSpec:
    """Everything the docker runner decides about one container (built from the settings)."""

    image: str
    command: tuple[str, ...]
    container_port: int
    env: Mapping[str, str] = field(default_factory=dict)
    volumes: tuple[str, ...] = ()
    gpus: str = "all"
    shm_size: str = "32g"
    ipc_host: bool = True
    memory: str | None = None
    network: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    name: str = ""

    @property
    def host_network(self) -> bool:
        return self.network == "host"

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory is None else parse_size(self.memory)


def new_container_name() -> str:
    return f"pytest-sglang-{RUN_ID}-{uuid.uuid4().hex[:6]}"


def create_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """Keyword arguments for ``client.containers.create``, sent as built.

    ``Any``: the SDK's stubs are narrower than what it accepts and we send (device requests as
    dicts, ``(ip, None)`` for an ephemeral published port).
    """
    kwargs: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.command),
        "name": spec.name or new_container_name(),
        "labels": dict(spec.labels),
        "environment": dict(spec.env),
        "volumes": list(spec.volumes),
        "shm_size": parse_size(spec.shm_size),
        "device_requests": gpu_device_requests(spec.gpus),
        # docker-init as PID 1 forwards SIGTERM to the server and reaps SGLang's worker processes.
        "init": True,
        # A driver the logs API can read, whatever the engine's default (syslog/none cannot be followed);
        # rotated so a long --log-requests run cannot fill the disk.
        "log_config": {"type": "json-file", "config": {"max-size": "100m", "max-file": "3"}},
        "detach": True,
    }
    if spec.ipc_host:
        kwargs["ipc_mode"] = "host"
    memory = spec.memory_bytes
    if memory is not None:
        # Swap limit = memory limit: the kernel's OOM killer fires at the limit instead of swapping.
        kwargs["mem_limit"] = memory
        kwargs["memswap_limit"] = memory
    if spec.host_network:
        kwargs["network_mode"] = "host"
    else:
        if spec.network:
            kwargs["network"] = spec.network
        # Loopback only, ephemeral host port: nothing outside this host can reach the test server.
        kwargs["ports"] = {f"{spec.container_port}/tcp": ("127.0.0.1", None)}
    return kwargs


def build_spec(
    *,
    image: str,
    args: Sequence[str],
    command: Sequence[str] | None,
    container_port: int,
    env: Mapping[str, str],
    volumes: Sequence[str],
    hf_cache: Path | None,
    gpus: str,
    shm_size: str,
    ipc_host: bool,
    memory: str | None,
    network: str | None,
) -> ContainerSpec:
    """Assemble the spec (the options were checked by DockerOptions; ``args`` have no host/port)."""
    spec = ContainerSpec(
        image=image, command=tuple(container_command(args, command, container_port)),
        container_port=container_port, env=dict(env),
        volumes=tuple(volume_bindings(volumes, hf_cache=hf_cache)), gpus=gpus, shm_size=shm_size,
        ipc_host=ipc_host, memory=memory, network=network, labels=owner_labels(), name=new_container_name(),
    )
    return spec
