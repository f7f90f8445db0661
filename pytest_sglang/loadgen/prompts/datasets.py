"""Prompts for a load: random token ids (exact lengths, no tokenizer), ShareGPT files, JSONL files.

Traces (``mooncake:``/``burstgpt:``) and ``multiturn`` build their requests in :mod:`.replay` and
:mod:`.sessions`; here a trace's rows are only checked (streaming, before anything is sent), and
their warmup requests are random-ids prompts.

Lengths are drawn as bench_serving does: uniformly in ``[max(int(L * range_ratio), 1), L]``.
"""

from __future__ import annotations

import contextlib
import json
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang.errors import ConfigError
from pytest_sglang.files import DEFAULT_CAP, read_capped_text
from pytest_sglang.loadgen.shape.spec import MAX_LEN, MAX_LOAD_S, LoadSpec, dataset_parts
from pytest_sglang.loadgen.workloads import traces
from pytest_sglang.loadgen.workloads.forms import TRACE_KINDS
from pytest_sglang.loadgen.workloads.imageset import ImagePool, image_pool, image_shape, read_mmmu

#: Rough characters per token for text prompts when no tokenizer is at hand (the server's own
#: ``prompt_tokens`` replaces the estimate once a request completes).
CHARS_PER_TOKEN = 4
_SHAREGPT_FIX = 'give a ShareGPT JSON list of {"conversations": [{"from": "human", "value": ...}, ...]}'
#: Largest dataset file read (ShareGPT V3, the largest in common use, is 0.6 GB: cut it to the prompts used).
MAX_DATASET_BYTES = DEFAULT_CAP
_JSONL_FIX = 'write one object per line, e.g. {"prompt": "Hello", "output_len": 64}'


#: A prompt: text, token ids (native/completions) or chat messages (JSON objects from a dataset file).
PromptValue = str | list[int] | list[dict[str, Any]]


@dataclass(frozen=True)
class Prompt:
    """One request's input: token ids (native/completions) or text, and the lengths asked for."""

    prompt: PromptValue
    prompt_len: int
    output_len: int
    #: Image data URLs sent with the prompt (image datasets; shared by requests, see :class:`.imageset.ImagePool`).
    images: tuple[str, ...] = ()


class PromptSource:
    """The prompt of request ``index``, built on demand and reproducible from ``spec.seed``.

    Each request draws from its own generator (seeded with the spec's seed and its index), so a
    load of any size needs memory for the prompts in flight only, and any process can build its
    share of a load without the others'. Dataset files are read once, here, so that a bad file is
    an error before anything is sent.
    """

    def __init__(self, spec: LoadSpec, *, seed_offset: int = 0) -> None:
        self.spec = spec
        self.seed = spec.seed + seed_offset
        kind, path = dataset_parts(spec.dataset)
        self._base: list[tuple[PromptValue, int | None]] | None = None
        #: The rows a trace replay will use (checked here, read again streaming during the load).
        self.trace: traces.TraceScan | None = None
        if kind in TRACE_KINDS:
            self.trace = check_trace(spec)
        elif kind == "sharegpt":
            self._base = list(_read_sharegpt(Path(path)))
        elif kind == "jsonl":
            self._base = _read_jsonl(Path(path))
        self._vocab = range(10, spec.vocab())
        self._pool: ImagePool | None = None
        self._mmmu: list[tuple[str, str]] | None = None
        if kind == "image":
            # Built before the clock starts, and once: the check, the warmup and the run share it.
            self._pool = image_pool(image_shape(spec.dataset), spec.seed)
        elif kind == "mmmu":
            self._mmmu = read_mmmu(Path(path), _read_text(Path(path), "mmmu"))

    def get(self, index: int) -> Prompt:
        rng = random.Random(f"{self.seed}:{index}")
        spec = self.spec
        if self._pool is not None:
            return _image_prompt(spec, rng, self._pool, index)
        if self._mmmu is not None:  # bench_serving's MMMU: the question, its image, output_len tokens
            question, url = self._mmmu[index % len(self._mmmu)]
            return Prompt(question, estimate_len(question), spec.output_len, (url,))
        if self._base is None:
            return _random_prompt(spec, rng, self._vocab)
        text, out_len = self._base[index % len(self._base)]
        length = out_len if out_len is not None else _draw(spec.output_len, spec.range_ratio, rng)
        return Prompt(text, estimate_len(text), length)


def check_trace(spec: LoadSpec, progress: Callable[[int], None] | None = None) -> traces.TraceScan:
    """Read (streaming) and check the rows of ``spec``'s trace that the load uses; ConfigError on a bad one.

    A row is bad too when it would be sent after :data:`~.spec.MAX_LOAD_S` (scaled): the load's deadline
    adds the trace's span, and must come. Checked once per file (:func:`.traces.scan` keeps the answer).
    """
    kind, path = dataset_parts(spec.dataset)
    return traces.scan(kind, path, spec.requests, scale=spec.trace_time_scale, max_s=MAX_LOAD_S, progress=progress)


def build_prompts(spec: LoadSpec, count: int | None = None, *, seed_offset: int = 0) -> list[Prompt]:
    """``count`` prompts (default ``spec.requests``) for ``spec``: a list, for tests and tools only."""
    source = PromptSource(spec, seed_offset=seed_offset)
    return [source.get(i) for i in range(spec.requests if count is None else count)]


def _draw(length: int, ratio: float, rng: random.Random) -> int:
    return rng.randint(max(int(length * ratio), 1), length)


def _random_prompt(spec: LoadSpec, rng: random.Random, vocab: range) -> Prompt:
    in_len = _draw(spec.input_len, spec.range_ratio, rng)
    out_len = _draw(spec.output_len, spec.range_ratio, rng)
    ids = rng.choices(vocab, k=in_len)
    if spec.api == "chat":
        # Chat takes text only: one short word per wanted token (the server reports the true count).
        return Prompt(" ".join(f"w{i % 97}" for i in ids), in_len, out_len)
    return Prompt(ids, in_len, out_len)


def _image_prompt(spec: LoadSpec, rng: random.Random, pool: ImagePool, index: int) -> Prompt:
    """bench_serving's image request: random text of the random dataset's lengths, then its images."""
    in_len = _draw(spec.input_len, spec.range_ratio, rng)
    out_len = _draw(spec.output_len, spec.range_ratio, rng)
    text = " ".join(f"w{rng.randrange(97)}" for _ in range(in_len))
    return Prompt(text, in_len, out_len, pool.take(index, rng))


def estimate_len(prompt: PromptValue) -> int:
    if isinstance(prompt, str):
        return max(1, len(prompt) // CHARS_PER_TOKEN)
    if prompt and isinstance(prompt[0], dict):
        return max(1, sum(len(str(m.get("content", ""))) for m in prompt) // CHARS_PER_TOKEN)
    return len(prompt)


def _load_error(path: Path, problem: str, fix: str) -> ConfigError:
    return ConfigError("dataset", str(path), problem, fix)


def _read_text(path: Path, kind: str) -> str:
    # A FIFO would be waited on (its open blocks until a writer comes) and a load reads the file more than once
    # (the command's check, the run's, the warmup's): a regular file only. stat() itself never blocks.
    with contextlib.suppress(OSError):  # a missing file: read_capped_text says so
        if not stat.S_ISREG(path.stat().st_mode):
            raise _load_error(path, "is not a regular file (a named pipe, a device or a directory); a load reads its "
                              "data set more than once", f"save the {kind} data set to a file")
    # Capped: the whole file is parsed into prompts held for the load (a 2.7 GB file reached MemoryError).
    return read_capped_text(path, option="dataset", cap=MAX_DATASET_BYTES,
                            fix=f"give an existing {kind} file, e.g. --dataset {kind}:data.json",
                            too_large_fix="keep the prompts the load uses, e.g. jq '.[:5000]' for ShareGPT")


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


def _read_jsonl(path: Path) -> list[tuple[PromptValue, int | None]]:
    """One JSON object per line: ``prompt`` (text or ids) or ``messages``; optional ``output_len``."""
    prompts: list[tuple[PromptValue, int | None]] = []
    for lineno, line in enumerate(_read_text(path, "jsonl").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _load_error(path, f"line {lineno} is not JSON ({exc.msg})", _JSONL_FIX) from None
        prompt = row.get("prompt", row.get("text", row.get("messages"))) if isinstance(row, dict) else None
        if not prompt or not isinstance(prompt, (str, list)):
            raise _load_error(path, f"line {lineno} has no prompt, text or messages", _JSONL_FIX)
        out_len = row.get("output_len")
        if out_len is not None and (isinstance(out_len, bool) or not isinstance(out_len, int)
                                    or not 1 <= out_len <= MAX_LEN):
            raise _load_error(path, f"line {lineno} has output_len={out_len!r}",
                              f"give output_len as a whole number from 1 to {MAX_LEN:,}")
        prompts.append((prompt, out_len))
    if not prompts:
        raise _load_error(path, "is empty", 'write one object per line, e.g. {"prompt": "Hello"}')
    return prompts
