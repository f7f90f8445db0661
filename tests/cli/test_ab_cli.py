"""``python -m pytest_sglang ab``: the exit code a CI step branches on (docs/reports.md, "Interleaved A/B")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.ab import load_spec
from pytest_sglang.cli.ab import build_parser, given_load
from pytest_sglang.gates.load.ab import DEFAULT_LOAD

A = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 1000"
SHAPE = ("--requests", "16", "--concurrency", "8", "--input-len", "16", "--output-len", "32", "--warmup", "0")


def _ab(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "ab", *argv], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)


def test_a_slower_b_exits_1(tmp_path: Path) -> None:
    slower = A.replace("--sim-time-scale 0.05", "--sim-time-scale 0.06")
    done = _ab(tmp_path, "--sglang-simulate", f"--sglang-launch={A}", f"--sglang-ab-launch={slower}",
               "--sglang-ab-launches=4", "--sglang-report=r.json", *SHAPE)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "beyond the 5% limit and beyond the noise" in done.stdout
    assert (tmp_path / "r.json").exists()


def test_too_few_launches_exit_3_cannot_judge(tmp_path: Path) -> None:
    done = _ab(tmp_path, "--sglang-simulate", f"--sglang-launch={A}", "--sglang-ab-launches=2", *SHAPE)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "sglang_ab could not judge:" in done.stdout and "launches per side would" in done.stdout
    assert "PytestAssertRewriteWarning" not in done.stdout


@pytest.mark.parametrize(("argv", "words"), [
    (("--requests", "0"), "--requests=0: "),
    (("--requests", "x"), "invalid int value: 'x'"),
    (("--range-ratio", "2"), "--range-ratio=2.0: must be between 0 and 1"),
    (("--range-ratio", "x"), "invalid float value: 'x'"),
    (("--sglang-ab-launches=1",), "--sglang-ab-launches"),
    (("--sglang-ab-launch=--model-path M --tp-szie 2",), "--tp-szie -> --tp-size"),
])
def test_bad_input_exits_2_before_anything_starts(tmp_path: Path, argv: tuple[str, ...], words: str) -> None:
    done = _ab(tmp_path, "--sglang-simulate", f"--sglang-launch={A}", *argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stdout + done.stderr


def test_the_suite_reads_its_load_from_the_environment() -> None:
    assert load_spec({"PYTEST_SGLANG_AB_LOAD": '{"requests": 5, "concurrency": 2}'}).requests == 5
    # The default load is large enough for the default limits' p99 (100 requests), lengths drawn.
    default = load_spec({})
    assert default.requests >= 100 and default.range_ratio < 1 and default.concurrency == 8
    # a rate without a concurrency is sent uncapped, as bench_serving's --request-rate alone
    assert load_spec({"PYTEST_SGLANG_AB_LOAD": '{"request_rate": 4}'}).concurrency is None
    assert load_spec({"PYTEST_SGLANG_AB_LOAD": '{"request_rate": 4, "concurrency": 2}'}).concurrency == 2
    with pytest.raises(ValueError, match="PYTEST_SGLANG_AB_LOAD='\\[1\\]': not a JSON object"):
        load_spec({"PYTEST_SGLANG_AB_LOAD": "[1]"})


def test_only_the_flags_given_go_to_the_suite_which_puts_them_over_the_default_load() -> None:
    args, _ = build_parser().parse_known_args(["--requests", "200", "--request-rate", "4", "--sglang-x"])
    given = given_load(args)
    assert given == {"requests": 200, "request_rate": 4.0}
    spec = load_spec({"PYTEST_SGLANG_AB_LOAD": json.dumps(given)})
    assert (spec.requests, spec.request_rate, spec.concurrency) == (200, 4.0, None)
    assert (spec.input_len, spec.range_ratio) == (DEFAULT_LOAD["input_len"], DEFAULT_LOAD["range_ratio"])
