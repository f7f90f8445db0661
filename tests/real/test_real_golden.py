"""Golden outputs on real SGLang 0.5.23: recorded from the good launch, checked against a misconfigured one.

``python -m pytest_sglang golden record`` on the trained model served as trained; ``golden check``
replays the recording exactly on that launch and reports the first divergence on the same weights
served with a wrong RoPE base. ``--sglang-golden`` does the same inside a pytest run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from realsgl import RawServer

pytestmark = pytest.mark.real_sglang

Launch = Callable[..., AbstractContextManager[dict[str, RawServer]]]  # the arith_launch fixture
WRONG_ROPE = ("--json-model-override-args", json.dumps({"rope_parameters": {"rope_theta": 1000000.0}}))
FIRST_DIVERGENCE = re.compile(r"first divergence: prompt (\d+) .* at token (\d+): recorded (.*) vs now (.*)$", re.M)


@pytest.fixture(scope="module")
def servers(arith_launch: Launch) -> Iterator[dict[str, RawServer]]:
    with arith_launch(good=(), wrong_rope=WRONG_ROPE) as launched:
        yield launched


def _golden(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "pytest_sglang", "golden", *args], capture_output=True, text=True,
                          timeout=600, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def recording(servers: dict[str, RawServer], arith_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("golden") / "g.json"
    code, output = _golden("record", "--url", servers["good"].url, "--out", str(out))
    assert code == 0, output
    doc = json.loads(out.read_text())
    assert output.strip() == f"recorded {len(doc['records'])} prompts x 32 greedy tokens to {out}"
    assert doc["server"]["model_path"] == str(arith_model)
    return out


@pytest.fixture(scope="module")
def checks(servers: dict[str, RawServer], recording: Path) -> dict[str, tuple[int, str]]:
    """``golden check`` against each launch (one after the other): name -> (exit code, output).

    The good launch is held to the docs' ``--max-logprob-delta 0.05``, not to bit-identity: the check's
    prompts meet the radix cache the recording filled and other batch neighbours, and on CPU that moves a
    logprob by a few thousandths (0.0042 seen in CI) while the tokens stay the same. A wrong RoPE base
    moves them by about 0.5.
    """
    return {"good": _golden("check", "--url", servers["good"].url, "--golden", str(recording),
                            "--max-logprob-delta", "0.05"),
            "wrong_rope": _golden("check", "--url", servers["wrong_rope"].url, "--golden", str(recording))}


def test_golden_check_passes_on_the_launch_it_was_recorded_from(
    checks: dict[str, tuple[int, str]], recording: Path,
) -> None:
    code, output = checks["good"]
    assert code == 0, output
    prompts = len(json.loads(recording.read_text())["records"])
    assert output.startswith(f"golden outputs match: prompts={prompts}, exact matches={prompts}, match rate=1.0")


def test_golden_check_fails_on_a_wrong_rope_base_with_the_first_divergence(
    checks: dict[str, tuple[int, str]], recording: Path,
) -> None:
    code, output = checks["wrong_rope"]
    assert code == 1, output
    assert re.search(r"\d+/\d+ prompts give the recorded token ids \(rate [0-9.]+ < min_match 1\)", output), output
    found = FIRST_DIVERGENCE.search(output)
    assert found, output
    # The divergence shown is the real one: the recording's continuation from that token, and another.
    doc = json.loads(recording.read_text())
    record, at = doc["records"][int(found.group(1))], int(found.group(2))
    assert 0 <= at < doc["tokens"]
    assert found.group(3) == repr("".join(record["pieces"][at:at + 8])) != found.group(4)


def test_golden_option_fails_the_run_against_the_misconfigured_launch(
    servers: dict[str, RawServer], recording: Path, pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--sglang-url={servers['wrong_rope'].url}",
                                           f"--sglang-golden={recording}", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*golden outputs*", "*first divergence: prompt * at token *: recorded * vs now *"])
