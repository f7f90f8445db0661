"""``sglang_speculative``: healthy speculation passes; a collapse (acceptance 1.00) and a speculation that
gains nothing (``spec-slow``) fail with the measured figures, against the simulator launched by pytest.

The gate launches the reference itself (the same launch without ``--speculative-*``). Decode steps are
made long (``--sim-decode-step-ms 40`` at time scale 0.25: 10 ms) so the simulated step time, not the
HTTP overhead, sets the throughput the speedup compares.
"""

from __future__ import annotations

import fnmatch

import pytest

from pytest_sglang.simulator import Simulator
from tests.conftest import SimFactory

BASE = ("--model-path sim/tiny-llama --sim-profile tiny --sim-time-scale 0.25 --sim-decode-step-ms 40 "
        "--enable-metrics --speculative-algorithm EAGLE3 --speculative-num-steps 3 "
        "--speculative-draft-model-path sim/tiny-llama-eagle3")
MARK = ("@pytest.mark.sglang_speculative(min_accept_length=2.0, min_accept_rate=0.5, min_speedup=1.3, samples=8, "
        "requests=16, concurrency=4, input_len=32, output_len=64)")
INNER = f"""
import pytest


{MARK}
def test_speculation_pays_off():
    pass
"""


def _run(pytester: pytest.Pytester, launch: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                         "-rfE")


def test_healthy_speculation_passes_every_floor(pytester: pytest.Pytester) -> None:
    result = _run(pytester, BASE)
    result.assert_outcomes(passed=1)


def test_a_collapse_fails_with_acceptance_1_and_no_speedup(pytester: pytest.Pytester) -> None:
    result = _run(pytester, BASE + " --sim-fault spec-collapse")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang speculative gate failed: min_accept_length=2.0: measured 1.0* tokens/step (spec_accept_length)*",
    ])
    result.stdout.fnmatch_lines([
        "  min_accept_length=2.0: spec_accept_length measured 1.0* tokens/step, required >= 2 tokens/step [[]meta_info "
        "of 8 greedy /generate requests of 64 tokens; spec_accept_length per request: min 1.0* / median 1.0* / max "
        "1.0* over 8 requests; verify steps by accepted drafts: 0: 100%[]]: FAILED",
    ])
    result.stdout.fnmatch_lines(["  min_speedup=1.3: speedup measured 0.* x, required >= 1.3 x [[]output throughput "
                                 "with speculation * tok/s over without * tok/s, same load; reference: launched by "
                                 "the gate without --speculative-* *[]]: FAILED"])
    result.stdout.fnmatch_lines(["  server's figures: sglang:spec_accept_length (last batch) 1.00; /server_info "
                                 "avg_spec_accept_length (since start) 1.00"])


def test_speculation_without_a_gain_fails_the_speedup_only(pytester: pytest.Pytester) -> None:
    result = _run(pytester, BASE + " --sim-fault spec-slow")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["sglang speculative gate failed: min_speedup=1.3: measured *"])
    result.stdout.fnmatch_lines(["  min_accept_length=2.0: spec_accept_length measured * tokens/step, required >= 2 "
                                 "tokens/step *: ok",
                                 "  min_accept_rate=0.5: spec_accept_rate measured *, required >= 0.5 *: ok",
                                 "  min_speedup=1.3: speedup measured * x, required >= 1.3 x *: FAILED"])
    result.stdout.fnmatch_lines(["  throughput: 16 requests* with speculation * tok/s (ITL median * ms, 0 failed); "
                                 "without * tok/s (ITL median * ms, 0 failed)"])


def test_a_server_without_speculation_fails_naming_the_flag(pytester: pytest.Pytester) -> None:
    """Attached (launch args unknown until /server_info is read): the gate itself fails, naming the flag."""
    pytester.makepyfile(test_inner="""
import pytest


@pytest.mark.sglang_speculative(min_accept_length=1.5, samples=2)
def test_spec():
    pass
""")
    with Simulator(["--model-path", "sim/tiny-llama", "--sim-profile", "tiny", "--sim-time-scale", "0.05"]) as sim:
        result = pytester.runpytest_subprocess("--sglang-url", sim.url, "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["sglang speculative gate failed: speculative_algorithm None (required == set)",
                                 "  speculative_algorithm: measured None, required == set [[]*/server_info[]]: FAILED",
                                 "Fix: launch the server with --speculative-algorithm*"], consecutive=True)


@pytest.mark.parametrize(("kwargs", "expected"), [
    ("", "*@pytest.mark.sglang_speculative(): checks nothing, so it would always pass. Fix: give at least one of "
         "min_accept_length, min_accept_rate, min_speedup*"),
    ("min_accept_length=1", "*sglang_speculative(min_accept_length=1): must be a number or a non-empty mapping "
                            "{context tokens: number} > 1*"),
    ("min_accept_rate=75", "*min_accept_rate=0.75*"),
    # 1.5 is no percent anyone means for an acceptance rate: the fix names the accept length, not 0.015
    ("min_accept_rate=1.5", "*sglang_speculative(min_accept_rate=1.5): must be a number or a non-empty mapping "
                            "{context tokens: number} from 0 to 1 (a fraction: 0.01 = 1%). Fix: give min_accept_rate "
                            "a number or a non-empty mapping {context tokens: number} from 0 to 1 (a fraction: "
                            "0.01 = 1%); the "
                            "rate is accepted / proposed drafts; for 1.5 accepted tokens per verify step write "
                            "min_accept_length=1.5*"),
])
def test_bad_keywords_are_usage_errors_before_anything_starts(pytester: pytest.Pytester, kwargs: str,
                                                              expected: str) -> None:
    pytester.makepyfile(test_inner=f"""
import pytest


@pytest.mark.sglang_speculative({kwargs})
def test_spec():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", "--model-path sim/tiny-llama",
                                           "-p", "no:cacheprovider")
    assert result.ret != 0
    assert any(fnmatch.fnmatch(line, expected) for line in result.stdout.lines + result.stderr.lines), \
        result.stdout.str() + result.stderr.str()


SPEEDUP_ONLY = """
import pytest


@pytest.mark.sglang_speculative(min_speedup=1.05, reference_url={url!r}, requests=8, concurrency=4, input_len=32,
                                output_len=16)
def test_speedup():
    pass
"""


def test_a_reference_serving_another_model_is_refused_before_any_load(pytester: pytest.Pytester,
                                                                      sim_factory: SimFactory) -> None:
    """A speedup over a server of another model means nothing: the gate fails naming what differs."""
    other = sim_factory("--model-path", "sim/other-model")
    pytester.makepyfile(test_inner=SPEEDUP_ONLY.format(url=other.url))
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", BASE, "-p", "no:cacheprovider",
                                           "-rfE")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "sglang speculative gate failed: fields differing from the reference model_path: sim/tiny-llama on this "
        "server, sim/other-model on the reference (required == none)",
    ])
    result.stdout.fnmatch_lines(["Fix: launch the reference with the same SGLang version, model and model_path as "
                                 "this server; or leave reference_url out on a launched server*"])
    assert "speedup measured" not in result.stdout.str()
    sent = [line for line in other.log_text().splitlines() if '"POST /generate' in line and ":0 - " not in line]
    assert not sent, "no load was sent to the reference (its own warm-up request comes from port 0)"


def test_a_dead_reference_url_names_the_keyword_in_its_fix(pytester: pytest.Pytester) -> None:
    from pytest_sglang.sockets import free_port

    pytester.makepyfile(test_inner=SPEEDUP_ONLY.format(url=f"http://127.0.0.1:{free_port()}"))
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", BASE, "-p", "no:cacheprovider",
                                           "-rfE")
    result.assert_outcomes(errors=1)
    text = result.stdout.str()
    assert "could not measure: ServerUnavailable: reference_url: " in text, text
    result.stdout.fnmatch_lines(["*Fix: give reference_url the URL of a running SGLang server of the same model "
                                 "launched without --speculative-**"])
    fixes = [line for line in result.stdout.lines if "Fix:" in line]
    assert not any("--sglang-url" in line for line in fixes), fixes


# ---- per context-length bucket, per DP rank (issue 33 item 1) ------------------------------------
BUCKETS = """
import pytest


@pytest.mark.sglang_speculative(context_lens=[64, 1500], min_accept_length={{64: 2.0, 1500: 1.8}}, samples=4,
                                output_len=48{extra})
def test_speculation_holds_at_every_length():
    pass
"""


def _run_buckets(pytester: pytest.Pytester, launch: str, extra: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_inner=BUCKETS.format(extra=extra))
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-launch", launch, "-p", "no:cacheprovider",
                                         "-rfE")


def test_healthy_speculation_passes_every_bucket_on_every_rank(pytester: pytest.Pytester) -> None:
    result = _run_buckets(pytester, BASE + " --dp-size 2", extra=", min_speedup=1.1, requests=8, concurrency=4")
    result.assert_outcomes(passed=1)


def test_acceptance_decaying_with_context_fails_the_long_bucket_only(pytester: pytest.Pytester) -> None:
    """sglang#30763's shape: fine on short prompts, drafts rejected past 1,000 tokens of context."""
    result = _run_buckets(pytester, BASE + " --sim-fault spec-decay-after:1000",
                          extra=", min_speedup=1.1, requests=8, concurrency=4")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "  min_accept_length=2.0: spec_accept_length at 64 context tokens measured * tokens/step, required >= 2 "
        "tokens/step [[]meta_info of 4 greedy /generate requests of 48 tokens, prompts of 64 token ids; *"
        "prompt_tokens (meta_info) median 64[]]: ok",
        "  min_accept_length=1.8: spec_accept_length at 1,500 context tokens measured 1.* tokens/step, required "
        ">= 1.8 tokens/step [[]*prompts of 1,500 token ids;*prompt_tokens (meta_info) median 1,500[]]: FAILED",
    ])
    result.stdout.fnmatch_lines(["  min_speedup=1.1: speedup at 64 context tokens measured * x*: ok",
                                 "  min_speedup=1.1: speedup at 1,500 context tokens measured 0.* x*: FAILED"])


def test_one_dp_rank_accepting_less_fails_naming_the_rank(pytester: pytest.Pytester) -> None:
    """sglang#16274's shape: one rank's acceptance falls; the server-wide mean would hide it."""
    result = _run_buckets(pytester, BASE + " --dp-size 2 --sim-fault spec-rank-low:1")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    for bucket in ("64", "1,500"):
        result.stdout.fnmatch_lines([
            f"  min_accept_length=*: spec_accept_length at {bucket} context tokens on DP rank 0 measured * ok",
            f"  min_accept_length=*: spec_accept_length at {bucket} context tokens on DP rank 1 measured 1.* "
            "tokens/step, required >= * tokens/step [[]*pinned to DP rank 1 (routed_dp_rank)*[]]: FAILED"])
    result.stdout.fnmatch_lines(["  server's figures: *; /server_info avg_spec_accept_length (since start) rank 0 "
                                 "2.*, rank 1 1.*"])
    assert "DP rank 0 measured 1." not in text, text


@pytest.mark.parametrize(("kwargs", "expected"), [
    ("min_accept_length=2.0, context_lens=[]", "*context_lens=[[][]]): must be a non-empty list of whole numbers*"),
    ("min_accept_length=2.0, context_lens=[0, 1024]", "*context_lens=[[]0, 1024[]]): must be a non-empty list of "
                                                      "whole numbers from 1 to 1,048,576*"),
    ("min_accept_length=2.0, context_lens=[1024, '2k']", "*must be a non-empty list of whole numbers*not list*"),
    ("min_accept_length=2.0, context_lens=[1024, 1024]", "*names a context length twice. Fix: give each context "
                                                         "length once*"),
    ("min_accept_length=2.0, context_lens=1024", "*context_lens=1024): must be a non-empty list of whole numbers*"),
    ("min_accept_length={1024: 0.5}", "*min_accept_length={1024: 0.5}): must be a number or a non-empty mapping "
                                      "{context tokens: number} > 1*"),
    ("min_accept_length={'1k': 2.0}", "*min_accept_length={'1k': 2.0}): must be a number or a non-empty mapping*"),
    ("min_accept_length={}", "*min_accept_length={}): must be a number or a non-empty mapping*"),
    ("min_accept_rate={1024: 75}", "*min_accept_rate={1024: 75}): must be a number or a non-empty mapping "
                                   "{context tokens: number} from 0 to 1*"),
    ("min_accept_length={1024: 2.0, 4096: 1.5}, context_lens=[1024]",
     "*gives a floor for context length(s) [[]4096[]] that context_lens does not measure. Fix: add [[]4096[]] to "
     "context_lens, or drop them from min_accept_length*"),
    ("min_accept_length={1024: 2.0}, context_lens=[1024, 32768]",
     "*measures context length(s) [[]32768[]] against no floor. Fix: give a floor for [[]32768[]] in a mapping "
     "({32768: 2.0, ...}), or one number for every length*"),
    ("context_lens=[1024]", "*checks nothing, so it would always pass. Fix: give at least one of min_accept_length, "
                            "min_accept_rate, min_speedup*"),
])
def test_bad_bucket_keywords_are_usage_errors_before_anything_starts(pytester: pytest.Pytester, kwargs: str,
                                                                     expected: str) -> None:
    test_bad_keywords_are_usage_errors_before_anything_starts(pytester, kwargs, expected)
