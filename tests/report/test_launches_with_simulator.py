"""A baseline of several launches and the "cannot judge" verdict, through the real plugin and simulator.

Each launch of the simulator draws its own speed (``--sim-launch-jitter 0.2``, seeded). Seed 25 draws a
fast boot (factor 0.55: every simulated duration 45 % shorter); seeds 29, 30, 34 and 48 draw within 0.6 %
of 1. The load (32 requests at concurrency 16, 100 ms decode steps, about 3.4 s) is long enough that the
simulated time, not the busy machine, decides its throughput; the limit (30 %) leaves room for the
machine's own noise between runs (about 5 % on a loaded 2-core runner).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-decode-step-ms 100 --sim-launch-jitter 0.2"
LIMIT = "--sglang-max-regression=output_throughput:30%"
TEST = """
import pytest


@pytest.mark.sglang_throughput(min_output_tok_s=1, concurrency=16, requests=32, input_len=32, output_len=16)
def test_throughput():
    pass
"""


def _run(p: pytest.Pytester, seed: int, *args: str, extra: str = "") -> pytest.RunResult:
    launch = f"--sglang-launch={SIM} --sim-launch-seed {seed}{extra}"
    return p.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", launch, *args, timeout=180)


def _record(p: pytest.Pytester, seed: int, path: Path) -> None:
    _run(p, seed, f"--sglang-report={path}").assert_outcomes(passed=1)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_three_launches_judge_what_one_fast_boot_cannot(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_t=TEST)
    _record(pytester, 25, tmp_path / "fast-boot.json")
    for seed in (30, 34, 48):
        _record(pytester, seed, tmp_path / "base" / f"launch-{seed}.json")
    # An unchanged relaunch against the one fast boot: red, and the report says what a 1-launch baseline cannot know.
    one = _run(pytester, 29, f"--sglang-baseline={tmp_path / 'fast-boot.json'}", LIMIT,
               f"--junitxml={tmp_path / 'one.xml'}", f"--sglang-markdown={tmp_path / 'one.md'}")
    one.assert_outcomes(failed=1)
    out = _flat(one.stdout.str())
    assert "sglang baseline gate failed: output_throughput" in out
    assert "baseline of 1 launch: " in out and "cannot know the noise between launches" in out
    for written in ("one.xml", "one.md"):
        assert "cannot know the noise between launches" in (tmp_path / written).read_text(), written
    assert '<property name="sglang.baseline.verdict" value="regressed" />' in (tmp_path / "one.xml").read_text()
    # The same relaunch against three launches of the same configuration: green, judged against a new launch.
    three = _run(pytester, 29, f"--sglang-baseline={tmp_path / 'base'}", LIMIT, "-rA")
    three.assert_outcomes(passed=1)
    assert "3 launches: judged against a new launch of the baseline" in _flat(three.stdout.str())
    # A slowdown (every simulated duration 2x longer) against the three launches: red.
    slow = _run(pytester, 29, f"--sglang-baseline={tmp_path / 'base'}", LIMIT, extra=" --sim-time-scale 2")
    slow.assert_outcomes(failed=1)
    assert "beyond the noise between launches too" in _flat(slow.stdout.str())


def test_cannot_judge_is_in_every_report_and_fails_under_strict(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_t=TEST)
    # Two launches 80 % apart: no single relaunch can be judged against a 30 % limit.
    for seed in (25, 30):
        _record(pytester, seed, tmp_path / "base" / f"launch-{seed}.json")
    paths = {fmt: tmp_path / f"r.{fmt}" for fmt in ("json", "md", "html", "xml")}
    result = _run(pytester, 29, f"--sglang-baseline={tmp_path / 'base'}", LIMIT, f"--sglang-report={paths['json']}",
                  f"--sglang-markdown={paths['md']}", f"--sglang-html={paths['html']}", f"--junitxml={paths['xml']}",
                  "-rs")
    result.assert_outcomes(skipped=1)  # neither a quiet pass nor a red
    line = re.compile(r"cannot judge a 30 % change of output_throughput: healthy launches differ by [\d.]+ % \(CV "
                      r"[\d.]+ % over the baseline's 2 launches\); about \d+ launches per side would \(power 0\.95")
    assert line.search(_flat(result.stdout.str())), result.stdout.str()
    report = json.loads(paths["json"].read_text())
    [test] = [t for t in report["tests"] if t["nodeid"].endswith("test_throughput")]
    [gate] = [g for g in test["gates"] if g["gate"] == "baseline"]
    assert test["outcome"] == "skipped" and gate["context"]["verdict"] == "cannot judge"
    assert line.search(gate["unchecked"][0]) and report["baseline"]["launches"] == 2
    for fmt in ("md", "html"):
        assert line.search(_flat(html.unescape(paths[fmt].read_text()))), fmt
    xml = paths["xml"].read_text()
    assert '<property name="sglang.baseline.verdict" value="cannot judge" />' in xml
    assert '<property name="sglang.baseline.launches" value="2" />' in xml and line.search(_flat(html.unescape(xml)))
    strict = _run(pytester, 29, f"--sglang-baseline={tmp_path / 'base'}", LIMIT, "--sglang-strict")
    strict.assert_outcomes(failed=1)
    assert line.search(_flat(strict.stdout.str()))


def test_an_empty_baseline_directory_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_t=TEST)
    (tmp_path / "empty").mkdir()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate",
                                           f"--sglang-baseline={tmp_path / 'empty'}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = _flat(result.stderr.str())
    assert "--sglang-baseline" in err and "holds no JSON report" in err and "Traceback" not in err
