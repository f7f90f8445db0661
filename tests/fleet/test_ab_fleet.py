"""An interleaved A/B of two fleets behind smg: B differs from A in its gateway args only."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import psutil
import pytest

SIM = "--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.05 --sim-decode-step-ms 1000"
TEST = '''
def test_ab(sglang_ab):
    sglang_ab(requests=16, concurrency=8, input_len=16, output_len=32, warmup=0)
'''


def _left_nothing_and_the_outcome(pytester: pytest.Pytester, counter: Path) -> dict[str, Any]:
    """No launch of the run left running; the A/B outcome from the JUnit file."""
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(counter) in " ".join(p.info["cmdline"] or [])]
    root = ET.parse(pytester.path / "junit.xml").getroot()
    found = [json.loads(p.get("value") or "{}") for p in root.iter("property") if p.get("name") == "sglang_outcome"]
    (outcome,) = [o for o in found if o.get("gate") == "ab"]
    return outcome


def test_fleet_a_b_launches_each_fleet_in_turn_with_its_gateway(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fleet_ab=TEST)
    counter = pytester.path / "launches.txt"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-workers", "2", f"--sglang-launch={SIM} --sim-launch-counter {counter}",
        "--sglang-gateway=--policy round_robin", "--sglang-ab-gateway=--policy cache_aware",
        "--sglang-ab-launches=2", "--junitxml=junit.xml", "-s", "-rs", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0 and outcomes.get("passed", 0) + outcomes.get("skipped", 0) + outcomes.get(
        "failed", 0) == 1, result.stdout.str()
    # 2 launches per side, 2 workers each: 8 worker launches, none left running.
    assert len(counter.read_text().splitlines()) == 8
    outcome = _left_nothing_and_the_outcome(pytester, counter)
    assert "gateway --policy round_robin" in outcome["context"]["A"]
    assert "gateway --policy cache_aware" in outcome["context"]["B"]
    assert len(outcome["checks"]) + len(outcome.get("unchecked", [])) == 4


def test_a_prefill_decode_a_b_launches_a_pd_pair_per_launch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pd_ab=TEST)
    counter = pytester.path / "launches.txt"
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
        f"--sglang-launch={SIM} --sim-launch-counter {counter}", "--sglang-ab-launches=2", "--junitxml=junit.xml",
        "-s", "-rs", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0 and outcomes.get("failed", 0) == 0, result.stdout.str()
    # 2 launches per side, a prefill and a decode worker each: 8 worker launches, none left running.
    assert len(counter.read_text().splitlines()) == 8
    outcome = _left_nothing_and_the_outcome(pytester, counter)
    assert "1 prefill + 1 decode workers" in outcome["context"]["A"]
    assert "1 prefill + 1 decode workers" in outcome["context"]["B"] and "(same as A)" in outcome["context"]["B"]
