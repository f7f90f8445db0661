"""The image checks' parts: the colour judge, the bad images, the setting's bounds."""

from __future__ import annotations

import base64
import io
import json

import httpx
import pytest
from PIL import Image

from pytest_sglang.correctness import AcceptanceSettings, CheckContext, Unsupported
from pytest_sglang.correctness import image_checks as img
from pytest_sglang.correctness.features import ServerFeatures
from pytest_sglang.errors import ConfigError


@pytest.mark.parametrize(("answer", "words"), [
    ("Red.", ["red"]),
    ("The dominant colour of this image is RED.", ["red"]),
    ("1. Blue 2. Yellow 3. Green", ["blue", "yellow", "green"]),
    ("I cannot see any image in your message.", []),
    ("Reddish, greenery", []),  # whole words only
])
def test_colour_words_are_the_palette_words_in_order(answer: str, words: list[str]) -> None:
    assert img.colour_words(answer) == words


def test_the_bad_images_are_refused_by_pillow_for_their_stated_reason() -> None:
    decoded = {what: base64.b64decode(url.split(",", 1)[1]) for what, url in img.BAD_IMAGES}
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(decoded["oversize image (400 MP)"]))
    with pytest.raises(Image.UnidentifiedImageError):
        Image.open(io.BytesIO(decoded["unsupported format (SVG)"]))
    with Image.open(io.BytesIO(decoded["corrupt PNG"])) as image, pytest.raises(OSError):
        image.load()


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_max_vision_share_must_be_a_fraction(value: float) -> None:
    with pytest.raises(ConfigError, match="max_vision_share"):
        AcceptanceSettings(max_vision_share=value)


def _vlm(image_answer: str, told_answer: str, image_status: int = 200) -> CheckContext:
    """A fake VLM on chat: ``image_answer`` to a request with images, ``told_answer`` to text alone ({} = told)."""
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/model_info":
            return httpx.Response(200, json={"has_image_understanding": True, "model_path": "tiny-qwen2-vl",
                                             "model_type": "qwen2_vl"})
        parts = json.loads(request.content)["messages"][0]["content"]
        with_image = any(p.get("type") == "image_url" for p in parts)
        if with_image and image_status != 200:
            return httpx.Response(image_status, json={"object": "error", "message": "boom"})
        told = parts[-1]["text"].split(" is ", 1)[-1].split(".", 1)[0]  # "The colour of the square is red."
        text = image_answer if with_image else told_answer.format(told)
        return httpx.Response(200, json={"choices": [{"message": {"content": text}}],
                                         "usage": {"prompt_tokens": 40}})
    features = ServerFeatures(model="tiny", context_length=2048, tool_call_parser=None, reasoning_parser=None,
                              grammar_backend=None, deterministic=False, radix_cache=True, max_running_requests=None,
                              incremental_stream=False, hicache=False)
    client = httpx.Client(base_url="http://sglang.test", transport=httpx.MockTransport(handle))
    return CheckContext(client, features, AcceptanceSettings(request_timeout_s=10.0))


def test_a_model_that_cannot_name_a_colour_it_is_told_is_cannot_judge_not_a_pass() -> None:
    # dummy weights (0.5.23's real tier): nonsense to the image question and to the text-only control
    with pytest.raises(Unsupported, match=r"cannot judge the answer with this model: asked in text alone "
                                          r"\"The colour of the square is red...\", it answered ' lazyn lazyn'.*"
                                          r"unjudged: chat with 1 image\(s\) answered ' is fo'"):
        img.check_image_chat(_vlm(" is fo", " lazyn lazyn"), 1)


def test_a_model_that_names_a_colour_it_is_told_is_judged_on_the_image() -> None:
    report = img.check_image_chat(_vlm("Blue.", "I think {}."), 1)
    assert report.problems == ["chat with 1 image(s): expected the colour(s) red, the answer names blue: 'Blue.'"]


def test_the_control_passes_only_on_the_colour_told() -> None:
    assert img.judging_control(_vlm("", "Red.")) is not None  # "red" is not "green": one lucky answer
    assert img.check_image_chat(_vlm("Red.", "Red."), 1).ok  # right on the image: no control asked


def test_an_unjudged_answer_does_not_hide_a_failure() -> None:
    report = img.check_image_chat(_vlm(" is fo", " lazyn", image_status=500), 1)
    assert report.problems and "HTTP 500" in report.problems[0]
