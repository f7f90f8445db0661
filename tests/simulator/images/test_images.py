"""The simulator's image path: 0.5.23's fields, refusals and token counts, what the model sees, the faults."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from pytest_sglang import images
from pytest_sglang.sglang import vision
from pytest_sglang.simulator.images import multimodal
from pytest_sglang.simulator.images.reader import ImageRefused
from tests.conftest import SimFactory

KIMI = ("--model-path", "moonshotai/Kimi-K2.5")
QUESTION = {"type": "text", "text": "What is the dominant colour of each image? One word per image."}


def _url(colour: str, width: int = 64, height: int = 48, fmt: str = "png") -> str:
    return images.data_url(images.solid_image(colour, width, height, fmt), fmt)


def _parts(*urls: str) -> list[dict[str, Any]]:
    return [*({"type": "image_url", "image_url": {"url": u}} for u in urls), QUESTION]


def _chat(c: httpx.Client, parts: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": parts}], "max_tokens": 24, "temperature": 0}
    return c.post("/v1/chat/completions", json={**body, **extra})


def _streamed_text(c: httpx.Client, parts: list[dict[str, Any]]) -> str:
    r = _chat(c, parts, stream=True)
    text = ""
    for line in r.text.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    return text


def test_model_info_shows_image_understanding_from_the_model(sim_factory: SimFactory) -> None:
    kimi, text_only, forced_off = sim_factory(*KIMI), sim_factory(), sim_factory(*KIMI, "--sim-vision", "none")
    infos = [httpx.get(f"{s.url}/model_info", timeout=30).json() for s in (kimi, text_only, forced_off)]
    assert [i["has_image_understanding"] for i in infos] == [True, False, False]
    assert infos[0]["model_type"] == "kimi_k25" and infos[0]["architectures"] == ["KimiK25ForConditionalGeneration"]


def test_a_text_only_model_refuses_chat_images_and_ignores_image_data(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        r = _chat(c, _parts(_url("red")))
        native = c.post("/generate", json={"text": "hi", "image_data": _url("red"),
                                           "sampling_params": {"max_new_tokens": 2}})
    assert r.status_code == 400
    assert r.json()["message"] == "Model only supports text input; received unsupported content type 'image_url'."
    assert native.status_code == 200  # 0.5.23 runs no multimodal processor for a text-only model


def test_the_model_sees_each_image_and_stream_agrees(sim_factory: SimFactory) -> None:
    sim = sim_factory(*KIMI)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        one = _chat(c, _parts(_url("red"))).json()
        two = _chat(c, _parts(_url("yellow", fmt="jpeg"), _url("blue", 300, 200))).json()
        streamed = _streamed_text(c, _parts(_url("yellow", fmt="jpeg"), _url("blue", 300, 200)))
        none = _chat(c, [QUESTION]).json()
        native = c.post("/generate", json={"text": "<|media_pad|><|media_pad|> colour of each image?",
                                           "image_data": [_url("green"), _url("black")],
                                           "sampling_params": {"max_new_tokens": 16}}).json()
    assert one["choices"][0]["message"]["content"] == "Red."
    assert two["choices"][0]["message"]["content"] == "Yellow, blue." == streamed
    assert none["choices"][0]["message"]["content"] == "I cannot see any image in your message."
    assert native["text"] == " Green, black."
    # each image adds its processor's tokens: 64x48 -> 3x2, 300x200 -> 11x8 merged tokens
    assert two["usage"]["prompt_tokens"] - none["usage"]["prompt_tokens"] >= 6 + 88


@pytest.mark.parametrize(("data", "message"), [
    (images.data_url(images.corrupt_png(), "png"), "Could not decode image: "),
    (images.data_url(images.unsupported_image(), "png"), "Could not decode image: cannot identify image file"),
    ("data:image/png;base64,not base64!", "Error while loading data data:image/png;base64,not base64!: "),
    ("https://example.com/cat.png", "the simulator fetches no media URLs (no network)"),
])
def test_refused_images_get_400_with_0_5_23s_message(sim_factory: SimFactory, data: str, message: str) -> None:
    sim = sim_factory(*KIMI)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        chat = _chat(c, _parts(_url("red"), data))
        native = c.post("/generate", json={"text": "<|media_pad|>", "image_data": data,
                                           "sampling_params": {"max_new_tokens": 2}})
    assert chat.status_code == 400 and native.status_code == 400
    assert chat.json()["message"].startswith("An exception occurred while loading IMAGE data at index 1: ")
    assert message in chat.json()["message"] and message in native.json()["error"]["message"]


def test_a_decompression_bomb_gets_0_5_23s_500(sim_factory: SimFactory) -> None:
    # real 0.5.23 (tiny Qwen2-VL on CPU): Pillow's bomb error is not a ValueError, so it is a 500 on both routes
    sim = sim_factory(*KIMI)
    bomb = images.data_url(images.oversize_png(), "png")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        chat = _chat(c, _parts(bomb))
        native = c.post("/generate", json={"text": "<|media_pad|>", "image_data": bomb,
                                           "sampling_params": {"max_new_tokens": 2}})
    assert chat.status_code == 500 and chat.json()["type"] == "InternalServerError"
    assert chat.json()["message"].startswith("Internal server error: An exception occurred while loading IMAGE data "
                                             "at index 0: ")
    assert "exceeds limit of 178956970 pixels, could be decompression bomb" in chat.json()["message"]
    assert (native.status_code, native.text) == (500, "Internal Server Error")


def test_native_placeholders_must_match_the_images(sim_factory: SimFactory) -> None:
    sim = sim_factory(*KIMI)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        r = c.post("/generate", json={"text": "no placeholder", "image_data": _url("red"),
                                      "sampling_params": {"max_new_tokens": 2}})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == ("Kimi image placeholders must map one-to-one to image data: "
                                            "expected 1, found 0 token(s)")


def test_a_repeated_image_prefix_is_reported_cached(sim_factory: SimFactory) -> None:
    sim = sim_factory(*KIMI, "--enable-cache-report")
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        first, second = (_chat(c, _parts(_url("blue", 640, 480))).json()["usage"] for _ in range(2))
    tokens = vision.KIMI_K25.grid(640, 480).tokens
    assert (first["prompt_tokens_details"] or {}).get("cached_tokens", 0) < tokens
    assert second["prompt_tokens_details"]["cached_tokens"] >= tokens


def test_encoder_time_per_patch_the_cache_and_vision_slow() -> None:
    media = multimodal.Media()
    url = _url("red", 640, 480)
    text = vision.KIMI_K25.placeholder
    first = multimodal.prepare(media, vision.KIMI_K25, text, [url], prefill_tok_s=1000.0)
    again = multimodal.prepare(media, vision.KIMI_K25, text, [url], prefill_tok_s=1000.0)
    other = _url("green", 640, 480)
    slow = multimodal.prepare(multimodal.Media(), vision.KIMI_K25, text, [other], prefill_tok_s=1000.0, slow=3.0)
    patches = vision.KIMI_K25.grid(640, 480).patches
    assert first.encoder_s == pytest.approx(patches / (multimodal.PATCHES_PER_PREFILL_TOKEN * 1000.0))
    assert again.encoder_s == 0.0  # served from the embedding cache
    assert slow.encoder_s == pytest.approx(3 * first.encoder_s)
    assert media.cache.hits == 1 and media.cache.misses == 1


def test_the_embedding_cache_is_bounded_least_recently_used_out() -> None:
    cache = multimodal.EmbeddingCache(budget_bytes=100)
    assert [cache.lookup(d, 40) for d in "abc"] == [False, False, False]  # c evicts a
    assert cache.used <= 100 and cache.lookup("b", 40) and not cache.lookup("a", 40)


def test_image_faults(sim_factory: SimFactory) -> None:
    healthy = sim_factory(*KIMI)
    ignored = sim_factory(*KIMI, "--sim-fault", "image-ignored")
    miscounted = sim_factory(*KIMI, "--sim-fault", "image-tokens-miscounted")
    answers, tokens = [], []
    for sim in (healthy, ignored, miscounted):
        with httpx.Client(base_url=sim.url, timeout=30) as c:
            body = _chat(c, _parts(_url("red", 500, 300))).json()
        answers.append(body["choices"][0]["message"]["content"])
        tokens.append(body["usage"]["prompt_tokens"])
    assert answers == ["Red.", "I cannot see any image in your message.", "Red."]
    assert tokens[0] == tokens[1] != tokens[2]


@pytest.mark.parametrize(("spec", "message"), [
    ("vision-slow", "vision-slow needs the encoder's slow-down factor, e.g. vision-slow:3"),
    ("vision-slow:0.5", "vision-slow must be a factor >= 1 (1 is a healthy encoder), got '0.5'"),
    ("image-ignored:1", "image-ignored takes no argument"),
])
def test_bad_image_fault_arguments_are_usage_errors(spec: str, message: str) -> None:
    import argparse

    from pytest_sglang.simulator.failures.faults import check_fault

    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_fault(spec)


def test_a_refused_image_names_its_index_and_a_short_source() -> None:
    media = multimodal.Media()
    bad = "data:image/png;base64," + base64.b64encode(b"x" * 300).decode()
    with pytest.raises(ImageRefused) as exc:
        multimodal.prepare(media, vision.QWEN2_VL, vision.QWEN2_VL.placeholder * 2, [_url("red"), bad],
                           prefill_tok_s=1000.0)
    assert "at index 1: Error while loading data data:image/png;base64," in exc.value.message
    assert "...: Could not decode image" in exc.value.message and exc.value.status == 400


def test_a_bad_sim_vision_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_sglang.simulator.launch.cli import parse

    with pytest.raises(SystemExit) as exc:
        parse(["--model-path", "m", "--sim-vision", "llava"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --sim-vision: invalid choice: 'llava'" in err and "'kimi-k2.5', 'qwen2-vl'" in err
