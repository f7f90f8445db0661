"""``--sim-vision``: whether the simulated model sees images, and with which 0.5.23 processor's arithmetic."""

from __future__ import annotations

import argparse

from pytest_sglang.sglang.vision import PROCESSORS, Processor, processor_for

#: auto (from --model-path), none (text only), or a processor by name.
VISION_CHOICES = ("auto", "none", *PROCESSORS)


def for_model(choice: str, model_path: str) -> Processor | None:
    """The processor ``--sim-vision choice`` gives a server of ``model_path`` (None: text only)."""
    if choice == "none":
        return None
    if choice != "auto":
        return PROCESSORS[choice]
    return processor_for(model_path=model_path)


def add_vision_argument(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--sim-vision",
        default="auto",
        choices=VISION_CHOICES,
        help="the image processor of the simulated model: auto (default) reads it from --model-path "
        "(Kimi-K2.5, Qwen2-VL; anything else is text only), none serves text only",
    )
