"""Each prefill-decode fault the simulator reproduces is caught by ``sglang_pd``, with its figure in the message.

A launched PD fleet of simulators behind smg 1.13 with one ``--sim-fault`` on a role
(``--sglang-prefill-launch`` / ``--sglang-decode-launch``): transfers failing at a rate, a slow transfer
path (the silent TCP fallback), KV checksum mismatches (aborted with the checksum on, silently wrong
answers without it) and a decode worker that lost its prefill peer.
"""

from __future__ import annotations

import pytest

from gates.fleetkit import SIM_LAUNCH

PD = ("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1")
CHECKSUM = f"{SIM_LAUNCH} --disaggregation-enable-kv-checksum"
LOAD = "requests=40, concurrency=4, input_len=64, output_len=8"

INNER = """
import pytest


@pytest.mark.sglang_pd({keywords})
def test_pd():
    pass
"""

CASES = {
    "transfer-failure": (
        SIM_LAUNCH, "--sglang-prefill-launch=--sim-fault pd-transfer-failure:0.3",
        f"max_transfer_failure_rate=0.05, {LOAD}",
        ["sglang pd gate failed: max_transfer_failure_rate=0.05: measured 0.* (transfer_failure_rate); "
         "max_error_rate=0.0: measured 0.* (error_rate)",
         "  max_transfer_failure_rate=0.05: transfer_failure_rate measured 0.*, required <= 0.05 [[]growth of "
         "sglang:num_transfer_failed_reqs_total during the load: prefill workers *, decode workers * (the larger: "
         "SGLang counts a failure on each side that saw it), over the 41 requests sent (1 of them warmup)[]]: FAILED",
         "  integrity: */40 completed; failed by kind: {'abort': *}",
         "  failures: request *: abort: Decode transfer failed for request *KVTransferError*"]),
    # x1000 at --sim-time-scale 0.05: about 26 ms of wall time per transfer (a healthy one takes about 2 ms).
    "slow-transfer": (
        SIM_LAUNCH, "--sglang-prefill-launch=--sim-fault pd-slow-transfer:1000", f"max_transfer_share=0.3, {LOAD}",
        ["sglang pd gate failed: max_transfer_share=0.3: measured 0.* (transfer_share_of_ttft)",
         "  max_transfer_share=0.3: transfer_share_of_ttft measured 0.*, required <= 0.3 [[]growth of "
         "sglang:kv_transfer_latency_ms_sum / _count over 41 transfers, over the load's mean TTFT * ms (client "
         "side)[]]: FAILED",
         "  kv transfer: sglang:kv_transfer_latency_ms 2*.* ms mean over 41; sglang:kv_transfer_bootstrap_ms * ms "
         "mean over *; sglang:kv_transfer_speed_gb_s 0.0* GB/s mean over 41; share of the mean TTFT * ms: "
         "transfer *%, bootstrap *%",
         "Fix: the KV transfer is slow for this fabric: check that the transfer uses RDMA *"]),
    "checksum-mismatch": (
        CHECKSUM, "--sglang-decode-launch=--sim-fault pd-kv-checksum-mismatch", f"kv_checksum=True, {LOAD}",
        ["sglang pd gate failed: max_transfer_failures=0: measured 41 requests (transfer_failures); "
         "max_error_rate=0.0: measured 1 (error_rate)",
         "  max_transfer_failures=0: transfer_failures measured 41 requests, required <= 0 requests [[]growth of "
         "sglang:num_transfer_failed_reqs_total during the load: prefill workers 0, decode workers 41 *",
         "  failures: request 0: abort: KV checksum mismatch"]),
    "lost-peer": (
        SIM_LAUNCH, "--sglang-decode-launch=--sim-fault pd-lost-peer", "requests=8, concurrency=4, input_len=64, "
                                                                         "output_len=8",
        ["sglang pd gate failed: max_bootstrap_failures=0: measured 9 requests (bootstrap_failures); "
         "max_error_rate=0.0: measured 1 (error_rate)",
         "  max_bootstrap_failures=0: bootstrap_failures measured 9 requests, required <= 0 requests [[]growth of "
         "sglang:num_bootstrap_failed_reqs_total during the load: prefill workers 0, decode workers 9 *",
         "  failures: request *: abort: Decode handshake failed for request *",
         "Fix: a decode worker could not reach its prefill peer's bootstrap server: *"]),
    # Without the checksum, corrupt KV is not counted anywhere: only the parity with one server shows it.
    "silent-corruption": (
        SIM_LAUNCH, "--sglang-decode-launch=--sim-fault pd-kv-checksum-mismatch", f"parity=True, {LOAD}",
        ["sglang pd gate failed: prompts_with_equal_token_ids * prompts (required >= 8)",
         "  max_transfer_failures=0: transfer_failures measured 0 requests, *: ok",
         "  parity: first divergence: prompt 0 * at token *: reference * vs PD *"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_pd_fault_is_caught_with_its_figure(pytester: pytest.Pytester, case: str) -> None:
    launch, fault, keywords, lines = CASES[case]
    pytester.makepyfile(test_inner=INNER.format(keywords=keywords))
    result = pytester.runpytest_subprocess(*PD, "--sglang-launch", launch, fault, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lines)
