"""``sglang_pd`` roles, backend and checksum on real PD fleets: simulator workers behind the real gateway.

Launched fleets (``--sglang-simulate --sglang-prefill 1 --sglang-decode 1``) behind smg 1.13 and
sglang-router 0.3.2 in PD mode, and a fleet started by hand whose two workers are not PD workers at
all (the gateway pairs them without a word; the gate must not).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.fleetkit import ROUTER_PYTHON, SIM_LAUNCH
from gates.pdkit import own_pd_fleet

PD = ("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1", "--sglang-launch", SIM_LAUNCH)
LOAD = "requests=24, concurrency=4, input_len=64, output_len=8"

LAUNCHED = f"""
import pytest


@pytest.mark.sglang_pd(transfer_backend="mooncake", {LOAD})
def test_pd_roles_backend_and_transfer(sglang_gate):
    outcome = sglang_gate["pd"]
    metrics = [c.metric for c in outcome.checks]
    assert metrics[0] == "prefill-decode fleet"
    assert metrics[1].startswith("disaggregation_mode of prefill worker 0 (")
    assert metrics[2].startswith("disaggregation_mode of decode worker 1 (")
    assert metrics[3].startswith("disaggregation_bootstrap_port of prefill worker 0 (")
    assert "transfer_failures" in metrics and "bootstrap_failures" in metrics and "error_rate" in metrics
    assert outcome.context["integrity"].startswith("24/24 completed")


@pytest.mark.sglang_pd(transfer_backend="nixl", load=False)
def test_backend_is_not_nixl():
    pass


@pytest.mark.sglang_capacity(min_total_tokens=100000)
def test_capacity_names_the_role():
    pass


@pytest.mark.sglang_throughput(min_output_tok_s=1, {LOAD})
def test_throughput_goes_through_the_pd_gateway(sglang_gate):
    outcome = sglang_gate["throughput"]
    assert outcome.context["integrity"].startswith("24/24 completed")
    assert len(outcome.context["worker_requests"]) == 2  # both workers served every request


@pytest.mark.sglang_slo(max_e2e_ms_p99=60000, min_concurrency=1, max_concurrency=2, input_len=32, output_len=4)
def test_slo_through_the_pd_gateway(sglang_gate):
    assert sglang_gate["slo"].passed
"""


def test_launched_pd_fleet_roles_backend_checksum_and_other_gates(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=LAUNCHED)
    result = pytester.runpytest_subprocess(*PD, "--sglang-prefill-launch=--disaggregation-enable-kv-checksum",
                                           "-p", "no:cacheprovider", "-rfE")
    # kv_checksum=True on a launch that gives the checksum to the prefill role only is refused before
    # anything starts (tests/plugin/test_marker_needs.py); attached, each worker's /server_info is read.
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines([
        "sglang pd gate failed: transfer_backend='nixl': measured mooncake (disaggregation_transfer_backend of "
        "prefill worker 0 (*)); transfer_backend='nixl': measured mooncake (disaggregation_transfer_backend of "
        "decode worker 1 (*))",
        "Fix: launch every prefill and decode worker with --disaggregation-transfer-backend nixl (SGLang's default "
        "is mooncake)",
    ])
    result.stdout.fnmatch_lines([
        "sglang capacity gate failed: min_total_tokens=100000: measured * tokens (max_total_num_tokens of prefill "
        "worker 0 (*)); min_total_tokens=100000: measured * tokens (max_total_num_tokens of decode worker 1 (*))",
    ])


ATTACHED = """
import pytest


@pytest.mark.sglang_pd(load=False)
def test_null_workers_are_no_pair():
    pass


@pytest.mark.sglang_pd(load=False, parity=True)
def test_parity_of_an_attached_fleet_needs_a_reference(sglang_gate):
    check = sglang_gate["pd"].checks[-1]
    assert check.metric == "reference_server" and not check.passed
    assert check.source == "the fleet was attached and no --sglang-pd-reference-url was given"
"""


def test_two_null_workers_behind_a_pd_gateway_fail_the_roles(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(test_inner=ATTACHED)
    # The prefill worker's own bootstrap port is not the one the gateway lists (8998) either.
    with own_pd_fleet([["--disaggregation-bootstrap-port", "41999"]], [[]], tmp_path) as fleet:
        # parity=True flushes the attached fleet's caches: consent given, to reach the reference check.
        result = pytester.runpytest_subprocess("--sglang-url", fleet.url, "-p", "no:cacheprovider", "-rfE",
                                               "--sglang-allow-disruptive")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "sglang pd gate failed: disaggregation_mode of prefill worker 0 (http://127.0.0.1:*) null (required == "
        "prefill); disaggregation_mode of decode worker 1 (http://127.0.0.1:*) null (required == decode); "
        "disaggregation_bootstrap_port of prefill worker 0 (*) 41999 (required == 8998)",
        "  prefill-decode fleet: measured 1 prefill, 1 decode workers, required == at least 1 prefill and 1 decode "
        "worker [[]the gateway's GET /workers worker_type at http://127.0.0.1:*[]]: ok",
        "  disaggregation_mode of prefill worker 0 (*): measured null, required == prefill [[]its own GET "
        "/server_info disaggregation_mode; the gateway lists it as prefill[]]: FAILED",
        "  disaggregation_mode of decode worker 1 (*): measured null, required == decode [[]its own GET "
        "/server_info disaggregation_mode; the gateway lists it as decode[]]: FAILED",
        "  disaggregation_bootstrap_port of prefill worker 0 (*): measured 41999, required == 8998 [[]its own GET "
        "/server_info disaggregation_bootstrap_port; required: the bootstrap port the gateway's GET /workers lists "
        "for it (sent to the decode workers as bootstrap_port)[]]: FAILED",
    ], consecutive=True)
    result.stdout.fnmatch_lines(["Fix: launch each prefill worker with --disaggregation-mode prefill and each "
                                 "decode worker with --disaggregation-mode decode, *"])


NOT_PD = """
import pytest


@pytest.mark.sglang_pd()
def test_needs_pd():
    pass
"""


@pytest.mark.parametrize(("args", "measured"), [
    (("--sglang-simulate",), "a single SGLang server (no gateway in front)"),
    (("--sglang-simulate", "--sglang-workers", "2", "--sglang-launch", SIM_LAUNCH), "0 prefill, 0 decode, 2 regular "
                                                                                    "workers"),
])
def test_a_non_pd_server_or_fleet_fails_clearly(pytester: pytest.Pytester, args: tuple[str, ...],
                                                measured: str) -> None:
    pytester.makepyfile(test_inner=NOT_PD)
    result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"sglang pd gate failed: prefill-decode fleet {measured} (required == at least 1 prefill and 1 decode "
        "worker)",
        "*",
        "  sglang_pd needs a prefill-decode fleet: its checks are about the pair, and a non-PD server would pass "
        "them vacuously",
        "Fix: launch a prefill-decode fleet with --sglang-prefill N --sglang-decode M, or point --sglang-url at "
        "SGLang's gateway in PD mode (smg launch --pd-disaggregation --prefill URL PORT --decode URL)",
    ], consecutive=True)


ROUTER = f"""
import pytest


@pytest.mark.sglang_pd(transfer_backend="mooncake", {LOAD})
def test_pd_behind_sglang_router(sglang_gate, sglang_fleet):
    assert sglang_fleet.flavor == "sglang-router"
    assert sglang_gate["pd"].passed
"""


def test_roles_pass_behind_sglang_router(pytester: pytest.Pytester) -> None:
    if not Path(ROUTER_PYTHON).is_file():
        pytest.skip(f"sglang-router 0.3.2 is not installed at {ROUTER_PYTHON}: run scripts/gateway/setup.sh")
    pytester.makepyfile(test_inner=ROUTER)
    result = pytester.runpytest_subprocess(*PD, "--sglang-gateway-command",
                                           f"{ROUTER_PYTHON} -m sglang_router.launch_router", "-p",
                                           "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1)


FAILOVER = """
import pytest

LOAD = dict(requests=120, concurrency=4, input_len=64, output_len=16, max_detect_s=10, max_recover_s=30)


@pytest.mark.sglang_failover(worker=2, max_error_rate=0.1, **LOAD)
def test_decode_worker_failover(sglang_gate):
    assert sglang_gate["failover"].context["failover"]["role"] == "decode"


@pytest.mark.sglang_failover(worker=0, max_error_rate=0.1, **LOAD)
def test_prefill_worker_failover(sglang_gate):
    assert sglang_gate["failover"].context["failover"]["role"] == "prefill"


@pytest.mark.sglang_pd(requests=24, concurrency=4, input_len=64, output_len=8)
def test_the_pair_is_whole_again():
    pass
"""


def test_failover_of_a_prefill_and_of_a_decode_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=FAILOVER)
    result = pytester.runpytest_subprocess(
        "--sglang-simulate", "--sglang-prefill", "2", "--sglang-decode", "2", "--sglang-launch", SIM_LAUNCH,
        "--sglang-gateway", "--health-check-interval-secs 1 --health-failure-threshold 1 --policy round_robin",
        "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["failover test_inner.py::test_decode_worker_failover *PASSED",
                                 "  worker 2 SIGKILL: * errors *, detected in *",
                                 "*",
                                 "failover test_inner.py::test_prefill_worker_failover *PASSED",
                                 "  worker 0 SIGKILL: * errors *, detected in *"])
