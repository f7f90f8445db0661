"""Recorded traces, read streaming: Mooncake JSONL and BurstGPT CSV rows -> :class:`TraceRow`.

Formats (as published, and as SGLang's bench_serving reads Mooncake):

* **Mooncake** (``mooncake:PATH``): one JSON object per line, ``{"timestamp": <ms>, "input_length": N,
  "output_length": M, "hash_ids": [h0, h1, ...]}``. Each hash id names one block of
  :data:`~.workloads.MOONCAKE_BLOCK` (512) prompt tokens; requests that share leading hash ids share
  that prompt prefix. Rows with ``output_length`` 0 are skipped and counted.
* **BurstGPT** (``burstgpt:PATH``): CSV with the header ``Timestamp,Model,Request tokens,Response
  tokens,Total tokens,Log Type``; ``Timestamp`` in seconds. It has no prefix information: every prompt
  is distinct. Rows with 0 response tokens (requests that failed when recorded) are skipped and counted.

A file is never read whole: rows are read one line at a time (a line longer than :data:`MAX_LINE` is an
error), and no more rows than the load's ``requests`` are read. Timestamps must not go backwards (the
replay streams, so it cannot sort). :func:`scan` checks the rows a load will use before anything is
sent; :func:`rows` yields them during the replay.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.workloads import MOONCAKE_BLOCK

#: Longest line read from a trace (a Mooncake line of a 1M-token prompt holds ~2,000 hash ids, ~20 KB).
MAX_LINE = 1024 * 1024
#: Token lengths above this are typos (as ``LoadSpec.MAX_LEN``; repeated to keep this module below spec).
MAX_TRACE_LEN = 1_048_576
_MOONCAKE_FIX = 'write one object per line: {"timestamp": 0, "input_length": 1024, "output_length": 64, ' \
                '"hash_ids": [0, 1]} (timestamp in ms)'
_BURSTGPT_FIX = "give BurstGPT's CSV: header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


@dataclass(frozen=True)
class TraceRow:
    """One recorded request: seconds after the trace's first request, lengths, prefix blocks."""

    offset_s: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class TraceScan:
    """What :func:`scan` found in the rows a load will use."""

    rows: int
    #: Seconds from the first used row to the last (unscaled).
    span_s: float
    #: Rows skipped as failed in the recording (BurstGPT rows with 0 response tokens).
    skipped: int
    #: Hash ids that occur in more than one row (prefix blocks the trace reuses).
    shared_blocks: int


def _error(kind: str, path: Path, problem: str, fix: str) -> ConfigError:
    return ConfigError("dataset", f"{kind}:{path}", problem, fix)


def _lines(kind: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, one at a time, each bounded by :data:`MAX_LINE`."""
    try:
        fh = open(path, encoding="utf-8", errors="replace", newline="")
    except OSError as exc:
        raise _error(kind, path, f"cannot be read ({exc.strerror or type(exc).__name__})",
                     f"give an existing {kind} trace file, e.g. {kind}:fixtures/traces/{kind}-sample."
                     f"{'csv' if kind == 'burstgpt' else 'jsonl'}") from None
    with fh:
        lineno = 0
        while True:
            line = fh.readline(MAX_LINE + 1)
            if not line:
                return
            lineno += 1
            if len(line) > MAX_LINE:
                raise _error(kind, path, f"line {lineno} is longer than {MAX_LINE:,} characters",
                             "give a trace with one request per line")
            yield lineno, line


def _whole(value: object, low: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and low <= value <= MAX_TRACE_LEN else None


def _mooncake(path: Path, skipped: list[int]) -> Iterator[TraceRow]:
    first: float | None = None
    last = -math.inf
    for lineno, line in _lines("mooncake", path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _error("mooncake", path, f"line {lineno} is not JSON ({exc.msg})", _MOONCAKE_FIX) from None
        if not isinstance(row, dict):
            raise _error("mooncake", path, f"line {lineno} is not a JSON object", _MOONCAKE_FIX)
        stamp = row.get("timestamp")
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp):
            raise _error("mooncake", path, f"line {lineno} has timestamp={stamp!r}", _MOONCAKE_FIX)
        inp, out = _whole(row.get("input_length"), 1), _whole(row.get("output_length"), 0)
        if inp is None or out is None:
            raise _error("mooncake", path, f"line {lineno} has input_length={row.get('input_length')!r}, "
                         f"output_length={row.get('output_length')!r}",
                         f"give input_length from 1 and output_length from 0 to {MAX_TRACE_LEN:,}")
        ids = row.get("hash_ids", [])
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
            raise _error("mooncake", path, f"line {lineno} has hash_ids that are not a list of integers",
                         _MOONCAKE_FIX)
        first, last = _ordered("mooncake", path, lineno, stamp / 1000.0, first, last)
        if out == 0:  # nothing was generated when recorded: nothing to replay
            skipped[0] += 1
            continue
        # Blocks beyond the prompt cannot be part of it (a trace rounds the last block up).
        keep = math.ceil(inp / MOONCAKE_BLOCK)
        yield TraceRow(last - first, inp, out, tuple(ids[:keep]), lineno)


def _ordered(kind: str, path: Path, lineno: int, stamp: float, first: float | None,
             last: float) -> tuple[float, float]:
    if stamp < last:
        raise _error(kind, path, f"line {lineno} goes back in time ({stamp:g} s after {last:g} s)",
                     "sort the trace by timestamp (the replay streams the file, so it cannot sort it)")
    return (stamp if first is None else first), stamp


def _burstgpt(path: Path, skipped: list[int]) -> Iterator[TraceRow]:
    lines = _lines("burstgpt", path)
    reader = csv.reader(text for _, text in lines)
    header = next(reader, None)
    columns = {name.strip(): i for i, name in enumerate(header or [])}
    if not all(c in columns for c in _BURSTGPT_COLUMNS):
        raise _error("burstgpt", path, f"has no {', '.join(_BURSTGPT_COLUMNS)} columns in its header "
                     f"(found {', '.join(columns) or 'nothing'})", _BURSTGPT_FIX)
    at, req, resp = (columns[c] for c in _BURSTGPT_COLUMNS)
    first: float | None = None
    last = -math.inf
    for cells in reader:
        lineno = reader.line_num
        if not cells:
            continue
        try:
            stamp, inp, out = float(cells[at]), int(float(cells[req])), int(float(cells[resp]))
        except (ValueError, IndexError):
            raise _error("burstgpt", path, f"line {lineno} has no numeric Timestamp, Request tokens and Response "
                         "tokens", _BURSTGPT_FIX) from None
        if not math.isfinite(stamp) or not (0 <= inp <= MAX_TRACE_LEN and 0 <= out <= MAX_TRACE_LEN):
            raise _error("burstgpt", path, f"line {lineno} has Timestamp={cells[at]!r}, Request tokens={inp}, "
                         f"Response tokens={out}", f"token counts are whole numbers up to {MAX_TRACE_LEN:,}")
        first, last = _ordered("burstgpt", path, lineno, stamp, first, last)
        if inp == 0 or out == 0:  # failed in the recording: nothing to replay
            skipped[0] += 1
            continue
        yield TraceRow(last - first, inp, out, (), lineno)


def rows(kind: str, path: str | Path, limit: int, skipped: list[int] | None = None) -> Iterator[TraceRow]:
    """The first ``limit`` rows of the trace, read one at a time; ``skipped[0]`` counts skipped rows."""
    counter = skipped if skipped is not None else [0]
    source = _mooncake(Path(path), counter) if kind == "mooncake" else _burstgpt(Path(path), counter)
    if limit < 1:
        return
    for n, row in enumerate(source, 1):
        yield row
        if n >= limit:  # before reading another line: rows beyond the load are never read
            return


def scan(kind: str, path: str | Path, limit: int) -> TraceScan:
    """Read (streaming) and check the rows a load of ``limit`` requests uses; ConfigError on a bad row."""
    skipped = [0]
    count, span = 0, 0.0
    seen: set[int] = set()
    shared: set[int] = set()
    for row in rows(kind, path, limit, skipped):
        count, span = count + 1, row.offset_s
        if len(seen) < 100_000:  # bounded (a few MB): the figure is informative only
            shared.update(h for h in row.hash_ids if h in seen)
            seen.update(row.hash_ids)
    if count == 0:
        raise _error(kind, Path(path), "holds no request to replay" + (f" ({skipped[0]} rows with 0 tokens skipped)"
                     if skipped[0] else ""), _MOONCAKE_FIX if kind == "mooncake" else _BURSTGPT_FIX)
    return TraceScan(count, span, skipped[0], len(shared))


def block_ids(hash_id: int, vocab_size: int, length: int = MOONCAKE_BLOCK) -> list[int]:
    """The token ids of prefix block ``hash_id``: the same block for the same id, in every request."""
    rng = random.Random(f"block:{hash_id}")
    return rng.choices(range(10, vocab_size), k=length)


def prompt_ids(row: TraceRow, vocab_size: int, seed: int) -> list[int]:
    """``row.input_len`` token ids: its hash-id blocks in order, then tokens unique to the request."""
    ids: list[int] = []
    for h in row.hash_ids:
        ids.extend(block_ids(h, vocab_size, min(MOONCAKE_BLOCK, row.input_len - len(ids))))
    if len(ids) < row.input_len:
        rng = random.Random(f"{seed}:tail:{row.line}")
        ids.extend(rng.choices(range(10, vocab_size), k=row.input_len - len(ids)))
    return ids


def ids_text(ids: list[int]) -> str:
    """Text for the chat API, one short word per token id (so equal id prefixes give equal text prefixes)."""
    return " ".join(f"w{i % 97}" for i in ids)
