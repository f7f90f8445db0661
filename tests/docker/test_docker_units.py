"""Docker runner pieces that need no engine: option syntax, the container as built, errors, messages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_sglang.errors import ConfigError, DockerError
from pytest_sglang.server.config import DockerOptions, LaunchConfig
from pytest_sglang.server.docker import engine as docker_engine
from pytest_sglang.server.docker.container import ContainerExit
from pytest_sglang.server.docker.runner import DockerRunner
from pytest_sglang.server.docker.spec import (
    LABEL_OWNER_PID,
    LABEL_PLUGIN,
    LABEL_RUN,
    OWNED_FIELDS,
    RUN_ID,
    ContainerSpec,
    container_command,
    create_kwargs,
    owner_labels,
)
from pytest_sglang.server.options.docker import (
    DEFAULT_IMAGE,
    IMAGE_HF_CACHE,
    format_size,
    gpu_device_requests,
    parse_gpus_option,
    parse_size,
    parse_volume,
    parse_volume_option,
    user_hf_cache,
    volume_bindings,
)

GPU = {"driver": "nvidia", "capabilities": [["gpu"]]}


@pytest.mark.parametrize(("spec", "expected"), [
    ("all", [{**GPU, "count": -1}]),
    ("ALL", [{**GPU, "count": -1}]),
    ("none", []),
    ("8", [{**GPU, "count": 8}]),
    ("0,1", [{**GPU, "device_ids": ["0", "1"]}]),
    ("device=0", [{**GPU, "device_ids": ["0"]}]),
    ("GPU-3b1c,GPU-77aa", [{**GPU, "device_ids": ["GPU-3b1c", "GPU-77aa"]}]),
])
def test_gpu_device_requests_as_built(spec: str, expected: list[dict[str, object]]) -> None:
    assert gpu_device_requests(spec) == expected


def test_gpu_device_requests_are_valid_sdk_device_requests() -> None:
    from docker.types import DeviceRequest

    built = [DeviceRequest(**req) for req in gpu_device_requests("0,3")]
    assert built == [{"Driver": "nvidia", "Count": 0, "DeviceIDs": ["0", "3"], "Capabilities": [["gpu"]],
                      "Options": {}}]


@pytest.mark.parametrize("spec", ["0", "1,,2", "", "a b"])
def test_gpu_spec_errors_name_option_value_and_fix(spec: str) -> None:
    with pytest.raises(ValueError, match=r"0 GPUs is 'none'|not all, none, a count"):
        gpu_device_requests(spec)  # the pure parser says what is wrong; its callers name the setting
    with pytest.raises(ConfigError) as info:
        parse_gpus_option(spec)  # the plugin's option row (configure time)
    text = str(info.value)
    assert text.startswith(f"--sglang-gpus={spec!r}: ")
    assert "Fix: give --sglang-gpus all, none, a count like 8, or device IDs like 0,1" in text
    with pytest.raises(ConfigError) as info:
        DockerOptions(gpus=spec)  # the engine's words
    assert str(info.value).startswith(f"DockerOptions.gpus={spec!r}: ")
    assert "Fix: give DockerOptions(gpus=...) all, none, a count like 8" in str(info.value)


@pytest.mark.parametrize(("text", "n"), [("256m", 256 * 2**20), ("32g", 32 * 2**30), ("1.5g", 3 * 2**29),
                                         ("512MiB", 512 * 2**20), ("1024", 1024), ("64k", 65536)])
def test_parse_size(text: str, n: int) -> None:
    assert parse_size(text) == n


def test_size_errors_and_format() -> None:
    with pytest.raises(ConfigError, match=r"^DockerOptions\.shm_size='lots': not a size\. Fix: give "
                                          r"DockerOptions\(shm_size=\.\.\.\) a size like 256m, 32g or 1\.5g$"):
        DockerOptions(shm_size="lots")
    with pytest.raises(ConfigError, match=r"^DockerOptions\.memory='0m': must be greater than 0"):
        DockerOptions(memory="0m")
    with pytest.raises(ValueError, match=r"^not a size$"):
        parse_size("lots")
    assert [format_size(parse_size(t)) for t in ("256m", "32g", "1536m", "1000")] == \
        ["256m", "32g", "1536m", "1000b"]


def test_parse_volume_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_volume("/data:/models:ro").binding() == "/data:/models:ro"
    named = parse_volume("hf-cache:/root/.cache/huggingface")
    assert named.binding() == "hf-cache:/root/.cache/huggingface:rw"
    assert parse_volume("./weights:/w").source == str(tmp_path / "weights")


@pytest.mark.parametrize(("spec", "problem"), [
    ("/data", "expected SRC:DST[:ro]"),
    ("/a:/b:rx", "mode 'rx' is not ro or rw"),
    ("/a:models", "the container path 'models' is not absolute"),
    ("some path:/m", "'some path' is neither an absolute path nor a volume name"),
    (":/m", "expected SRC:DST[:ro]"),
])
def test_invalid_volume_syntax(spec: str, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_volume(spec)
    assert str(info.value) == problem
    with pytest.raises(ConfigError) as info:
        parse_volume_option(spec)
    assert str(info.value) == (f"--sglang-volume={spec!r}: {problem}. Fix: write --sglang-volume SRC:DST or "
                               "SRC:DST:ro, e.g. /data/models:/models:ro")
    with pytest.raises(ConfigError, match=rf"^DockerOptions\.volumes={spec!r}: "):
        DockerOptions(volumes=(spec,))


def test_hf_cache_is_mounted_where_the_image_expects_it(tmp_path: Path) -> None:
    assert user_hf_cache({"HF_HOME": str(tmp_path)}) == tmp_path
    assert user_hf_cache({"XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface")
    assert volume_bindings(["/d:/d:ro"], hf_cache=tmp_path) == ["/d:/d:ro", f"{tmp_path}:{IMAGE_HF_CACHE}:rw"]
    # A user mount at the image's cache path wins over the default.
    assert volume_bindings([f"/mine:{IMAGE_HF_CACHE}"], hf_cache=tmp_path) == [f"/mine:{IMAGE_HF_CACHE}:rw"]


def test_container_command_owns_host_and_port() -> None:
    # Every spelling SGLang accepts is dropped: --host X, --port=N, and abbreviations (--ho, --po=N).
    for given in (["--host", "127.0.0.1", "--port=4000"], ["--ho", "127.0.0.1", "--po=4000"]):
        config = LaunchConfig(runner="docker", args=("--model-path", "m", *given, "--tp", "8"))
        assert config.args_without(*OWNED_FIELDS) == ["--model-path", "m", "--tp", "8"]
    args = LaunchConfig(runner="docker", args=("--model-path", "m", "--host", "127.0.0.1", "--port=4000", "--tp",
                                               "8")).args_without(*OWNED_FIELDS)
    assert container_command(args, None, 30000) == [
        "python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "8",
        "--host", "0.0.0.0", "--port", "30000"]
    assert container_command(["--x"], ["/venv/bin/python", "-m", "sim"], 5) == [
        "/venv/bin/python", "-m", "sim", "--x", "--host", "0.0.0.0", "--port", "5"]


def test_labels_name_plugin_run_and_owner() -> None:
    labels = owner_labels()
    assert labels[LABEL_PLUGIN] == "pytest-sglang"
    assert labels[LABEL_RUN] == RUN_ID
    assert labels[LABEL_OWNER_PID] == str(__import__("os").getpid())


def _production_runner_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ContainerSpec:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    config = LaunchConfig(runner="docker", args=("--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "8"),
                          env=(("HF_TOKEN", "hf_secret_value"),),
                          docker=DockerOptions(volumes=("/models:/models:ro",), memory="512g"))
    return DockerRunner().spec(config, 31234)


def test_production_container_as_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = create_kwargs(_production_runner_spec(tmp_path, monkeypatch))
    assert kwargs["image"] == DEFAULT_IMAGE == "lmsysorg/sglang:v0.5.23"
    assert kwargs["command"] == ["python3", "-m", "sglang.launch_server", "--model-path",
                                 "deepseek-ai/DeepSeek-V3", "--tp", "8", "--host", "0.0.0.0",
                                 "--port", "31234"]
    assert kwargs["device_requests"] == [{**GPU, "count": -1}]
    assert kwargs["shm_size"] == 32 * 2**30
    assert kwargs["ipc_mode"] == "host"
    assert kwargs["mem_limit"] == kwargs["memswap_limit"] == 512 * 2**30
    assert kwargs["ports"] == {"31234/tcp": ("127.0.0.1", None)}
    assert kwargs["volumes"] == ["/models:/models:ro", f"{tmp_path / 'hf'}:/root/.cache/huggingface:rw"]
    assert kwargs["environment"] == {"HF_TOKEN": "hf_secret_value"}
    assert kwargs["init"] is True and kwargs["labels"][LABEL_PLUGIN] == "pytest-sglang"
    assert kwargs["name"].startswith(f"pytest-sglang-{RUN_ID}-")


def test_secret_env_is_registered_for_scrubbing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sglang import redaction

    _production_runner_spec(tmp_path, monkeypatch)
    assert "hf_secret_value" not in redaction.scrub("token hf_secret_value")


def test_off_switches_and_networks() -> None:
    spec = ContainerSpec(image="i", command=("c",), container_port=7, gpus="none", ipc_host=False,
                         network="host")
    kwargs = create_kwargs(spec)
    assert kwargs["device_requests"] == [] and "ipc_mode" not in kwargs and "mem_limit" not in kwargs
    assert kwargs["network_mode"] == "host" and "ports" not in kwargs
    bridge = create_kwargs(ContainerSpec(image="i", command=("c",), container_port=7, network="ci-net"))
    assert bridge["network"] == "ci-net" and bridge["ports"] == {"7/tcp": ("127.0.0.1", None)}


def test_preflight_budget_is_the_container_memory_limit() -> None:
    runner = DockerRunner()
    limited = runner.host_memory(LaunchConfig(runner="docker", docker=DockerOptions(memory="64g")))
    assert limited.available_bytes == limited.total_bytes == 64 * 2**30
    assert limited.source == "container memory limit --sglang-docker-memory 64g"
    assert runner.host_memory(LaunchConfig(runner="docker")).source != limited.source


@pytest.mark.parametrize(("status", "text"), [
    (ContainerExit(code=137, kind="oom", memory_limit=256 * 2**20),
     "killed by the out-of-memory killer (container memory limit 256m), exit code 137"),
    (ContainerExit(code=3), "exited with code 3"),
    (ContainerExit(code=137), "exited with code 137 (killed by SIGKILL)"),
    (ContainerExit(kind="removed"), "the container was removed while the server was in use (docker rm?)"),
])
def test_exit_messages(status: ContainerExit, text: str) -> None:
    assert status.describe() == text


def test_engine_gone_message_names_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/elsewhere.sock")
    text = ContainerExit(kind="engine-gone", detail="ConnectionError: refused").describe()
    assert text == ("the Docker engine at DOCKER_HOST=unix:///run/elsewhere.sock stopped answering "
                    "(ConnectionError: refused); the container's state is unknown")


def test_engine_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(DockerError) as info:
        docker_engine.connect(timeout_s=2)
    text = str(info.value)
    where = f"DOCKER_HOST=unix://{tmp_path}/no-engine.sock"
    assert text.startswith(f"the Docker engine at {where} is unreachable: cannot connect to ")
    assert "Fix: start the engine (sudo systemctl start docker, or: sudo dockerd" in text
    assert "or point DOCKER_HOST at a running engine" in text
    assert docker_engine.find_docker_leftovers() == []  # no engine: nothing can be left over


def test_sdk_missing_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docker", None)
    with pytest.raises(DockerError, match=r"needs the Docker SDK for Python, which is not installed\.\n"
                                          r"Fix: pip install 'docker>=7\.0'"):
        docker_engine.connect()


def test_old_engine_gives_upgrade_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(docker.DockerClient, "version", lambda self, **_kw: {"ApiVersion": "1.39"})
    with pytest.raises(DockerError) as info:
        docker_engine.connect()
    assert str(info.value) == (
        "the Docker engine at unix:///var/run/docker.sock (DOCKER_HOST is not set) speaks API 1.39, older "
        "than 1.40 (Docker Engine 19.03), which GPU device requests need.\n"
        "Fix: upgrade Docker Engine to 19.03 or newer (Debian/Ubuntu: apt-get install docker.io)")


def test_port_conflict_on_the_host_network() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        port = sock.getsockname()[1]
        config = LaunchConfig(runner="docker", args=("--port", str(port)),
                              docker=DockerOptions(network="host", gpus="none"))
        with pytest.raises(DockerError) as info:
            DockerRunner().start(config, port, Path("/nonexistent-dir/never-written.log"))
    assert str(info.value) == (
        f"port conflict: port {port} (host network) is already in use on this host.\nFix: stop what listens "
        f"there (ss -ltnp | grep :{port}), or drop --port from --sglang-launch so pytest-sglang picks a free "
        "port")


class _FakePullAPI:
    def __init__(self, events: list[dict[str, str]]) -> None:
        self.events = events
        self.calls: list[tuple[str, str | None]] = []

    def pull(self, repo: str, tag: str | None = None, **_kw: object) -> list[dict[str, str]]:
        self.calls.append((repo, tag))
        return self.events


class _FakeClient:
    def __init__(self, events: list[dict[str, str]]) -> None:
        self.api = _FakePullAPI(events)


def test_pull_progress_lines_one_per_status_change() -> None:
    client = _FakeClient([{"status": "Pulling from lmsysorg/sglang", "id": "v0.5.23"},
                          {"status": "Downloading", "id": "a1", "progress": "[=>   ] 1MB/9GB"},
                          {"status": "Downloading", "id": "a1", "progress": "[==>  ] 2MB/9GB"},
                          {"status": "Pull complete", "id": "a1"}])
    lines: list[str] = []
    docker_engine.pull_image(client, "lmsysorg/sglang:v0.5.23", lines.append, policy="always")  # type: ignore[arg-type]
    assert client.api.calls == [("lmsysorg/sglang", "v0.5.23")]
    assert lines == ["pulling image lmsysorg/sglang:v0.5.23 (--sglang-pull always)",
                     "pull lmsysorg/sglang:v0.5.23: v0.5.23: Pulling from lmsysorg/sglang",
                     "pull lmsysorg/sglang:v0.5.23: a1: Downloading",
                     "pull lmsysorg/sglang:v0.5.23: a1: Pull complete",
                     "pulled lmsysorg/sglang:v0.5.23"]


def test_pull_error_event_is_a_docker_error() -> None:
    client = _FakeClient([{"error": "manifest for lmsysorg/sglang:v9 not found"}])
    with pytest.raises(DockerError) as info:
        docker_engine.pull_image(client, "lmsysorg/sglang:v9")  # type: ignore[arg-type]
    assert str(info.value).startswith("pulling image lmsysorg/sglang:v9 failed: manifest for "
                                      "lmsysorg/sglang:v9 not found.\nFix: check the image name and tag "
                                      "(--sglang-image)")


@pytest.mark.parametrize(("image", "parts"), [
    ("lmsysorg/sglang:v0.5.23", ("lmsysorg/sglang", "v0.5.23")),
    ("localhost:5000/sglang", ("localhost:5000/sglang", None)),
    ("localhost:5000/sglang:dev", ("localhost:5000/sglang", "dev")),
    ("img@sha256:abc", ("img", "@sha256:abc")),
])
def test_image_reference_split(image: str, parts: tuple[str, str | None]) -> None:
    assert docker_engine._split_image(image) == parts


def test_host_alloc_really_allocates() -> None:
    import psutil

    from pytest_sglang.simulator.launch import hostalloc

    lines: list[str] = []
    before = psutil.Process().memory_info().rss
    try:
        got = hostalloc.allocate_host_pools(48 * 10**9, 2, 0.0001, lines.append)
        assert got == hostalloc.real_bytes(48 * 10**9, 2, 0.0001) == 9_600_000
        # Touched, not just reserved: the pages are resident.
        assert psutil.Process().memory_info().rss - before >= 9_000_000
        assert lines == ["[sim] allocating 9.2 MiB of real host memory for the hicache host pools "
                         "(2 rank(s) x 48 GB x scale 0.0001)"]
        assert hostalloc.allocate_host_pools(48 * 10**9, 2, 0.0) == 0
    finally:
        hostalloc.release_host_pools()


def test_bad_pull_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        DockerOptions(pull="sometimes")
    assert str(info.value) == ("DockerOptions.pull='sometimes': not a pull policy. Fix: give "
                               "DockerOptions(pull=...) always, missing (default) or never")


def test_logs_use_a_readable_rotated_driver() -> None:
    kwargs = create_kwargs(ContainerSpec(image="i", command=("c",), container_port=7))
    assert kwargs["log_config"] == {"type": "json-file", "config": {"max-size": "100m", "max-file": "3"}}


@pytest.mark.parametrize(("args", "line"), [
    (["--sglang-gpus=0"], "ERROR: --sglang-gpus='0': a bare number is a GPU count and 0 GPUs is 'none'. "
                          "Fix: give --sglang-gpus all, none, a count like 8, or device IDs like 0,1*"),
    (["--sglang-shm-size=lots"], "ERROR: --sglang-shm-size='lots': not a size. Fix: give --sglang-shm-size a "
                                 "size like 256m, 32g or 1.5g"),
    (["--sglang-volume=/data"], "ERROR: --sglang-volume='/data': expected SRC:DST[[]:ro]. Fix: write "  # [[] is "["
                                "--sglang-volume SRC:DST or SRC:DST:ro*"),
    (["--sglang-docker-memory=64q"], "ERROR: --sglang-docker-memory='64q': not a size. Fix: give "
                                     "--sglang-docker-memory a size like 256m, 32g or 1.5g"),
])
def test_bad_docker_options_are_usage_errors_at_start(pytester: pytest.Pytester, args: list[str],
                                                      line: str) -> None:
    """A typo in a docker option stops the run before any test, not once per test at launch."""
    pytester.makepyfile("def test_never_runs(sglang_server):\n    raise AssertionError('must not run')\n")
    result = pytester.runpytest("--sglang-runner=docker", "--sglang-launch=--model-path m", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
