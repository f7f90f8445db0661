"""Image loads against real SGLang 0.5.23 on CPU serving the tiny Qwen2-VL (dummy weights; issue 32 item 4).

scripts/real-sglang/setup.sh writes the model (make_tiny_vlm.py: Qwen2-VL's processor and pixel
bounds) and installs what bench_serving imports. The checks: the load generator's image requests, chat
and native, complete; the server's image-token count is the Qwen2-VL processor's arithmetic as
``pytest_sglang.sglang.vision`` computes it (the simulator's); bench_serving still sends the body
shapes recorded in fixtures/bench_serving (recorded again here, compared); the acceptance suite's image
checks, the plugin launching the model, give what 0.5.23 answers (docs/multimodal.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from realsgl import CACHE, RawServer, RealSetup, junit_outcomes, launch_options

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


#: The colour checks on dummy weights: served, but the model fails the text-only control.
CANNOT_JUDGE = "cannot judge the answer with this model: asked in text alone"
UNJUDGED = ("test_chat_images[one-image]", "test_chat_images[three-images]", "test_native_image_data",
            "test_image_stream_agrees")


def test_image_acceptance_checks_against_real_sglang(vlm_setup: RealSetup, pytester: pytest.Pytester) -> None:
    pytester.runpytest_subprocess("--pyargs", "pytest_sglang.acceptance", "-k", "test_images",
                                  *launch_options(vlm_setup, pytester.path / "logs"),
                                  "--junitxml=images.xml", "-p", "no:cacheprovider", "-rA")
    outcomes = {name.removeprefix("test_images.py::"): found
                for name, found in junit_outcomes(pytester.path / "images.xml").items()}
    print("\n".join(f"{outcome:8} {name}  {message[:300]}" for name, (outcome, message) in sorted(outcomes.items())))
    # usage.prompt_tokens is Qwen2-VL's arithmetic at every resolution
    assert outcomes["test_image_tokens"][0] == "passed", outcomes["test_image_tokens"]
    # 0.5.23 refuses a corrupt and an SVG image with a 400, but a decompression bomb is a 500 on both routes
    outcome, message = outcomes["test_bad_images_4xx"]
    assert outcome == "failure", outcomes["test_bad_images_4xx"]
    assert "oversize image (400 MP) on chat: expected a 4xx answer, got HTTP 500" in message
    assert ("oversize image (400 MP) on /generate: expected a 4xx answer, got HTTP 500 'Internal Server Error'"
            in message)
    assert "corrupt PNG on" not in message.split("measured:")[0] and "SVG) on chat: exp" not in message
    # dummy weights name no colour, even one they are told: each colour check says it cannot judge, visibly
    for name in UNJUDGED:
        outcome, message = outcomes[name]
        assert outcome == "skipped" and CANNOT_JUDGE in message, (name, outcomes[name])
    # the encoder's share is measured (a CPU encoder may well take over half of a first token), on a connection
    # the bomb's /generate 500 did not leave broken (the bad-images check asks again after a 5xx)
    outcome, message = outcomes["test_vision_encoder_share"]
    assert outcome == "passed" or "the vision encoder takes" in message, outcomes["test_vision_encoder_share"]
