"""The image checks' parts: the colour judge, the bad images, the setting's bounds."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from pytest_sglang.correctness import AcceptanceSettings
from pytest_sglang.correctness import image_checks as img
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
