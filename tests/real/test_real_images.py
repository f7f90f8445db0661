"""Image loads against real SGLang 0.5.23 on CPU serving the tiny Qwen2-VL (dummy weights; issue 32 item 4).

scripts/real-sglang/setup.sh writes the model (make_tiny_vlm.py: Qwen2-VL's processor and pixel
bounds) and installs what bench_serving imports. The checks: the load generator's image requests, chat
and native, complete; the server's image-token count is the Qwen2-VL processor's arithmetic as
``pytest_sglang.sglang.vision`` computes it (the simulator's); bench_serving still sends the body
shapes recorded in fixtures/bench_serving (recorded again here, compared).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from realsgl import CACHE, RawServer, RealSetup

from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.sglang.vision import QWEN2_VL

pytestmark = pytest.mark.real_sglang

ROOT = Path(__file__).parents[2]
RECORDED = ROOT / "fixtures" / "bench_serving" / "image-bodies.json"


@pytest.fixture(scope="module")
def vlm_setup(real_setup: RealSetup) -> RealSetup:
    model = Path(os.environ.get("REAL_SGLANG_VLM_MODEL", CACHE / "tiny-qwen2-vl"))
    if not (model / "config.json").exists():
        pytest.fail(f"tiny Qwen2-VL not found at {model}; run `bash scripts/real-sglang/setup.sh` "
                    "(or set REAL_SGLANG_VLM_MODEL)", pytrace=False)
    return RealSetup(python=real_setup.python, model=model)


@pytest.fixture(scope="module")
def vlm_server(vlm_setup: RealSetup, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    server = RawServer(vlm_setup, tmp_path_factory.mktemp("real-vlm") / "server.log")
    server.start()
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("api", ["chat", "native"])
def test_image_load_counts_the_processors_image_tokens(vlm_server: RawServer, api: str) -> None:
    token = f",image_token={QWEN2_VL.placeholder}" if api == "native" else ""
    spec = LoadSpec(requests=6, concurrency=2, input_len=16, output_len=4, api=api,
                    dataset=f"image:count=2,resolution=360p,format=jpeg{token}")
    result = run_load(vlm_server.url, spec)
    assert result.completed == 6, result.failure_examples()
    facts = result.images
    assert facts["images_per_request"] == 2
    # 0.5.23 reports image_tokens; they are Qwen2-VL's smart-resize arithmetic (640x360 -> 644x364, 299)
    assert facts["image_tokens_basis"] == "the server's image_tokens"
    assert facts["image_tokens_per_request"] == 2 * QWEN2_VL.grid(640, 360).tokens == 598
    assert facts["mean_ttft_ms"] > 0


def test_bench_serving_still_sends_the_recorded_shapes(vlm_setup: RealSetup, tmp_path: Path) -> None:
    out = tmp_path / "bodies.json"
    subprocess.run([str(vlm_setup.python), str(ROOT / "scripts" / "real-sglang" / "record_image_bodies.py"),
                    str(vlm_setup.model), str(out)], check=True, timeout=900, capture_output=True)
    now, recorded = json.loads(out.read_text()), json.loads(RECORDED.read_text())
    for backend in ("sglang", "sglang-oai-chat"):
        assert now[backend]["shape"] == recorded[backend]["shape"], backend
        assert now[backend]["images"] == recorded[backend]["images"] == 2
    assert now["sglang-oai-chat"]["content_types"] == recorded["sglang-oai-chat"]["content_types"]
