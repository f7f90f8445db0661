"""The CI scripts: logs survive redirection, and the tiers' installs run at once (scripts/setup-tiers.sh).

``setup-tiers.sh`` runs here with stand-in step scripts (``PYTEST_SGLANG_SCRIPTS``): the real ones
install SGLang, Docker and Chromium, which the real CI (``.ci/run``) does.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP_TIERS = ROOT / "scripts" / "setup-tiers.sh"
#: tee into the process's own stdout/stderr: tee opens the path again, with O_TRUNC, so a log file that
#: stdout and stderr are redirected to (`bash .ci/run > ci.log 2>&1`) loses everything logged before.
TEE_TO_OWN_STREAM = re.compile(r"\btee\b[^|;&\n]*\s(/dev/std(out|err)|/dev/fd/[12]|/proc/self/fd/[12])\b")
#: The step scripts setup-tiers.sh runs (relative to PYTEST_SGLANG_SCRIPTS); the apt ones hold the apt lock.
STEPS = ("gateway/setup.sh", "real-sglang/setup.sh", "real-sglang/pd-setup.sh", "docker/engine.sh",
         "docker/build-image.sh", "chromium.sh")
APT_STEPS = ("real-sglang/pd-setup.sh", "docker/engine.sh", "chromium.sh")
#: Steps that wait for each other: they finish only if they run at the same time. (Not chromium.sh: it
#: holds the apt lock, which the docker job needs before build-image.sh; the two apt steps take turns.)
BARRIER = ("gateway/setup.sh", "real-sglang/setup.sh", "docker/build-image.sh")
PRINTS = {"gateway/setup.sh": "SGLANG_ROUTER_PYTHON=/venvs/router/bin/python",
          "real-sglang/setup.sh": "REAL_SGLANG_PYTHON=/venvs/real/bin/python\nREAL_SGLANG_MODEL=/models/tiny",
          "real-sglang/pd-setup.sh": "REAL_SGLANG_PD_HOME=/pd"}


def _ci_scripts() -> list[Path]:
    found = [*sorted((ROOT / "scripts").rglob("*.sh")), *sorted((ROOT / ".ci").iterdir())]
    return [path for path in found if path.is_file()]


def test_no_ci_script_tees_into_its_own_stdout_or_stderr() -> None:
    scripts = _ci_scripts()
    assert ROOT / ".ci" / "run" in scripts and ROOT / "scripts" / "test.sh" in scripts
    offenders = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in scripts
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if TEE_TO_OWN_STREAM.search(line) and not line.lstrip().startswith("#")]
    assert not offenders, "tee into /dev/std* truncates a redirected CI log:\n" + "\n".join(offenders)


def test_the_pattern_is_what_truncates_a_redirected_log(tmp_path: Path) -> None:
    # Why the rule above exists (this is what turned the first part of ci.log into NUL bytes).
    log = tmp_path / "ci.log"
    with log.open("wb") as out:
        subprocess.run(["bash", "-c", "echo earlier; echo A=1 | tee /dev/stderr >/dev/null; echo later"], stdout=out,
                       stderr=subprocess.STDOUT, check=True)
    raw = log.read_bytes()
    assert b"earlier" not in raw and b"\0" in raw and raw.endswith(b"later\n")
    assert TEE_TO_OWN_STREAM.search("x=$(bash a.sh | tee /dev/stderr | sed -n 's/^A=//p')")


def _stand_ins(tmp_path: Path, fail: str | None = None, daemon: bool = False) -> Path:
    """Stand-in step scripts: each prints a line (and the KEY=VALUE lines the real one prints).

    With ``fail``, that step fails and nobody waits at the barrier (a failed step may stop its job early).
    """
    scripts = tmp_path / "scripts"
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    for step in STEPS:
        body = [f"echo 'stand-in {step} ran'"]
        if step in APT_STEPS:  # the apt lock is held (a second holder cannot take it)
            body.append('if flock -n "$PYTEST_SGLANG_APT_LOCK" true; then echo "apt lock not held"; exit 3; fi')
        if step in BARRIER and fail is None:
            arrived = f"[ $(ls {barrier} | wc -l) -ge {len(BARRIER)} ]"
            body += [f"touch {barrier}/{step.replace('/', '_')}; echo \"at barrier $(date +%s.%N)\"",
                     f"while (( SECONDS < 60 )); do {arrived} && break; sleep 0.05; done",
                     f"{arrived} || {{ echo \"ran alone $(date +%s.%N): $(ls {barrier})\"; exit 4; }}"]
        if step in PRINTS:
            body.append(f"printf '%s\\n' '{PRINTS[step]}'")
        if step == fail:
            body.append("echo 'stand-in failure detail' >&2; exit 7")
        if daemon and step == "docker/engine.sh":  # like dockerd: a server left running by an apt step
            body.append(f"sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {tmp_path}/daemon.pid")
        path = scripts / step
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("set -e\n" + "\n".join(body) + "\n")
    return scripts


def _run_setup(tmp_path: Path, scripts: Path) -> tuple[int, str, Path]:
    """``echo earlier; bash setup-tiers.sh ENV`` with stdout and stderr redirected to one log, as CI does."""
    log, env_file = tmp_path / "ci.log", tmp_path / "tiers.env"
    env = {**os.environ, "PYTEST_SGLANG_SCRIPTS": str(scripts), "PYTEST_SGLANG_APT_LOCK": str(tmp_path / "apt.lock")}
    for name in ("PYTEST_SGLANG_SKIP_REAL", "PYTEST_SGLANG_SKIP_DOCKER"):
        env.pop(name, None)
    with log.open("wb") as out:
        done = subprocess.run(["bash", "-c", 'echo "earlier line"; bash "$0" "$1"', str(SETUP_TIERS), str(env_file)],
                              stdout=out, stderr=subprocess.STDOUT, env=env, timeout=120, check=False)
    raw = log.read_bytes()
    assert b"\0" not in raw
    return done.returncode, raw.decode(), env_file


def test_setup_runs_the_installs_at_once_and_keeps_the_log(tmp_path: Path) -> None:
    rc, log, env_file = _run_setup(tmp_path, _stand_ins(tmp_path))
    assert rc == 0, log
    assert log.startswith("earlier line\n")
    for step in STEPS:
        assert f"stand-in {step} ran" in log
    assert "ran alone" not in log and "apt lock not held" not in log
    assert env_file.read_text().splitlines() == [
        "SGLANG_ROUTER_PYTHON=/venvs/router/bin/python", "REAL_SGLANG_PYTHON=/venvs/real/bin/python",
        "REAL_SGLANG_MODEL=/models/tiny", "REAL_SGLANG_PD_HOME=/pd"]


@pytest.mark.parametrize("step", ["real-sglang/setup.sh", "docker/engine.sh", "chromium.sh"])
def test_a_failed_install_fails_the_setup_with_its_log(tmp_path: Path, step: str) -> None:
    rc, log, env_file = _run_setup(tmp_path, _stand_ins(tmp_path, fail=step))
    assert rc != 0
    assert "stand-in failure detail" in log and "FAILED:" in log
    assert log.startswith("earlier line\n")
    # The other jobs still ended and their logs are shown; nothing is handed to the tests.
    assert "----- gateway (exit 0) -----\nstand-in gateway/setup.sh ran" in log
    assert not env_file.exists() or env_file.read_text() == ""


def test_a_stopped_setup_stops_every_job(tmp_path: Path) -> None:
    scripts = _stand_ins(tmp_path, fail="chromium.sh")
    pid_file = tmp_path / "gateway.pid"
    # The job's process (pid written first, then exec: the pid is the sleeping process itself).
    (scripts / "gateway" / "setup.sh").write_text(f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}\n"
                                                  "exec sleep 300\n")
    env = {**os.environ, "PYTEST_SGLANG_SCRIPTS": str(scripts), "PYTEST_SGLANG_APT_LOCK": str(tmp_path / "apt.lock")}
    setup = subprocess.Popen(["bash", str(SETUP_TIERS), str(tmp_path / "tiers.env")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert time.monotonic() < deadline and setup.poll() is None, "the gateway stand-in did not start"
            time.sleep(0.05)
        job = psutil.Process(int(pid_file.read_text()))
        setup.terminate()
        assert setup.wait(30) == 130
        job.wait(30)  # raises TimeoutExpired if the job outlived the stop
    finally:
        if setup.poll() is None:
            setup.kill()
            setup.wait()


def test_a_daemon_started_under_the_apt_lock_does_not_keep_it(tmp_path: Path) -> None:
    # engine.sh starts dockerd: had it inherited the lock's descriptor, the other apt steps
    # (chromium, pd-setup) would wait for it forever (seen: CI hung at "waiting for the test tiers' setup").
    try:
        rc, log, _ = _run_setup(tmp_path, _stand_ins(tmp_path, daemon=True))
        assert rc == 0, log
        assert psutil.pid_exists(int((tmp_path / "daemon.pid").read_text()))  # still running, lock free
    finally:
        if (tmp_path / "daemon.pid").exists():
            psutil.Process(int((tmp_path / "daemon.pid").read_text())).kill()
