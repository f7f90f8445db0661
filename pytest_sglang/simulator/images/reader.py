"""Images in a request, read as SGLang 0.5.23 reads them, and what the simulated model sees in them.

Sources: OpenAI chat ``image_url`` content parts and native ``/generate`` ``image_data`` (a string or a
list). A ``data:`` URL or bare base64 is decoded (strict base64, as 0.5.23's ``get_image_bytes``);
an ``http(s)://`` URL or a file path is refused: the simulator never fetches or reads media (0.5.23
offline fails the download and answers the same 400). Decoding is Pillow's, bounded: Pillow's own
decompression-bomb limit refuses an image over ``2 x Image.MAX_IMAGE_PIXELS`` from its header, and
only images up to ``DECODE_PIXELS`` are decoded to be looked at (larger ones are verified, not
decoded). Errors carry 0.5.23's message, wrapped as its processor wraps them (``base_processor.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError

from pytest_sglang.images import dominant_colour
from pytest_sglang.sglang.vision import Grid, Processor

#: Pixels the simulator decodes to see an image's colour (16 MP: 4k fits; ~50 MB of RGB at most).
DECODE_PIXELS = 4096 * 4096
#: Images remembered by content (what each looked like), so a repeated image is not decoded again.
_SEEN_MAX = 256


class ImageRefused(Exception):
    """An image 0.5.23 refuses: the message it answers with, and its status (a 500 for a bomb)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Seen:
    """One decoded image: its content digest, size, the colour most of it is, and its processor grid."""

    digest: str
    width: int
    height: int
    colour: str | None  # None: too large to look at (see DECODE_PIXELS)
    grid: Grid


def _refused(index: int, source: str, why: str) -> ImageRefused:
    shown = source if len(source) <= 100 else source[:100] + "..."
    return ImageRefused(f"An exception occurred while loading IMAGE data at index {index}: "
                        f"Error while loading data {shown}: {why}")


def chat_image_sources(messages: Sequence[Any]) -> list[str]:
    """The ``image_url`` of every image part of the messages, in order (BadRequest-worthy: ValueError)."""
    out: list[str] = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "image_url":
                continue
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if not isinstance(url, str):
                raise ValueError("1 validation error for ChatCompletionRequest\nmessages.content.image_url.url\n"
                                 "  Field required [type=missing]")
            out.append(url)
    return out


def native_image_sources(image_data: Any) -> list[str]:
    """``/generate``'s ``image_data``: one string or a list of strings (ValueError otherwise)."""
    if image_data is None or image_data == []:
        return []
    items = image_data if isinstance(image_data, list) else [image_data]
    if not all(isinstance(i, str) for i in items):
        raise ValueError("image_data must be a string or a list of strings (data: URLs or base64), "
                         f"got {type(image_data).__name__}")
    return list(items)


def _bytes_of(index: int, source: str) -> bytes:
    if source.startswith(("http://", "https://")):
        raise _refused(index, source, "the simulator fetches no media URLs (no network): send the image "
                                      "inline as a data: URL")
    if source.startswith(("file://", "/")):
        raise _refused(index, source, "the simulator reads no files named by a request: send the image "
                                      "inline as a data: URL")
    encoded = source.split(",", 1)[1] if source.startswith("data:") and "," in source else source
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _refused(index, source, str(exc)) from None


def _decode(index: int, source: str, data: bytes) -> tuple[int, int, str | None]:
    """(width, height, dominant colour) of the image, or 0.5.23's refusal."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))  # the header only; Pillow refuses a bomb here
    except Image.DecompressionBombError as exc:
        # 0.5.23 lets Pillow's error through as a RuntimeError, not a ValueError: a 500 on both routes
        # (seen on real 0.5.23 serving Qwen2-VL; the acceptance check reports it, as it should be a 4xx)
        bomb = _refused(index, source, str(exc))
        raise ImageRefused(bomb.message, status=500) from None
    except (OSError, SyntaxError, UnidentifiedImageError) as exc:
        raise _refused(index, source, f"Could not decode image: {exc}") from None
    with image:
        width, height = image.size
        try:
            if width * height > DECODE_PIXELS:
                image.verify()  # checks the stream without holding its pixels
                return width, height, None
            image.draft("RGB", (64, 64))  # JPEG decodes at 1/8 scale: the colour needs no more
            image.load()
            return width, height, dominant_colour(image)
        except (OSError, SyntaxError, ValueError) as exc:
            raise _refused(index, source, f"Could not decode image: {exc}") from None


class ImageReader:
    """Reads a request's images (remembering the last few by content so repeats cost a hash)."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, tuple[int, int, str | None]] = OrderedDict()

    def read(self, sources: Sequence[str], processor: Processor, *, miscount: bool = False) -> list[Seen]:
        """Every image in order, with its grid (``miscount``: the image-tokens-miscounted fault's grid)."""
        out: list[Seen] = []
        for index, source in enumerate(sources):
            data = _bytes_of(index, source)
            digest = hashlib.sha256(data).hexdigest()
            known = self._seen.get(digest)
            if known is None:
                known = _decode(index, source, data)
                self._seen[digest] = known
                if len(self._seen) > _SEEN_MAX:
                    self._seen.popitem(last=False)
            else:
                self._seen.move_to_end(digest)
            width, height, colour = known
            try:
                grid = processor.grid(width, height)
            except ValueError as exc:  # Qwen2-VL's aspect ratio bound
                raise ImageRefused(f"An exception occurred while loading multimodal data: {exc}") from None
            if miscount:
                grid = _miscounted(grid, processor)
            out.append(Seen(digest, width, height, colour, grid))
        return out


def _miscounted(grid: Grid, processor: Processor) -> Grid:
    """The image-tokens-miscounted fault: one merge block short on each side of the true grid."""
    block = processor.patch * processor.merge
    w = max(block, grid.width - block)
    h = max(block, grid.height - block)
    patches = (w // processor.patch) * (h // processor.patch)
    return Grid(w, h, patches, patches // (processor.merge * processor.merge))
