"""A prefill and a decode simulator as SGLang 0.5.23 pairs them (``--disaggregation-mode``), behind the
real gateways in PD mode: the same answers as one server, the PD fields of ``/server_info``, the
refusals, and the timeouts of an unpaired or misrouted fleet.
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import SimFactory
from tests.simulator.simpd import MODEL, SEED, generate, metric, pair, pd_gateway, router_command, smg_command

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "What is 17 + 25?"}], "max_tokens": 40,
        "temperature": 0, "logprobs": True, "top_logprobs": 2}
COMPLETION = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stream": True}


def _flat(value: object) -> list[object]:
    """Every leaf of a nested logprob structure, in order (None kept, strings kept)."""
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in [key, *_flat(value[key])]]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _stream_text(url: str, body: dict[str, object]) -> str:
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: {")]
    return "".join(json.loads(ln[6:])["choices"][0]["text"] for ln in lines)


@pytest.mark.parametrize("gateway", ["smg", "sglang-router"])
def test_a_pd_pair_behind_the_gateway_answers_like_one_server(
    sim_factory: SimFactory, tmp_path: Path, gateway: str
) -> None:
    command = smg_command() if gateway == "smg" else router_command()
    single = sim_factory(*SEED)
    p = pair(sim_factory)
    with pd_gateway(command, [(p.prefill.url, p.bootstrap_port)], [p.decode.url], tmp_path / "gw.log") as url:
        through = generate(url)
        alone = generate(single.url)
        meta, ref = through["meta_info"], alone["meta_info"]
        assert through["output_ids"] == alone["output_ids"] and through["text"] == alone["text"]
        # equal up to the gateway's float re-serialisation (smg's parser may move the last digit)
        assert _flat(meta["output_token_logprobs"]) == pytest.approx(_flat(ref["output_token_logprobs"]))
        assert _flat(meta["output_top_logprobs"]) == pytest.approx(_flat(ref["output_top_logprobs"]))
        # the decode worker returns no input logprobs; the gateway puts the prefill worker's in
        assert _flat(meta["input_token_logprobs"]) == pytest.approx(_flat(ref["input_token_logprobs"]))
        chat = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30).json()
        chat_ref = httpx.post(f"{single.url}/v1/chat/completions", json=CHAT, timeout=30).json()
        assert chat["choices"][0]["message"]["content"] == chat_ref["choices"][0]["message"]["content"]
        assert chat["choices"][0]["message"]["content"].endswith("#### 42")
        assert _flat(chat["choices"][0]["logprobs"]) == pytest.approx(_flat(chat_ref["choices"][0]["logprobs"]))
        assert chat["usage"]["completion_tokens"] == chat_ref["usage"]["completion_tokens"]
        assert _stream_text(url, COMPLETION) == _stream_text(single.url, COMPLETION)
    # three hand-offs, measured where SGLang measures them, and nothing failed
    assert metric(p.prefill.url, "sglang:kv_transfer_latency_ms_count", engine_type="prefill") == 3
    assert metric(p.prefill.url, "sglang:kv_transfer_total_mb_count") == 3
    assert metric(p.decode.url, "sglang:kv_transfer_bootstrap_ms_count", engine_type="decode") == 3
    for worker in (p.prefill, p.decode):
        assert metric(worker.url, "sglang:num_transfer_failed_reqs_total") is None
        assert metric(worker.url, "sglang:num_bootstrap_failed_reqs_total") is None
    # the prefill computed one token per request, the decode worker the rest
    assert metric(p.prefill.url, "sglang:generation_tokens_total") == 3
    assert metric(p.decode.url, "sglang:generation_tokens_total", engine_type="decode") == pytest.approx(
        8 + chat["usage"]["completion_tokens"] + 12)


def test_server_info_reports_the_pd_resolution(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill=("--disaggregation-transfer-backend", "mooncake_tcp",
                                   "--disaggregation-enable-kv-checksum"))
    info = httpx.get(f"{p.prefill.url}/server_info").json()
    assert info["disaggregation_mode"] == "prefill"
    assert info["disaggregation_bootstrap_port"] == p.bootstrap_port
    assert info["disaggregation_transfer_backend"] == "mooncake"  # mooncake_tcp resolves to mooncake + MC_FORCE_TCP
    assert info["disaggregation_enable_kv_checksum"] is True
    assert info["load_balance_method"] == "follow_bootstrap_room"
    assert "mooncake_tcp" in info["launch_command"]
    state = info["internal_states"][0]
    assert (state["disaggregation_mode"], state["disaggregation_decode_retraction_backup"]) == ("prefill", "cpu_tensor")
    decode = httpx.get(f"{p.decode.url}/server_info").json()
    assert (decode["disaggregation_mode"], decode["disable_radix_cache"], decode["disaggregation_bootstrap_port"]) == (
        "decode", True, 8998)
    assert decode["load_balance_method"] == "round_robin"
    assert decode["internal_states"][0]["disaggregation_decode_retraction_backup"] == "host_pool"
    assert httpx.get(f"{p.decode.url}/model_info").json()["disaggregation_mode"] == "decode"
    assert "Radix cache is disabled for decode server" in p.decode.log_text()
    assert "accepts but does not simulate" not in p.prefill.log_text()
    log = p.prefill.log_text()
    assert "disaggregation transfer backend 'mooncake_tcp' -> mooncake with MC_FORCE_TCP=1" in log
    assert f"CommonKVBootstrapServer started successfully on 127.0.0.1:{p.bootstrap_port}" in log
    assert httpx.get(f"http://127.0.0.1:{p.bootstrap_port}/health").text == "OK"
    text = httpx.get(f"{p.decode.url}/metrics").text
    assert 'engine_type="unified"' not in text and 'sglang:num_decode_transfer_queue_reqs{engine_type="decode"' in text


def test_a_prefill_server_refuses_the_fake_backend(sim_factory: SimFactory) -> None:
    sim = sim_factory("--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "fake", wait="none")
    assert sim.proc is not None and sim.proc.wait(20) == 1
    log = sim.log_text()
    assert log.rstrip().endswith("AssertionError: Prefill server does not support 'fake' as the transfer backend")
    assert "in handle_pd_disaggregation" in log and "server_args=" not in log


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_request_without_a_bootstrap_room_is_refused(sim_factory: SimFactory, role: str) -> None:
    p = pair(sim_factory)
    url = p.prefill.url if role == "prefill" else p.decode.url
    expected = "Invalid request: Disaggregated request received without bootstrap room id. req.rid="
    native = httpx.post(f"{url}/generate", json={"text": "hi", "rid": "r1"})
    assert (native.status_code, native.json()) == (400, {"error": {"message": expected + "'r1'"}})
    messages = [{"role": "user", "content": "x"}]
    chat = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL, "messages": messages})
    assert chat.status_code == 400
    assert chat.json()["type"] == "BadRequestError" and chat.json()["message"].startswith(expected)
    streamed = httpx.post(f"{url}/generate", json={"text": "hi", "stream": True}).text
    assert '"finish_reason":{"type":"abort","message":"Invalid request: ' in streamed
    assert '"status_code":400,"err_type":null' in streamed and streamed.endswith("data: [DONE]\n\n")
    sse = httpx.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": "x", "stream": True}).text
    assert sse.startswith('data: {"error": {"object": "error", "message": "Invalid request: ')
    assert '"type": "BAD_REQUEST", "param": null, "code": 400}}' in sse


def test_an_unpaired_decode_worker_fails_after_the_waiting_timeout(sim_factory: SimFactory) -> None:
    # 20 s x time scale 0.05 = 1 s; the prefill worker never saw room 4242
    p = pair(sim_factory, decode_env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "20"})
    t0 = time.monotonic()
    r = httpx.post(f"{p.decode.url}/generate", json=p.body({"text": "hi"}, room=4242), timeout=30)
    assert time.monotonic() - t0 >= 1.0
    body = r.json()
    assert (r.status_code, body["type"], body["code"]) == (500, "500", 500)
    assert body["message"].startswith("Decode transfer failed for request rank=0 decode_req.req.rid=")
    assert re.search(r"decode_req\.req\.bootstrap_room=4242 with exception KVTransferError\(bootstrap_room=4242\): "
                     r"Request 4242 timed out after 2\d\.\ds in KVPoll\.WaitingForInput$", body["message"])
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total", engine_type="decode") == 1


def test_a_prefill_worker_whose_decode_peer_never_comes_times_out(sim_factory: SimFactory) -> None:
    p = pair(sim_factory, prefill_env={"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "20"})
    t0 = time.monotonic()
    r = httpx.post(f"{p.prefill.url}/v1/chat/completions", json=p.body(CHAT, room=7), timeout=30)
    assert time.monotonic() - t0 >= 1.0
    assert (r.status_code, r.json()["type"]) == (500, "500")
    assert re.search(r"req\.bootstrap_room=7 with exception KVTransferError\(bootstrap_room=7\): Request 7 timed out "
                     r"after 2\d\.\ds in KVPoll\.Bootstrapping$", r.json()["message"])
    assert r.json()["message"].startswith("Prefill bootstrap failed for request rank=0 req.rid=")
    assert metric(p.prefill.url, "sglang:num_bootstrap_failed_reqs_total", engine_type="prefill") == 1


def test_a_misrouted_fleet_shows_errors_and_latency_not_success(sim_factory: SimFactory, tmp_path: Path) -> None:
    """The gateway sends decode workers to a bootstrap port nobody listens on."""
    p = pair(sim_factory)
    wrong = p.bootstrap_port + 1 if p.bootstrap_port < 65000 else p.bootstrap_port - 1
    with pd_gateway(smg_command(), [(p.prefill.url, wrong)], [p.decode.url], tmp_path / "gw.log") as url:
        t0 = time.monotonic()
        r = httpx.post(f"{url}/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 4}}, timeout=60)
        elapsed = time.monotonic() - t0
    assert r.status_code >= 500
    assert elapsed >= 0.7  # 15 attempts a (scaled) second apart before the handshake fails
    assert "Decode handshake failed" in p.decode.log_text()
    assert f"Could not fetch prefill parallel info from 127.0.0.1:{wrong} after 15 attempts" in p.decode.log_text()
    assert (metric(p.decode.url, "sglang:num_bootstrap_failed_reqs_total") or 0) >= 1


def test_a_decode_worker_that_loses_its_prefill_fails_its_transfers(sim_factory: SimFactory) -> None:
    p = pair(sim_factory)
    with httpx.Client(timeout=30) as client:
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(client.post, f"{p.decode.url}/generate", json=p.body({"text": "hi"}, room=99))
            time.sleep(0.5)  # registered with the prefill, waiting for its KV
            assert metric(p.decode.url, "sglang:num_decode_transfer_queue_reqs") == 1
            p.prefill.stop()
            r = waiting.result()
    assert r.status_code == 500
    assert r.json()["message"].endswith(
        f"Lost connection with prefill instance (bootstrap_addr: 127.0.0.1:{p.bootstrap_port})")
    assert metric(p.decode.url, "sglang:num_transfer_failed_reqs_total") == 1
    assert metric(p.decode.url, "sglang:num_decode_transfer_queue_reqs") == 0


PLUGIN_TEST = """
import httpx
from pytest_sglang.sglang import metrics_text


def test_pd_fleet(sglang_server, sglang_fleet):
    r = httpx.post(f"{sglang_server.url}/generate",
                   json={"text": "hello", "sampling_params": {"max_new_tokens": 6, "temperature": 0}}, timeout=30)
    assert r.status_code == 200 and len(r.json()["output_ids"]) == 6
    roles = {w.role: w for w in sglang_fleet.workers}
    assert roles["prefill"].info()["disaggregation_mode"] == "prefill"
    assert roles["decode"].info()["disaggregation_mode"] == "decode"
    assert metrics_text.value(roles["prefill"].metrics(), "sglang:kv_transfer_latency_ms_count") == 1
    assert metrics_text.value(roles["decode"].metrics(), "sglang:kv_transfer_bootstrap_ms_count") == 1
"""


def test_the_plugin_launches_a_working_pd_fleet(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=PLUGIN_TEST)
    launch = f"--model-path {MODEL} --sim-profile tiny --sim-time-scale 0.05 --enable-metrics --random-seed 7"
    result = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-prefill", "1", "--sglang-decode", "1",
                                           "--sglang-launch", launch, "-p", "no:cacheprovider", "-rfE")
    result.assert_outcomes(passed=1)
