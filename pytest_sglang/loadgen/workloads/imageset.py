"""Image datasets: ``image:KEY=VALUE,...`` (generated, as ``bench_serving --dataset-name image``) and ``mmmu:PATH``.

``image`` keys mirror bench_serving's options: ``count`` (``--image-count``, default 1), ``resolution``
(``--image-resolution``: ``4k``/``1080p``/``720p``/``360p``, ``HEIGHTxWIDTH``, or
``random:MINHxMINW-MAXHxMAXW``; default 1080p), ``format`` (``--image-format``: jpeg or png; default
jpeg), ``content`` (``--image-content``: random or blank; default random), ``random_count``
(``--random-image-count``: 0 or 1). Two keys are ours: ``pool`` (distinct images generated for the run,
reused in turn; default 16) and ``image_token`` (the model's image placeholder, put in the text of a
native ``/generate`` request once per image, as bench_serving's processor chat template does).

Images are generated once, when the :class:`ImagePool` is built (before anything is sent), and only their
data URLs are kept: memory is ``pool`` encoded images whatever the number of requests. bench_serving
makes a new image per request and holds them all; a pool repeats images every ``pool`` requests, which
a server's multimodal cache may serve without running the vision encoder again (give ``pool`` >= the
number of requests to send distinct images only).
"""

from __future__ import annotations

import difflib
import functools
import json
import random
from dataclasses import dataclass, fields
from pathlib import Path

from pytest_sglang.errors import ConfigError

#: bench_serving's presets, as (width, height).
PRESETS = {"4k": (3840, 2160), "1080p": (1920, 1080), "720p": (1280, 720), "360p": (640, 360)}
CONTENTS = ("random", "blank")
MAX_COUNT = 64
MAX_POOL = 256
#: Encoded bytes a pool may hold (data URLs): 16 random 4k JPEGs are about 100 MB.
MAX_POOL_BYTES = 512 * 1024 * 1024
_FORM = "image:count=2,resolution=720p,format=jpeg,content=random"
#: bench_serving's MMMU prompt around each question.
MMMU_PROMPT = "Question: {question}\n\nAnswer: "
_MMMU_FIX = 'one JSON object per line: {"question": "...", "image_1": "picture.png" or a data:image/... URL}'


@dataclass(frozen=True)
class ImageShape:
    """The parsed ``image:`` options (see the module docstring)."""

    count: int = 1
    resolution: str = "1080p"
    format: str = "jpeg"
    content: str = "random"
    random_count: bool = False
    pool: int = 16
    image_token: str | None = None

    def bounds(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(min, max) (width, height) of the images."""
        return resolution_bounds(self.resolution)


@functools.lru_cache(maxsize=16)  # read again for each native request's placeholder
def image_shape(dataset: str) -> ImageShape:
    """The shape of an ``image[:KEY=VALUE,...]`` dataset; ConfigError naming the key otherwise."""
    from pytest_sglang import images  # Pillow: loaded for image datasets only
    _, _, options = dataset.partition(":")
    names = [f.name for f in fields(ImageShape)]
    raw: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in options.split(","))):
        key, sep, value = (s.strip() for s in item.partition("="))
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            _bad(dataset, f"has no option {key!r}{hint}", f"use the options {', '.join(names)}, e.g. {_FORM}")
        if not sep or not value:
            _bad(dataset, f"option {key!r} has no value", f"write {key}=VALUE, e.g. {_FORM}")
        if key in raw:
            _bad(dataset, f"gives option {key!r} twice", f"give each option once, e.g. {_FORM}")
        raw[key] = value
    shape = ImageShape(
        count=_whole(dataset, "count", raw.get("count", "1"), 1, MAX_COUNT),
        resolution=raw.get("resolution", "1080p").lower(),
        format=raw.get("format", "jpeg").lower(),
        content=raw.get("content", "random").lower(),
        random_count=bool(_whole(dataset, "random_count", raw.get("random_count", "0"), 0, 1)),
        pool=_whole(dataset, "pool", raw.get("pool", "16"), 1, MAX_POOL),
        image_token=raw.get("image_token"),
    )
    try:
        resolution_bounds(shape.resolution)
    except ValueError as exc:
        _bad(dataset, f"resolution={raw.get('resolution')!r}: {exc}",
             "use 4k, 1080p, 720p, 360p, HEIGHTxWIDTH (e.g. 1080x1920) or random:256x256-1024x1024")
    if shape.format not in images.IMAGE_FORMATS:
        _bad(dataset, f"format={raw['format']!r} is not an image format bench_serving sends",
             f"use format={' or format='.join(images.IMAGE_FORMATS)}")
    if shape.content not in CONTENTS:
        _bad(dataset, f"content={raw['content']!r} is not random or blank", "use content=random or content=blank")
    return shape


def resolution_bounds(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """(min, max) (width, height) for bench_serving's ``--image-resolution`` forms; ValueError otherwise."""
    text = text.strip().lower()
    if text.startswith("random:"):
        low, sep, high = text[len("random:"):].partition("-")
        if not sep:
            raise ValueError("a random resolution is random:MINHxMINW-MAXHxMAXW")
        small, large = _size(low), _size(high)
        if small[0] > large[0] or small[1] > large[1]:
            raise ValueError("the minimum exceeds the maximum")
        return small, large
    size = _size(text)
    return size, size


def _size(text: str) -> tuple[int, int]:
    from pytest_sglang import images  # Pillow: loaded for image datasets only
    if text in PRESETS:
        return PRESETS[text]
    height, sep, width = text.partition("x")
    if not (sep and height.isdigit() and width.isdigit()):
        raise ValueError("not a preset (4k, 1080p, 720p, 360p) nor HEIGHTxWIDTH")
    h, w = int(height), int(width)
    if not (1 <= h <= images.MAX_SIDE and 1 <= w <= images.MAX_SIDE):
        raise ValueError(f"each side must be from 1 to {images.MAX_SIDE} pixels")
    return w, h


class ImagePool:
    """``shape.pool`` data URLs generated once from ``seed``; request ``index`` takes the next ones in turn."""

    def __init__(self, shape: ImageShape, seed: int) -> None:
        from pytest_sglang import images  # Pillow: loaded for image datasets only
        self.shape = shape
        rng = random.Random(f"images:{seed}")
        (min_w, min_h), (max_w, max_h) = shape.bounds()
        self.urls: list[str] = []
        total = 0
        for n in range(shape.pool):
            width, height = rng.randint(min_w, max_w), rng.randint(min_h, max_h)
            if shape.content == "blank":
                data = images.blank_image(width, height, shape.format)
            else:
                data = images.noise_image(width, height, shape.format, seed=rng.randrange(2**32))
            url = images.data_url(data, shape.format)
            total += len(url)
            if total > MAX_POOL_BYTES and n:
                raise ConfigError("LoadSpec.dataset", f"pool={shape.pool}",
                                  f"{n + 1} images of up to {max_w}x{max_h} take over "
                                  f"{MAX_POOL_BYTES // 2**20} MB encoded", f"give a smaller pool, e.g. pool={n}")
            self.urls.append(url)

    def take(self, index: int, rng: random.Random) -> tuple[str, ...]:
        count = rng.randint(1, self.shape.count) if self.shape.random_count else self.shape.count
        start = index * self.shape.count
        return tuple(self.urls[(start + k) % len(self.urls)] for k in range(count))


@functools.lru_cache(maxsize=1)
def image_pool(shape: ImageShape, seed: int) -> ImagePool:
    """The run's pool: a load builds its prompts several times (checks, warmup, shards), its images once.

    One pool is kept (the latest), so memory stays one pool's whatever the number of loads in a process.
    """
    return ImagePool(shape, seed)


def read_mmmu(path: Path, text: str) -> list[tuple[str, str]]:
    r"""(prompt, image data URL) per row of an MMMU-format JSONL file (``text`` is its content).

    A row is MMMU's: ``question`` and ``image_1``, a data URL or a PNG/JPEG file path (relative to the
    file). The prompt is bench_serving's ``Question: ...\n\nAnswer: ``.
    """
    rows: list[tuple[str, str]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _file_error(path, f"line {lineno} is not JSON ({exc.msg})") from None
        question = row.get("question") if isinstance(row, dict) else None
        image = row.get("image_1") if isinstance(row, dict) else None
        if not isinstance(question, str) or not isinstance(image, str) or not image:
            raise _file_error(path, f"line {lineno} has no question and image_1")
        rows.append((MMMU_PROMPT.format(question=question), _image_url(path, lineno, image)))
    if not rows:
        raise _file_error(path, "is empty")
    return rows


def _image_url(path: Path, lineno: int, image: str) -> str:
    from pytest_sglang import images  # Pillow: loaded for image datasets only
    if image.startswith("data:image/"):
        return image
    file = path.parent / image
    fmt = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg"}.get(file.suffix.lower())
    if fmt is None:
        raise _file_error(path, f"line {lineno}: image_1={image!r} is not a .png/.jpg file nor a data URL")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise _file_error(path, f"line {lineno}: image_1 {file} cannot be read ({exc.strerror})") from None
    return images.data_url(data, fmt)


def _file_error(path: Path, problem: str) -> ConfigError:
    return ConfigError("dataset", str(path), problem, _MMMU_FIX)


def _whole(dataset: str, key: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        _bad(dataset, f"{key}={raw!r} is not a whole number from {low} to {high}",
             f"give {key} as a whole number, e.g. {_FORM}")
    return value


def _bad(dataset: str, problem: str, fix: str) -> None:
    raise ConfigError("LoadSpec.dataset", dataset, problem, fix)
