"""Trace check: the cost of checking a Mooncake trace before a replay, printed side by side.

(a) CPU seconds per million rows: :func:`traces.scan` (every check a row gets) vs the floor, a bare loop
    reading each line and ``json.loads``-ing it (what any check must do at least). Target: ratio <= 3.
(b) the checks a load makes before its replay (the command, ``run_load``, ``run_single``'s dataset check,
    the replay's row count, the warmup's prompt source): the first reads the file, the others must not.
    Target: the four later checks together take < 1 % of the first.

Run: ``python benchmarks/bench_trace_check.py [--rows 1000000] [--path trace.jsonl]``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.prompts.datasets import check_trace
from pytest_sglang.loadgen.workloads import traces


def write_trace(path: Path, rows: int) -> None:
    rng = random.Random(1)
    stamp = 0
    with path.open("w") as fh:
        for _ in range(rows):
            stamp += rng.randint(0, 50)
            blocks = rng.randint(1, 8)
            fh.write(json.dumps({"timestamp": stamp, "input_length": blocks * 512 - rng.randint(0, 300),
                                 "output_length": rng.randint(1, 400),
                                 "hash_ids": [rng.randint(0, 100_000) for _ in range(blocks)]}) + "\n")


def floor(path: Path) -> int:
    n = 0
    with path.open() as fh:
        for line in fh:
            json.loads(line)
            n += 1
    return n


def cpu(fn: object) -> tuple[float, object]:
    start = time.process_time()
    value = fn()  # type: ignore[operator]
    return time.process_time() - start, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--path", type=Path, default=None, help="an existing Mooncake trace (else one is written)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path or Path(tmp) / "trace.jsonl"
        if args.path is None:
            write_trace(path, args.rows)
        bare_s, rows = cpu(lambda: floor(path))
        spec = LoadSpec(dataset=f"mooncake:{path}", requests=10_000_000)
        first_s, found = cpu(lambda: check_trace(spec))
        again_s, _ = cpu(lambda: [check_trace(spec) for _ in range(4)])
        assert isinstance(rows, int) and isinstance(found, traces.TraceScan) and found.rows == rows
        per_m = 1e6 / rows
        print(f"rows: {rows:,} ({path.stat().st_size / 1e6:.0f} MB)")
        print(f"(a) CPU s per million rows: floor (readline + json.loads) {bare_s * per_m:.2f}, "
              f"check {first_s * per_m:.2f}, ratio {first_s / bare_s:.2f} (target <= 3)")
        print(f"(b) first check {first_s:.2f} s CPU; the 4 later checks {again_s * 1000:.2f} ms CPU "
              f"({100 * again_s / first_s:.3f} % of the first; target < 1 %)")


if __name__ == "__main__":
    main()
