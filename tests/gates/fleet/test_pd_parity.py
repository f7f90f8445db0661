"""``sglang_pd(parity=True)``: a PD fleet answers like a single server (SGLang's pd_parity_kit idea).

Launched PD fleets of simulators behind smg 1.13; the reference is launched by the gate from the common
launch args, or given with ``--sglang-pd-reference-url``. A decode worker whose tokens drift
(``--sim-fault token-drift:0.3`` in ``--sglang-decode-launch``) must fail the token parity, and one that
also answers wrong must fail the accuracy parity.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.fleetkit import SIM, SIM_LAUNCH
from pytest_sglang.simulator import Simulator

PD = ("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1", "--sglang-launch", SIM_LAUNCH)

PARITY = """
import pytest


@pytest.mark.sglang_pd(load=False, parity=True, task="arithmetic", num_examples=60)
def test_parity(sglang_gate):
    outcome = sglang_gate["pd"]
    checks = {c.metric: c for c in outcome.checks}
    assert checks["prompts_with_equal_token_ids"].measured == 8
    assert checks["max_logprob_delta"].measured <= 0.05
    assert "accuracy_drop_vs_reference" in checks
    assert outcome.context["parity: reference"].startswith("launched by the gate from the common launch args")
"""


def test_parity_passes_on_a_healthy_pd_fleet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=PARITY)
    result = pytester.runpytest_subprocess(*PD, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1)


DRIFTING = """
import pytest


@pytest.mark.sglang_pd(load=False, parity=True, task="arithmetic", num_examples=60)
def test_parity():
    pass
"""


def test_parity_fails_when_the_decode_worker_drifts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=DRIFTING)
    result = pytester.runpytest_subprocess(
        *PD, "--sglang-decode-launch=--sim-fault token-drift:0.3 --sim-fault wrong-answer:0.7", "-p",
        "no:cacheprovider", "-rfE")
    result.assert_outcomes(errors=0, failed=1)
    result.stdout.fnmatch_lines([
        "sglang pd gate failed: prompts_with_equal_token_ids * prompts (required >= 8); parity_max_drop=0.0: "
        "measured * (accuracy_drop_vs_reference)",
    ])
    result.stdout.fnmatch_lines([
        "  disaggregation_mode of the reference server: measured null, required == null [[]its own GET "
        "/server_info; launched by the gate from the common launch args (http://127.0.0.1:*)[]]: ok",
        "  fields differing from the reference server: measured none, required == none [[]both servers' GET "
        "/server_info (version, model_path, revision, dtype, quantization, kv_cache_dtype); *[]]: ok",
        "  fields differing from the reference server: measured none, required == none *: ok",
        "  prompts_with_equal_token_ids: measured * prompts, required >= 8 prompts [[]8 greedy prompts x 4 tokens "
        "(ignore_eos, top_logprobs_num 5), one at a time, through the PD gateway and on the reference server[]]: "
        "FAILED",
        "  parity_logprob_delta=0.05: max_logprob_delta measured *, required <= 0.05 *: ok",
        "  parity_max_drop=0.0: accuracy_drop_vs_reference measured *, required <= 0 [[]95% Newcombe interval of "
        "the change *: * against the reference server (60/60 correct)[]]: FAILED",
    ], consecutive=True)
    result.stdout.fnmatch_lines([
        "  parity: first divergence: prompt * at token *: reference * vs PD *",
        "  parity: accuracy through PD: arithmetic: score *",
        "  parity: accuracy of the reference: arithmetic: score 1.000 (60/60 correct*",
    ])


REFERENCE_URL = """
import pytest


@pytest.mark.sglang_pd(load=False, parity=True)
def test_parity_with_the_given_reference(sglang_gate):
    pass
"""


def test_parity_uses_the_reference_url(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_inner=REFERENCE_URL)
    # The given reference drifts: only a gate that really compares with it fails.
    args = [*SIM, "--model-path", "sim/tiny-llama", "--sim-fault", "token-drift:0.3"]
    with Simulator(args, log_path=tmp_path / "reference.log") as reference:
        result = pytester.runpytest_subprocess(*PD, "--sglang-pd-reference-url", reference.url, "-p",
                                               "no:cacheprovider", "-rfE")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang pd gate failed: prompts_with_equal_token_ids * prompts (required >= 8)",
        f"  disaggregation_mode of the reference server: measured null, required == null [[]its own GET "
        f"/server_info; --sglang-pd-reference-url {reference.url}[]]: ok",
    ])


def test_a_reference_of_another_model_is_refused_before_any_prompt(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_inner=REFERENCE_URL)
    args = [*SIM, "--model-path", "sim/other-model"]
    with Simulator(args, log_path=tmp_path / "reference.log") as reference:
        result = pytester.runpytest_subprocess(*PD, "--sglang-pd-reference-url", reference.url, "-p",
                                               "no:cacheprovider", "-rfE")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang pd gate failed: fields differing from the reference server model_path: sim/tiny-llama on prefill "
        "worker 0 *, sim/other-model on the reference server (required == none)*",
    ])
    assert "prompts_with_equal_token_ids" not in result.stdout.str()
