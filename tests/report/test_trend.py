"""The trend engine: reports read into runs, change points per series, new ones, configurations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nightly import FINGERPRINT, noisy, report, write_history

from pytest_sglang.errors import ConfigError
from pytest_sglang.report import changepoint
from pytest_sglang.report.fingerprint import normalise_args
from pytest_sglang.report.history import Run, in_order, read_run, segments
from pytest_sglang.report.trend import NEW_REGRESSION, OK, TOO_SHORT, analyse

METRICS = ("output_throughput", "p99_ttft_ms")


def _runs(paths: list[Path]) -> list[Run]:
    return in_order([read_run(str(p), METRICS) for p in paths])


def test_a_clear_step_is_found_at_its_run_with_its_size(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 1, step_at=20, step=-0.10),
                                     "p99_ttft_ms": noisy(30, 0.03, 2, level=200.0)})
    trend = analyse(_runs(paths))
    [finding] = trend.findings
    assert finding.key[2] == "output_throughput"
    assert abs(int(finding.run.name[1:]) - 20) <= 3  # named by its label, c20
    assert -13 < finding.shift.change_pct < -7
    assert finding.worse and finding.shift.confidence > 0.999
    assert trend.judged == 2
    # Found, but already there without the last run: a nightly step does not fail again for it.
    assert not finding.new and trend.exit_code == OK


def test_flat_noise_gives_no_change_point(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 5), "p99_ttft_ms": noisy(30, 0.03, 6)})
    trend = analyse(_runs(paths))
    assert trend.findings == [] and trend.judged == 2 and trend.exit_code == OK


def test_a_step_the_history_did_not_show_before_is_new_and_fails(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 1, step_at=25, step=-0.10)})
    trend = analyse(_runs(paths), new_runs=5)  # the 25 runs before the newest 5 were flat
    [finding] = trend.findings
    assert finding.new and finding.worse and trend.new_regressions == [finding]
    assert trend.exit_code == NEW_REGRESSION


def test_new_runs_beyond_the_history_make_every_change_point_new(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": noisy(30, 0.03, 1, step_at=20, step=-0.10)})
    [finding] = analyse(_runs(paths), new_runs=50).findings
    assert finding.new and finding.worse


def test_a_better_metric_is_shown_and_does_not_fail(tmp_path: Path) -> None:
    # p99 TTFT down 15 %: a latency that went down is an improvement.
    paths = write_history(tmp_path, {"p99_ttft_ms": noisy(30, 0.03, 3, level=200.0, step_at=25, step=-0.15)})
    trend = analyse(_runs(paths), new_runs=5)
    [finding] = trend.findings
    assert finding.new and not finding.worse and trend.exit_code == OK


def test_files_in_any_order_give_the_same_runs(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": noisy(8, 0.03, 1)})
    assert [r.name for r in _runs(list(reversed(paths)))] == [f"c{i:02d}" for i in range(8)]


def test_a_series_too_short_is_stated_and_judges_nothing(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": [100.0, 100.0, 50.0, 50.0]})
    trend = analyse(_runs(paths))
    assert trend.short == [(("test_nightly.py::test_throughput",
                             "max_concurrency=8 random_input_len=512 random_output_len=128", "output_throughput"),
                            4, 0)]
    assert trend.judged == 0 and trend.exit_code == TOO_SHORT


def test_a_change_of_configuration_splits_the_history_and_is_no_change_point(tmp_path: Path) -> None:
    # --tp 2 from run 15 on: 20 % faster. Not a regression or an improvement of the code: another setup.
    values = noisy(15, 0.03, 1) + noisy(15, 0.03, 2, level=1200.0)
    other = {**FINGERPRINT, "launch_args": ["--sim-profile tiny", "--tp 2"]}
    paths = write_history(tmp_path, {"output_throughput": values},
                          fingerprints=[FINGERPRINT] * 15 + [other] * 15)
    runs = _runs(paths)
    parts = segments(runs)
    assert [len(p.runs) for p in parts] == [15, 15]
    assert parts[1].changed == ["launch_args: (none) -> --tp 2"]
    trend = analyse(runs)
    assert trend.findings == [] and trend.judged == 2
    # The same figures under one configuration: the jump is a change point.
    same = write_history(tmp_path / "same", {"output_throughput": values})
    assert len(analyse(_runs(same)).findings) == 1


def test_a_new_sglang_version_does_not_split_the_history(tmp_path: Path) -> None:
    newer = {**FINGERPRINT, "sglang_version": "0.5.24"}
    paths = write_history(tmp_path, {"output_throughput": noisy(12, 0.03, 1)},
                          fingerprints=[FINGERPRINT] * 6 + [newer] * 6)
    assert len(segments(_runs(paths))) == 1


def test_a_load_with_failed_requests_gives_no_figure(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report(0, {"output_throughput": 10.0}, failed=3)))
    run = read_run(str(path), METRICS)
    assert run.figures == {} and len(run.failed) == 1


@pytest.mark.parametrize(("content", "problem"), [
    ("not json", "not a readable JSON report"),
    ('{"some": "other json"}', "not a pytest-sglang report"),
    ('{"tests": [], "fingerprint": {}, "generated_at": "yesterday"}', "no readable generated_at"),
])
def test_an_unreadable_or_foreign_file_is_named(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as exc:
        read_run(str(path), METRICS)
    assert problem in str(exc.value) and str(path) in str(exc.value)


def test_without_otava_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(changepoint, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'pytest-sglang\[trend\]'"):
        changepoint.shifts([1.0] * 10)


def test_the_simulator_s_launch_seed_is_not_part_of_the_configuration() -> None:
    argv = ["--model-path", "m", "--sim-launch-jitter", "0.03", "--sim-launch-seed", "7"]
    assert normalise_args(argv) == ["--sim-launch-jitter 0.03"]


def test_a_throughput_that_rose_from_zero_is_better_not_worse(tmp_path: Path) -> None:
    paths = write_history(tmp_path, {"output_throughput": [0.0] * 10 + [500.0] * 5})
    [finding] = analyse(_runs(paths)).findings
    assert finding.shift.rising and not finding.worse
