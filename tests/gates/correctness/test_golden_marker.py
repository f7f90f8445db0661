"""``@pytest.mark.sglang_golden`` end to end: real pytest sessions against simulator subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang.correctness import golden
from pytest_sglang.correctness.golden import Comparison
from pytest_sglang.gates.correctness.golden import judge_golden
from pytest_sglang.plugin import settings
from pytest_sglang.server.client import make_client
from tests.conftest import SimFactory

SEED = ("--random-seed", "7")  # the same weights on every launch, as with a real checkpoint
RUN = ("-p", "no:cacheprovider", "-rfE")
INNER = """
import pytest

@pytest.mark.sglang_golden(path="golden.json", max_logprob_delta=1e-6)
def test_answers_like_production():
    pass

@pytest.mark.sglang_golden(path="golden.json", min_match=0.0)
def test_any_match_rate_will_do():
    pass

@pytest.mark.sglang_golden(path="missing.json")
def test_missing_recording():
    pass
"""


@pytest.fixture(autouse=True)
def _clean_sglang_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in settings.OPTIONS:
        monkeypatch.delenv(option.env, raising=False)


@pytest.fixture
def recording(pytester: pytest.Pytester, sim_factory: SimFactory) -> Path:
    with make_client(sim_factory(*SEED).url) as client:
        doc = golden.record(client, golden.default_prompts()[:5], 10, timeout_s=30)
    path = pytester.path / "golden.json"
    golden.save(doc, path)
    pytester.makepyfile(test_inner=INNER)
    return path


def test_the_recorded_configuration_passes(pytester: pytest.Pytester, recording: Path,
                                           sim_factory: SimFactory) -> None:
    again = sim_factory(*SEED)  # a fresh launch of the recorded configuration
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={again.url}")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_inner.py::test_answers_like_production * PASSED",
                                 "  golden match_rate * 1 * >= 1 ok",
                                 "  golden max_logprob_delta * 0 * <= 1e-06 ok"], consecutive=True)
    result.stdout.fnmatch_lines(["*@pytest.mark.sglang_golden could not measure: KeywordError: "
                                 "@pytest.mark.sglang_golden(path='missing.json'): does not exist (*missing.json; a "
                                 "relative path is read from *). Fix: pass the recording's path (absolute, or "
                                 "relative to that directory); if you have no recording yet, record one with: "
                                 "python -m pytest_sglang golden record --url URL --out FILE"])


def test_token_drift_fails_with_the_first_divergence(pytester: pytest.Pytester, recording: Path,
                                                      sim_factory: SimFactory) -> None:
    drifted = sim_factory(*SEED, "--sim-fault", "token-drift:0.2")
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={drifted.url}", "-k", "not missing")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    result.stdout.fnmatch_lines([
        "sglang golden gate failed: min_match=1.0: measured 0* (match_rate)",
        "  min_match=1.0: match_rate measured 0*, required >= 1 [[]*/5 prompts give the recorded token ids[]]: FAILED",
        "  max_logprob_delta=1e-06: max_logprob_delta measured *, required <= 1e-06 *",
        "  recording: golden.json: 5 prompts x 10 greedy tokens",
        "  first divergence: prompt * '*' at token *: recorded '*' vs now '*'",
        "  largest logprob delta: *; limit max_logprob_delta=1e-06",
        "Fix: the server answers differently from the recording: *",
    ], consecutive=True)


def test_bad_keywords_are_usage_errors_naming_marker_and_keyword(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest

@pytest.mark.sglang_golden()
def test_no_path(): pass

@pytest.mark.sglang_golden(path="g.json", min_match=95)
def test_percent(): pass

@pytest.mark.sglang_golden(path="g.json", max_logprob_delta=-0.1)
def test_negative(): pass

@pytest.mark.sglang_golden(path=3)
def test_not_a_path(): pass

@pytest.mark.sglang_golden(path="g.json", request_timeout_s=0)
def test_timeout(): pass

@pytest.mark.sglang_golden("g.json")
def test_positional(): pass
""")
    result = pytester.runpytest_subprocess(*RUN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines_random([
        "test_inner.py::test_no_path: @pytest.mark.sglang_golden needs 'path'; valid keywords: path, min_match, "
        "max_logprob_delta, request_timeout_s",
        "test_inner.py::test_percent: @pytest.mark.sglang_golden(min_match=95): must be a number from 0 to 1 *. "
        "Fix: write min_match=0.95",
        "test_inner.py::test_negative: @pytest.mark.sglang_golden(max_logprob_delta=-0.1): must be a number >= 0. *",
        "test_inner.py::test_not_a_path: @pytest.mark.sglang_golden(path=3): must be a string, not int. *",
        "test_inner.py::test_timeout: @pytest.mark.sglang_golden(request_timeout_s=0): must be a number > 0. *",
        "test_inner.py::test_positional: @pytest.mark.sglang_golden takes keyword arguments only*",
    ])


def test_requests_that_fail_are_shown_and_count_as_mismatches() -> None:
    found = Comparison(prompts=3, same=2, first=None, max_delta=0.0, worst_at=None,
                       failures=("prompt 2: no 10-token greedy answer with logprobs for 'x': HTTP 500 'boom'",))
    outcome = judge_golden(found, {"tokens": 10}, source="g.json", min_match=1.0, max_logprob_delta=None,
                           names=("min_match", "max_logprob_delta"))
    text = outcome.message()
    assert not outcome.passed and [c.metric for c in outcome.checks] == ["match_rate"]
    assert "  prompt 2: no 10-token greedy answer with logprobs for 'x': HTTP 500 'boom'" in text
    assert "  largest logprob delta: 0; not limited: set max_logprob_delta" in text


def test_a_recording_of_another_model_is_named_next_to_the_verdict(pytester: pytest.Pytester,
                                                                   sim_factory: SimFactory) -> None:
    """The recording keeps its server's facts (``golden record``): a replay on another model says so."""
    with make_client(sim_factory(*SEED, "--model-path", "sim/recorded-model").url) as client:
        doc = golden.record(client, golden.default_prompts()[:3], 6, timeout_s=30,
                            server={"model_path": "sim/recorded-model", "version": "0.5.23"})
    golden.save(doc, pytester.path / "golden.json")
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess(*RUN, f"--sglang-url={sim_factory(*SEED).url}", "-k", "production")
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(["  recording: golden.json: 3 prompts x 6 greedy tokens, from model_path "
                                 "sim/recorded-model, version 0.5.23; this server differs: model_path "
                                 "sim/recorded-model recorded, sim/tiny-llama here"])
