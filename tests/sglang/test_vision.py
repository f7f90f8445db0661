"""Image-token counts: SGLang 0.5.23's processor rules, computed here, against the simulator's answers.

The rules are written out below from 0.5.23's code (``kimi_k25.py`` ``navit_resize_config``;
``qwen_vl.py`` ``smart_resize`` with Qwen2-VL's 14x14 patches merged 2x2), independently of
``pytest_sglang.sglang.vision``; the numbers are computed, never pasted.
"""

from __future__ import annotations

import math

import httpx
import pytest

from pytest_sglang import images
from pytest_sglang.sglang import vision
from tests.conftest import SimFactory

RESOLUTIONS = [(28, 28), (100, 60), (640, 480), (1280, 720), (1920, 1080), (3840, 2160), (8000, 700), (333, 4321)]


def kimi_k25_rule(width: int, height: int) -> int:
    """MoonViT: shrink (never grow) to <= 16384 patches and <= 512 patches a side, pad to 28, 2x2 merge."""
    by_count = math.sqrt(16384 / (max(1, width // 14) * max(1, height // 14)))
    scale = min(1.0, by_count, 512 * 14 / width, 512 * 14 / height)
    w = min(max(1, int(width * scale)), 512 * 14)
    h = min(max(1, int(height * scale)), 512 * 14)
    return math.ceil(w / 28) * math.ceil(h / 28)


def qwen2_vl_rule(width: int, height: int) -> int:
    """smart_resize to multiples of 28 within [4, 16384] x 28 x 28 pixels; one token per 28 x 28."""
    h, w = max(28, round(height / 28) * 28), max(28, round(width / 28) * 28)
    if h * w > 16384 * 28 * 28:
        beta = math.sqrt(height * width / (16384 * 28 * 28))
        h, w = math.floor(height / beta / 28) * 28, math.floor(width / beta / 28) * 28
    elif h * w < 4 * 28 * 28:
        beta = math.sqrt(4 * 28 * 28 / (height * width))
        h, w = math.ceil(height * beta / 28) * 28, math.ceil(width * beta / 28) * 28
    return (h // 28) * (w // 28)


RULES = {"kimi-k2.5": kimi_k25_rule, "qwen2-vl": qwen2_vl_rule}


@pytest.mark.parametrize("name", sorted(RULES))
@pytest.mark.parametrize(("width", "height"), RESOLUTIONS)
def test_the_arithmetic_follows_the_processor_rules(name: str, width: int, height: int) -> None:
    grid = vision.PROCESSORS[name].grid(width, height)
    assert grid.tokens == RULES[name](width, height)
    assert grid.patches == 4 * grid.tokens  # 14x14 patches, merged 2x2


def test_qwen2_vl_refuses_extreme_aspect_ratios_as_smart_resize_does() -> None:
    with pytest.raises(ValueError, match=r"absolute aspect ratio must be smaller than 200, got 250\.0"):
        vision.QWEN2_VL.grid(7000, 28)


@pytest.mark.parametrize(("model_path", "model_type", "expected"), [
    ("moonshotai/Kimi-K2.5", "", "kimi-k2.5"),
    ("/models/kimi_k25-int4", "", "kimi-k2.5"),
    ("anything", "kimi_k25", "kimi-k2.5"),
    ("Qwen/Qwen2-VL-7B-Instruct", "", "qwen2-vl"),
    ("anything", "qwen2_vl", "qwen2-vl"),
    ("sim/tiny-llama", "llama", None),
])
def test_a_model_is_known_by_its_type_or_path(model_path: str, model_type: str, expected: str | None) -> None:
    proc = vision.processor_for(model_path, model_type)
    assert (proc.name if proc else None) == expected


@pytest.mark.parametrize("name", sorted(RULES))
def test_the_simulator_counts_image_tokens_by_the_rules(sim_factory: SimFactory, name: str) -> None:
    """/generate whose text is only the placeholder: prompt_tokens is the image's token count."""
    sim = sim_factory("--sim-vision", name, "--context-length", "65536")
    placeholder = vision.PROCESSORS[name].placeholder
    counted = []
    with httpx.Client(base_url=sim.url, timeout=60) as c:
        for width, height in RESOLUTIONS[:7]:
            url = images.data_url(images.solid_image("white", width, height), "png")
            r = c.post("/generate", json={"text": placeholder, "image_data": url,
                                          "sampling_params": {"max_new_tokens": 1}})
            assert r.status_code == 200, r.text
            counted.append(r.json()["meta_info"]["prompt_tokens"])
    assert counted == [RULES[name](w, h) for w, h in RESOLUTIONS[:7]]
