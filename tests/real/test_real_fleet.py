"""A fleet of one real SGLang 0.5.23 CPU worker behind SGLang's gateway (smg 1.13.0): attach and launch.

CPU is scarce, so this costs one real start: the attach test puts a gateway in front of the tier's
shared raw server (started for the attach tests anyway), and only the launch test starts a worker.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from realsgl import RawServer, RealSetup, free_port, launch_options

pytestmark = pytest.mark.real_sglang
FLEET_SHAPE = Path(__file__).resolve().parents[1] / "fleet" / "inner" / "fleet_shape.py"
#: What only a real worker shows through the gateway (inner test of the launch).
REAL_FLEET = '''
def test_real_worker_behind_the_gateway(sglang_fleet, sglang_server):
    assert (sglang_fleet.flavor, sglang_fleet.mode, sglang_fleet.launched) == ("smg", "process", True)
    [worker] = sglang_fleet.workers
    assert worker.info()["version"] == "0.5.23"
    assert worker.entry.fact("version") == "0.5.23"  # smg's label, read from the worker at registration
    assert worker.process is not None and worker.process.exit_status() is None
    assert sglang_fleet.readiness().ready
    [listed] = sglang_fleet.discover().healthy
    assert listed.url == worker.url
    assert sglang_server.info()["max_total_num_tokens"] == 4096  # a fleet's info() is its first worker's
    assert worker.metrics()["sglang:max_total_num_tokens"][0].value == 4096
'''


def _smg() -> str:
    smg = shutil.which("smg", path=str(Path(sys.executable).parent))
    assert smg is not None, "smg is not installed in this venv (the project's gateway extra)"
    return smg


@pytest.fixture
def smg_gateway(raw_server: RawServer, tmp_path: Path) -> Iterator[str]:
    """smg 1.13.0 in front of the tier's raw real server (it authenticates to it with the server's key)."""
    assert raw_server.api_key is not None
    port = free_port()
    argv = [_smg(), "launch", "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(free_port()), "--worker-urls", raw_server.url, "--api-key", raw_server.api_key]
    log = tmp_path / "gateway.log"
    with log.open("wb") as out:
        gateway = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readiness", headers=raw_server.auth(), timeout=5,
                             trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"smg in front of the real worker never got ready; log:\n{log.read_text()[-3000:]}")
        yield url
    finally:
        os.killpg(gateway.pid, signal.SIGKILL)
        gateway.wait(10)


def test_attach_to_a_gateway_in_front_of_real_sglang(
    pytester: pytest.Pytester, raw_server: RawServer, smg_gateway: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert raw_server.api_key is not None
    # with --api-key, smg wants the key from its clients too
    workers = httpx.get(f"{smg_gateway}/workers", headers=raw_server.auth(), timeout=30, trust_env=False)
    [listed] = workers.json()["workers"]
    assert (listed["url"], listed["is_healthy"], listed["labels"]["version"]) == (raw_server.url, True, "0.5.23")
    pytester.makepyfile(test_fleet_shape=FLEET_SHAPE.read_text())
    monkeypatch.setenv("FLEET_EXPECT_WORKERS", "1")
    monkeypatch.setenv("SGLANG_API_KEY", raw_server.api_key)
    result = pytester.runpytest_subprocess("-s", f"--sglang-url={smg_gateway}", "--sglang-startup-timeout=60",
                                           timeout=180)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"sglang: mode=attach gateway=smg 1.13.0 workers=1 url={smg_gateway}",
                                 "*FLEET gateway=smg 1.13.0 workers=1 mode=attach launched=False "
                                 "unreachable=[[]None[]]"])
    assert raw_server.api_key not in result.stdout.str() + result.stderr.str()
    assert raw_server.proc is not None and raw_server.proc.poll() is None  # attach never stops a worker


def test_launch_a_real_worker_behind_smg(
    pytester: pytest.Pytester, real_setup: RealSetup, leftover_check: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytester.makepyfile(test_fleet_shape=FLEET_SHAPE.read_text(), test_real_fleet_inner=REAL_FLEET)
    monkeypatch.setenv("FLEET_EXPECT_WORKERS", "1")
    log_dir = pytester.path / "logs"
    result = pytester.runpytest_subprocess(*launch_options(real_setup, log_dir), "--sglang-workers=1",
                                           f"--sglang-gateway-command={_smg()} launch", "-s", timeout=400)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "sglang: mode=launch runner=process workers=1 gateway=* url=(free ports picked at start)",
        "[[]sglang *s] worker 0 (:*) SGLang ready in *s (max_total_num_tokens=4,096*",
        "[[]sglang *s] gateway smg 1.13.0 starting at http://127.0.0.1:* in front of 1 workers",
        "sglang: fleet serving at http://127.0.0.1:*: gateway=smg 1.13.0 workers=1, gateway log *",
    ])
    assert len(list(log_dir.glob("sglang-*.log"))) == 1
    served = re.search(r"fleet serving at http://127\.0\.0\.1:(\d+)", result.stdout.str())
    assert served is not None
    # the gateway ended with the session (leftover_check covers the real worker's processes)
    gateways = [p for p in psutil.process_iter(["cmdline"])
                if f"--port {served.group(1)}" in " ".join(p.info["cmdline"] or ())]
    assert gateways == []
