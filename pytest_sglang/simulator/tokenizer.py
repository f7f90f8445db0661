r"""A deterministic stand-in tokenizer (no model files needed).

Encoding: the text is split with the regex ``\s*[^\s]{1,4}`` (optional leading whitespace, then up to
4 non-space characters), i.e. roughly one token per 4 characters of a word, like BPE on English.
Each piece maps to ``1000 + crc32(piece) % 31000``, so the same text always gives the same ids and a
shared text prefix gives a shared id prefix (what the radix cache needs). Chat messages are rendered
as ``<|role|>\ncontent\n`` per message plus ``<|assistant|>\n`` before tokenizing.

Generation: output token ``k`` of a request is ``VOCAB[(seed + 7919 * k) % len(VOCAB)]`` where the seed
is derived from the prompt's last ids and ``--random-seed``; every vocabulary entry is a short word with
a leading space, so the text of ``n`` tokens is the concatenation of ``n`` entries. EOS is id 2.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

EOS_TOKEN_ID = 2
VOCAB_SIZE = 32000
_PIECE = re.compile(r"\s*[^\s]{1,4}|\s+")

_WORDS = (
    "the of and to in is was for on that with as by at from his it an were are which this be or has "
    "had not but they their one all its new also after first two been more who have other time when "
    "there into year can only over some most city may such would these most made where state world "
    "used many part then well while both known three under later could use between during same area "
    "each around before since work team found began following school called being against took film "
    "early war several until number second through life season based high family including league"
).split()
#: (token id, text) of the output vocabulary; ids are stable and outside the prompt hash range.
VOCAB: tuple[tuple[int, str], ...] = tuple((100 + i, " " + w) for i, w in enumerate(_WORDS))


def encode(text: str) -> list[int]:
    """Token ids of ``text`` (deterministic, see module docstring)."""
    return [1000 + zlib.crc32(p.encode()) % 31000 for p in _PIECE.findall(text)]


#: Markup the simulated models write as ONE token each (special tokens of real chat models).
SPECIAL: dict[str, int] = {
    text: 10 + i
    for i, text in enumerate(
        (
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "<|python_tag|>",
            "[TOOL_CALLS]",
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁calls▁end｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁sep｜>",
        )
    )
}


def pieces(text: str, *, special: bool = False) -> list[tuple[int, str]]:
    """(id, text) of each token of ``text``; their texts concatenate back to ``text`` exactly.

    ``special``: ``text`` is one special token (``<think>``...), written as a single id.
    """
    if special and text in SPECIAL:
        return [(SPECIAL[text], text)]
    return [(1000 + zlib.crc32(p.encode()) % 31000, p) for p in _PIECE.findall(text)]


def mix(seed: int, key: int) -> int:
    """A generation seed derived from ``seed`` and a sampling key (``sampling_seed`` or a draw)."""
    return zlib.crc32(f"{seed}:{key}".encode())


def other_seed(seed: int, key: int) -> int:
    """A seed whose every output token differs from ``seed``'s (a wrong KV never decodes the right text by luck)."""
    other = mix(seed, key)
    if (other - seed) % len(VOCAB) == 0:  # the same tokens; 1 in len(VOCAB) keys would be a silent success
        other += 1
    return other


def unit(seed: int, k: int) -> float:
    """A deterministic draw in [0, 1) for output position ``k`` of the request seeded ``seed``."""
    return zlib.crc32(f"u{seed}:{k}".encode()) / 2**32


def render_chat(messages: Sequence[object]) -> str:
    """The prompt text of an OpenAI ``messages`` list (content parts of type text are joined)."""
    parts: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{msg.get('role', 'user')}|>\n{content or ''}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


def output_seed(prompt_ids: Sequence[int], random_seed: int) -> int:
    tail = ",".join(map(str, prompt_ids[-8:]))
    return zlib.crc32(f"{random_seed}:{len(prompt_ids)}:{tail}".encode())


def output_token(seed: int, k: int) -> tuple[int, str]:
    """The ``k``-th generated token (id, text) of a request whose generation seed is ``seed``."""
    return VOCAB[(seed + 7919 * k) % len(VOCAB)]


def natural_length(seed: int) -> int:
    """How many tokens the simulated model writes before EOS when ``ignore_eos`` is false (64..255)."""
    return 64 + seed % 192
