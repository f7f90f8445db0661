"""Golden outputs: record on a known-good server, compare a candidate; and the ``golden`` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_sglang.correctness import golden
from pytest_sglang.errors import ConfigError
from pytest_sglang.server.client import make_client
from tests.conftest import SimFactory

SEED = ("--random-seed", "7")  # the same weights on both launches, as with a real checkpoint


def _record(url: str, path: Path, prompts: list[str] | None = None, tokens: int = 12) -> dict[str, object]:
    with make_client(url) as client:
        doc = golden.record(client, prompts or golden.default_prompts()[:6], tokens, timeout_s=30)
    golden.save(doc, path)
    return golden.load(path)


def test_the_same_configuration_matches_its_recording(sim_factory: SimFactory, tmp_path: Path) -> None:
    good = sim_factory(*SEED)
    doc = _record(good.url, tmp_path / "golden.json")
    again = sim_factory(*SEED)  # a fresh launch of the same configuration
    with make_client(again.url) as client:
        report = golden.compare(client, doc, max_logprob_delta=1e-6)
    assert report.ok, report.message()
    assert report.figures["match rate"] == 1.0 and report.figures["exact matches"] == 6


def test_token_drift_fails_with_the_first_divergence(sim_factory: SimFactory, tmp_path: Path) -> None:
    doc = _record(sim_factory(*SEED).url, tmp_path / "golden.json")
    drifted = sim_factory(*SEED, "--sim-fault", "token-drift:0.3")
    with make_client(drifted.url) as client:
        report = golden.compare(client, doc)
    text = report.message()
    assert not report.ok
    assert "prompts give the recorded token ids" in text and "< min_match 1)" in text
    assert "first divergence: prompt " in text and "recorded '" in text and "vs now '" in text


def test_logprob_drift_is_bounded_by_max_logprob_delta(sim_factory: SimFactory, tmp_path: Path) -> None:
    doc = _record(sim_factory(*SEED).url, tmp_path / "golden.json")
    cached = sim_factory(*SEED, "--sim-fault", "cache-logprob-drift:0.3")
    with make_client(cached.url) as client:
        golden.compare(client, doc)  # first pass fills the prefix cache: the second is served from it
        report = golden.compare(client, doc, max_logprob_delta=0.1)
    assert report.figures["match rate"] == 1.0
    assert "a logprob differs by 0.3000 > max_logprob_delta 0.1" in report.message()


def test_bad_golden_files_and_prompt_files(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ConfigError, match=r"is not a pytest-sglang-golden/1 document.*golden record"):
        golden.load(tmp_path / "x.json")
    with pytest.raises(ConfigError, match=r"does not exist \("):
        golden.load(tmp_path / "missing.json")
    (tmp_path / "p.txt").write_text('plain prompt\n\n{"prompt": "from json"}\n')
    assert golden.read_prompts(tmp_path / "p.txt") == ["plain prompt", "from json"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_sglang", "golden", *args], capture_output=True, text=True,
                          timeout=120)


def test_golden_command_records_and_checks(sim_factory: SimFactory, tmp_path: Path) -> None:
    good, drifted = sim_factory(*SEED), sim_factory(*SEED, "--sim-fault", "token-drift:0.5")
    out = tmp_path / "golden.json"
    (tmp_path / "prompts.txt").write_text("The capital of France is\nOnce upon a time\n")
    run = _cli("record", "--url", good.url, "--out", str(out), "--prompts", str(tmp_path / "prompts.txt"),
               "--tokens", "16")
    assert run.returncode == 0, run.stderr
    assert "recorded 2 prompts x 16 greedy tokens" in run.stdout
    assert [r["prompt"] for r in json.loads(out.read_text())["records"]] == ["The capital of France is",
                                                                            "Once upon a time"]
    ok = _cli("check", "--url", good.url, "--golden", str(out))
    assert ok.returncode == 0 and "golden outputs match: prompts=2, exact matches=2" in ok.stdout
    bad = _cli("check", "--url", drifted.url, "--golden", str(out))
    assert bad.returncode == 1 and "first divergence: prompt 0" in bad.stdout
    down = _cli("record", "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "g2.json"))
    assert down.returncode == 3 and "golden record: no 32-token greedy answer" in down.stderr
    assert "Traceback" not in down.stderr + bad.stderr
