"""``/weights_checker`` as SGLang 0.5.23 answers it: one checksum per model path, per layout, per fault."""

from __future__ import annotations

import hashlib

import httpx

from pytest_sglang.server.weights import WeightsChecksum, parse_weights
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
