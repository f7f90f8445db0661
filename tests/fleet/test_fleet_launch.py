"""--sglang-workers N: simulator workers and a REAL gateway (smg 1.13.0, sglang-router 0.3.2) launched by pytest.

Every run checks that nothing of the fleet outlives the pytest that started it: no process carrying that
run's owner marker (PYTEST_SGLANG_OWNER=<pid>:...) is left, on the success and the failure paths alike.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fleet_helpers import SIM_LAUNCH, copy_inner, owned_by, run_inner

pytestmark = pytest.mark.slow
FLEET_ENV = {"FLEET_EXPECT_WORKERS": "2"}


def _simulate(*extra: str, launch: str = SIM_LAUNCH, workers: int = 2) -> list[str]:
    return ["--sglang-simulate", "--sglang-workers", str(workers), "--sglang-launch", launch,
            "--sglang-startup-timeout", "120", *extra]


def test_launch_a_fleet(gateway_command: str, tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_shape")
    counter = tmp_path / "launches.txt"
    run = run_inner(tmp_path, "-s", *_simulate("--sglang-gateway-command", gateway_command,
                                               launch=f"{SIM_LAUNCH} --sim-launch-counter {counter}"), env=FLEET_ENV)
    assert run.returncode == 0, run.output
    # the launched gateway's version comes from its command (smg --version) or its installed package
    flavor = "sglang-router 0.3.2" if "sglang_router" in gateway_command else "smg 1.13.0"
    run.fnmatch_lines([
        f"sglang: mode=launch runner=simulator workers=2 gateway={gateway_command} url=(free ports picked at start)",
        "sglang: launch args (each worker): --model-path sim/tiny-llama *",
    ])
    run.fnmatch_lines(["[[]sglang *s] worker [01] (:*) SGLang ready in *",
                       f"[[]sglang *s] gateway {flavor} starting at http://127.0.0.1:* in front of 2 workers",
                       f"[[]sglang *s] gateway ready at http://127.0.0.1:*: gateway={flavor} workers=2 (*s since "
                       "the start)",
                       f"sglang: fleet serving at http://127.0.0.1:*: gateway={flavor} workers=2, gateway log "
                       "*gateway-*.log",
                       "FLEET * workers=2 mode=simulator launched=True unreachable=[[]None, None[]]",
                       "*1 passed*"])
    assert len(counter.read_text().splitlines()) == 2
    assert run.leftovers() == []


def test_a_worker_that_dies_during_the_start(tmp_path: Path) -> None:
    """One worker crashes in its start (--sim-fault crash-at), the other is still starting: both end."""
    wrapper = tmp_path / "one_crashes.py"
    # The first worker started crashes while allocating its KV cache; the other starts 20x slower.
    wrapper.write_text(
        "import os, sys\n"
        "marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'first-worker')\n"
        "try:\n"
        "    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))\n"
        "    extra = ['--sim-fault', 'crash-at:kv_cache']\n"
        "except FileExistsError:\n"
        "    extra = ['--sim-time-scale', '1']\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'pytest_sglang.simulator', *sys.argv[1:], *extra])\n")
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH, "--sglang-runner", "process",
                    "--sglang-command", f"{sys.executable} {wrapper}", "--sglang-startup-timeout", "120", env=FLEET_ENV)
    assert run.returncode == 1, run.output
    run.fnmatch_lines([
        "*ServerExited: fleet start failed: worker [01] (port *), one of 2 workers, did not start; every other "
        "process of the fleet was stopped.",
        "SGLang server http://127.0.0.1:* (mode=process, pid *) exited before it was ready: exited with code 1, *",
        "Cause (last exception in the log): RuntimeError: simulated crash during startup phase 'kv_cache' *",
        "Last * lines of *sglang-logs/sglang-*.log:",
    ])
    assert "gateway" not in run.output.split("fleet start failed", 1)[1].split("Fix:", 1)[0].lower()
    assert run.leftovers() == []


def test_a_gateway_that_dies(gateway_command: str, tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_shape")
    # A value the gateway's own argument parser accepts and its start rejects (a typo or a bad choice
    # is refused before anything starts: tests/fleet/test_gateway_flags.py).
    run = run_inner(tmp_path, *_simulate("--sglang-gateway-command", gateway_command,
                                         "--sglang-gateway", "--request-timeout-secs 99999999999999999999999"),
                    env=FLEET_ENV)
    assert run.returncode == 1, run.output
    run.fnmatch_lines([
        "*ServerExited: gateway http://127.0.0.1:* exited with code * before the fleet was ready *",
        "Gateway log (*gateway-*.log), last lines:",
        "*Overflow*",
        "Fix: read the gateway log above (a bad --sglang-gateway argument?).",
    ])
    assert run.leftovers() == []


def test_ctrl_c_during_the_fleet_start(tmp_path: Path) -> None:
    """SIGINT while both workers hang in their start: pytest ends and nothing of the fleet is left."""
    copy_inner(tmp_path, "fleet_shape")
    sent = threading.Event()

    def interrupt(line: str, popen: subprocess.Popen[str]) -> None:
        # both workers are loading weights (where they hang): every worker process exists
        if not sent.is_set() and len(owned_by(popen.pid)) >= 2:
            sent.set()
            popen.send_signal(signal.SIGINT)

    run = run_inner(tmp_path, *_simulate(launch=f"{SIM_LAUNCH} --sim-fault hang-at:weights"), env=FLEET_ENV,
                    on_line=interrupt, timeout_s=120)
    assert sent.is_set(), run.output
    assert run.returncode == 2, run.output  # interrupted
    assert "KeyboardInterrupt" in run.output
    assert run.leftovers() == []


def test_too_few_gpus_is_refused_before_anything_starts(tmp_path: Path) -> None:
    copy_inner(tmp_path, "fleet_shape")
    counter = tmp_path / "launches.txt"
    # The process runner with a command that is never reached: the refusal comes first.
    run = run_inner(tmp_path, "--sglang-workers", "2", "--sglang-gpus", "1", "--sglang-runner", "process",
                    "--sglang-command", f"{sys.executable} -m pytest_sglang.simulator",
                    "--sglang-launch", f"{SIM_LAUNCH} --sim-launch-counter {counter}", env=FLEET_ENV)
    assert run.returncode == 1, run.output
    run.fnmatch_lines(["*--sglang-workers=2: 2 workers x 1 GPU(s) each (tp 1 x pp 1) = 2 GPUs, but --sglang-gpus 1 "
                       "allows 1 (0); nothing was started*"])
    assert not counter.exists()
    assert run.leftovers(timeout_s=0) == []


def test_xdist_controller_launches_the_fleet_once(tmp_path: Path) -> None:
    counter = tmp_path / "launches.txt"
    (tmp_path / "test_many.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_fleet(sglang_fleet, i):\n"
        "    assert len(sglang_fleet.workers) == 2\n"
        "    assert all(w.reachable for w in sglang_fleet.workers)\n")
    run = run_inner(tmp_path, "-n", "2", *_simulate(launch=f"{SIM_LAUNCH} --sim-launch-counter {counter}"))
    assert run.returncode == 0, run.output
    run.fnmatch_lines(["*6 passed*"])
    assert len(counter.read_text().splitlines()) == 2  # two workers, launched once, by the controller
    assert run.leftovers() == []


@pytest.mark.parametrize(("args", "message"), [
    (("--sglang-workers", "0"), "*--sglang-workers='0': must be a whole number >= 1*"),
    (("--sglang-workers", "2", "--sglang-min-workers", "3"),
     "*--sglang-min-workers=3: must be between 1 and the 2 launched workers*"),
    (("--sglang-workers", "2", "--sglang-gateway", "--port 30000"),
     "*--sglang-gateway='--port 30000': --port is set by pytest-sglang for a launched fleet*"),
    (("--sglang-workers", "2", "--sglang-gateway-command", "no-such-gateway launch"),
     "*--sglang-gateway-command='no-such-gateway launch': 'no-such-gateway' is not an executable on PATH*"),
])
def test_bad_launch_values(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    copy_inner(tmp_path, "fleet_shape")
    run = run_inner(tmp_path, "--sglang-simulate", "--sglang-launch", SIM_LAUNCH, *args, env=FLEET_ENV)
    assert run.returncode in (1, 4), run.output
    run.fnmatch_lines([message])
    assert run.leftovers(timeout_s=0) == []
