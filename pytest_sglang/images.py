"""Images made locally for multimodal requests: solid colours, digits, noise; PNG/JPEG bytes and data URLs.

One module for the acceptance checks, the load generator and the simulator, so the image a check sends
is the image the simulator "sees" (its dominant colour, named by ``nearest_colour``). Nothing here
fetches anything: every image is generated in memory from its arguments.
"""

from __future__ import annotations

import base64
import io
import random
import struct
import zlib
from collections.abc import Mapping

from PIL import Image, ImageDraw

# Colours a VLM names without hesitation, far apart so JPEG's rounding never moves one to another.
COLOURS: Mapping[str, tuple[int, int, int]] = {
    "red": (230, 25, 25),
    "green": (20, 170, 40),
    "blue": (25, 60, 230),
    "yellow": (250, 225, 20),
    "black": (0, 0, 0),
    "white": (255, 255, 255),
}
# The formats bench_serving's --image-format offers that every SGLang processor decodes.
IMAGE_FORMATS = ("png", "jpeg")
# Large enough for 4k (3840x2160) both ways; a bound so a typo is not a gigabyte in memory.
MAX_SIDE = 8192
_JPEG_QUALITY = 85  # bench_serving's quality, so byte sizes compare

# A 5x7 bitmap per digit: drawn as blocks, so any model (or OCR) reads it at any size.
_DIGITS = {
    0: ("01110", "10001", "10011", "10101", "11001", "10001", "01110"),
    1: ("00100", "01100", "00100", "00100", "00100", "00100", "01110"),
    2: ("01110", "10001", "00001", "00010", "00100", "01000", "11111"),
    3: ("11110", "00001", "00001", "01110", "00001", "00001", "11110"),
    4: ("00010", "00110", "01010", "10010", "11111", "00010", "00010"),
    5: ("11111", "10000", "11110", "00001", "00001", "10001", "01110"),
    6: ("00110", "01000", "10000", "11110", "10001", "10001", "01110"),
    7: ("11111", "00001", "00010", "00100", "01000", "01000", "01000"),
    8: ("01110", "10001", "10001", "01110", "10001", "10001", "01110"),
    9: ("01110", "10001", "10001", "01111", "00001", "00010", "01100"),
}


def _check_size(width: int, height: int) -> None:
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIDE:
            raise ValueError(f"image {name}={value!r}: give a whole number of pixels from 1 to {MAX_SIDE}")


def _check_format(fmt: str) -> str:
    lowered = fmt.lower()
    if lowered == "jpg":
        lowered = "jpeg"
    if lowered not in IMAGE_FORMATS:
        raise ValueError(f"image format={fmt!r}: use one of {', '.join(IMAGE_FORMATS)}")
    return lowered


def _rgb(colour: str) -> tuple[int, int, int]:
    try:
        return COLOURS[colour]
    except KeyError:
        raise ValueError(f"image colour={colour!r}: use one of {', '.join(COLOURS)}") from None


def encode(image: Image.Image, fmt: str = "png") -> bytes:
    """Encode a Pillow image as PNG or JPEG bytes (JPEG at bench_serving's quality)."""
    kind = _check_format(fmt)
    out = io.BytesIO()
    if kind == "jpeg":
        image.convert("RGB").save(out, format="JPEG", quality=_JPEG_QUALITY)
    else:
        image.save(out, format="PNG")
    return out.getvalue()


def solid_image(colour: str, width: int = 64, height: int = 64, fmt: str = "png") -> bytes:
    """An image of one colour from ``COLOURS``: its dominant colour is ``colour``."""
    _check_size(width, height)
    return encode(Image.new("RGB", (width, height), _rgb(colour)), fmt)


def blank_image(width: int, height: int, fmt: str = "png") -> bytes:
    """A white image: bench_serving's ``--image-content blank``."""
    return solid_image("white", width, height, fmt)


def noise_image(width: int, height: int, fmt: str = "jpeg", seed: int = 0) -> bytes:
    """Uniform random pixels from ``seed``: bench_serving's ``--image-content random``."""
    _check_size(width, height)
    pixels = random.Random(seed).randbytes(width * height * 3)
    return encode(Image.frombytes("RGB", (width, height), pixels), fmt)


def digit_image(
    digit: int, width: int = 112, height: int = 112, fmt: str = "png", colour: str = "black", background: str = "white"
) -> bytes:
    """A digit 0-9 drawn as a block bitmap filling most of the image."""
    if isinstance(digit, bool) or not isinstance(digit, int) or digit not in _DIGITS:
        raise ValueError(f"image digit={digit!r}: give a whole number from 0 to 9")
    _check_size(width, height)
    image = Image.new("RGB", (width, height), _rgb(background))
    draw = ImageDraw.Draw(image)
    cell = max(1, min(width // 7, height // 9))  # 5x7 glyph with a one-cell margin each side
    left = (width - 5 * cell) // 2
    top = (height - 7 * cell) // 2
    ink = _rgb(colour)
    for row, bits in enumerate(_DIGITS[digit]):
        for col, bit in enumerate(bits):
            if bit == "1":
                x, y = left + col * cell, top + row * cell
                draw.rectangle((x, y, x + cell - 1, y + cell - 1), fill=ink)
    return encode(image, fmt)


def data_url(data: bytes, fmt: str = "png") -> str:
    """A ``data:image/<fmt>;base64,...`` URL: what OpenAI ``image_url`` parts and bench_serving send."""
    return f"data:image/{_check_format(fmt)};base64,{base64.b64encode(data).decode('ascii')}"


def nearest_colour(rgb: tuple[int, int, int]) -> str:
    """The name in ``COLOURS`` closest to ``rgb`` (squared RGB distance)."""
    return min(COLOURS, key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb, strict=True)))


def dominant_colour(image: Image.Image) -> str:
    """The ``COLOURS`` name most pixels of ``image`` are nearest to (read on a 32x32 thumbnail)."""
    small = image.convert("RGB").resize((32, 32), Image.Resampling.BOX)
    votes: dict[str, int] = {}
    for count, pixel in small.getcolors(32 * 32) or []:
        if not isinstance(pixel, tuple):  # an RGB image's colours are (r, g, b)
            continue
        r, g, b = pixel[:3]
        name = nearest_colour((r, g, b))
        votes[name] = votes.get(name, 0) + count
    return max(votes, key=lambda name: votes[name])


def speckled_image(colour: str, width: int, height: int, seed: int, fmt: str = "png") -> bytes:
    """A ``colour`` image with a seeded 8x8 block of noise in its corner: unique content, a few KB as PNG.

    For requests that must not hit a server's image cache without sending megabytes of noise.
    """
    _check_size(width, height)
    image = Image.new("RGB", (width, height), _rgb(colour))
    side = min(8, width, height)
    block = Image.frombytes("RGB", (side, side), random.Random(seed).randbytes(side * side * 3))
    image.paste(block, (0, 0))
    return encode(image, fmt)


def corrupt_png(width: int = 64, height: int = 64) -> bytes:
    """A PNG cut in half: its header reads, its pixels do not (a corrupt upload)."""
    data = solid_image("green", width, height, "png")
    return data[: len(data) // 2]


def unsupported_image() -> bytes:
    """An SVG document: an image format SGLang's decoder (Pillow) cannot read."""
    return (b'<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64">'
            b'<rect width="64" height="64" fill="red"/></svg>')


def oversize_png(width: int = 20_000, height: int = 20_000) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` (400 MP by default) with no pixel data.

    Pillow refuses it from the header (over twice ``Image.MAX_IMAGE_PIXELS``: a decompression bomb),
    so nothing is decoded on either side; it costs a few dozen bytes to send.
    """
    if width * height <= 2 * (Image.MAX_IMAGE_PIXELS or 0):
        raise ValueError(f"oversize_png {width}x{height} is within Pillow's limit: give more pixels")

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
