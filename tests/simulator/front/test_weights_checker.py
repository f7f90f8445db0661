"""``/weights_checker`` as SGLang 0.5.23 answers it: one checksum per model path, per layout, per fault."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from pytest_sglang.server.start import attach
from pytest_sglang.server.weights import WEIGHTS_TIMEOUT_S, WeightsChecksum, parse_weights, read_weights
from tests.conftest import SimFactory


def _checksum(url: str) -> dict[str, object]:
    response = httpx.get(f"{url}/weights_checker", timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_the_answer_has_0_5_23_shape_and_the_engine_checksum_hashes_the_ranks(sim_factory: SimFactory) -> None:
    body = _checksum(sim_factory("--tp-size", "2").url)
    assert body["success"] is True and isinstance(body["message"], str)
    ranks = body["ranks"]
    assert isinstance(ranks, list) and len(ranks) == 2
    assert set(ranks[0]) == {"checksums", "per_gpu_checksum", "parallelism_info"}
    assert ranks[1]["parallelism_info"][0]["tp_rank"] == 1
    engine = hashlib.sha256(b"".join(r["per_gpu_checksum"].encode() for r in ranks)).hexdigest()
    assert body["per_engine_checksum"] == engine
    parsed = parse_weights(body)
    assert isinstance(parsed, WeightsChecksum) and parsed.layout == "tp2 pp1 dp1 (target)"


def test_same_path_agrees_another_path_or_corrupt_weights_differ(sim_factory: SimFactory) -> None:
    same = [_checksum(sim_factory("--model-path", "sim/a").url)["per_engine_checksum"] for _ in range(2)]
    other = _checksum(sim_factory("--model-path", "sim/b").url)["per_engine_checksum"]
    corrupt = _checksum(sim_factory("--model-path", "sim/a", "--sim-fault", "corrupt-weights").url)
    assert same[0] == same[1]
    assert other != same[0] and corrupt["per_engine_checksum"] != same[0]


def test_post_with_an_unsupported_action_is_400_with_success_false(sim_factory: SimFactory) -> None:
    url = sim_factory().url
    response = httpx.post(f"{url}/weights_checker", json={"action": "explode"}, timeout=10)
    assert response.status_code == 400
    assert response.json()["success"] is False and "Unsupported" in response.json()["message"]
    post = httpx.post(f"{url}/weights_checker", json={"action": "checksum"}, timeout=10)
    assert post.status_code == 200 and post.json()["per_engine_checksum"]


def test_parse_weights_says_why_there_is_no_checksum() -> None:
    assert "success=False" in str(parse_weights({"success": False, "message": "boom"}))
    assert "no per_engine_checksum" in str(parse_weights({"success": True, "message": ""}))
    assert "not answer a JSON object" in str(parse_weights([1]))


@pytest.mark.parametrize(("mode", "why"), [
    ("garbage", "GET /weights_checker answered 200, not JSON"),
    ("huge", "GET /weights_checker answered more than 32 MiB (reading stopped there)"),
    ("unauthorized", "GET /weights_checker answered 401 (an admin route: give the admin API key to read it)"),
    ("hang", "GET /weights_checker did not answer within 1 s (the limit per request)"),
    ("wrong-types", "/weights_checker answered success='yes': "),
    ("failure", "/weights_checker answered success=False: Unsupported action='checksum' on this backend"),
])
def test_a_route_that_gives_no_checksum_is_said_in_words_within_the_limit(sim_factory: SimFactory, mode: str,
                                                                         why: str) -> None:
    server = attach(sim_factory("--sim-fault", f"weights-checker:{mode}").url)
    found = read_weights(server, timeout_s=1.0 if mode == "hang" else WEIGHTS_TIMEOUT_S)
    assert isinstance(found, str) and found.startswith(why), found


def test_wrong_types_never_raise_and_the_hang_limit_is_short() -> None:
    odd = {"success": True, "per_engine_checksum": "ab" * 32, "ranks": [{"checksums": 5, "parallelism_info": "x"}, 7]}
    parsed = parse_weights(odd)
    assert isinstance(parsed, WeightsChecksum) and parsed.tensors == 0 and parsed.layout == "unknown layout"
    assert WEIGHTS_TIMEOUT_S <= 30, "a hung /weights_checker holds the gate this long"
