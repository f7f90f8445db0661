"""SGLang 0.5.23's image processors as arithmetic: how many patches and tokens an image of W x H becomes.

Reproduced from SGLang 0.5.23's code (``srt/multimodal/processors/``), not imported (no torch, no
SGLang needed). The simulator counts its image tokens with it; the acceptance checks compare a
server's ``usage.prompt_tokens`` with it where the served model's processor is one of these.

- ``kimi-k2.5`` (``kimi_k25.py``, ``navit_resize_config``): MoonViT. The image is scaled down
  (never up) so it has at most ``in_patch_limit`` 14x14 patches and at most ``patch_limit_on_one_side``
  patches on a side, each side truncated to whole pixels; then padded up to a multiple of 28
  (patch x merge kernel) and every 2x2 block of patches merged into one token. Kimi-K2.5's
  ``media_proc_cfg``: patch 14, merge 2, in_patch_limit 16384, patch_limit_on_one_side 512.
- ``qwen2-vl`` (``qwen_vl.py``, ``smart_resize``; the image processor applies the same rule): each
  side rounded to a multiple of 28, then scaled to keep the pixel count within [4x28x28,
  16384x28x28]; 14x14 patches, 2x2 merged. An aspect ratio over 200 is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Grid:
    """An image after its processor's resize: patches the encoder runs on, tokens the prompt gets."""

    width: int  # resized (and padded) pixels
    height: int
    patches: int
    tokens: int


@dataclass(frozen=True)
class Processor:
    name: str
    #: ``/model_info``'s model_type and architecture of the model family
    model_type: str
    architecture: str
    #: what one image is in the prompt text (the chat template's part; /generate text carries it)
    placeholder: str
    patch: int = 14
    merge: int = 2
    #: bytes of one image token's embedding in the multimodal cache (hidden size x 2 bytes, bf16)
    embedding_bytes_per_token: int = 7168 * 2

    def grid(self, width: int, height: int) -> Grid:
        """The processor's grid for an image of ``width`` x ``height`` pixels (ValueError: refused)."""
        if self.name == "kimi-k2.5":
            return _navit(width, height, self.patch, self.merge, in_patch_limit=16384, side_limit=512)
        return _smart_resize(width, height, self.patch, self.merge, min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28)


KIMI_K25 = Processor("kimi-k2.5", "kimi_k25", "KimiK25ForConditionalGeneration", "<|media_pad|>")
QWEN2_VL = Processor(
    "qwen2-vl",
    "qwen2_vl",
    "Qwen2VLForConditionalGeneration",
    "<|vision_start|><|image_pad|><|vision_end|>",
    embedding_bytes_per_token=3584 * 2,
)
PROCESSORS = {p.name: p for p in (KIMI_K25, QWEN2_VL)}


def _navit(width: int, height: int, patch: int, merge: int, *, in_patch_limit: int, side_limit: int) -> Grid:
    # Whole patches along each side (at least one) bound the patch count; both sides bound the length.
    scale = min(
        1.0,
        math.sqrt(in_patch_limit / (max(1, width // patch) * max(1, height // patch))),
        side_limit * patch / width,
        side_limit * patch / height,
    )
    new_w = min(max(1, int(width * scale)), side_limit * patch)
    new_h = min(max(1, int(height * scale)), side_limit * patch)
    block = patch * merge
    padded_w, padded_h = -(-new_w // block) * block, -(-new_h // block) * block
    patches = (padded_w // patch) * (padded_h // patch)
    return Grid(padded_w, padded_h, patches, patches // (merge * merge))


def _smart_resize(width: int, height: int, patch: int, merge: int, *, min_pixels: int, max_pixels: int) -> Grid:
    ratio = max(width, height) / min(width, height)
    if ratio > 200:
        raise ValueError(f"absolute aspect ratio must be smaller than 200, got {ratio}")
    block = patch * merge
    h_bar = max(block, round(height / block) * block)
    w_bar = max(block, round(width / block) * block)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = math.floor(height / beta / block) * block
        w_bar = math.floor(width / beta / block) * block
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / block) * block
        w_bar = math.ceil(width * beta / block) * block
    patches = (w_bar // patch) * (h_bar // patch)
    return Grid(w_bar, h_bar, patches, patches // (merge * merge))


def processor_for(model_path: str = "", model_type: str = "") -> Processor | None:
    """The processor of a model known by its ``/model_info`` model_type or its path (None: not one of these)."""
    for proc in PROCESSORS.values():
        if model_type == proc.model_type:
            return proc
    name = model_path.lower().replace("_", "-")
    if "kimi-k2.5" in name or "kimi-k25" in name:
        return KIMI_K25
    if "qwen2-vl" in name:
        return QWEN2_VL
    return None
