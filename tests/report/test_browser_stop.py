"""The browser test's stop waits for chromium's whole process tree before its profile is removed.

Chromium's helpers (zygotes, renderers) outlive the main process by a moment and keep writing into
the profile; removing it then failed with ``OSError: [Errno 39] Directory not empty: 'Default'``. A
stand-in "browser" shows the same shape without chromium: its main process exits at once on SIGTERM,
a re-parented helper (double fork, so not a child any more) keeps writing for a while.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import browser
import psutil
import pytest

BROWSER = r"""
import os, signal, sys, time
profile = sys.argv[1]
if os.fork() == 0:
    if os.fork() == 0:  # the helper: re-parented to init, still in the browser's session
        stopping = None
        def on_term(*_):
            global stopping
            stopping = time.time()
        signal.signal(signal.SIGTERM, on_term)
        os.makedirs(os.path.join(profile, "Default"), exist_ok=True)
        open(os.path.join(profile, "helper-up"), "w").close()
        n = 0
        while stopping is None or time.time() - stopping < 1.0:  # writes on for 1 s after SIGTERM
            with open(os.path.join(profile, "Default", f"f{n % 50}"), "w") as f:
                f.write("x")
            n += 1
            time.sleep(0.01)
    os._exit(0)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # the main process exits at once
time.sleep(60)
"""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Stand-in browsers started by a test: their process groups are killed at teardown, whatever happened."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _start(profile: Path, started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", BROWSER, str(profile)], start_new_session=True)
    started.append(proc)
    deadline = time.monotonic() + 30
    while not (profile / "helper-up").exists():
        assert time.monotonic() < deadline, "the stand-in browser's helper did not start"
        time.sleep(0.05)
    return proc


def test_stop_tree_waits_for_helpers_outside_the_tree_so_the_profile_can_go(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    proc = _start(profile, started)
    members = browser.session_members(proc.pid)
    helpers = [p for p in members if p.pid != proc.pid]
    assert len(helpers) == 1 and helpers[0].ppid() != proc.pid, members  # re-parented: not in proc's tree
    assert browser.stop_tree(proc) == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in members)
    shutil.rmtree(profile)  # nothing writes into it any more


def test_a_helper_that_ignores_sigterm_is_killed(tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    proc = _start(profile, started)
    begun = time.monotonic()
    assert browser.stop_tree(proc, timeout_s=0.3) == []  # the helper outlives SIGTERM by 1 s: SIGKILL
    assert time.monotonic() - begun < 10
    shutil.rmtree(profile)
