"""A baseline of several launches: a directory of reports, the judgement against a new launch, the third verdict."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.base import GateOutcome
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.loadgen.measure.launch_noise import CANNOT_JUDGE, PASSED, REGRESSED
from pytest_sglang.loadgen.measure.record import RequestRecord
from pytest_sglang.report import baseline, html, json_report, markdown, terminal
from pytest_sglang.report.baseline import open_baseline, paired_limits, parse_limits
from pytest_sglang.report.baseline_launches import load_launches

SPEC = LoadSpec(requests=200, concurrency=16, input_len=64, output_len=16)
FINGERPRINT = {"model": "m", "gpu_model": "H100", "gpu_count": 1, "host": "h", "sglang_version": "0.5.23",
               "image": None, "runner": "process", "launch_args": ["--tp 1"]}


def run(seed: int, *, speed: float = 1.0) -> dict[str, Any]:
    """A load's report dict with per-request samples; ``speed`` is the launch's speed draw (1.2: 20 % slower)."""
    rng = random.Random(seed)
    records = []
    for i in range(200):
        ttft = speed * 0.05 * (1 + 0.1 * rng.random())
        itl = [speed * 0.01 * (1 + 0.1 * rng.random()) for _ in range(15)]
        records.append(RequestRecord(index=i, start=i * 0.01, ttft=ttft, itl=itl, e2e=ttft + sum(itl),
                                     output_len=16, prompt_len=64, expected_output_len=16))
    data = LoadResult.from_records(SPEC, records, speed * 2.2 * (1 + 0.01 * rng.random())).to_dict()
    read: dict[str, Any] = json.loads(json.dumps(data))  # as read back from a report
    return read


def report(*loads: dict[str, Any], fingerprint: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"fingerprint": fingerprint or FINGERPRINT, "tests": [{"nodeid": "t.py::t", "loads": list(loads)}]}


def write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def judged(base: str | Path, speed: float, limits: str = "output_throughput:10%") -> GateOutcome:
    ctx = open_baseline(str(base), limits, strict=False)
    outcome = ctx.outcome("t.py::t", [run(99, speed=speed)], [], FINGERPRINT)
    assert outcome is not None
    return outcome


def test_a_baseline_directory_holds_one_launch_per_report(tmp_path: Path) -> None:
    for n, speed in enumerate((1.0, 0.99, 1.01), 1):
        write(tmp_path / "base" / f"launch-{n}.json", report(run(n, speed=speed)))
    (tmp_path / "base" / "README.txt").write_text("not a report")
    launches = load_launches(tmp_path / "base", "--sglang-baseline", baseline.KNOWN_METRICS)
    assert [Path(f).name for f, _ in launches] == ["launch-1.json", "launch-2.json", "launch-3.json"]
    summary = open_baseline(str(tmp_path / "base"), "5%", False).summary(FINGERPRINT)
    assert summary["launches"] == 3 and summary["launch_note"] is None
    one = open_baseline(str(tmp_path / "base" / "launch-1.json"), "5%", False).summary(FINGERPRINT)
    assert one["launches"] == 1 and one["launch_note"] is not None
    assert one["launch_note"].startswith("baseline of 1 launch:") and "record 2 more with --sglang-report" in \
        one["launch_note"]


@pytest.mark.parametrize("files", [[], ["notes.txt"]], ids=["empty", "no-json"])
def test_a_baseline_directory_without_a_report_is_refused(tmp_path: Path, files: list[str]) -> None:
    base = tmp_path / "base"
    base.mkdir()
    for name in files:
        (base / name).write_text("x")
    with pytest.raises(ConfigError) as caught:
        open_baseline(str(base), "5%", False)
    text = str(caught.value)
    assert "--sglang-baseline" in text and str(base) in text and "holds no JSON report" in text
    assert f"--sglang-report {base}/launch-1.json" in text
    assert ("notes.txt" in text) == bool(files)


@pytest.mark.parametrize(("field", "value", "shown"), [
    ("launch_args", ["--tp 2"], "launch_args: --tp 1 -> --tp 2"),
    ("gpu_model", "A100", "gpu_model: 'H100' (a.json) != 'A100' (b.json)"),
    ("sglang_version", "0.5.24", "sglang_version: 0.5.23 -> 0.5.24"),
])
def test_launches_of_different_configurations_are_refused_naming_the_files(tmp_path: Path, field: str,
                                                                            value: object, shown: str) -> None:
    write(tmp_path / "base" / "a.json", report(run(1)))
    write(tmp_path / "base" / "b.json", report(run(2), fingerprint={**FINGERPRINT, field: value}))
    with pytest.raises(ConfigError) as caught:
        open_baseline(str(tmp_path / "base"), "5%", False)
    text = str(caught.value)
    assert "launches of different configurations" in text and shown in text, text
    assert str(tmp_path / "base" / "a.json") in text and str(tmp_path / "base" / "b.json") in text


def test_a_bad_report_in_a_directory_is_refused_naming_it(tmp_path: Path) -> None:
    write(tmp_path / "base" / "a.json", report(run(1)))
    (tmp_path / "base" / "b.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"b\.json.*not a readable JSON report"):
        open_baseline(str(tmp_path / "base"), "5%", False)


def test_an_unchanged_relaunch_red_against_one_launch_is_green_against_three(tmp_path: Path) -> None:
    # The one-launch baseline was a fast boot (speed 0.85): an unchanged relaunch is 15 % slower, beyond its noise.
    one = write(tmp_path / "one.json", report(run(1, speed=0.85)))
    red = judged(one, 1.0)
    assert not red.passed and red.context["verdict"] == REGRESSED and red.context["launches"] == 1
    assert str(red.context["launch_note"]).startswith("baseline of 1 launch")
    assert "launch_note: baseline of 1 launch" in red.message()
    # Three launches of the same configuration: the fast boot and two ordinary ones, tightly measured.
    for n, speed in enumerate((0.98, 1.0, 1.01), 1):
        write(tmp_path / "three" / f"l{n}.json", report(run(n, speed=speed)))
    green = judged(tmp_path / "three", 1.0)
    assert green.passed and not green.unchecked and green.context["verdict"] == PASSED, green.message()
    check = green.checks[0]
    assert "prediction interval of the change for a new launch of the baseline" in check.detail
    assert "mean of its 3 launches" in check.detail and "t with 2 degrees of freedom" in check.detail
    assert "launch_note" not in green.context


def test_a_slowdown_beyond_the_launches_spread_is_a_regression(tmp_path: Path) -> None:
    for n, speed in enumerate((0.99, 1.0, 1.01), 1):
        write(tmp_path / "three" / f"l{n}.json", report(run(n, speed=speed)))
    red = judged(tmp_path / "three", 1.5)
    assert not red.passed and red.context["verdict"] == REGRESSED
    assert "beyond the noise between launches too" in red.checks[0].detail


def test_within_the_launch_beyond_but_not_beyond_the_launches_spread_is_not_a_regression(tmp_path: Path) -> None:
    # Launches 1.0 and 1.25: a candidate at 1.15 is beyond the first launch's own noise, not beyond their spread.
    write(tmp_path / "two" / "a.json", report(run(1, speed=1.0)))
    write(tmp_path / "two" / "b.json", report(run(2, speed=1.25)))
    outcome = judged(tmp_path / "two", 1.15, "output_throughput:10%")
    assert outcome.passed and outcome.context["verdict"] == CANNOT_JUDGE
    [line] = outcome.unchecked
    assert line.startswith("cannot judge a 10 % change of output_throughput: healthy launches differ by 2"), line
    assert "launches per side would (power 0.95, one-sided 1%)" in line


def test_the_verdict_and_the_launches_are_in_every_report(tmp_path: Path) -> None:
    write(tmp_path / "two" / "a.json", report(run(1, speed=1.0)))
    write(tmp_path / "two" / "b.json", report(run(2, speed=1.25)))
    ctx = open_baseline(str(tmp_path / "two"), "output_throughput:10%", False)
    outcome = ctx.outcome("t.py::t", [run(99)], [], FINGERPRINT)
    assert outcome is not None
    built = json_report.build_report([], None)
    built["tests"] = [{"nodeid": "t.py::t", "outcome": "skipped", "gates": [outcome.to_dict()]}]
    built["baseline"] = dict(ctx.summary(FINGERPRINT))
    assert [e for e in json_report.validation_errors(built) if e.startswith("$.baseline")] == []
    for shown in _rendered(built):
        assert "2 launches: judged against a new launch of the baseline" in shown
        assert "cannot judge a 10 % change of output_throughput" in shown
    one = open_baseline(str(tmp_path / "two" / "a.json"), "output_throughput:10%", False)
    built["baseline"] = dict(one.summary(FINGERPRINT))
    for shown in _rendered(built):
        assert "baseline of 1 launch: " in shown and "cannot know the noise between launches" in shown


def _rendered(built: dict[str, Any]) -> list[str]:
    """Terminal, Markdown and HTML, each with its line breaks and wrapping indents as single spaces."""
    return [" ".join(out.split()) for out in ("\n".join(terminal.render(built)), markdown.render(built),
                                                html.render(built))]


def test_limits_still_parse_as_before() -> None:
    assert parse_limits("output_throughput:10%").per_metric == {"output_throughput": 10.0}


def test_paired_limits_cover_the_metrics_given_and_name_the_option_in_errors() -> None:
    judged = ("output_throughput", "p99_ttft_ms")
    assert paired_limits(None, judged, "--opt") == {"output_throughput": 5.0, "p99_ttft_ms": 5.0}
    assert paired_limits("7%", judged, "--opt") == {"output_throughput": 7.0, "p99_ttft_ms": 7.0}
    assert paired_limits("min_output_tok_s:3%,max_ttft_ms_p99:20%", judged, "--opt") == {
        "output_throughput": 3.0, "p99_ttft_ms": 20.0}
    with pytest.raises(ConfigError, match=r"^--opt='0%': the limit of output_throughput is 0%.*Fix: give a limit"):
        paired_limits("0%", judged, "--opt")
    with pytest.raises(ConfigError, match=r"^--opt='ouput_throughput:5%': unknown metric.*did you mean output_t"):
        paired_limits("ouput_throughput:5%", judged, "--opt")
