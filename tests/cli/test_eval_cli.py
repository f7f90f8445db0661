"""``python -m pytest_sglang eval``: the plugin's key, values, limits and errors; bounded files; Ctrl-C; floors."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_common import sparse
from tests.conftest import SimFactory

NOBODY = "http://127.0.0.1:9"  # nothing listens: a check that needs no server must not reach it


def _eval(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.endswith("SGLANG_API_KEY")}
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "eval", *args], capture_output=True, text=True,
                          timeout=180, env={**clean, **(env or {})})


def _last(run: subprocess.CompletedProcess[str]) -> str:
    return run.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("flags", "message"), [
    (["--min-score", "90"], "argument --min-score: invalid value '90': must be a number from 0 to 1 (a fraction: "
                            "0.01 = 1%). Fix: pass --min-score 0.9"),
    (["--min-score", "-0.5"], "argument --min-score: invalid value '-0.5': must be a number from 0 to 1"),
    (["--num-examples", "1000000000"], "argument --num-examples: invalid value '1000000000': must be a whole number "
                                       "from 1 to 100,000, or 'all'. Fix: give --num-examples a whole number"),
    (["--confidence", "95"], "argument --confidence: invalid value '95': must be a number from 0.5 to 0.999"),
    (["--url", "127.0.0.1:30000"], "error: --url='127.0.0.1:30000': the URL has no scheme://. Fix: write "
                                   "http://127.0.0.1:30000"),
    (["--floor-proven"], "error: --floor-proven: says how --min-score is judged, and no --min-score was given"),
])
def test_bad_values_are_usage_errors_as_the_marker_has_them(flags: list[str], message: str) -> None:
    # Before: --min-score 90 and -0.5 and --num-examples 1e9 were accepted (the last reached 3.7 GB).
    run = _eval("--url", NOBODY, "--task", "arithmetic", *flags)
    assert run.returncode == 2, run.stderr
    assert message in _last(run) and "Traceback" not in run.stderr


def test_an_unwritable_json_and_an_oversized_baseline_are_refused_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    run = _eval("--url", NOBODY, "--task", "arithmetic", "--json", str(tmp_path / "file" / "out.json"))
    # Before: a traceback after all the work; now exit 2 before any request (NOBODY would be exit 3).
    assert run.returncode == 2 and "--json=" in _last(run) and "is a file, not a directory" in _last(run)
    big = sparse(tmp_path / "base.json", 17 * 2**20)
    run = _eval("--url", NOBODY, "--task", "arithmetic", "--baseline", str(big))
    assert run.returncode == 2, run.stderr
    assert f"--baseline='{big}': is 17.0 MiB, larger than the 16.0 MiB cap of a file read whole. Fix: pass a " \
        "file written by eval --json" == _last(run).split("error: ", 1)[1]


def test_a_data_set_shorter_than_asked_is_refused_with_its_count_unless_all(sim_factory: SimFactory,
                                                                           tmp_path: Path) -> None:
    rows = [{"question": f"What is {a} + 1?", "answer": f"#### {a + 1}"} for a in range(12)]
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = sim_factory().url
    short = _eval("--url", url, "--task", "gsm8k", "--data", str(data), "--num-examples", "200")
    # Before: scored 7 examples without a word.
    assert short.returncode == 2
    assert (f"--num-examples=200: is more than the 7 examples {data} has after 5 few-shot rows. Fix: pass "
            "num_examples=7 or fewer, num_examples='all'") in _last(short)
    every = _eval("--url", url, "--task", "gsm8k", "--data", str(data), "--num-examples", "all")
    assert every.returncode == 0, every.stderr
    assert "(7/7 correct" in every.stdout


def test_the_api_key_comes_from_sglang_api_key_and_a_401_names_its_source(sim_factory: SimFactory) -> None:
    url = sim_factory("--api-key", "sk-right").url
    base = ("--url", url, "--task", "arithmetic", "--num-examples", "10")
    none = _eval(*base)
    # Before: "GET /v1/models lists no model".
    assert none.returncode == 2 and "lists no model" not in none.stderr
    assert "GET /v1/models at " in _last(none) and "answered 401: the server needs an API key and none was " \
        "given" in _last(none)
    wrong = _eval(*base, env={"SGLANG_API_KEY": "sk-wrong"})
    assert wrong.returncode == 2 and "refused the key from env SGLANG_API_KEY" in _last(wrong)
    assert "sk-wrong" not in wrong.stderr + wrong.stdout
    right = _eval(*base, env={"SGLANG_API_KEY": "sk-right"})
    assert right.returncode == 0, right.stderr
    assert "(10/10 correct" in right.stdout


def test_floor_proven_judges_the_lower_bound_and_every_summary_shows_the_score(sim_factory: SimFactory,
                                                                              tmp_path: Path) -> None:
    url = sim_factory().url
    out = tmp_path / "r.json"
    # 20/20 correct: the 95% interval is [0.839, 1]: above 0.9 at the upper bound, not proven at the lower.
    lenient = _eval("--url", url, "--task", "arithmetic", "--num-examples", "20", "--min-score", "0.9")
    assert lenient.returncode == 0, lenient.stderr
    assert "floor: min_score 0.9, judged on score_upper_bound 1.000: the interval's upper bound" in lenient.stdout
    strict = _eval("--url", url, "--task", "arithmetic", "--num-examples", "20", "--min-score", "0.9",
                   "--floor-proven", "--json", str(out))
    assert strict.returncode == 1, strict.stderr
    assert "arithmetic: score 1.000 (20/20 correct" in strict.stdout and "interval [0.839, 1.000]" in strict.stdout
    assert "FAILED (min_score 0.9): min_score=0.9 is above the interval's lower bound 0.839 (floor_proven)" \
        in strict.stdout
    verdict = json.loads(out.read_text())["verdict"]
    assert verdict["floor_proven"] is True and verdict["judged"] == "score_lower_bound" and not verdict["passed"]


def _interrupt(argv: list[str], marker: str) -> tuple[int, float, str]:
    """Start a command, wait until ``marker`` shows in the simulator's log, send one SIGINT, time the exit."""
    with subprocess.Popen([sys.executable, "-m", "pytest_sglang", *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            time.sleep(0.5)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not Path(marker).exists():
                time.sleep(0.1)
            time.sleep(1.0)  # requests in flight
            assert proc.poll() is None, proc.communicate()
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            ready, _, _ = select.select([proc.stderr], [], [], 15.0)
            code = proc.wait(timeout=15)
            took = time.monotonic() - sent
            assert ready
            return code, took, proc.communicate()[1]
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to a process on Windows")
def test_the_first_ctrl_c_stops_eval_promptly(sim_factory: SimFactory, tmp_path: Path) -> None:
    slow = sim_factory("--sim-time-scale", "1", "--sim-decode-step-ms", "200")
    started = tmp_path / "started"
    started.touch()  # the simulator is up; the command's first requests follow its start-up
    code, took, err = _interrupt(["eval", "--url", slow.url, "--task", "arithmetic", "--num-examples", "100000"],
                                 str(started))
    # Before: two Ctrl-C ignored at 1e9 examples (every example a task of one gather), SIGKILL needed.
    assert code == 130 and took < 5.0, (took, err)
    assert "interrupted" in err and "Traceback" not in err
