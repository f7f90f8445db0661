r"""``gsm8k`` from a local file in the dataset's layouts, or from the Hugging Face hub.

Layouts: JSON lines as the dataset ships them (``{"question": ..., "answer": "... #### 42"}``) and the
hub's parquet (``openai/gsm8k`` ``main/test-00000-of-00001.parquet``, the same two columns); without
a file the hub's test split is used (:mod:`~pytest_sglang.accuracy.hub`).

Follows SGLang's harness (``run_eval --eval-name gsm8k``): the first ``shots`` rows are the few-shot
examples and are not scored; the prompt is ``Question: ...\nAnswer:`` blocks; the answer is the last
number of the output (commas removed), compared with the last number of the reference solution.
"""

from __future__ import annotations

import json
from pathlib import Path

from pytest_sglang.accuracy import hub
from pytest_sglang.accuracy.task import Example, Task, last_number, qa_prompt, take
from pytest_sglang.errors import ConfigError
from pytest_sglang.files import DEFAULT_CAP, read_capped_text

#: Bytes read from a data file at most (the full gsm8k test split is ~0.7 MB).
MAX_FILE_BYTES = DEFAULT_CAP


def read_rows(path: Path) -> list[Example]:
    """The rows of a gsm8k JSONL or parquet file."""
    if path.suffix == ".parquet":
        return [_example(row, path, f"row {n}") for n, row in
                enumerate(hub.read_parquet(path, ("question", "answer"), "gsm8k"), start=1)]
    rows: list[Example] = []
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"gsm8k data {path}", f"line {n}", f"is not JSON ({exc})",
                              "pass the dataset's JSONL file (one object per line)") from None
        rows.append(_example(row, path, f"line {n}"))
    return rows


def _example(row: object, path: Path, where: str) -> Example:
    question, answer = (row.get(k) if isinstance(row, dict) else None for k in ("question", "answer"))
    target = last_number(answer) if isinstance(answer, str) else None
    if not isinstance(question, str) or not isinstance(answer, str) or target is None:
        raise ConfigError(f"gsm8k data {path}", where, 'lacks "question" or an "answer" ending in a number',
                          'use the gsm8k layout: {"question": "...", "answer": "... #### 42"}')
    return Example(question=question, answer=answer, target=target)


def _read_text(path: Path) -> str:
    return read_capped_text(path, option="eval data", cap=MAX_FILE_BYTES,
                            fix="pass an existing file (--sglang-eval-data / --data)",
                            too_large_fix="pass the dataset's test split, not a whole corpus")


def task(path: Path | None, num_examples: int | str, shots: int, *, hub_timeout_s: float = hub.HUB_TIMEOUT_S) -> Task:
    """The gsm8k task from ``path``, or from the hub's test split when ``path`` is None."""
    if path is None:
        data = hub.fetch("gsm8k", hub_timeout_s)
        path, source = data.paths[0], data.source
    else:
        source = str(path)
    rows = read_rows(path)
    if len(rows) <= shots:
        raise ConfigError(f"gsm8k data {source}", f"{len(rows)} rows", f"leaves nothing to score after {shots} shots",
                          "pass a larger file or fewer shots")
    examples = take(rows[shots:], num_examples, source, f" after {shots} few-shot rows")
    return Task(name="gsm8k", examples=examples, shot_pool=rows[:shots], prompt=qa_prompt,
                extract=last_number, template="gsm8k-qa", source=source)
