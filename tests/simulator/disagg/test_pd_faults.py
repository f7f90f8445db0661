"""The prefill-decode faults (``--sim-fault pd-*`` and SGLang's own test env vars): each one visible as
errors or latency and in the metrics SGLang 0.5.23 counts it in.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import SimFactory
from tests.simulator.simpd import MODEL, SEED, generate, metric, pair, pd_gateway, smg_command

PROMPT = "The capital city of France is"
GREEDY = {"max_new_tokens": 8, "temperature": 0}
ASK: dict[str, object] = {"text": PROMPT, "sampling_params": GREEDY}


def test_a_failed_transfer_on_the_prefill_side_fails_both_workers(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill=("--sim-fault", "pd-transfer-failure:1"))
    prefill, decode = p.send("/generate", ASK)
    assert (prefill.status_code, decode.status_code) == (500, 500)
    reason = "Failed to send kv chunk of "
    assert prefill.json()["message"].startswith("Prefill transfer failed for request rank=0 req.rid=")
    assert reason in prefill.json()["message"] and reason in decode.json()["message"]
    assert decode.json()["message"].startswith("Decode transfer failed for request rank=0 decode_req.req.rid=")
    assert metric(p.prefill.url, "sglang:num_transfer_failed_reqs_total", engine_type="prefill") == 1
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total", engine_type="decode") == 1
    assert metric(p.prefill.url, "sglang:kv_transfer_latency_ms_count") is None  # nothing arrived


def test_sglangs_failure_injection_env_var_on_the_decode_side(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, decode_env={"SGLANG_TEST_DISAGG_FAILURE_PROB": "1"})
    prefill, decode = p.send("/v1/chat/completions",
                             {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert prefill.status_code == 200  # the prefill side sent its KV
    assert decode.status_code == 500
    assert decode.json()["message"].endswith("Failed due to an unknown reason from another rank")
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total") == 1
    assert metric(p.prefill.url, "sglang:num_transfer_failed_reqs_total") is None


def test_a_transfer_failure_reaches_the_gateways_client(sim_factory: SimFactory, tmp_path: Path) -> None:
    p = pair(sim_factory, prefill=("--sim-fault", "pd-transfer-failure:1"))
    with pd_gateway(smg_command(), [(p.prefill.url, p.bootstrap_port)], [p.decode.url], tmp_path / "gw.log") as url:
        r = httpx.post(f"{url}/generate", json=ASK, timeout=60)
    assert r.status_code == 500 and "Failed to send kv chunk of" in r.text
    assert (metric(p.prefill.url, "sglang:num_transfer_failed_reqs_total") or 0) >= 1


def test_streamed_transfer_failures_end_the_stream_with_sglangs_abort(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, decode_env={"SGLANG_TEST_DISAGG_FAILURE_PROB": "1"})
    _, native = p.send("/generate", {**ASK, "stream": True})
    assert native.status_code == 200
    assert '"finish_reason":{"type":"abort","message":"Decode transfer failed' in native.text
    assert '"status_code":500,"err_type":null' in native.text and native.text.endswith("data: [DONE]\n\n")
    _, chat = p.send("/v1/chat/completions", {"model": MODEL, "stream": True, "max_tokens": 3,
                                              "messages": [{"role": "user", "content": "hi"}]})
    assert chat.text.startswith('data: {"error": {"object": "error", "message": "Decode transfer failed')
    assert '"type": "INTERNAL_SERVER_ERROR", "param": null, "code": 500}}' in chat.text
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total") == 2


def _transfer_ms(url: str) -> float:
    total = metric(url, "sglang:kv_transfer_latency_ms_sum") or 0.0
    count = metric(url, "sglang:kv_transfer_latency_ms_count") or 1.0
    return total / count


def test_a_slow_transfer_path_shows_in_latency_and_transfer_metrics(sim_factory: SimFactory) -> None:
    fast = pair(sim_factory)
    slow = pair(sim_factory, prefill=("--sim-fault", "pd-slow-transfer:8000"))
    timings = {}
    for name, p in (("fast", fast), ("slow", slow)):
        t0 = time.monotonic()
        prefill, decode = p.send("/generate", ASK)
        timings[name] = time.monotonic() - t0
        assert (prefill.status_code, decode.status_code) == (200, 200)
    # 0.5 ms per transfer x 8000 = 4 s simulated, x time scale 0.05 = 0.2 s
    assert _transfer_ms(slow.prefill.url) >= 190 > 50 > _transfer_ms(fast.prefill.url)
    assert timings["slow"] >= timings["fast"] + 0.15
    assert (metric(slow.prefill.url, "sglang:kv_transfer_speed_gb_s_sum") or 1) < (
        metric(fast.prefill.url, "sglang:kv_transfer_speed_gb_s_sum") or 0)


CHECKSUM = ("--disaggregation-enable-kv-checksum",)


def test_a_kv_checksum_mismatch_aborts_the_request_when_the_checksum_is_on(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill=CHECKSUM, decode=(*CHECKSUM, "--sim-fault", "pd-kv-checksum-mismatch"))
    prefill, decode = p.send("/generate", ASK)
    assert prefill.status_code == 200
    assert (decode.status_code, decode.json()) == (
        500, {"object": "error", "message": "KV checksum mismatch", "type": "500", "param": None, "code": 500})
    assert "KV checksum mismatch req=" in p.decode.log_text() and " expected=0x" in p.decode.log_text()
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total") == 1


def test_without_the_checksum_corrupted_kv_is_silently_wrong(sim_factory: SimFactory) -> None:
    single = sim_factory(*SEED)
    p = pair(sim_factory, decode=("--sim-fault", "pd-kv-checksum-mismatch:1"))
    _, decode = p.send("/generate", ASK)
    assert decode.status_code == 200
    assert decode.json()["output_ids"] != generate(single.url, PROMPT, sampling_params=GREEDY)[
        "output_ids"]
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total") is None


def test_sglangs_checksum_mismatch_env_var_needs_the_checksum(sim_factory: SimFactory) -> None:
    env = {"SGLANG_TEST_DISAGG_KV_CHECKSUM_MISMATCH_PROB": "1"}
    on = pair(sim_factory, prefill=CHECKSUM, decode=CHECKSUM, decode_env=env)
    assert on.send("/generate", ASK)[1].json()["message"] == "KV checksum mismatch"
    off = pair(sim_factory, decode_env=env)  # it flips the computed digest only: nothing to compare
    assert off.send("/generate", ASK)[1].status_code == 200


def test_a_decode_worker_whose_prefill_peer_is_gone(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, decode=("--sim-fault", "pd-lost-peer"))
    t0 = time.monotonic()
    r = httpx.post(f"{p.decode.url}/generate", json=p.body(ASK, room=5), timeout=30)
    assert time.monotonic() - t0 >= 0.65  # 14 waits of 1 s x 0.05
    assert r.status_code == 500
    assert r.json()["message"].startswith("Decode handshake failed for request rank=0 decode_req.req.rid=")
    assert r.json()["message"].endswith(
        "decode_req.req.bootstrap_room=5 with exception KVTransferError(bootstrap_room=5): Aborted by AbortReq.")
    assert metric(p.decode.url, "sglang:num_bootstrap_failed_reqs_total", engine_type="decode") == 1
    assert "after 15 attempts" in p.decode.log_text()


def test_a_prefill_worker_that_never_answers_the_bootstrap(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill=("--sim-fault", "pd-lost-peer"))
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{p.bootstrap_port}/health")
    r = httpx.post(f"{p.decode.url}/generate", json=p.body(ASK), timeout=30)
    assert r.status_code == 500 and "Decode handshake failed" in r.json()["message"]
    assert metric(p.decode.url, "sglang:num_bootstrap_failed_reqs_total") == 1


def test_a_fake_decode_worker_decodes_garbage_or_waits_forever(sim_factory: SimFactory) -> None:
    single = sim_factory(*SEED)
    fake = sim_factory(*SEED, "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "fake")
    # no bootstrap fields: a synthetic room, no KV moved, the tokens come from an empty cache
    alone = generate(fake.url, PROMPT, sampling_params=GREEDY)
    assert alone["output_ids"] != generate(single.url, PROMPT, sampling_params=GREEDY)[
        "output_ids"]
    # a real bootstrap address: the metadata never lands and 0.5.23 keeps the request forever
    body = {**ASK, "bootstrap_host": "127.0.0.1", "bootstrap_port": 1, "bootstrap_room": 3}
    with ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(httpx.post, f"{fake.url}/generate", json=body, timeout=1.5)
        time.sleep(0.5)
        assert metric(fake.url, "sglang:num_decode_transfer_queue_reqs") == 1
        with pytest.raises(httpx.ReadTimeout):
            stuck.result()


def test_a_page_size_mismatch_kills_the_decode_worker(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill=("--page-size", "16"))
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"{p.decode.url}/generate", json=p.body(ASK), timeout=10)
    assert p.decode.proc is not None and p.decode.proc.wait(10) != 0
    assert ("RuntimeError: Page size mismatch: prefill server has page_size=16, but decode server has "
            "page_size=1. Both servers must use the same --page-size value.") in p.decode.log_text()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pd-transfer-failure:2", "pd-transfer-failure must be between 0 and 1"),
        ("pd-transfer-failure", "pd-transfer-failure needs a number, e.g. pd-transfer-failure:0.1"),
        ("pd-slow-transfer:0.5", "pd-slow-transfer must be >= 1"),
        ("pd-slow-transfer:inf", "pd-slow-transfer needs a finite number"),
        ("pd-kv-checksum-mismatch:x", "pd-kv-checksum-mismatch needs a number"),
        ("pd-lost-peer:1", "pd-lost-peer takes no argument"),
        ("pd-bogus", "unknown fault kind 'pd-bogus'"),
    ],
)
def test_bad_pd_fault_arguments_are_refused(sim_factory: SimFactory, spec: str, message: str) -> None:
    sim = sim_factory("--sim-fault", spec, wait="none")
    assert sim.proc is not None and sim.proc.wait(20) == 2
    assert message in sim.log_text()
