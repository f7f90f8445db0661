"""A REAL SGLang 0.5.23 prefill/decode pair on CPU (mooncake_tcp), directly and behind smg 1.13 in PD mode.

Needs ``scripts/real-sglang/pd-setup.sh`` (the ``mooncake`` module and libibverbs, outside the real
venv) on top of ``setup.sh``. The launch that works on CPU is in ``PREFILL``/``DECODE`` below (why:
docs/limitations.md). Every check here is one the simulator's PD model (tests/simulator/test_pd_*.py)
makes too, so the two stay aligned: the hand-off answers like one server, the same error texts and
shapes, the same metric families. Both servers are stopped when the module is done (CPU is scarce).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from realsgl import CACHE, RawServer, RealSetup, free_port

pytestmark = pytest.mark.real_sglang
PD_HOME = Path(os.environ.get("REAL_SGLANG_PD_HOME", CACHE / "pd-extras"))
PD_HINT = "run `bash scripts/real-sglang/pd-setup.sh` (or set REAL_SGLANG_PD_HOME)"
BACKEND = ("--disaggregation-transfer-backend", "mooncake_tcp")
#: The short timeouts the failure checks wait for (300 s each by default).
TIMEOUT_S = 8
ASK = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4, "temperature": 0},
       "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 2}


@dataclass
class RealPair:
    prefill: RawServer
    decode: RawServer
    bootstrap_port: int

    def body(self, room: int | None = None, **extra: object) -> dict[str, object]:
        room = random.getrandbits(63) if room is None else room
        return {**ASK, **extra, "bootstrap_host": "127.0.0.1", "bootstrap_port": self.bootstrap_port,
                "bootstrap_room": room}


@pytest.fixture(scope="module")
def real_pair(real_setup: RealSetup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealPair]:
    if not (PD_HOME / "site" / "mooncake").is_dir() or not (PD_HOME / "lib" / "libibverbs.so.1").exists():
        pytest.fail(f"real PD extras not found in {PD_HOME}; {PD_HINT}", pytrace=False)
    logs = tmp_path_factory.mktemp("real-pd")
    port = free_port()
    env = {"PYTHONPATH": str(PD_HOME / "site"), "LD_LIBRARY_PATH": str(PD_HOME / "lib"),
           # CPU: the KV send otherwise pins its page indices through CUDA (prefill.py _send_kv_chunk)
           "SGLANG_DISAGGREGATION_ALL_CP_RANKS_TRANSFER": "1",
           "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": str(TIMEOUT_S),
           "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": str(TIMEOUT_S)}
    prefill = RawServer(real_setup, logs / "prefill.log", extra_args=(
        "--disaggregation-mode", "prefill", *BACKEND, "--disaggregation-bootstrap-port", str(port)))
    # CPU: the default host_pool retraction backup registers host memory through CUDA
    decode = RawServer(real_setup, logs / "decode.log", extra_args=(
        "--disaggregation-mode", "decode", *BACKEND, "--disaggregation-decode-retraction-backup", "cpu_tensor"))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # RawServer.start passes os.environ to the server
    try:
        prefill.start()
        decode.start()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        prefill.wait_healthy(300)
        decode.wait_healthy(300)
        yield RealPair(prefill, decode, port)
    finally:
        prefill.stop()
        decode.stop()


def _send(pair: RealPair, path: str, body: dict[str, object]) -> tuple[httpx.Response, httpx.Response]:
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(httpx.post, f"{s.url}{path}", json=body, timeout=120)
                   for s in (pair.prefill, pair.decode)]
        prefill, decode = (f.result() for f in futures)
    return prefill, decode


def _metric(url: str, name: str) -> float | None:
    found = [float(line.rsplit(" ", 1)[1]) for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines()
             if line.startswith(name + "{")]
    return sum(found) if found else None


def test_the_pair_hands_over_the_kv(real_pair: RealPair) -> None:
    prefill, decode = _send(real_pair, "/generate", real_pair.body())
    assert (prefill.status_code, decode.status_code) == (200, 200)
    p, d = prefill.json(), decode.json()
    # the prefill worker answers its first token only; the decode worker continues from it
    assert p["meta_info"]["finish_reason"] == {"type": "length", "length": 0}
    assert p["meta_info"]["completion_tokens"] == 1 and len(p["output_ids"]) == 1
    assert d["output_ids"][0] == p["output_ids"][0] and len(d["output_ids"]) == 4
    assert d["meta_info"]["input_token_logprobs"] == [] and d["meta_info"]["input_top_logprobs"] == []
    assert len(p["meta_info"]["input_token_logprobs"]) == d["meta_info"]["prompt_tokens"]
    for role, server in (("prefill", real_pair.prefill), ("decode", real_pair.decode)):
        info = httpx.get(f"{server.url}/server_info", timeout=30).json()
        assert (info["disaggregation_mode"], info["disaggregation_transfer_backend"]) == (role, "mooncake")
    assert (_metric(real_pair.prefill.url, "sglang:kv_transfer_latency_ms_count") or 0) >= 1
    assert (_metric(real_pair.decode.url, "sglang:kv_transfer_bootstrap_ms_count") or 0) >= 1


def test_behind_smg_the_pair_answers_like_the_simulated_pair_would(real_pair: RealPair, tmp_path: Path) -> None:
    smg = str(Path(sys.executable).parent / "smg")
    port = free_port()
    argv = [smg, "launch", "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(free_port()), "--pd-disaggregation", "--prefill", real_pair.prefill.url,
            str(real_pair.bootstrap_port), "--decode", real_pair.decode.url]
    with (tmp_path / "gateway.log").open("wb") as log:
        gateway = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readiness", timeout=2).json().get("healthy_workers") == 2:
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        through = httpx.post(f"{url}/generate", json=ASK, timeout=120).json()
        direct = _send(real_pair, "/generate", real_pair.body())[1].json()
    finally:
        os.killpg(gateway.pid, 15)
        gateway.wait(20)
    assert through["output_ids"] == direct["output_ids"]
    # the gateway puts the prefill worker's input logprobs into the decode worker's answer
    assert len(through["meta_info"]["input_token_logprobs"]) == through["meta_info"]["prompt_tokens"]


def test_a_request_without_a_room_is_refused(real_pair: RealPair) -> None:
    for server in (real_pair.prefill, real_pair.decode):
        r = httpx.post(f"{server.url}/generate", json={"text": "hi", "rid": "r1"}, timeout=60)
        assert (r.status_code, r.json()) == (400, {"error": {"message": (
            "Invalid request: Disaggregated request received without bootstrap room id. req.rid='r1'")}})


def test_unpaired_rooms_time_out_on_both_sides(real_pair: RealPair) -> None:
    decode = httpx.post(f"{real_pair.decode.url}/generate", json=real_pair.body(room=777), timeout=120)
    assert decode.status_code == 500 and re.search(
        r"^Decode transfer failed for request rank=0 decode_req\.req\.rid='\w+' decode_req\.req\.bootstrap_room=777 "
        r"with exception KVTransferError\(bootstrap_room=777\): Request 777 timed out after \d+\.\ds in "
        r"KVPoll\.WaitingForInput$", decode.json()["message"])
    prefill = httpx.post(f"{real_pair.prefill.url}/generate", json=real_pair.body(room=778), timeout=120)
    assert prefill.status_code == 500 and re.search(
        r"^Prefill bootstrap failed for request rank=0 req\.rid='\w+' req\.bootstrap_room=778 with exception "
        r"KVTransferError\(bootstrap_room=778\): Request 778 timed out after \d+\.\ds in KVPoll\.Bootstrapping$",
        prefill.json()["message"])
    assert (_metric(real_pair.decode.url, "sglang:num_transfer_failed_reqs_total") or 0) >= 1
    assert (_metric(real_pair.prefill.url, "sglang:num_bootstrap_failed_reqs_total") or 0) >= 1


def test_an_unreachable_bootstrap_server_fails_the_handshake(real_pair: RealPair) -> None:
    body = {**real_pair.body(room=779), "bootstrap_port": free_port()}
    t0 = time.monotonic()
    r = httpx.post(f"{real_pair.decode.url}/generate", json=body, timeout=120)
    assert time.monotonic() - t0 >= 10  # 15 attempts, a second apart
    assert (r.status_code, r.json()["type"]) == (500, "500")
    assert r.json()["message"].endswith(
        "decode_req.req.bootstrap_room=779 with exception KVTransferError(bootstrap_room=779): Aborted by AbortReq.")
    assert (_metric(real_pair.decode.url, "sglang:num_bootstrap_failed_reqs_total") or 0) >= 1
