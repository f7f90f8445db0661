"""Prompts for a load: random token ids (exact lengths, no tokenizer), ShareGPT files, JSONL files.

Lengths are drawn as bench_serving does: uniformly in ``[max(int(L * range_ratio), 1), L]``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.spec import LoadSpec, dataset_parts

#: Rough characters per token for text prompts when no tokenizer is at hand (the server's own
#: ``prompt_tokens`` replaces the estimate once a request completes).
CHARS_PER_TOKEN = 4
_SHAREGPT_FIX = 'give a ShareGPT JSON list of {"conversations": [{"from": "human", "value": ...}, ...]}'
_JSONL_FIX = 'write one object per line, e.g. {"prompt": "Hello", "output_len": 64}'


@dataclass(frozen=True)
class Prompt:
    """One request's input: token ids (native/completions) or text, and the lengths asked for."""

    prompt: str | list[int] | list[dict[str, Any]]
    prompt_len: int
    output_len: int


def build_prompts(spec: LoadSpec, count: int | None = None, *, seed_offset: int = 0) -> list[Prompt]:
    """``count`` prompts (default ``spec.requests``) for ``spec``, reproducible from ``spec.seed``."""
    n = spec.requests if count is None else count
    rng = random.Random(spec.seed + seed_offset)
    kind, path = dataset_parts(spec.dataset)
    if kind == "random-ids":
        return [_random_prompt(spec, rng) for _ in range(n)]
    base = _read_sharegpt(Path(path)) if kind == "sharegpt" else _read_jsonl(Path(path))
    out = []
    for i in range(n):
        text, out_len = base[i % len(base)]
        length = out_len if out_len is not None else _draw(spec.output_len, spec.range_ratio, rng)
        out.append(Prompt(text, _estimate_len(text), length))
    return out


def _draw(length: int, ratio: float, rng: random.Random) -> int:
    return rng.randint(max(int(length * ratio), 1), length)


def _random_prompt(spec: LoadSpec, rng: random.Random) -> Prompt:
    in_len = _draw(spec.input_len, spec.range_ratio, rng)
    out_len = _draw(spec.output_len, spec.range_ratio, rng)
    ids = [rng.randrange(10, spec.vocab_size) for _ in range(in_len)]
    if spec.api == "chat":
        # Chat takes text only: one short word per wanted token (the server reports the true count).
        return Prompt(" ".join(f"w{i % 97}" for i in ids), in_len, out_len)
    return Prompt(ids, in_len, out_len)


def _estimate_len(prompt: str | list[int] | list[dict[str, Any]]) -> int:
    if isinstance(prompt, str):
        return max(1, len(prompt) // CHARS_PER_TOKEN)
    if prompt and isinstance(prompt[0], dict):
        return max(1, sum(len(str(m.get("content", ""))) for m in prompt) // CHARS_PER_TOKEN)  # type: ignore[union-attr]
    return len(prompt)


def _load_error(path: Path, problem: str, fix: str) -> ConfigError:
    return ConfigError("dataset", str(path), problem, fix)


def _read_text(path: Path, kind: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _load_error(
            path,
            f"cannot read the {kind} file ({exc.strerror or exc})",
            f"give an existing {kind} file, e.g. --dataset {kind}:data.json",
        ) from None


def _read_sharegpt(path: Path) -> list[tuple[str, int | None]]:
    """First human turn of each conversation with at least two turns (as bench_serving)."""
    try:
        data = json.loads(_read_text(path, "sharegpt"))
    except json.JSONDecodeError as exc:
        raise _load_error(path, f"is not JSON ({exc.msg} at line {exc.lineno})", _SHAREGPT_FIX) from None
    prompts: list[tuple[str, int | None]] = []
    for item in data if isinstance(data, list) else []:
        turns = item.get("conversations") if isinstance(item, dict) else None
        if isinstance(turns, list) and len(turns) >= 2 and isinstance(turns[0], dict):
            text = turns[0].get("value")
            if isinstance(text, str) and text.strip():
                prompts.append((text, None))
    if not prompts:
        raise _load_error(path, "holds no conversation with two turns", _SHAREGPT_FIX)
    return prompts


def _read_jsonl(path: Path) -> list[tuple[Any, int | None]]:
    """One JSON object per line: ``prompt`` (text or ids) or ``messages``; optional ``output_len``."""
    prompts: list[tuple[Any, int | None]] = []
    for lineno, line in enumerate(_read_text(path, "jsonl").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _load_error(path, f"line {lineno} is not JSON ({exc.msg})", _JSONL_FIX) from None
        prompt = row.get("prompt", row.get("text", row.get("messages"))) if isinstance(row, dict) else None
        if not prompt:
            raise _load_error(path, f"line {lineno} has no prompt, text or messages", _JSONL_FIX)
        out_len = row.get("output_len")
        prompts.append((prompt, int(out_len) if out_len is not None else None))
    if not prompts:
        raise _load_error(path, "is empty", 'write one object per line, e.g. {"prompt": "Hello"}')
    return prompts
