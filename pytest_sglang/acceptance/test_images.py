"""Images on a vision-language server (skipped, with the reason, on a text-only model).

Every image is generated locally and sent as a ``data:`` URL; nothing is fetched.
"""

from __future__ import annotations

import pytest

from pytest_sglang.acceptance.support import run
from pytest_sglang.correctness import CheckContext
from pytest_sglang.correctness import image_checks as img


@pytest.mark.parametrize("count", [1, 3], ids=["one-image", "three-images"])
def test_chat_images(sglang_acceptance: CheckContext, count: int) -> None:
    """Chat ``image_url`` parts with data: URLs: the answer names each image's dominant colour."""
    run(img.check_image_chat, sglang_acceptance, count)


def test_native_image_data(sglang_acceptance: CheckContext) -> None:
    """``/generate`` with ``image_data`` (a string, then a list): the colours named."""
    run(img.check_native_images, sglang_acceptance)


def test_image_stream_agrees(sglang_acceptance: CheckContext) -> None:
    """Streamed and non-streamed answers to an image request agree (text and prompt_tokens)."""
    run(img.check_image_stream_agrees, sglang_acceptance)


def test_image_tokens(sglang_acceptance: CheckContext) -> None:
    """``usage.prompt_tokens`` counts image tokens as the served model's processor does."""
    run(img.check_image_tokens, sglang_acceptance)


def test_bad_images_4xx(sglang_acceptance: CheckContext) -> None:
    """A corrupt, an unsupported and an oversize image each get a 4xx with a message."""
    run(img.check_bad_images, sglang_acceptance)


def test_vision_encoder_share(sglang_acceptance: CheckContext) -> None:
    """The vision encoder's share of a new image's first token is within --sglang-acceptance-max-vision-share."""
    run(img.check_vision_share, sglang_acceptance)
