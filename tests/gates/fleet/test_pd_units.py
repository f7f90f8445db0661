"""The pure parts of ``sglang_pd``: its keywords, the transfer figures, the roles of unreachable workers."""

from __future__ import annotations

import pytest

from pytest_sglang.fleet.discovery import WorkerEntry
from pytest_sglang.fleet.handle import WorkerHandle
from pytest_sglang.gates.fleet.pd import run_marker
from pytest_sglang.gates.fleet.pd_parity import reference_args
from pytest_sglang.gates.fleet.pd_roles import WorkerFacts, role_checks
from pytest_sglang.gates.fleet.pd_transfer import COUNTERS, HISTOGRAMS, Limits, TransferWindow, transfer_checks
from pytest_sglang.gates.keywords import marker_problem
from pytest_sglang.loadgen import LoadResult, LoadSpec
from pytest_sglang.sglang.args import parse_launch_args

TRANSFER, BOOTSTRAP = COUNTERS["transfer"], COUNTERS["bootstrap"]
LATENCY = HISTOGRAMS["transfer_ms"]


def _worker(index: int, role: str, **facts: str) -> WorkerHandle:
    entry = WorkerEntry(url=f"http://10.0.0.{index}:30000", role=role, is_healthy=True,  # type: ignore[arg-type]
                        facts=facts)
    return WorkerHandle(index, entry, server=None, unreachable="not reachable from here: no route to host")


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"transfer_backend": "nixl-rdma"}, "transfer_backend='nixl-rdma'): must be one of mooncake, nixl, ascend, "
                                        "fake, mori (as SGLang 0.5.23's /server_info reports them). Fix: write "
                                        "transfer_backend='nixl' (the closest choice)"),
    ({"transfer_backend": "mooncake_tcp"}, "transfer_backend='mooncake_tcp'): must be one of mooncake, nixl, "),
    ({"max_transfer_failures": -1}, "max_transfer_failures=-1): must be a whole number >= 0"),
    ({"max_transfer_failure_rate": 5}, "max_transfer_failure_rate=5): must be a number from 0 to 1 (a fraction: "
                                       "0.01 = 1%). Fix: write max_transfer_failure_rate=0.05"),
    ({"max_bootstrap_failures": 1.5}, "max_bootstrap_failures=1.5): must be a whole number >= 0, not float"),
    ({"max_transfer_ms": 0}, "max_transfer_ms=0): must be a number > 0"),
    ({"kv_checksum": "yes"}, "kv_checksum='yes'): must be True or False, not the string 'yes'"),
    ({"parity_accuracy": True}, "parity_accuracy=True, parity=False): needs parity=True (accuracy parity "
                                "compares with the parity's reference server). Fix: add parity=True"),
    ({"task": "arithmetic"}, "task='arithmetic', parity=False): needs parity=True (the task runs on the parity's "
                             "reference server too). Fix: add parity=True"),
    ({"parity": True, "task": "gsm9k"}, "task='gsm9k'): must be one of arithmetic, gsm8k, mmlu. Fix: write "
                                        "task='gsm8k' (the closest choice)"),
    ({"load": False, "max_transfer_share": 0.5}, "max_transfer_share=0.5, load=False): needs load=True (it is "
                                                 "measured under the gate's load). Fix: drop load=False"),
    ({"parity": True, "parity_prompts": 100}, "parity_prompts=100): must be a whole number from 1 to 24"),
    ({"parity": True, "parity_logprob_delta": -0.1}, "parity_logprob_delta=-0.1): must be a number >= 0"),
    ({"max_transfer_failure": 0}, "has no keyword 'max_transfer_failure' (did you mean 'max_transfer_failures'?)"),
])
def test_bad_keywords_are_named_with_the_fix(kwargs: dict[str, object], expected: str) -> None:
    problem = marker_problem("sglang_pd", run_marker, (), kwargs)
    assert problem is not None and expected in problem, problem


def test_good_keywords_pass() -> None:
    assert marker_problem("sglang_pd", run_marker, (), {
        "transfer_backend": "mooncake", "kv_checksum": True, "max_transfer_failure_rate": 0.01,
        "max_bootstrap_failures": 2, "max_transfer_share": 0.3, "parity": True, "parity_accuracy": True,
        "task": "gsm8k", "num_examples": 100, "parity_max_drop": 0.02}) is None


def test_a_bad_marker_is_a_usage_error_before_anything_starts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="""
import pytest


@pytest.mark.sglang_pd(max_transfer_failure_rate="1%")
def test_x():
    pass
""")
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
                                           "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*@pytest.mark.sglang_pd(max_transfer_failure_rate='1%'): must be a number from 0 "
                                 "to 1 (a fraction: 0.01 = 1%), not the string '1%'. Fix: write "
                                 "max_transfer_failure_rate=0.01"])
    assert "fleet serving" not in result.stdout.str()  # nothing was launched


@pytest.mark.parametrize("args", [
    "--model-path m --disaggregation-mode prefill --tp 2",
    "--model-path m --disaggregation-mode=decode --tp 2 --disaggregation-bootstrap-port 9000",
    "--model-path m --tp 2 --disaggregation-transfer-backend nixl --disaggregation-enable-kv-checksum",
])
def test_the_reference_drops_every_disaggregation_flag(args: str) -> None:
    assert reference_args(parse_launch_args(args.split())) == ["--model-path", "m", "--tp", "2"]


def _window(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]],
            workers: list[WorkerHandle]) -> TransferWindow:
    return TransferWindow.between(workers, dict(before), dict(after))


def _figures(**values: float) -> dict[str, float]:
    keys = [*COUNTERS.values(), *(f"{h}_{p}" for h in HISTOGRAMS.values() for p in ("sum", "count"))]
    return {k: values.get(k.replace("sglang:", "").replace(":", "_"), 0.0) for k in keys}


def _result(completed: int, failed: int = 0, ttft: float = 40.0) -> LoadResult:
    return LoadResult(spec=LoadSpec(requests=completed + failed), completed=completed, failed=failed,
                      mean_ttft_ms=ttft)


def test_failures_are_the_larger_side_and_rates_are_over_the_requests_sent() -> None:
    prefill, decode = _worker(0, "prefill"), _worker(1, "decode")
    zero = _figures()
    window = _window({prefill.url: zero, decode.url: zero},
                     {prefill.url: _figures(num_transfer_failed_reqs_total=3, kv_transfer_latency_ms_sum=600,
                                            kv_transfer_latency_ms_count=30),
                      decode.url: _figures(num_transfer_failed_reqs_total=5)}, [prefill, decode])
    assert window.failures("transfer")[0] == 5 and window.failures("bootstrap")[0] == 0
    assert window.mean("transfer_ms") == (20.0, 30)
    checks = {c.metric: c for c in transfer_checks(window, _result(47, 3), Limits(max_transfer_failure_rate=0.05,
                                                                                  max_transfer_share=0.4))}
    assert "transfer_failures" not in checks  # a rate was given: it replaces the default count of 0
    # 5 failed of the 51 requests sent: 50 timed and the load's one warmup request (the counters count it too)
    assert checks["transfer_failure_rate"].measured == round(5 / 51, 6) and not checks["transfer_failure_rate"].passed
    assert checks["bootstrap_failures"].required == 0 and checks["bootstrap_failures"].passed  # the default
    assert checks["transfer_share_of_ttft"].measured == 0.5 and not checks["transfer_share_of_ttft"].passed
    assert "prefill workers 3, decode workers 5 (the larger" in checks["transfer_failure_rate"].source


def test_unknown_figures_fail_and_say_why() -> None:
    prefill, decode = _worker(0, "prefill"), _worker(1, "decode")
    window = _window({prefill.url: _figures(num_transfer_failed_reqs_total=9), decode.url: _figures()},
                     {prefill.url: _figures(), decode.url: _figures()}, [prefill, decode])
    checks = transfer_checks(window, _result(10), Limits(max_transfer_ms=50))
    assert [c.measured for c in checks] == [None, None, None]
    assert all(not c.passed for c in checks)
    assert "prefill worker 0 (http://10.0.0.0:30000): its counters went down during the load" in checks[0].source
    assert "--enable-metrics" in checks[0].remedy


def test_unreachable_workers_are_judged_on_the_gateway_metadata_or_not_checked() -> None:
    listed = _worker(0, "prefill", disaggregation_mode="null")  # sglang-router 0.3.x metadata
    silent = _worker(1, "decode")
    checks = role_checks([WorkerFacts(listed), WorkerFacts(silent)])
    assert checks[0].measured == "null" and not checks[0].passed
    assert checks[0].source.startswith("the gateway's GET /workers metadata.disaggregation_mode (not reachable")
    assert checks[1].measured == "not checked" and not checks[1].passed
    assert silent.name() == "decode worker 1 (http://10.0.0.1:30000)"
