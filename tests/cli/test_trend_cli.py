"""``python -m pytest_sglang trend``: what it prints and its exit codes (docs/reports.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.cli.trend import main
from tests.report.nightly import FINGERPRINT, noisy, write_history


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse and the input checks exit
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_new_step_fails_the_nightly_step_and_names_the_run(tmp_path: Path) -> None:
    write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 1, step_at=25, step=-0.10)})
    done = subprocess.run([sys.executable, "-m", "pytest_sglang", "trend", str(tmp_path), "--new-runs", "5"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    # Lines wrap at 100 columns, and the run's path (a pytest tmp dir, longer under xdist) may wrap anywhere.
    flat = " ".join(done.stdout.replace("\n", " ").split())
    assert "from run c25 (" in flat and "NEW, worse" in flat, done.stdout
    assert "(-1" in flat and "confidence" in flat  # by how much, with what confidence
    assert "FAILED: 1 new change point(s) make a metric worse (exit 1)" in done.stdout


def test_flat_noise_passes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 5)})
    code, out, _ = _run(capsys, str(tmp_path))
    assert code == 0 and "0 change point(s) in 1 series judged" in out
    assert "configuration: the same in every run" in out


def test_too_short_is_stated_with_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_history(tmp_path, {"output_throughput": noisy(4, 0.03, 5)})
    code, out, _ = _run(capsys, str(tmp_path))
    assert code == 3
    assert "too short: test_nightly.py::test_throughput" in out and "has 4 run(s); a change point needs 6" in out
    assert "NOTHING JUDGED" in out


def test_runs_that_changed_configuration_are_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    other = {**FINGERPRINT, "gpu_model": "A100"}
    write_history(tmp_path, {"output_throughput": noisy(10, 0.03, 1) + noisy(10, 0.03, 2, level=700.0)},
                  fingerprints=[FINGERPRINT] * 10 + [other] * 10)
    code, out, _ = _run(capsys, str(tmp_path))
    assert code == 0, out
    flat = " ".join(out.split())
    assert "configuration 2 from run c10" in flat and "gpu_model: H100 -> A100" in flat
    assert "A change of configuration is not a regression" in flat


def test_unreadable_and_foreign_files_are_named_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    paths = write_history(tmp_path / "h", {"output_throughput": noisy(8, 0.03, 1)})
    broken, foreign = tmp_path / "broken.json", tmp_path / "foreign.json"
    broken.write_text("{")
    foreign.write_text('{"name": "not a report"}')
    argv = [*map(str, paths), str(broken), str(foreign), str(tmp_path / "missing.json")]
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert f"error: {broken}: not a readable JSON report" in err
    assert f"error: {foreign}: not a pytest-sglang report" in err
    assert f"error: {tmp_path / 'missing.json'}: file not found" in err
    assert "3 of 11 file(s) are not readable JSON reports" in err and "--skip-unreadable" in err
    code, out, err = _run(capsys, "--skip-unreadable", *argv)
    assert code == 0 and f"left out: {broken}" in err and "trend: 8 runs" in out


def test_an_empty_folder_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, str(tmp_path))
    assert code == 2 and "is a directory with no *.json file in it" in err


@pytest.mark.parametrize(("argv", "message"), [
    (("--max-pvalue", "0"), "argument --max-pvalue: invalid value '0': must be between 0 and 1"),
    (("--max-pvalue", "1.5"), "argument --max-pvalue: invalid value '1.5': must be between 0 and 1"),
    (("--max-pvalue", "x"), "argument --max-pvalue: invalid value 'x': not a number. Fix: pass --max-pvalue 0.001"),
    (("--min-change", "-1"), "argument --min-change: invalid value '-1': must be >= 0"),
    (("--min-change", "five"), "argument --min-change: invalid value 'five': not a number"),
    (("--new-runs", "0"), "argument --new-runs: invalid value '0': must be >= 1"),
    (("--new-runs", "1.5"), "argument --new-runs: invalid value '1.5': not a whole number"),
    (("--confirm", "0"), "argument --confirm: invalid value '0': must be >= 1. Fix: pass --confirm 2"),
    (("--confirm", "two"), "argument --confirm: invalid value 'two': not a whole number"),
    (("--metric", "output_thruput"), "argument --metric: invalid value 'output_thruput': unknown metric "
                                     "'output_thruput': it would compare nothing. Fix: did you mean "
                                     "output_throughput?"),
])
def test_bad_option_values_exit_2_naming_the_option(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    argv: tuple[str, ...], message: str) -> None:
    code, _, err = _run(capsys, str(tmp_path), *argv)
    assert code == 2 and message in err, err


def test_min_change_drops_small_shifts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 1, step_at=20, step=-0.10)})
    assert "1 change point(s)" in _run(capsys, str(tmp_path))[1]
    assert "0 change point(s)" in _run(capsys, str(tmp_path), "--min-change", "20%")[1]


def test_without_otava_the_command_names_the_extra(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_sglang.report import changepoint

    monkeypatch.setattr(changepoint, "available", lambda: False)
    code, _, err = _run(capsys, str(tmp_path))
    assert code == 2 and "pip install 'pytest-sglang[trend]'" in err


def test_one_outlying_last_run_is_pending_not_failed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    values = noisy(20, 0.01, 4)
    write_history(tmp_path, {"output_throughput": [*values[:-1], values[-1] * 0.7]})
    code, out, _ = _run(capsys, str(tmp_path))
    assert code == 0, out
    assert "from run c19" in out and "pending: judged once 2 runs are at the new level" in " ".join(out.split())
    code, out, _ = _run(capsys, str(tmp_path), "--confirm", "1")
    assert code == 1 and "NEW, worse" in out


def test_metrics_no_report_measured_judge_nothing_and_say_so(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    write_history(tmp_path, {"output_throughput": noisy(10, 0.03, 5)})
    code, out, _ = _run(capsys, str(tmp_path), "--metric", "p99_itl_ms")
    assert code == 3 and "NOTHING JUDGED: no report has a figure of p99_itl_ms" in out
