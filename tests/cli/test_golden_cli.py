"""``python -m pytest_sglang golden``: the plugin's key, files checked before the work, ``check --json``, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_common import sparse
from tests.cli.test_eval_cli import NOBODY, _interrupt, _last
from tests.conftest import SimFactory

SEED = ("--random-seed", "7")


def _golden(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("SGLANG_API_KEY")}
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "golden", *args], capture_output=True, text=True,
                          timeout=180, env={**clean, **(env or {})})


def test_outputs_and_inputs_are_checked_before_the_server_is_asked(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = _golden("record", "--url", NOBODY, "--out", str(tmp_path / "file" / "g.json"))
    # Before: a traceback after every prompt was recorded. NOBODY would be exit 3 if it were asked.
    assert out.returncode == 2 and "--out=" in _last(out) and "is a file, not a directory" in _last(out)
    prompts = sparse(tmp_path / "prompts.txt", 17 * 2**20)
    big = _golden("record", "--url", NOBODY, "--out", str(tmp_path / "g.json"), "--prompts", str(prompts))
    assert big.returncode == 2
    assert f"--prompts='{prompts}': is 17.0 MiB, larger than the 16.0 MiB cap" in _last(big)
    recording = sparse(tmp_path / "golden.json", 65 * 2**20)
    check = _golden("check", "--url", NOBODY, "--golden", str(recording), "--json", str(tmp_path / "v.json"))
    assert check.returncode == 2 and f"--golden='{recording}': is 65.0 MiB, larger than the 64.0 MiB cap" \
        in _last(check)
    bad = _golden("check", "--url", NOBODY, "--golden", str(recording), "--min-match", "95")
    assert bad.returncode == 2 and "argument --min-match: invalid value '95': must be a number from 0 to 1" \
        in _last(bad) and "Fix: pass --min-match 0.95" in _last(bad)
    scheme = _golden("check", "--url", "localhost:30000", "--golden", str(recording))
    assert scheme.returncode == 2 and "--url='localhost:30000': the URL has no scheme://" in _last(scheme)


def test_record_and_check_with_sglang_api_key_and_check_json(sim_factory: SimFactory, tmp_path: Path) -> None:
    url = sim_factory(*SEED, "--api-key", "sk-gold").url
    out, verdict = tmp_path / "golden.json", tmp_path / "verdict.json"
    denied = _golden("record", "--url", url, "--out", str(out), "--tokens", "4")
    # Before: the 401 surfaced as "no 4-token greedy answer" (exit 3), the key's absence unsaid.
    assert denied.returncode == 2 and "needs an API key and none was given" in _last(denied)
    key = {"SGLANG_API_KEY": "sk-gold"}
    assert _golden("record", "--url", url, "--out", str(out), "--tokens", "4", env=key).returncode == 0
    check = _golden("check", "--url", url, "--golden", str(out), "--json", str(verdict), env=key)
    assert check.returncode == 0, check.stderr
    doc = json.loads(verdict.read_text())
    assert doc["passed"] is True and doc["problems"] == [] and doc["limits"]["min_match"] == 1.0
    assert doc["figures"]["exact matches"] == doc["figures"]["prompts"] > 0
    assert "sk-gold" not in verdict.read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a process on Windows")
def test_the_first_ctrl_c_stops_golden_record_promptly(sim_factory: SimFactory, tmp_path: Path) -> None:
    slow = sim_factory("--sim-time-scale", "1", "--sim-decode-step-ms", "200")
    started = tmp_path / "started"
    started.touch()
    code, took, err = _interrupt(["golden", "record", "--url", slow.url, "--out", str(tmp_path / "g.json")],
                                 str(started))
    # Before: a KeyboardInterrupt traceback (and no exit status of its own).
    assert code == 130 and took < 5.0, (took, err)
    assert "interrupted: golden stopped" in err and "Traceback" not in err
    assert signal.SIGINT == 2
