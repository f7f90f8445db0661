"""Image loads (issue 32 item 2): ``image:KEY=VALUE,...`` and ``mmmu:PATH`` datasets, as bench_serving's.

Options are checked when the LoadSpec is built (each bad value named with its fix), requests carry
bench_serving's body shapes, images come from a pool generated once, and the result reports images and
image tokens per request and the TTFT with images.
"""

from __future__ import annotations

import base64
import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from loadgen.loadgen_fake import FakeServer
from pytest_sglang import images
from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.prompts.bodies import request_body
from pytest_sglang.loadgen.prompts.datasets import PromptSource
from pytest_sglang.loadgen.workloads.imageset import ImagePool, image_pool, image_shape, resolution_bounds

QWEN_TOKEN = "<|vision_start|><|image_pad|><|vision_end|>"
BENCH_SHAPES = Path(__file__).parents[2] / "fixtures" / "bench_serving" / "image-bodies.json"


def spec(dataset: str, **over: Any) -> LoadSpec:
    return LoadSpec(**{"requests": 4, "concurrency": 2, "input_len": 8, "output_len": 4, "api": "chat",
                       "dataset": dataset, **over})


def test_options_mirror_bench_serving_flags() -> None:
    shape = image_shape("image:count=2,resolution=720p,format=jpeg")
    assert (shape.count, shape.format, shape.content, shape.bounds()) == (2, "jpeg", "random", ((1280, 720),) * 2)
    defaults = image_shape("image")  # bench_serving's defaults: one random 1080p JPEG
    assert (defaults.count, defaults.resolution, defaults.format, defaults.content) == (1, "1080p", "jpeg", "random")
    assert resolution_bounds("1080x1920") == ((1920, 1080),) * 2  # HEIGHTxWIDTH, as --image-resolution
    assert resolution_bounds("random:256x512-1024x2048") == ((512, 256), (2048, 1024))


@pytest.mark.parametrize(("dataset", "words"), [
    ("image:count=0", "count='0' is not a whole number from 1 to 64"),
    ("image:count=two", "count='two' is not a whole number"),
    ("image:resolution=abc", "resolution='abc': not a preset (4k, 1080p, 720p, 360p) nor HEIGHTxWIDTH"),
    ("image:resolution=0x10", "resolution='0x10': each side must be from 1 to 8192 pixels"),
    ("image:resolution=random:512x512-256x256", "the minimum exceeds the maximum"),
    ("image:resolution=random:512x512", "a random resolution is random:MINHxMINW-MAXHxMAXW"),
    ("image:format=tiff", "format='tiff' is not an image format bench_serving sends"),
    ("image:content=noise", "content='noise' is not random or blank"),
    ("image:random_count=2", "random_count='2' is not a whole number from 0 to 1"),
    ("image:pool=0", "pool='0' is not a whole number from 1 to 256"),
    ("image:cont=2", "has no option 'cont' (did you mean 'count'?)"),
    ("image:count=1,count=2", "gives option 'count' twice"),
    ("image:count", "option 'count' has no value"),
])
def test_bad_image_options_are_refused_naming_them(dataset: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        spec(dataset)
    text = str(info.value)
    assert text.startswith(f"LoadSpec.dataset={dataset!r}: ") and words in text and "Fix: " in text, text


def test_apis_that_cannot_carry_images_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"LoadSpec.api='completions': cannot carry the images .* "
                                          r"Fix: use api='chat'"):
        spec("image", api="completions")
    # native /generate needs the model's placeholder in the text, or the server ignores the images
    with pytest.raises(ConfigError, match=r"LoadSpec.api='native': .* without it they would be ignored. Fix: add "
                                          r"image_token=PLACEHOLDER"):
        spec("image:resolution=360p", api="native")
    spec(f"image:resolution=360p,image_token={QWEN_TOKEN}", api="native")


def test_mmmu_file_problems_name_the_file_and_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ConfigError, match=r"dataset=.*nope.jsonl"):
        PromptSource(spec(f"mmmu:{missing}"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "What is shown?"}\n')
    with pytest.raises(ConfigError, match=r"line 1 has no question and image_1. Fix: one JSON object per line"):
        PromptSource(spec(f"mmmu:{bad}"))
    gone = tmp_path / "gone.jsonl"
    gone.write_text('{"question": "What is shown?", "image_1": "missing.png"}\n')
    with pytest.raises(ConfigError, match=r"line 1: image_1 .*missing.png cannot be read"):
        PromptSource(spec(f"mmmu:{gone}"))
    with pytest.raises(ConfigError, match=r"LoadSpec.dataset='mmmu': unknown dataset"):
        spec("mmmu")


def test_mmmu_rows_send_bench_serving_prompt_and_their_image(tmp_path: Path) -> None:
    (tmp_path / "red.png").write_bytes(images.solid_image("red", 32, 32))
    rows = tmp_path / "mmmu.jsonl"
    rows.write_text(json.dumps({"question": "Which colour?", "image_1": "red.png"}) + "\n")
    prompt = PromptSource(spec(f"mmmu:{rows}")).get(0)
    assert prompt.prompt == "Question: Which colour?\n\nAnswer: " and prompt.output_len == 4
    assert prompt.images == (images.data_url(images.solid_image("red", 32, 32)),)


#: Keys bench_serving sends with their defaults that the load generator leaves out (the server's defaults
#: are the same values), and the one it adds: usage in the stream, for the server's token counts.
BENCH_ONLY = {"sglang": {"lora_path", "return_logprob", "return_routed_experts", "logprob_start_len"},
              "sglang-oai-chat": set()}
OURS_ONLY = {"sglang": set(), "sglang-oai-chat": {"stream_options"}}


def assert_bench_shape(backend: str, body: dict[str, Any]) -> dict[str, Any]:
    recorded = json.loads(BENCH_SHAPES.read_text())[backend]
    ours, theirs = shape_of(body), recorded["shape"]
    assert set(theirs) - set(ours) == BENCH_ONLY[backend] and set(ours) - set(theirs) == OURS_ONLY[backend]
    assert {k: v for k, v in ours.items() if k in theirs} == {k: v for k, v in theirs.items() if k in ours}
    return recorded  # type: ignore[no-any-return]


def test_chat_body_is_bench_serving_shape() -> None:
    """Keys and content parts as bench_serving's sglang-oai-chat request (recorded: fixtures/bench_serving)."""
    load = spec("image:count=2,resolution=360p,format=png,pool=2")
    body = request_body(load, PromptSource(load).get(0))
    recorded = assert_bench_shape("sglang-oai-chat", body)
    content = body["messages"][0]["content"]
    assert [part["type"] for part in content] == recorded["content_types"] == ["image_url", "image_url", "text"]
    url = content[0]["image_url"]["url"]
    assert url.startswith(recorded["url_prefix"])
    assert base64.b64decode(url.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_native_body_is_bench_serving_shape() -> None:
    load = spec(f"image:count=2,resolution=360p,format=png,content=blank,image_token={QWEN_TOKEN}", api="native")
    body = request_body(load, PromptSource(load).get(0))
    recorded = assert_bench_shape("sglang", body)
    assert len(body["image_data"]) == recorded["images"] == 2
    assert all(u.startswith(recorded["url_prefix"]) for u in body["image_data"])
    # bench_serving's processor chat template puts one placeholder per image before the text (the tiny
    # Qwen2-VL's template recorded): ours puts the same placeholders, without the template's role markers.
    assert recorded["text_head"].count(QWEN_TOKEN) == 2
    assert body["text"].startswith(QWEN_TOKEN * 2) and QWEN_TOKEN * 3 not in body["text"]


def shape_of(value: Any) -> Any:
    """The JSON structure of a body: keys and value types (lists by their first item), no content."""
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape_of(value[0])] if value else []
    return type(value).__name__


def test_random_count_and_resolution_stay_in_bounds() -> None:
    load = spec("image:count=3,random_count=1,resolution=random:16x16-48x64,format=png,pool=6", requests=40)
    source = PromptSource(load)
    counts = {len(source.get(i).images) for i in range(40)}
    assert counts <= {1, 2, 3} and len(counts) > 1
    pool = ImagePool(image_shape(load.dataset), 0)
    for url in pool.urls:
        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
            assert 16 <= im.height <= 48 and 16 <= im.width <= 64


def test_memory_is_bounded_at_ten_thousand_image_requests() -> None:
    """Every request's body built (as the client does, then dropped): memory is the pool's, not per request."""
    load = spec("image:count=2,resolution=360p,format=jpeg,pool=4", requests=10_000)
    tracemalloc.start()
    try:
        source = PromptSource(load)
        pool = image_pool(image_shape(load.dataset), load.seed)  # the pool the source holds (built once)
        pool_bytes = sum(len(url) for url in pool.urls)
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for i in range(load.requests):
            body = request_body(load, source.get(i))
            if i % 1000 == 0:  # encoded as the client sends it (a few: 10,000 encodings take a minute)
                body = json.dumps(body).encode()  # type: ignore[assignment]
            del body
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_body = 2 * (pool_bytes // 4) + 4096
    # Growth over the run stays within a few bodies (one built and encoded at a time), while 10,000
    # distinct requests would hold 20,000 images (about 2 GB at this size).
    assert current - baseline < one_body, (current - baseline, one_body)
    assert peak - baseline < 4 * one_body, (peak - baseline, one_body)


def test_native_image_load_reports_images_and_image_tokens(fake_server: FakeServer) -> None:
    fake_server.behaviour.image_tokens = 345  # the fake counts a token a word, plus this per image
    load = LoadSpec(requests=6, concurrency=3, input_len=12, output_len=3, api="native", warmup=0,
                    dataset=f"image:count=2,resolution=64x64,format=png,image_token={QWEN_TOKEN}")
    result = run_load(fake_server.url, load)
    assert result.completed == 6, result.failure_examples()
    facts = result.images
    assert facts["images_per_request"] == 2 and facts["image_tokens_per_request"] == 690.0
    assert facts["mean_ttft_ms"] == result.mean_ttft_ms > 0
    assert all(len(b["image_data"]) == 2 for b in fake_server.bodies)
    assert result.to_dict()["images"]["requests_with_images"] == 6
    assert facts["image_tokens_basis"] == "server prompt_tokens minus the text tokens sent"


def test_the_servers_own_image_token_count_is_preferred(fake_server: FakeServer) -> None:
    fake_server.behaviour.image_tokens = 252
    fake_server.behaviour.report_image_tokens = True
    load = LoadSpec(requests=4, concurrency=2, input_len=5, output_len=2, api="native", warmup=0,
                    dataset=f"image:count=3,random_count=0,resolution=32x32,image_token={QWEN_TOKEN}")
    facts = run_load(fake_server.url, load).images
    assert facts["image_tokens_per_request"] == 756.0 and facts["image_tokens_basis"] == "the server's image_tokens"


def test_a_text_load_reports_no_image_figures(fake_server: FakeServer) -> None:
    result = run_load(fake_server.url, LoadSpec(requests=2, concurrency=1, input_len=4, output_len=2, warmup=0))
    assert result.images == {} and result.completed == 2


def test_images_are_generated_once_for_the_checks_the_warmup_and_the_run() -> None:
    load = spec("image:count=2,resolution=64x64,pool=3")
    first, warmup = PromptSource(load), PromptSource(load, seed_offset=10_000)
    assert first.get(0).images[0] is warmup.get(0).images[0]  # the same string: one pool, not two
    other = PromptSource(load.replace(seed=7))  # another run's seed: other images
    assert other.get(0).images[0] != first.get(0).images[0]
