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
sent; :func:`rows` yields them during the replay. The file is read twice, so it must be a regular file:
a FIFO (or a device) is refused before it is opened for reading, never waited on.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen.workloads.forms import MOONCAKE_BLOCK

#: Longest line read from a trace (a Mooncake line of a 1M-token prompt holds ~2,000 hash ids, ~20 KB).
MAX_LINE = 1024 * 1024
#: Token lengths above this are typos (as ``LoadSpec.MAX_LEN``; repeated to keep this module below spec).
MAX_TRACE_LEN = 1_048_576
_MOONCAKE_FIX = 'write one object per line: {"timestamp": 0, "input_length": 1024, "output_length": 64, ' \
                '"hash_ids": [0, 1]} (timestamp in ms)'
_BURSTGPT_FIX = "give BurstGPT's CSV: header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
#: :func:`scan` calls its ``progress`` every this many rows read (a 10-million-row check takes tens of seconds).
PROGRESS_ROWS = 65_536
_DECODE = json.JSONDecoder().decode
#: Opening a FIFO for reading without it returns at once (then it is refused) instead of waiting for a writer.
_NONBLOCK = 0 if sys.platform == "win32" else os.O_NONBLOCK
_INT = {int}


class TraceRow(NamedTuple):
    """One recorded request: seconds after the trace's first request, lengths, prefix blocks.

    A tuple, not a dataclass: a check builds one per row, up to 10 million (a frozen dataclass costs 3x).
    """

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


#: Checked traces: (kind, file identity, limit, scale, max_s) -> what :func:`scan` found. A load checks its
#: trace more than once (the command before the run, ``run_load``, the replay's row count); a 10-million-row
#: check takes tens of seconds, so it is done once. The file's identity (device, inode, size, mtime) is in
#: the key: an edited file is read again.
_SCANNED: dict[tuple[object, ...], TraceScan] = {}
_SCANNED_KEPT = 8


def _error(kind: str, path: Path, problem: str, fix: str) -> ConfigError:
    return ConfigError("dataset", f"{kind}:{path}", problem, fix)


def _open_regular(kind: str, path: Path) -> int:
    """A descriptor of ``path`` opened for reading; ConfigError unless it is a regular file.

    Opened non-blocking: opening a FIFO for reading otherwise waits for a writer, forever.
    """
    sample = f"{kind}:fixtures/traces/{kind}-sample.{'csv' if kind == 'burstgpt' else 'jsonl'}"
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK)
    except OSError as exc:
        raise _error(kind, path, f"cannot be read ({exc.strerror or type(exc).__name__})",
                     f"give an existing {kind} trace file, e.g. {sample}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device")
        raise _error(kind, path, f"is {what}, not a regular file (a trace is read twice: checked before "
                     "anything is sent, then streamed during the replay)", f"save the trace to a file, e.g. {sample}")
    return fd  # O_NONBLOCK changes nothing for a regular file: reads from it do not block


def _lines(kind: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, one at a time, each bounded by :data:`MAX_LINE`."""
    fh = open(_open_regular(kind, path), encoding="utf-8", errors="replace", newline="")
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
            row = _DECODE(line)
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
        # JSON numbers decode to int or float only (bool is its own type): the types' set, built in C.
        if not isinstance(ids, list) or (ids and not set(map(type, ids)) <= _INT):
            raise _error("mooncake", path, f"line {lineno} has hash_ids that are not a list of integers",
                         _MOONCAKE_FIX)
        first, last = _ordered("mooncake", path, lineno, stamp / 1000.0, first, last)
        if out == 0:  # nothing was generated when recorded: nothing to replay
            skipped[0] += 1
            continue
        # Blocks beyond the prompt cannot be part of it (a trace rounds the last block up).
        yield TraceRow(last - first, inp, out, tuple(ids[:-(-inp // MOONCAKE_BLOCK)]), lineno)


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
    missing = [c for c in _BURSTGPT_COLUMNS if c not in columns]
    if missing:
        raise _error("burstgpt", path, f"has no {', '.join(missing)} column{'s' if len(missing) > 1 else ''} in "
                     f"its header (found {', '.join(columns) or 'nothing'})", _BURSTGPT_FIX)
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


def scan(kind: str, path: str | Path, limit: int, *, scale: float = 1.0, max_s: float = math.inf,
         progress: Callable[[int], None] | None = None) -> TraceScan:
    """Read (streaming) and check the rows a load of ``limit`` requests uses; ConfigError on a bad row.

    ``max_s``: the latest a request may be sent, in seconds after the first at ``scale`` (a row beyond is
    an error naming its line: a deadline derived from it would never come). ``progress(rows_read)`` is
    called every :data:`PROGRESS_ROWS` rows. A trace already checked with the same arguments, and not
    changed since, is not read again.
    """
    key = _identity(kind, Path(path), limit, scale, max_s)
    if key is not None and key in _SCANNED:
        return _SCANNED[key]
    skipped = [0]
    count, span, skipped_used = 0, 0.0, 0
    seen: set[int] = set()
    shared: set[int] = set()
    for row in rows(kind, path, limit, skipped):
        count, span, skipped_used = count + 1, row.offset_s, skipped[0]
        if span * scale > max_s:
            raise _too_late(kind, Path(path), row, scale, max_s)
        if row.hash_ids and len(seen) < 100_000:  # bounded (a few MB): the figure is informative only
            shared.update(seen.intersection(row.hash_ids))
            seen.update(row.hash_ids)
        if progress is not None and not count % PROGRESS_ROWS:
            progress(count)
    if count == 0:
        raise _error(kind, Path(path), "holds no request to replay" + (f" ({skipped[0]} rows with 0 tokens skipped)"
                     if skipped[0] else ""), _MOONCAKE_FIX if kind == "mooncake" else _BURSTGPT_FIX)
    found = TraceScan(count, span, skipped[0], len(shared))
    if key is not None:
        _keep(key, found)
        if count < limit and skipped[0] == skipped_used:  # the whole file: a load of exactly its rows reads the same
            _keep((*key[:5], count, *key[6:]), found)
    return found


def _keep(key: tuple[object, ...], found: TraceScan) -> None:
    while len(_SCANNED) >= _SCANNED_KEPT:
        del _SCANNED[next(iter(_SCANNED))]
    _SCANNED[key] = found


def _identity(kind: str, path: Path, limit: int, scale: float, max_s: float) -> tuple[object, ...] | None:
    try:
        st = path.stat()
    except OSError:
        return None  # the scan says why it cannot be read
    return kind, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, limit, scale, max_s


def _too_late(kind: str, path: Path, row: TraceRow, scale: float, max_s: float) -> ConfigError:
    at = row.offset_s * scale
    scaled = f" (its trace time x trace_time_scale {scale:g})" if scale != 1.0 else ""
    return _error(kind, path, f"line {row.line} would be sent {at:,.0f} s ({_long(at)}) after the first request"
                  f"{scaled}, later than the longest load ({max_s:,.0f} s, {_long(max_s)})",
                  f"check the timestamps' unit ({'milliseconds' if kind == 'mooncake' else 'seconds'} in a "
                  f"{kind} trace); replay fewer rows (requests=N) or faster (trace_time_scale < 1)")


def _long(seconds: float) -> str:
    """``7.0 days`` / ``31,710 years``: a long time as a person reads it."""
    days = seconds / 86_400
    return f"{days / 365.25:,.0f} years" if days >= 3 * 365.25 else f"{days:,.1f} days" if days >= 1 \
        else f"{seconds / 3600:,.1f} hours"


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
