"""The docker runner against a real engine: launch, readiness, phases from container logs, failures."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dockerhelp import EngineProxy, LaunchFactory, run_containers

from pytest_sglang.errors import DockerError, PreflightError, ServerExited
from pytest_sglang.server import launch
from pytest_sglang.server.docker.spec import LABEL_OWNER_PID, LABEL_PLUGIN, LABEL_RUN, RUN_ID

pytestmark = pytest.mark.docker_engine


def test_launch_ready_phases_labels_and_cleanup(docker_launch: LaunchFactory, docker_client: Any) -> None:
    config = docker_launch()
    with launch(config) as server:
        assert server.mode == "docker"
        assert server.health() == 200
        info = server.info()  # validated against schemas/server_info.schema.json
        assert server.startup is not None
        assert info["max_total_num_tokens"] == server.startup.max_total_num_tokens
        assert info["max_total_num_tokens"] > 0
        # The container port is published on loopback under another, ephemeral host port.
        (container,) = run_containers(docker_client)
        cport = next(iter(container.attrs["NetworkSettings"]["Ports"]))
        binding = container.attrs["NetworkSettings"]["Ports"][cport][0]
        assert binding["HostIp"] == "127.0.0.1"
        assert server.url == f"http://127.0.0.1:{binding['HostPort']}"
        assert container.labels[LABEL_PLUGIN] == "pytest-sglang"
        assert container.labels[LABEL_RUN] == RUN_ID
        assert container.labels[LABEL_OWNER_PID] == str(__import__("os").getpid())
        # Phases come from the container's log stream, written to the log file as it arrives.
        names = [p.name for p in server.startup.phases]
        assert "loading weights" in names and names[-1] == "ready"
        log = server.log_path.read_text() if server.log_path else ""
        assert "Load weight end." in log and "The server is fired up and ready to roll!" in log
        assert any("KV Cache is allocated" in line for line in server.log_tail(50))
    assert run_containers(docker_client) == []


def test_crash_during_startup_reports_exit_code(docker_launch: LaunchFactory) -> None:
    config = docker_launch("--sim-fault", "crash-at:cuda_graph")
    started = time.monotonic()
    with pytest.raises(ServerExited) as info:
        launch(config)
    elapsed = time.monotonic() - started
    text = str(info.value)
    assert "(mode=docker" in text
    assert "exited before it was ready: exited with code 1" in text
    assert "simulated crash during startup phase 'cuda_graph'" in text  # the log tail, from the container
    assert elapsed < 30, f"crash detection took {elapsed:.1f}s"


def test_real_oom_kill_is_reported_as_oom(docker_launch: LaunchFactory) -> None:
    # 16 GB host pool (fits the simulated host) x 0.03 = ~480 MiB of real, touched memory > 256m.
    config = docker_launch("--enable-hierarchical-cache", "--hicache-size", "16", "--sim-host-alloc-scale",
                           "0.03", memory="256m", preflight=False)
    with pytest.raises(ServerExited) as info:
        launch(config)
    text = str(info.value)
    assert "killed by the out-of-memory killer (container memory limit 256m), exit code 137" in text
    assert "allocating 457.8 MiB of real host memory for the hicache host pools" in text


def test_host_pools_that_fit_the_limit_start(docker_launch: LaunchFactory) -> None:
    config = docker_launch("--enable-hierarchical-cache", "--hicache-size", "16", "--sim-host-alloc-scale",
                           "0.002", memory="256m", preflight=False)
    with launch(config) as server:
        assert server.health() == 200


def test_preflight_budget_is_the_container_limit(docker_launch: LaunchFactory, docker_client: Any) -> None:
    config = docker_launch("--enable-hierarchical-cache", "--hicache-size", "16", memory="8g",
                           host_memory_reserve_gb=0)
    with pytest.raises(PreflightError) as info:
        launch(config)
    assert "container memory limit --sglang-docker-memory 8g" in str(info.value)
    assert run_containers(docker_client) == []  # refused before any container was created


def test_removed_container_is_a_clear_error(docker_launch: LaunchFactory, docker_client: Any) -> None:
    with launch(docker_launch()) as server:
        (container,) = run_containers(docker_client)
        container.remove(force=True)
        deadline = time.monotonic() + 10
        while server.exit_status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        status = server.exit_status()
        assert status is not None, "removal not noticed within 10 s"
        assert status.describe() in ("the container was removed while the server was in use (docker rm?)",
                                     "exited with code 137 (killed by SIGKILL)")


def test_removed_during_startup_fails_fast(docker_launch: LaunchFactory, docker_client: Any) -> None:
    config = docker_launch("--sim-time-scale", "20")  # startup would take ~20 s

    def remove_soon() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for container in run_containers(docker_client):
                if container.status == "running":
                    time.sleep(0.5)
                    container.remove(force=True)
                    return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_soon, daemon=True)
    remover.start()
    started = time.monotonic()
    with pytest.raises(ServerExited) as info:
        launch(config)
    remover.join(5)
    assert time.monotonic() - started < 15
    assert "(mode=docker" in str(info.value)


def test_missing_image_with_pull_never(docker_launch: LaunchFactory) -> None:
    with pytest.raises(DockerError) as info:
        launch(docker_launch(image="pytest-sglang/absent:never"))
    assert str(info.value).startswith("image pytest-sglang/absent:never is not on the Docker engine (")
    assert "and --sglang-pull is never.\nFix: docker pull pytest-sglang/absent:never" in str(info.value)


def test_pull_failure(docker_launch: LaunchFactory) -> None:
    # Port 9 on loopback: nothing listens, so the pull fails at once, as without a registry.
    with pytest.raises(DockerError) as info:
        launch(docker_launch(image="127.0.0.1:9/nothing/here:v1", pull="missing"))
    text = str(info.value)
    assert text.startswith("pulling image 127.0.0.1:9/nothing/here:v1 failed: ")
    assert "Fix: check the image name and tag (--sglang-image)" in text


def test_gpu_request_without_nvidia_runtime(docker_launch: LaunchFactory, docker_client: Any) -> None:
    if "nvidia" in docker_client.info().get("Runtimes", {}):
        pytest.skip("this engine has the NVIDIA runtime: the request would succeed")
    with pytest.raises(DockerError) as info:
        launch(docker_launch(gpus="all"))
    text = str(info.value)
    assert text.startswith("--sglang-gpus='all': the Docker engine cannot give GPUs to containers (")
    assert text.endswith("or run with --sglang-gpus none")


@pytest.fixture
def engine_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineProxy]:
    proxy = EngineProxy(Path(tempfile.mkdtemp(prefix="eng-", dir="/tmp")) / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", proxy.docker_host)
    yield proxy
    proxy.close()


def test_engine_gone_mid_run_is_a_clear_error(docker_launch: LaunchFactory, docker_client: Any,
                                              engine_proxy: EngineProxy) -> None:
    server = launch(docker_launch())
    try:
        engine_proxy.close()
        deadline = time.monotonic() + 10
        while server.exit_status() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        status = server.exit_status()
        assert status is not None, "the engine's disappearance was not noticed within 10 s"
        assert status.describe().startswith(
            f"the Docker engine at DOCKER_HOST={engine_proxy.docker_host} stopped answering (")
        started = time.monotonic()
        server.stop()  # must not hang on an engine that is gone
        assert time.monotonic() - started < 10
    finally:
        for container in run_containers(docker_client):  # through the real engine
            container.remove(force=True)


def test_engine_gone_during_startup_fails_fast(docker_launch: LaunchFactory, docker_client: Any,
                                               engine_proxy: EngineProxy) -> None:
    config = docker_launch("--sim-fault", "hang-at:weights")

    def cut_when_running() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(c.status == "running" for c in run_containers(docker_client)):
                time.sleep(0.3)
                engine_proxy.close()
                return
            time.sleep(0.1)

    cutter = threading.Thread(target=cut_when_running, daemon=True)
    cutter.start()
    started = time.monotonic()
    try:
        with pytest.raises(ServerExited) as info:
            launch(config)
        assert time.monotonic() - started < 20
        assert "stopped answering" in str(info.value)
    finally:
        cutter.join(5)
        for container in run_containers(docker_client):
            container.remove(force=True)


def test_host_network(docker_launch: LaunchFactory, docker_client: Any) -> None:
    import dataclasses

    base = docker_launch()
    assert base.docker is not None
    config = docker_launch(docker=dataclasses.replace(base.docker, network="host"))
    with launch(config) as server:
        assert server.health() == 200
        (container,) = run_containers(docker_client)
        assert container.attrs["HostConfig"]["NetworkMode"] == "host"
        # No publishing: the URL is the container's own --port, on the host's loopback.
        command = container.attrs["Config"]["Cmd"]
        assert server.url == f"http://127.0.0.1:{command[command.index('--port') + 1]}"
