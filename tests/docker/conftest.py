"""Shared set-up of the docker tier: the local image, the host paths it needs, a clean HF cache.

The image (``scripts/docker/build-image.sh``) is an almost empty root; containers run this host's
Python and the project's virtualenv, bind-mounted read-only at the same paths, so the simulator runs
inside the container exactly as it runs on the host.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dockerhelp import IMAGE, REPO, SIM_ARGS, LaunchFactory, host_volumes, run_containers, sim_command

from pytest_sglang.server.config import DockerOptions, LaunchConfig


@pytest.fixture(autouse=True)
def _private_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner mounts (and creates) the user's HF cache: never touch the real one from tests.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A client of the running engine, with the local image built if missing."""
    from pytest_sglang.server.docker.engine import connect

    client = connect()
    if not client.images.list(name=IMAGE):
        subprocess.run(["bash", str(REPO / "scripts" / "docker" / "build-image.sh"), IMAGE], check=True)
    yield client
    client.close()


@pytest.fixture
def no_container_left(docker_client: Any) -> Iterator[None]:
    """Every test of the tier ends with no container of this run on the engine."""
    yield
    left = run_containers(docker_client)
    for container in left:
        container.remove(force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"


@pytest.fixture
def docker_launch(docker_client: Any, no_container_left: None, tmp_path: Path) -> LaunchFactory:
    """``docker_launch(*extra_args, memory=None, **config_overrides)`` -> a LaunchConfig for the sim."""

    def make(*extra: str, memory: str | None = None, image: str = IMAGE, pull: str = "never",
             gpus: str = "none", **overrides: Any) -> LaunchConfig:
        options = DockerOptions(image=image, gpus=gpus, shm_size="64m", volumes=host_volumes(), memory=memory,
                                pull=pull)
        fields: dict[str, Any] = {"runner": "docker", "args": (*SIM_ARGS, *extra), "command": sim_command(),
                                  "docker": options, "startup_timeout_s": 60.0, "log_dir": tmp_path / "logs"}
        return LaunchConfig(**{**fields, **overrides})

    return make
