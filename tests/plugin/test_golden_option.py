"""``--sglang-golden PATH``: one more test, ``golden outputs``, against the recording (real pytest sessions).

Recorded with ``python -m pytest_sglang golden record`` from a simulator; ``--random-seed`` gives the
same weights on every launch, as a real checkpoint would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_helpers import SIM_LAUNCH

from tests.conftest import SimFactory

SEED = ("--random-seed", "7")
RUN = ("-p", "no:cacheprovider", "-rfE")
ITEM = "golden.json::golden outputs"


@pytest.fixture
def recording(pytester: pytest.Pytester, sim_factory: SimFactory) -> Path:
    """A recording of 6 prompts x 12 tokens from a fault-free simulator (a file next to the inner tests)."""
    prompts = pytester.path / "prompts.txt"
    prompts.write_text("The capital of France is\nOnce upon a time\nWhat is 12 + 30?\ndef fibonacci(n):\n"
                       "The weather today\nIn 1492, Columbus\n")
    out = pytester.path / "golden.json"
    done = subprocess.run([sys.executable, "-m", "pytest_sglang", "golden", "record", "--url", sim_factory(*SEED).url,
                           "--out", str(out), "--prompts", str(prompts), "--tokens", "12"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pytester.makepyfile(test_inner="def test_plain(sglang_server):\n    pass\n")
    return out


def test_the_same_configuration_passes(pytester: pytest.Pytester, recording: Path) -> None:
    # A fresh launch by the plugin itself, configured as the recorded server was.
    result = pytester.runpytest_subprocess(*RUN, "-v", "--sglang-simulate", f"--sglang-launch={SIM_LAUNCH} "
                                           f"{' '.join(SEED)}", "--sglang-golden=golden.json",
                                           "--sglang-golden-max-logprob-delta=1e-6", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_inner.py::test_plain PASSED*", f"{ITEM} PASSED*"])  # appended last
    result.stdout.fnmatch_lines([ITEM + " * PASSED", "  golden match_rate * 1 * >= 1 ok",
                                 "  golden max_logprob_delta * 0 * <= 1e-06 ok"], consecutive=True)
    assert '"gate": "golden"' in (pytester.path / "junit.xml").read_text().replace("&quot;", '"')


def test_token_drift_fails_with_the_first_divergence(pytester: pytest.Pytester, recording: Path,
                                                      sim_factory: SimFactory) -> None:
    drifted = sim_factory(*SEED, "--sim-fault", "token-drift:0.2")
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={drifted.url}", "--sglang-golden=golden.json",
                                           "--sglang-golden-max-logprob-delta=0.5")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*_ golden outputs _*",
        "sglang golden gate failed: --sglang-golden-min-match=1.0: measured 0* (match_rate)",
        "  --sglang-golden-min-match=1.0: match_rate measured 0*, required >= 1 [[]*/6 prompts give the recorded "
        "token ids[]]: FAILED",
        "  --sglang-golden-max-logprob-delta=0.5: max_logprob_delta measured *, required <= 0.5 [[]the largest "
        "logprob difference where the tokens agree[]]: *",
        "  recording: golden.json: 6 prompts x 12 greedy tokens, from model_path sim/tiny-llama, version 0.5.23; this "
        "server runs the same version, model_path, dtype, quantization, tp_size",
        "  first divergence: prompt * '*' at token *: recorded '*' vs now '*'",
        "  largest logprob delta: *; limit --sglang-golden-max-logprob-delta=0.5",
        "Fix: the server answers differently from the recording: *",
    ], consecutive=True)
    result.stdout.fnmatch_lines([f"FAILED {ITEM} - GateFailed: sglang golden gate failed: *"])
    # The limit is the option's: a floor the drifted server meets passes.
    lenient = pytester.runpytest_subprocess(*RUN, f"--sglang-url={drifted.url}", "--sglang-golden=golden.json",
                                            "--sglang-golden-min-match=0", "-k", "golden")
    lenient.assert_outcomes(passed=1, deselected=1)


def test_a_missing_or_malformed_recording_is_a_usage_error(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_inner="def test_plain():\n    pass\n")
    missing = pytester.runpytest_subprocess(*RUN, "--sglang-golden=nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: --sglang-golden='nope.json': does not exist (*nope.json; a relative path "
                                  "is read from *). Fix: pass the recording's path (absolute, or relative to that "
                                  "directory); if you have no recording yet, record one with: python -m "
                                  "pytest_sglang golden record --url URL --out FILE"])
    (pytester.path / "other.json").write_text(json.dumps({"format": "something-else", "records": []}))
    pytester.makeini("[pytest]\nsglang_golden = other.json\n")
    malformed = pytester.runpytest_subprocess(*RUN)
    assert malformed.ret == pytest.ExitCode.USAGE_ERROR
    malformed.stderr.fnmatch_lines(["ERROR: --sglang-golden (from ini)='other.json': is not a "
                                    "pytest-sglang-golden/1 document. Fix: record one with: *"])
    (pytester.path / "empty.json").write_text(json.dumps({"format": "pytest-sglang-golden/1", "records": []}))
    monkeypatch.setenv("PYTEST_SGLANG_GOLDEN", "empty.json")
    empty = pytester.runpytest_subprocess(*RUN)
    assert empty.ret == pytest.ExitCode.USAGE_ERROR
    empty.stderr.fnmatch_lines(["ERROR: --sglang-golden (from env PYTEST_SGLANG_GOLDEN)='empty.json': holds no "
                                "prompts. Fix: *"])


def test_bad_limits_are_usage_errors_naming_the_option(pytester: pytest.Pytester, recording: Path) -> None:
    too_high = pytester.runpytest_subprocess(*RUN, "--sglang-golden=golden.json", "--sglang-golden-min-match=95")
    assert too_high.ret == pytest.ExitCode.USAGE_ERROR
    too_high.stderr.fnmatch_lines(["ERROR: --sglang-golden-min-match='95': must be a fraction between 0 and 1*"])
    negative = pytester.runpytest_subprocess(*RUN, "--sglang-golden=golden.json",
                                             "--sglang-golden-max-logprob-delta=-1")
    assert negative.ret == pytest.ExitCode.USAGE_ERROR
    negative.stderr.fnmatch_lines(["ERROR: --sglang-golden-max-logprob-delta='-1': must be a number >= 0*"])


def test_the_item_is_collected_selected_and_distributed_like_any_test(pytester: pytest.Pytester,
                                                                      recording: Path) -> None:
    listed = pytester.runpytest_subprocess(*RUN, "--sglang-golden=golden.json", "--collect-only", "-q")
    listed.stdout.fnmatch_lines(["test_inner.py::test_plain", ITEM, "", "2 tests collected*"], consecutive=True)
    only = pytester.runpytest_subprocess(*RUN, "--sglang-golden=golden.json", "--collect-only", "-q",
                                         "-k", "not golden")
    only.stdout.fnmatch_lines(["test_inner.py::test_plain", "", "1/2 tests collected (1 deselected)*"])
    # Under xdist each worker collects the same item; the controller launches once, workers attach.
    spread = pytester.runpytest_subprocess(*RUN, "-n", "2", "--sglang-simulate",
                                           f"--sglang-launch={SIM_LAUNCH} {' '.join(SEED)}",
                                           "--sglang-golden=golden.json")
    spread.assert_outcomes(passed=2)
