r"""``gsm8k`` from a local JSONL file (the dataset's own layout: ``{"question": ..., "answer": "... #### 42"}``).

Follows SGLang's harness (``run_eval --eval-name gsm8k``): the first ``shots`` rows are the few-shot
examples and are not scored; the prompt is ``Question: ...\nAnswer:`` blocks; the answer is the last
number of the output (commas removed), compared with the last number of the reference solution.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_sglang.accuracy.task import Example, Task, last_number, qa_prompt
from pytest_sglang.errors import ConfigError

#: Bytes read from a data file at most (the full gsm8k test split is ~0.7 MB).
MAX_FILE_BYTES = 64 * 1024 * 1024


def read_rows(path: Path) -> list[Example]:
    data = _read_text(path)
    rows: list[Example] = []
    for n, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"gsm8k data {path}", f"line {n}", f"is not JSON ({exc})",
                              "pass the dataset's JSONL file (one object per line)") from None
        question, answer = (row.get(k) if isinstance(row, dict) else None for k in ("question", "answer"))
        target = last_number(answer) if isinstance(answer, str) else None
        if not isinstance(question, str) or not isinstance(answer, str) or target is None:
            raise ConfigError(f"gsm8k data {path}", f"line {n}", 'lacks "question" or an "answer" ending in a number',
                              'use the gsm8k layout: {"question": "...", "answer": "... #### 42"}')
        rows.append(Example(question=question, answer=answer, target=target))
    return rows


def _read_text(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError("eval data", str(path), f"cannot be read ({exc.strerror or exc})",
                          "pass an existing file (--sglang-eval-data / --data)") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError("eval data", str(path), f"is larger than {MAX_FILE_BYTES // 2**20} MiB",
                          "pass the dataset's test split, not a whole corpus")
    return raw.decode("utf-8", "replace")


def task(path: Path, num_examples: int, shots: int) -> Task:
    rows = read_rows(path)
    if len(rows) <= shots:
        raise ConfigError(f"gsm8k data {path}", f"{len(rows)} rows", f"leaves nothing to score after {shots} shots",
                          "pass a larger file or fewer shots")
    return Task(name="gsm8k", examples=rows[shots:][:num_examples], shot_pool=rows[:shots], prompt=qa_prompt,
                extract=last_number, template="gsm8k-qa", source=str(path))
