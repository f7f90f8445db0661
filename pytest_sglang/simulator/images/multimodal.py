"""A request's images as the served model takes them: prompt tokens, vision-encoder time, what it sees.

Each image becomes its processor's token count of one pad id derived from its content (0.5.23 pads
with a value from the image's hash), so the radix cache shares an image's tokens only with the same
image, and ``cached_tokens`` reports a repeated prefix with images as 0.5.23 does. The vision encoder
costs simulated time per patch (an eighth of a prefill token's time each: an image costs about half as
much as prefilling its tokens; ``--sim-fault vision-slow:F`` multiplies it). 0.5.23's multimodal
embedding cache (``SGLANG_VLM_CACHE_SIZE_MB``, 100 MB, least recently used out) is kept by content
digest: an image already in it spends no encoder time.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pytest_sglang.sglang.vision import Processor
from pytest_sglang.simulator import tokenizer
from pytest_sglang.simulator.images.reader import ImageReader, ImageRefused, Seen

#: Patches the encoder runs per prefill token's time.
PATCHES_PER_PREFILL_TOKEN = 8.0


class EmbeddingCache:
    """0.5.23's multimodal embedding cache: image digests, each costing its embedding's bytes."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self.used = 0
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, int] = OrderedDict()

    def lookup(self, digest: str, nbytes: int) -> bool:
        """True on a hit; on a miss the embedding is stored (evicting the least recently used)."""
        if digest in self._entries:
            self._entries.move_to_end(digest)
            self.hits += 1
            return True
        self.misses += 1
        if nbytes <= self.budget:
            self._entries[digest] = nbytes
            self.used += nbytes
            while self.used > self.budget:
                self.used -= self._entries.popitem(last=False)[1]
        return False


def _cache_budget() -> int:
    raw = os.environ.get("SGLANG_VLM_CACHE_SIZE_MB", "100")
    try:
        return max(0, int(raw)) * 1024 * 1024
    except ValueError:
        return 100 * 1024 * 1024


@dataclass
class Media:
    """The server's image state: recently decoded images and the embedding cache."""

    reader: ImageReader = field(default_factory=ImageReader)
    cache: EmbeddingCache = field(default_factory=lambda: EmbeddingCache(_cache_budget()))
    images: int = 0  # images served (after refusals)
    #: decoding runs off the event loop (Pillow releases the GIL), one image request at a time, as
    #: 0.5.23's tokenizer manager awaits its processor; one thread keeps the state above unshared
    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="sim-images")
    )


@dataclass(frozen=True)
class Prepared:
    ids: list[int]
    #: what the model sees in each image (its dominant colour); None: no image reached the model
    sees: tuple[str | None, ...] | None
    encoder_s: float  # simulated seconds (before --sim-time-scale)
    image_tokens: int


def pad_id(digest: str) -> int:
    """The prompt id every token of an image gets: from its content, within the tokenizer's id range."""
    return 1000 + int(digest[:8], 16) % 31000


def placeholder_error(processor: Processor, found: int, images: int) -> str:
    """0.5.23's message when /generate text and ``image_data`` disagree in count."""
    if processor.name == "kimi-k2.5":
        return ("Kimi image placeholders must map one-to-one to image data: "
                f"expected {images}, found {found} token(s)")
    return f"Prompt has {found} image placeholders but {images} image inputs were provided"


def prepare(
    media: Media,
    processor: Processor,
    text: str,
    sources: Sequence[str],
    *,
    prefill_tok_s: float,
    miscount: bool = False,
    ignored: bool = False,
    slow: float = 1.0,
) -> Prepared:
    """Token ids of ``text`` whose placeholders (one per source) become the images' tokens.

    Raises ImageRefused with 0.5.23's message for an image it refuses or a placeholder count mismatch.
    """
    parts = text.split(processor.placeholder)
    if len(parts) - 1 != len(sources):
        raise ImageRefused(placeholder_error(processor, len(parts) - 1, len(sources)))
    seen: list[Seen] = media.reader.read(sources, processor, miscount=miscount)
    ids = tokenizer.encode(parts[0])
    encoder_s = 0.0
    for image, after in zip(seen, parts[1:], strict=True):
        ids += [pad_id(image.digest)] * image.grid.tokens
        ids += tokenizer.encode(after)
        if not media.cache.lookup(image.digest, image.grid.tokens * processor.embedding_bytes_per_token):
            encoder_s += image.grid.patches / (PATCHES_PER_PREFILL_TOKEN * prefill_tok_s) * slow
    media.images += len(seen)
    sees = None if ignored or not seen else tuple(image.colour for image in seen)
    return Prepared(ids, sees, encoder_s, sum(image.grid.tokens for image in seen))


async def prepare_async(media: Media, processor: Processor, text: str, sources: Sequence[str], *,
                        prefill_tok_s: float, miscount: bool = False, ignored: bool = False,
                        slow: float = 1.0) -> Prepared:
    """:func:`prepare` on the media thread: the event loop keeps serving while an image decodes."""
    call = functools.partial(prepare, media, processor, text, sources, prefill_tok_s=prefill_tok_s,
                             miscount=miscount, ignored=ignored, slow=slow)
    return await asyncio.get_running_loop().run_in_executor(media.executor, call)


def render_chat(messages: Sequence[object], placeholder: str) -> str:
    """The chat prompt with each image part written as the processor's placeholder (the chat template's)."""
    rendered: list[object] = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(msg, dict) and isinstance(content, list):
            parts = [
                {"type": "text", "text": placeholder} if isinstance(p, dict) and p.get("type") == "image_url" else p
                for p in content
            ]
            msg = {**msg, "content": parts}
        rendered.append(msg)
    return tokenizer.render_chat(rendered)
