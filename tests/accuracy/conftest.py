"""Fixtures of the accuracy tests: a real sgl-eval in a venv of its own, and a local stand-in for the hub.

``sgl_eval_exe``: ``$PYTEST_SGLANG_SGL_EVAL`` if set, else sgl-eval 0.1.3 installed once (from PyPI,
~1 min) into ``~/.cache/pytest-sglang/sgl-eval-0.1.3/venv`` and reused. Its own venv, as users are
told to do: it pins its own stack (datasets, pandas, sympy) which must not leak into the plugin's.
``fake_hub``: a loopback HTTP server answering like ``HF_ENDPOINT`` does for one dataset file (HEAD
with ``X-Repo-Commit``/``ETag``, then GET), or stalling, or announcing a huge file.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from tests.accuracy.fakehub import DATA, FakeHub, handler

SGL_EVAL_VERSION = "0.1.3"


@pytest.fixture(scope="session")
def sgl_eval_exe() -> Path:
    given = os.environ.get("PYTEST_SGLANG_SGL_EVAL")
    if given:
        return Path(given)
    home = Path.home() / ".cache" / "pytest-sglang" / f"sgl-eval-{SGL_EVAL_VERSION}"
    exe = home / "venv" / "bin" / "sgl-eval"
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(home / "install.lock"), timeout=1200):
        if not exe.exists():
            log = home / "install.log"
            with log.open("w") as out:
                subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True, stdout=out,
                               stderr=subprocess.STDOUT, timeout=300)
                done = subprocess.run([str(home / "venv" / "bin" / "pip"), "install", "--disable-pip-version-check",
                                       f"sgl-eval=={SGL_EVAL_VERSION}"], stdout=out, stderr=subprocess.STDOUT,
                                      timeout=900)
            if done.returncode != 0 or not exe.exists():
                pytest.fail(f"installing sgl-eval {SGL_EVAL_VERSION} failed; see {log}:\n{log.read_text()[-2000:]}")
    return exe


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub(files={
        "/datasets/openai/gsm8k/resolve/main/main/test-00000-of-00001.parquet":
            (DATA / "hub" / "openai-gsm8k" / "main" / "test-00000-of-00001.parquet").read_bytes(),
    })
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield hub
    hub.release.set()
    server.shutdown()
    server.server_close()
