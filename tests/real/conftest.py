"""Fixtures of the real-SGLang tier (tests/real, run with ``--run-real-sglang``).

One raw real server serves every attach-style test of the run (a real start costs ~30 s of both
cores); launch and crash tests start their own through the plugin, one at a time.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from realsgl import CACHE, RawServer, RealSetup, describe_live, wait_no_sglang

HERE = Path(__file__).parent
INNER = HERE / "inner"
RAW_SERVER = pytest.StashKey[RawServer]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run this tier's raw-server tests first and together, so that server lives only that long.

    The whole suite runs in one session: without this, the session-scoped raw server (about 2 GB)
    would stay up through the launch tests and every later tier.
    """
    slots = [i for i, item in enumerate(items) if HERE in item.path.parents]
    mine = sorted((items[i] for i in slots), key=lambda item: "raw_server" not in _fixtures(item))
    for slot, item in zip(slots, mine, strict=True):
        items[slot] = item


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # Stop the raw server after the last test that uses it (its fixture finalizer then only checks).
    if "raw_server" in _fixtures(item) and (nextitem is None or "raw_server" not in _fixtures(nextitem)):
        server = item.config.stash.get(RAW_SERVER, None)
        if server is not None:
            server.stop()


def _fixtures(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def real_setup() -> RealSetup:
    try:
        return RealSetup.locate()
    except FileNotFoundError as exc:
        # --run-real-sglang asked for this tier: a missing setup is a failure, never a skip.
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def real_api_key() -> str:
    return f"sk-real-{secrets.token_hex(12)}"


@pytest.fixture(scope="session")
def raw_server(
    real_setup: RealSetup, real_api_key: str, tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[RawServer]:
    """A real SGLang 0.5.23 server started without the plugin, with an API key, probes recorded."""
    since = time.time()
    log = tmp_path_factory.mktemp("raw-sglang") / "server.log"
    server = RawServer(real_setup, log, api_key=real_api_key)
    pytestconfig.stash[RAW_SERVER] = server
    server.start()
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()
        left = wait_no_sglang(real_setup, since)
        assert not left, f"raw real server left processes behind: {left}"


@pytest.fixture
def inner_file(pytester: pytest.Pytester) -> Callable[[str], Path]:
    """Copy ``tests/real/inner/<name>.py`` into the pytester dir as ``test_<name>.py``."""

    def copy(name: str) -> Path:
        return pytester.makepyfile(**{f"test_{name}": (INNER / f"{name}.py").read_text()})

    return copy


@pytest.fixture
def leftover_check(real_setup: RealSetup) -> Iterator[None]:
    """Fail the test if real SGLang processes created during it are still alive afterwards."""
    since = time.time()
    yield
    left = wait_no_sglang(real_setup, since)
    assert not left, "real SGLang processes left behind after the run:\n" + "\n".join(left)


# --- the trained arithmetic model (scripts/real-sglang/train_arithmetic_model.py, run by setup.sh) ---

ARITH_HINT = "run `bash scripts/real-sglang/setup.sh` (it trains the model) or set REAL_SGLANG_ARITH_MODEL"
#: CPU_ARGS for a model with real weights: no --load-format dummy, and a KV pool that admits the
#: accuracy harness's 64 requests in flight (with 4096 tokens SGLang admits about ten at max_tokens 512).
ARITH_ARGS = (
    "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
    "--max-total-tokens", "32768", "--enable-metrics", "--sleep-on-idle",
)
#: Launches of the trained model by name -> extra launch args, e.g. ``good=(), bad=("--json-model-...", ...)``.
ArithLaunch = Callable[..., AbstractContextManager[dict[str, RawServer]]]


@dataclass
class ArithServer(RawServer):
    """A raw real server of the trained arithmetic model (real weights, no API key)."""

    def argv(self) -> list[str]:
        return [str(self.setup.python), "-m", "sglang.launch_server", "--model-path", str(self.setup.model),
                *ARITH_ARGS, *self.extra_args, "--host", "127.0.0.1", "--port", str(self.port)]


@pytest.fixture(scope="session")
def arith_model(real_setup: RealSetup) -> Path:
    """The tiny Llama trained on the arithmetic task, in Hugging Face layout."""
    home = Path(os.environ.get("REAL_SGLANG_HOME", CACHE))
    model = Path(os.environ.get("REAL_SGLANG_ARITH_MODEL", home / "arith-llama"))
    missing = [name for name in ("config.json", "model.safetensors", "tokenizer.json") if not (model / name).is_file()]
    if missing:
        pytest.fail(f"trained arithmetic model not found: {', '.join(missing)} missing in {model}; {ARITH_HINT}",
                    pytrace=False)
    return model


@pytest.fixture(scope="session")
def arith_launch(real_setup: RealSetup, arith_model: Path, tmp_path_factory: pytest.TempPathFactory) -> ArithLaunch:
    """Start real SGLang servers of the trained model together; stop them (and check for leftovers) after.

    The servers start at once so their ~30 s start-ups overlap; a module uses it in a module-scoped
    fixture, so each launch lives exactly as long as that module's tests.
    """
    setup = RealSetup(python=real_setup.python, model=arith_model)

    @contextmanager
    def launch(**configs: Sequence[str]) -> Iterator[dict[str, RawServer]]:
        logs = tmp_path_factory.mktemp("arith-sglang")
        servers: dict[str, RawServer] = {
            name: ArithServer(setup, logs / f"{name}.log", extra_args=tuple(args)) for name, args in configs.items()
        }
        try:
            for server in servers.values():
                server.start()
            for name, server in servers.items():
                try:
                    server.wait_healthy()
                except (RuntimeError, TimeoutError) as exc:
                    tail = "\n".join(server.log_path.read_text(errors="replace").splitlines()[-30:])
                    pytest.fail(f"{name} launch {server.argv()[3:]}: {exc}\n{tail}", pytrace=False)
            yield servers
        finally:
            with ThreadPoolExecutor(max(len(servers), 1)) as pool:  # each takes seconds to shut down
                left = [leftover for found in pool.map(_stop_tree, servers.values()) for leftover in found]
            assert not left, "real SGLang processes left behind:\n" + "\n".join(left)

    return launch


def _stop_tree(server: RawServer, timeout_s: float = 15.0) -> list[str]:
    """Stop ``server`` and return its processes still alive ``timeout_s`` later (only its own tree:
    other people's real servers on a shared machine are not counted)."""
    if server.proc is None:
        return []
    try:
        root = psutil.Process(server.proc.pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    server.stop()
    _, alive = psutil.wait_procs(tree, timeout=timeout_s)
    return describe_live(alive)
