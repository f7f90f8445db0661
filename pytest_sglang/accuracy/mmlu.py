"""``mmlu`` from local files, in the layouts the dataset ships in.

Layouts read: Hendrycks' CSVs without a header (``question,A,B,C,D,answer``; the subject from the
file name ``<subject>_test.csv``; a directory is searched for ``*_test.csv``, and ``*_dev.csv`` rows
become the few-shot pool), the simple-evals ``mmlu.csv`` with a ``Question,A,B,C,D,Answer,Subject``
header, JSON lines as exported from the Hugging Face dataset (``question``, ``choices``, ``answer``
as an index or letter, ``subject``), and the hub's parquet files (``cais/mmlu`` ``all/test-*.parquet``,
the same columns; a sibling ``dev-*.parquet`` becomes the few-shot pool). Without a file, the hub's
``all`` test and dev splits are used (:mod:`~pytest_sglang.accuracy.hub`).

Prompts: with 0 shots, openai/simple-evals' multiple-choice template (what SGLang's ``run_eval``
used) and its ``Answer: X`` extraction; with shots, the classic few-shot format of SGLang's
``benchmark/mmlu`` ("The following are multiple choice questions (with answers) about ...").
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

from pytest_sglang.accuracy import hub
from pytest_sglang.accuracy.gsm8k import MAX_FILE_BYTES, _read_text
from pytest_sglang.accuracy.task import Example, Task, take
from pytest_sglang.errors import ConfigError
from pytest_sglang.files import size_text

LETTERS = ("A", "B", "C", "D")
#: simple-evals' QUERY_TEMPLATE_MULTICHOICE and ANSWER_PATTERN_MULTICHOICE.
ZERO_SHOT = (
    "Answer the following multiple choice question. The last line of your response should be of the "
    "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step "
    "before answering.\n\n{question}\n\nA) {A}\nB) {B}\nC) {C}\nD) {D}"
)
_ANSWER = re.compile(r"(?i)Answer\s*:\s*([A-D])")
_LEADING = re.compile(r"^\s*\(?([A-D])\b")


def _subject(name: str) -> str:
    return name.replace("_", " ").strip()


def _row(cells: Sequence[str], subject: str, where: str) -> Example:
    question, *choices, answer = (c.strip() for c in cells[:6])
    letter = answer.upper()
    if len(choices) != 4 or letter not in LETTERS:
        raise ConfigError("mmlu data", where, f"has answer {answer!r} or {len(choices)} choices",
                          "use the layout question,A,B,C,D,answer with the answer a letter A-D")
    return Example(question=question, answer=letter, target=letter, subject=subject, choices=tuple(choices))


def _csv(path: Path, subject: str) -> list[Example]:
    rows = list(csv.reader(io.StringIO(_read_text(path))))
    head = [c.strip() for c in rows[0]] if rows else []
    if "Question" in head:  # the simple-evals layout (an unnamed index column may come first)
        at = {name: head.index(name) for name in ("Question", "A", "B", "C", "D", "Answer") if name in head}
        if len(at) < 6:
            raise ConfigError("mmlu data", str(path), f"has header {head}", "use Question,A,B,C,D,Answer[,Subject]")
        sub = head.index("Subject") if "Subject" in head else None
        return [_row([r[at[k]] for k in ("Question", "A", "B", "C", "D", "Answer")],
                     _subject(r[sub]) if sub is not None else subject, f"{path}:{n}")
                for n, r in enumerate(rows[1:], start=2) if r]
    return [_row(r, subject, f"{path}:{n}") for n, r in enumerate(rows, start=1) if len(r) >= 6]


def _jsonl(path: Path) -> list[Example]:
    out = []
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ConfigError("mmlu data", f"{path}:{n}", "is not JSON", "one JSON object per line") from None
        out.append(_record(row, f"{path}:{n}"))
    return out


def _parquet(path: Path) -> list[Example]:
    rows = hub.read_parquet(path, ("question", "subject", "choices", "answer"), "mmlu")
    return [_record(row, f"{path} row {n}") for n, row in enumerate(rows, start=1)]


def _record(row: object, where: str) -> Example:
    """One row of the Hugging Face layout: ``choices`` a list of 4, ``answer`` an index 0-3 or a letter."""
    if not isinstance(row, dict):
        raise ConfigError("mmlu data", where, "is not an object", 'use {"question", "choices", "answer", "subject"}')
    choices, answer = row.get("choices"), row.get("answer")
    letter = LETTERS[answer] if isinstance(answer, int) and 0 <= answer < 4 else str(answer)
    if not isinstance(choices, list) or len(choices) != 4:
        raise ConfigError("mmlu data", where, "has no list of 4 choices", 'use {"choices": [4 strings]}')
    return _row([str(row.get("question", "")), *map(str, choices), letter], _subject(str(row.get("subject", ""))),
                where)


def _subject_of(path: Path, suffix: str) -> str:
    return _subject(path.stem[: -len(suffix)] if path.stem.endswith(suffix) else path.stem)


def read(path: Path) -> tuple[list[Example], list[Example]]:
    """``(examples, shot_pool)`` from a file or a Hendrycks-style directory."""
    if path.is_dir():
        tests = sorted(path.rglob("*_test.csv"))
        if not tests:
            raise ConfigError("mmlu data", str(path), "holds no *_test.csv file", "pass the data/ folder of MMLU")
        dev = sorted(path.rglob("*_dev.csv"))
        total = sum(p.stat().st_size for p in (*tests, *dev))
        if total > MAX_FILE_BYTES:  # each file is capped when read; the folder is read whole too
            raise ConfigError("eval data", str(path), f"holds {size_text(total)} of *_test.csv and *_dev.csv, "
                              f"more than the {size_text(MAX_FILE_BYTES)} cap", "pass MMLU's data/ folder only")
        return ([e for p in tests for e in _csv(p, _subject_of(p, "_test"))],
                [e for p in dev for e in _csv(p, _subject_of(p, "_dev"))])
    if path.suffix in (".jsonl", ".json"):
        return _jsonl(path), []
    if path.suffix == ".parquet":  # the hub's layout: <split>-00000-of-00001.parquet, dev beside test
        dev = sorted(path.parent.glob("dev-*.parquet")) if path.name.startswith("test-") else []
        return _parquet(path), [e for p in dev for e in _parquet(p)]
    return _csv(path, _subject_of(path, "_test")), []


def few_shot_prompt(example: Example, shots: Sequence[Example]) -> str:
    def block(e: Example, answer: str) -> str:
        options = "".join(f"\n{letter}. {text}" for letter, text in zip(LETTERS, e.choices, strict=True))
        return f"{e.question}{options}\nAnswer:{answer}"

    about = f" about {example.subject}" if example.subject else ""
    head = f"The following are multiple choice questions (with answers){about}.\n\n"
    return head + "".join(block(s, f" {s.target}\n\n") for s in shots) + block(example, "")


def zero_shot_prompt(example: Example, shots: Sequence[Example]) -> str:
    a, b, c, d = example.choices
    return ZERO_SHOT.format(question=example.question, A=a, B=b, C=c, D=d)


def extract_answer(text: str) -> str | None:
    """``Answer: X`` anywhere (simple-evals), else a letter opening the output (the few-shot format)."""
    match = _ANSWER.search(text) or _LEADING.match(text)
    return match.group(1).upper() if match else None


def task(path: Path | None, num_examples: int | str, shots: int, *, hub_timeout_s: float = hub.HUB_TIMEOUT_S) -> Task:
    """The mmlu task from ``path``, or from the hub's ``all`` test and dev splits when ``path`` is None."""
    if path is None:
        data = hub.fetch("mmlu", hub_timeout_s)
        rows, source = _parquet(data.paths[0]), data.source
        pool = [e for p in data.paths[1:] for e in _parquet(p)]
    else:
        (rows, pool), source = read(path), str(path)
    note = ""
    if not pool and shots > 0:  # no dev split: the first rows of each subject are the shots
        taken: dict[str, int] = {}
        keep = []
        for row in rows:
            if taken.get(row.subject, 0) < shots:
                taken[row.subject] = taken.get(row.subject, 0) + 1
                pool.append(row)
            else:
                keep.append(row)
        rows, note = keep, f" after {len(pool)} few-shot rows taken from it"
    if not rows:
        raise ConfigError("mmlu data", source, "has no rows left to score", "pass a larger file or fewer shots")
    zero = shots <= 0
    return Task(name="mmlu", examples=take(rows, num_examples, source, note), shot_pool=pool,
                prompt=zero_shot_prompt if zero else few_shot_prompt, extract=extract_answer,
                template="simple-evals-multichoice" if zero else "mmlu-few-shot",
                stop=() if zero else ("\n\n", "Question"), source=source)
